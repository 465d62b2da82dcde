"""The kernels of every elementwise file (unary, binary, backward), written for one canonical spec:
one tensor operand `x`, one runtime scalar `alpha`, one spec constexpr `MODE`, body
`out = x * alpha`. elementwise_kernels.py specialises them per spec with `kernelsource.expand`:

- a region between `# begin per operand` and `# end per operand` is written once per operand,
  `x`, `x_ptr`, `x_val`, `x_fval`, `x_off`, `x_row` and `X_SCALAR` renamed for it, and the
  placeholders below replaced by the operand's numbers (operand i counts out as 0, so the first
  operand is 1, as `x` is here); `per scalar` renames `alpha`, `alpha_i`, `alpha_f`; `per
  constexpr` renames `MODE`; `_store_geometry`'s `per slot` renames `g` and `SLOT` per slot of
  the geometry tensor;
- `# begin raw` ... `# end raw` is kept for a raw operand (mask or condition, loaded as it is)
  only, `# begin not raw` ... for the others; `flat` / `not flat` likewise choose between
  `_kernel_flat` (`_kernel` renamed: every operand laid out like the output, index = offset) and
  `_kernel` (N-d coordinates over the merged dims). In this module both alternatives stand, the
  second overwriting the first;
- `# begin body` ... `# end body` is replaced by the spec's body.

Marker lines are dropped. Out is operand 0 in every spec, so its LAYOUT bits and geometry slots
are written as numbers. A by-value pair (`x_val` integer, `x_fval` float64) carries a Python
number in an operand's place; `X_SCALAR` is 0 for a tensor indexed per element, 1 for a number
passed by value and 2 for a 0-d tensor on the device (every lane reads its one element).
IDX64: the wrapper asks for int64 offsets when one may pass 2**31 (int32 math would wrap and
fault); otherwise int32 index math, cheaper on the GPU.
"""

import triton
import triton.language as tl

# `_kernel`: bit of LAYOUT set when x is linear in the merged dims (8 << i)
X_LINEAR = tl.constexpr(16)
# `_kernel_tile`: bits of LAYOUT set when x's inner stride is 1 (8 << 2i) or 0 (16 << 2i)
X_UNIT = tl.constexpr(32)
X_BCAST = tl.constexpr(64)
# geo_ptr slot of x's stride along merged dim d: _MAX_DIMS * (1 + i) + d
X_STRIDE0 = tl.constexpr(12)
X_STRIDE1 = tl.constexpr(13)
X_STRIDE2 = tl.constexpr(14)
X_STRIDE3 = tl.constexpr(15)
X_STRIDE4 = tl.constexpr(16)
X_STRIDE5 = tl.constexpr(17)
# the integer halves of the by-value pairs: never specialised on their value (a new scalar must not
# compile a new kernel); the float halves are annotated, which Triton never specialises
NO_SPECIALIZE = ["x_val", "alpha_i"]
# `_store_geometry`: its parameters (g0, g1, ...) and the slot each is stored to
GEOMETRY_ARGS = ["g"]
SLOT = tl.constexpr(0)

# ---- emitted: kernel ----


@triton.jit(do_not_specialize=NO_SPECIALIZE)
def _kernel(
    out_ptr,
    # begin per operand
    x_ptr,
    # end per operand
    # begin per operand
    x_val,
    x_fval: tl.float64,
    # end per operand
    # begin per scalar
    alpha_i,
    alpha_f: tl.float64,
    # end per scalar
    n,
    # begin not flat
    geo_ptr,
    LAYOUT: tl.constexpr,
    # end not flat
    # begin per operand
    X_SCALAR: tl.constexpr,
    # end per operand
    CDT: tl.constexpr,
    FLOAT: tl.constexpr,
    OUT_BOOL: tl.constexpr,
    IDX64: tl.constexpr,
    # begin per constexpr
    MODE: tl.constexpr,
    # end per constexpr
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    if IDX64:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # begin per scalar
    if FLOAT:
        alpha = tl.full([1], alpha_f, CDT)
    else:
        alpha = alpha_i
    # end per scalar
    # begin not flat
    # LAYOUT % 8 = NDIM, the merged dims; bit 3 + i: operand i (0 = out) is linear in
    # them. geo_ptr: sizes then each operand's strides, _MAX_DIMS each (outer dims
    # padded), int64 when IDX64 else int32 (`_store_geometry`, once per plan)
    # coordinates along the merged dims (innermost = dim 5)
    c5 = offs
    rest = offs
    if LAYOUT % 8 > 1:
        size5 = tl.load(geo_ptr + 5)
        c5 = rest % size5
        rest = rest // size5
        c4 = rest
        if LAYOUT % 8 > 2:
            size4 = tl.load(geo_ptr + 4)
            c4 = rest % size4
            rest = rest // size4
            c3 = rest
            if LAYOUT % 8 > 3:
                size3 = tl.load(geo_ptr + 3)
                c3 = rest % size3
                rest = rest // size3
                c2 = rest
                if LAYOUT % 8 > 4:
                    size2 = tl.load(geo_ptr + 2)
                    c2 = rest % size2
                    rest = rest // size2
                    c1 = rest
                    if LAYOUT % 8 > 5:
                        size1 = tl.load(geo_ptr + 1)
                        c1 = rest % size1
                        rest = rest // size1
                        c0 = rest
    # end not flat
    # begin per operand
    if X_SCALAR == 1:
        # begin raw
        x = tl.full([BLOCK], x_val, tl.int32)
        # end raw
        # begin not raw
        if FLOAT:
            x = tl.full([BLOCK], x_fval, CDT)
        else:
            x = tl.full([BLOCK], x_val, CDT)
        # end not raw
    else:
        if X_SCALAR == 2:
            x_off = offs * 0
        else:
            # begin flat
            x_off = offs
            # end flat
            # begin not flat
            if LAYOUT // X_LINEAR % 2 == 1:  # x linear
                x_off = offs
            else:
                x_off = c5 * tl.load(geo_ptr + X_STRIDE5)
                if LAYOUT % 8 > 1:
                    x_off += c4 * tl.load(geo_ptr + X_STRIDE4)
                if LAYOUT % 8 > 2:
                    x_off += c3 * tl.load(geo_ptr + X_STRIDE3)
                if LAYOUT % 8 > 3:
                    x_off += c2 * tl.load(geo_ptr + X_STRIDE2)
                if LAYOUT % 8 > 4:
                    x_off += c1 * tl.load(geo_ptr + X_STRIDE1)
                if LAYOUT % 8 > 5:
                    x_off += c0 * tl.load(geo_ptr + X_STRIDE0)
            # end not flat
        x = tl.load(x_ptr + x_off, mask=mask, other=0)
        # begin not raw
        if CDT == tl.float64 and x_ptr.dtype.element_ty.primitive_bitwidth < 32:
            x = x.to(tl.float32)  # exact; direct half->f64 casts fail on CPU
        x = x.to(CDT)
        # end not raw
    # end per operand
    # begin body
    out = x * alpha
    # end body
    # begin flat
    out_off = offs
    # end flat
    # begin not flat
    if LAYOUT // 8 % 2 == 1:  # out linear
        out_off = offs
    else:
        out_off = c5 * tl.load(geo_ptr + 11)
        if LAYOUT % 8 > 1:
            out_off += c4 * tl.load(geo_ptr + 10)
        if LAYOUT % 8 > 2:
            out_off += c3 * tl.load(geo_ptr + 9)
        if LAYOUT % 8 > 3:
            out_off += c2 * tl.load(geo_ptr + 8)
        if LAYOUT % 8 > 4:
            out_off += c1 * tl.load(geo_ptr + 7)
        if LAYOUT % 8 > 5:
            out_off += c0 * tl.load(geo_ptr + 6)
    # end not flat
    if OUT_BOOL:
        out = out != 0
    else:
        out = out.to(CDT)  # int/bool results reach f16/bf16 through f32
        if CDT == tl.float64 and out_ptr.dtype.element_ty.primitive_bitwidth < 32:
            out = out.to(tl.float32)  # f64 -> half types through f32, as for loads
    tl.store(out_ptr + out_off, out.to(out_ptr.dtype.element_ty), mask=mask)


# ---- emitted: kernel_tile ----


@triton.jit(do_not_specialize=NO_SPECIALIZE)
def _kernel_tile(
    out_ptr,
    # begin per operand
    x_ptr,
    # end per operand
    # begin per operand
    x_val,
    x_fval: tl.float64,
    # end per operand
    # begin per scalar
    alpha_i,
    alpha_f: tl.float64,
    # end per scalar
    rows,
    cols,
    geo_ptr,
    LAYOUT: tl.constexpr,
    # begin per operand
    X_SCALAR: tl.constexpr,
    # end per operand
    CDT: tl.constexpr,
    FLOAT: tl.constexpr,
    OUT_BOOL: tl.constexpr,
    IDX64: tl.constexpr,
    ALIGN: tl.constexpr,
    EVEN_C: tl.constexpr,
    # begin per constexpr
    MODE: tl.constexpr,
    # end per constexpr
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    # begin per scalar
    if FLOAT:
        alpha = tl.full([1, 1], alpha_f, CDT)
    else:
        alpha = alpha_i
    # end per scalar
    # LAYOUT % 8 = NDIM, the merged dims (dim 5 = columns, dim 4 = rows, the rest outer);
    # operand i (0 = out): bit 3 + 2i = inner stride 1, bit 4 + 2i = inner stride 0.
    # geo_ptr: sizes then each operand's strides, _MAX_DIMS each (`_store_geometry`)
    pid = tl.program_id(0)
    if IDX64:
        pid = pid.to(tl.int64)
    col_blocks = tl.cdiv(cols, BLOCK_C)
    row_blocks = tl.cdiv(rows, BLOCK_R)
    cc = (pid % col_blocks) * BLOCK_C + tl.arange(0, BLOCK_C)
    rest = pid // col_blocks
    rr = (rest % row_blocks) * BLOCK_R + tl.arange(0, BLOCK_R)
    rest = rest // row_blocks
    rmask = rr < rows
    if EVEN_C:  # no column mask: constant along rows, vector accesses stay legal
        mask = rmask[:, None]
    else:
        mask = rmask[:, None] & (cc < cols)[None, :]
    # outer coordinates: scalars, once per program
    c3 = rest
    if LAYOUT % 8 > 3:
        size3 = tl.load(geo_ptr + 3)
        c3 = rest % size3
        rest = rest // size3
        c2 = rest
        if LAYOUT % 8 > 4:
            size2 = tl.load(geo_ptr + 2)
            c2 = rest % size2
            rest = rest // size2
            c1 = rest
            if LAYOUT % 8 > 5:
                size1 = tl.load(geo_ptr + 1)
                c1 = rest % size1
                rest = rest // size1
                c0 = rest
    # begin per operand
    if X_SCALAR == 1:
        # begin raw
        x = tl.full([1, 1], x_val, tl.int32)
        # end raw
        # begin not raw
        if FLOAT:
            x = tl.full([1, 1], x_fval, CDT)
        else:
            x = tl.full([1, 1], x_val, CDT)
        # end not raw
    else:
        if X_SCALAR == 2:
            x = tl.load(x_ptr + tl.zeros([1, 1], tl.int32))
        else:
            x_row = rr * tl.load(geo_ptr + X_STRIDE4)
            if LAYOUT % 8 > 2:
                x_row += c3 * tl.load(geo_ptr + X_STRIDE3)
            if LAYOUT % 8 > 3:
                x_row += c2 * tl.load(geo_ptr + X_STRIDE2)
            if LAYOUT % 8 > 4:
                x_row += c1 * tl.load(geo_ptr + X_STRIDE1)
            if LAYOUT % 8 > 5:
                x_row += c0 * tl.load(geo_ptr + X_STRIDE0)
            if LAYOUT // X_UNIT % 2 == 1:  # x: unit inner stride
                x_off = tl.multiple_of(x_row, ALIGN)[:, None] + cc[None, :]
            elif LAYOUT // X_BCAST % 2 == 1:  # x: broadcast along the row
                x_off = x_row[:, None]
            else:
                x_off = x_row[:, None] + cc[None, :] * tl.load(geo_ptr + X_STRIDE5)
            if LAYOUT // X_BCAST % 2 == 1:
                x = tl.load(x_ptr + x_off, mask=rmask[:, None], other=0)
            else:
                x = tl.load(x_ptr + x_off, mask=mask, other=0)
        # begin not raw
        if CDT == tl.float64 and x_ptr.dtype.element_ty.primitive_bitwidth < 32:
            x = x.to(tl.float32)  # exact; direct half->f64 casts fail on CPU
        x = x.to(CDT)
        # end not raw
    # end per operand
    # begin body
    out = x * alpha
    # end body
    out_row = rr * tl.load(geo_ptr + 10)
    if LAYOUT % 8 > 2:
        out_row += c3 * tl.load(geo_ptr + 9)
    if LAYOUT % 8 > 3:
        out_row += c2 * tl.load(geo_ptr + 8)
    if LAYOUT % 8 > 4:
        out_row += c1 * tl.load(geo_ptr + 7)
    if LAYOUT % 8 > 5:
        out_row += c0 * tl.load(geo_ptr + 6)
    if LAYOUT // 8 % 2 == 1:  # out: unit inner stride
        out_off = tl.multiple_of(out_row, ALIGN)[:, None] + cc[None, :]
    elif LAYOUT // 16 % 2 == 1:  # out: broadcast along the row
        out_off = out_row[:, None]
    else:
        out_off = out_row[:, None] + cc[None, :] * tl.load(geo_ptr + 11)
    out = tl.broadcast_to(out, (BLOCK_R, BLOCK_C))
    if OUT_BOOL:
        out = out != 0
    else:
        out = out.to(CDT)  # int/bool results reach f16/bf16 through f32
        if CDT == tl.float64 and out_ptr.dtype.element_ty.primitive_bitwidth < 32:
            out = out.to(tl.float32)  # f64 -> half types through f32, as for loads
    out_off = tl.broadcast_to(out_off, (BLOCK_R, BLOCK_C))
    tl.store(out_ptr + out_off, out.to(out_ptr.dtype.element_ty), mask=mask)


# ---- emitted: store_geometry ----


@triton.jit(do_not_specialize=GEOMETRY_ARGS)
def _store_geometry(
    geo_ptr,
    # begin per slot
    g: tl.int64,
    # end per slot
):
    # begin per slot
    tl.store(geo_ptr + SLOT, g)
    # end per slot
