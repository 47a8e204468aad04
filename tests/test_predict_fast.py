"""Fast prediction: the blocked decision values (BLAS Gram blocks, a fused
vectorised exp, row parts over threads) equal a direct numpy computation and the per-row
kernel to ~1e-12 relative, binary and multi-class, for a learner's (d, B + 1) pool and a
published copy's (d, n_sv) one; the scalar exp is bit for bit the vectorised one."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from svmstream.solvers import BudgetedSGDClassifier
from svmstream.solvers.budgeted import _decision
from svmstream.solvers.budgeted._decision import (
    BLAS_BLOCK_MNK,
    MIN_BLOCKED_ROWS,
    MIN_THREAD_ROWS,
    block_rows_for,
    dense_decision,
    rbf_decision_batch,
)
from svmstream.solvers.budgeted._publish import published_copy
from svmstream.solvers.kernels import exp_inplace, exp_scalar
from tests.conftest import two_moons_like


def _model(rng, d, n_sv, capacity, n_classes):
    """A random dense pool (d, capacity) with n_sv live SVs, coefficients and bias."""
    sv_t = np.full((d, capacity), np.nan)  # dead slots must never be read
    sv_t[:, :n_sv] = rng.normal(size=(d, n_sv)) * 0.4
    sv_sq = np.full(capacity, np.nan)
    sv_sq[:n_sv] = np.einsum("ij,ij->j", sv_t[:, :n_sv], sv_t[:, :n_sv])
    coef = np.full((capacity, n_classes), np.nan)
    coef[:n_sv] = rng.normal(size=(n_sv, n_classes))
    bias = rng.normal(size=n_classes)
    return sv_t, sv_sq, coef, bias


def _numpy_decision(X, sv_t, coef, bias, n_sv, gamma, scale):
    """The definition, in numpy: (value, magnitude) with magnitude = scale·Σ|coef|·K + |bias|."""
    S = sv_t[:, :n_sv]
    D = (X * X).sum(1)[:, None] + (S * S).sum(0)[None, :] - 2.0 * (X @ S)
    K = np.exp(-gamma * np.maximum(D, 0.0))
    value = scale * (K @ coef[:n_sv]) + bias
    return value, scale * (K @ np.abs(coef[:n_sv])) + np.abs(bias)


@pytest.mark.parametrize("n_classes", [1, 7])
@pytest.mark.parametrize("n", [1, MIN_BLOCKED_ROWS - 1, MIN_BLOCKED_ROWS, 1000, 2 * MIN_THREAD_ROWS + 37])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_decisions_match_numpy_and_the_per_row_kernel(n_classes, n, threads):
    rng = np.random.default_rng(n * 10 + n_classes)
    d, n_sv, capacity, gamma, scale = 22, 137, 201, 0.7, 3.5
    sv_t, sv_sq, coef, bias = _model(rng, d, n_sv, capacity, n_classes)
    X = rng.normal(size=(n, d)) * 0.4
    X[:3] = sv_t[:, : min(n, 3)].T  # rows equal to SVs: distance 0 (clamped), kernel value 1
    out = np.full((n, n_classes), np.nan)
    dense_decision(X, sv_t, sv_sq, coef, bias, n_sv, gamma, scale, out, np.empty(capacity), threads=threads)
    expected, magnitude = _numpy_decision(X, sv_t, coef, bias, n_sv, gamma, scale)
    assert np.all(np.abs(out - expected) <= 1e-12 * magnitude)
    per_row = np.empty_like(out)
    rbf_decision_batch(X, sv_t, sv_sq, coef, bias, n_sv, gamma, scale, per_row, np.empty(capacity))
    assert np.all(np.abs(out - per_row) <= 1e-12 * magnitude)


def test_far_rows_give_the_bias_and_a_contiguous_pool_the_same_values():
    rng = np.random.default_rng(3)
    d, n_sv = 16, 300
    sv_t, sv_sq, coef, bias = _model(rng, d, n_sv, n_sv + 1, 3)
    X = rng.normal(size=(500, d))
    X[:5] += 100.0  # −γ‖x − s‖² far below −708: exp clamps to ~0, the value is the bias
    out = np.empty((500, 3))
    dense_decision(X, sv_t, sv_sq, coef, bias, n_sv, 2.0, 1.0, out, np.empty(n_sv + 1), threads=1)
    np.testing.assert_allclose(out[:5], np.broadcast_to(bias, (5, 3)), rtol=0, atol=1e-300)
    compact = np.empty_like(out)  # a published copy holds (d, n_sv) exactly
    sv_c, sq_c, coef_c = np.ascontiguousarray(sv_t[:, :n_sv]), sv_sq[:n_sv].copy(), coef[:n_sv].copy()
    dense_decision(X, sv_c, sq_c, coef_c, bias, n_sv, 2.0, 1.0, compact, np.empty(n_sv), threads=1)
    np.testing.assert_array_equal(compact, out)


def test_the_split_over_threads_does_not_change_any_value():
    rng = np.random.default_rng(5)
    sv_t, sv_sq, coef, bias = _model(rng, 22, 500, 501, 1)
    X = rng.normal(size=(3 * MIN_THREAD_ROWS + 11, 22)) * 0.3
    outs = []
    for threads in (1, 2, 3):
        out = np.empty((X.shape[0], 1))
        dense_decision(X, sv_t, sv_sq, coef, bias, 500, 2.0, 1.0, out, np.empty(501), threads=threads)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


def test_block_rows_keep_blas_on_the_calling_thread():
    assert block_rows_for(500, 22) == BLAS_BLOCK_MNK // (500 * 22)  # 23 rows for ijcnn1 at B = 500
    assert block_rows_for(500, 22) * 500 * 22 <= BLAS_BLOCK_MNK
    assert block_rows_for(1, 1) == _decision.MAX_BLOCK_ROWS
    assert block_rows_for(500, 123) == 0  # a9a-sized: < MIN_BLOCK_ROWS rows, per-row kernel


def test_exp_scalar_is_exp_inplace_bit_for_bit():
    rng = np.random.default_rng(0)
    x = np.concatenate([-rng.exponential(30.0, size=100_000), [0.0, -0.0, -1e-300, -708.0, -709.0, -1e6]])
    vec = x.copy()
    exp_inplace(vec, vec.shape[0])
    scalar = np.array([exp_scalar(v) for v in x])
    np.testing.assert_array_equal(scalar.view(np.int64), vec.view(np.int64))
    np.testing.assert_allclose(vec[:100_000], np.exp(x[:100_000]), rtol=1e-13, atol=0)


@pytest.mark.parametrize("multiclass", [False, True])
def test_the_estimator_and_its_published_copy_use_it_and_agree(multiclass):
    X, y = two_moons_like(6000, d=6, seed=1)
    if multiclass:
        y = np.digitize(X[:, 0], np.quantile(X[:, 0], [0.25, 0.5, 0.75]))
    est = BudgetedSGDClassifier(budget=80, random_state=0).fit(X[:3000], y[:3000])
    pub = published_copy(est)
    big = est.decision_function(X[3000:])  # blocked, threaded
    assert big.shape == ((3000,) if not multiclass else (3000, 4))
    np.testing.assert_array_equal(pub.decision_function(X[3000:]), big)
    one_by_one = np.array([est.decision_function(X[3000 + i : 3001 + i])[0] for i in range(0, 3000, 97)])
    np.testing.assert_allclose(one_by_one, big[::97], rtol=1e-12, atol=1e-12 * np.abs(big).max())
    assert np.mean(est.predict(X[3000:]) == y[3000:]) > (0.6 if multiclass else 0.8)  # chance: 0.25 / 0.5


def test_concurrent_large_predictions_are_exact():
    rng = np.random.default_rng(9)
    sv_t, sv_sq, coef, bias = _model(rng, 22, 400, 401, 2)
    batches = [rng.normal(size=(int(rng.integers(1, 3 * MIN_THREAD_ROWS)), 22)) * 0.3 for _ in range(8)]
    expected = []
    for X in batches:
        out = np.empty((X.shape[0], 2))
        dense_decision(X, sv_t, sv_sq, coef, bias, 400, 1.5, 2.0, out, np.empty(401), threads=1)
        expected.append(out)
    errors = []

    def worker(k):
        for _ in range(3):
            out = np.empty((batches[k].shape[0], 2))
            dense_decision(batches[k], sv_t, sv_sq, coef, bias, 400, 1.5, 2.0, out, np.empty(401))
            if not np.array_equal(out, expected[k]):
                errors.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_ready_array_skips_scikit_learns_validation_with_the_same_answers_and_errors():
    """An exact C-contiguous finite float64 array of the fitted width is used as given
    (scikit-learn's validate_data was 2/3 of a single-row prediction); every other input still
    goes through validate_data: the same values, and the same errors for NaN, a wrong width,
    no rows, and a model fitted on a DataFrame (feature names)."""
    import pandas as pd

    from svmstream.solvers.budgeted import _base

    X, y = two_moons_like(1500, d=5, seed=3)
    est = BudgetedSGDClassifier(budget=60, random_state=0).fit(X[:1000], y[:1000])
    pub = published_copy(est)
    rows = np.ascontiguousarray(X[1000:1010])
    assert _base._already_valid(rows, est) and _base._already_valid(rows, pub)
    calls = []
    real = _base.validate_data

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    _base.validate_data = counting
    try:
        fast = [model.decision_function(rows[i : i + 1])[0] for model in (est, pub) for i in range(10)]
        assert calls == []
        slow = [
            model.decision_function(rows[i : i + 1].tolist())[0] for model in (est, pub) for i in range(10)
        ]
        assert len(calls) == 20
    finally:
        _base.validate_data = real
    np.testing.assert_array_equal(fast, slow)
    for bad, message in (
        (np.full((1, 5), np.nan), "NaN"),
        (np.zeros((1, 4)), "has 4 features"),
        (np.zeros((0, 5)), "0 sample"),
    ):
        assert not _base._already_valid(bad, pub)
        with pytest.raises(ValueError, match=message):
            pub.decision_function(bad)
    named = BudgetedSGDClassifier(budget=60, random_state=0).fit(
        pd.DataFrame(X[:1000]).add_prefix("f"), y[:1000]
    )
    assert not _base._already_valid(rows, named)
    with pytest.warns(UserWarning, match="feature names"):
        named.decision_function(rows)
