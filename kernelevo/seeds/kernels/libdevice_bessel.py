"""CPU forms of libdevice's Bessel functions (``j0``, ``j1``, ``y0``, ``y1``, ``cyl_bessel_i0``, ``cyl_bessel_i1``) for
Triton's interpreter, as ``libdevice_cpu.py``'s (which says how a seed gets them): in fp64, by the rational and
asymptotic approximations of Numerical Recipes in C (2nd ed., 6.5-6.6); compared with torch's in
``tests/seeds/test_libdevice_cpu.py``. Standalone (triton only): a seed holds a copy of what it uses.
"""
import triton
import triton.language as tl


@triton.jit
def _bessel_far(d, phase, p1, p2, p3, p4, p5, q1, q2, q3, q4, q5):
    # the asymptotic form for |d| >= 8: (P cos(xx) - z Q sin(xx), P sin(xx) + z Q cos(xx)) with its amplitude
    a = tl.abs(tl.where(d == 0.0, 8.0, d))
    z = 8.0 / a
    y = z * z
    xx = a - phase
    p = p1 + y * (p2 + y * (p3 + y * (p4 + y * p5)))
    q = q1 + y * (q2 + y * (q3 + y * (q4 + y * q5)))
    amplitude = tl.sqrt(0.636619772 / a)
    return amplitude * (tl.cos(xx) * p - z * tl.sin(xx) * q), amplitude * (tl.sin(xx) * p + z * tl.cos(xx) * q)


@triton.jit
def _j0(d):
    y = d * d
    near = (57568490574.0 + y * (-13362590354.0 + y * (651619640.7 + y * (-11214424.18 + y * (
        77392.33017 + y * -184.9052456))))) / (57568490411.0 + y * (1029532985.0 + y * (9494680.718 + y * (
            59272.64853 + y * (267.8532712 + y)))))
    far, _ = _bessel_far(d, 0.785398164, 1.0, -0.1098628627e-2, 0.2734510407e-4, -0.2073370639e-5, 0.2093887211e-6,
                         -0.1562499995e-1, 0.1430488765e-3, -0.6911147651e-5, 0.7621095161e-6, -0.934935152e-7)
    return tl.where(tl.abs(d) < 8.0, near, far)


@triton.jit
def _j1(d):
    y = d * d
    near = d * (72362614232.0 + y * (-7895059235.0 + y * (242396853.1 + y * (-2972611.439 + y * (
        15704.48260 + y * -30.16036606))))) / (144725228442.0 + y * (2300535178.0 + y * (18583304.74 + y * (
            99447.43394 + y * (376.9991397 + y)))))
    far, _ = _bessel_far(d, 2.356194491, 1.0, 0.183105e-2, -0.3516396496e-4, 0.2457520174e-5, -0.240337019e-6,
                         0.04687499995, -0.2002690873e-3, 0.8449199096e-5, -0.88228987e-6, 0.105787412e-6)
    return tl.where(tl.abs(d) < 8.0, near, tl.where(d < 0, -far, far))


@triton.jit
def cpu_j0(x):
    return _j0(x.to(tl.float64)).to(x.dtype)


@triton.jit
def cpu_j1(x):
    return _j1(x.to(tl.float64)).to(x.dtype)


@triton.jit
def cpu_y0(x):
    d = x.to(tl.float64)
    y = d * d
    near = (-2957821389.0 + y * (7062834065.0 + y * (-512359803.6 + y * (10879881.29 + y * (
        -86327.92757 + y * 228.4622733))))) / (40076544269.0 + y * (745249964.8 + y * (7189466.438 + y * (
            47447.26470 + y * (226.1030244 + y))))) + 0.636619772 * _j0(d) * tl.log(tl.where(d > 0, d, 1.0))
    _, far = _bessel_far(d, 0.785398164, 1.0, -0.1098628627e-2, 0.2734510407e-4, -0.2073370639e-5, 0.2093887211e-6,
                         -0.1562499995e-1, 0.1430488765e-3, -0.6911147651e-5, 0.7621095161e-6, -0.934935152e-7)
    r = tl.where(d < 8.0, near, far)
    return tl.where(d < 0, float("nan"), tl.where(d == 0.0, -float("inf"), r)).to(x.dtype)


@triton.jit
def cpu_y1(x):
    d = x.to(tl.float64)
    y = d * d
    safe = tl.where(d > 0, d, 1.0)
    near = d * (-0.4900604943e13 + y * (0.1275274390e13 + y * (-0.5153438139e11 + y * (0.7349264551e9 + y * (
        -0.4237922726e7 + y * 0.8511937935e4))))) / (0.2499580570e14 + y * (0.4244419664e12 + y * (
            0.3733650367e10 + y * (0.2245904002e8 + y * (0.1020426050e6 + y * (0.3549632885e3 + y)))))) \
        + 0.636619772 * (_j1(d) * tl.log(safe) - 1.0 / safe)
    _, far = _bessel_far(d, 2.356194491, 1.0, 0.183105e-2, -0.3516396496e-4, 0.2457520174e-5, -0.240337019e-6,
                         0.04687499995, -0.2002690873e-3, 0.8449199096e-5, -0.88228987e-6, 0.105787412e-6)
    r = tl.where(d < 8.0, near, far)
    return tl.where(d < 0, float("nan"), tl.where(d == 0.0, -float("inf"), r)).to(x.dtype)


@triton.jit
def cpu_cyl_bessel_i0(x):
    a = tl.abs(x.to(tl.float64))
    y = (a / 3.75) * (a / 3.75)
    near = 1.0 + y * (3.5156229 + y * (3.0899424 + y * (1.2067492 + y * (0.2659732 + y * (
        0.360768e-1 + y * 0.45813e-2)))))
    t = 3.75 / tl.where(a < 3.75, 3.75, a)
    far = tl.exp(a) / tl.sqrt(a) * (0.39894228 + t * (0.1328592e-1 + t * (0.225319e-2 + t * (-0.157565e-2 + t * (
        0.916281e-2 + t * (-0.2057706e-1 + t * (0.2635537e-1 + t * (-0.1647633e-1 + t * 0.392377e-2))))))))
    return tl.where(a < 3.75, near, far).to(x.dtype)


@triton.jit
def cpu_cyl_bessel_i1(x):
    d = x.to(tl.float64)
    a = tl.abs(d)
    y = (a / 3.75) * (a / 3.75)
    near = a * (0.5 + y * (0.87890594 + y * (0.51498869 + y * (0.15084934 + y * (0.2658733e-1 + y * (
        0.301532e-2 + y * 0.32411e-3))))))
    t = 3.75 / tl.where(a < 3.75, 3.75, a)
    tail = 0.2282967e-1 + t * (-0.2895312e-1 + t * (0.1787654e-1 - t * 0.420059e-2))
    far = tl.exp(a) / tl.sqrt(a) * (0.39894228 + t * (-0.3988024e-1 + t * (-0.362018e-2 + t * (0.163801e-2 + t * (
        -0.1031555e-1 + t * tail)))))
    r = tl.where(a < 3.75, near, far)
    return tl.where(d < 0, -r, r).to(x.dtype)
