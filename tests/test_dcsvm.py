"""Two-step kernel k-means, multilevel DC-SVM and DCSVMClassifier."""

import concurrent.futures as cf
import os
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_iris, make_blobs, make_classification
from sklearn.metrics import adjusted_rand_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from svmstream.solvers.exact import _pool
from svmstream.solvers.exact._classes import DCSVMClassifier
from svmstream.solvers.exact._dcsvm import SerialExecutor, dcsvm_fit, make_process_pool
from svmstream.solvers.exact._dual_solve import Cancelled, solve_dual
from svmstream.solvers.exact._kernel_kmeans import assign_clusters, kernel_kmeans, two_step_kernel_kmeans
from svmstream.solvers.exact._kernels import KernelData, KernelSpec, kernel_block
from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state


def _two_moons_like(n=1200, seed=0):
    X, y = make_classification(
        n_samples=n,
        n_features=6,
        n_informative=4,
        n_redundant=0,
        n_clusters_per_class=3,
        class_sep=1.0,
        random_state=seed,
    )
    return X, np.where(y == 1, 1.0, -1.0)


# ----------------------------------------------------------------------------- k-means
def test_kernel_kmeans_recovers_separated_blobs():
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0], [6.0, 6.0]])
    X, truth = make_blobs(n_samples=300, centers=centres, cluster_std=0.4, random_state=0)
    spec = KernelSpec("rbf", gamma=0.5)
    kd = KernelData(X)
    labels = kernel_kmeans(kernel_block(kd, kd, spec), 4, np.random.default_rng(0))
    assert adjusted_rand_score(truth, labels) == 1.0
    # two-step version: k-means on 60 samples, then every point to the nearest centre
    rng = np.random.default_rng(1)
    labels2, clusters = two_step_kernel_kmeans(kd, spec, 4, rng.choice(300, 60, replace=False), rng)
    assert adjusted_rand_score(truth, labels2) == 1.0
    assert clusters.n_clusters == 4


def test_assignment_uses_feature_space_distance():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 3))
    spec = KernelSpec("poly", gamma=0.5, coef0=1.0, degree=2)
    kd = KernelData(X)
    sample = np.arange(0, 80, 2)
    labels, clusters = two_step_kernel_kmeans(kd, spec, 5, sample, rng)
    lab, dist = assign_clusters(clusters, kd, spec)
    np.testing.assert_array_equal(lab, labels)

    # brute force: explicit feature map of the degree-2 polynomial kernel (gamma x.z + 1)^2
    def phi(Z):
        g = np.sqrt(0.5)
        cols = [np.ones(len(Z))] + [np.sqrt(2) * g * Z[:, i] for i in range(3)]
        cols += [
            g * g * Z[:, i] * Z[:, j] * (1 if i == j else np.sqrt(2)) for i in range(3) for j in range(i, 3)
        ]
        return np.stack(cols, axis=1)

    P = phi(X)
    S = phi(X[sample])
    centres = np.stack([S[clusters.sample_labels == c].mean(0) for c in range(clusters.n_clusters)])
    d2 = ((P[:, None, :] - centres[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(np.argmin(d2, axis=1), lab)
    np.testing.assert_allclose(dist, d2.min(axis=1), rtol=1e-8, atol=1e-8)


# ----------------------------------------------------------------------------- DC-SVM
def test_dcsvm_matches_direct_solve_and_early_model_is_eq11():
    X, y = _two_moons_like()
    spec = KernelSpec("rbf", gamma=0.3, offset=1.0)
    kd = KernelData(X)
    ref = solve_dual(kd, y, spec, 8.0, eps=1e-5)
    seen = []
    res = dcsvm_fit(
        kd,
        y,
        spec,
        8.0,
        k=4,
        n_levels=3,
        n_sample=300,
        early_levels=(2,),
        random_state=0,
        n_jobs=1,
        progress=seen.append,
    )
    assert res.exact
    assert abs(res.objective - ref.objective) <= 1e-3 * abs(ref.objective)
    assert res.max_violation < 1e-3
    stages = [h["stage"] for h in res.history]
    assert stages == ["level", "level", "level", "refine", "global"]
    assert [h["n_clusters"] for h in res.history[:3]] == [64, 16, 4]
    assert {"stage", "level", "objective", "max_violation", "elapsed"} <= set(seen[0])
    assert seen[-1]["stage"] == "done"

    # early prediction (eq. 11), checked against a brute-force evaluation
    em = res.early[2]
    Xt, _ = _two_moons_like(200, seed=5)
    f = em.decision_function(KernelData(Xt), spec)
    samples = em.clusters.samples.dense
    Ks = kernel_block(KernelData(Xt), em.clusters.samples, spec)
    Kss = kernel_block(em.clusters.samples, em.clusters.samples, spec)
    lab = em.clusters.sample_labels
    for i in range(0, 200, 7):
        d = [
            spec.offset + 1.0 - 2 * Ks[i, lab == c].mean() + Kss[np.ix_(lab == c, lab == c)].mean()
            for c in range(em.clusters.n_clusters)
        ]
        c = int(np.argmin(d))
        lo, hi = em.sv_ptr[c], em.sv_ptr[c + 1]
        sv = em.sv.dense[lo:hi]
        kk = np.exp(-spec.gamma * ((Xt[i] - sv) ** 2).sum(1)) + spec.offset
        assert f[i] == pytest.approx(kk @ em.coef[lo:hi], abs=1e-10)
    assert samples.shape[0] == lab.shape[0]


def test_stop_level_returns_level_solution():
    X, y = _two_moons_like(600)
    spec = KernelSpec("rbf", gamma=0.3)
    res = dcsvm_fit(
        KernelData(X),
        y,
        spec,
        4.0,
        k=3,
        n_levels=3,
        n_sample=200,
        early_levels=(2,),
        stop_level=2,
        random_state=1,
        n_jobs=1,
    )
    assert not res.exact and [h["level"] for h in res.history] == [3, 2]
    assert 2 in res.early


def test_min_level_skips_the_lowest_levels_and_stays_exact(monkeypatch):
    X, y = _two_moons_like(900)
    spec = KernelSpec("rbf", gamma=0.3, offset=1.0)
    kd = KernelData(X)
    ref = solve_dual(kd, y, spec, 8.0, eps=1e-5)
    res = dcsvm_fit(kd, y, spec, 8.0, k=4, n_levels=3, min_level=2, n_sample=300, random_state=0, n_jobs=1)
    assert [h.get("level") for h in res.history] == [3, 2, None, None]
    assert [h["stage"] for h in res.history[2:]] == ["refine", "global"]
    assert res.exact and abs(res.objective - ref.objective) <= 1e-3 * abs(ref.objective)
    # per-stage CPU seconds and solver counters are recorded
    for h in res.history:
        assert h["cpu_seconds"] >= 0 and h["stats"]["kernel_evals"] >= 0
    with pytest.raises(ValueError, match="min_level"):
        dcsvm_fit(kd, y, spec, 8.0, min_level=0)
    with pytest.raises(ValueError, match="min_level"):
        DCSVMClassifier(min_level=0).fit(X, y)
    est = DCSVMClassifier(C=8.0, gamma=0.3, n_levels=3, min_level=2, n_sample=300, random_state=0, n_jobs=1)
    est.fit(X, y)
    assert [h["level"] for h in est.fit_history_[0] if h["stage"] == "level"] == [3, 2]
    # the default worker count follows the cores: in-process below POOL_MIN_CORES
    monkeypatch.setattr(_pool, "available_cores", lambda: 2)
    assert _pool.default_workers() == 1
    monkeypatch.setattr(_pool, "available_cores", lambda: 8)
    assert _pool.default_workers() == 8


def test_executors_give_identical_results_and_cancel():
    X, y = _two_moons_like(900)
    spec = KernelSpec("rbf", gamma=0.3, offset=1.0)
    kd = KernelData(X)
    kw = dict(k=4, n_levels=2, n_sample=300, random_state=3)
    serial = dcsvm_fit(kd, y, spec, 4.0, executor=SerialExecutor(), **kw)
    with cf.ThreadPoolExecutor(2) as ex:
        threaded = dcsvm_fit(kd, y, spec, 4.0, executor=ex, **kw)
    pool, flag = make_process_pool(2)
    try:
        pooled = dcsvm_fit(kd, y, spec, 4.0, executor=pool, stop_flag=flag, **kw)
        # same sub-problems and solver everywhere; only BLAS rounding may differ
        for other in (threaded, pooled):
            assert other.objective == pytest.approx(serial.objective, rel=1e-6)
            assert [h.get("n_clusters") for h in other.history] == [
                h.get("n_clusters") for h in serial.history
            ]
        # cancel while the pool works on a level: returns within about a second
        Xb, yb = _two_moons_like(6000, seed=2)
        start = time.perf_counter()
        with pytest.raises(Cancelled):
            dcsvm_fit(
                KernelData(Xb),
                yb,
                KernelSpec("rbf", gamma=2.0),
                1000.0,
                k=2,
                n_levels=1,
                eps=1e-9,
                executor=pool,
                stop_flag=flag,
                should_stop=lambda: time.perf_counter() - start > 0.5,
            )
        assert time.perf_counter() - start < 2.5
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ----------------------------------------------------------------------------- estimator
@parametrize_with_checks(
    [DCSVMClassifier(), DCSVMClassifier(n_levels=2, early_level=1)], expected_failed_checks=lambda est: {}
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _roundtrip(est):
    arrays, meta = est.get_state()
    for a in arrays.values():
        assert a.dtype != object
    arrays2, meta2 = decode_state(encode_state(arrays, meta))
    return estimator_from_state(arrays2, meta2)


@pytest.mark.parametrize("early", [None, 2])
@pytest.mark.parametrize("sparse", [False, True])
def test_state_roundtrip_binary_and_multiclass(early, sparse):
    X, y = load_iris(return_X_y=True)
    Xs = sp.csr_matrix(X) if sparse else X
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    for target in (names, (y == 1).astype(int)):
        est = DCSVMClassifier(C=10.0, gamma=0.5, n_levels=2, early_level=early, random_state=0).fit(
            Xs, target
        )
        back = _roundtrip(est)
        np.testing.assert_array_equal(back.predict(Xs), est.predict(Xs))
        np.testing.assert_allclose(back.decision_function(Xs), est.decision_function(Xs), rtol=0, atol=1e-12)
        assert est.score(Xs, target) > 0.9


def test_multiclass_ovr_scores_and_intercept():
    X, y = load_iris(return_X_y=True)
    est = DCSVMClassifier(C=10.0, gamma=0.5, n_levels=2, random_state=0).fit(X, y)
    scores = est.decision_function(X)
    assert scores.shape == (150, 3)
    # one-vs-rest: each column is the binary expansion with its own coefficients
    K = np.exp(-0.5 * ((X[:, None] - est.support_vectors_[None]) ** 2).sum(-1))
    np.testing.assert_allclose(scores, K @ est.dual_coef_.T + est.intercept_, atol=1e-9)
    assert est.score(X, y) > 0.95


def _data_dir():
    path = Path(
        os.environ.get("SVMSTREAM_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data")
    )
    return path if (path / "ijcnn1.bz2").exists() else None


@pytest.mark.skipif(_data_dir() is None, reason="benchmark data not found (set SVMSTREAM_DATA)")
def test_ijcnn1_subset_objective_within_1e3_of_direct_solve():
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(_data_dir() / "ijcnn1.bz2"), n_features=22)
    X = X[:6000].toarray()
    y = y[:6000]
    spec = KernelSpec("rbf", gamma=2.0, offset=1.0)
    ref = solve_dual(KernelData(X), y, spec, 32.0, eps=1e-5)
    res = dcsvm_fit(KernelData(X), y, spec, 32.0, n_levels=3, random_state=0, n_jobs=1)
    assert abs(res.objective - ref.objective) <= 1e-3 * abs(ref.objective)


def test_the_kmeans_stage_reports_its_progress_per_level():
    """Kernel k-means no longer runs silently: every level reports the sample kernel,
    the sample's k-means, then the rows assigned so far, up to all of them."""
    X, y = make_classification(6000, 10, random_state=0)
    seen = []
    DCSVMClassifier(C=1.0, gamma=0.1, n_levels=2, n_jobs=1).fit(X * 30.0, y, progress=seen.append)
    for level in (2, 1):
        steps = [d for d in seen if d.get("stage") == "kmeans" and d.get("level") == level and d.get("step")]
        assert [d["step"] for d in steps[:2]] == ["sample kernel", "sample k-means"]
        assigned = [d["rows_done"] for d in steps if d["step"] == "assign"]
        assert len(assigned) >= 3 and assigned == sorted(assigned) and assigned[-1] == 6000
