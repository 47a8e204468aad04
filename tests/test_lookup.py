"""Lookup tables of the merge (Glasmachers & Qaadan 2018, §3) against direct evaluation."""

import time

import numpy as np
import pytest

from svmstream.solvers.budgeted._gss import GSS_PRECISE_EPS, golden_section_h, merge_gain, weight_degradation
from svmstream.solvers.budgeted._lookup import GRID, build_tables, interpolate, interpolated_wd, merge_tables


def test_tables_are_built_fast_and_cached():
    build_tables(8)  # compile
    started = time.perf_counter()
    H, W = build_tables(GRID)
    assert time.perf_counter() - started < 5.0  # meant to be well under a second; CI is noisy
    assert H.shape == W.shape == (GRID, GRID)
    assert merge_tables() is merge_tables()


@pytest.mark.parametrize("i, j", [(1, 0), (17, 398), (200, 3), (399, 250), (123, 321), (57, 88), (3, 396)])
def test_table_entries_equal_gss_precise(i, j):
    H, N = merge_tables()
    m, kappa = i / (GRID - 1), max(j / (GRID - 1), 1e-300)
    h, g = golden_section_h(m, np.log(kappa), GSS_PRECISE_EPS)
    scale = m * m * (1 - kappa) ** 2  # N is WD/S² divided by m²(1 − κ)²
    if m <= 0.5:  # rows above 1/2 hold the branch continuation (module docstring)
        assert N[i, j] * scale == pytest.approx(weight_degradation(m, kappa, g), rel=1e-9, abs=1e-15)
        assert H[i, j] == pytest.approx(h, abs=1e-12)
    else:
        assert N[i, j] * scale >= weight_degradation(m, kappa, g) - 1e-12


def test_normalised_table_limits_at_m_zero_and_kappa_one():
    """Row m = 0 and column κ = 1 hold limits of N = (WD/S²)/(m²(1−κ)²), extrapolated from the
    interior; they must agree with direct evaluation just inside the edge."""
    H, N = merge_tables()
    for j in (0, 100, 300, 390):
        kappa = max(j / (GRID - 1), 1e-300)
        m = 1e-4
        h, g = golden_section_h(m, np.log(kappa), GSS_PRECISE_EPS)
        direct = weight_degradation(m, kappa, g) / (m * m * (1 - kappa) ** 2)
        assert N[0, j] == pytest.approx(direct, rel=1e-3)
    for i in (40, 120, 199):
        m = i / (GRID - 1)
        kappa = 1 - 1e-3
        h, g = golden_section_h(m, np.log(kappa), GSS_PRECISE_EPS)
        direct = weight_degradation(m, kappa, g) / (m * m * (1 - kappa) ** 2)
        assert N[i, -1] == pytest.approx(direct, rel=1e-3)
    assert N[: GRID // 2 + 1].min() > 0.5 and N[: GRID // 2 + 1].max() < 2.0  # bounded: see the docstring


def test_h_table_special_rows_and_column():
    H, W = merge_tables()
    m = np.arange(GRID) / (GRID - 1)
    np.testing.assert_allclose(H[:, -1], m)  # κ = 1 limit
    # m just above 1/2 continues the m < 1/2 branch (z near the heavier point) for small κ
    assert H[GRID // 2, 10] < 0.5 and H[GRID // 2 - 1, 10] < 0.5


def test_interpolated_wd_is_close_to_direct_evaluation():
    H, N = merge_tables()
    rng = np.random.default_rng(0)
    errors_wd, errors_h_wd = [], []
    for m, kappa in zip(rng.uniform(0, 0.5, 2000), rng.uniform(0.01, 1, 2000)):
        h, g = golden_section_h(m, np.log(kappa), GSS_PRECISE_EPS)
        exact = weight_degradation(m, kappa, g)
        errors_wd.append(abs(interpolated_wd(N, m, kappa) - exact))
        h_lookup = interpolate(H, m, kappa)
        wd_at_lookup_h = weight_degradation(m, kappa, merge_gain(h_lookup, m, np.log(kappa)))
        errors_h_wd.append(wd_at_lookup_h - exact)
    # WD/S² lies in [0, 0.5]; bilinear interpolation on a 400² grid is accurate to ~1e-5
    assert np.max(errors_wd) < 2e-5
    assert np.median(errors_wd) < 1e-6
    # WD at the looked-up h is never better than the optimum and always very close to it
    assert min(errors_h_wd) > -1e-12
    assert max(errors_h_wd) < 1e-5


def test_interpolated_wd_has_small_relative_error_where_merges_happen():
    """Small shares m and nearly identical points (κ → 1) are where WD is tiny and partners
    are ranked; the normalised table keeps the relative error small there, whereas
    interpolating WD/S² itself is off by far more (the reason for the normalisation)."""
    H, N = merge_tables()
    grid = np.arange(GRID) / (GRID - 1)
    plain = np.outer(grid**2, (1 - grid) ** 2) * N  # a table of WD/S² itself
    rng = np.random.default_rng(1)
    ms = np.concatenate([rng.uniform(0.0, 0.5, 500), 10 ** rng.uniform(-4, -1, 500)])
    kappas = np.concatenate([1 - 10 ** rng.uniform(-4, -1, 500), rng.uniform(0.01, 1.0, 500)])
    rel_normalised, rel_plain = [], []
    for m, kappa in zip(ms, kappas):
        h, g = golden_section_h(m, np.log(kappa), GSS_PRECISE_EPS)
        exact = weight_degradation(m, kappa, g)
        if exact < 1e-13:  # below the rounding of the direct formula itself
            continue
        rel_normalised.append(abs(interpolated_wd(N, m, kappa) - exact) / exact)
        rel_plain.append(abs(interpolate(plain, m, kappa) - exact) / exact)
    assert len(rel_normalised) > 800
    assert np.max(rel_normalised) < 5e-3 and np.percentile(rel_normalised, 99) < 1e-3
    assert np.percentile(rel_plain, 99) > 0.1  # the plain table is useless for ranking here


def test_interpolation_is_exact_on_grid_points_and_linear_between():
    table = np.add.outer(np.arange(4.0), 10 * np.arange(4.0))  # bilinear function
    assert interpolate(table, 1 / 3, 2 / 3) == pytest.approx(1 + 20)
    assert interpolate(table, 0.5, 0.25) == pytest.approx(1.5 + 7.5)
    assert interpolate(table, 1.0, 1.0) == pytest.approx(33.0)
