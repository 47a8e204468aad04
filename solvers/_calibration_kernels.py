"""The numba kernels of :class:`svmstream.solvers.calibration.MarginCalibrator`'s fit: one
pass over multi-class rows, the log-loss's derivative and curvature in the slope ``a`` (binary
and multi-class) and the safeguarded Newton search on it."""

from __future__ import annotations

import numba as nb
import numpy as np

from .kernels import exp_inplace


@nb.njit(nogil=True, cache=True)
def _multi_prepare(f, y, eps):
    """One pass over multi-class rows: ``(row maxima (n,), row spreads max - min (n,),
    sum_i <q_i, f_i - max_i>)`` where ``q_i`` is the smoothed target of row i (``1 - eps_i``
    on its class ``y_i``, ``eps_i / (K - 1)`` on each other class)."""
    n, K = f.shape
    top = np.empty(n)
    spread = np.empty(n)
    q_g = 0.0
    for i in range(n):
        hi = f[i, 0]
        lo = f[i, 0]
        total = 0.0
        for j in range(K):
            x = f[i, j]
            hi = max(hi, x)
            lo = min(lo, x)
            total += x
        top[i] = hi
        spread[i] = hi - lo
        g_true = f[i, y[i]] - hi
        q_g += (1.0 - eps[i]) * g_true + eps[i] * ((total - K * hi) - g_true) / (K - 1)
    return top, spread, q_g


# reassociation lets the row sums vectorise (2x faster); the order is still fixed, so the
# result depends on the data only
@nb.njit(nogil=True, cache=True, fastmath={"reassoc", "contract", "arcp", "nsz"})
def _multi_grad_hess(a, f, top, buf):
    """``(sum_i E_p[g_i], sum_i Var_p[g_i])`` with ``g_i = f_i - top_i`` and
    ``p_i = softmax(a g_i)``.

    ``f`` (n, K) float64, ``top`` its row maxima, ``buf`` a float64 scratch of length K.  The
    derivative of the smoothed log-loss in ``a`` is the first value minus ``sum_i <q_i, g_i>``,
    its second derivative the second value.  One vectorised exp per entry
    (:func:`svmstream.solvers.kernels.exp_inplace`, relative error < 1e-13).
    """
    n, K = f.shape
    grad = 0.0
    hess = 0.0
    for i in range(n):
        for j in range(K):
            buf[j] = a * (f[i, j] - top[i])
        exp_inplace(buf, K)
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        for j in range(K):
            x = f[i, j] - top[i]
            e = buf[j]
            s0 += e
            s1 += e * x
            s2 += e * x * x
        mean = s1 / s0
        grad += mean
        hess += max(s2 / s0 - mean * mean, 0.0)
    return grad, hess


def _binary_grad_hess(a, f, t_f):
    """Derivatives of ``sum_i softplus(a f_i) - a t_i f_i`` (the smoothed binary log-loss);
    ``t_f`` is the precomputed ``sum_i t_i f_i``."""
    s = 0.5 * (1.0 + np.tanh(0.5 * a * f))  # sigmoid(a f) without overflow
    return float(np.dot(f, s)) - t_f, float(np.dot(f * f, s * (1.0 - s)))


def _solve_slope(grad_hess, a0, lo, hi, rtol=1e-5, max_iter=200):
    """Minimiser in ``[lo, hi]`` of a convex function of one variable, from its derivatives.

    Newton steps on the derivative, kept inside the bracket known so far (a step that would
    leave it tries the bound itself once, then bisects geometrically: ``a`` spans orders of
    magnitude).  Returns the Newton iterate after a relative step below ``rtol`` (Newton
    converges quadratically there: its error is about ``rtol**2``), or a bound.
    """
    a = min(max(a0, lo), hi)
    lo_seen = hi_seen = False  # has the derivative's sign been evaluated at lo / hi?
    for _ in range(max_iter):
        g, h = grad_hess(a)
        if g == 0.0:
            return a
        if g > 0.0:
            hi, hi_seen = a, True
            if a == lo:  # increasing already at the lower bound
                return a
        else:
            lo, lo_seen = a, True
            if a == hi:
                return a
        cand = a - g / h if h > 0.0 else (hi if g < 0.0 else lo)
        if not lo < cand < hi:
            if cand >= hi and not hi_seen:
                cand = hi
            elif cand <= lo and not lo_seen:
                cand = lo
            else:
                cand = float(np.sqrt(lo * hi))
        if abs(cand - a) <= rtol * a:
            return cand
        a = cand
    return a
