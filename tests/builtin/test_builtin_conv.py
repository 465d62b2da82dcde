"""The builtin provider's convolution kernels (forward and backward) against eager ATen.

Interpreter cases are tiny and odd-sized: few channels (the flattened-K path) and many (the
channel loop, with and without a ragged last chunk), stride, padding (also asymmetric), dilation,
groups, depthwise with channel multipliers, bias or none, NCHW and channels_last inputs, a
non-contiguous weight, 1-D convolution (also channels-last, grouped, wav2vec2-style), and each
dtype of the torchbench trace (f32, f16, bf16). One check goes through the real evaluator; the
kernels are also compiled for an sm_90 GPU, and a GPU-only test judges real torchbench cases.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from builtin_support import assert_compiles_for_sm90, run_generated

from agent.providers.builtin import codegen, conv
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import parse_case
from evaluator.config import EvalConfig
from evaluator.naming import kernel_path
from evaluator.results import Status

FWD = "convolution.default"
BWD = "convolution_backward.default"

FORWARD_CASES = [
    # C=3: K flattened over (c, kh, kw); bias
    "((T([2, 3, 7, 7], f32), T([4, 3, 3, 3], f32), T([4], f32), [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})",
    # channel loop, stride 2, non-square input, no bias
    "((T([2, 16, 7, 9], f32), T([5, 16, 3, 3], f32), None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1), {})",
    # groups=2, dilation 2, no padding
    "((T([2, 20, 8, 8], f16), T([6, 10, 3, 3], f16), T([6], f16), [1, 1], [0, 0], [2, 2], False, [0, 0], 2), {})",
    # channels_last depthwise 5x5, stride 2
    "((T([2, 6, 9, 9], f32, [486, 1, 54, 6]), T([6, 1, 5, 5], f32), T([6], f32), [2, 2], [2, 2], [1, 1], False, [0, 0], 6), {})",
    # NCHW depthwise, bf16
    "((T([2, 24, 5, 5], bf16), T([24, 1, 3, 3], bf16), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 24), {})",
    # depthwise with a channel multiplier of 2
    "((T([2, 5, 8, 7], f32), T([10, 1, 3, 3], f32), T([10], f32), [1, 1], [1, 1], [1, 1], False, [0, 0], 5), {})",
    # channels_last 1x1 with bias, bf16
    "((T([2, 32, 6, 6], bf16, [1152, 1, 192, 32]), T([16, 32, 1, 1], bf16), T([16], bf16), [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})",
    # weight stored transposed (non-contiguous), 24 channels: a ragged channel chunk
    "((T([2, 24, 6, 7], f32), T([6, 24, 3, 3], f32, [9, 54, 3, 1]), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})",
    # channels_last, 1x5 kernel with asymmetric padding, groups=2 with 16 channels each
    "((T([2, 32, 5, 9], f16, [1440, 1, 288, 32]), T([8, 16, 1, 5], f16), None, [1, 1], [0, 2], [1, 1], False, [0, 0], 2), {})",
    # 1-D convolution, stride 2
    "((T([2, 4, 31], f16), T([8, 4, 3], f16), None, [2], [1], [1], False, [0], 1), {})",
    # 1-D, one input channel, stride 5 (wav2vec2's first layer)
    "((T([2, 1, 53], f16), T([16, 1, 10], f16), None, [5], [0], [1], False, [0], 1), {})",
    # 1-D channels-last input, grouped, long padded kernel (wav2vec2's positional conv)
    "((T([1, 32, 20], f16, [640, 1, 32]), T([32, 8, 9], f16), T([32], f16), [1], [4], [1], False, [0], 4), {})",
]

BACKWARD_CASES = [
    "((T([2, 4, 7, 7], f32), T([2, 3, 7, 7], f32), T([4, 3, 3, 3], f32), [4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]), {})",
    "((T([2, 5, 4, 5], f32), T([2, 16, 7, 9], f32), T([5, 16, 3, 3], f32), None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False]), {})",
    "((T([2, 6, 4, 4], f16), T([2, 20, 8, 8], f16), T([6, 10, 3, 3], f16), [6], [1, 1], [0, 0], [2, 2], False, [0, 0], 2, [True, True, True]), {})",
    "((T([2, 6, 5, 5], f32, [150, 1, 30, 6]), T([2, 6, 9, 9], f32, [486, 1, 54, 6]), T([6, 1, 5, 5], f32), [6], [2, 2], [2, 2], [1, 1], False, [0, 0], 6, [True, True, True]), {})",
    "((T([2, 24, 5, 5], bf16), T([2, 24, 5, 5], bf16), T([24, 1, 3, 3], bf16), [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 24, [True, True, False]), {})",
    "((T([2, 12, 5, 5], f32), T([2, 6, 9, 9], f32), T([12, 1, 3, 3], f32), None, [2, 2], [1, 1], [1, 1], False, [0, 0], 6, [True, True, False]), {})",
    "((T([2, 8, 16], f16), T([2, 4, 31], f16), T([8, 4, 3], f16), [8], [2], [1], [1], False, [0], 1, [False, True, True]), {})",
    "((T([2, 16, 6, 6], bf16, [576, 1, 96, 16]), T([2, 32, 6, 6], bf16, [1152, 1, 192, 32]), T([16, 32, 1, 1], bf16), [16], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})",
    # pixel axis split over programs (partials summed by a second kernel)
    "((T([2, 32, 9, 9], f32), T([2, 24, 9, 9], f32), T([32, 24, 3, 3], f32), [32], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]), {})",
    "((T([2, 4, 17, 17], f32), T([2, 4, 17, 17], f32), T([4, 1, 3, 3], f32), [4], [1, 1], [1, 1], [1, 1], False, [0, 0], 4, [True, True, True]), {})",
    "((T([2, 16, 17, 17], f16), T([2, 8, 17, 17], f16), T([16, 8, 1, 1], f16), [16], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})",
    # weight gradient only, patch-embedding style (stride == kernel), channels_last grad_output
    "((T([2, 8, 3, 3], bf16, [72, 1, 24, 8]), T([2, 3, 12, 12], bf16), T([8, 3, 4, 4], bf16), [8], [4, 4], [0, 0], [1, 1], False, [0, 0], 1, [False, True, True]), {})",
]


# 1x1, stride 1, unpadded, one group, contiguous NCHW, H*W a multiple of 4: GEMMs per image
POINTWISE_FORWARD = [
    # bias, f32, 40 pixels (vectors of 8), 24 outputs from 20 channels (ragged channel chunk)
    "((T([3, 20, 5, 8], f32), T([24, 20, 1, 1], f32), T([24], f32), [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})",
    # bf16, 36 pixels (vectors of 4), 17 outputs (a ragged, wrapped row tile)
    "((T([2, 40, 6, 6], bf16), T([17, 40, 1, 1], bf16), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})",
    # f16, weight stored transposed, 70 outputs
    "((T([2, 16, 4, 8], f16), T([70, 16, 1, 1], f16, [1, 70, 1, 1]), T([70], f16), [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})",
    # 1-D, kernel size 1
    "((T([2, 33, 52], f16), T([9, 33, 1], f16), None, [1], [0], [1], False, [0], 1), {})",
]
POINTWISE_BACKWARD = [
    "((T([3, 24, 5, 8], f32), T([3, 20, 5, 8], f32), T([24, 20, 1, 1], f32), [24], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})",
    "((T([2, 17, 6, 6], bf16), T([2, 40, 6, 6], bf16), T([17, 40, 1, 1], bf16), [0], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False]), {})",
    # grad_weight and grad_bias only, 70 output channels
    "((T([2, 70, 9, 8], f16), T([2, 16, 9, 8], f16), T([70, 16, 1, 1], f16), [70], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [False, True, True]), {})",
    "((T([2, 9, 52], f16), T([2, 33, 52], f16), T([9, 33, 1], f16), [9], [1], [0], [1], False, [0], 1, [True, True, True]), {})",
    # one image of 32 pixels: a single split stores grad_weight and grad_bias directly
    "((T([1, 24, 4, 8], bf16), T([1, 16, 4, 8], bf16), T([24, 16, 1, 1], bf16), [24], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})",
]


def _cases(texts: list[str]) -> list:
    return [parse_case(t) for t in texts]


def _write(op: str, cases: list, variant: int = 0) -> str:
    text = conv.WRITERS[op](KernelRequest(op, str(codegen.schema_of(op)), cases, variant))
    assert text is not None, f"the conv writer declined {op}"
    return text


def test_forward_matches_eager_on_odd_shapes_groups_layouts_and_dtypes() -> None:
    cases = _cases(FORWARD_CASES)
    assert run_generated(FWD, _write(FWD, cases), cases) == []


def test_depthwise_runtime_tap_loop_and_weight_gathers_match_eager() -> None:
    """The direct kernel unrolls up to `_DIRECT_STATIC_TAPS` filter taps at compile time (every
    suite filter) and reads a tap-major weight copy; with the limit at 0 and the copy off the
    depthwise cases take its runtime tap loop and gather the weights in place."""
    cases = _cases(FORWARD_CASES[3:6])
    text = _write(FWD, cases)
    for knob, default, other in (
        ("_DIRECT_STATIC_TAPS", "49", "0"),
        ("_DIRECT_TAP_MAJOR_W", "True", "False"),
    ):
        assert f"{knob} = {default}\n" in text
        text = text.replace(f"{knob} = {default}\n", f"{knob} = {other}\n")
    assert run_generated(FWD, text, cases) == []


def test_forward_conservative_variant_matches_eager() -> None:
    cases = _cases(FORWARD_CASES[:4])
    assert run_generated(FWD, _write(FWD, cases, variant=1), cases) == []


def _backward_on_fp32_copies(*args: Any, **kwargs: Any) -> Any:
    """The backward reference: eager on fp32 copies of f16/bf16 tensors, results rounded back
    (CUDA eager's arithmetic: fp32 accumulation). CPU eager's half-precision convolution
    backward rounds partial sums to the dtype on some CPUs: on an AMD EPYC (session 13) it was
    2 ulps off the exact f16 result on the grouped, dilated case, where the kernel was within 1,
    and 2-4 bf16 ulps off on two bf16 cases; the two then differed by more than the tolerance."""
    half = (torch.float16, torch.bfloat16)
    up = [a.float() if isinstance(a, torch.Tensor) and a.dtype in half else a for a in args]
    out = torch.ops.aten.convolution_backward.default(*up, **kwargs)
    dtype = args[0].dtype
    return tuple(o.to(dtype) if o is not None and dtype in half else o for o in out)


def test_backward_matches_eager_for_each_output_mask_groups_and_layouts() -> None:
    cases = _cases(BACKWARD_CASES)
    assert run_generated(BWD, _write(BWD, cases), cases, reference=_backward_on_fp32_copies) == []


def test_nchw_operands_are_read_in_place_when_not_staged() -> None:
    """With `_NHWC_STAGE` off, the GEMM kernels read NCHW operands in place, on [channels,
    pixels] tiles (the default copies them to channels_last first)."""
    for op, texts in (
        (FWD, [FORWARD_CASES[i] for i in (1, 2, 7)]),
        (BWD, [BACKWARD_CASES[i] for i in (1, 2, 8, 10)]),
    ):
        cases = _cases(texts)
        text = _write(op, cases)
        assert "\n_NHWC_STAGE = True" in text
        staged_off = text.replace("\n_NHWC_STAGE = True", "\n_NHWC_STAGE = False")
        reference = _backward_on_fp32_copies if op == BWD else None
        assert run_generated(op, staged_off, cases, reference=reference) == []


def test_pointwise_convolutions_match_eager_forward_and_backward() -> None:
    for op, texts in ((FWD, POINTWISE_FORWARD), (BWD, POINTWISE_BACKWARD)):
        cases = _cases(texts)
        reference = _backward_on_fp32_copies if op == BWD else None
        assert run_generated(op, _write(op, cases), cases, reference=reference) == []


def test_pointwise_path_takes_exactly_the_1x1_nchw_convolutions(tmp_path: Path) -> None:
    """The per-image GEMMs run for 1x1, stride-1, unpadded, one-group convolutions of contiguous
    NCHW tensors with H*W a multiple of 4; the rest keep the implicit GEMM: 289 pixels (one
    element per load), stride 2, groups 2, channels_last, no images."""
    import sys

    from builtin_support import materialize_case
    from kernel_loading import load_kernel

    taken = {
        FWD: [True] * len(POINTWISE_FORWARD) + [False] * 4,
        BWD: [True] * len(POINTWISE_BACKWARD) + [False] * 3,
    }
    others = {
        FWD: [
            "((T([2, 16, 17, 17], f16), T([8, 16, 1, 1], f16), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})",
            "((T([2, 16, 8, 8], f16), T([8, 16, 1, 1], f16), None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1), {})",
            "((T([2, 32, 8, 8], f16), T([8, 16, 1, 1], f16), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 2), {})",
            FORWARD_CASES[6],
        ],
        BWD: [
            BACKWARD_CASES[10],
            BACKWARD_CASES[7],
            "((T([0, 24, 4, 8], f32), T([0, 16, 4, 8], f32), T([24, 16, 1, 1], f32), [24], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})",
        ],
    }  # fmt: skip
    path_of = {FWD: "_pw_gemm", BWD: "_pointwise_grads"}
    for op, texts in ((FWD, POINTWISE_FORWARD), (BWD, POINTWISE_BACKWARD)):
        cases = _cases(texts + others[op])
        kernel = load_kernel(op, _write(op, cases), tmp_path / op)
        module = sys.modules[kernel.__module__]
        calls: list[int] = []

        def counted(*a: Any, _inner: Any = getattr(module, path_of[op]), **k: Any) -> Any:
            calls.append(1)  # noqa: B023  (used within this loop iteration only)
            return _inner(*a, **k)

        setattr(module, path_of[op], counted)
        for index, case in enumerate(cases):
            before = len(calls)
            args, kwargs = materialize_case(op, case, torch.Generator().manual_seed(index))
            kernel(*args, **kwargs)
            assert (len(calls) > before) == taken[op][index], (op, case.serialize())


def test_backward_bias_summed_by_the_weight_kernel_matches_eager() -> None:
    """`_BIAS_IN_WEIGHT` (a knob, off): the weight-gradient GEMM kernel also sums grad_bias, per
    split or directly, flattened-K and per-tap, grouped, channels-last and NCHW."""
    cases = _cases([BACKWARD_CASES[i] for i in (0, 2, 7, 8, 10)])
    text = _write(BWD, cases)
    assert "\n_BIAS_IN_WEIGHT = False" in text
    text = text.replace("\n_BIAS_IN_WEIGHT = False", "\n_BIAS_IN_WEIGHT = True")
    assert run_generated(BWD, text, cases, reference=_backward_on_fp32_copies) == []


class _RecordingTuner:
    """Stands in for a Triton autotuner on the CPU: launches the plain kernel with one config and
    reports it as the best, counting how often it was asked."""

    def __init__(self, plain: Any, config: Any, derived: Callable[[dict], dict]) -> None:
        self.plain, self.config, self.derived, self.calls = plain, config, derived, 0

    def __getitem__(self, grid: Callable[[dict], tuple]) -> Callable[..., None]:
        def run(*args: Any, **kwargs: Any) -> None:
            self.calls += 1
            self.best_config = self.config
            meta = dict(self.config.kwargs)
            self.plain[grid(meta)](
                *args,
                **kwargs,
                **meta,
                **self.derived(meta),
                num_warps=self.config.num_warps,
                num_stages=1,
            )

        return run


def test_tuned_launches_autotune_once_per_shape_then_launch_the_best_config(
    tmp_path: Path,
) -> None:
    """On a GPU the forward autotunes a shape's first call and launches the best config directly
    afterwards (`_launch_tuned`); here a recording tuner stands in for Triton's autotuner."""
    import sys

    import torch
    import triton
    from kernel_loading import load_kernel

    cases = _cases(FORWARD_CASES[:6])
    kernel = load_kernel(FWD, _write(FWD, cases), tmp_path)
    module = sys.modules[kernel.__module__]
    gemm = _RecordingTuner(
        module._conv_gemm_kernel,
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 16}, num_warps=4),
        lambda meta: {"EVEN_C": False},
    )
    direct = _RecordingTuner(
        module._conv_direct_kernel,
        triton.Config({"BLOCK_P": 32, "BLOCK_C": 16}, num_warps=4),
        lambda meta: {},
    )
    pointwise = _RecordingTuner(
        module._pw_gemm_kernel,
        triton.Config({"BLOCK_I": 16, "BLOCK_P": 16, "BLOCK_K": 16}, num_warps=4),
        lambda meta: {"EVEN_K": False},
    )
    module._conv_gemm_tuned = {True: gemm, False: gemm}
    module._conv_direct_tuned = direct
    module._pw_gemm_tuned = {True: pointwise, False: pointwise}
    module._tuned = lambda device: True
    gen = torch.Generator().manual_seed(0)
    # the GEMM kernel, the depthwise one, then a 1x1 convolution (per-image GEMMs)
    for C, OC, G, K in ((16, 8, 1, 3), (6, 6, 6, 3), (20, 24, 1, 1)):
        x = torch.randn(2, C, 5, 8, generator=gen)
        w = torch.randn(OC, C // G, K, K, generator=gen)
        pad = [K // 2, K // 2]
        want = torch.ops.aten.convolution(x, w, None, [1, 1], pad, [1, 1], False, [0, 0], G)
        for _ in range(3):
            got = kernel(x, w, None, [1, 1], pad, [1, 1], False, [0, 0], G)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert (gemm.calls, direct.calls, pointwise.calls, len(module._BEST)) == (1, 1, 1, 3)


@pytest.mark.parametrize(
    ("op", "text"),
    [
        (FWD, "((T([2, 4, 5, 5], f32), T([4, 3, 3, 3], f32), None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1), {})"),
        (FWD, "((T([2, 3, 5, 5, 5], f32), T([4, 3, 3, 3, 3], f32), None, [1, 1, 1], [0, 0, 0], [1, 1, 1], False, [0, 0, 0], 1), {})"),
        (FWD, "((T([2, 3, 5, 5], f64), T([4, 3, 3, 3], f64), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})"),
        (BWD, "((T([2, 3, 7, 7], f32), T([2, 4, 5, 5], f32), T([4, 3, 3, 3], f32), [3], [1, 1], [0, 0], [1, 1], True, [0, 0], 1, [True, True, True]), {})"),
    ],
)  # fmt: skip
def test_writers_decline_transposed_3d_and_f64_convolutions(op: str, text: str) -> None:
    request = KernelRequest(op, str(codegen.schema_of(op)), [parse_case(text)])
    assert conv.WRITERS[op](request) is None


def test_same_request_gives_the_same_text() -> None:
    for op, texts in ((FWD, FORWARD_CASES), (BWD, BACKWARD_CASES)):
        cases = _cases(texts)
        assert _write(op, cases) == _write(op, cases)


def test_real_evaluator_passes_both_kernels_without_flags(tmp_path: Path) -> None:
    from evaluator.evaluate import judge_candidate

    # backward: fp32 cases and the 1-D f16 one (the evaluator's reference is CPU eager, whose
    # f16/bf16 convolution backward is off by ulps on some CPUs; see _backward_on_fp32_copies)
    backward = [BACKWARD_CASES[i] for i in (0, 1, 3, 5, 6, 8)]
    for op, texts in ((FWD, FORWARD_CASES[:6]), (BWD, backward)):
        cases = _cases(texts)
        path = kernel_path(tmp_path, op)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_write(op, cases), encoding="utf-8")
        result = judge_candidate(path, op, cases, config=EvalConfig(), device="cpu")
        assert result.status is Status.PASSED, (op, result.reason)
        assert result.flags == [], (op, result.flags)


@pytest.mark.slow
def test_kernels_compile_for_an_sm90_gpu_on_torchbench_shapes() -> None:
    """The interpreter accepts code the GPU compiler rejects; compile real launches for sm_90."""
    forward = [
        "((T([32, 128, 14, 14], f16), T([32, 128, 3, 3], f16), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})",
        "((T([32, 384, 14, 14], bf16, [75264, 1, 5376, 384]), T([384, 1, 7, 7], bf16), T([384], bf16), [1, 1], [3, 3], [1, 1], False, [0, 0], 384), {})",
        "((T([32, 3, 224, 224], f32), T([32, 3, 3, 3], f32), None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1), {})",
        "((T([4, 768, 499], f16, [383232, 1, 768]), T([768, 48, 128], f16), T([768], f16), [1], [64], [1], False, [0], 16), {})",
        "((T([32, 384, 14, 14], bf16), T([384, 64, 3, 3], bf16), T([384], bf16), [1, 1], [1, 1], [1, 1], False, [0, 0], 6), {})",
        "((T([64, 116, 14, 14], f16), T([116, 116, 1, 1], f16), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})",
        "((T([32, 768, 16, 16], f32), T([192, 768, 1, 1], f32), T([192], f32), [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})",
    ]
    backward = [
        "((T([32, 384, 14, 14], bf16), T([32, 384, 14, 14], bf16), T([384, 64, 3, 3], bf16), [384], [1, 1], [1, 1], [1, 1], False, [0, 0], 6, [True, True, True]), {})",
        "((T([32, 1536, 1, 1], bf16), T([32, 384, 1, 1], bf16), T([1536, 384, 1, 1], bf16), [1536], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})",
        "((T([16, 64, 8, 8], f32), T([16, 64, 8, 8], f32), T([64, 64, 3, 3], f32), [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False]), {})",
        "((T([32, 144, 56, 56], bf16), T([32, 144, 56, 56], bf16), T([144, 1, 3, 3], bf16), [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 144, [True, True, False]), {})",
        "((T([32, 64, 112, 112], bf16), T([32, 3, 224, 224], bf16), T([64, 3, 7, 7], bf16), [0], [2, 2], [3, 3], [1, 1], False, [0, 0], 1, [False, True, False]), {})",
        "((T([32, 256, 56, 56], bf16), T([32, 64, 56, 56], bf16), T([256, 64, 1, 1], bf16), [256], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})",
        "((T([8, 96, 14, 14], f32), T([8, 40, 14, 14], f32), T([96, 40, 1, 1], f32), [96], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})",
    ]  # fmt: skip
    jobs = [(op, _write(op, _cases(t)), _cases(t)) for op, t in ((FWD, forward), (BWD, backward))]
    assert_compiles_for_sm90(jobs)


@pytest.mark.gpu
@pytest.mark.parametrize("op", [FWD, BWD])
def test_torchbench_cases_pass_and_are_timed_on_gpu(op: str, tmp_path: Path) -> None:
    from evaluator.cases.suites import select_operators
    from evaluator.evaluate import judge_candidate

    cases = select_operators("torchbench", ops=[op]).ops[0].cases
    path = kernel_path(tmp_path, op)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_write(op, cases), encoding="utf-8")
    result = judge_candidate(
        path, op, cases, config=EvalConfig(), device="cuda", measure_performance=True
    )
    assert result.status is Status.PASSED, result.reason
    assert result.geomean_speedup is not None
