"""CPU forms of the ``libdevice`` functions Inductor writes into its Triton kernels, for Triton's interpreter.

Triton's interpreter runs none of ``triton.language.extra.libdevice`` (each call fails with ``InterpreterError:
... 'NoneType' ...``): the converter maps the ones ``tl`` has (``exp``, ``log``, ``sqrt``, ...) to ``tl`` everywhere
(``kernelevo.seeds.inductor.convert.LIBDEVICE_AS_TL``), and on the interpreter writes each other call
``libdevice.NAME(...)`` as ``cpu_NAME(...)``, copying the functions below (and the Bessel functions' of
``libdevice_bessel.py``) that the seed calls, and those they call, into the seed. A libdevice function with no form is
named in the converter's error (``kernelevo.seeds.inductor.libdevice``).

Each form is ``tl`` arithmetic only (no ``tl.minimum`` / ``tl.maximum`` where a NaN must pass: they drop it), fp32
or fp64 as its argument; accurate to a few ulps of fp32 over the ranges ``tests/seeds/test_libdevice_cpu.py`` compares
with torch (cancellation avoided: ``expm1`` and ``log1p`` by Kahan's forms, ``tanh`` and ``sinh`` through
``expm1``, ``erfc`` by its exp-scaled rational form). This file is standalone (triton only): a seed holds a copy of
what it uses.
"""
import triton
import triton.language as tl


@triton.jit
def cpu_expm1(x):
    u = tl.exp(x)
    um1 = u - 1.0
    exact = (um1 == 0.0) | (um1 == -1.0) | (tl.abs(x) >= 0.5)  # u - 1 lost no digit (or is the limit)
    kahan = um1 * x / tl.log(tl.where(exact, 2.0, u))
    return tl.where(exact, tl.where(um1 == 0.0, x, um1), kahan)


@triton.jit
def cpu_log1p(x):
    u = 1.0 + x
    exact = (u == 1.0) | (u == float("inf")) | (u <= 0.0)
    kahan = tl.log(tl.where(exact, 2.0, u)) * (x / tl.where(exact, 1.0, u - 1.0))
    return tl.where(u == 1.0, x, tl.where(exact, tl.log(u), kahan))


@triton.jit
def cpu_log10(x):
    return tl.log(x) * 0.4342944819032518


@triton.jit
def cpu_tanh(x):
    e = cpu_expm1(-2.0 * tl.abs(x))
    t = -e / (e + 2.0)
    return tl.where(x < 0, -t, t)


@triton.jit
def cpu_fast_tanhf(x):
    return cpu_tanh(x)


@triton.jit
def _half_exp(a):
    # exp(a) / 2 where exp(a) overflows but its half does not (a - ln 2 only there: it rounds)
    return tl.where(a > 88.0, tl.exp(a - 0.6931471805599453), 0.5 * tl.exp(a))


@triton.jit
def cpu_sinh(x):
    a = tl.abs(x)
    e = cpu_expm1(tl.where(a > 20.0, 20.0, a))
    s = tl.where(a > 20.0, _half_exp(a), 0.5 * (e + e / (e + 1.0)))
    return tl.where(x < 0, -s, s)


@triton.jit
def cpu_cosh(x):
    a = tl.abs(x)
    return tl.where(a > 20.0, _half_exp(a), 0.5 * (tl.exp(a) + tl.exp(-a)))


@triton.jit
def cpu_asinh(x):
    a = tl.abs(x)
    s = tl.where(a >= 1e18, 1.0, a)
    r = tl.where(a >= 1e18, tl.log(a) + 0.6931471805599453, cpu_log1p(s + s * s / (1.0 + tl.sqrt(1.0 + s * s))))
    return tl.where(x < 0, -r, r)


@triton.jit
def cpu_acosh(x):
    t = tl.where(x >= 1e18, 1.0, x) - 1.0
    return tl.where(x >= 1e18, tl.log(x) + 0.6931471805599453, cpu_log1p(t + tl.sqrt(2.0 * t + t * t)))


@triton.jit
def cpu_atanh(x):
    a = tl.abs(x)  # 1 - a is exact for a near 1; 1 + x near -1 would not be
    r = 0.5 * cpu_log1p(2.0 * a / (1.0 - a))
    return tl.where(x < 0, -r, r)


@triton.jit
def cpu_atan(x):
    # Cephes' atanf: a = |x| reduced to |z| <= tan(pi/8) around 0, pi/4 or pi/2, then its odd polynomial
    a = tl.abs(x)
    big = a > 2.414213562373095
    mid = a > 0.4142135623730950
    z = tl.where(big, -1.0 / tl.where(big, a, 1.0), tl.where(mid, (a - 1.0) / (a + 1.0), a))
    y = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    z2 = z * z
    p = (((8.05374449538e-2 * z2 - 1.38776856032e-1) * z2 + 1.99777106478e-1) * z2 - 3.33329491539e-1) * z2 * z + z
    r = y + p
    return tl.where(x < 0, -r, r)


@triton.jit
def cpu_signbit(x):
    if x.dtype == tl.float64:
        bits = x.to(tl.int64, bitcast=True)
    else:
        bits = x.to(tl.float32).to(tl.int32, bitcast=True)
    return (bits < 0).to(tl.int32)


@triton.jit
def cpu_atan2(y, x):
    ax, ay = tl.abs(x), tl.abs(y)
    num, den = tl.minimum(ax, ay), tl.maximum(ax, ay)
    t = cpu_atan(num / tl.where(den == 0.0, 1.0, den))
    r = tl.where(ay > ax, 1.5707963267948966 - t, t)
    r = tl.where(cpu_signbit(x) != 0, 3.141592653589793 - r, r)
    r = tl.where((y != y) | (x != x), y + x, r)
    return tl.where(cpu_signbit(y) != 0, -r, r)


@triton.jit
def cpu_asin(x):
    return cpu_atan2(x, tl.sqrt((1.0 - x) * (1.0 + x)))


@triton.jit
def cpu_acos(x):
    return cpu_atan2(tl.sqrt((1.0 - x) * (1.0 + x)), x)


@triton.jit
def cpu_tan(x):
    return tl.sin(x) / tl.cos(x)


@triton.jit
def _erfc_scaled(a, t):
    # Numerical Recipes' erfcc for a = |x| >= 0, t = 1 / (1 + a / 2): erfc(a) = t * exp(-a^2 + poly(t)), relative
    # error under 1.2e-7; returns t * exp(poly(t)) (= exp(a^2) * erfc(a), never overflowing)
    p = -0.82215223 + t * 0.17087277
    p = 1.48851587 + t * p
    p = -1.13520398 + t * p
    p = 0.27886807 + t * p
    p = -0.18628806 + t * p
    p = 0.09678418 + t * p
    p = 0.37409196 + t * p
    p = 1.00002368 + t * p
    p = -1.26551223 + t * p
    return t * tl.exp(p)


@triton.jit
def cpu_erfc(x):
    a = tl.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    hi = tl.floor(a * 256.0) / 256.0  # 12 bits below 16, so hi * hi is exact: exp(-a * a) without its rounding
    e = _erfc_scaled(a, t) * tl.exp(-hi * hi) * tl.exp(-(a - hi) * (a + hi))
    return tl.where(x < 0, 2.0 - e, e)


@triton.jit
def cpu_erfcx(x):
    a = tl.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    e = _erfc_scaled(a, t)
    return tl.where(x < 0, 2.0 * tl.exp(x * x) - e, e)


@triton.jit
def cpu_erfinv(x):
    # Giles, "Approximating the erfinv function" (GPU Computing Gems), single precision
    w = -tl.log((1.0 - x) * (1.0 + x))
    c = w - 2.5
    p = 3.43273939e-07 + 2.81022636e-08 * c
    p = -3.5233877e-06 + p * c
    p = -4.39150654e-06 + p * c
    p = 0.00021858087 + p * c
    p = -0.00125372503 + p * c
    p = -0.00417768164 + p * c
    p = 0.246640727 + p * c
    p = 1.50140941 + p * c
    s = tl.sqrt(w) - 3.0
    q = 0.000100950558 - 0.000200214257 * s
    q = 0.00134934322 + q * s
    q = -0.00367342844 + q * s
    q = 0.00573950773 + q * s
    q = -0.0076224613 + q * s
    q = 0.00943887047 + q * s
    q = 1.00167406 + q * s
    q = 2.83297682 + q * s
    return tl.where(w < 5.0, p, q) * x


@triton.jit
def _lanczos_lgamma(x):
    # lgamma of x >= 0.5 in fp64: Lanczos' series (g = 7, 9 terms), relative error about 1e-15
    z = x - 1.0
    a = 0.99999999999980993 + 676.5203681218851 / (z + 1.0) - 1259.1392167224028 / (z + 2.0)
    a += 771.32342877765313 / (z + 3.0) - 176.61502916214059 / (z + 4.0) + 12.507343278686905 / (z + 5.0)
    a += -0.13857109526572012 / (z + 6.0) + 9.9843695780195716e-6 / (z + 7.0) + 1.5056327351493116e-7 / (z + 8.0)
    t = z + 7.5
    return 0.9189385332046727 + (z + 0.5) * tl.log(t) - t + tl.log(a)


@triton.jit
def cpu_lgamma(x):
    # in fp64; below 0.5 by the reflection lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x)
    d = x.to(tl.float64)
    up = tl.where(d < 0.5, 1.0 - d, d)
    r = _lanczos_lgamma(up)
    r = tl.where(d < 0.5, tl.log(3.141592653589793 / tl.abs(tl.sin(3.141592653589793 * d))) - r, r)
    r = tl.where((d == 1.0) | (d == 2.0), 0.0, r)
    pole = (d <= 0.0) & (d == tl.floor(d))
    return tl.where(pole | (tl.abs(d) == float("inf")), float("inf"), r).to(x.dtype)


@triton.jit
def cpu_copysign(x, y):
    return tl.where(cpu_signbit(y) != 0, -tl.abs(x), tl.abs(x))


@triton.jit
def cpu_trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def cpu_fmod(a, b):
    # in fp64, where the quotient times an fp32 b and its difference from a are exact
    x, y = a.to(tl.float64), b.to(tl.float64)
    ay = tl.abs(y)
    r = x - cpu_trunc(x / y) * y
    sign = tl.where(x < 0, -1.0, 1.0)
    r = tl.where((r != 0.0) & ((r < 0) != (x < 0)), r + sign * ay, r)  # the quotient rounded up past an integer
    return tl.where(tl.abs(r) >= ay, r - sign * ay, r).to(a.dtype)


@triton.jit
def cpu_hypot(x, y):
    a = tl.maximum(tl.abs(x), tl.abs(y))
    b = tl.minimum(tl.abs(x), tl.abs(y))
    r = b / tl.where((a == 0.0) | (a == float("inf")), 1.0, a)
    r = tl.where((x != x) | (y != y), x + y, a * tl.sqrt(1.0 + r * r))
    return tl.where(a == float("inf"), a, r)


@triton.jit
def cpu_nearbyint(x):
    # adding and taking off 2^23 (2^52) rounds to the nearest integer, ties to even, as IEEE addition does
    if x.dtype == tl.float64:
        shift = 4503599627370496.0
    else:
        shift = 8388608.0
    a = tl.abs(x)
    r = tl.where(a < shift, (a + shift) - shift, a)
    return tl.where(x < 0, -r, r)


@triton.jit
def cpu_llrint(x):
    return cpu_nearbyint(x).to(tl.int64)


@triton.jit
def cpu_isinf(x):
    return (tl.abs(x) == float("inf")).to(tl.int32)


@triton.jit
def cpu_isnan(x):
    return (x != x).to(tl.int32)


@triton.jit
def cpu_ldexp(x, n):
    return x * tl.exp2(n.to(tl.float32))


@triton.jit
def cpu_ilogb(x):
    a = tl.abs(x).to(tl.float32)
    e = ((a.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
    return tl.where(e == -127, tl.floor(tl.log2(a)).to(tl.int32), e)  # subnormal: its exponent by log2


@triton.jit
def cpu_pow(a, b):
    # |a|^b through log2 in fp64, the sign of a negative base by the parity of an integer exponent (else NaN)
    m = tl.exp2(b.to(tl.float64) * tl.log2(tl.abs(a).to(tl.float64))).to(a.dtype)
    whole = tl.floor(b) == b
    odd = whole & (tl.abs(b - 2.0 * tl.floor(b * 0.5)) == 1.0)
    r = tl.where(a < 0, tl.where(whole, tl.where(odd, -m, m), float("nan")), m)
    return tl.where((b == 0.0) | (a == 1.0), 1.0, r)


@triton.jit
def cpu_nextafter(x, y):
    if x.dtype == tl.float64:
        bits = x.to(tl.int64, bitcast=True)
        tiny = tl.full(x.shape, 1, tl.int64).to(tl.float64, bitcast=True)
    else:
        bits = x.to(tl.int32, bitcast=True)
        tiny = tl.full(x.shape, 1, tl.int32).to(tl.float32, bitcast=True)
    away = (y > x) == (x > 0)  # the magnitude grows
    step = tl.where(away, bits + 1, bits - 1).to(x.dtype, bitcast=True)
    r = tl.where(x == 0.0, tl.where(y > 0, tiny, -tiny), step)
    return tl.where((x == y) | (x != x) | (y != y), y + x * 0.0, r)


@triton.jit
def cpu_mul_rn(x, y):
    return x * y
