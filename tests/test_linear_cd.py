"""Tests of the LIBLINEAR dual CD / AVSF kernels (svmstream.solvers.linear._cd) and the estimator.

References: Hsieh et al. (ICML 2008), Algorithm 3; Glasmachers & Dogan (arXiv:1302.5608),
Algorithms 2-5.  Numerics are checked against direct computations: a line-by-line Python
re-implementation of one sweep driven by the same random stream, the KKT conditions of
the box-constrained dual, and an independent solver (scikit-learn's LinearSVC/LIBLINEAR).
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_iris, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from svmstream.solvers.linear import _cd as L
from svmstream.solvers.linear import _cd_kernels as K
from svmstream.solvers.linear import _cd_rng as R
from svmstream.solvers.linear._cd import Cancelled, as_cd_input, decision_values, dual_cd
from svmstream.solvers.linear._classes import LinearDualCDClassifier
from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state


def _problem(n=120, d=15, density=None, seed=0, noise=0.6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if density is not None:
        X[rng.random(size=X.shape) > density] = 0.0
    y = np.where(X @ rng.normal(size=d) + noise * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _kkt_spread(X, y, w, alpha, C):
    """Projected-gradient spread v_max - v_min of the dual, computed directly."""
    g = 1.0 - y * (X @ w)
    pg = np.where(alpha <= 0.0, np.maximum(g, 0.0), np.where(alpha >= C, np.minimum(g, 0.0), g))
    return pg.max() - pg.min()


# ----------------------------------------------------------------------------- solver


@pytest.mark.parametrize("selection", ["uniform", "avsf", "avsf-paper"])
@pytest.mark.parametrize("C", [0.05, 1.0, 20.0])
def test_solution_satisfies_kkt_and_duality(selection, C):
    X, y = _problem()
    res = dual_cd(X, y, C=C, tol=1e-6, max_iter=200000, selection=selection, seed=3)
    assert res.converged
    # w is the dual expansion, alpha is feasible
    np.testing.assert_allclose(res.w, X.T @ (res.alpha * y), atol=1e-9)
    assert res.alpha.min() >= 0.0 and res.alpha.max() <= C
    # stopping rule checked directly; objectives recomputed from scratch
    assert _kkt_spread(X, y, res.w, res.alpha, C) < 1e-5
    primal = 0.5 * res.w @ res.w + C * np.maximum(0.0, 1.0 - y * (X @ res.w)).sum()
    dual = res.alpha.sum() - 0.5 * res.w @ res.w
    assert res.primal == pytest.approx(primal, rel=1e-12)
    assert res.dual == pytest.approx(dual, rel=1e-12)
    assert res.dual <= res.primal + 1e-9
    assert (res.primal - res.dual) / res.primal < 1e-5
    assert res.n_updates <= res.n_steps


def test_both_selections_and_liblinear_agree():
    X, y = _problem(n=200, d=10, seed=4)
    C = 2.0
    a = dual_cd(X, y, C=C, tol=1e-7, max_iter=10**6, selection="uniform", seed=1)
    b = dual_cd(X, y, C=C, tol=1e-7, max_iter=10**6, selection="avsf", seed=2)
    c = dual_cd(X, y, C=C, tol=1e-7, max_iter=10**6, selection="avsf-paper", seed=3)
    assert a.dual == pytest.approx(b.dual, rel=1e-7)
    assert a.dual == pytest.approx(c.dual, rel=1e-7)
    # independent implementation: scikit-learn's bundled LIBLINEAR, same problem (no bias)
    ref = LinearSVC(
        loss="hinge", dual=True, fit_intercept=False, C=C, tol=1e-8, max_iter=10**6, random_state=0
    ).fit(X, y)
    w = ref.coef_.ravel()
    ref_primal = 0.5 * w @ w + C * np.maximum(0.0, 1.0 - y * (X @ w)).sum()
    assert a.primal == pytest.approx(ref_primal, rel=1e-5)
    assert b.primal == pytest.approx(ref_primal, rel=1e-5)
    assert c.primal == pytest.approx(ref_primal, rel=1e-5)


@pytest.mark.parametrize("selection", ["uniform", "avsf", "avsf-paper"])
def test_sparse_and_dense_give_identical_runs(selection):
    X, y = _problem(density=0.3, seed=5)
    X[7] = 0.0  # an empty row (Q_ii = 0) must not break anything
    dense = dual_cd(X, y, C=3.0, tol=1e-4, max_iter=5000, selection=selection, seed=9)
    Xs = sp.csr_matrix(X)
    sparse = dual_cd(Xs, y, C=3.0, tol=1e-4, max_iter=5000, selection=selection, seed=9)
    assert dense.n_steps == sparse.n_steps and dense.n_iter == sparse.n_iter
    np.testing.assert_allclose(dense.w, sparse.w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dense.alpha, sparse.alpha, rtol=1e-10, atol=1e-12)
    # int64-indexed CSC input with duplicate entries is canonicalised (norms stay right)
    coo = sp.coo_matrix(X)
    dup = sp.coo_matrix(
        (np.r_[coo.data, coo.data[:5]], (np.r_[coo.row, coo.row[:5]], np.r_[coo.col, coo.col[:5]])),
        shape=X.shape,
    )
    X2 = dup.toarray()
    r1 = dual_cd(X2, y, C=3.0, tol=1e-4, max_iter=5000, selection=selection, seed=9)
    r2 = dual_cd(dup.tocsc(), y, C=3.0, tol=1e-4, max_iter=5000, selection=selection, seed=9)
    np.testing.assert_allclose(r1.w, r2.w, rtol=1e-10, atol=1e-12)


def test_uniform_sweep_matches_reference_implementation():
    """Algorithm 2 re-implemented in plain Python, driven by the kernel's random stream."""
    X, y = _problem(n=40, d=6, seed=11)
    C, tol = 0.7, 1e-3
    n = X.shape[0]
    inp = as_cd_input(X)
    qd = (X * X).sum(axis=1)
    # kernel state
    alpha = np.zeros(n)
    w = np.zeros(X.shape[1])
    index = np.arange(n, dtype=np.int64)
    bounds = np.array([-np.inf, np.inf])
    counts = np.array([n, 0, 0, 0, 0, 0], dtype=np.int64)  # the 6 counters dual_cd passes
    rng = L._seed_state(5)
    # reference state
    r_alpha, r_w, r_index = alpha.copy(), w.copy(), index.copy()
    r_rng = rng.copy()
    r_active, vmin_old, vmax_old = n, -np.inf, np.inf
    min_active = n
    for _sweep in range(25):
        K._uniform_run(inp.arrays, (y, qd, C, tol), (alpha, w, index, bounds, counts, rng), 1, 1)
        for s in range(r_active):
            j = s + R._below(r_rng, r_active - s)
            r_index[s], r_index[j] = r_index[j], r_index[s]
        vmin, vmax, s, steps = np.inf, -np.inf, 0, 0
        while s < r_active:
            i = r_index[s]
            g = 1.0 - y[i] * (X[i] @ r_w)
            steps += 1
            a = r_alpha[i]
            if (a == 0.0 and g < vmin_old) or (a == C and g > vmax_old):
                r_active -= 1
                r_index[s], r_index[r_active] = r_index[r_active], r_index[s]
                continue
            pg = max(g, 0.0) if a == 0.0 else (min(g, 0.0) if a == C else g)
            vmax, vmin = max(vmax, pg), min(vmin, pg)
            if abs(pg) > 1e-12:
                r_alpha[i] = min(max(a + g / qd[i], 0.0), C)
                r_w += (r_alpha[i] - a) * y[i] * X[i]
            s += 1
        stop = vmax - vmin < tol
        if stop and r_active < n:
            r_active, vmin_old, vmax_old = n, -np.inf, np.inf
        elif not stop:
            vmin_old = vmin if vmin < 0 else -np.inf
            vmax_old = vmax if vmax > 0 else np.inf
        assert counts[2] == steps
        assert counts[0] == r_active
        min_active = min(min_active, r_active)
        np.testing.assert_array_equal(index, r_index)
        np.testing.assert_allclose(alpha, r_alpha, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(w, r_w, rtol=1e-9, atol=1e-12)
        if stop and r_active == n and counts[1]:
            break
    assert min_active < n // 2  # shrinking was exercised


PROBLEM_SEED = 12


def _ref_schedule(p, index, active, rng, systematic):
    """Algorithm 4 in plain Python, drawing from the kernel's random stream."""
    act = [int(i) for i in index[:active]]
    share = {i: active * p[i] / sum(p[j] for j in act) for i in act}
    sched = []
    if systematic:
        acc = R._uniform01(rng)
        for i in act:
            acc += share[i]
            k = int(acc)
            acc -= k
            for _ in range(k):  # inside-out Fisher-Yates
                j = R._below(rng, len(sched) + 1)
                sched.append(sched[j] if j < len(sched) else i)
                sched[j] = i
        return sched
    for i in act:
        k = math.floor(share[i])
        if R._uniform01(rng) < share[i] - k:
            k += 1
        sched += [i] * k
    for s in range(len(sched)):
        j = s + R._below(rng, len(sched) - s)
        sched[s], sched[j] = sched[j], sched[s]
    return sched


@pytest.mark.parametrize(
    "shrinking, restore, systematic",
    [(False, False, False), (True, False, True), (True, True, False), (False, True, True)],
    ids=["paper", "avsf", "shrink+restore", "restore+systematic"],
)
def test_avsf_run_matches_reference_implementation(shrinking, restore, systematic):
    """Algorithms 3-5 (and the documented shrinking / restore / systematic-rounding
    variants) re-implemented in plain Python, driven by the kernel's random stream, one
    outer iteration at a time."""
    X, y = _problem(n=30, d=5, seed=PROBLEM_SEED)
    C, tol = 2.0, 1e-3
    p_min, p_max, c = L.AVSF_P_MIN, L.AVSF_P_MAX, L.AVSF_C
    n = X.shape[0]
    inp = as_cd_input(X)
    qd = (X * X).sum(axis=1)
    alpha, w, p, p_saved = np.zeros(n), np.zeros(X.shape[1]), np.ones(n), np.ones(n)
    index, inactive = np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.uint8)
    schedule = np.empty(2 * n + 1, dtype=np.int64)
    fstate, bounds = np.zeros(1), np.array([-np.inf, np.inf])
    counts = np.array([1, 1, 0, 0, 0, 0, n, 0, 0, 0], dtype=np.int64)
    rng = L._seed_state(8)
    r_alpha, r_w, r_p, r_rng = alpha.copy(), w.copy(), p.copy(), rng.copy()
    r_index = index.copy()
    r_ref, first, canstop, r_saved = 0.0, True, True, None
    vmin_old, vmax_old = -np.inf, np.inf
    r_active, min_active, checks = n, n, 0
    for _sweep in range(60):
        K._avsf_run(
            inp.arrays,
            (y, qd, C, tol),
            (alpha, w, index, bounds, counts, rng),
            (p, p_saved, inactive, schedule, fstate),
            (p_min, p_max, c, shrinking, restore, systematic),
            1,
            1,
        )
        sched = _ref_schedule(r_p, r_index, r_active, r_rng, systematic)
        # Algorithm 3 inner loop with Algorithm 5 (and shrinking)
        vmin, vmax, gain_sum, steps, visited, shrunk = np.inf, -np.inf, 0.0, 0, 0, set()
        eta = 1.0 / r_active
        for i in sched:
            if i in shrunk:
                continue  # shrunk earlier in this schedule: no step
            g = 1.0 - y[i] * (X[i] @ r_w)
            steps += 1
            a = r_alpha[i]
            if (a == 0.0 and g < vmin_old) or (a == C and g > vmax_old):
                shrunk.add(i)
                continue
            visited += 1
            pg = max(g, 0.0) if a == 0.0 else (min(g, 0.0) if a == C else g)
            vmax, vmin = max(vmax, pg), min(vmin, pg)
            mu = min(max(g / qd[i], -a), C - a)
            r_alpha[i] = a + mu
            r_w += mu * y[i] * X[i]
            delta = mu * (g - 0.5 * mu * qd[i])
            if first:
                gain_sum += delta
            else:
                e = min(c * (delta / r_ref - 1.0), 50.0)  # the kernel caps the exponent
                r_p[i] = min(max(r_p[i] * math.exp(e), p_min), p_max)
                r_ref = (1 - eta) * r_ref + eta * delta
        act = [i for i in r_index[:r_active] if i not in shrunk]
        r_index = np.array(act + [i for i in r_index if i not in act], dtype=np.int64)
        r_active = len(act)
        min_active = min(min_active, r_active)
        if first:
            r_ref, first = gain_sum / visited, False
        spread = vmax - vmin if visited else 0.0
        done = False
        if spread < tol:
            if canstop and r_active == n:
                done = True
            else:
                if restore and not canstop:
                    r_saved = r_p.copy()
                r_p[:] = 1.0
                canstop, checks = True, checks + 1
                r_active, vmin_old, vmax_old = n, -np.inf, np.inf
        else:
            if canstop and r_saved is not None:
                r_p = np.clip(r_saved * r_p, p_min, p_max)
                r_saved = None
            canstop = False
            if shrinking:
                vmin_old = vmin if vmin < 0 else -np.inf
                vmax_old = vmax if vmax > 0 else np.inf
        assert counts[3] == steps and counts[6] == r_active and counts[8] == checks
        # shrinking thresholds: equal up to round-off (a variable visited twice in a row
        # has g = +-1e-16 on its second visit, so a threshold can be +-2.2e-16 in one
        # summation order and +-inf in the other); continue from the kernel's values
        for ker, ref in zip(bounds, (vmin_old, vmax_old)):
            assert ker == ref or abs(ker - ref) < 1e-12 or min(abs(ker), abs(ref)) < 1e-12
        vmin_old, vmax_old = bounds
        assert bool(counts[2]) == done
        np.testing.assert_array_equal(schedule[: len(sched)], sched)
        assert sorted(index[:r_active]) == sorted(r_index[:r_active])
        np.testing.assert_allclose(alpha, r_alpha, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(w, r_w, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(p, r_p, rtol=1e-9)
        assert fstate[0] == pytest.approx(r_ref, rel=1e-9)
        if done:
            break
        # the kernel's active-set order is the reference's up to the compaction order
        r_index = index.copy()
    assert p.min() >= p_min and p.max() <= p_max
    assert p.max() > p.min() or done  # the preferences did adapt
    if shrinking:
        assert min_active < n  # shrinking was exercised


def test_avsf_schedule_is_randomly_rounded_and_shuffled():
    p = np.array([0.05, 0.05, 1.0, 3.3, 20.0, 7.1, 0.5, 1.0, 2.0, 0.3])
    n = p.size
    for systematic in (False, True):
        rng = L._seed_state(1)
        index = np.array([9, 2, 5, 0, 7, 1, 4, 3, 6, 8], dtype=np.int64)  # active: first 8
        active = 8
        act = index[:active]
        share = np.zeros(n)
        share[act] = active * p[act] / p[act].sum()
        schedule = np.empty(2 * n + 1, dtype=np.int64)
        totals = np.zeros(n)
        first_pos = np.zeros(n)
        draws = 4000
        for _ in range(draws):
            m = K._avsf_schedule(p, index, active, rng, schedule, systematic)
            cnt = np.bincount(schedule[:m], minlength=n)
            assert np.all((cnt == np.floor(share)) | (cnt == np.floor(share) + 1))
            if systematic:
                assert m == active
            totals += cnt
            first_pos[schedule[0]] += 1
        # expected count of index i is exactly its share |A| p_i / sum_A(p)
        np.testing.assert_allclose(totals / draws, share, atol=0.03)
        # shuffled: the first entry is index i with probability share_i / |A|
        np.testing.assert_allclose(first_pos / draws, share / active, atol=0.03)
        # uniform preferences give every active index exactly once
        m = K._avsf_schedule(
            np.ones(50), np.arange(50, dtype=np.int64), 50, rng, np.empty(101, dtype=np.int64), systematic
        )
        assert m == 50


def test_first_sweeps_visit_every_variable_once():
    X, y = _problem(n=80, seed=2)
    for selection in ("uniform", "avsf", "avsf-paper"):
        res = dual_cd(X, y, C=1.0, tol=1e-3, max_iter=1, selection=selection, seed=0)
        assert res.n_iter == 1 and res.n_steps == 80 and not res.converged


def test_progress_and_cancellation():
    X, y = _problem(n=150, seed=3)
    seen = []
    res = dual_cd(
        X, y, C=10.0, tol=1e-5, max_iter=10**5, selection="avsf-paper", seed=0, progress=seen.append
    )
    assert len(seen) == res.n_iter  # one outer iteration per kernel call without shrinking
    assert [s["iteration"] for s in seen] == list(range(1, res.n_iter + 1))
    assert all(b["n_steps"] > a["n_steps"] for a, b in zip(seen, seen[1:]))
    assert seen[-1]["dual"] == pytest.approx(res.dual, rel=1e-12)
    assert {"violation", "elapsed", "n_updates", "selection"} <= set(seen[-1])
    # with shrinking, one call may run several small sweeps (at least n steps per call)
    seen = []
    res = dual_cd(X, y, C=10.0, tol=1e-5, max_iter=10**5, selection="avsf", seed=0, progress=seen.append)
    assert seen[-1]["iteration"] == res.n_iter and seen[-1]["n_steps"] == res.n_steps
    assert all(b["n_steps"] - a["n_steps"] >= 150 for a, b in zip(seen, seen[1:-1]))

    calls = []

    def stop():
        calls.append(1)
        return len(calls) > 3

    with pytest.raises(Cancelled) as info:
        dual_cd(X, y, C=10.0, tol=1e-9, max_iter=10**5, selection="uniform", should_stop=stop)
    assert info.value.n_iter >= 3 and info.value.n_steps >= 3 * 150


def test_invalid_arguments():
    X, y = _problem(n=20)
    with pytest.raises(ValueError, match="selection"):
        dual_cd(X, y, selection="greedy")
    with pytest.raises(ValueError, match="C must"):
        dual_cd(X, y, C=0.0)
    with pytest.raises(ValueError, match="y must"):
        dual_cd(X, y[:-1])


def test_decision_values_sparse_equals_dense():
    X, _ = _problem(n=50, d=12, density=0.2, seed=6)
    coef = np.random.default_rng(0).normal(size=(3, 12))
    np.testing.assert_allclose(decision_values(sp.csr_matrix(X), coef), X @ coef.T, atol=1e-12)
    np.testing.assert_allclose(decision_values(X, coef), X @ coef.T, atol=1e-12)


# -------------------------------------------------------------------------- estimator


@parametrize_with_checks(
    [
        LinearDualCDClassifier(selection="uniform"),
        LinearDualCDClassifier(selection="avsf"),
        LinearDualCDClassifier(selection="avsf-paper"),
    ]
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        # some checks fit on tiny noisy data with a low max_iter on purpose
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


@pytest.mark.parametrize("selection", ["uniform", "avsf"])
def test_one_vs_rest_equals_binary_runs(selection):
    X, y = load_iris(return_X_y=True)
    clf = LinearDualCDClassifier(selection=selection, C=0.5, tol=1e-3, max_iter=20000, random_state=0).fit(
        X, y
    )
    assert clf.coef_.shape == (3, 4) and clf.converged_.all()
    rs = np.random.RandomState(0)
    for k, label in enumerate(clf.classes_):
        seed = int(rs.randint(0, np.iinfo(np.int32).max))
        res = dual_cd(
            X,
            np.where(y == label, 1.0, -1.0),
            C=0.5,
            tol=1e-3,
            max_iter=20000,
            selection=selection,
            seed=seed,
        )
        np.testing.assert_allclose(clf.coef_[k], res.w, rtol=1e-12, atol=1e-12)
        assert clf.n_steps_[k] == res.n_steps and clf.dual_objective_[k] == res.dual
    scores = clf.decision_function(sp.csr_matrix(X))
    np.testing.assert_allclose(scores, X @ clf.coef_.T, atol=1e-10)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmax(X @ clf.coef_.T, 1)])
    assert clf.score(X, y) > 0.8


def test_binary_labels_and_decision_sign():
    X, y01 = make_classification(n_samples=200, n_features=8, random_state=0)
    labels = np.array(["neg", "pos"])[y01]
    clf = LinearDualCDClassifier(C=1.0, random_state=0).fit(X, labels)
    assert clf.coef_.shape == (1, 8)
    d = clf.decision_function(X)
    assert d.shape == (200,)
    np.testing.assert_array_equal(clf.predict(X), np.where(d > 0, "pos", "neg"))


@pytest.mark.parametrize("labels", [np.array([3, 7, 9]), np.array(["a", "bb", "c"])])
def test_state_roundtrip_predicts_identically(labels):
    X, y = make_classification(n_samples=150, n_features=6, n_informative=4, n_classes=3, random_state=1)
    y = labels[y]
    Xs = sp.csr_matrix(X)
    clf = LinearDualCDClassifier(selection="avsf", C=2.0, random_state=3).fit(Xs, y)
    arrays, meta = clf.get_state()
    assert meta["estimator"] == "LinearDualCDClassifier"
    assert all(a.dtype != object for a in arrays.values())
    arrays2, meta2 = decode_state(encode_state(arrays, meta))
    clone = estimator_from_state(arrays2, meta2)
    assert isinstance(clone, LinearDualCDClassifier)
    np.testing.assert_array_equal(clone.predict(Xs), clf.predict(Xs))
    np.testing.assert_array_equal(clone.decision_function(X), clf.decision_function(X))
    assert clone.get_params() == clf.get_params()
    np.testing.assert_array_equal(clone.n_steps_, clf.n_steps_)
    arrays["coef"][:] = 0.0  # get_state hands out copies
    assert np.any(clf.coef_ != 0.0)


def test_estimator_progress_and_cancel():
    X, y = load_iris(return_X_y=True)
    seen = []
    LinearDualCDClassifier(selection="avsf", random_state=0).fit(X, y, progress=seen.append)
    assert {s["problem"] for s in seen} == {0, 1, 2}
    assert all(s["n_problems"] == 3 for s in seen)
    clf = LinearDualCDClassifier(random_state=0)
    with pytest.raises(Cancelled):
        clf.fit(X, y, should_stop=lambda: True)
    assert not hasattr(clf, "coef_")


# --------------------------------------------------------------- benchmark data (optional)


def _data_dir() -> Path:
    return Path(
        os.environ.get("SVMSTREAM_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
    )


def test_reuters_matches_liblinear_dual_objective():
    path = _data_dir() / "reuters_lasvm.trn.bz2"
    if not path.exists():
        pytest.skip(f"benchmark data not found at {path} (set SVMSTREAM_DATA)")
    liblinear = pytest.importorskip("liblinear.liblinearutil")
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(path))
    y = np.where(y > 0, 1.0, -1.0)
    inp = as_cd_input(X)
    C = 1.0
    uni = dual_cd(inp, y, C=C, tol=1e-3, max_iter=5000, selection="uniform", seed=0)
    avsf = dual_cd(inp, y, C=C, tol=1e-3, max_iter=5000, selection="avsf", seed=0)
    model = liblinear.train(y, X, f"-s 3 -c {C} -e 0.001 -B -1 -q")
    w_ll = np.zeros(X.shape[1])
    coef, _ = model.get_decfun()
    w_ll[: len(coef)] = coef
    if model.get_labels()[0] != 1:  # LIBLINEAR's first label is its positive class
        w_ll = -w_ll
    primal_ll = 0.5 * w_ll @ w_ll + C * np.maximum(0.0, 1.0 - y * (X @ w_ll)).sum()
    assert uni.converged and avsf.converged
    assert uni.dual == pytest.approx(avsf.dual, rel=1e-4)
    # weak duality: every dual value is below every primal value; all three are close
    assert uni.dual <= primal_ll + 1e-9 and avsf.dual <= primal_ll + 1e-9
    assert primal_ll == pytest.approx(uni.primal, rel=1e-3)
