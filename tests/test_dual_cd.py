"""Exact dual CD (solvers/dual_cd.py) and its kernels (solvers/dcsvm_kernels.py).

Reference solutions come from an independent solver: scipy's L-BFGS-B on the same
bound-constrained QP with an explicitly formed Q matrix.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from svmstream.solvers.exact._dual_cd import box_qp2
from svmstream.solvers.exact._dual_solve import Cancelled, dual_objective, exact_gradient, solve_dual
from svmstream.solvers.exact._kernels import KernelData, KernelSpec, exp_inplace, kernel_block, kernel_matvec


def _data(n=240, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.6 * X[:, 1] ** 2 + 0.4 * rng.normal(size=n) > 0.5, 1.0, -1.0)
    return X, y


def _direct_kernel(X, Z, spec):
    if spec.kind == "rbf":
        d2 = ((X[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
        K = np.exp(-spec.gamma * d2)
    elif spec.kind == "poly":
        K = (spec.gamma * X @ Z.T + spec.coef0) ** spec.degree
    else:
        K = X @ Z.T
    return K + spec.offset


def _reference(Q, C):
    n = Q.shape[0]
    res = minimize(
        lambda a: (0.5 * a @ Q @ a - a.sum(), Q @ a - 1.0),
        np.zeros(n),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, c) for c in np.broadcast_to(C, (n,))],
        options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-11},
    )
    return res.x, -res.fun


def _max_violation(alpha, G, C):
    C = np.broadcast_to(C, alpha.shape)
    pg = np.where(alpha <= 0, np.minimum(G, 0), np.where(alpha >= C, np.maximum(G, 0), G))
    return np.abs(pg).max()


SPECS = [
    KernelSpec("rbf", gamma=0.5),
    KernelSpec("rbf", gamma=0.3, offset=1.0),
    KernelSpec("poly", gamma=0.3, coef0=1.0, degree=3),
    KernelSpec("linear", gamma=1.0),
]


def test_exp_inplace_matches_numpy():
    x = np.concatenate([np.linspace(-708, 0, 20001), [-1e-300, -750.0, 0.0]])
    ref = np.exp(np.maximum(x, -708))
    out = x.copy()
    exp_inplace(out, out.shape[0])
    assert np.all(np.abs(out - ref) <= 1e-13 * ref)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.kind}-{s.offset}")
def test_kernel_block_and_matvec_match_direct(spec):
    X, _ = _data(60, 4)
    kd = KernelData(X)
    K = kernel_block(kd, kd, spec, rows=np.arange(10, 50), cols=np.arange(5, 25))
    np.testing.assert_allclose(K, _direct_kernel(X[10:50], X[5:25], spec), rtol=1e-12, atol=1e-12)
    coef = np.linspace(-1, 1, 20)
    f = kernel_matvec(kd, kd, spec, coef, cols=np.arange(5, 25), chunk_mb=0.001)
    np.testing.assert_allclose(f, _direct_kernel(X, X[5:25], spec) @ coef, rtol=1e-11, atol=1e-11)
    # sparse rows give the same values
    ks = KernelData(sp.csr_matrix(X))
    np.testing.assert_allclose(kernel_block(ks, ks, spec), _direct_kernel(X, X, spec), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.kind}-{s.offset}")
def test_solution_matches_lbfgsb_and_kkt(spec):
    X, y = _data()
    C = 2.0
    Q = _direct_kernel(X, X, spec) * np.outer(y, y)
    a_ref, obj_ref = _reference(Q, C)
    # tiny cache (a few columns) exercises eviction and partial columns
    r = solve_dual(KernelData(X), y, spec, C, eps=1e-6, cache_mb=0.005)
    assert r.converged
    assert abs(r.objective - obj_ref) <= 1e-8 * abs(obj_ref)
    # returned gradient and objective are the real ones
    G = Q @ r.alpha - 1.0
    np.testing.assert_allclose(r.grad, G, atol=1e-9)
    assert r.objective == pytest.approx(r.alpha.sum() - 0.5 * r.alpha @ Q @ r.alpha, rel=1e-12)
    assert _max_violation(r.alpha, G, C) < 1e-6
    assert np.all((r.alpha >= 0) & (r.alpha <= C))
    np.testing.assert_allclose(r.alpha, a_ref, atol=2e-3)


def test_shrinking_cache_and_sparse_give_the_same_optimum():
    X, y = _data(300)
    spec = KernelSpec("rbf", gamma=0.4, offset=1.0)
    base = solve_dual(KernelData(X), y, spec, 4.0, eps=1e-7)
    for kw in (
        {"shrinking": False},
        {"cache_mb": 0.002},
        {"cache_mb": 500.0},
        {"selection": "greedy"},
        {"selection": "greedy", "pairs": False},
        {"selection": "greedy", "pairs": False, "shrinking": False},
        {"selection": "wss2", "shrinking": False, "cache_mb": 0.002},
    ):
        r = solve_dual(KernelData(X), y, spec, 4.0, eps=1e-7, **kw)
        assert r.objective == pytest.approx(base.objective, rel=1e-10)
    rs = solve_dual(KernelData(sp.csr_matrix(X)), y, spec, 4.0, eps=1e-7)
    assert rs.objective == pytest.approx(base.objective, rel=1e-10)
    assert base.stats["cache_hits"] > 0
    assert base.stats["pair_steps"] > 0


def test_warm_start_and_per_sample_bounds():
    X, y = _data(200)
    spec = KernelSpec("rbf", gamma=0.5)
    C = np.where(y > 0, 3.0, 1.0)
    Q = _direct_kernel(X, X, spec) * np.outer(y, y)
    _, obj_ref = _reference(Q, C)
    cold = solve_dual(KernelData(X), y, spec, C, eps=1e-6)
    assert cold.objective == pytest.approx(obj_ref, rel=1e-8)
    assert np.all(cold.alpha <= C + 1e-15)
    # from the optimum: nothing to do
    again = solve_dual(KernelData(X), y, spec, C, alpha0=cold.alpha, eps=1e-6)
    assert again.n_iter == 0 and again.converged
    # from a perturbed point (out-of-box values are clipped)
    rng = np.random.default_rng(1)
    a0 = cold.alpha + rng.uniform(-1, 1, size=cold.alpha.shape)
    warm = solve_dual(KernelData(X), y, spec, C, alpha0=a0, eps=1e-6)
    assert warm.objective == pytest.approx(obj_ref, rel=1e-8)


def test_exact_gradient_and_objective_helpers():
    X, y = _data(50)
    spec = KernelSpec("poly", gamma=0.5, coef0=1.0, degree=2)
    a = np.abs(np.sin(np.arange(50.0)))
    Q = _direct_kernel(X, X, spec) * np.outer(y, y)
    G = exact_gradient(KernelData(X), y, spec, a)
    np.testing.assert_allclose(G, Q @ a - 1, rtol=1e-11, atol=1e-11)
    assert dual_objective(a, G) == pytest.approx(a.sum() - 0.5 * a @ Q @ a, rel=1e-12)


def test_progress_and_cancel():
    X, y = _data(400)
    spec = KernelSpec("rbf", gamma=0.5)
    seen = []
    solve_dual(KernelData(X), y, spec, 10.0, eps=1e-4, progress=seen.append, report_interval=0.0)
    assert seen and seen[-1]["done"]
    for key in ("iterations", "objective", "max_violation", "active", "elapsed"):
        assert key in seen[0]
    calls = []

    def stop():
        calls.append(1)
        return len(calls) > 1

    with pytest.raises(Cancelled):
        solve_dual(KernelData(X), y, spec, 10.0, eps=1e-9, should_stop=stop)


def test_input_errors():
    X, y = _data(20)
    spec = KernelSpec("rbf", gamma=1.0)
    with pytest.raises(ValueError, match="labels"):
        solve_dual(KernelData(X), np.arange(20.0), spec, 1.0)
    with pytest.raises(ValueError, match="C must be"):
        solve_dual(KernelData(X), y, spec, 0.0)
    with pytest.raises(ValueError, match="shape"):
        solve_dual(KernelData(X), y[:5], spec, 1.0)
    with pytest.raises(ValueError):
        KernelSpec("sigmoid", 1.0)
    with pytest.raises(ValueError):
        KernelSpec("rbf", -1.0)


def test_box_qp2_is_the_exact_minimiser_of_the_2x2_box_qp():
    rng = np.random.default_rng(3)
    grid = np.linspace(0.0, 1.0, 401)
    for trial in range(300):
        A = rng.normal(size=(2, 2))
        H = A @ A.T + (0.0 if trial % 5 == 0 else 1e-3) * np.eye(2)  # some singular
        H[0, 0] = max(H[0, 0], 1e-3)
        H[1, 1] = max(H[1, 1], 1e-3)
        g = rng.normal(size=2) * 3
        lo = -rng.uniform(0, 2, size=2) * (rng.random(2) > 0.3)
        hi = rng.uniform(0, 2, size=2) * (rng.random(2) > 0.3)
        di, dj = box_qp2(g[0], g[1], H[0, 0], H[1, 1], H[0, 1], lo[0], hi[0], lo[1], hi[1])
        assert lo[0] <= di <= hi[0] and lo[1] <= dj <= hi[1]
        d = np.array([di, dj])
        q = g @ d + 0.5 * d @ H @ d
        # brute force on a grid of the box, refined by the exact edge/interior candidates
        P = np.stack(np.meshgrid(lo[0] + grid * (hi[0] - lo[0]), lo[1] + grid * (hi[1] - lo[1])), -1).reshape(
            -1, 2
        )
        qg = P @ g + 0.5 * np.einsum("ij,jk,ik->i", P, H, P)
        assert q <= qg.min() + 1e-9
        assert q <= 0.0


def test_wss2_reaches_the_greedy_optimum_in_fewer_steps():
    X, y = _data(500, seed=4)
    for spec, C in (
        (KernelSpec("rbf", gamma=0.5, offset=1.0), 10.0),
        (KernelSpec("rbf", gamma=0.02, offset=1.0), 50.0),
    ):
        g = solve_dual(KernelData(X), y, spec, C, eps=1e-5, selection="greedy")
        w = solve_dual(KernelData(X), y, spec, C, eps=1e-5, selection="wss2")
        assert w.converged and g.converged
        assert w.objective == pytest.approx(g.objective, rel=1e-8)
        assert w.n_iter < g.n_iter
        assert w.stats["kernel_evals"] > 0 and w.stats["active_scanned"] > 0
    with pytest.raises(ValueError, match="selection"):
        solve_dual(KernelData(X), y, spec, C, selection="wss3")


def test_known_gradient_rows_give_the_same_warm_solve():
    X, y = _data(300, seed=2)
    spec = KernelSpec("rbf", gamma=0.4, offset=1.0)
    kd = KernelData(X)
    # alpha0 supported on S with the exact gradient of the problem restricted to S
    S = np.arange(0, 300, 3)
    sub = solve_dual(kd.take(S), y[S], spec, 4.0, eps=1e-4)
    a0 = np.zeros(300)
    a0[S] = sub.alpha
    full = solve_dual(kd, y, spec, 4.0, alpha0=a0, eps=1e-6)
    reuse = solve_dual(kd, y, spec, 4.0, alpha0=a0, eps=1e-6, grad0=(S, sub.grad))
    np.testing.assert_allclose(sub.grad, exact_gradient(kd, y, spec, a0)[S], atol=1e-10)
    assert reuse.objective == pytest.approx(full.objective, rel=1e-12)
    assert reuse.n_iter == full.n_iter
