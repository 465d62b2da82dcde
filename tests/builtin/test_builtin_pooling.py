"""The builtin provider's pooling kernels on the layouts and edge cases their tile walk must get
right: channels-last inputs (outputs keep eager's memory format), ceil_mode, odd sizes, 3-D
inputs, strided gradients, dilation and the int64-offset path, in Triton's CPU interpreter; plus
a compile of every pooling launch for an sm_90 GPU (no GPU needed).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from builtin_support import assert_compiles_for_sm90, load_kernel, run_generated

from agent.providers.builtin import codegen, pooling
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.inputs import materialize
from evaluator.cases.testcase import TestCase, parse_case

CASES: dict[str, list[str]] = {
    "max_pool2d_with_indices.default": [
        "((T([2, 5, 13, 13], f16, [845, 1, 65, 5]), [3, 3], [2, 2], [1, 1]), {})",
        "((T([2, 3, 9, 7], bf16), [2, 2], [2, 2], [0, 0], [1, 1], True), {})",
        "((T([2, 6, 10, 11], f32, [660, 1, 66, 6]), [3, 2], [2, 1], [1, 1], [2, 1], True), {})",
        "((T([3, 15, 17], f16), [3, 3], [2, 2], [1, 1]), {})",
        "((T([1, 300, 5, 5], f32, [7500, 1, 1500, 300]), [2, 2]), {})",
    ],
    "max_pool2d_with_indices_backward.default": [
        "((T([2, 5, 7, 7], f16, [245, 1, 35, 5]), T([2, 5, 13, 13], f16, [845, 1, 65, 5]), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 5, 7, 7], i64, [245, 1, 35, 5])), {})",
        "((T([2, 3, 5, 4], bf16), T([2, 3, 9, 7], bf16), [2, 2], [2, 2], [0, 0], [1, 1], True, T([2, 3, 5, 4], i64)), {})",
        "((T([2, 6, 5, 12], f32, [360, 1, 72, 6]), T([2, 6, 10, 11], f32, [660, 1, 66, 6]), [3, 2], [2, 1], [1, 1], [2, 1], True, T([2, 6, 5, 12], i64, [360, 1, 72, 6])), {})",
        "((T([3, 8, 9], f16), T([3, 15, 17], f16), [3, 3], [2, 2], [1, 1], [1, 1], False, T([3, 8, 9], i64)), {})",
        "((T([2, 3, 5, 5], f32, [150, 50, 10, 2]), T([2, 3, 9, 9], f32), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 3, 5, 5], i64)), {})",
    ],
    "avg_pool2d.default": [
        "((T([2, 7, 9, 9], f16, [567, 1, 63, 7]), [3, 3], [1, 1], [1, 1], False, False), {})",
        "((T([2, 4, 13, 11], bf16), [2, 2], [2, 2], [0, 0], True, False), {})",
        "((T([2, 6, 11, 11], f32, [726, 1, 66, 6]), [3, 3], [2, 2], [1, 1], True, True), {})",
        "((T([4, 9, 10], f32), [3, 2], [2, 1], [1, 1], True, False, 7), {})",
    ],
    "avg_pool2d_backward.default": [
        "((T([2, 7, 9, 9], f16, [567, 1, 63, 7]), T([2, 7, 9, 9], f16, [567, 1, 63, 7]), [3, 3], [1, 1], [1, 1], False, False, None), {})",
        "((T([2, 4, 7, 6], bf16), T([2, 4, 13, 11], bf16), [2, 2], [2, 2], [0, 0], True, False, None), {})",
        "((T([2, 6, 6, 6], f32, [216, 1, 36, 6]), T([2, 6, 11, 11], f32, [726, 1, 66, 6]), [3, 3], [2, 2], [1, 1], True, True, None), {})",
        "((T([4, 5, 11], f32), T([4, 9, 10], f32), [3, 2], [2, 1], [1, 1], True, False, 7), {})",
        "((T([2, 3, 5, 5], f32, [150, 50, 10, 2]), T([2, 3, 10, 10], f32), [2, 2], [2, 2], [0, 0], False, True, None), {})",
    ],
    "_adaptive_avg_pool2d.default": [
        "((T([2, 9, 7, 7], f16, [441, 1, 63, 9]), [1, 1]), {})",
        "((T([2, 5, 11, 13], bf16, [715, 1, 65, 5]), [4, 5]), {})",
        "((T([5, 11, 13], f32), [3, 7]), {})",
    ],
}

# avg_pool2d_backward with windows that tile the plane exactly (the broadcast-copy kernel): odd
# widths, KW 1/2/4 on NCHW, KW 3 on channels-last (NCHW KW 3 falls back), ceil_mode, a divisor
# override, a 3-D input, and grad_output strides that send it back to the gather kernel
TILE_CASES = [
    "((T([2, 3, 7, 7], bf16), T([2, 3, 14, 14], bf16), [2, 2], [2, 2], [0, 0], True, False, None), {})",
    "((T([3, 5, 3, 5], f16), T([3, 5, 6, 20], f16), [2, 4], [2, 4], [0, 0], False, True, None), {})",
    "((T([2, 6, 3, 3], f32, [54, 1, 18, 6]), T([2, 6, 9, 9], f32, [486, 1, 54, 6]), [3, 3], [3, 3], [0, 0], False, True, None), {})",
    "((T([2, 130, 2, 3], bf16, [780, 1, 390, 130]), T([2, 130, 4, 6], bf16, [3120, 1, 780, 130]), [2, 2], [2, 2], [0, 0], True, False, None), {})",
    "((T([5, 9, 11], f32), T([5, 9, 11], f32), [1, 1], [1, 1], [0, 0], False, True, 3), {})",
    "((T([1, 2, 4, 3], f64), T([1, 2, 12, 3], f64), [3, 1], [3, 1], [0, 0], False, True, None), {})",
    "((T([2, 4, 3, 5], f16), T([2, 4, 9, 15], f16), [3, 3], [3, 3], [0, 0], False, True, None), {})",
    "((T([2, 3, 4, 4], f32, [48, 1, 12, 3]), T([2, 3, 8, 8], f32), [2, 2], [2, 2], [0, 0], False, True, None), {})",
    "((T([2, 3, 4, 4], bf16), T([2, 3, 9, 9], bf16), [2, 2], [2, 2], [0, 0], False, True, None), {})",
]

# max_pool2d backward with stride 2 (the 2x2-block kernel): odd planes (a last half block),
# kernels 1 (positions no window covers), 2, 3 and 5, dilation, ceil_mode, channels-last with
# more than one column tile, a 3-D input; the last case (stride 1) and unevenly strided planes
# go to the gather kernel
S2_CASES = [
    "((T([2, 3, 5, 5], bf16), T([2, 3, 9, 9], bf16), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 3, 5, 5], i64)), {})",
    "((T([2, 3, 4, 5], f16), T([2, 3, 9, 11], f16), [2, 2], [2, 2], [0, 0], [1, 1], False, T([2, 3, 4, 5], i64)), {})",
    "((T([1, 2, 5, 6], f32), T([1, 2, 9, 11], f32), [1, 1], [2, 2], [0, 0], [1, 1], False, T([1, 2, 5, 6], i64)), {})",
    "((T([2, 2, 5, 6], f32), T([2, 2, 11, 12], f32), [3, 3], [2, 2], [1, 1], [2, 2], True, T([2, 2, 5, 6], i64)), {})",
    "((T([2, 3, 7, 7], f64), T([2, 3, 13, 12], f64), [5, 5], [2, 2], [2, 2], [1, 1], True, T([2, 3, 7, 7], i64)), {})",
    "((T([2, 130, 4, 3], bf16, [1560, 1, 390, 130]), T([2, 130, 7, 6], bf16, [5460, 1, 780, 130]), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 130, 4, 3], i64, [1560, 1, 390, 130])), {})",
    "((T([3, 4, 6], f16), T([3, 7, 11], f16), [3, 3], [2, 2], [1, 1], [1, 1], True, T([3, 4, 6], i64)), {})",
    "((T([2, 3, 9, 9], f32), T([2, 3, 9, 9], f32), [3, 3], [1, 1], [1, 1], [1, 1], False, T([2, 3, 9, 9], i64)), {})",
    "((T([2, 3, 5, 5], f32, [100, 25, 5, 1]), T([2, 3, 9, 9], f32), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 3, 5, 5], i64)), {})",
]

# max_pool2d backward with stride 2 on NCHW with dense grad_output / indices (the pair kernel,
# `_max_pool_bwd_s2_vec_kernel`): 3x3 pad 1 on even (aligned vector loads) and odd planes, a
# plane row wider than one program, kernel 2 pad 0 (no window shift), kernel 3 pad 0 (windows
# one column left: dj = -1) with ceil_mode, kernel 4 pad 2 (a window row past the block rows),
# one-row and two-column planes (more window rows / columns than block ones), every float dtype, a 3-D input. The last three go to the
# block kernel: a window two columns away (kernel 5 pad 0), strided grad_output, channels-last
S2_VEC_CASES = [
    "((T([2, 3, 8, 8], bf16), T([2, 3, 16, 16], bf16), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 3, 8, 8], i64)), {})",
    "((T([2, 3, 7, 6], f16), T([2, 3, 13, 11], f16), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 3, 7, 6], i64)), {})",
    "((T([1, 2, 5, 130], f32), T([1, 2, 9, 260], f32), [3, 3], [2, 2], [1, 1], [1, 1], False, T([1, 2, 5, 130], i64)), {})",
    "((T([2, 3, 4, 5], bf16), T([2, 3, 9, 11], bf16), [2, 2], [2, 2], [0, 0], [1, 1], False, T([2, 3, 4, 5], i64)), {})",
    "((T([2, 2, 5, 5], f16), T([2, 2, 10, 11], f16), [3, 3], [2, 2], [0, 0], [1, 1], True, T([2, 2, 5, 5], i64)), {})",
    "((T([2, 2, 5, 6], f32), T([2, 2, 7, 9], f32), [4, 4], [2, 2], [2, 2], [1, 1], True, T([2, 2, 5, 6], i64)), {})",
    "((T([3, 2, 1, 4], bf16), T([3, 2, 1, 7], bf16), [1, 3], [2, 2], [0, 1], [1, 1], False, T([3, 2, 1, 4], i64)), {})",
    "((T([2, 2, 4, 2], f64), T([2, 2, 6, 2], f64), [2, 2], [2, 2], [1, 1], [1, 1], False, T([2, 2, 4, 2], i64)), {})",
    "((T([3, 5, 6], f16), T([3, 9, 11], f16), [3, 3], [2, 2], [1, 1], [1, 1], False, T([3, 5, 6], i64)), {})",
    "((T([2, 3, 3, 4], f32), T([2, 3, 10, 11], f32), [5, 5], [2, 2], [0, 0], [1, 1], False, T([2, 3, 3, 4], i64)), {})",
    "((T([2, 3, 4, 4], bf16, [96, 32, 8, 1]), T([2, 3, 8, 8], bf16), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 3, 4, 4], i64)), {})",
    "((T([2, 5, 4, 4], f16, [80, 1, 20, 5]), T([2, 5, 8, 8], f16, [320, 1, 40, 5]), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 5, 4, 4], i64, [80, 1, 20, 5])), {})",
]
S2_VEC_KERNELS = ["_max_pool_bwd_s2_vec_kernel"] * 9 + ["_max_pool_bwd_s2_kernel"] * 3

# avg_pool2d on dense NCHW inputs. Windows that tile the plane (the row-pair kernel): KW 2 and
# 1, planes tiled exactly and with unused last rows/columns, ceil_mode that adds no window, a
# divisor override, every float dtype, a 3-D input, a plane wider than one column tile. Then
# the flat kernel: 3x3/1 pad 1 with and without count_include_pad on odd planes (17, 35 wide)
# and on an output one program covers exactly (no tail mask), 5x5 pad 2, stride 2 pad 1,
# ceil_mode windows hanging off the plane, KW 3 tiles, a divisor override; 1x1 windows tile
# the plane (KW 1); the last two (channels-last, strided) go to the generic kernel
FWD_CASES = [
    "((T([2, 3, 8, 12], bf16), [2, 2], [2, 2], [0, 0], True, False), {})",
    "((T([2, 3, 7, 9], f16), [2, 2], [2, 2]), {})",
    "((T([3, 6, 10], f32), [3, 2], [3, 2], [0, 0], False, True, 5), {})",
    "((T([1, 2, 9, 5], f64), [3, 1], [3, 1]), {})",
    "((T([1, 2, 4, 2100], f16), [2, 2], [2, 2]), {})",
    "((T([2, 5, 17, 17], f16), [3, 3], [1, 1], [1, 1]), {})",
    "((T([2, 3, 35, 35], f16), [3, 3], [1, 1], [1, 1], False, False), {})",
    "((T([2, 4, 8, 8], bf16), [3, 3], [1, 1], [1, 1]), {})",
    "((T([2, 3, 9, 11], bf16), [5, 5], [1, 1], [2, 2], False, False), {})",
    "((T([2, 3, 9, 10], f32), [3, 3], [2, 2], [1, 1], True, True), {})",
    "((T([2, 3, 7, 8], bf16), [3, 3], [2, 2], [1, 0], True, False), {})",
    "((T([2, 3, 9, 9], f16), [3, 3], [3, 3]), {})",
    "((T([3, 7, 5], f64), [3, 3], [1, 1], [1, 1], False, True, 4), {})",
    "((T([2, 3, 5, 6], f32), [1, 1], [1, 1]), {})",
    "((T([2, 7, 9, 9], f16, [567, 1, 63, 7]), [2, 2], [2, 2]), {})",
    "((T([2, 3, 9, 9], f32, [486, 162, 18, 2]), [3, 3], [1, 1], [1, 1]), {})",
]
FWD_KERNELS = (
    ["_avg_pool_tile_kernel"] * 5 + ["_avg_pool_flat_kernel"] * 8 + ["_avg_pool_tile_kernel"]
    + ["_avg_pool_kernel"] * 2
)  # fmt: skip

OUTPUT_FORMAT_CASES = [
    ("max_pool2d_with_indices.default", CASES["max_pool2d_with_indices.default"][0]),
    ("max_pool2d_with_indices_backward.default", CASES["max_pool2d_with_indices_backward.default"][0]),
    ("avg_pool2d.default", CASES["avg_pool2d.default"][2]),
    ("avg_pool2d_backward.default", CASES["avg_pool2d_backward.default"][2]),
    ("_adaptive_avg_pool2d.default", CASES["_adaptive_avg_pool2d.default"][1]),
]  # fmt: skip


def _write(op: str, cases: list[TestCase], variant: int = 0) -> str:
    text = pooling.WRITERS[op](KernelRequest(op, str(codegen.schema_of(op)), cases, variant))
    assert text is not None, f"the writer declined {op}"
    return text


def _evaluator_inputs(op: str, case: TestCase, gen: torch.Generator):
    return materialize(op, case, "cpu", int(gen.initial_seed()))


def _force_int64_offsets(text: str) -> str:
    """The same file with every launch on its int64-offset path (sizes here are small)."""
    old = "def _wide(*tensors):\n    return "
    assert old in text
    return text.replace(old, old + "True or ")


@pytest.mark.parametrize("op", sorted(CASES))
def test_pooling_matches_eager_on_channels_last_ceil_mode_and_odd_sizes(op: str) -> None:
    cases = [parse_case(c) for c in CASES[op]]
    assert run_generated(op, _write(op, cases), cases, make_args=_evaluator_inputs) == []


@pytest.mark.parametrize("op", sorted(CASES))
def test_pooling_int64_offset_path_matches_eager(op: str) -> None:
    cases = [parse_case(c) for c in CASES[op][:3]]
    text = _force_int64_offsets(_write(op, cases))
    assert run_generated(op, text, cases, make_args=_evaluator_inputs) == []


@pytest.mark.parametrize("op", sorted(CASES))
def test_pooling_conservative_variant_matches_eager(op: str) -> None:
    cases = [parse_case(c) for c in CASES[op]]
    text = _write(op, cases, variant=1)
    assert "_CONSERVATIVE = True" in text
    assert run_generated(op, text, cases, make_args=_evaluator_inputs) == []


@pytest.mark.parametrize(("op", "text"), OUTPUT_FORMAT_CASES)
def test_pooling_outputs_keep_eager_memory_format(op: str, text: str) -> None:
    case = parse_case(text)
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(op, [case]), Path(tmp))
        args, kwargs = _evaluator_inputs(op, case, torch.Generator().manual_seed(0))
        name, overload = op.split(".")
        want = getattr(getattr(torch.ops.aten, name), overload)(*args, **kwargs)
        got = kernel(*args, **kwargs)
    wants = want if isinstance(want, tuple) else (want,)
    gots = got if isinstance(got, tuple) else (got,)
    assert [g.stride() for g in gots] == [w.stride() for w in wants]


def test_pooling_repeated_calls_reuse_the_launch_plan_and_stay_correct() -> None:
    op = "avg_pool2d.default"
    cases = [parse_case(CASES[op][1])] * 3
    assert run_generated(op, _write(op, cases), cases, make_args=_evaluator_inputs) == []


@pytest.mark.slow
def test_pooling_kernels_compile_for_an_sm90_gpu() -> None:
    """The interpreter accepts code the GPU compiler rejects; compile real launches for sm_90,
    both layouts and the int64-offset path."""
    batch = []
    for op, texts in CASES.items():
        cases = [parse_case(c) for c in texts]
        batch.append((op, _write(op, cases), cases))
        batch.append((op, _force_int64_offsets(_write(op, cases[:1])), cases[:1]))
    for op, texts in (
        ("avg_pool2d.default", FWD_CASES),
        ("avg_pool2d_backward.default", TILE_CASES),
        ("max_pool2d_with_indices_backward.default", S2_CASES),
        ("max_pool2d_with_indices_backward.default", S2_VEC_CASES),
    ):
        cases = [parse_case(c) for c in texts]
        batch.append((op, _write(op, cases), cases))
        batch.append((op, _force_int64_offsets(_write(op, cases[:4])), cases[:4]))
    op = "max_pool2d_with_indices_backward.default"
    cases = [parse_case(c) for c in S2_VEC_CASES[:9]]
    batch.append((op, _s2_vec_rows(_write(op, cases), 1), cases))
    assert_compiles_for_sm90(batch)


def _launched_kernels(op: str, text: str, cases: list[TestCase]) -> list[str]:
    """Names of the kernels the file's cached launch plans use after running `cases`."""
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, text, Path(tmp))
        for index, case in enumerate(cases):
            kernel(*_evaluator_inputs(op, case, torch.Generator().manual_seed(index))[0])
        plans = kernel.__globals__["_PLANS"]
        return [plan[2].__name__ if plan[2] is not None else "" for plan in plans.values()]


def test_avg_pool_backward_takes_the_tile_kernel_only_for_exact_dense_windows() -> None:
    op = "avg_pool2d_backward.default"
    cases = [parse_case(c) for c in TILE_CASES]
    names = _launched_kernels(op, _write(op, cases), cases)
    tile, gather = "_avg_pool_bwd_tile_kernel", "_avg_pool_bwd_kernel"
    assert names == [tile] * 6 + [gather] * 3


def test_avg_pool_backward_tile_switch_off_uses_the_gather_kernel() -> None:
    op = "avg_pool2d_backward.default"
    cases = [parse_case(c) for c in TILE_CASES[:2]]
    text = _write(op, cases).replace("_AVG_POOL_BWD_TILE = True", "_AVG_POOL_BWD_TILE = False")
    assert set(_launched_kernels(op, text, cases)) == {"_avg_pool_bwd_kernel"}


def test_max_pool_backward_takes_the_stride2_kernels_only_for_stride_2() -> None:
    op = "max_pool2d_with_indices_backward.default"
    cases = [parse_case(c) for c in S2_CASES]
    names = _launched_kernels(op, _write(op, cases), cases)
    vec, block, gather = (
        "_max_pool_bwd_s2_vec_kernel",
        "_max_pool_bwd_s2_kernel",
        "_max_pool_bwd_kernel",
    )
    assert names == [vec] * 5 + [block, vec] + [gather] * 2


def _s2_vec_rows(text: str, rows: int) -> str:
    """The same file with `rows` block rows per lane in the pair kernel."""
    old = "_MAX_POOL_BWD_S2_VEC_ROWS = 1"
    assert old in text
    return text.replace(old, f"_MAX_POOL_BWD_S2_VEC_ROWS = {rows}")


def _bits(t: torch.Tensor) -> torch.Tensor:
    """`t`'s bit patterns (tells -0.0 from 0.0, unlike torch.equal)."""
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _outputs(op: str, text: str, cases: list[TestCase], gpu_blocks: bool = False) -> list:
    """The file's result on each case (the evaluator's inputs, seed = case number); with
    `gpu_blocks`, launch plans take the GPU's program sizes (the interpreter's are larger)."""
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, text, Path(tmp))
        if gpu_blocks:
            kernel.__globals__["_INTERPRET"] = False
        results = []
        for index, case in enumerate(cases):
            args, kwargs = _evaluator_inputs(op, case, torch.Generator().manual_seed(index))
            results.append(kernel(*args, **kwargs))
        return results


@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("gpu_blocks", [False, True])
def test_max_pool_backward_stride2_vec_path_is_bit_identical_to_the_block_kernel(
    rows: int, gpu_blocks: bool
) -> None:
    """Same window order, same fp32 sums: the pair kernel changes no bit (signed zeros
    included), with one or two block rows per lane, with big and with small programs."""
    op = "max_pool2d_with_indices_backward.default"
    cases = [parse_case(c) for c in S2_VEC_CASES[:9]]
    text = _s2_vec_rows(_write(op, cases), rows)
    off = text.replace("_MAX_POOL_BWD_S2_VEC = True", "_MAX_POOL_BWD_S2_VEC = False")
    assert set(_launched_kernels(op, off, cases)) == {"_max_pool_bwd_s2_kernel"}
    got = _outputs(op, text, cases, gpu_blocks)
    want = _outputs(op, off, cases)
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.stride() == w.stride(), index
        assert torch.equal(_bits(g), _bits(w)), index


def test_max_pool_backward_stride2_vec_path_only_for_dense_nchw_and_one_column_shifts() -> None:
    op = "max_pool2d_with_indices_backward.default"
    cases = [parse_case(c) for c in S2_VEC_CASES]
    assert _launched_kernels(op, _write(op, cases), cases) == S2_VEC_KERNELS


def test_max_pool_backward_stride2_switch_off_uses_the_gather_kernel() -> None:
    op = "max_pool2d_with_indices_backward.default"
    cases = [parse_case(c) for c in S2_CASES[:2]]
    text = _write(op, cases).replace("_MAX_POOL_BWD_S2 = True", "_MAX_POOL_BWD_S2 = False")
    assert set(_launched_kernels(op, text, cases)) == {"_max_pool_bwd_kernel"}


def test_avg_pool_dense_nchw_paths_match_eager() -> None:
    op = "avg_pool2d.default"
    cases = [parse_case(c) for c in FWD_CASES]
    assert run_generated(op, _write(op, cases), cases, make_args=_evaluator_inputs) == []


def test_avg_pool_dense_nchw_paths_int64_offsets_match_eager() -> None:
    op = "avg_pool2d.default"
    cases = [parse_case(c) for c in FWD_CASES[:1] + FWD_CASES[5:8] + FWD_CASES[10:11]]
    text = _force_int64_offsets(_write(op, cases))
    assert run_generated(op, text, cases, make_args=_evaluator_inputs) == []


def test_avg_pool_takes_the_tile_kernel_for_tiling_windows_else_the_flat_one_on_dense_nchw() -> (
    None
):
    op = "avg_pool2d.default"
    cases = [parse_case(c) for c in FWD_CASES]
    assert _launched_kernels(op, _write(op, cases), cases) == FWD_KERNELS


def test_avg_pool_tile_switch_off_uses_the_flat_kernel_and_both_off_the_generic_one() -> None:
    op = "avg_pool2d.default"
    cases = [parse_case(c) for c in FWD_CASES[:2]]
    text = _write(op, cases).replace("_AVG_POOL_TILE = True", "_AVG_POOL_TILE = False")
    assert run_generated(op, text, cases, make_args=_evaluator_inputs) == []
    assert set(_launched_kernels(op, text, cases)) == {"_avg_pool_flat_kernel"}
    text = text.replace("_AVG_POOL_FLAT = True", "_AVG_POOL_FLAT = False")
    assert set(_launched_kernels(op, text, cases)) == {"_avg_pool_kernel"}


# The special-purpose paths, each on its own cases: (name, op, cases, how many of them also run
# with every launch forced onto its int64-offset path)
PATHS = [
    ("avg_pool_backward_tile", "avg_pool2d_backward.default", TILE_CASES, 4),
    ("max_pool_backward_stride2", "max_pool2d_with_indices_backward.default", S2_CASES, 6),
    ("max_pool_backward_stride2_vec", "max_pool2d_with_indices_backward.default", S2_VEC_CASES, 9),
]


@pytest.mark.parametrize(("name", "op", "texts", "wide"), PATHS, ids=[p[0] for p in PATHS])
def test_special_path_matches_eager(name: str, op: str, texts: list[str], wide: int) -> None:
    cases = [parse_case(c) for c in texts]
    assert run_generated(op, _write(op, cases), cases, make_args=_evaluator_inputs) == []


@pytest.mark.parametrize(("name", "op", "texts", "wide"), PATHS, ids=[p[0] for p in PATHS])
def test_special_path_int64_offsets_match_eager(
    name: str, op: str, texts: list[str], wide: int
) -> None:
    cases = [parse_case(c) for c in texts[:wide]]
    text = _force_int64_offsets(_write(op, cases))
    assert run_generated(op, text, cases, make_args=_evaluator_inputs) == []
