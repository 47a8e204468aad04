"""Merge math of BSGD checked against brute-force evaluation in feature space."""

import numpy as np
import pytest

from svmstream.solvers.budgeted._gss import (
    GSS_PRECISE_EPS,
    GSS_STANDARD_EPS,
    golden_section_h,
    weight_degradation,
)
from svmstream.solvers.budgeted._merging import N_DIAG, SOLVER_GSS, merge_smallest

NO_TABLE = np.zeros((2, 2))


def merge(sv_t, sv_sq, coef, n, gamma, eps=GSS_STANDARD_EPS):
    """merge_smallest with GSS-standard and no diagnostics; coef is (capacity, 1)."""
    return merge_smallest(
        sv_t,
        sv_sq,
        coef,
        n,
        gamma,
        SOLVER_GSS,
        eps,
        NO_TABLE,
        NO_TABLE,
        -1,
        np.zeros(N_DIAG),
        np.zeros(sv_t.shape[0]),
        np.zeros(2 * sv_t.shape[1]),
        False,
    )


def rbf(a, b, gamma):
    return np.exp(-gamma * np.sum((np.asarray(a) - np.asarray(b)) ** 2, axis=-1))


def brute_force_merge(x_min, a_min, x, a, gamma, grid=20001):
    """Minimise ‖a_min φ(x_min) + a φ(x) − a_z φ(z)‖² over z = h x_min + (1−h) x on a grid.

    For each h the best a_z is the projection a_min k(x_min, z) + a k(x, z)."""
    hs = np.linspace(0.0, 1.0, grid)
    z = hs[:, None] * x_min + (1.0 - hs[:, None]) * x
    a_z = a_min * rbf(x_min, z, gamma) + a * rbf(x, z, gamma)
    norm2 = a_min**2 + a**2 + 2 * a_min * a * rbf(x_min, x, gamma)
    wd = norm2 - a_z**2
    best = int(np.argmin(wd))
    return hs[best], wd[best], a_z[best]


@pytest.mark.parametrize("seed", range(25))
def test_gss_merge_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    gamma = rng.uniform(0.2, 2.0)
    x_min, x = rng.normal(size=4), rng.normal(size=4) * 0.7
    a_min = rng.uniform(0.05, 1.0)
    a = a_min + rng.uniform(0.0, 2.0)  # x_min has the smaller coefficient
    kappa = rbf(x_min, x, gamma)
    total = a_min + a
    m = a_min / total  # x_min's share
    h, g = golden_section_h(m, np.log(kappa), GSS_PRECISE_EPS)
    wd = total**2 * weight_degradation(m, kappa, g)
    h_bf, wd_bf, a_z_bf = brute_force_merge(x_min, a_min, x, a, gamma)
    assert wd == pytest.approx(wd_bf, abs=1e-7)
    assert total * g == pytest.approx(a_z_bf, rel=1e-6, abs=1e-9)
    # the WD is the squared RKHS distance at the returned h (direct evaluation)
    z = h * x_min + (1 - h) * x
    a_z = a_min * rbf(x_min, z, gamma) + a * rbf(x, z, gamma)
    direct = (
        a_min**2
        + a**2
        + a_z**2
        + 2 * a_min * a * kappa
        - 2 * a_z * a_min * rbf(x_min, z, gamma)
        - 2 * a_z * a * rbf(x, z, gamma)
    )
    assert wd == pytest.approx(direct, abs=1e-9)


def test_share_convention_puts_z_near_the_heavier_point():
    """The printed pseudo-code (m = partner's share) puts z at the wrong end; ours must not."""
    rng = np.random.default_rng(1)
    x_min, x = rng.uniform(size=5), rng.uniform(size=5)
    gamma, a_min, a = 1.0, 0.1, 1.0
    kappa = rbf(x_min, x, gamma)
    m = a_min / (a_min + a)
    h, g = golden_section_h(m, np.log(kappa), GSS_PRECISE_EPS)
    wd_ours = (a_min + a) ** 2 * weight_degradation(m, kappa, g)
    h_wrong, g_wrong = golden_section_h(1 - m, np.log(kappa), GSS_PRECISE_EPS)
    z_wrong = h_wrong * x_min + (1 - h_wrong) * x
    a_z_wrong = a_min * rbf(x_min, z_wrong, gamma) + a * rbf(x, z_wrong, gamma)
    wd_wrong = a_min**2 + a**2 + 2 * a_min * a * kappa - a_z_wrong**2
    assert h < 0.5  # z close to x, the point with the larger coefficient
    assert wd_ours < 0.2 * wd_wrong


def test_weight_degradation_scales_with_squared_coefficient_sum():
    rng = np.random.default_rng(2)
    x_min, x, gamma = rng.normal(size=3), rng.normal(size=3), 0.5
    for factor in (0.5, 3.0):
        _, wd1, _ = brute_force_merge(x_min, 0.3, x, 0.9, gamma)
        _, wd2, _ = brute_force_merge(x_min, 0.3 * factor, x, 0.9 * factor, gamma)
        assert wd2 == pytest.approx(factor**2 * wd1, rel=1e-9)


def test_merge_smallest_picks_min_wd_partner_and_updates_state():
    rng = np.random.default_rng(3)
    d, n, gamma = 3, 6, 0.8
    sv = rng.normal(size=(n, d))
    coef = np.array([0.9, -0.5, 0.05, 1.2, 0.7, -0.3])
    sv_t = np.zeros((d, n + 1))
    sv_t[:, :n] = sv.T
    sv_sq = np.zeros(n + 1)
    sv_sq[:n] = (sv**2).sum(1)
    c = np.zeros((n + 1, 1))
    c[:n, 0] = coef
    w_before = (sv.copy(), coef.copy())
    n_new, wd, merged = merge(sv_t, sv_sq, c, n, gamma)
    assert (n_new, merged) == (n - 1, 1)
    # brute force over all same-sign partners of x_min = SV 2
    best = min((brute_force_merge(sv[2], coef[2], sv[j], coef[j], gamma, grid=2001)[1], j) for j in (0, 3, 4))
    assert wd == pytest.approx(best[0], rel=2e-3, abs=1e-9)
    # RKHS distance between the old and the new expansion equals the reported WD
    new_sv, new_coef = sv_t[:, :n_new].T, c[:n_new, 0]

    def gram(A, B):
        return rbf(A[:, None, :], B[None, :, :], gamma)

    old_sv, old_coef = w_before
    dist2 = (
        old_coef @ gram(old_sv, old_sv) @ old_coef
        + new_coef @ gram(new_sv, new_sv) @ new_coef
        - 2 * old_coef @ gram(old_sv, new_sv) @ new_coef
    )
    assert dist2 == pytest.approx(wd, rel=1e-6, abs=1e-10)
    np.testing.assert_allclose(sv_sq[:n_new], (new_sv**2).sum(1))


def test_merge_falls_back_to_removal_without_same_sign_partner():
    sv_t = np.array([[0.0, 1.0, 2.0, 0.0]])
    sv_sq = np.array([0.0, 1.0, 4.0, 0.0])
    coef = np.array([[0.1], [-1.0], [-2.0], [0.0]])
    n_new, wd, merged = merge(sv_t, sv_sq, coef, 3, 1.0)
    assert (n_new, merged) == (2, 0)
    assert wd == pytest.approx(0.01)
    assert sorted(coef[:2, 0]) == [-2.0, -1.0]


@pytest.mark.parametrize("solver_name", ["gss", "lookup-wd"])
@pytest.mark.parametrize("newest_is_smallest", [True, False])
def test_reusing_the_margin_row_gives_the_same_merge(solver_name, newest_is_smallest):
    """merge_smallest(known_row=True) reuses the new SV's kernel row from the margin
    computation (rbf_row_and_log) when that SV is x_min; the result must be bit-identical
    to recomputing the row, and the row must be ignored when x_min is another SV."""
    from svmstream.solvers.budgeted._lookup import merge_tables
    from svmstream.solvers.budgeted._merging import MERGE_SOLVERS
    from svmstream.solvers.kernels import rbf_row_and_log

    rng = np.random.default_rng(7)
    d, cap, gamma = 5, 12, 0.7
    sv_t = np.zeros((d, cap))
    sv_sq = np.zeros(cap)
    coef = np.zeros((cap, 1))
    n_old = cap - 1
    sv_t[:, :n_old] = rng.normal(size=(d, n_old))
    sv_sq[:n_old] = (sv_t[:, :n_old] ** 2).sum(axis=0)
    coef[:n_old, 0] = rng.uniform(0.5, 2.0, n_old) * rng.choice([-1.0, 1.0], n_old)
    x = rng.normal(size=d)
    work = np.full(2 * cap, np.nan)
    rbf_row_and_log(x, float(x @ x), sv_t, sv_sq, n_old, gamma, work, work[cap:])
    np.testing.assert_allclose(work[:n_old], rbf(x, sv_t[:, :n_old].T, gamma), rtol=1e-12)
    np.testing.assert_allclose(work[cap : cap + n_old], np.log(rbf(x, sv_t[:, :n_old].T, gamma)), rtol=1e-12)
    # append x as the newest SV, as add_support_vector does
    sv_t[:, n_old] = x
    sv_sq[n_old] = float(x @ x)
    coef[n_old, 0] = 0.01 if newest_is_smallest else 5.0
    h_table, wd_table = merge_tables()
    solver = MERGE_SOLVERS[solver_name]
    results = []
    for known in (True, False):
        state = [sv_t.copy(), sv_sq.copy(), coef.copy()]
        scratch = work.copy()
        n_new, wd, merged = merge_smallest(
            *state,
            cap,
            gamma,
            solver,
            GSS_STANDARD_EPS,
            h_table,
            wd_table,
            -1,
            np.zeros(N_DIAG),
            np.zeros(d),
            scratch,
            known,
        )
        results.append((state, n_new, wd, merged))
    (a, n_a, wd_a, m_a), (b, n_b, wd_b, m_b) = results
    assert (n_a, wd_a, m_a) == (n_b, wd_b, m_b) and n_a == n_old
    for left, right in zip(a, b):
        assert np.array_equal(left, right)
    # the SV with the smallest |coefficient| (x itself or an older one) is merged away
    i_min = int(np.argmin(np.abs(coef[:cap, 0])))
    assert (i_min == n_old) == newest_is_smallest
    assert not any(np.array_equal(a[0][:, j], sv_t[:, i_min]) for j in range(n_a))
