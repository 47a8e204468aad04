"""The linear solvers' own generator: xorshift64* (Vigna 2016), seeded by splitmix64, as
numba functions inlined into the kernels of :mod:`._cd_kernels` (reproducible runs, no
NumPy generator calls inside the loops)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True, inline="always")
def _next_u64(rng):
    """xorshift64* (Vigna 2016); ``rng`` is a uint64 array of length 1 holding the state."""
    x = rng[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    rng[0] = x
    return x * np.uint64(0x2545F4914F6CDD1D)


@numba.njit(nogil=True, cache=True, inline="always")
def _uniform01(rng):
    """Uniform double in [0, 1) from the top 53 bits of :func:`_next_u64`."""
    return float(_next_u64(rng) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(nogil=True, cache=True, inline="always")
def _below(rng, m):
    """Integer in [0, m) from one 53-bit uniform (relative bias below m / 2**53)."""
    k = np.int64(_uniform01(rng) * m)
    if k >= m:  # guard against rounding up
        k = m - 1
    return k
