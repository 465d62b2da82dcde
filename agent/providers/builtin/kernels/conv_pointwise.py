"""1x1 convolutions (stride 1, no padding, one group, contiguous NCHW) as a GEMM per image, read
in place: the forward kernel, shared with the backward's grad_input."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv, _pow2
from agent.providers.builtin.kernels.conv_common import _INT32_MAX, _INTERPRET, _clamp_pow2
from agent.providers.builtin.kernels.conv_common import _launch_tuned, _precision, _quick_bench
from agent.providers.builtin.kernels.conv_common import _tuned
from agent.providers.builtin.kernels.conv_common import _mma


# ---- emitted: pointwise ----


# 1x1 convolutions (stride 1, no padding, one group) whose tensors are contiguous NCHW are a GEMM
# per image: y[n] = W @ x[n] ([OC, C] @ [C, H*W]) and grad_input[n] = W^T @ grad_output[n]. Their
# kernels keep each pixel tile inside one image (the image from the grid), so rows of pixels are
# read in place, contiguous and vectorized, with no channels_last staging copy.
_PW_DIRECT = True
# ... when H*W is a multiple of this (pixel loads of at least 4 elements; narrower loads lose to
# the staging copy)
_PW_MIN_VEC = 4


def _pointwise(weight, stride, padding, groups, *tensors):
    """Whether a convolution takes the per-image GEMM kernels (`_PW_DIRECT`): a 1x1 filter,
    stride 1, no padding, one group, and every tensor contiguous NCHW with H*W a multiple of
    `_PW_MIN_VEC`, 1 to 65535 images (a grid axis) and int32 offsets inside an image."""
    if not (_PW_DIRECT and weight.shape[2] == weight.shape[3] == 1 and groups == 1):
        return False
    if list(stride) != [1, 1] or list(padding) != [0, 0]:
        return False
    return all(t.is_contiguous() and _pixel_vec(t.shape[2] * t.shape[3]) >= _PW_MIN_VEC
               and 0 < t.shape[0] <= 65535 and t.numel() // t.shape[0] <= _INT32_MAX
               for t in tensors)


def _pixel_vec(hw):
    """The widest vector (<= 8) dividing H*W: pixel rows start at multiples of it."""
    return next(v for v in (8, 4, 2, 1) if hw % v == 0)


@triton.jit
def _pw_gemm_kernel(
    a_ptr, b_ptr, bias_ptr, out_ptr, I, K, HWV, sai, sak, sbias,
    HAS_BIAS: tl.constexpr, WIDEN: tl.constexpr, PREC: tl.constexpr, VEC: tl.constexpr,
    EVEN_K: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """out[n, i, p] = bias[i] + sum over k of a[i, k] * b[n, k, p], for contiguous b [N, K, HW]
    and out [N, I, HW] (HW = HWV * VEC: Triton then knows every pixel row starts at a multiple
    of VEC elements and loads VEC pixels at once) and a read through strides (sai, sak).
    One program per [BLOCK_I, BLOCK_P] tile of one image (program_id(1))."""
    HW = HWV * VEC
    num_p = tl.cdiv(HW, BLOCK_P)
    pid_i = tl.program_id(0) // num_p
    pid_p = tl.program_id(0) % num_p
    n = tl.program_id(1).to(tl.int64)
    ri = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    rp = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    rk = tl.arange(0, BLOCK_K)
    pin = (rp < HW)[None, :]
    a_ptrs = a_ptr + (ri % I)[:, None] * sai + rk[None, :] * sak  # wrapped rows: masked at the store
    b_ptrs = b_ptr + n * K * HW + rk[:, None] * HW + rp[None, :]
    acc = tl.zeros((BLOCK_I, BLOCK_P), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs, mask=pin, other=0.0)
        else:
            kin = k0 + rk < K
            a = tl.load(a_ptrs, mask=kin[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=kin[:, None] & pin, other=0.0)
        acc = _mma(acc, a, b, WIDEN, PREC, False)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * HW
    if HAS_BIAS:
        acc += tl.load(bias_ptr + (ri % I) * sbias).to(tl.float32)[:, None]
    out_ptrs = out_ptr + n * I * HW + ri[:, None] * HW + rp[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=(ri < I)[:, None] & pin)


def _pw_prune(configs, named_args, **kwargs):
    """Clamp the tiles to the problem (powers of two, at least 16) and drop duplicates."""
    args = {**named_args, **kwargs}
    limits = {"BLOCK_I": args["I"], "BLOCK_P": args["HWV"] * args["VEC"], "BLOCK_K": args["K"]}
    kept, seen = [], set()
    for c in configs:
        tiles = {name: min(c.kwargs[name], max(16, _pow2(limit))) for name, limit in limits.items()}
        warps = c.num_warps if tiles["BLOCK_I"] * tiles["BLOCK_P"] >= 128 * 64 else 4
        if (*tiles.values(), warps, c.num_stages) not in seen:
            seen.add((*tiles.values(), warps, c.num_stages))
            kept.append(triton.Config(tiles, num_warps=warps, num_stages=c.num_stages))
    return kept


def _pw_configs(half):
    """(BLOCK_I, BLOCK_P, BLOCK_K, warps, stages) candidates for an H200."""
    bk = 64 if half else 32
    shapes = [(128, 128, bk, 8, 3), (128, 64, bk, 4, 3), (64, 128, bk, 4, 3), (64, 64, bk, 4, 4),
              (128, 32, bk, 4, 4), (64, 32, bk, 4, 4)]
    return [triton.Config({"BLOCK_I": bi, "BLOCK_P": bp, "BLOCK_K": bk}, num_warps=w,
                          num_stages=s) for bi, bp, bk, w, s in shapes]


def _pw_tiles(I, HW, K, dtype):
    """(BLOCK_I, BLOCK_P, BLOCK_K, num_warps, num_stages) when not autotuning."""
    if _INTERPRET:
        return _clamp_pow2(I, 16, 64), _clamp_pow2(HW, 16, 64), _clamp_pow2(K, 16, 32), 4, 1
    bk = 64 if dtype in (torch.float16, torch.bfloat16) else 32
    return _clamp_pow2(I, 16, 128), _clamp_pow2(HW, 16, 64), _clamp_pow2(K, 16, bk), 4, 3


if not _INTERPRET:
    _pw_gemm_tuned = {
        half: triton.autotune(
            configs=_pw_configs(half), key=["I", "K", "HWV", "VEC", "sai", "sak"],
            do_bench=_quick_bench, prune_configs_by={"early_config_prune": _pw_prune},
        )(triton.heuristics({"EVEN_K": lambda a: a["K"] % a["BLOCK_K"] == 0})(_pw_gemm_kernel))
        for half in (True, False)
    }


def _pw_gemm(a, sai, sak, b, bias, out):
    """out[n] = a @ b[n] (+ bias per row) for contiguous NCHW b [N, K, H, W] and out [N, I, H, W];
    a is [I, K] read through strides (sai, sak): the weight for the forward, its transpose for
    grad_input."""
    N, K, H, W = b.shape
    I = out.shape[1]
    hw = H * W
    vec = _pixel_vec(hw)
    args = (a, b, bias if bias is not None else out, out, I, K, hw // vec, sai, sak,
            bias.stride(0) if bias is not None else 0)
    flags = dict(HAS_BIAS=bias is not None, WIDEN=_INTERPRET, PREC=_precision(b.dtype, b.device),
                 VEC=vec)
    if _tuned(b.device):
        grid = lambda meta: (_cdiv(I, meta["BLOCK_I"]) * _cdiv(hw, meta["BLOCK_P"]), N)
        key = ("pointwise", b.device, b.dtype, N, *args[4:], *flags.values())
        _launch_tuned(_pw_gemm_tuned[b.dtype != torch.float32], _pw_gemm_kernel, key, grid, args,
                      flags, lambda meta: {"EVEN_K": K % meta["BLOCK_K"] == 0})
    else:
        bi, bp, bk, warps, stages = _pw_tiles(I, hw, K, b.dtype)
        _pw_gemm_kernel[(_cdiv(I, bi) * _cdiv(hw, bp), N)](
            *args, **flags, EVEN_K=K % bk == 0, BLOCK_I=bi, BLOCK_P=bp, BLOCK_K=bk,
            num_warps=warps, num_stages=stages)
    return out
