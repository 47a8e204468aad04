"""Projection / removal budget maintenance checked against direct numpy linear algebra.

Every reference below is computed from scratch (Gram matrices, np.linalg.inv/solve) on the
SVs tracked by a plain Python list that mimics the "move the last SV into the freed slot"
convention, so slot bookkeeping errors show up as mismatches.
"""

import numba as nb
import numpy as np
import pytest

from svmstream.solvers.budgeted._merging import smallest_coefficient_slot
from svmstream.solvers.budgeted._projection import (
    DEFAULT_JITTER,
    append_sv,
    kinv_append,
    kinv_rebuild,
    kinv_remove,
    project_smallest,
    remove_smallest,
    smallest_slot,
)


def gram(A, B, gamma):
    d2 = np.sum(A**2, 1)[:, None] + np.sum(B**2, 1)[None, :] - 2 * A @ B.T
    return np.exp(-gamma * np.maximum(d2, 0.0))


class State:
    """Preallocated BSGD-like state (capacity B + 1) plus a reference list of live points."""

    def __init__(self, d, capacity, n_cls, gamma, jitter=DEFAULT_JITTER):
        self.sv_t = np.zeros((d, capacity))
        self.sv_sq = np.zeros(capacity)
        self.coef = np.zeros((capacity, n_cls))
        self.k_inv = np.zeros((capacity, capacity))
        self.n = 0
        self.gamma, self.jitter = gamma, jitter
        self.x_buf = np.zeros(d)
        self.k_buf = np.zeros(capacity)
        self.work = np.zeros(capacity)
        self.points = []  # reference: slot j holds self.points[j]

    def append(self, x, c):
        x = np.ascontiguousarray(x, dtype=float)
        c = np.atleast_1d(np.asarray(c, dtype=float))
        k_vec = np.zeros(self.k_buf.shape[0])
        if self.n:
            k_vec[: self.n] = gram(x[None], self.sv_t[:, : self.n].T, self.gamma)[0]
        self.n, s = append_sv(
            self.sv_t, self.sv_sq, self.coef, self.n, x, c, k_vec, self.k_inv, self.jitter, self.work
        )
        self.points.append(x.copy())
        return s

    def ref_remove(self, p):
        last = self.points.pop()
        if p < len(self.points):
            self.points[p] = last

    def X(self):
        return self.sv_t[:, : self.n].T.copy()

    def K(self):
        return gram(self.X(), self.X(), self.gamma)


def rel_err(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def random_state(seed, n, d=5, n_cls=1, capacity=None, gamma=0.5, jitter=DEFAULT_JITTER):
    rng = np.random.default_rng(seed)
    st = State(d, capacity or n + 1, n_cls, gamma, jitter)
    for _ in range(n):
        st.append(rng.normal(size=d), rng.normal(size=n_cls))
    return st, rng


# --------------------------------------------------------------------------- k_inv upkeep


@pytest.mark.parametrize("seed", range(5))
def test_appends_and_removes_keep_exact_inverse(seed):
    """Random appends/removes: k_inv equals inv(K + εI) of the live SVs in slot order, and
    the reference point list (slot moves) matches sv_t."""
    st, rng = random_state(seed, 0, capacity=40)
    for step in range(300):
        if st.n < 3 or (st.n < 40 and rng.random() < 0.55):
            st.append(rng.normal(size=5), rng.normal())
        else:
            p = int(rng.integers(st.n)) if step % 7 else st.n - 1  # also the last slot
            kinv_remove(st.k_inv, st.n, p, st.work)
            st.n -= 1
            # apply the same slot move to the SV arrays by hand
            st.sv_t[:, p] = st.sv_t[:, st.n]
            st.sv_sq[p] = st.sv_sq[st.n]
            st.ref_remove(p)
        if step % 25 == 0 or step == 299:
            np.testing.assert_array_equal(st.X(), np.array(st.points))
            K = st.K()
            ref = np.linalg.inv(K + st.jitter * np.eye(st.n))
            assert rel_err(st.k_inv[: st.n, : st.n], ref) < 1e-9
            # and to inv(K) itself, within the ridge's own effect ε/λ_min(K)
            lam_min = np.linalg.eigvalsh(K)[0]
            tol = max(1e-8, 10 * st.jitter / lam_min)
            assert rel_err(st.k_inv[: st.n, : st.n], np.linalg.inv(K)) < tol
            # rows/columns beyond the live block are cleared by removals, never read
            assert np.allclose(st.k_inv[: st.n, : st.n], st.k_inv[: st.n, : st.n].T, rtol=0, atol=0)


def test_zero_jitter_matches_plain_inverse():
    st, rng = random_state(11, 30, jitter=0.0)
    for _ in range(10):
        p = int(rng.integers(st.n))
        kinv_remove(st.k_inv, st.n, p, st.work)
        st.n -= 1
        st.sv_t[:, p] = st.sv_t[:, st.n]
        st.sv_sq[p] = st.sv_sq[st.n]
        st.append(rng.normal(size=5), rng.normal())
    assert rel_err(st.k_inv[: st.n, : st.n], np.linalg.inv(st.K())) < 1e-8


def test_schur_complement_is_the_new_diagonal_pivot():
    st, rng = random_state(3, 12)
    K = st.K()
    x = rng.normal(size=5)
    k = gram(x[None], st.X(), st.gamma)[0]
    s = st.append(x, 1.0)
    expected = 1.0 + st.jitter - k @ np.linalg.solve(K + st.jitter * np.eye(12), k)
    assert s == pytest.approx(expected, rel=1e-10)


def test_duplicate_sv_is_floored_and_projects_onto_its_twin():
    """An exact duplicate makes K singular: the ridge keeps k_inv finite and equal to
    inv(K + εI); projecting the duplicate moves its whole weight onto the twin."""
    st, rng = random_state(4, 10)
    x = st.X()[3]
    s = st.append(x, -1e-3)  # identical to slot 3, and the smallest coefficient
    assert smallest_slot(st.coef, st.n)[0] == 10
    assert st.jitter * 0.5 <= s < 3 * st.jitter
    ref = np.linalg.inv(st.K() + st.jitter * np.eye(st.n))
    assert rel_err(st.k_inv[: st.n, : st.n], ref) < 1e-6  # cond ≈ 1/ε here
    X_test = rng.normal(size=(50, 5))
    f_before = gram(X_test, st.X(), st.gamma) @ st.coef[: st.n, 0]
    c3 = st.coef[3, 0]
    st.n, wd = run_projection(st)
    f_after = gram(X_test, st.X(), st.gamma) @ st.coef[: st.n, 0]
    assert st.coef[3, 0] == pytest.approx(c3 - 1e-3, abs=1e-3 * 1e2 * st.jitter)  # ridge shrink
    assert wd < 1e-9
    np.testing.assert_allclose(f_after, f_before, atol=1e-7)


def test_rebuild_equals_incremental():
    st, _ = random_state(5, 25)
    fresh = np.zeros_like(st.k_inv)
    kinv_rebuild(fresh, st.sv_t, st.sv_sq, st.n, st.gamma, st.jitter, st.x_buf, st.k_buf)
    assert rel_err(fresh[: st.n, : st.n], st.k_inv[: st.n, : st.n]) < 1e-12


# --------------------------------------------------------------------------- projection


def reference_projection(X, coef, gamma, jitter):
    """Brute force eq. (14): p, Δα (per class) = solve(K_p + εI, k_p)·α_p, and the RKHS
    distance ‖α_p φ_p − Σ Δα_j φ_j‖² from the Gram matrix of all SVs."""
    norms = np.sum(coef**2, axis=1)
    p = smallest_coefficient_slot(np.ascontiguousarray(coef), len(X))  # merging's tie rule
    assert norms[p] <= norms.min() * (1 + 1e-8)
    rest = [j for j in range(len(X)) if j != p]
    K = gram(X, X, gamma)
    K_p = K[np.ix_(rest, rest)]
    k_p = K[rest, p]
    u = np.linalg.solve(K_p + jitter * np.eye(len(rest)), k_p)
    delta = np.outer(u, coef[p])  # (n-1, K)
    wd = 0.0
    for c in range(coef.shape[1]):
        diff = np.zeros(len(X))
        diff[p] = coef[p, c]
        diff[rest] = -delta[:, c]
        wd += diff @ K @ diff
    return p, rest, delta, wd


def run_projection(st, expect_rebuild=False):
    n, wd, rebuilt = project_smallest(
        st.sv_t, st.sv_sq, st.coef, st.n, st.gamma, st.k_inv, st.jitter, st.x_buf, st.k_buf, st.work
    )
    if expect_rebuild is not None:
        assert rebuilt == int(expect_rebuild)
    return n, wd


@pytest.mark.parametrize("n_cls", [1, 3])
@pytest.mark.parametrize("jitter", [0.0, DEFAULT_JITTER])
@pytest.mark.parametrize("seed", range(3))
def test_projection_matches_linear_solve(seed, jitter, n_cls):
    st, rng = random_state(seed, 20, n_cls=n_cls, jitter=jitter)
    X, coef = st.X(), st.coef[: st.n].copy()
    p, rest, delta, wd_ref = reference_projection(X, coef, st.gamma, jitter)
    assert smallest_slot(st.coef, st.n)[0] == p

    new_n, wd = run_projection(st)
    assert new_n == 19 and st.n == 20
    st.n = new_n
    st.ref_remove(p)
    # the slot move: slot p now holds the former last SV, everything else stays put
    expected_coef = coef.copy()
    expected_coef[rest] += delta
    expected_coef[p] = expected_coef[-1]
    expected_coef = expected_coef[:-1]
    np.testing.assert_allclose(st.coef[: st.n], expected_coef, rtol=1e-9, atol=1e-12)
    assert np.all(st.coef[st.n] == 0.0)
    np.testing.assert_array_equal(st.X(), np.array(st.points))
    np.testing.assert_allclose(st.sv_sq[: st.n], np.sum(st.X() ** 2, 1), rtol=1e-14)
    # reported WD = RKHS distance computed from the Gram matrix
    assert wd == pytest.approx(wd_ref, rel=1e-7, abs=1e-12 * np.sum(coef[p] ** 2))
    # k_inv follows the deletion
    ref = np.linalg.inv(st.K() + jitter * np.eye(st.n))
    assert rel_err(st.k_inv[: st.n, : st.n], ref) < 1e-9
    # the function changed by exactly the projected-away part: f_new − f_old on test points
    # equals −(α_p k(·, x_p) − Σ Δα_j k(·, x_j)), checked via the RKHS norm above and here
    X_test = rng.normal(size=(30, 5))
    f_old = gram(X_test, X, st.gamma) @ coef
    f_new = gram(X_test, st.X(), st.gamma) @ st.coef[: st.n]
    resid = gram(X_test, X[[p]], st.gamma) @ coef[[p]] - gram(X_test, X[rest], st.gamma) @ delta
    np.testing.assert_allclose(f_old - f_new, resid, atol=1e-9)


def test_multiclass_uses_one_inverse_for_all_classes():
    """Δα[:, c] = α_p[c]·u with the same u for every class (eq. 14 per class, one K⁻¹)."""
    st, _ = random_state(7, 15, n_cls=3)
    coef = st.coef[: st.n].copy()
    p, rest, delta, _ = reference_projection(st.X(), coef, st.gamma, st.jitter)
    u = delta[:, 0] / coef[p, 0]
    for c in range(3):
        np.testing.assert_allclose(delta[:, c], coef[p, c] * u, rtol=1e-12)
    run_projection(st)
    moved = st.coef[:14].copy()
    moved_ref = coef.copy()
    moved_ref[rest] += np.outer(u, coef[p])
    moved_ref[p] = moved_ref[-1]
    np.testing.assert_allclose(moved, moved_ref[:-1], rtol=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_projection_is_rkhs_optimal(seed):
    """Any perturbation of Δα increases the distance (jitter 0); with the ridge, Δα is the
    minimiser of WD + ε‖Δα‖² (the documented regularised objective)."""
    for jitter in (0.0, 1e-3):
        st, rng = random_state(seed, 12, jitter=jitter)
        X, coef = st.X(), st.coef[: st.n, 0].copy()
        p, rest, delta, _ = reference_projection(X, coef[:, None], st.gamma, jitter)
        # recover Δα from the solver itself: new coef − old coef on the remaining slots
        run_projection(st)
        slot_of = {j: j for j in rest}
        slot_of[len(X) - 1] = p  # the last SV moved into slot p
        new = np.array([st.coef[slot_of[j], 0] for j in rest])
        dalpha = new - coef[rest]
        K = gram(X, X, st.gamma)

        def objective(da):
            diff = np.zeros(len(X))
            diff[p] = coef[p]
            diff[rest] = -da
            return diff @ K @ diff + jitter * da @ da

        base = objective(dalpha)
        for _ in range(50):
            direction = rng.normal(size=len(rest))
            for size in (1e-4, 1e-2, 1.0):
                assert objective(dalpha + size * direction) > base


def test_projection_of_single_sv_removes_it():
    st, _ = random_state(8, 1, n_cls=2, capacity=3)
    a2 = np.sum(st.coef[0] ** 2)
    new_n, wd = run_projection(st)
    assert new_n == 0 and wd == pytest.approx(a2)
    assert np.all(st.coef == 0.0)


def steady_state(st, steps, rng, centers, B, noise=0.3, check_every=0):
    """Append clustered points at slot B and project back to B SVs.

    Every ``check_every`` maintenance steps the applied update is checked against direct
    Gram-matrix evaluation.  Returns (#rebuilds, worst |reported − true WD| / ‖α_p‖²,
    worst (true WD − ridge-optimal WD) / ‖α_p‖²)."""
    rebuilds, worst_err, worst_excess, events = 0, 0.0, 0.0, 0
    for t in range(steps):
        x = centers[t % len(centers)] + noise * rng.normal(size=centers.shape[1])
        st.append(x, rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.5))
        if st.n <= B:
            continue
        events += 1
        check = check_every and events % check_every == 0
        if check:
            X, before = st.X(), st.coef[: st.n, 0].copy()
            p = smallest_coefficient_slot(st.coef, st.n)
        n, wd, rebuilt = project_smallest(
            st.sv_t, st.sv_sq, st.coef, st.n, st.gamma, st.k_inv, st.jitter, st.x_buf, st.k_buf, st.work
        )
        assert np.isfinite(wd) and wd >= 0.0
        if check:
            after = st.coef[:n, 0].copy()
            if p != n:  # the last SV moved into slot p
                after = np.append(after, after[p])
                after[p] = 0.0
            else:
                after = np.append(after, 0.0)
            diff = before - after  # α_p at p, −Δα elsewhere (original slot order)
            K = gram(X, X, st.gamma)
            a2 = before[p] ** 2
            wd_true = diff @ K @ diff
            rest = [j for j in range(st.n) if j != p]
            u = np.linalg.solve(K[np.ix_(rest, rest)] + st.jitter * np.eye(len(rest)), K[rest, p])
            opt = np.zeros(st.n)
            opt[p] = before[p]
            opt[rest] = -before[p] * u
            worst_err = max(worst_err, abs(wd - wd_true) / a2)
            worst_excess = max(worst_excess, (wd_true - opt @ K @ opt) / a2)
        st.n = n
        rebuilds += rebuilt
    return rebuilds, worst_err, worst_excess


def test_long_maintenance_loop_stays_accurate():
    """A BSGD-like steady state (append at slot B, project back to B) on clustered data
    (cond(K + εI) ≈ 3e4): k_inv tracks inv(K + εI) at the scale cond·1e-12,
    every reported WD matches the direct RKHS distance, and kinv_rebuild resets to LAPACK
    accuracy."""
    rng = np.random.default_rng(9)
    B, d = 30, 3
    st = State(d, B + 1, 1, gamma=0.5)
    centers = rng.normal(size=(4, d))
    rebuilds, wd_err, excess = steady_state(st, 600, rng, centers, B, check_every=5)
    Ke = st.K() + st.jitter * np.eye(st.n)
    cond = np.linalg.cond(Ke)
    assert cond > 1e4  # the case is meant to be hard-ish
    assert rel_err(st.k_inv[: st.n, : st.n], np.linalg.inv(Ke)) < 1e-10 * cond
    assert rebuilds == 0 and wd_err < 1e-8 and excess < 1e-8
    kinv_rebuild(st.k_inv, st.sv_t, st.sv_sq, st.n, st.gamma, st.jitter, st.x_buf, st.k_buf)
    assert rel_err(st.k_inv[: st.n, : st.n], np.linalg.inv(Ke)) < 1e-13 * cond


@pytest.mark.parametrize("jitter, max_wd_err", [(DEFAULT_JITTER, 1e-4), (1e-8, 2e-2)])
def test_nearly_singular_k_stays_finite_and_accurate(jitter, max_wd_err):
    """B = 100 SVs in four 3-D clusters: cond(K + εI) reaches ~5e7 (ε = 1e-6) or ~5e9
    (ε = 1e-8).  With ε = 1e-8 the incremental updates alone drifted into NaN within a few
    thousand steps (measured before the consistency check existed); now the check rebuilds
    k_inv when needed, every step stays finite, and the applied Δα stays close to the
    ridge-optimal one.  Measured worst |reported − true WD|/‖α_p‖²: 8e-6 (ε = 1e-6),
    4e-3 (ε = 1e-8) — the reason for the default ε = 1e-6."""
    rng = np.random.default_rng(1)
    B, d = 100, 3
    st = State(d, B + 1, 1, gamma=0.5, jitter=jitter)
    centers = rng.normal(size=(4, d))
    rebuilds, wd_err, excess = steady_state(st, 1500, rng, centers, B, check_every=20)
    Ke = st.K() + st.jitter * np.eye(st.n)
    assert np.linalg.cond(Ke) > 1e7
    assert np.all(np.isfinite(st.coef)) and np.all(np.isfinite(st.k_inv))
    assert wd_err < max_wd_err
    assert excess < 1e-2
    if jitter < DEFAULT_JITTER:
        assert rebuilds > 0
    resid = np.abs(np.eye(st.n) - st.k_inv[: st.n, : st.n] @ Ke).max()
    assert resid < (0.05 if jitter == DEFAULT_JITTER else 10.0)


def test_corrupted_inverse_is_rebuilt_and_result_is_exact():
    st, _ = random_state(14, 20, n_cls=2)
    X, coef = st.X(), st.coef[: st.n].copy()
    p, rest, delta, wd_ref = reference_projection(X, coef, st.gamma, st.jitter)
    st.k_inv[:20, :20] *= 1.01  # a 1% error everywhere
    st.n, wd = run_projection(st, expect_rebuild=True)
    expected = coef.copy()
    expected[rest] += delta
    expected[p] = expected[-1]
    np.testing.assert_allclose(st.coef[: st.n], expected[:-1], rtol=1e-9, atol=1e-12)
    assert wd == pytest.approx(wd_ref, rel=1e-7)
    ref = np.linalg.inv(st.K() + st.jitter * np.eye(st.n))
    assert rel_err(st.k_inv[: st.n, : st.n], ref) < 1e-9
    # NaN (e.g. a broken downdate) is caught as well
    st.append(np.zeros(5), [1e-3, 0.0])
    st.k_inv[3, st.n - 1] = st.k_inv[st.n - 1, 3] = np.nan  # in the projected column
    st.n, wd = run_projection(st, expect_rebuild=True)
    assert np.isfinite(wd) and np.all(np.isfinite(st.k_inv[: st.n, : st.n]))


# --------------------------------------------------------------------------- removal


@pytest.mark.parametrize("update_kinv", [True, False])
def test_remove_smallest(update_kinv):
    st, rng = random_state(10, 18, n_cls=3)
    coef = st.coef[: st.n].copy()
    norms = np.sum(coef**2, 1)
    p = int(np.argmin(norms))
    kinv_before = st.k_inv.copy()
    new_n, wd = remove_smallest(st.sv_t, st.sv_sq, st.coef, st.n, st.k_inv, update_kinv, st.work)
    assert wd == pytest.approx(norms[p], rel=1e-15)
    st.n = new_n
    st.ref_remove(p)
    np.testing.assert_array_equal(st.X(), np.array(st.points))
    expected = coef.copy()
    expected[p] = expected[-1]
    np.testing.assert_array_equal(st.coef[: st.n], expected[:-1])
    if update_kinv:
        ref = np.linalg.inv(st.K() + st.jitter * np.eye(st.n))
        assert rel_err(st.k_inv[: st.n, : st.n], ref) < 1e-9
    else:
        np.testing.assert_array_equal(st.k_inv, kinv_before)


def test_smallest_slot_follows_the_merging_rule():
    """Removal, projection and merging pick the same SV: merging's tie rule, and its norm."""
    coef = np.array([[1.0, 0.0], [-0.5, 0.1], [0.5 * (1 + 1e-12), 0.1], [0.5, -0.1], [2.0, 0.0]])
    p, norm2 = smallest_slot(coef, 5)
    assert p == smallest_coefficient_slot(coef, 5) and p in (1, 2, 3)
    assert norm2 == pytest.approx(0.26, rel=1e-11)
    assert smallest_slot(coef, 1)[0] == 0


def test_errors():
    st, _ = random_state(12, 3, capacity=3)
    with pytest.raises(ValueError):
        kinv_append(st.k_inv, 3, st.k_buf, 1.0, 0.0, st.work)  # no room for a 4th SV
    with pytest.raises(ValueError):
        kinv_remove(st.k_inv, 3, 3, st.work)
    with pytest.raises(ValueError):
        remove_smallest(st.sv_t, st.sv_sq, st.coef, 0, st.k_inv, True, st.work)
    with pytest.raises(ValueError):
        append_sv(st.sv_t, st.sv_sq, st.coef, 3, np.zeros(5), np.zeros(1), st.k_buf, st.k_inv, 0.0, st.work)
    with pytest.raises(ValueError):  # one coefficient per class
        append_sv(st.sv_t, st.sv_sq, st.coef, 2, np.zeros(5), np.zeros(2), st.k_buf, st.k_inv, 0.0, st.work)


# --------------------------------------------------------------------------- integration


@nb.njit
def _binary_caller(sv_t, sv_sq, coef_1d, n_sv, gamma, k_inv, jitter, x_buf, k_buf, u_buf):
    """How bsgd.py calls it: a 1-D coefficient vector viewed as (capacity, 1)."""
    return project_smallest(
        sv_t, sv_sq, coef_1d.reshape((coef_1d.shape[0], 1)), n_sv, gamma, k_inv, jitter, x_buf, k_buf, u_buf
    )


def test_binary_1d_coef_through_reshape_inside_njit():
    st, _ = random_state(13, 10)
    coef_1d = st.coef[:, 0].copy()
    expected_n, expected_wd = run_projection(st)
    st2, _ = random_state(13, 10)
    n, wd, _ = _binary_caller(
        st2.sv_t, st2.sv_sq, coef_1d, st2.n, st2.gamma, st2.k_inv, st2.jitter, st2.x_buf, st2.k_buf, st2.work
    )
    assert n == expected_n and wd == expected_wd
    np.testing.assert_array_equal(coef_1d, st.coef[:, 0])
    np.testing.assert_array_equal(st2.k_inv, st.k_inv)
