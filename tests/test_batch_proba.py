"""predict_proba of the batch estimators (DC-SVM, linear dual CD) with ``probability=True``:
the calibration split, argmax == predict on every row, exact state round trip, old states,
and the batch jobs' default."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, make_classification
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from svmstream.app.jobs.datasets import load_dataset
from svmstream.app.models.factory import make_job_estimator
from svmstream.solvers import DCSVMClassifier, LinearDualCDClassifier
from svmstream.solvers.calibration import (
    HOLDOUT_MAX_ROWS,
    MarginCalibrator,
    expected_calibration_error,
    holdout_split,
)
from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state


def _binary(n=2400, seed=0):
    X, y = make_classification(n_samples=n, n_features=8, flip_y=0.05, class_sep=0.8, random_state=seed)
    return X[: n * 3 // 4], y[: n * 3 // 4], X[n * 3 // 4 :], y[n * 3 // 4 :]


def _digits():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    return X[:1300], y[:1300], X[1300:], y[1300:]


ESTIMATORS = {
    "dcsvm": lambda **kw: DCSVMClassifier(C=2.0, n_levels=2, n_jobs=1, random_state=0, **kw),
    "dcsvm-early": lambda **kw: DCSVMClassifier(
        C=2.0, n_levels=2, early_level=1, n_jobs=1, random_state=0, **kw
    ),
    "linear": lambda **kw: LinearDualCDClassifier(C=0.1, tol=0.01, random_state=0, **kw),
}


def _fit(name, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return ESTIMATORS[name](**kw).fit(X, y)


def _round_trip(est):
    arrays, meta = est.get_state()
    return estimator_from_state(*decode_state(encode_state(arrays, meta)))


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("data", ["binary", "digits", "binary-sparse"])
def test_predict_proba(name, data):
    X, y, Xt, yt = _digits() if data == "digits" else _binary()
    if data == "binary-sparse":
        X, Xt = (
            sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0)),
            sp.csr_matrix(np.where(np.abs(Xt) > 0.5, Xt, 0.0)),
        )
    est = _fit(name, X, y, probability=True)
    K = est.classes_.shape[0]
    assert est.calibration_ == "held-out-refit" and est.calibrator_.fitted_  # < 20,000 rows
    assert est.calibrator_.n_fitted_ == pytest.approx(0.1 * X.shape[0], abs=K)
    for rows in (X, Xt):  # 100% of the rows: argmax == predict
        P = est.predict_proba(rows)
        assert P.shape == (rows.shape[0], K) and P.dtype == np.float64
        np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(est.classes_[np.argmax(P, axis=1)], est.predict(rows))
    # calibrated: a sane test log-loss and ECE
    index = np.searchsorted(est.classes_, yt)
    P = est.predict_proba(Xt)
    assert -np.mean(np.log(P[np.arange(len(yt)), index])) < 0.7
    assert expected_calibration_error(P, index) < 0.1
    # exact state round trip
    copy = _round_trip(est)
    assert copy.probability and copy.calibration_ == "held-out-refit"
    np.testing.assert_array_equal(copy.predict_proba(Xt), P)
    np.testing.assert_array_equal(copy.predict(Xt), est.predict(Xt))


def _first_fit_and_calibrator(name, X, y, **kw):
    """The model of the training part of the calibration split and its held-out calibrator."""
    classes = np.unique(y)
    y_index = np.searchsorted(classes, y)
    train, held = holdout_split(y_index, classes.shape[0], 0)
    first = _fit(name, X[train], y[train], **kw)
    return (
        first,
        MarginCalibrator(classes.shape[0]).fit(first.decision_function(X[held]), y_index[held]),
        train,
    )


@pytest.mark.parametrize("name", ["dcsvm", "linear"])
def test_small_data_refits_on_all_rows(name):
    X, y, Xt, _ = _binary()
    kw = {"gamma": 0.1} if name == "dcsvm" else {}
    est = _fit(name, X, y, probability=True, **kw)
    assert est.calibration_ == "held-out-refit"
    # the served model is the probability=False one ...
    np.testing.assert_array_equal(est.decision_function(Xt), _fit(name, X, y, **kw).decision_function(Xt))
    # ... calibrated on the held-out rows of a first fit on the rest
    _, cal, _ = _first_fit_and_calibrator(name, X, y, **kw)
    assert est.calibrator_.slope_ == cal.slope_


@pytest.mark.parametrize("name", ["dcsvm", "linear"])
def test_large_data_trains_on_the_rest(name, monkeypatch):
    X, y, Xt, _ = _binary()
    if name == "dcsvm":  # the same path as for 20,000 rows and more, on small data
        import svmstream.solvers.exact._classes as module

        monkeypatch.setattr(module, "REFIT_BELOW_ROWS", 1000)
    else:  # the linear solver is fast enough for the real size
        X, y, Xt, _ = _binary(n=28_000)
    kw = {"gamma": 0.1} if name == "dcsvm" else {}  # gamma="scale" would come from all rows
    est = _fit(name, X, y, probability=True, **kw)
    assert est.calibration_ == "held-out"
    first, cal, train = _first_fit_and_calibrator(name, X, y, **kw)
    np.testing.assert_allclose(est.decision_function(Xt), first.decision_function(Xt), rtol=1e-12, atol=1e-12)
    assert est.calibrator_.slope_ == cal.slope_
    if name == "dcsvm":  # support_ indexes the rows passed to fit
        np.testing.assert_array_equal(X[est.support_], est.support_vectors_)
        assert set(est.support_) <= set(train)


@pytest.mark.parametrize("name", ["dcsvm", "linear"])
def test_small_data_calibrates_in_sample(name):
    X, y, Xt, _ = _binary(n=600)  # 450 training rows: a 10% split would be < 100 rows
    est = _fit(name, X, y, probability=True)
    assert est.calibration_ == "in-sample" and est.calibrator_.n_fitted_ == X.shape[0]
    np.testing.assert_array_equal(est.decision_function(Xt), _fit(name, X, y).decision_function(Xt))
    P = est.predict_proba(Xt)
    np.testing.assert_array_equal(est.classes_[np.argmax(P, axis=1)], est.predict(Xt))


@pytest.mark.parametrize("name", ["dcsvm", "linear"])
def test_without_probability(name):
    X, y, Xt, _ = _binary(n=1600)
    est = _fit(name, X, y)
    assert not hasattr(est, "predict_proba") and est.calibrator_ is None
    with pytest.raises(AttributeError, match="has no attribute 'predict_proba'") as err:
        est.predict_proba(Xt)
    assert "probability=False" in str(err.value.__cause__)
    copy = _round_trip(est)
    assert not copy.probability and not hasattr(copy, "predict_proba")
    est.set_params(probability=True)  # fitted without: no calibrator to use
    with pytest.raises(NotFittedError, match="probability=True"):
        est.predict_proba(Xt)
    with pytest.raises(NotFittedError):
        ESTIMATORS[name](probability=True).predict_proba(Xt)
    with pytest.raises(ValueError, match="probability must be a bool"):
        ESTIMATORS[name](probability="yes").fit(X, y)


@pytest.mark.parametrize("name", ["dcsvm", "linear"])
def test_states_saved_before_calibration_still_load(name):
    X, y, Xt, _ = _binary(n=1600)
    est = _fit(name, X, y, probability=True)
    arrays, meta = est.get_state()
    old_arrays = {k: v for k, v in arrays.items() if not k.startswith("cal__")}
    old_meta = {k: v for k, v in meta.items() if k != "calibration"}
    old_meta["params"] = {k: v for k, v in meta["params"].items() if k != "probability"}
    old = estimator_from_state(old_arrays, old_meta)
    assert not old.probability and old.calibrator_ is None and not hasattr(old, "predict_proba")
    np.testing.assert_array_equal(old.predict(Xt), est.predict(Xt))


def test_holdout_split():
    rng = np.random.default_rng(0)
    y = np.concatenate([np.zeros(9000), np.ones(2000), np.full(30, 2), np.full(5, 3), [4]]).astype(np.int64)
    rng.shuffle(y)
    train, cal = holdout_split(y, 5, 0)
    assert np.array_equal(np.sort(np.concatenate([train, cal])), np.arange(y.shape[0]))
    assert np.all(np.diff(train) > 0) and np.all(np.diff(cal) > 0)
    counts, held = np.bincount(y, minlength=5), np.bincount(y[cal], minlength=5)
    assert abs(cal.shape[0] - 0.1 * y.shape[0]) <= 5
    proportional = counts * cal.shape[0] // y.shape[0]
    assert np.all(np.abs(held[:2] - proportional[:2]) <= 2)
    assert held[2] == 3 or held[2] == proportional[2]
    assert held[3] == 2 and held[4] == 0  # >= 2 for a class with >= 4 rows; never more than half
    assert np.all(held <= counts // 2)
    again = holdout_split(y, 5, 0)
    np.testing.assert_array_equal(again[1], cal)  # an int seed fixes the split
    assert holdout_split(np.arange(499) % 2, 2, 0) is None  # < 50 held-out rows
    assert holdout_split(np.arange(500) % 2, 2, 0)[1].shape[0] == 50
    assert holdout_split(np.concatenate([np.zeros(5000), [1]]).astype(int), 2, 0) is None  # one class
    big = holdout_split(np.arange(100_000) % 3, 3, 0)
    assert big[1].shape[0] <= HOLDOUT_MAX_ROWS


def test_job_estimators_calibrate_by_default():
    for algorithm in ("dcsvm", "avsf", "liblinear-cd"):
        assert make_job_estimator(algorithm, {}).probability is True
        assert make_job_estimator(algorithm, {"probability": False}).probability is False
    with pytest.raises(ValueError, match="probability"):
        make_job_estimator("dcsvm", {"probability": "maybe"})


@pytest.mark.parametrize("label_indices", [True, False])
def test_run_training_reports_calibration(tmp_path, label_indices):
    from svmstream.app.jobs.worker import run_training
    from tests.conftest import two_moons_like, write_libsvm

    X, y = two_moons_like(1200, seed=5)
    Xt, yt = two_moons_like(400, seed=6)
    yt[:3] = 7  # a label the model never saw: left out of the log-loss and ECE
    task = {
        "algorithm": "dcsvm",
        "data": str(write_libsvm(tmp_path / "tr.bz2", X, y)),
        "test": str(write_libsvm(tmp_path / "te", Xt, yt)),
        "params": {"C": 10, "gamma": 1.0, "n_levels": 2, "random_state": 0, "n_jobs": 1},
    }
    est, res = run_training(task, label_indices=label_indices)
    assert est.probability and res["calibration"] == "held-out-refit"
    assert res["calibration_rows"] == est.calibrator_.n_fitted_ == 120
    assert res["calibration_slope"] == est.calibrator_.slope_
    Xr = np.asarray(load_dataset(task["test"], n_features=8)[0].todense())
    P = est.predict_proba(Xr)
    index = np.searchsorted(np.array([-1.0, 1.0]), yt[3:])
    assert res["test_log_loss"] == pytest.approx(-np.mean(np.log(P[3:][np.arange(397), index])), rel=1e-12)
    assert res["test_ece"] == pytest.approx(expected_calibration_error(P[3:], index), rel=1e-12)
    assert res["test_correct"] == int(np.sum(np.where(est.decision_function(Xr) > 0, 1, -1) == yt))
    task["params"] = {**task["params"], "probability": False}
    est, res = run_training(task, label_indices=label_indices)
    assert res["calibration"] is None and "test_log_loss" not in res
