"""Device helpers (Triton) that elementwise kernels call: the writer copies the ones a kernel's
body calls, dependencies first, into its file (`elementwise.HELPERS`)."""

import triton
import triton.language as tl


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _tanh(x):
    # exp of a non-positive argument never overflows; odd symmetry is exact
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    return tl.where(x < 0, -y, y)


@triton.jit
def _normal_tail(a):
    # Phi(-a) for a >= 0 (float32) as 2 ** q(a): q is a degree-8 fit of log2(Phi(-a)) on [0, 6],
    # weighted so Phi's absolute error is at most 5e-8 (f32 Horner; libdevice erff + eager's
    # 1 + erf round to about 1e-7): eight FMAs with immediate coefficients and one exp2, no
    # branches or coefficient selects (erff costs ~25 instructions). 0 from a = 6 on
    # (Phi(-6) = 1e-9) and for NaN, so gelu(+-inf) and gelu(NaN) stay eager's inf, NaN, NaN.
    q = -2.772272637230344e-06 * a + 3.862351877614856e-05
    q = q * a - 0.00018256141629535705
    q = q * a - 0.00014583446318283677
    q = q * a + 0.007075420580804348
    q = q * a - 0.05250498652458191
    q = q * a - 0.45920491218566895
    q = q * a - 1.1511057615280151
    q = q * a - 1.0
    return tl.where(a < 6.0, tl.exp2(q), 0.0)


@triton.jit
def _log1p(x):
    # log(u) * x / (u - 1) with u = 1 + x cancels the rounding of u (accurate for small x)
    u = 1.0 + x
    d = u - 1.0
    y = tl.where(d == 0, x, tl.log(u) * (x / d))
    return tl.where(x == float("inf"), x, y)


@triton.jit
def _expm1(x):
    # (u - 1) * x / log(u) with u = exp(x) cancels the rounding of u (accurate for small x)
    u = tl.exp(x)
    d = u - 1.0
    y = tl.where(d == 0, x, d * (x / tl.log(u)))
    y = tl.where(d == -1.0, -1.0, y)
    return tl.where(u == float("inf"), u, y)


@triton.jit
def _softplus(x, beta, threshold):
    z = x * beta
    return tl.where(z > threshold, x, _log1p(tl.exp(z)) / beta)


@triton.jit
def _pow(b, e):
    # b ** e for floats as exp2(e * log2|b|), with C pow's rules for negative bases and 0 ** e
    r = tl.exp2(e * tl.log2(tl.abs(b)))
    e_int = tl.floor(e) == e
    odd = e_int & ((tl.abs(e) % 2.0) == 1.0)
    r = tl.where(b < 0, tl.where(e_int, tl.where(odd, -r, r), float("nan")), r)
    return tl.where((e == 0) | (b == 1), 1.0, r)


@triton.jit
def _ipow(b, e):
    # integer b ** e for one scalar e >= 0: square and multiply
    r = b * 0 + 1
    while e > 0:
        r = tl.where(e % 2 == 1, r * b, r)
        b = b * b
        e = e // 2
    return r


@triton.jit
def _trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def _round_half_even(x):
    # torch.round rounds ties to even; x - floor(x) is exact, so ties are detected exactly
    f = tl.floor(x)
    d = x - f
    f_even = (f - 2.0 * tl.floor(f * 0.5)) == 0
    up = (d > 0.5) | ((d == 0.5) & (f_even == 0))
    return tl.where(up, f + 1.0, f)


@triton.jit
def _div(a, b):
    # IEEE-rounded division: Triton's float32 `/` is approximate (2 ulp) on GPUs, which would
    # break exact quotients (6 / 3 must be 2 before trunc or floor)
    if a.dtype == tl.float32:
        return tl.math.div_rn(a, b)
    else:
        return a / b


@triton.jit
def _recip(v, CDT: tl.constexpr):
    # 1 / v rounded once in CDT, as a [1] tensor
    return _div(tl.full([1], 1.0, CDT), tl.full([1], v, CDT))


@triton.jit
def _div_floor(a, b):
    # eager's div_floor_floating: exact quotient from fmod, then floor, then fix rounding
    mod = a % b
    div = _div(a - mod, b)
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)
    return tl.where(b == 0, _div(a, b), fl)


@triton.jit
def _idiv_floor(a, b):
    # Triton's integer // truncates toward zero; step down when the remainder has b's opposite sign
    q = a // b
    r = a - q * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)


@triton.jit
def _remainder(a, b):
    # Python-style modulo (sign of b) from Triton's C-style % (sign of a)
    m = a % b
    return tl.where((m != 0) & ((b < 0) != (m < 0)), m + b, m)
