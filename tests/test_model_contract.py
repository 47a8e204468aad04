"""The contract between the service and its models (:mod:`svmstream.solvers.contract`), checked
for every served model the way scikit-learn's ``parametrize_with_checks`` checks estimators:
one list of models (:data:`SERVED`), one test per promise and model.

The promises (``docs/architecture.md``, issue 37):

* the model declares its task and whether it has classes, and implements the protocol;
* received = learned + pending (+ refused) after every call, and received counts every row given;
* the published copy reports what the model reports, and predicts what it predicts;
* a warm copy (a drift challenger's start) continues like the original: it starts where the
  original is after a flush, and both learn the next rows alike in their account;
* the byte estimate bounds the arrays the model holds;
* a state round trip keeps the report and the decisions, and the restored model continues as
  the original does;
* the finiteness check finds a non-finite part.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification

from svmstream.solvers import (
    BudgetedSCAClassifier,
    BudgetedSGDClassifier,
    DCSVMClassifier,
    LinearDualCDClassifier,
    PegasosClassifier,
    StreamingClassifier,
)
from svmstream.solvers.budgeted.tasks import BudgetedOneClassSVM, BudgetedSCARegressor
from svmstream.solvers.contract import OnlineModel, Served
from svmstream.solvers.online.novelty import StreamingNovelty
from svmstream.solvers.online.selection import SelectionClassifier, SelectionRegressor
from svmstream.solvers.online.tasks import StreamingRegressor
from svmstream.solvers.persistence import estimator_from_state

BATCH = 120


def _stream(k=2, n=1200, d=6, seed=0, sort=False):
    X, y = make_classification(
        n_samples=n, n_features=d, n_informative=4, n_redundant=0, n_classes=k, random_state=seed
    )
    X = X * np.linspace(1.0, 30.0, d)  # raw features, as users send them
    if sort:
        order = np.argsort(y, kind="stable")
        X, y = X[order], y[order]
    return X, y.astype(np.int64)


def _pipeline(plain, **kw):
    return StreamingClassifier(plain, warmup=100, shuffle_buffer=80, **kw)


#: Every served online model: name -> (make the model, number of classes, label-sorted stream).
ONLINE = {
    "bsgd": (lambda: _pipeline(BudgetedSGDClassifier(budget=25, random_state=0)), 2, False),
    "bsgd-3-sorted": (lambda: _pipeline(BudgetedSGDClassifier(budget=25, random_state=0)), 3, True),
    "bsca": (lambda: _pipeline(BudgetedSCAClassifier(budget=25, random_state=0)), 2, False),
    "bsca-ovr-3": (lambda: _pipeline(BudgetedSCAClassifier(budget=25, random_state=0)), 3, False),
    "pegasos": (lambda: _pipeline(PegasosClassifier(random_state=0)), 2, False),
    "bsgd-gamma-no-drift": (
        lambda: _pipeline(BudgetedSGDClassifier(budget=25, gamma=0.01, random_state=0), on_drift="none"),
        2,
        False,
    ),
    "selection": (
        lambda: SelectionClassifier(
            BudgetedSGDClassifier(budget=20, random_state=0), warmup=100, shuffle_buffer=60, first_rung=200
        ),
        2,
        False,
    ),
    "regression": (
        lambda: StreamingRegressor(BudgetedSCARegressor(budget=25), warmup=100, random_state=0),
        2,
        False,
    ),
    "regression-selection": (
        lambda: SelectionRegressor(
            BudgetedSCARegressor(budget=25), pipeline_params={"warmup": 100}, first_rung=300, random_state=0
        ),
        2,
        False,
    ),
    "novelty": (
        lambda: StreamingNovelty(BudgetedOneClassSVM(budget=25), warmup=100, random_state=0),
        2,
        False,
    ),
    "selection-3-sorted": (
        lambda: SelectionClassifier(
            BudgetedSGDClassifier(budget=20, random_state=0), warmup=100, shuffle_buffer=60, first_rung=200
        ),
        3,
        True,
    ),
}
#: Every served batch-trained model.
BATCH_TRAINED = {
    "dcsvm": lambda: DCSVMClassifier(probability=True),
    "dcsvm-early": lambda: DCSVMClassifier(early_level=1),
    "avsf": lambda: LinearDualCDClassifier(selection="avsf", probability=True),
    "liblinear-cd": lambda: LinearDualCDClassifier(selection="uniform"),
}
SERVED = [*ONLINE, *BATCH_TRAINED]


def _batches(name):
    make, k, sort = ONLINE[name]
    X, y = _stream(k=k, sort=sort, seed=k)
    return make(), k, [(X[lo : lo + BATCH], y[lo : lo + BATCH]) for lo in range(0, X.shape[0], BATCH)]


def _learn(model, k, X, y):
    if model.fitted():
        return model.partial_fit(X, y)
    return model.partial_fit(X, y, classes=np.arange(k))


def _fitted_batch(name):
    X, y = _stream(k=2, n=400)
    return BATCH_TRAINED[name]().fit(X, y), X


def _same_decisions(a, b, X):
    np.testing.assert_array_equal(np.asarray(a.decision_function(X)), np.asarray(b.decision_function(X)))


# ---------------------------------------------------------------------------- declaration
@pytest.mark.parametrize("name", SERVED)
def test_declares_its_task_and_implements_the_protocol(name):
    model = ONLINE[name][0]() if name in ONLINE else BATCH_TRAINED[name]()
    assert isinstance(model, Served)
    assert model.TASK in ("classification", "regression", "novelty")
    assert isinstance(model.HAS_CLASSES, bool)
    assert model.LEARNS_ONLINE is (name in ONLINE)
    assert isinstance(model, OnlineModel) is (name in ONLINE)
    report = model.report()  # any state, unfitted too
    assert not report.fitted and report.examples.received == 0


# ---------------------------------------------------------------------------- the account
@pytest.mark.parametrize("name", list(ONLINE))
def test_received_is_learned_plus_pending_at_every_call(name):
    model, k, batches = _batches(name)
    given = 0
    for X, y in batches:
        _learn(model, k, X, y)
        given += X.shape[0]
        account = model.report().examples
        assert account.received == given
        assert account.received == account.learned + account.pending + account.refused
        last = model.last_learned()
        assert last is not None and len(last.outputs) == len(last.targets)
    model.flush()
    account = model.report().examples
    assert (account.received, account.learned, account.pending) == (given, given, 0)


# ---------------------------------------------------------------------------- the published copy
@pytest.mark.parametrize("name", list(ONLINE))
def test_published_copy_reports_and_predicts_what_the_model_does(name):
    model, k, batches = _batches(name)
    probe = batches[-1][0][:20]
    for X, y in batches:
        _learn(model, k, X, y)
        copy = model.published_copy()
        assert isinstance(copy, Served)
        assert copy.report() == model.report()
        assert copy.nonfinite(probe) == model.nonfinite(probe)
        if model.serves():
            _same_decisions(copy, model, probe)


@pytest.mark.parametrize("name", list(BATCH_TRAINED))
def test_batch_published_copy_reports_and_predicts_what_the_model_does(name):
    model, X = _fitted_batch(name)
    copy = model.published_copy()
    assert copy.report() == model.report()
    assert model.nonfinite(X) is None and copy.nonfinite(X) is None
    _same_decisions(copy, model, X)


# ---------------------------------------------------------------------------- the warm copy
@pytest.mark.parametrize("name", list(ONLINE))
def test_warm_copy_continues_like_the_original(name):
    model, k, batches = _batches(name)
    half = len(batches) // 2
    for X, y in batches[:half]:
        _learn(model, k, X, y)
    warm = model.warm_start()
    if warm is None:  # it cannot give one now: not past its warm-up, or a race still running
        assert not model.serves() or model.serving_settings() is None
        return
    assert isinstance(warm, OnlineModel)
    assert warm.report().examples.pending == 0  # it learned its buffer at once
    received = model.report().examples.received
    assert warm.report().examples.received == received
    original = model  # the warm copy is where the original is after a flush
    state = original.get_state()
    flushed = type(original).from_state(*state).flush()
    probe = batches[-1][0][:20]
    _same_decisions(warm, flushed, probe)
    for X, y in batches[half:]:
        warm.partial_fit(X, y)
        original.partial_fit(X, y)
        received += X.shape[0]
        for m in (warm, original):
            account = m.report().examples
            assert account.received == received == account.learned + account.pending
    assert warm.report().examples.pending == 0  # it keeps no buffer


# ---------------------------------------------------------------------------- the paired loss
@pytest.mark.parametrize("name", list(ONLINE))
def test_paired_loss_is_the_tasks_loss_of_its_own_decisions(name):
    """What the challengers' test pairs: a classifier's 0/1 loss of its predicted class, a
    regressor's absolute error (scale: 4 σ of its first targets), a novelty model's 0/1 loss of
    its outlier flag against evaluation labels (NaN without one)."""
    model, k, batches = _batches(name)
    for X, y in batches[:-1]:
        _learn(model, k, X, y)
    X, y = batches[-1]
    assert model.serves()
    decision = np.asarray(model.decision_function(X))
    losses = np.asarray(model.paired_loss(X, y))
    assert losses.shape == (X.shape[0],) and losses.dtype == np.float64
    np.testing.assert_array_equal(losses, model.paired_loss(X, y, decision))
    if model.TASK == "regression":
        np.testing.assert_array_equal(losses, np.abs(y - decision))
        first = np.concatenate([yb for _, yb in batches])[: model.warmup]
        assert model.loss_scale() == 4 * np.std(first)
        return
    assert model.loss_scale() is None
    if model.TASK == "novelty":
        labels = np.where(np.arange(X.shape[0]) % 3 == 0, np.nan, y.astype(float))
        got = np.asarray(model.paired_loss(X, labels))
        expected = ((decision < 0) != (labels == 1)).astype(float)
        expected[np.isnan(labels)] = np.nan
        np.testing.assert_array_equal(got, expected)
        return
    predicted = np.argmax(decision, axis=1) if decision.ndim == 2 else (decision > 0).astype(int)
    np.testing.assert_array_equal(losses, (predicted != y).astype(float))


# ---------------------------------------------------------------------------- the byte estimate
def _state_bytes(model) -> int:
    arrays, _ = model.get_state()
    return sum(np.asarray(a).nbytes for a in arrays.values())


@pytest.mark.parametrize("name", list(ONLINE))
def test_estimate_bytes_bounds_the_arrays_the_model_holds(name):
    model, k, batches = _batches(name)
    for X, y in batches:
        _learn(model, k, X, y)
        d = model.input_width()
        assert _state_bytes(model) <= model.estimate_bytes(d, k)
    assert model.estimate_bytes(d, k) <= model.estimate_bytes(d + 1, k)  # wider costs more


# ---------------------------------------------------------------------------- state round trips
@pytest.mark.parametrize("name", list(ONLINE))
def test_state_round_trip_keeps_the_report_and_continues_identically(name):
    model, k, batches = _batches(name)
    probe = batches[-1][0][:20]
    for i, (X, y) in enumerate(batches[:-1]):
        _learn(model, k, X, y)
        if i % 3:
            continue
        restored = estimator_from_state(*model.get_state())
        assert restored.report() == model.report()
        if model.serves():
            _same_decisions(restored, model, probe)
        X_next, y_next = batches[i + 1]
        twin = estimator_from_state(*model.get_state())
        twin.partial_fit(X_next, y_next)
        ahead = estimator_from_state(*model.get_state()).partial_fit(X_next, y_next)
        assert twin.report() == ahead.report()


@pytest.mark.parametrize("name", list(BATCH_TRAINED))
def test_batch_state_round_trip_keeps_the_report(name):
    model, X = _fitted_batch(name)
    restored = estimator_from_state(*model.get_state())
    assert restored.report() == model.report()
    _same_decisions(restored, model, X)


# ---------------------------------------------------------------------------- finiteness
@pytest.mark.parametrize("name", list(ONLINE))
def test_nonfinite_names_a_broken_part(name):
    model, k, batches = _batches(name)
    for X, y in batches:
        _learn(model, k, X, y)
    probe = batches[0][0]
    assert model.nonfinite(probe) is None
    arrays, meta = model.get_state()
    biases = [key for key in arrays if key.endswith("bias")]
    assert biases
    for key in biases:  # an overflowed intercept, as a diverging step leaves it
        arrays[key] = np.full_like(arrays[key], np.inf)
    broken = estimator_from_state(arrays, meta)
    assert broken.nonfinite(probe) in ("intercept", "decisions")
    assert broken.published_copy().nonfinite(probe) == broken.nonfinite(probe)
