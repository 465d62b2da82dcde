"""Copy family of the builtin provider: _to_copy (dtype casts), clone, lift_fresh_copy, copy_,
copy, and fills (fill_.Scalar, fill_.Tensor, zero_, zeros_like, ones_like, full_like, new_zeros,
new_ones, new_full).

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. complex tensors).
Same request -> same text.

How the generated kernels work:
- outputs are allocated as eager does (`empty_like` with the requested memory format, so
  `preserve_format` keeps a dense input's strides);
- a copy merges dims that both tensors step through as one (a contiguous -> contiguous cast is a
  flat 1-D launch). Anything else runs a 2-D tile kernel whose axes are the destination's and the
  source's fastest dims, so a transposing copy reads and writes coalesced (Triton converts the
  tile layout through shared memory); up to four more dims come from the program id. Broadcast
  sources (copy_) have stride 0;
- casts from fp16/bf16 go through fp32 (Triton's CPU interpreter converts bf16 wrongly
  otherwise); casts to bool are `!= 0`, as in eager;
- fills write a value converted once by the kernel; fill_.Tensor reads its 0-d value on device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

NUM_VARIANTS = 2  # 0: merged-dims plan, big blocks; 1: small blocks


def prelude(variant: int) -> str:
    """The copy files' prelude (kernels/copy.py); variant >= 1 takes small blocks."""
    return kernelsource.emitted("copy", "prelude", values={"_CONSERVATIVE": str(variant >= 1)})


# Shared with the data-movement family (gather.py): a strided, casting copy.
COPY_SOURCE = kernelsource.emitted("copy", "copy")

# Shared with cat/stack (gather.py) and zero padding (movement.py): strided, casting copies of up
# to four inputs into one output in one launch (kernels/pieces.py). Needs `_INTERPRET`,
# `_CONSERVATIVE`, `_cdiv` and `_pow2` from the file. One blank line before `_pieces_1`, as the
# emitted files have it.
PIECES_SOURCE = (
    kernelsource.emitted("pieces", "piece_copy")
    + "\n"
    + kernelsource.emitted("pieces", "pieces").lstrip("\n")
    + kernelsource.emitted("pieces", "pieces_host")
)


_FILL_SOURCE = kernelsource.emitted("copy", "fill")


_LIKE_KW = "dtype=None, layout=None, device=None, pin_memory=None"

_SPECS: dict[str, tuple[str, str]] = {
    "_to_copy.default": (
        "copy with an optional dtype cast (memory format preserved)",
        f"""def _op(self, *, {_LIKE_KW}, non_blocking=False, memory_format=None):
    out = _like(self, dtype, layout, device, memory_format)
    return _strided_copy(out, self)""",
    ),
    "clone.default": (
        "copy (memory format preserved unless given)",
        """def _op(self, *, memory_format=None):
    out = _like(self, None, None, None, memory_format)
    return _strided_copy(out, self)""",
    ),
    "lift_fresh_copy.default": (
        "copy (memory format preserved)",
        """def _op(self):
    out = _like(self, None, None, None, None)
    return _strided_copy(out, self)""",
    ),
    "copy_.default": (
        "in-place copy of src (broadcast, cast) into self",
        """def _op(self, src, non_blocking=False):
    return _strided_copy(self, src.expand(self.shape))""",
    ),
    "copy.default": (
        "out-of-place copy of src (broadcast, cast) into a tensor like self",
        """def _op(self, src, non_blocking=False):
    out = _like(self, None, None, None, None)
    return _strided_copy(out, src.expand(self.shape))""",
    ),
    "fill_.Scalar": (
        "in-place fill with a number",
        """def _op(self, value):
    return _fill(self, value)""",
    ),
    "fill_.Tensor": (
        "in-place fill with a 0-d tensor's value",
        """def _op(self, value):
    return _fill(self, value)""",
    ),
    "zero_.default": (
        "in-place fill with zeros",
        """def _op(self):
    return _fill(self, 0)""",
    ),
    "zeros_like.default": (
        "a tensor like self filled with 0",
        f"""def _op(self, *, {_LIKE_KW}, memory_format=None):
    return _fill(_like(self, dtype, layout, device, memory_format), 0)""",
    ),
    "ones_like.default": (
        "a tensor like self filled with 1",
        f"""def _op(self, *, {_LIKE_KW}, memory_format=None):
    return _fill(_like(self, dtype, layout, device, memory_format), 1)""",
    ),
    "full_like.default": (
        "a tensor like self filled with fill_value",
        f"""def _op(self, fill_value, *, {_LIKE_KW}, memory_format=None):
    return _fill(_like(self, dtype, layout, device, memory_format), fill_value)""",
    ),
    "new_zeros.default": (
        "a new tensor of the given size filled with 0",
        f"""def _op(self, size, *, {_LIKE_KW}):
    return _fill(_new(self, size, dtype, layout, device), 0)""",
    ),
    "new_ones.default": (
        "a new tensor of the given size filled with 1",
        f"""def _op(self, size, *, {_LIKE_KW}):
    return _fill(_new(self, size, dtype, layout, device), 1)""",
    ),
    "new_full.default": (
        "a new tensor of the given size filled with fill_value",
        f"""def _op(self, size, fill_value, *, {_LIKE_KW}):
    return _fill(_new(self, size, dtype, layout, device), fill_value)""",
    ),
}

_PLAN = (
    "Plan: outputs are allocated as eager does (empty_like keeps a dense input's strides); dims "
    "both tensors step through as one are merged, so a contiguous copy is a flat launch; other "
    "copies run a 2-D tile over the destination's and the source's fastest dims (coalesced "
    "transposes), with up to four more dims from the program id. fp16/bf16 sources are converted "
    "through fp32; casts to bool are != 0."
)


def write_copy_family(
    request: KernelRequest, specs: dict[str, tuple[str, str]], plan: str, *sections: str
) -> str | None:
    """The file of a copy-kernel family (copy, gather): header, the copy prelude and kernels, the
    family's `sections`, the op's `_op` body and the entry point. None for an op outside `specs`
    or an unsupported dtype."""
    spec = specs.get(request.op)
    if spec is None or codegen.unsupported_dtypes(request.cases):
        return None
    summary, body = spec
    variant = min(max(request.variant, 0), NUM_VARIANTS - 1)
    return codegen.render_file(
        codegen.file_header(
            request.op, summary=summary, plan=plan, variant=variant, schema=request.schema
        ),
        prelude(variant),
        COPY_SOURCE,
        *sections,
        body,
        codegen.entry_point(request.op),
    )


def _write(request: KernelRequest) -> str | None:
    return write_copy_family(request, _SPECS, _PLAN, _FILL_SOURCE)


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
