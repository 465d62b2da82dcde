"""Softmax family of the builtin provider: _softmax, _log_softmax and their backward
(_softmax_backward_data, _log_softmax_backward_data), over any dim, with half_to_float; and
_safe_softmax (a fully masked row gives zeros).

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. non-float inputs).
Same request -> same text.

How the generated kernels work. The input is read as a row-major `[outer, R, inner]` array (a
non-contiguous input is first made contiguous: eager returns a contiguous result anyway), R being
the softmax dim:
- `inner == 1` (the usual dim=-1): a row that fits in one tile is loaded once (max, exp, sum,
  write), BLOCK_M rows per program, up to 32768 elements for 16-element aligned rows (one
  program of 16 warps per row); unaligned rows of 8193-32768 elements are loaded once as their
  whole 16-byte vectors plus masked edges (`_row_body_kernel`); short rows that are not a
  multiple of 16 bytes (49 halves) are read through aligned per-row windows
  (`_window_stream_kernel`), or, shorter than a vector, gathered through a flat tile; a longer
  row (a 50k vocabulary) takes an online pass (running max and rescaled sum) and a writing
  pass, on a persistent grid of about one program per SM (its second read mostly from HBM for
  f32 rows of 201 KB), except f32 forward rows on an NVIDIA
  GPU whose shared memory holds them: there one program per SM holds each row in shared
  memory (`_smem_rows_kernel`, Gluon) and reads it from HBM once;
- `inner > 1`: the same on a column tile, coalesced along inner.
Arithmetic is fp32 (fp64 for fp64 inputs), whatever the storage dtype; the result is stored in
eager's dtype (fp32 for half_to_float, `input_dtype` for the backward ops).

_safe_softmax: the input (made contiguous) is read as [outer, R, inner] rows along the softmax
dim, BLOCK_M rows per program. A row that fits one tile is loaded once; a longer one takes an
online pass (running max, rescaled sum) and a writing pass. A row whose maximum is -inf (every
element masked) is written as zeros instead of NaN, as eager does. Arithmetic in fp32 (fp64 for
fp64), stored in `dtype` when given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer


_PLAN = (
    "Plan: the input (made contiguous) is read as a row-major [outer, R, inner] array, R the "
    "softmax dim; inner == 1 runs a row kernel (BLOCK_M rows per program), inner > 1 a column "
    "kernel coalesced along inner. A row that fits one tile is loaded once; a longer one takes an "
    "online pass (running max, rescaled sum) and a writing pass on a persistent grid (the row is "
    "re-read from L2), or, f32 forward rows on a GPU, is held in shared memory and read once. "
    "Arithmetic is fp32 (fp64 for fp64 inputs)."
)
NUM_VARIANTS = 2  # 0: big tiles; 1: small tiles

_FORWARD = """def _op(self, dim, half_to_float):
    out_dtype = self.dtype
    if half_to_float and self.dtype in (torch.float16, torch.bfloat16):
        out_dtype = torch.float32
    return _launch(self, None, dim, out_dtype)"""

_BACKWARD = """def _op(grad_output, output, dim, input_dtype):
    return _launch(grad_output, output, dim, input_dtype)"""

_SPECS: dict[str, tuple[int, str, str]] = {
    "_softmax.default": (0, "softmax along one dim (half_to_float: fp32 result)", _FORWARD),
    "_log_softmax.default": (1, "log-softmax along one dim (half_to_float: fp32 result)", _FORWARD),
    "_softmax_backward_data.default": (
        2,
        "softmax backward: output * (grad - sum(grad * output, dim))",
        _BACKWARD,
    ),
    "_log_softmax_backward_data.default": (
        3,
        "log-softmax backward: grad - exp(output) * sum(grad, dim)",
        _BACKWARD,
    ),
}


# The kernels between the header and the planner, in the order the emitted file holds them.
_KERNELS = "".join(
    kernelsource.emitted(name, section)
    for name, section in (
        ("softmax_rows", "rows"),
        ("softmax_windows", "windows"),
        ("softmax_long_rows", "long_rows"),
        ("softmax_smem", "smem"),
        ("softmax_cols", "cols"),
        ("softmax", "plans"),
    )
)


def _write(request: KernelRequest) -> str | None:
    picked = codegen.pick(request, _SPECS, NUM_VARIANTS, codegen.FLOATS)
    if picked is None:
        return None
    (mode, summary, body), variant = picked
    main = kernelsource.emitted(
        "softmax", "main", values={"_CONSERVATIVE": str(variant >= 1), "_MODE": str(mode)}
    )
    return codegen.render_family(
        request,
        variant,
        summary=summary,
        plan=_PLAN,
        sections=(main + _KERNELS,),
        body=body,
    )


_SAFE_PLAN = (
    "Plan: rows along the softmax dim of the contiguous input, BLOCK_M rows per program; a row "
    "that fits one tile is loaded once, a longer one takes an online pass (running max, rescaled "
    "sum) and a writing pass; a fully masked row is written as zeros. Arithmetic is fp32 (fp64 "
    "for fp64 inputs)."
)


def _write_safe(request: KernelRequest) -> str | None:
    """_safe_softmax: its own row kernel (kernels/safe_softmax.py) after the shared tile helpers."""
    picked = codegen.pick(request, {request.op: True}, NUM_VARIANTS, codegen.FLOATS)
    if picked is None:
        return None
    variant = picked[1]
    sections = (
        codegen.tiles_prelude(variant),
        kernelsource.definitions("pooling_common")["_acc"],
        kernelsource.emitted("safe_softmax", "safe_softmax"),
    )
    return codegen.render_family(
        request,
        variant,
        summary="softmax along a dim where fully masked (-inf) rows give 0",
        plan=_SAFE_PLAN,
        sections=sections,
        body="def _op(self, dim, dtype=None):\n    return _safe_softmax(self, dim, dtype)",
    )


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS} | {"_safe_softmax.default": _write_safe}
