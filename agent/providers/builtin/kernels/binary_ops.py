"""Bodies of the binary and small n-ary elementwise kernels (binary.py): each function's
statements, without its closing `return out`, become the body of one operator's kernel
(`kernelsource.bodies`). Operands are `x`, `y` (and `c`, `m`, `t1`, `t2`, `w`), scalars and the
constexprs the generated kernel defines (`CDT`, `FLOAT`, `Y_SCALAR`, ...).
"""

import triton.language as tl

from agent.providers.builtin.kernels.elementwise_helpers import (
    _div,
    _div_floor,
    _idiv_floor,
    _pow,
    _recip,
    _remainder,
    _trunc,
)


def add(x, y, alpha):
    out = x + y * alpha
    return out


def sub(x, y, alpha):
    out = x - y * alpha
    return out


def rsub(y, x, alpha):
    out = y - x * alpha
    return out


def mul(x, y):
    out = x * y
    return out


# True division. Eager (div_true_kernel_cuda) divides by a CPU scalar (a Python number, a 0-d
# CPU tensor: here the by-value operand) as x * (1 / y), the reciprocal rounded once in the
# compute dtype; this repeats it, bits included.
def div(x, y, y_fval, Y_SCALAR, CDT):
    if Y_SCALAR == 1:
        out = x * _recip(y_fval, CDT)
    else:
        out = _div(x, y)
    return out


def div_mode(x, y, y_fval, ROUNDING, Y_SCALAR, FLOAT, CDT):
    if ROUNDING == 0:
        if Y_SCALAR == 1:
            out = x * _recip(y_fval, CDT)
        else:
            out = _div(x, y)
    elif ROUNDING == 1:
        if FLOAT:
            out = _trunc(_div(x, y))
        else:
            out = x // y
    else:
        if FLOAT:
            out = _div_floor(x, y)
        else:
            out = _idiv_floor(x, y)
    return out


def floor_divide(x, y, FLOAT):
    if FLOAT:
        out = _div_floor(x, y)
    else:
        out = _idiv_floor(x, y)
    return out


def remainder(x, y):
    out = _remainder(x, y)
    return out


def fmod(x, y):
    out = x % y
    return out


def maximum(x, y):
    out = tl.where((x > y) | (x != x), x, y)  # NaN wins, as in eager
    return out


def minimum(x, y):
    out = tl.where((x < y) | (x != x), x, y)  # NaN wins, as in eager
    return out


def pow(x, y):
    out = _pow(x, y)
    return out


def eq(x, y):
    out = x == y
    return out


def ne(x, y):
    out = x != y
    return out


def lt(x, y):
    out = x < y
    return out


def le(x, y):
    out = x <= y
    return out


def gt(x, y):
    out = x > y
    return out


def ge(x, y):
    out = x >= y
    return out


def logical_and(x, y):
    out = (x != 0) & (y != 0)
    return out


def logical_or(x, y):
    out = (x != 0) | (y != 0)
    return out


def logical_xor(x, y):
    out = (x != 0) != (y != 0)
    return out


def bitwise_and(x, y):
    out = x & y
    return out


def bitwise_or(x, y):
    out = x | y
    return out


def bitwise_xor(x, y):
    out = x ^ y
    return out


def where(x, y, c):
    out = tl.where(c != 0, x, y)
    return out


def masked_fill(v, x, m):
    out = tl.where(m != 0, v, x)
    return out


def addcmul(x, value, t1, t2):
    out = x + value * (t1 * t2)
    return out


def addcdiv(x, value, t1, t2):
    out = x + value * (t1 / t2)
    return out


def lerp(y, x, w):
    d = y - x
    out = tl.where(w < 0.5, x + w * d, y - d * (1.0 - w))
    return out
