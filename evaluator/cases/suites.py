"""Which operators an evaluation tests, and with which cases.

Contract:
    select_operators(suite="torchbench", ops=None, num_operators=None, trace_file=None,
                     max_cases_per_op=10) -> Selection(suite, ops=[OpCases(op, cases)], excluded, errors)
    cpu_runnable(case, max_case_numel) -> bool

Sources: `smoke` (evaluator/data/smoke_trace.txt, ~8 common ops, small shapes), `torchbench`
(evaluator/data/torchbench_trace.txt, shapes from real models), `opinfo` (samples of PyTorch's OpInfo
database that dispatch exactly one ATen overload; see `evaluator.cases.opinfo_suite`), or `trace_file`, any
BackendBench-format trace, which takes precedence over `suite`.

Ranking ("most used" for `num_operators`): number of models that use the operator (from the trace's
JSON sidecar `X.json` next to `X.txt`, when present), then total trace count, then name, so the order
is deterministic. OpInfo cases are synthetic (count 0) and rank by name.

Per operator, duplicate cases are merged (counts added), then ordered most frequent first, then
largest (total elements of all tensors), then file order, and capped at `max_cases_per_op`.
`prefer(case)` (optional) ranks the cases it accepts first, e.g. the CPU-runnable ones on a CPU.

Exclusions: `EXCLUDED_OPS` maps exact overload names to the reason; an excluded operator present in
the source (and matching `ops`, when given) is returned in `Selection.excluded`, never selected.

CPU size rule (`cpu_runnable`): on a machine without a GPU, kernels run in Triton's interpreter,
which is slow per element; a case is CPU-runnable when the total number of elements of all its input
tensors (`TestCase.total_numel()`, strides ignored, outputs not counted) is at most
`max_case_numel` (`EvalConfig.cpu.max_case_numel`, default 2**18). Other cases are skipped on the
CPU and counted as skipped, never as passed.

Bad input (unknown suite, unknown operator, missing or empty trace file) raises `UsageError` with one
line saying what to fix; malformed trace lines are reported in `Selection.errors` as
`file:line: reason` and the rest of the file still loads.
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.cases.testcase import TestCase, load_trace
from evaluator.errors import UsageError
from evaluator.naming import base_name, normalize_op

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
SUITE_FILES: dict[str, Path] = {
    "smoke": DATA_DIR / "smoke_trace.txt",
    "torchbench": DATA_DIR / "torchbench_trace.txt",
}
SUITES: tuple[str, ...] = ("smoke", "torchbench", "opinfo")

_RANDOM = "random output: no single right answer to compare against"
_CREATE = "tensor creation from sizes only: nothing to compute from inputs"
_UNINIT = "returns uninitialised memory: no defined values to compare"
_VIEW = "view: aliases its input's memory, which a kernel launch cannot return; nothing to compute"
_META = "metadata or bookkeeping only: no tensor values are computed"
_DEVICE_LIB = (
    "device-specific library kernel (cuDNN / memory-efficient attention): the overload exists only "
    "on some devices and returns implementation-defined state (RNG seeds, saved statistics layout)"
)

# Exact overload name -> why the evaluator does not test it.
EXCLUDED_OPS: dict[str, str] = {
    **dict.fromkeys(
        """_scaled_dot_product_cudnn_attention.default
        _scaled_dot_product_cudnn_attention_backward.default
        _scaled_dot_product_efficient_attention.default
        _scaled_dot_product_efficient_attention_backward.default
        _scaled_dot_product_flash_attention.default
        _scaled_dot_product_flash_attention_backward.default
        _scaled_dot_product_flash_attention_for_cpu.default
        _scaled_dot_product_flash_attention_for_cpu_backward.default
        cudnn_batch_norm.default cudnn_batch_norm_backward.default
        miopen_batch_norm.default""".split(),
        _DEVICE_LIB,
    ),
    **dict.fromkeys(
        """bernoulli.default bernoulli.p bernoulli_.float bernoulli_.Tensor dropout.default
        native_dropout.default feature_dropout.default alpha_dropout.default _fused_dropout.default
        rand.default rand_like.default randn.default randn_like.default randint.default randint.low
        randint_like.default randint_like.low_dtype randint_like.Tensor randperm.default
        normal.Tensor_float normal.float_Tensor normal.Tensor_Tensor normal.float_float
        normal_.default normal_functional.default uniform.default uniform_.default exponential_.default
        geometric_.default cauchy_.default log_normal_.default random_.default random_.from
        random_.to multinomial.default poisson.default binomial.default _standard_gamma.default
        _sample_dirichlet.default rrelu_with_noise.default rrelu_with_noise_functional.default
        rrelu.default""".split(),
        _RANDOM,
    ),
    **dict.fromkeys(
        """zeros.default zeros_like.default ones.default ones_like.default full.default
        full_like.default arange.default arange.start arange.start_step scalar_tensor.default
        new_zeros.default new_ones.default new_full.default linspace.default logspace.default
        eye.default eye.m tril_indices.default triu_indices.default""".split(),
        _CREATE,
    ),
    **dict.fromkeys(
        """empty.memory_format empty_strided.default empty_like.default new_empty.default
        new_empty_strided.default empty_permuted.default""".split(),
        _UNINIT,
    ),
    **dict.fromkeys(
        """view.default _unsafe_view.default _reshape_alias.default view_as_real.default
        view_as_complex.default expand.default t.default transpose.int permute.default
        as_strided.default unsqueeze.default squeeze.default squeeze.dim squeeze.dims
        slice.Tensor select.int narrow.default diagonal.default unfold.default alias.default
        detach.default lift_fresh.default split.Tensor split_with_sizes.default unbind.int
        view.dtype""".split(),
        _VIEW,
    ),
    **dict.fromkeys(
        """t_.default transpose_.default squeeze_.dim unsqueeze_.default as_strided_.default
        resize_.default set_.source_Storage set_.source_Tensor sym_size.int sym_stride.int
        sym_numel.default sym_storage_offset.default is_same_size.default
        _local_scalar_dense.default _assert_async.default _assert_async.msg
        _assert_tensor_metadata.default""".split(),
        _META,
    ),
}


@dataclass
class OpCases:
    """One selected operator and its (capped, ranked) cases; `count`/`models` are its usage."""

    op: str
    cases: list[TestCase]
    count: int = 0
    models: int = 0
    # hidden cases (evaluator.cases.hidden_cases): for the agent's rounds, and for the final evaluation
    hidden_round: list[TestCase] = field(default_factory=list)
    hidden_final: list[TestCase] = field(default_factory=list)


@dataclass
class Selection:
    suite: str
    ops: list[OpCases]
    excluded: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    num_models: int = 0  # distinct models behind the source trace (0 = unknown)

    def summary(self) -> str:
        """One line for reports: operator, case and model counts."""
        cases = sum(len(oc.cases) for oc in self.ops)
        models = f", traced from {self.num_models} models" if self.num_models else ""
        return (
            f"{self.suite}: {len(self.ops)} operators, {cases} test cases"
            f"{models}; {len(self.excluded)} operators excluded"
        )


def cpu_runnable(case: TestCase, max_case_numel: int) -> bool:
    """The documented CPU size rule: total input elements of the case <= max_case_numel."""
    return case.total_numel() <= max_case_numel


def select_operators(
    suite: str | None = "torchbench",
    ops: list[str] | None = None,
    num_operators: int | None = None,
    trace_file: str | Path | None = None,
    max_cases_per_op: int = 10,
    prefer: Callable[[TestCase], bool] | None = None,
    hidden_per_set: int = 0,
    hidden_salt: str = "",
) -> Selection:
    """Operators to evaluate and their cases; raises UsageError on bad input (see module doc).
    With `hidden_per_set`, each operator also gets two sets of hidden cases
    (`evaluator.cases.hidden_cases`), shuffled by `hidden_salt`."""
    if num_operators is not None and num_operators < 1:
        raise UsageError(f"--num-operators must be at least 1 (got {num_operators}).")
    if max_cases_per_op < 1:
        raise UsageError(f"max_cases_per_op must be at least 1 (got {max_cases_per_op}).")
    name, cases, models, errors, num_models = _load_source(suite, trace_file)

    available = [op for op in cases if op not in EXCLUDED_OPS]
    if not available:
        raise UsageError(
            f"{name} has no operators left to evaluate (all are excluded): pick another suite or trace."
        )
    wanted = _match_ops(ops, list(cases), name) if ops else None
    excluded = [
        (op, EXCLUDED_OPS[op])
        for op in sorted(cases)
        if op in EXCLUDED_OPS and (wanted is None or op in wanted)
    ]
    chosen = [op for op in available if wanted is None or op in wanted]
    if not chosen:
        op, why = excluded[0]
        raise UsageError(
            f"operator {op} is excluded from evaluation ({why}): pick another with --ops."
        )

    counts = {op: sum(c.count for c in cases[op]) for op in chosen}
    ranked = sorted(chosen, key=lambda op: (-models.get(op, 0), -counts[op], op))
    if num_operators is not None:
        ranked = ranked[:num_operators]
    unknown = unknown_overloads(ranked)
    if unknown:
        errors = [
            *errors,
            f"{name}: {len(unknown)} operator(s) are not ATen operators of this torch build: "
            f"{', '.join(unknown)}; they cannot be tested (check the spelling)",
        ]
    selected = []
    for op in ranked:
        every = rank_cases(cases[op], len(cases[op]), prefer)
        oc = OpCases(
            op=op, cases=every[:max_cases_per_op], count=counts[op], models=models.get(op, 0)
        )
        if hidden_per_set > 0:
            from evaluator.cases.hidden_cases import hidden_sets

            spare = every[max_cases_per_op:]
            if prefer is not None:
                spare = [c for c in spare if prefer(c)]
            oc.hidden_round, oc.hidden_final = hidden_sets(
                op, oc.cases, spare, hidden_per_set, hidden_salt
            )
        selected.append(oc)
    return Selection(
        suite=name, ops=selected, excluded=excluded, errors=errors, num_models=num_models
    )


def unknown_overloads(ops: list[str]) -> list[str]:
    """The overloads (`add.Tensor`) in `ops` that this torch build has no ATen operator for."""
    import torch

    unknown = []
    for op in ops:
        base, _, overload = op.partition(".")
        packet = getattr(torch.ops.aten, base, None) if base.isidentifier() else None
        try:
            known = packet is not None and overload in packet.overloads()
        except (AttributeError, RuntimeError):
            known = False
        if not known:
            unknown.append(op)
    return unknown


def rank_cases(
    cases: list[TestCase], limit: int, prefer: Callable[[TestCase], bool] | None = None
) -> list[TestCase]:
    """Merge duplicates (adding counts), order preferred, most frequent, largest first; keep `limit`."""
    merged: dict[str, TestCase] = {}
    for case in cases:
        key = case.serialize()
        if key in merged:
            merged[key].count += case.count
        else:
            merged[key] = TestCase(case.args, case.kwargs, case.count, case.source)
    order = {key: i for i, key in enumerate(merged)}
    ranked = sorted(
        merged.items(),
        key=lambda kv: (
            prefer is not None and not prefer(kv[1]),
            -kv[1].count,
            -kv[1].total_numel(),
            order[kv[0]],
        ),
    )
    return [case for _, case in ranked[:limit]]


# ---------------------------------------------------------------- sources


def _load_source(
    suite: str | None, trace_file: str | Path | None
) -> tuple[str, dict[str, list[TestCase]], dict[str, int], list[str], int]:
    """(suite name, cases per op, models per op, errors, distinct models) of the source."""
    if trace_file is not None:
        path = Path(trace_file)
        return (f"trace:{path}", *_load_trace_file(path, "--trace-file"))
    if suite is None:
        raise UsageError(
            "no suite given: pass --suite (smoke, torchbench, opinfo) or --trace-file PATH."
        )
    if suite == "opinfo":
        from evaluator.cases.opinfo_suite import (
            opinfo_cases,  # slow import (~6 s): only when asked for
        )

        cases = opinfo_cases()
        if not cases:
            raise UsageError("the opinfo suite found no usable operators in this torch build.")
        return suite, cases, {}, [], 0
    if suite not in SUITE_FILES:
        raise UsageError(
            f"unknown suite {suite!r}: choose one of {', '.join(SUITES)}, or pass --trace-file PATH."
        )
    return (suite, *_load_trace_file(SUITE_FILES[suite], f"the {suite} suite"))


def _load_trace_file(
    path: Path, what: str
) -> tuple[dict[str, list[TestCase]], dict[str, int], list[str], int]:
    if not path.is_file():
        raise UsageError(
            f"trace file '{path}' does not exist: pass an existing BackendBench trace to {what}."
        )
    try:
        trace = load_trace(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"cannot read trace file '{path}' ({exc.__class__.__name__}): pass a UTF-8 text trace."
        ) from None
    errors = list(trace.errors)
    cases: dict[str, list[TestCase]] = {}
    for op, op_cases in trace.cases.items():
        if op_cases:
            cases[op] = op_cases
        else:
            errors.append(f"{path}: operator {op} has no valid cases; skipped")
    if not cases:
        first = f" (first problem: {errors[0]})" if errors else ""
        raise UsageError(
            f"trace file '{path}' has no valid operators{first}: fix the file or pass another."
        )
    models, num_models, sidecar_errors = _sidecar_models(path)
    return cases, models, errors + sidecar_errors, num_models


def _sidecar_models(path: Path) -> tuple[dict[str, int], int, list[str]]:
    """Models per op and distinct models from `X.json` next to `X.txt` (the tracer's sidecar)."""
    sidecar = path.with_suffix(".json")
    if not sidecar.is_file():
        return {}, 0, []
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
        per_op = {normalize_op(op): len(info.get("models", [])) for op, info in data["ops"].items()}
        return per_op, len(data.get("models", [])), []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return (
            {},
            0,
            [f"{sidecar}: unreadable sidecar ({exc.__class__.__name__}); ranking by count only"],
        )


# ---------------------------------------------------------------- --ops


def _match_ops(requested: list[str], present: list[str], source: str) -> set[str]:
    """Exact overloads (`add.Tensor`, `aten.add.Tensor`) or base names (`add` = all its overloads)."""
    chosen: set[str] = set()
    bases = sorted({base_name(op) for op in present})
    for raw in (part for entry in requested for part in entry.split(",")):
        name = raw.strip()
        for prefix in ("aten::", "aten."):
            name = name.removeprefix(prefix)
        if not name:
            continue
        if "." in name:
            op = normalize_op(name)
            hits = [op] if op in present else []
        else:
            hits = [op for op in present if base_name(op) == name]
        if not hits:
            close = difflib.get_close_matches(name, sorted(present) + bases, n=4, cutoff=0.6)
            hint = f"did you mean {', '.join(close)}?" if close else "check the spelling"
            raise UsageError(f"unknown operator {raw.strip()!r} for {source}: {hint} (see --ops).")
        chosen.update(hits)
    if not chosen:
        raise UsageError("--ops names no operator: pass e.g. --ops add.Tensor,relu.")
    return chosen
