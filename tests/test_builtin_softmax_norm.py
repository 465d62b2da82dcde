"""The builtin provider's softmax and normalization kernels against eager ATen (CPU interpreter).

Softmax cases cover dim=-1 and inner dims, rows long enough to take the online (looping) path,
non-contiguous inputs and every float dtype. Norm cases cover layer norm with and without
affine parameters, long rows, and batch norm in training (running statistics updated in place)
and eval, forward and backward.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from builtin_support import compare, load_kernel, materialize_case, run_generated

from agent.providers.builtin import codegen, norm, softmax
from agent.providers.builtin.request import KernelRequest
from evaluator.testcase import parse_case

SOFTMAX_CASES: dict[str, list[str]] = {
    "_softmax.default": [
        "((T([7, 33], f32), -1, False), {})",
        "((T([7, 33], f16), 1, False), {})",
        "((T([3, 5, 700], bf16), -1, False), {})",
        "((T([3, 5, 7], f32), 1, False), {})",
        "((T([3, 50, 7], f16), 0, False), {})",
        "((T([3, 500, 7], f32), 1, False), {})",
        "((T([30, 47], f16, [1, 30]), -1, False), {})",
    ],
    "_log_softmax.default": [
        "((T([7, 33], f32), -1, False), {})",
        "((T([5, 1000], f16), 1, False), {})",
        "((T([3, 500, 7], bf16), 1, False), {})",
        "((T([30], f16), -1, False), {})",
    ],
    "_softmax_backward_data.default": [
        "((T([7, 33], f32), T([7, 33], f32), -1, torch.float32), {})",
        "((T([5, 1000], f16), T([5, 1000], f16), 1, torch.float16), {})",
        "((T([3, 300, 7], bf16), T([3, 300, 7], bf16), 1, torch.bfloat16), {})",
    ],
    "_log_softmax_backward_data.default": [
        "((T([7, 33], f32), T([7, 33], f32), -1, torch.float32), {})",
        "((T([5, 1000], f16), T([5, 1000], f16), 1, torch.float16), {})",
        "((T([3, 30, 7], bf16), T([3, 30, 7], bf16), 0, torch.bfloat16), {})",
        "((T([3, 300, 7], f32), T([3, 300, 7], f32), 1, torch.float32), {})",
    ],
}

LAYER_NORM_CASES = [
    "((T([7, 33], f32), [33], T([33], f32), T([33], f32), 1e-5), {})",
    "((T([4, 5, 48], f16), [48], T([48], f16), T([48], f16), 1e-12), {})",
    "((T([4, 5, 48], bf16), [5, 48], None, None, 1e-5), {})",
    "((T([3, 700], f32), [700], T([700], f32), None, 1e-5), {})",
    "((T([3, 7, 9], f32, [63, 1, 7]), [9], T([9], f32), T([9], f32), 1e-5), {})",
]

LAYER_NORM_BACKWARD_CASES = [
    "((T([7, 33], f32), T([7, 33], f32), [33], T([7, 1], f32), T([7, 1], f32), T([33], f32), T([33], f32), [True, True, True]), {})",
    "((T([4, 5, 48], f16), T([4, 5, 48], f16), [48], T([4, 5, 1], f16), T([4, 5, 1], f16), T([48], f16), T([48], f16), [True, True, True]), {})",
    "((T([33, 300], f32), T([33, 300], f32), [300], T([33, 1], f32), T([33, 1], f32), T([300], f32), T([300], f32), [True, False, True]), {})",
    "((T([40, 300], bf16), T([40, 300], bf16), [300], T([40, 1], bf16), T([40, 1], bf16), T([300], bf16), T([300], bf16), [False, True, True]), {})",
    "((T([9, 30], f64), T([9, 30], f64), [30], T([9, 1], f64), T([9, 1], f64), None, None, [True, False, False]), {})",
]

BATCH_NORM_CASES: dict[str, list[str]] = {
    "native_batch_norm.default": [
        "((T([4, 3, 5, 5], f32), T([3], f32), T([3], f32), T([3], f32), T([3], f32), True, 0.1, 1e-05), {})",
        "((T([3, 4, 40, 40], f16), T([4], f16), T([4], f16), T([4], f16), T([4], f16), True, 0.1, 1e-05), {})",
        "((T([64, 5], bf16), T([5], bf16), T([5], bf16), T([5], bf16), T([5], bf16), True, 0.1, 1e-05), {})",
        "((T([2, 6, 33], f32), None, None, T([6], f32), T([6], f32), False, 0.1, 1e-05), {})",
    ],
    "_native_batch_norm_legit.default": [
        "((T([4, 3, 5, 5], f32), T([3], f32), T([3], f32), T([3], f32), T([3], f32), True, 0.1, 1e-05), {})",
        "((T([4, 3, 5, 5], f16), None, None, T([3], f16), T([3], f16), False, 0.1, 1e-05), {})",
    ],
    "_native_batch_norm_legit_no_training.default": [
        "((T([4, 3, 5, 5], f16), T([3], f16), T([3], f16), T([3], f16), T([3], f16), 0.1, 1e-05), {})",
    ],
    "native_batch_norm_backward.default": [
        "((T([4, 3, 5, 5], f32), T([4, 3, 5, 5], f32), T([3], f32), T([3], f32), T([3], f32), T([3], f32), T([3], f32), True, 1e-05, [True, True, True]), {})",
        "((T([3, 4, 40, 40], f32), T([3, 4, 40, 40], f32), T([4], f32), None, None, T([4], f32), T([4], f32), True, 1e-05, [True, False, True]), {})",
        "((T([2, 6, 33], f32), T([2, 6, 33], f32), T([6], f32), T([6], f32), T([6], f32), None, None, False, 1e-05, [True, True, True]), {})",
    ],
}


def _write(module: Any, op: str, cases: list, variant: int = 0) -> str:
    request = KernelRequest(op, str(codegen.schema_of(op)), cases, variant)
    text = module.WRITERS[op](request)
    assert text is not None, f"the writer declined {op}"
    return text


@pytest.mark.parametrize("op", sorted(SOFTMAX_CASES))
def test_softmax_family_matches_eager_on_dims_long_rows_and_dtypes(op: str) -> None:
    cases = [parse_case(c) for c in SOFTMAX_CASES[op]]
    assert run_generated(op, _write(softmax, op, cases), cases) == []


def test_softmax_conservative_variant_matches_eager() -> None:
    op = "_softmax.default"
    cases = [parse_case(c) for c in SOFTMAX_CASES[op]]
    assert run_generated(op, _write(softmax, op, cases, variant=1), cases) == []


def test_layer_norm_matches_eager_with_and_without_affine() -> None:
    op = "native_layer_norm.default"
    cases = [parse_case(c) for c in LAYER_NORM_CASES]
    assert run_generated(op, _write(norm, op, cases), cases) == []


def _upcast(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in (torch.float16, torch.bfloat16):
        return value.float()
    if isinstance(value, list | tuple):
        return type(value)(_upcast(v) for v in value)
    return value


def test_layer_norm_backward_matches_fp32_eager_rounded_to_the_dtype() -> None:
    # eager on the CPU sums half-precision weight gradients in half precision; the kernel
    # accumulates in fp32, so the reference is eager on fp32 copies, rounded to the input dtype
    op = "native_layer_norm_backward.default"
    cases = [parse_case(c) for c in LAYER_NORM_BACKWARD_CASES]
    eager = torch.ops.aten.native_layer_norm_backward.default
    problems: list[str] = []
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(norm, op, cases), Path(tmp))
        for index, case in enumerate(cases):
            args, kwargs = materialize_case(op, case, torch.Generator().manual_seed(index))
            got = kernel(*args, **kwargs)
            want = eager(*_upcast(args), **kwargs)
            want = tuple(
                None if w is None else w.to(g.dtype if g is not None else w.dtype)
                for w, g in zip(want, got, strict=True)
            )
            problems += [f"case {index}: {p}" for p in compare("output", got, want)]
    assert problems == []


def _batch_norm_args(op: str, case, gen: torch.Generator):
    """Positive variances and inverse standard deviations, as batch norm always sees them."""
    args, kwargs = materialize_case(op, case, gen)
    args = list(args)
    if op == "native_batch_norm_backward.default":
        for i in (4, 6):  # running_var, save_invstd
            if isinstance(args[i], torch.Tensor):
                args[i] = args[i].abs() + 0.5
    else:
        if isinstance(args[4], torch.Tensor):  # running_var
            args[4] = args[4].abs() + 0.5
    return tuple(args), kwargs


@pytest.mark.parametrize("op", sorted(BATCH_NORM_CASES))
def test_batch_norm_matches_eager_in_training_and_eval(op: str) -> None:
    cases = [parse_case(c) for c in BATCH_NORM_CASES[op]]
    assert run_generated(op, _write(norm, op, cases), cases, make_args=_batch_norm_args) == []


def test_batch_norm_training_updates_running_stats_like_eager() -> None:
    op = "native_batch_norm.default"
    cases = [parse_case(BATCH_NORM_CASES[op][1])]
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(norm, op, cases), Path(tmp))
        args, _ = _batch_norm_args(op, cases[0], torch.Generator().manual_seed(0))
        mine = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        theirs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        kernel(*mine)
        torch.ops.aten.native_batch_norm.default(*theirs)
    assert compare("running_mean", mine[3], theirs[3]) == []
    assert compare("running_var", mine[4], theirs[4]) == []


def test_norm_writer_declines_integer_inputs() -> None:
    op = "native_layer_norm.default"
    cases = [parse_case("((T([4, 4], i64), [4], None, None, 1e-5), {})")]
    request = KernelRequest(op, str(codegen.schema_of(op)), cases)
    assert norm.WRITERS[op](request) is None


def test_every_claimed_overload_exists_in_torch() -> None:
    for op in [*softmax.WRITERS, *norm.WRITERS]:
        codegen.schema_of(op)
