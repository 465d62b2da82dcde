"""One test's calls and checks in the verifier, and the ghost replay after all tests.

`run_test` calls the kernel on seed A, seed B, then seed A again, each on fresh copies (through
the runner, or in this process under its guards), and checks in this order: the call's flags and
errors, input mutation, values (against eager, under the strict profile also against the op in
float64), staleness (B answered with A's result, or an earlier correct result overwritten) and
determinism. `ghost_replay` calls once more with every Triton launch a no-op: a right answer then
was not computed by the launches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from evaluator.cases.testcase import TestCase
from evaluator.judge import checks
from evaluator.judge.calling import MAX_MSG, guarded_call
from evaluator.judge.outputs import output_flags
from evaluator.judge.references import Prepared, Seeded
from evaluator.judge.runner import CallReply
from evaluator.judge.tensor_trees import (
    clone_tree,
    leaf_values,
    named_tensors,
    poison,
    poison_allocator,
    storage_bytes,
)
from evaluator.results import REJECT_FLAGS, Flag, TestResult, flag_name

if TYPE_CHECKING:
    from evaluator.judge.verifier import Judge


def invoke(
    judge: Judge, fn: Any, args: tuple, kwargs: dict, run: Seeded, ghost: bool, first: bool
) -> CallReply:
    """One call of the kernel on (args, kwargs): through the runner, or here under this
    process's guards. With `ghost`, every Triton launch is a no-op."""
    if judge.runner is not None:
        cap = 2 * (storage_bytes(args) + storage_bytes(list(kwargs.values())))
        cap += 8 * storage_bytes([run.ref_out]) + (1 << 20)
        return judge.runner.call(args, kwargs, ghost=ghost, first=first, reply_cap_bytes=cap)
    assert judge.inst is not None
    judge.inst.launches.ghost = ghost
    if ghost:
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        out, flags, err_type, err_msg, n = guarded_call(
            judge.inst, fn, judge.op, args, kwargs, judge.device
        )
    finally:
        judge.inst.launches.ghost = False
        if ghost:
            torch.use_deterministic_algorithms(False)
    return CallReply(out, (args, kwargs), flags, n, err_type, err_msg)


def call(
    judge: Judge, fn: Any, run: Seeded, ghost: bool = False, first: bool = False
) -> tuple[Any, list[str], str | None, str | None, Any]:
    """Call the kernel once on fresh copies. Returns (out, flags, error_type, error_msg, inputs)."""
    args, kwargs = clone_tree(run.args), clone_tree(run.kwargs)
    for name in judge.mut_names:
        if name in kwargs and name != "self":
            poison(kwargs[name])
    if judge.runner is None:  # a split-off runner has its own allocator
        poison_allocator(run.ref_out, judge.device)
    reply = invoke(judge, fn, args, kwargs, run, ghost, first)
    flags = list(reply.flags)
    if reply.error_type is None:
        if reply.launches == 0 and not outputs_empty(judge, run):
            flags.append(Flag.NO_TRITON_LAUNCH)
        flags += output_flags(reply.out, run.ref_out)
    return reply.out, flags, reply.error_type, reply.error_msg, reply.inputs


def outputs_empty(judge: Judge, run: Seeded) -> bool:
    """True when every output eager produced (returned and written in place) has zero elements:
    such a call has nothing to compute, so it needs no launch. Judged on eager's outputs, which
    the kernel cannot influence; a result with a non-tensor value is never exempt."""
    outs: list[Any] = [run.ref_out]
    outs += [run.ref_args[i] for i in sorted(judge.mut_pos) if i < len(run.ref_args)]
    outs += [run.ref_kwargs[n] for n in sorted(judge.mut_names) if n in run.ref_kwargs]
    leaves = leaf_values(outs)
    return bool(leaves) and all(isinstance(t, torch.Tensor) and t.numel() == 0 for t in leaves)


def mutation_flags(judge: Judge, run: Seeded, inputs: tuple[tuple, dict]) -> list[str]:
    """Inputs must end as eager left them: untouched (bitwise) where eager did not write,
    and equal within tolerance where eager writes without saying so in the schema
    (`native_batch_norm`'s running statistics)."""
    args, kwargs = inputs
    pairs: list[tuple[str, Any, Any, Any]] = [
        (f"arg{i}", a, p, r)
        for i, (a, p, r) in enumerate(zip(args, run.args, run.ref_args, strict=False))
        if i not in judge.mut_pos
    ]
    pairs += [
        (name, v, run.kwargs.get(name), run.ref_kwargs.get(name))
        for name, v in kwargs.items()
        if name not in judge.mut_names
    ]
    flags = []
    for label, value, pristine, after_eager in pairs:
        for (where, t), (_, pt), (_, rt) in zip(
            named_tensors(value, label),
            named_tensors(pristine, ""),
            named_tensors(after_eager, ""),
            strict=False,
        ):
            if checks.bitwise_equal(rt, pt):
                if not checks.bitwise_equal(t, pt):
                    flags.append(f"{Flag.INPUT_MUTATED}:{where}")
            elif not checks.compare(t, rt, judge.cfg.correctness, where).ok:
                flags.append(f"{Flag.WRONG_VALUES}:{where} (eager updates it in place)")
    return flags


def matches_eager(
    judge: Judge, out: Any, ref_out: Any, args: tuple, kwargs: dict
) -> checks.Comparison:
    """`out` against eager's `ref_out` on pristine inputs (args, kwargs). Under the strict
    profile a value mismatch in a 16-bit float output is measured again against the op run in
    float64 on the same inputs (`checks.compare`'s `exact`): the kernel passes where it is no
    farther from that than the tolerance plus twice eager's own error."""
    cmp = checks.compare(out, ref_out, judge.cfg.correctness)
    if (
        cmp.ok
        or cmp.flags != [Flag.WRONG_VALUES]
        or judge.cfg.correctness.tolerance_profile != "strict"
        or not any(t.dtype in checks.SHORT_FLOATS for t in checks.tensor_leaves(ref_out))
    ):
        return cmp
    try:
        exact = judge.packet(*checks.widen_to_f64(args), **checks.widen_to_f64(kwargs))
        judge.sync()
    except Exception:  # noqa: BLE001 - no float64 kernel for this op/device: eager decides
        return cmp
    wide = checks.compare(out, ref_out, judge.cfg.correctness, exact=exact)
    return wide if wide.ok else cmp


def check_result(
    judge: Judge, out: Any, run: Seeded, inputs: tuple[tuple, dict]
) -> checks.Comparison:
    cmp = matches_eager(judge, out, run.ref_out, run.args, run.kwargs)
    args, kwargs = inputs
    for i in sorted(judge.mut_pos):
        if i < len(args):
            cmp = cmp.merge(
                checks.compare(args[i], run.ref_args[i], judge.cfg.correctness, f"mutated arg{i}")
            )
    for name in sorted(judge.mut_names):
        if name in kwargs:
            cmp = cmp.merge(
                checks.compare(
                    kwargs[name], run.ref_kwargs[name], judge.cfg.correctness, f"out {name}"
                )
            )
    return cmp


def f64_note(judge: Judge, out: Any, run: Seeded) -> str:
    """For a failed comparison: how far the kernel and eager each are from the same op run in
    float64 (a diagnostic; the verdict is unchanged). Empty when the op has no float64 form."""
    try:
        args, kwargs = checks.widen_to_f64(run.args), checks.widen_to_f64(run.kwargs)
        exact = judge.packet(*args, **kwargs)
        judge.sync()
        errs = checks.errors_vs_f64(out, run.ref_out, exact)
    except Exception:  # noqa: BLE001 - no float64 kernel for this op/device: no note
        return ""
    if errs is None:
        return ""
    ours, eager = errs
    closer = "closer to it than eager" if ours < eager else "farther from it than eager"
    return (
        f" [float64 run of the op: kernel off by up to {ours:.3g}, eager by {eager:.3g}:"
        f" the kernel is {closer}]"
    )


def run_test(judge: Judge, fn: Any, item: Prepared) -> TestResult:
    args_text = item.case.serialize()
    result = TestResult(args=args_text, passed=False)
    schedule = list(range(len(item.runs))) + [0]  # seeds A, B, ..., then A again
    # Correct outputs of earlier calls and their bitwise snapshots, kept alive: if a later call
    # changes one, the kernel reuses its result buffer. (A wrong output's memory is garbage
    # whose changes prove nothing, so only correct ones are watched.)
    kept: list[tuple[Any, Any]] = []
    first_ok: bool | None = None
    messages: list[str] = []
    for step, k in enumerate(schedule):
        run = item.runs[k]
        out, flags, err_type, err_msg, inputs = call(judge, fn, run, first=step == 0)
        for f in flags:
            if f not in result.flags:
                result.flags.append(f)
        if err_type is not None:
            result.error_type, result.error_msg = (
                err_type,
                f"call {step + 1} (seed {run.seed}): {err_msg}",
            )
            return result
        for f in mutation_flags(judge, run, inputs):
            if f.startswith(Flag.WRONG_VALUES):
                messages.append(
                    f"call {step + 1} (seed {run.seed}): {f.split(':', 1)[1]} differs from eager"
                )
                f = Flag.WRONG_VALUES
            if f not in result.flags:
                result.flags.append(f)
        cmp = check_result(judge, out, run, inputs)
        _update_errors(result, cmp)
        repeat = step == len(schedule) - 1
        if not cmp.ok:
            for f in cmp.flags:
                if f not in result.flags and not repeat:
                    result.flags.append(f)
            if (
                step > 0
                and not repeat
                and checks.compare(out, item.runs[0].ref_out, judge.cfg.correctness).ok
            ):
                result.flags.append(Flag.STALE_RESULT)
                messages.append(
                    f"call {step + 1} (seed {run.seed}) returned the answer for seed {item.runs[0].seed}: a cached result"
                )
            elif repeat and first_ok:
                result.flags.append(Flag.NONDETERMINISTIC)
                messages.append(
                    f"call {step + 1} repeats call 1 on the same input but disagrees with eager ({cmp.message}) while call 1 agreed"
                )
            else:
                note = f64_note(judge, out, run) if not messages else ""
                messages.append(f"call {step + 1} (seed {run.seed}): {cmp.message}{note}")
        if cmp.ok and Flag.WITHIN_EAGER_ERROR in cmp.flags:
            if Flag.WITHIN_EAGER_ERROR not in result.flags:
                result.flags.append(Flag.WITHIN_EAGER_ERROR)
        if step == 0:
            first_ok = cmp.ok
        for prev_out, prev_bits in kept:
            if (
                not checks.bitwise_equal(prev_out, prev_bits)
                and Flag.STALE_RESULT not in result.flags
            ):
                result.flags.append(Flag.STALE_RESULT)
                messages.append(
                    f"call {step + 1} overwrote the result of an earlier call: the kernel reuses its output buffer"
                )
        if cmp.ok:
            kept.append((out, checks.snapshot(out)))
    result.passed = not messages and not _has_reject_or_error(result.flags)
    if messages:
        result.error_type = "WrongResult" if not _has_reject_or_error(result.flags) else "Rejected"
        result.error_msg = "; ".join(messages)[:MAX_MSG]
    elif not result.passed:
        result.error_type = "Rejected"
        result.error_msg = "flags: " + ", ".join(result.flags)
    if not result.passed and judge.device == "cpu" and _has_bf16(item.case):
        result.flags.append(Flag.INTERPRETER_BF16)
    return result


def ghost_eligible(judge: Judge, run: Seeded) -> bool:
    """Whether a right answer with every launch a no-op would prove compute outside Triton:
    not when an expected output is empty, constant (fills may make it) or equal to an input
    (a copy may make it), or when the op returns no tensor."""
    outs: list[Any] = [run.ref_out]
    outs += [run.ref_args[i] for i in sorted(judge.mut_pos) if i < len(run.ref_args)]
    outs += [run.ref_kwargs[n] for n in sorted(judge.mut_names) if n in run.ref_kwargs]
    leaves = leaf_values(outs)
    if not leaves or not all(isinstance(t, torch.Tensor) and t.numel() > 1 for t in leaves):
        return False
    inputs = [t for _, t in named_tensors([list(run.args), list(run.kwargs.values())], "")]
    for t in leaves:
        flat = t.reshape(-1)
        if bool((flat == flat[0]).all()) or bool(torch.isnan(flat).all()):
            return False
        if any(
            i.dtype == t.dtype and i.shape == t.shape and checks.bitwise_equal(i, t) for i in inputs
        ):
            return False
    return True


def ghost_replay(
    judge: Judge, fn: Any, prepared: list[Prepared], results: list[TestResult]
) -> list[str]:
    """One extra call per operator, on its smallest passing test where a ghost result means
    something: every Triton launch a no-op and fresh memory poisoned. If the result still
    matches eager, the launches did not compute it. Returns operator flags."""
    passing = [item for item, res in zip(prepared, results, strict=True) if res.passed]
    for item in sorted(passing, key=lambda it: it.case.total_numel()):
        run = item.runs[min(1, len(item.runs) - 1)]
        if not ghost_eligible(judge, run):
            continue
        out, flags, err_type, _, inputs = call(judge, fn, run, ghost=True, first=True)
        found = [f for f in flags if flag_name(f) in REJECT_FLAGS]
        if err_type is None and check_result(judge, out, run, inputs).ok:
            found.append(f"{Flag.COMPUTED_OUTSIDE_TRITON}:{item.case.serialize()[:200]}")
        return found  # an error is fine: a kernel may fail on what skipped launches left
    return []


def _update_errors(result: TestResult, cmp: checks.Comparison) -> None:
    for key in ("max_abs_error", "max_rel_error"):
        new = getattr(cmp, key)
        old = getattr(result, key)
        if new is not None and (old is None or new > old):
            setattr(result, key, new)


def _has_reject_or_error(flags: list[str]) -> bool:
    from evaluator.results import ERROR_FLAGS, REJECT_FLAGS, flag_name

    return any(flag_name(f) in REJECT_FLAGS | ERROR_FLAGS for f in flags)


def _has_bf16(case: TestCase) -> bool:
    return any(s.dtype == torch.bfloat16 for s in case.tensor_specs())
