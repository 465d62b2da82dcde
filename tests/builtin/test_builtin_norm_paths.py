"""The GPU-sized code paths of the builtin layer norm backward and group norm kernels, in Triton's
CPU interpreter.

The interpreter normally plans small tiles; these tests patch the generated module's `_INTERPRET`
(the wrapper's planning only: the kernels still run in the interpreter) or its knobs so that the
paths the H200 takes run here too: the layer norm backward's tile-shaped column sums over several
row steps per program with a ragged last step and the one-step partial-row reduction, and group
norm's split kernels with GPU-sized plans (chunks starting inside odd planes, 16 warps for many
groups).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import torch
from builtin_support import (
    assert_compiles_for_sm90,
    compare,
    compare_with_fp32_eager,
    load_kernel,
    materialize_case,
)

from agent.providers.builtin import codegen
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import TestCase, parse_case

LN_BWD = "native_layer_norm_backward.default"
GN = "native_group_norm.default"


def _write(module: str, op: str, cases: list[TestCase]) -> str:
    mod = importlib.import_module(f"agent.providers.builtin.{module}")
    text = mod.WRITERS[op](KernelRequest(op, str(codegen.schema_of(op)), cases, 0))
    assert text is not None
    return text


def _load(module: str, op: str, cases: list[TestCase], tmp: Path, **knobs: Any):
    """The op's kernel with module constants of the generated file replaced by `knobs`."""
    kernel = load_kernel(op, _write(module, op, cases), tmp)
    for name, value in knobs.items():
        assert name in kernel.__globals__, name
        kernel.__globals__[name] = value
    return kernel


def _knob_id(knobs: dict) -> str:
    """A parametrized test's id from the module constants it sets."""
    return ",".join(f"{a}={b}" for a, b in knobs.items()) or "defaults"


# ---------------------------------------------------------------- layer norm backward

# [rows, N]: rows that leave the last program a partial row step, N below and at the padded
# tile width, each dtype, every output_mask pattern the kernel branches on, no weight
LN_BWD_CASES = [
    "((T([37, 768], bf16), T([37, 768], bf16), [768], T([37, 1], f32), T([37, 1], f32), T([768], bf16), T([768], bf16), [True, True, True]), {})",
    "((T([3, 7, 300], f16), T([3, 7, 300], f16), [300], T([3, 7, 1], f32), T([3, 7, 1], f32), T([300], f16), T([300], f16), [True, True, True]), {})",
    "((T([50, 33], f32), T([50, 33], f32), [33], T([50, 1], f32), T([50, 1], f32), T([33], f32), T([33], f32), [False, True, True]), {})",
    "((T([23, 64], f32), T([23, 64], f32), [64], T([23, 1], f32), T([23, 1], f32), T([64], f32), None, [True, True, False]), {})",
    "((T([19, 30], f64), T([19, 30], f64), [30], T([19, 1], f64), T([19, 1], f64), None, T([30], f64), [True, False, True]), {})",
    "((T([1, 128], bf16), T([1, 128], bf16), [128], T([1, 1], f32), T([1, 1], f32), T([128], bf16), T([128], bf16), [True, True, True]), {})",
]

# knobs of the generated file: GPU planning (one-warp programs stepping one row; big tiles, 4
# pipeline stages, 2 programs per "SM" of the CPU's 4-program target for longer rows) and the swept
# alternatives, each forcing a different step shape
LN_BWD_KNOBS = [
    {"_INTERPRET": False},
    {"_INTERPRET": False, "_LNB_SPLIT_ROW": False},
    {"_INTERPRET": False, "_LNB_WARP_ROW": 0},
    {"_INTERPRET": False, "_LNB_WARP_ROW": 0, "_LNB_ROWS": 8, "_LNB_WARPS": 4, "_LNB_STAGES": 1},
    {"_INTERPRET": False, "_LNB_WARP_ROW": 0, "_LNB_ROWS": 1, "_LNB_PROGRAMS_PER_SM": 8,
     "_LNB_SUM_ROWS": 2, "_LNB_SUM_COLS": 4},
    {},
]  # fmt: skip


def _ln_bwd_problems(kernel: Any, cases: list[str]) -> list[str]:
    """Outputs against eager on fp32 copies rounded to the dtype (CPU eager sums half-precision
    weight gradients in half precision; the kernel accumulates in fp32)."""
    eager = torch.ops.aten.native_layer_norm_backward.default
    problems: list[str] = []
    for index, text in enumerate(cases):
        args, kwargs = materialize_case(
            LN_BWD, parse_case(text), torch.Generator().manual_seed(index)
        )
        got = kernel(*args, **kwargs)
        problems += [
            f"case {index}: {p}"
            for p in compare_with_fp32_eager("output", eager, got, args, kwargs)
        ]
    return problems


@pytest.mark.parametrize("knobs", LN_BWD_KNOBS, ids=_knob_id)
def test_layer_norm_backward_matches_eager_on_gpu_sized_plans(knobs: dict, tmp_path: Path) -> None:
    cases = [parse_case(c) for c in LN_BWD_CASES]
    kernel = _load("norm", LN_BWD, cases, tmp_path, **knobs)
    assert _ln_bwd_problems(kernel, LN_BWD_CASES) == []


def test_layer_norm_backward_takes_768_wide_rows_as_two_tiles(tmp_path: Path) -> None:
    """GPU planning splits a 768-wide row into tiles of 512 and 256 columns (one tile would pad
    it to 1024), and the two tiles' sums make the same results as eager's."""
    case = LN_BWD_CASES[0]
    kernel = _load("norm", LN_BWD, [parse_case(case)], tmp_path, _INTERPRET=False)
    launched: list[dict] = []
    rows_kernel = kernel.__globals__["_ln_bwd"]

    class Spy:
        def __getitem__(self, grid):
            launch = rows_kernel[grid]

            def run(*args, **kwargs):
                launched.append(kwargs)
                return launch(*args, **kwargs)

            return run

    kernel.__globals__["_ln_bwd"] = Spy()
    assert _ln_bwd_problems(kernel, [case]) == []
    assert [(k["BLOCK_N"], k["BLOCK_N2"]) for k in launched] == [(512, 256)]


def test_layer_norm_backward_gpu_plan_is_deterministic_over_ragged_row_steps(
    tmp_path: Path,
) -> None:
    """The 37-row case under GPU planning for rows longer than a warp's (`_LNB_WARP_ROW` 0):
    4-row steps, 2 programs of 20 rows (the CPU's target of 4 programs, 2 per "SM" of 4), so
    the tile-shaped column sums add over 5 steps and the second program ends on a 1-row step;
    a second call gives the same bits."""
    case = parse_case(LN_BWD_CASES[0])
    kernel = _load("norm", LN_BWD, [case], tmp_path, _INTERPRET=False, _LNB_WARP_ROW=0)
    assert kernel.__globals__["_ln_blocks"](37, 768, 1) == (True, 4, 1024)
    args, kwargs = materialize_case(LN_BWD, case, torch.Generator().manual_seed(0))
    first = kernel(*args, **kwargs)
    again = kernel(*args, **kwargs)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))


# ---------------------------------------------------------------- group norm

# odd HxW (every group and channel starts unaligned), groups shorter than a 16-byte vector,
# channels per group with planes shorter (per-element weights) and longer (per channel) than a
# loop step, weight or bias missing, each dtype
GN_CASES = [
    "((T([2, 6, 37], f16), T([6], f16), T([6], f16), 2, 6, 37, 6, 1e-05), {})",
    "((T([3, 8, 3], bf16), T([8], bf16), T([8], bf16), 3, 8, 3, 8, 1e-05), {})",
    "((T([2, 12, 5, 5], f32), T([12], f32), T([12], f32), 2, 12, 25, 4, 1e-05), {})",
    "((T([2, 4, 1001], bf16), None, T([4], bf16), 2, 4, 1001, 2, 1e-05), {})",
    "((T([2, 6, 77], f64), T([6], f64), None, 2, 6, 77, 3, 1e-05), {})",
    "((T([4, 4, 999], f16), T([4], f16), T([4], f16), 4, 4, 999, 4, 1e-05), {})",
]


def _gn_problems(kernel: Any, cases: list[str]) -> list[str]:
    eager = torch.ops.aten.native_group_norm.default
    problems: list[str] = []
    for index, text in enumerate(cases):
        args, kwargs = materialize_case(GN, parse_case(text), torch.Generator().manual_seed(index))
        got = kernel(*args, **kwargs)
        want = eager(*args, **kwargs)
        problems += [f"case {index}: {p}" for p in compare("output", got, want)]
    return problems


GN_KNOBS = [
    {},  # the interpreter's plan
    # GPU planning with short steps and many programs: several chunks per channel, each starting
    # unaligned inside an odd plane, and multi-chunk groups across short planes
    {"_INTERPRET": False, "_GN_BLOCK": 32, "_GN_TARGET_PROGRAMS": 256},
    {"_INTERPRET": False, "_GN_BLOCK": 64, "_GN_TARGET_PROGRAMS": 64, "_GN_MANY_GROUPS": 1},
]  # fmt: skip


@pytest.mark.parametrize("knobs", GN_KNOBS, ids=_knob_id)
def test_group_norm_matches_eager_on_each_path(knobs: dict, tmp_path: Path) -> None:
    cases = [parse_case(c) for c in GN_CASES]
    kernel = _load("norm_extra", GN, cases, tmp_path, **knobs)
    assert _gn_problems(kernel, GN_CASES) == []


def _assert_rounds_statistics_like_cuda(kernel: Any, case: str) -> None:
    """y = x*a + (beta - a*mean) from the stored f16 statistics, as CUDA eager computes it (one
    channel per group); the statistics themselves match eager's."""
    args, _ = materialize_case(GN, parse_case(case), torch.Generator().manual_seed(0))
    x, w, b = args[0], args[1], args[2]
    out, mean, rstd = kernel(*args)
    a = rstd.float() * w.float()  # [N, C]: one channel per group
    want = (x.float() * a[:, :, None] + (b.float() - a * mean.float())[:, :, None]).half()
    torch.testing.assert_close(out, want, atol=2e-3, rtol=2e-3)
    eager = torch.ops.aten.native_group_norm.default(*args)
    torch.testing.assert_close(mean, eager[1], atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(rstd, eager[2], atol=2e-3, rtol=2e-3)


def test_group_norm_split_path_rounds_statistics_like_cuda_eager(tmp_path: Path) -> None:
    """ROUND_STATS in the split kernels with chunks starting inside odd planes: y = x*a +
    (beta - a*mean) from the stored f16 statistics, as CUDA eager computes it (run here on CPU
    tensors)."""
    case = GN_CASES[5]
    kernel = _load("norm_extra", GN, [parse_case(case)], tmp_path, _INTERPRET=False,
                   _GN_BLOCK=32, _GN_TARGET_PROGRAMS=64, _ROUND_STATS_DEVICES=("cpu",))  # fmt: skip
    _assert_rounds_statistics_like_cuda(kernel, case)


def test_new_paths_compile_for_an_sm90_gpu() -> None:
    """The trace's largest cases, GPU-planned (the compile child runs without the interpreter)."""
    jobs = {
        ("norm", LN_BWD): [
            "((T([8, 1024, 768], bf16), T([8, 1024, 768], bf16), [768], T([8, 1024, 1], f32), T([8, 1024, 1], f32), T([768], bf16), T([768], bf16), [True, True, True]), {})",
            "((T([8, 128, 128], f32), T([8, 128, 128], f32), [128], T([8, 128, 1], f32), T([8, 128, 1], f32), T([128], f32), T([128], f32), [True, True, True]), {})",
        ],
        ("norm_extra", GN): [
            "((T([4, 512, 3999], f16), T([512], f16), T([512], f16), 4, 512, 3999, 512, 1e-05), {})",
            "((T([4, 1024, 7], f32), T([1024], f32), T([1024], f32), 4, 1024, 7, 256, 1e-05), {})",
            "((T([2, 512, 4100], bf16), T([512], bf16), None, 2, 512, 4100, 256, 1e-05), {})",
            "((T([2, 512, 33], f64), None, None, 2, 512, 33, 128, 1e-05), {})",
            "((T([4, 512, 31999], f16), T([512], f16), T([512], f16), 4, 512, 31999, 512, 1e-05), {})",
            "((T([32, 128, 28, 28], f16), T([128], f16), T([128], f16), 32, 128, 784, 1, 1e-05), {})",
        ],
    }  # fmt: skip
    batch = []
    for (module, op), texts in jobs.items():
        cases = [parse_case(t) for t in texts]
        batch.append((op, _write(module, op, cases), cases))
    assert_compiles_for_sm90(batch)


# ---------------------------------------------------------------- group norm, whole groups

# the whole-group kernel (forced with _GN_WHOLE_MIN_GROUPS=1): a 32768-element block over an odd
# 31999-element group, one channel per group with and without weight, several channels per group
# (per-element weight and bias) in each dtype, weight or bias missing, a group count that leaves
# the last program of packed groups partly empty
GN_WHOLE_CASES = [
    "((T([2, 3, 31999], f16), T([3], f16), T([3], f16), 2, 3, 31999, 3, 1e-05), {})",
    "((T([3, 6, 37], bf16), None, T([6], bf16), 3, 6, 37, 6, 1e-05), {})",
    "((T([2, 12, 5, 5], f32), T([12], f32), T([12], f32), 2, 12, 25, 4, 1e-05), {})",
    "((T([2, 4, 1001], bf16), T([4], bf16), T([4], bf16), 2, 4, 1001, 2, 1e-05), {})",
    "((T([2, 6, 77], f64), T([6], f64), None, 2, 6, 77, 3, 1e-05), {})",
    "((T([3, 9, 7], f16), T([9], f16), T([9], f16), 3, 9, 7, 3, 1e-05), {})",
    "((T([5, 6, 999], f16), None, None, 5, 6, 999, 6, 1e-05), {})",
]

GN_WHOLE_KNOBS = [
    {"_GN_WHOLE_MIN_GROUPS": 1, "_GN_PIPE": False},  # one group per program
    # packed groups: up to 8 per program (9 and 15 groups leave the last program partial)
    {"_GN_WHOLE_MIN_GROUPS": 1, "_GN_WHOLE_PROGRAMS": 1, "_GN_WHOLE_WARPS": 4, "_GN_PIPE": False},
]  # fmt: skip


@pytest.mark.parametrize("knobs", GN_WHOLE_KNOBS, ids=_knob_id)
def test_group_norm_whole_group_kernel_matches_eager(knobs: dict, tmp_path: Path) -> None:
    cases = [parse_case(c) for c in GN_WHOLE_CASES]
    kernel = _load("norm_extra", GN, cases, tmp_path, **knobs)
    plan = kernel.__globals__["_gn_whole_plan"]
    assert all(
        plan(c.args[3] * c.args[6], c.args[4] // c.args[6], c.args[4] // c.args[6] * c.args[5])
        for c in cases
    )
    assert _gn_problems(kernel, GN_WHOLE_CASES) == []


def test_group_norm_whole_group_plan_takes_only_many_short_groups(tmp_path: Path) -> None:
    """The suite's [4, 512, 31999] (2048 one-channel groups) takes one 32768-element program per
    group at 8 warps (the cap); its G=1 cases (32 groups of 25K-200K elements), multi-channel groups past
    16384 elements and fp64 groups past 16384 keep the split path; short groups are packed into
    4096-element tiles with about 512 programs left."""
    case = parse_case(GN_CASES[0])
    plan = _load("norm_extra", GN, [case], tmp_path).__globals__["_gn_whole_plan"]
    assert plan(2048, 1, 31999) == (1, 32768, 8)
    assert plan(32, 512, 49 * 512) is None
    assert plan(32, 64, 64 * 3136) is None
    assert plan(4096, 2, 2 * 8200) is None
    assert plan(4096, 2, 2 * 8000) == (1, 16384, 8)
    assert plan(1024, 4, 28) == (2, 32, 1)
    assert plan(65536, 4, 28) == (128, 32, 8)
    assert plan(2048, 1, 16384, 8) == (1, 16384, 8)  # fp64: two registers an element
    assert plan(2048, 1, 16385, 8) is None


def test_group_norm_whole_group_kernel_rounds_statistics_like_cuda_eager(tmp_path: Path) -> None:
    """ROUND_STATS in the whole-group kernel: y = x*a + (beta - a*mean) from the stored f16
    statistics, as CUDA eager computes it (run here on CPU tensors)."""
    case = GN_CASES[5]
    kernel = _load("norm_extra", GN, [parse_case(case)], tmp_path, _GN_WHOLE_MIN_GROUPS=1,
                   _GN_PIPE=False, _ROUND_STATS_DEVICES=("cpu",))  # fmt: skip
    assert kernel.__globals__["_gn_whole_plan"](16, 1, 999) == (1, 1024, 4)
    _assert_rounds_statistics_like_cuda(kernel, case)


# ---------------------------------------------------------------- group norm, persistent kernel

# the persistent whole-group kernel (f16/bf16, one channel per group, >= 1024 elements; forced
# with _GN_WHOLE_MIN_GROUPS=1, 3 or 2 programs): odd group lengths so that groups start at every
# offset modulo the 8-element chunk (heads and tails of 0-7 elements), a 4096-element group
# count that is all whole chunks, 1028 (a tail of 4), the suite's 31999, weight and/or bias
# missing, group counts that are and are not a multiple of the programs
GN_PIPE_CASES = [
    "((T([2, 5, 1999], f16), T([5], f16), T([5], f16), 2, 5, 1999, 5, 1e-05), {})",
    "((T([3, 3, 1031], bf16), None, None, 3, 3, 1031, 3, 1e-05), {})",
    "((T([1, 7, 4096], f16), T([7], f16), None, 1, 7, 4096, 7, 1e-05), {})",
    "((T([2, 4, 1028], f16), None, T([4], f16), 2, 4, 1028, 4, 1e-05), {})",
    "((T([2, 3, 31999], bf16), T([3], bf16), T([3], bf16), 2, 3, 31999, 3, 1e-05), {})",
]

GN_PIPE_KNOBS = [
    {"_GN_WHOLE_MIN_GROUPS": 1},
    {"_GN_WHOLE_MIN_GROUPS": 1, "_GN_PIPE_CPU_PROGRAMS": 2, "_GN_PIPE_VEC": 4},
    {"_GN_WHOLE_MIN_GROUPS": 1, "_GN_PIPE_CPU_PROGRAMS": 2, "_GN_PIPE_VEC": 2},
]  # fmt: skip


def _gn_pipe_planned(kernel: Any, text: str) -> bool:
    args, _ = materialize_case(GN, parse_case(text), torch.Generator().manual_seed(0))
    N, C, HW, G = args[3:7]
    return kernel.__globals__["_gn_pipe_plan"](N * G, C // G, C // G * HW, args[0]) is not None


@pytest.mark.parametrize("knobs", GN_PIPE_KNOBS, ids=_knob_id)
def test_group_norm_persistent_kernel_matches_eager(knobs: dict, tmp_path: Path) -> None:
    cases = [parse_case(c) for c in GN_PIPE_CASES]
    kernel = _load("norm_extra", GN, cases, tmp_path, **knobs)
    assert all(_gn_pipe_planned(kernel, c) for c in GN_PIPE_CASES)
    assert _gn_problems(kernel, GN_PIPE_CASES) == []


def test_group_norm_persistent_kernel_matches_the_plain_whole_group_kernel(tmp_path: Path) -> None:
    """The persistent kernel agrees with its fallback, the plain whole-group kernel (both
    two-pass in fp32 over the same elements, summed in another order), at eager's tolerance."""
    cases = [parse_case(c) for c in GN_PIPE_CASES]
    pipe = _load("norm_extra", GN, cases, tmp_path / "pipe", _GN_WHOLE_MIN_GROUPS=1)
    plain = _load("norm_extra", GN, cases, tmp_path / "plain", _GN_WHOLE_MIN_GROUPS=1,
                  _GN_PIPE=False)  # fmt: skip
    for index, text in enumerate(GN_PIPE_CASES):
        args, _ = materialize_case(GN, parse_case(text), torch.Generator().manual_seed(index))
        for got, want in zip(pipe(*args), plain(*args), strict=True):
            assert compare("output", got, want) == [], index


def test_group_norm_persistent_plan_takes_only_aligned_long_one_channel_16bit_groups(
    tmp_path: Path,
) -> None:
    """f32 groups, several channels per group, groups under _GN_PIPE_MIN_D, packed short groups,
    an x that is not 16-byte aligned (its 32-bit word loads) and fewer than two groups per
    program keep the plain whole-group kernel."""
    case = parse_case(GN_PIPE_CASES[0])
    kernel = _load("norm_extra", GN, [case], tmp_path, _GN_WHOLE_MIN_GROUPS=1)
    plan = kernel.__globals__["_gn_pipe_plan"]
    x16 = torch.zeros(64, dtype=torch.float16)
    assert plan(2048, 1, 31999, x16) == (16384, 8, 8, 3)
    assert plan(2048, 1, 31999, x16.bfloat16()) == (16384, 8, 8, 3)
    assert plan(2048, 1, 31999, x16.float()) is None
    assert plan(2048, 2, 2 * 8000, x16) is None
    assert plan(2048, 1, 1000, x16) is None
    assert plan(65536, 1, 1024, x16) is None  # packed: 4 groups per program
    assert plan(2048, 1, 31999, x16[1:]) is None
    assert plan(5, 1, 31999, x16) is None


def test_group_norm_persistent_kernel_rounds_statistics_like_cuda_eager(tmp_path: Path) -> None:
    """ROUND_STATS in the persistent kernel: y = x*a + (beta - a*mean) from the stored f16
    statistics, as CUDA eager computes it (run here on CPU tensors)."""
    case = GN_PIPE_CASES[0]
    kernel = _load("norm_extra", GN, [parse_case(case)], tmp_path, _GN_WHOLE_MIN_GROUPS=1,
                   _ROUND_STATS_DEVICES=("cpu",))  # fmt: skip
    assert _gn_pipe_planned(kernel, case)
    _assert_rounds_statistics_like_cuda(kernel, case)
