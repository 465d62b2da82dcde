"""The verifier's cases before any kernel exists: inputs drawn per seed and eager references.

`prepare` materialises each case for every seed and runs eager on a pristine copy (a case too big
for the CPU, or one eager cannot run, is kept as skipped with its reason). It runs before the
kernel is imported, so nothing the kernel does can change a reference. `warm_checks` loads the
comparison's CUDA kernels while the runner imports the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evaluator.cases.inputs import materialize
from evaluator.cases.testcase import TestCase
from evaluator.judge import checks
from evaluator.judge.calling import is_cuda_error, short_error
from evaluator.judge.tensor_trees import clone_tree
from evaluator.results import Flag

if TYPE_CHECKING:
    from evaluator.judge.verifier import Judge


@dataclass
class Seeded:
    seed: int
    args: tuple
    kwargs: dict
    ref_args: tuple  # reference inputs after eager ran (mutated ones show the expected state)
    ref_kwargs: dict
    ref_out: Any


@dataclass
class Prepared:
    case: TestCase
    runs: list[Seeded] = field(default_factory=list)
    skip_reason: str | None = None
    skip_flag: str | None = None


def prepare(judge: Judge, cases: list[TestCase]) -> list[Prepared]:
    prepared = []
    base_seed = judge.cfg.correctness.seed
    for i, case in enumerate(cases):
        item = Prepared(case)
        if judge.device == "cpu" and case.total_numel() > judge.cfg.cpu.max_case_numel:
            item.skip_reason = (
                f"skipped on the CPU: {case.total_numel()} elements > eval.cpu.max_case_numel "
                f"= {judge.cfg.cpu.max_case_numel} (run on a GPU to test it)"
            )
            item.skip_flag = Flag.SKIPPED_SIZE
            prepared.append(item)
            continue
        try:
            for k in range(judge.cfg.correctness.num_seeds):
                seed = base_seed + 7919 * i + 104729 * k
                args, kwargs = materialize(
                    judge.op,
                    case,
                    judge.device,
                    seed,
                    profile=judge.cfg.correctness.tolerance_profile,
                )
                ref_args, ref_kwargs = clone_tree(args), clone_tree(kwargs)
                ref_out = judge.packet(*ref_args, **ref_kwargs)
                item.runs.append(Seeded(seed, args, kwargs, ref_args, ref_kwargs, ref_out))
            judge.sync()
        except Exception as exc:  # the case cannot run eagerly here: not the kernel's fault
            if judge.device == "cuda" and is_cuda_error(exc):
                raise
            item.runs = []
            item.skip_reason = f"eager reference failed on {judge.device}: {type(exc).__name__}: {short_error(exc)}"
        prepared.append(item)
    return prepared


def warm_checks(judge: Judge, prepared: list[Prepared]) -> None:
    """Run the comparisons once on each output dtype's smallest reference against itself, while
    the runner makes its context and imports the kernel: the first test then does not pay the
    loading of the comparison's CUDA kernels (about 0.2 s on an H200). Nothing here is kept."""
    smallest: dict[str, Seeded] = {}
    for item in sorted(prepared, key=lambda it: it.case.total_numel()):
        if item.skip_reason is not None or not item.runs:
            continue
        run = item.runs[0]
        outs = run.ref_out if isinstance(run.ref_out, list | tuple) else [run.ref_out]
        key = ",".join(str(getattr(t, "dtype", type(t).__name__)) for t in outs)
        smallest.setdefault(key, run)
    try:
        for run in smallest.values():
            checks.compare(run.ref_out, run.ref_out, judge.cfg.correctness)
            checks.bitwise_equal(run.ref_out, run.ref_out)
        judge.sync()
    except Exception:  # noqa: BLE001 - a warm-up that fails leaves the first test to pay it
        pass
