"""The builtin provider's softmax and normalization kernels against eager ATen (CPU interpreter).

Softmax cases cover dim=-1 and inner dims, rows long enough to take the persistent long-row
kernel (odd lengths, -inf entries, half_to_float, every mode), non-contiguous inputs and every
float dtype. Norm cases cover layer norm with and without
affine parameters, long rows, and batch norm in training (running statistics updated in place)
and eval, forward and backward.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch
from builtin_support import (
    assert_compiles_for_sm90,
    compare,
    compare_with_fp32_eager,
    load_kernel,
    materialize_case,
    run_generated,
    sm90_load_order,
)

from agent.providers.builtin import codegen, norm, softmax
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import parse_case

SOFTMAX_CASES: dict[str, list[str]] = {
    "_softmax.default": [
        "((T([7, 33], f32), -1, False), {})",
        "((T([7, 33], f16), 1, False), {})",
        "((T([3, 5, 700], bf16), -1, False), {})",
        "((T([3, 5, 7], f32), 1, False), {})",
        "((T([3, 50, 7], f16), 0, False), {})",
        "((T([3, 500, 7], f32), 1, False), {})",
        "((T([30, 47], f16, [1, 30]), -1, False), {})",
        "((T([2, 3, 49, 49], f16), -1, False), {})",
        "((T([300, 8], f32), -1, False), {})",
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
        "((T([4, 3000], bf16), T([4, 3000], bf16), 1, torch.bfloat16), {})",
    ],
}

# Rows longer than the interpreter's one-pass limit (256) take the persistent long-row kernel
# (3 programs on the interpreter): odd lengths (rows start unaligned: head and tail edges around
# a vectorized body), row counts that are not a multiple of the grid, one row, a length that is a
# multiple of the alignment, a body of several loop steps (1024 each) and of less than one.
LONG_ROW_CASES: dict[str, list[str]] = {
    "_softmax.default": [
        "((T([7, 1001], f32), -1, False), {})",
        "((T([5, 333], f16), 1, False), {})",
        "((T([2, 3, 2049], bf16), -1, False), {})",
        "((T([1, 4099], f64), -1, False), {})",
    ],
    "_log_softmax.default": [
        "((T([7, 1001], f32), -1, False), {})",
        "((T([4, 512], f16), 1, False), {})",
        "((T([5, 2049], bf16), 1, False), {})",
        "((T([3, 3000], f64), 1, False), {})",
    ],
    "_softmax_backward_data.default": [
        "((T([7, 1001], f32), T([7, 1001], f32), -1, torch.float32), {})",
        "((T([5, 333], f16), T([5, 333], f16), 1, torch.float16), {})",
        "((T([4, 2049], bf16), T([4, 2049], bf16), 1, torch.bfloat16), {})",
    ],
    "_log_softmax_backward_data.default": [
        "((T([7, 1001], f32), T([7, 1001], f32), -1, torch.float32), {})",
        "((T([5, 257], bf16), T([5, 257], bf16), 1, torch.bfloat16), {})",
        "((T([4, 1024], f16), T([4, 1024], f16), 1, torch.float16), {})",
        "((T([2, 3, 4099], f64), T([2, 3, 4099], f64), -1, torch.float64), {})",
    ],
}

# Short rows that are not a multiple of 16 bytes take the flat-row kernel (8 rows per program on
# the interpreter): whole programs and a last partial one, row counts that are a multiple of
# the program's rows (no partial program) and below it (only a partial one), every dtype.
FLAT_ROW_CASES: dict[str, list[str]] = {
    "_softmax.default": [
        "((T([2, 3, 49, 49], f16), -1, False), {})",
        "((T([16, 49], f16), 1, False), {})",
        "((T([5, 7], bf16), -1, False), {})",
        "((T([13, 201], f32), -1, False), {})",
        "((T([9, 3], f64), 1, False), {})",
    ],
    "_log_softmax.default": [
        "((T([37, 49], bf16), -1, False), {})",
        "((T([8, 255], f16), 1, False), {})",
        "((T([2, 4, 33], f32), -1, False), {})",
    ],
    "_softmax_backward_data.default": [
        "((T([37, 49], f16), T([37, 49], f16), -1, torch.float16), {})",
        "((T([17, 33], f32), T([17, 33], f32), 1, torch.float32), {})",
        "((T([9, 201], bf16), T([9, 201], bf16), -1, torch.bfloat16), {})",
    ],
    "_log_softmax_backward_data.default": [
        "((T([37, 49], f16), T([37, 49], f16), -1, torch.float16), {})",
        "((T([17, 33], f32), T([17, 33], f32), 1, torch.float32), {})",
        "((T([3, 8, 21], f64), T([3, 8, 21], f64), -1, torch.float64), {})",
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
    "((T([70, 40], f32), T([70, 40], f32), [40], T([70, 1], f32), T([70, 1], f32), None, T([40], f32), [True, False, True]), {})",
    "((T([5, 9, 600], f32), T([5, 9, 600], f32), [600], T([5, 9, 1], f32), T([5, 9, 1], f32), T([600], f32), T([600], f32), [False, True, False]), {})",
    "((T([0, 12], f32), T([0, 12], f32), [12], T([0, 1], f32), T([0, 1], f32), T([12], f32), T([12], f32), [True, True, True]), {})",
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


@pytest.mark.parametrize("variant", [0, 1])
@pytest.mark.parametrize("op", sorted(LONG_ROW_CASES))
def test_softmax_family_long_rows_match_eager(op: str, variant: int) -> None:
    cases = [parse_case(c) for c in LONG_ROW_CASES[op]]
    assert run_generated(op, _write(softmax, op, cases, variant), cases) == []


def _with_constants(text: str, **values: Any) -> str:
    """The generated file with module constants set (as knob_sweep sets them on the GPU)."""
    import re

    for name, value in values.items():
        text, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", text, flags=re.M)
        assert count == 1, name
    return text


# Long-row switches away from their defaults: no register head, forward walk, no eviction hints,
# a store cache modifier; then a head longer than any row (the whole body in registers, no loop).
LONG_ROW_SWITCHES = [
    dict(_LONG_HEAD_BYTES=0, _LONG_HEAD_BYTES_BWD=0, _LONG_REVERSE=False,
         _LONG_EVICT_LAST=False, _LONG_EVICT_FIRST=False, _LONG_STORE_CACHE=".cs"),
    dict(_LONG_HEAD_BYTES=1 << 20, _LONG_HEAD_BYTES_BWD=1 << 20, _LONG_STORE_CACHE=".cg"),
]  # fmt: skip


@pytest.mark.parametrize("switches", range(len(LONG_ROW_SWITCHES)))
@pytest.mark.parametrize("op", sorted(LONG_ROW_CASES))
def test_softmax_long_rows_match_eager_with_every_l2_switch(op: str, switches: int) -> None:
    cases = [parse_case(c) for c in LONG_ROW_CASES[op]]
    text = _with_constants(_write(softmax, op, cases), **LONG_ROW_SWITCHES[switches])
    assert run_generated(op, text, cases) == []


def _plan_constexprs(text: str, case_text: str, op: str = "_softmax.default") -> dict:
    """The constexprs of the launch the generated file plans for the case's input (a forward
    case: input, dim; a backward one: grad, output, dim)."""
    import importlib
    import tempfile
    from pathlib import Path

    case = parse_case(case_text)
    with tempfile.TemporaryDirectory() as tmp:
        module = importlib.import_module(load_kernel(op, text, Path(tmp)).__module__)
        x = torch.empty(case.args[0].shape, dtype=case.args[0].dtype)
        dim = case.args[2] if "backward" in op else case.args[1]
        return module._plan(x, dim, x.dtype)[2]


def _uses_flat_rows(text: str, case_text: str) -> bool:
    return "FLAT" in _plan_constexprs(text, case_text)


# The short-row kernels' switches: both off (`_rows_kernel`), the flat kernel (with and without
# the reciprocal: exp again divided by the sum), the window kernel one program per tile, and
# persistent (the default).
FLAT_KNOBS = [
    dict(_FLAT_ROWS_TILE=0, _WIN_TILE=0),
    dict(_WIN_TILE=0),
    dict(_WIN_TILE=0, _FLAT_RECIP=False),
    dict(_WIN_PROGRAMS_PER_SM=0),
    {},
]


@pytest.mark.parametrize("knobs", range(len(FLAT_KNOBS)))
@pytest.mark.parametrize("op", sorted(FLAT_ROW_CASES))
def test_softmax_family_short_unaligned_rows_match_eager(op: str, knobs: int) -> None:
    cases = [parse_case(c) for c in FLAT_ROW_CASES[op]]
    text = _with_constants(_write(softmax, op, cases), **FLAT_KNOBS[knobs])
    assert run_generated(op, text, cases) == []


def test_softmax_short_unaligned_rows_take_the_window_or_flat_kernel_when_on() -> None:
    text = _write(softmax, "_softmax.default", [])
    case = "((T([2, 3, 49, 49], f16), -1, False), {})"
    assert "CH" in _plan_constexprs(text, case)  # the window kernel
    assert not _uses_flat_rows(text, case)
    assert "CH" not in _plan_constexprs(text, "((T([300, 8], f32), -1, False), {})")  # 32-byte rows
    assert "CH" not in _plan_constexprs(text, "((T([9, 3], bf16), -1, False), {})")  # < a vector
    assert _uses_flat_rows(text, "((T([9, 3], bf16), -1, False), {})")
    assert _uses_flat_rows(_with_constants(text, _WIN_TILE=0), case)
    assert not _uses_flat_rows(_with_constants(text, _FLAT_ROWS_TILE=0, _WIN_TILE=0), case)


def test_softmax_unaligned_rows_past_a_row_tile_take_the_row_body_kernel() -> None:
    """Forward rows longer than a row tile (256 in the interpreter) and not 16-element aligned,
    up to _BODY_MAX (1024 here): `_row_body_kernel` (ALIGN, no STAGES); aligned or longer rows,
    or _BODY_MAX = 0, the two-pass kernel (STAGES)."""
    text = _write(softmax, "_softmax.default", [])
    body = _plan_constexprs(text, "((T([7, 1001], f32), -1, False), {})")
    assert "ALIGN" in body and "STAGES" not in body
    assert "STAGES" in _plan_constexprs(text, "((T([7, 1024], f32), -1, False), {})")
    assert "STAGES" in _plan_constexprs(text, "((T([2, 2049], bf16), -1, False), {})")
    assert "STAGES" in _plan_constexprs(_with_constants(text, _BODY_MAX=0),
                                        "((T([7, 1001], f32), -1, False), {})")
    # the log_softmax backward: 16-bit rows only (fp32 ones spill on the GPU)
    op = "_log_softmax_backward_data.default"
    bwd = _write(softmax, op, [])
    case = "((T([7, 1001], {0}), T([7, 1001], {0}), -1, torch.{1}), {{}})"
    assert "STAGES" not in _plan_constexprs(bwd, case.format("bf16", "bfloat16"), op)
    assert "STAGES" in _plan_constexprs(bwd, case.format("f32", "float32"), op)


def _with_infinities(op: str, case, gen: torch.Generator):
    """Row 0 all -inf (eager: NaN), row 1 -inf but for one element, row 2 -inf on every third
    element (masked attention); the other rows as drawn."""
    args, kwargs = materialize_case(op, case, gen)
    x = args[0]
    x[0] = float("-inf")
    x[1] = float("-inf")
    x[1, -1] = 2.0
    x[2, ::3] = float("-inf")
    return args, kwargs


@pytest.mark.parametrize("op", ["_softmax.default", "_log_softmax.default"])
def test_softmax_long_rows_handle_minus_infinity_like_eager(op: str) -> None:
    cases = [parse_case("((T([4, 1001], f32), -1, False), {})"),
             parse_case("((T([3, 700], bf16), 1, False), {})"),
             parse_case("((T([11, 49], f16), 1, False), {})")]  # fmt: skip
    assert run_generated(op, _write(softmax, op, cases), cases, make_args=_with_infinities) == []


def _with_infinities_and_nan(op: str, case, gen: torch.Generator):
    """`_with_infinities`, and +inf in row 3, NaN in row 4 (eager: those rows NaN), next to
    rows that must not see them."""
    args, kwargs = _with_infinities(op, case, gen)
    args[0][3, 5] = float("inf")
    args[0][4, 7] = float("nan")
    return args, kwargs


@pytest.mark.parametrize("arith", [True, False])
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("op", ["_softmax.default", "_log_softmax.default"])
def test_softmax_window_rows_handle_infinities_and_nan_like_eager(
    op: str, persistent: bool, arith: bool
) -> None:
    """49-wide rows through the window kernels (a program per tile, or persistent; the masks
    as compares and selects, or as arithmetic, `_WIN_ARITH`): a row's -inf, +inf and NaN stay
    in its own output, though its window also holds its neighbours' elements."""
    cases = [parse_case("((T([11, 49], f16), 1, False), {})"),
             parse_case("((T([18, 49], bf16), -1, False), {})")]  # fmt: skip
    text = _with_constants(_write(softmax, op, cases), _WIN_ARITH=arith)
    if not persistent:
        text = _with_constants(text, _WIN_PROGRAMS_PER_SM=0)
    consts = _plan_constexprs(text, cases[0].serialize(), op)
    assert "CH" in consts and consts["ARITH"] == arith
    assert run_generated(op, text, cases, make_args=_with_infinities_and_nan) == []


@pytest.mark.parametrize("op", ["_softmax.default", "_log_softmax.default"])
def test_softmax_half_to_float_matches_eager_on_fp32_copies(op: str) -> None:
    """CPU eager has no half_to_float: the reference is the op on fp32 copies (what CUDA eager
    computes), for short and long rows."""
    import tempfile
    from pathlib import Path

    texts = ["((T([7, 33], f16), -1, True), {})", "((T([5, 1001], f16), -1, True), {})",
             "((T([3, 2049], bf16), 1, True), {})"]  # fmt: skip
    cases = [parse_case(t) for t in texts]
    eager = getattr(torch.ops.aten, op.split(".")[0]).default
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(softmax, op, cases), Path(tmp))
        for index, case in enumerate(cases):
            args, _ = materialize_case(op, case, torch.Generator().manual_seed(index))
            got = kernel(args[0], args[1], True)
            want = eager(args[0].float(), args[1], False)
            problems += [f"case {index}: {p}" for p in compare("output", got, want)]
    assert problems == []


def test_softmax_conservative_variant_matches_eager() -> None:
    op = "_softmax.default"
    cases = [parse_case(c) for c in SOFTMAX_CASES[op]]
    assert run_generated(op, _write(softmax, op, cases, variant=1), cases) == []


def test_layer_norm_matches_eager_with_and_without_affine() -> None:
    op = "native_layer_norm.default"
    cases = [parse_case(c) for c in LAYER_NORM_CASES]
    assert run_generated(op, _write(norm, op, cases), cases) == []


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
            problems += [
                f"case {index}: {p}"
                for p in compare_with_fp32_eager("output", eager, got, args, kwargs)
            ]
    assert problems == []


class _CountingKernel:
    """Stands in for a kernel object in a loaded module and counts `kernel[grid](...)` launches."""

    def __init__(self, kernel: Any, counts: dict[str, int], name: str) -> None:
        self.kernel, self.counts, self.name = kernel, counts, name

    def __getitem__(self, grid: Any) -> Any:
        launch = self.kernel[grid]

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.counts[self.name] = self.counts.get(self.name, 0) + 1
            return launch(*args, **kwargs)

        return counted


def _count_launches(op: str, text: str, case_text: str, tmp: Any) -> tuple[int, list, tuple]:
    """Launches one call makes, the kernel's outputs and eager's (fp32) for the same inputs."""
    case = parse_case(case_text)
    kernel = load_kernel(op, text, tmp)
    module_globals = kernel.__globals__
    counts: dict[str, int] = {}
    for name in codegen.launched_jit_kernels(text):  # device-side helpers stay as they are
        module_globals[name] = _CountingKernel(module_globals[name], counts, name)
    args, kwargs = materialize_case(op, case, torch.Generator().manual_seed(0))
    got = kernel(*args, **kwargs)
    want = getattr(torch.ops.aten, op.split(".")[0]).default(*args, **kwargs)
    return sum(counts.values()), got, want


def test_layer_norm_backward_takes_at_most_two_launches_and_is_deterministic(tmp_path) -> None:
    op = "native_layer_norm_backward.default"
    case = LAYER_NORM_BACKWARD_CASES[0]
    text = _write(norm, op, [parse_case(case)])
    launches, got, want = _count_launches(op, text, case, tmp_path)
    assert launches == 2
    assert compare("output", got, want) == []
    _, again, _ = _count_launches(op, text, case, tmp_path / "again")
    assert all(torch.equal(a, b) for a, b in zip(got, again, strict=True))


def test_layer_norm_forward_and_softmax_take_one_launch(tmp_path) -> None:
    for module, op, case in (
        (norm, "native_layer_norm.default", LAYER_NORM_CASES[0]),
        (softmax, "_softmax.default", SOFTMAX_CASES["_softmax.default"][0]),
        (softmax, "_log_softmax_backward_data.default",
         SOFTMAX_CASES["_log_softmax_backward_data.default"][1]),
    ):  # fmt: skip
        text = _write(module, op, [parse_case(case)])
        launches, got, want = _count_launches(op, text, case, tmp_path / op)
        assert launches == 1, op
        assert compare("output", got, want) == [], op


def test_softmax_and_norm_kernels_compile_for_an_sm90_gpu() -> None:
    """The interpreter accepts code the GPU compiler rejects; compile the GPU-sized tiles."""
    jobs = {
        "_softmax.default": ["((T([2, 3, 49, 49], f16), -1, False), {})", "((T([4, 30522], bf16), -1, True), {})", "((T([2, 50257], f32), 1, False), {})", "((T([3, 500, 7], f32), 1, False), {})"],
        "_log_softmax.default": ["((T([4, 1000], f32), 1, False), {})", "((T([2, 32000], f32), 1, False), {})", "((T([3, 50257], f32), 1, False), {})", "((T([2, 50257], f16), 1, True), {})"],
        "_softmax_backward_data.default": ["((T([8, 512], f32), T([8, 512], f32), -1, torch.float32), {})", "((T([3, 30, 7], f16), T([3, 30, 7], f16), 1, torch.float16), {})", "((T([2, 50257], f32), T([2, 50257], f32), -1, torch.float32), {})", "((T([2, 9001], f64), T([2, 9001], f64), -1, torch.float64), {})"],
        "_log_softmax_backward_data.default": ["((T([4, 30522], bf16), T([4, 30522], bf16), 1, torch.bfloat16), {})", "((T([2, 32000], f32), T([2, 32000], f32), 1, torch.float32), {})", "((T([32, 2], bf16), T([32, 2], bf16), 1, torch.bfloat16), {})", "((T([3, 50257], f32), T([3, 50257], f32), 1, torch.float32), {})"],
        "native_layer_norm.default": ["((T([8, 16, 768], bf16), [768], T([768], bf16), T([768], bf16), 1e-05), {})", "((T([4, 9000], f32), [9000], None, None, 1e-05), {})"],
        "native_layer_norm_backward.default": [
            "((T([8, 16, 768], bf16), T([8, 16, 768], bf16), [768], T([8, 16, 1], f32), T([8, 16, 1], f32), T([768], bf16), T([768], bf16), [True, True, True]), {})",
            "((T([4, 9000], f32), T([4, 9000], f32), [9000], T([4, 1], f32), T([4, 1], f32), None, None, [True, False, False]), {})",
            "((T([9, 30], f64), T([9, 30], f64), [30], T([9, 1], f64), T([9, 1], f64), T([30], f64), None, [False, True, False]), {})",
        ],
    }  # fmt: skip
    batch = []
    for op, texts in jobs.items():
        cases = [parse_case(t) for t in texts]
        module = norm if "layer_norm" in op else softmax
        batch.append((op, _write(module, op, cases), cases))
    assert_compiles_for_sm90(batch)


def test_one_tile_softmax_rows_issue_every_load_before_using_one() -> None:
    """A row held in one tile is loaded by each thread as 8-16 vectors; an instruction that
    reads one before the last is issued stalls the warp a memory latency per load (`_rows_tile`
    padded with a select after each load: 887 us against 505 on the H200 for [8192, 32000] f32,
    docs/history/BENCHMARKS-2026-11-to-12.md §22). Compiled for sm_90, the one-tile kernels consume
    no load early."""
    jobs = {
        "_log_softmax.default": ["((T([2, 32000], f32), 1, False), {})", "((T([2, 16384], bf16), 1, False), {})", "((T([2, 30522], bf16), 1, False), {})"],
        "_softmax.default": ["((T([2, 32000], f32), 1, False), {})", "((T([2, 9001], f32), 1, False), {})"],
    }  # fmt: skip
    batch = [(op, _write(softmax, op, [parse_case(t) for t in texts]),
              [parse_case(t) for t in texts]) for op, texts in jobs.items()]
    orders = sm90_load_order(batch)
    seen = set()
    for op, launches in orders.items():
        for index, kernel, early, loads, *_resources in launches:
            seen.add(kernel)
            assert loads >= 4, (op, index, kernel, loads)
            assert early == 0, (op, index, kernel, f"{early} of {loads} loads read early")
    assert seen == {"_rows_kernel", "_row_body_kernel"}


def test_softmax_flat_row_kernel_compiles_for_an_sm90_gpu() -> None:
    """Every mode and dtype of the flat-row kernel at GPU sizes, and its switch off."""
    batch = []
    for op, texts in FLAT_ROW_CASES.items():
        cases = [parse_case(t) for t in texts]
        text = _write(softmax, op, cases)
        batch += [(op, _with_constants(text, **knobs), cases) for knobs in FLAT_KNOBS]
    assert_compiles_for_sm90(batch)


def test_softmax_long_row_switches_compile_for_an_sm90_gpu() -> None:
    """Every long-row switch setting compiles at GPU sizes (a store's cache modifier and its
    eviction hint cannot be combined, a register head must fit the tile rules)."""
    jobs = {
        "_log_softmax.default": ["((T([3, 50257], f32), 1, False), {})", "((T([2, 50257], f16), 1, True), {})", "((T([2, 32000], f32), 1, False), {})", "((T([2, 30522], bf16), 1, False), {})"],
        "_softmax.default": ["((T([2, 50257], bf16), 1, False), {})", "((T([2, 9001], f64), 1, False), {})", "((T([3, 9001], f32), 1, False), {})"],
        "_softmax_backward_data.default": ["((T([2, 50257], f32), T([2, 50257], f32), -1, torch.float32), {})"],
        "_log_softmax_backward_data.default": ["((T([3, 50257], f32), T([3, 50257], f32), 1, torch.float32), {})", "((T([2, 30522], bf16), T([2, 30522], bf16), 1, torch.bfloat16), {})"],
    }  # fmt: skip
    switches = [*LONG_ROW_SWITCHES, dict(_LONG_HEAD_BYTES=131072, _LONG_HEAD_BYTES_BWD=65536)]
    batch = []
    for op, texts in jobs.items():
        cases = [parse_case(t) for t in texts]
        for values in switches:
            batch.append((op, _with_constants(_write(softmax, op, cases), **values), cases))
    assert_compiles_for_sm90(batch)


_SMEM_CHILD = r"""
import importlib.util, json, os, sys
os.environ["TRITON_INTERPRET"] = "0"
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

TYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64"}
shared = []
for number, (path, dtype, out_dtype) in enumerate(json.loads(sys.argv[1])):
    spec = importlib.util.spec_from_file_location(f"_smem_{number}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    x = torch.empty(4, 50257, dtype=getattr(torch, dtype))
    _, _, consts = module._plan(x, 1, getattr(torch, out_dtype))
    fn = module._long_rows_kernel
    if not hasattr(fn, "arg_names"):  # the fast launcher: its JIT function
        fn = fn.fn
    options = {"num_warps": consts.pop("num_warps")}
    out = TYPES[getattr(torch, out_dtype)]
    signature = {"a_ptr": "*" + TYPES[x.dtype], "b_ptr": "*" + TYPES[x.dtype], "out_ptr": "*" + out,
                 "ROWS": "i32", "R": "i32", **{k: "constexpr" for k in consts}}
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(3)}  # as Triton specializes them
    src = ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=aligned)
    shared.append(triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options).metadata.shared)
print(json.dumps(shared))
"""


def test_long_row_pipeline_buffers_fit_an_h100_block_shared_memory(tmp_path) -> None:
    """The pipeliner's shared-memory buffers are sized in `_long_pipeline`; a kernel over the
    227 KB a block may take compiles, then fails at launch: compile the largest (two loads per
    step, fp64) at GPU sizes and read what they take."""
    import json
    import subprocess
    import sys

    jobs = []
    for op, dtype, out_dtype in (
        ("_softmax_backward_data.default", "float64", "float64"),
        ("_log_softmax_backward_data.default", "float32", "float32"),
        ("_softmax.default", "float64", "float64"),
        ("_log_softmax.default", "float16", "float32"),
    ):
        path = tmp_path / f"{op}_{dtype}.py"
        path.write_text(_write(softmax, op, []), encoding="utf-8")
        jobs.append((str(path), dtype, out_dtype))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", _SMEM_CHILD, json.dumps(jobs)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    if proc.returncode != 0 and ("ptxas" in proc.stderr or "No module named" in proc.stderr):
        pytest.skip(f"Triton's CUDA backend is not usable here: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    shared = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(0 < n <= 227 * 1024 for n in shared), shared


_GLUON_CHILD = r"""
import importlib.util, json, os, re, sys
os.environ["TRITON_INTERPRET"] = "0"
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource

found = []
for number, path in enumerate(json.loads(sys.argv[1])):
    spec = importlib.util.spec_from_file_location(f"_gluon_{number}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    for red in (50257, 32769):
        consts, chunk_bytes = module._smem_rows_consts(red)
        options = {"num_warps": consts.pop("num_warps")}
        signature = {"a_ptr": "*fp32", "out_ptr": "*fp32", "ROWS": "i32", "R": "i32",
                     **{k: "constexpr" for k in consts}}
        aligned = {(i,): [["tt.divisibility", 16]] for i in range(2)}  # as a launch specializes
        src = GluonASTSource(fn=module._smem_rows_kernel, signature=signature, constexprs=consts,
                             attrs=aligned)
        kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
        ptx = kernel.asm["ptx"]
        found.append({"shared": kernel.metadata.shared, "chunks": chunk_bytes,
                      "scratch": module._SMEM_SCRATCH, "nchunk": consts["NCHUNK"],
                      "copies16": len(re.findall(r"cp\.async\.cg\.shared\.global", ptx)),
                      "stores16": len(re.findall(r"st\.global\.v4\.b32", ptx))})
print(json.dumps(found))
"""


def _sm90_child(script: str, arg: str) -> list:
    """Run a compile-for-sm_90 script in a child without the interpreter (this process runs
    it): the JSON list it prints last; skip where Triton's CUDA backend cannot run here."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", script, arg], capture_output=True, text=True, env=env, timeout=600
    )
    if proc.returncode != 0 and "ptxas" in proc.stderr:
        pytest.skip(f"Triton's CUDA backend is not usable here: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_smem_rows_kernel_compiles_for_sm90_with_16_byte_copies_and_stores(tmp_path) -> None:
    """The Gluon kernel for long f32 rows (GPU only: the interpreter cannot run Gluon) compiles
    for an H100/H200 with this Triton; every row chunk is copied in and stored out in 16-byte
    vectors although rows start at any 4-byte offset, and its shared memory (chunks and the
    reductions' scratch) stays within the budget the plan checks against a block's limit."""
    import json

    pytest.importorskip("triton.experimental.gluon")
    paths = []
    for op in ("_softmax.default", "_log_softmax.default"):
        path = tmp_path / f"{op}.py"
        path.write_text(_write(softmax, op, []), encoding="utf-8")
        paths.append(str(path))
    for k in _sm90_child(_GLUON_CHILD, json.dumps(paths)):
        assert k["chunks"] < k["shared"] <= k["chunks"] + k["scratch"], k
        assert k["shared"] <= 227 * 1024, k
        # two copies per chunk in the code (the first row's, the next row's), one store each
        assert k["copies16"] == 2 * k["nchunk"] and k["stores16"] == k["nchunk"], k


_BN_GLUON_CHILD = r"""
import importlib.util, json, os, re, sys
os.environ["TRITON_INTERPRET"] = "0"
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource

spec = importlib.util.spec_from_file_location("_gluon_bn", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
found = []
for N, HW, dt in ((32, 784, "bf16"), (7, 576, "fp16"), (3, 264, "bf16"), (1, 576, "fp32")):
    consts, planes = module._bn_smem_consts(N, HW, 4 if dt == "fp32" else 2)
    consts.update(TRAIN=True, HAS_W=True, WANT_DW=True, WANT_DB=True)
    options = {"num_warps": consts.pop("num_warps")}
    names = ["x_ptr", "g_ptr", "mean_ptr", "istd_ptr", "rv_ptr", "w_ptr", "dx_ptr", "dw_ptr",
             "db_ptr"]
    signature = {n: f"*{dt}" if n in ("x_ptr", "g_ptr", "dx_ptr") else "*fp32" for n in names}
    signature.update(C="i32", inv_count="fp32", eps="fp32", **{k: "constexpr" for k in consts})
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(10)}  # as a launch specializes
    src = GluonASTSource(fn=module._bn_smem_kernel, signature=signature, constexprs=consts,
                         attrs=aligned)
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    ptx = kernel.asm["ptx"]
    found.append({"shared": kernel.metadata.shared, "planes": planes, "groups": consts["G"],
                  "fp32": dt == "fp32",
                  "scratch": module._BN_SMEM_SCRATCH,
                  "copies16": len(re.findall(r"cp\.async\.cg\.shared\.global", ptx)),
                  "stores16": len(re.findall(r"st\.global\.v4\.b32", ptx)),
                  "shuffles": len(re.findall(r"shfl\.sync\.down\.b32", ptx))})
print(json.dumps(found))
"""


def test_batch_norm_smem_kernel_compiles_for_sm90_with_16_byte_copies(tmp_path) -> None:
    """The Gluon kernel of batch norm backward (GPU only) compiles for an H100/H200 with this
    Triton: every group of a channel is copied in (x and grad_out, the first channel's and
    the next one's) and grad_input stored out in 16-byte vectors, eager's warp tree is five
    shuffles per sum, and shared memory stays within what the plan checks against a block's
    limit."""

    pytest.importorskip("triton.experimental.gluon")
    op = "native_batch_norm_backward.default"
    path = tmp_path / f"{op}.py"
    path.write_text(_write(norm, op, []), encoding="utf-8")
    for k in _sm90_child(_BN_GLUON_CHILD, str(path)):
        assert k["planes"] < k["shared"] <= k["planes"] + k["scratch"], k
        assert k["shared"] <= 227 * 1024, k
        per = 2 if k["fp32"] else 1  # 16-byte vectors per thread and group (8 elements)
        assert k["copies16"] == 4 * per * k["groups"], k
        assert k["stores16"] == per * k["groups"], k
        assert k["shuffles"] == 10, k


def test_batch_norm_backward_plans_its_smem_kernel_only_on_a_gpu(tmp_path) -> None:
    """Off the GPU (here: the interpreter) the shared-memory plan declines and the file runs
    its plain kernels; the file imports with Gluon absent too (another Triton release)."""
    import importlib

    op = "native_batch_norm_backward.default"
    x = torch.randn(2, 3, 20, 20, dtype=torch.bfloat16)
    module = importlib.import_module(load_kernel(op, _write(norm, op, []), tmp_path).__module__)
    assert module._bn_smem_plan(x, 2, 3, 400, True) is None
    text = _with_constants(_write(norm, op, []), _GLUON_TRITONS=((9, 0), (9, 1)))
    other = importlib.import_module(load_kernel(op, text, tmp_path / "other").__module__)
    assert other.gluon is None and other._bn_smem_plan(x, 2, 3, 400, True) is None


def test_softmax_files_keep_the_two_pass_kernel_on_other_triton_releases(tmp_path) -> None:
    """The Gluon kernel is written for Triton 3.6-3.9 (its surface moves between releases):
    under another release the file imports without it, and long f32 rows plan the two
    passes."""
    import importlib

    op = "_log_softmax.default"
    text = _with_constants(_write(softmax, op, []), _GLUON_TRITONS=((9, 0), (9, 1)))
    module = importlib.import_module(load_kernel(op, text, tmp_path).__module__)
    assert module.gluon is None
    assert module._smem_rows_plan(torch.empty(2, 50257), 2, 50257, torch.float32) is None
    assert "STAGES" in module._plan(torch.empty(2, 50257), 1, torch.float32)[2]


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
        # the second and third calls reuse the first call's plan with new tensors
        for seed in range(3):
            args, _ = _batch_norm_args(op, cases[0], torch.Generator().manual_seed(seed))
            mine = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            theirs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            got = kernel(*mine)
            want = torch.ops.aten.native_batch_norm.default(*theirs)
            assert compare(f"call {seed}", got, want) == []
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


def test_batch_norm_eval_returns_running_stats_as_saved_where_cuda_eager_does() -> None:
    """CUDA eager's eval mode returns the running mean and 1/sqrt(running_var + eps) as the saved
    statistics ([C]); the CPU returns empty ones. Run the CUDA rule here on CPU tensors."""
    import importlib
    import tempfile
    from pathlib import Path

    op = "native_batch_norm.default"
    case = parse_case(
        "((T([2, 3, 4, 5], f32), T([3], f32), T([3], f32), T([3], f32), T([3], f32), False, 0.1, 1e-3), {})"
    )
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(norm, op, [case]), Path(tmp))
        module = importlib.import_module(kernel.__module__)
        args, _ = _batch_norm_args(op, case, torch.Generator().manual_seed(0))
        out, mean, istd = kernel(*args)
        assert mean.shape == (0,) and istd.shape == (0,)  # as CPU eager
        module._EVAL_SAVE_DEVICES = ("cpu",)
        module._BN_RUNS.clear()  # plans read module constants once, when first made
        out2, mean, istd = kernel(*args)
    torch.testing.assert_close(out2, out)
    torch.testing.assert_close(mean, args[3])
    torch.testing.assert_close(istd, 1 / torch.sqrt(args[4] + 1e-3))


# `_ROWS_CONST_N` (on by default): short rows of an even length that is not a multiple of 16
# elements, too long for the flat kernel, on `_rows_const_kernel` (the length a constexpr):
# 8-byte (196 f16), 4-byte (130 bf16) and 16-byte (36 f32, 6 f64) aligned rows, a partial last
# program, 8-element rows.
CONST_ROW_CASES: dict[str, list[str]] = {
    "_softmax.default": [
        "((T([2, 3, 7, 196], f16), -1, False), {})",
        "((T([9, 130], bf16), 1, False), {})",
        "((T([13, 36], f32), -1, False), {})",
        "((T([300, 8], f32), -1, False), {})",
        "((T([5, 6], f64), 1, False), {})",
    ],
    "_log_softmax.default": [
        "((T([11, 196], f16), -1, False), {})",
        "((T([9, 130], bf16), 1, False), {})",
    ],
    "_softmax_backward_data.default": [
        "((T([11, 196], f16), T([11, 196], f16), -1, torch.float16), {})",
        "((T([7, 36], f32), T([7, 36], f32), 1, torch.float32), {})",
    ],
    "_log_softmax_backward_data.default": [
        "((T([11, 196], f16), T([11, 196], f16), -1, torch.float16), {})",
        "((T([9, 130], bf16), T([9, 130], bf16), 1, torch.bfloat16), {})",
        "((T([5, 6], f64), T([5, 6], f64), 1, torch.float64), {})",
    ],
}
# the switch on with its knobs: halves or one tile, rows per program and warps
CONST_ROW_KNOBS = [
    dict(_ROWS_CONST_N=True, _ROWS_CONST_WARPS=0),
    dict(_ROWS_CONST_N=True, _ROWS_CONST_SPLIT=False),
    dict(_ROWS_CONST_N=True, _ROWS_CONST_M=16, _ROWS_CONST_WARPS=2),
    dict(_ROWS_CONST_N=True, _ROWS_CONST_SPLIT=False, _ROWS_CONST_M=1, _ROWS_CONST_WARPS=4),
]


@pytest.mark.parametrize("knobs", range(len(CONST_ROW_KNOBS)))
@pytest.mark.parametrize("op", sorted(CONST_ROW_CASES))
def test_softmax_const_length_rows_match_eager_with_every_knob(op: str, knobs: int) -> None:
    cases = [parse_case(c) for c in CONST_ROW_CASES[op]]
    text = _with_constants(_write(softmax, op, cases), **CONST_ROW_KNOBS[knobs])
    assert run_generated(op, text, cases) == []


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize("op", ["_softmax.default", "_log_softmax.default"])
def test_softmax_const_length_rows_handle_minus_infinity_like_eager(op: str, split: bool) -> None:
    cases = [parse_case("((T([11, 196], f16), -1, False), {})"),
             parse_case("((T([5, 130], bf16), 1, False), {})")]  # fmt: skip
    text = _with_constants(_write(softmax, op, cases), _ROWS_CONST_N=True, _ROWS_CONST_SPLIT=split)
    assert run_generated(op, text, cases, make_args=_with_infinities) == []


def _uses_const_rows(text: str, case_text: str) -> bool:
    return "R" in _plan_constexprs(text, case_text)


def test_softmax_const_length_rows_only_when_switched_on() -> None:
    """On by default (measured on the H200); 196-wide rows take it, 16-aligned and odd lengths do
    not (a constant gives them no wider vectors); switched off, none does."""
    on = _write(softmax, "_softmax.default", [])
    off = _with_constants(on, _ROWS_CONST_N=False)
    assert not _uses_const_rows(off, "((T([4, 196], f16), -1, False), {})")
    assert _uses_const_rows(on, "((T([4, 196], f16), -1, False), {})")
    assert not _uses_const_rows(on, "((T([4, 256], f16), -1, False), {})")
    assert not _uses_const_rows(on, "((T([4, 201], f32), -1, False), {})")


def test_softmax_const_length_rows_compile_for_an_sm90_gpu() -> None:
    batch = []
    for op, texts in CONST_ROW_CASES.items():
        cases = [parse_case(t) for t in texts]
        text = _write(softmax, op, cases)
        batch += [(op, _with_constants(text, **knobs), cases) for knobs in CONST_ROW_KNOBS[:3]]
    assert_compiles_for_sm90(batch)


def _eager_block_sum(terms, dtype, tx: int, ty: int):
    """CUDA eager's per-channel block reduction of terms [N, C, HW] (fp32), step by step: thread
    (x, y) sums batches y, y+ty, ... and positions x, x+tx, ... in fp32; then each warp halves
    its 32 lanes five times and warp 0 the warps' results, every received value rounded to
    `dtype` (eager's shuffle rebuilds its f16/bf16 pair). Returns [C] fp32."""
    n, c, hw = terms.shape
    acc = torch.zeros(c, ty, tx)
    for b0 in range(0, n, ty):
        for x0 in range(0, hw, tx):
            tile = torch.zeros(c, ty, tx)
            part = terms[b0 : b0 + ty, :, x0 : x0 + tx].permute(1, 0, 2)
            tile[:, : part.shape[1], : part.shape[2]] = part
            acc = acc + tile
    v = acc.reshape(c, -1, 32)
    while v.shape[-1] > 1:
        half = v.shape[-1] // 2
        v = v[..., :half] + v[..., half:].to(dtype).float()
    v = v[..., 0]
    while v.shape[-1] > 1:
        half = v.shape[-1] // 2
        v = v[..., :half] + v[..., half:].to(dtype).float()
    return v[..., 0]


def _eager_cuda_bn_backward(go, x, w, mean, istd, steps: bool, fused: bool = True):
    """CUDA eager's training-mode batch norm backward: with `steps`, the sums of its NCHW
    f16/bf16 kernels (terms g*(x-mean) through the dtype, then `_eager_block_sum` with the
    fused kernel's block, or the reduce-only kernel's when grad_input is not wanted); without,
    exact sums (its channels-last kernels sum in fp32)."""
    n, c = go.shape[:2]
    g = go.float().reshape(n, c, -1)
    xc = x.float().reshape(n, c, -1) - mean.view(1, -1, 1)
    if steps:
        hw = g.shape[-1]
        tx = next((t for t in (32, 64, 128, 256) if hw <= t), 512)
        ty = 512 // tx
        if not fused:
            ty = min(1 << (n.bit_length() - 1), 16)
            tx = min(tx, 512 // ty)
        gsum = _eager_block_sum(g, go.dtype, tx, ty).double()
        dot = _eager_block_sum((g * xc).to(go.dtype).float(), go.dtype, tx, ty).double()
    else:
        gsum = g.double().sum((0, 2))
        dot = (g.double() * xc.double()).sum((0, 2))
    cnt = g.shape[0] * g.shape[2]
    s = istd.double().view(1, -1, 1)
    proj = xc.double() * (dot / cnt).view(1, -1, 1) * s * s
    dx = (g.double() - proj - (gsum / cnt).view(1, -1, 1)) * s * w.double().view(1, -1, 1)
    return dx.reshape(go.shape), dot * istd.double(), gsum


@pytest.mark.parametrize(
    ("shape", "channels_last", "want_dx", "knobs"),
    [([4, 3, 40, 40], False, True, {}), ([4, 3, 40, 40], True, True, {}),
     ([33, 3, 7, 7], False, True, {}), ([33, 3, 7, 7], False, False, {}),
     ([2, 3, 80, 80], False, True, {}),
     # steps 3 at a time (a ragged end), and one at a time
     ([2, 3, 80, 80], False, True, {"_BN_EAGER_UNROLL": 3}),
     ([33, 3, 7, 7], False, False, {"_BN_EAGER_UNROLL": 1}),
     # each channel's block over several programs: whole rows of its threads (the reduce-only
     # block [33,3,7,7] is 16 x 32), 4 or 16 warps of a 512-thread row
     ([2, 3, 80, 80], False, True, {"_BN_EAGER_SPLIT": 4, "_BN_EAGER_UNROLL": 3}),
     ([2, 3, 80, 80], False, True, {"_BN_EAGER_SPLIT": 16}),
     ([33, 3, 7, 7], False, False, {"_BN_EAGER_SPLIT": 2})],
)  # fmt: skip
def test_batch_norm_backward_half_sums_in_cuda_eager_steps(
    shape: list, channels_last: bool, want_dx: bool, knobs: dict
) -> None:
    """f16 NCHW: CUDA eager's sums pass through f16 at each term and at each shuffle of its
    block reduction (the H200 failed bf16 cases by ~6 on grad_weight, ~1 on grad_bias, without
    this); channels-last inputs take eager's fp32 kernels. Up to 8192 elements per channel the
    channel's program also writes grad_input ([4,3,40,40], [33,3,7,7]); beyond ([2,3,80,80])
    and without grad_input, the sums feed the separate kernels, also when each channel's block
    is split over several programs (their warp sums added by the channel kernel as eager's warp 0
    adds them)."""
    import tempfile
    from pathlib import Path

    op = "native_batch_norm_backward.default"
    case = parse_case(
        f"((T({shape}, f16), T({shape}, f16), T([3], f32), T([3], f32), T([3], f32),"
        f" T([3], f32), T([3], f32), True, 1e-05, [{want_dx}, True, True]), {{}})"
    )
    gen = torch.Generator().manual_seed(3)
    go = (torch.randn(*shape, generator=gen) * 4).half()
    x = (torch.randn(*shape, generator=gen) * 8 + 2).half()
    w = torch.rand(3, generator=gen) + 0.5
    mean = torch.randn(3, generator=gen)
    istd = torch.rand(3, generator=gen) + 0.5
    if channels_last:
        go = go.contiguous(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    steps = not channels_last
    ref_dx, ref_dw, ref_db = _eager_cuda_bn_backward(go, x, w, mean, istd, steps, want_dx)
    _, other_dw, other_db = _eager_cuda_bn_backward(go, x, w, mean, istd, not steps, want_dx)
    # the two ways of summing differ by far more than the tolerance below
    assert (other_dw - ref_dw).abs().max() > 0.01
    assert (other_db - ref_db).abs().max() > 0.001
    with tempfile.TemporaryDirectory() as tmp:
        text = _with_constants(_write(norm, op, [case]), **knobs)
        kernel = load_kernel(op, text, Path(tmp))
        dx, dw, db = kernel(go, x, w, None, None, mean, istd, True, 1e-5, [want_dx, True, True])
    torch.testing.assert_close(dw.double(), ref_dw, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(db.double(), ref_db, rtol=1e-6, atol=1e-5)
    if want_dx:
        torch.testing.assert_close(dx.double(), ref_dx, rtol=1e-2, atol=1e-2)
    else:
        assert dx is None


def test_batch_norm_backward_eager_steps_compile_for_sm90_unrolled() -> None:
    """The eager-order partial sums as the H200 runs them, their steps unrolled by the rule and
    by 8."""
    op = "native_batch_norm_backward.default"
    cases = [
        parse_case(
            f"((T({shape}, bf16), T({shape}, bf16), T([{shape[1]}], f32), T([{shape[1]}], f32),"
            f" T([{shape[1]}], f32), T([{shape[1]}], f32), T([{shape[1]}], f32), True, 1e-05,"
            " [True, True, True]), {})"
        )
        for shape in ([32, 64, 56, 56], [32, 1024, 14, 14])
    ]
    text = _write(norm, op, cases)
    assert_compiles_for_sm90(
        [(op, text, cases), (op, _with_constants(text, _BN_EAGER_UNROLL=8), cases),
         (op, _with_constants(text, _BN_EAGER_SPLIT=4), cases)]
    )
