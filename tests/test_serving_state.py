"""The serving encoding replicas receive (:mod:`svmstream.app.models.serving`): a snapshot
without the rows kept only for learning rebuilds a model that predicts exactly as the whole
snapshot's, with the same counters, for every kind of online model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.serving import OMITTED, decode_serving, serving_blob, serving_state
from svmstream.app.models.snapshots import SnapshotStore, decode_snapshot
from svmstream.app.models.view import estimator_stats
from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier
from svmstream.solvers.persistence import CorruptStateError, decode_meta, decode_state, encode_state
from tests.test_publish import CASES as PUBLISHED
from tests.test_publish import _binary, _digits, streaming

CASES = {
    **PUBLISHED,
    # with a rehearsal memory (one per binary model one-vs-rest: ``ovr{k}__reh_*``)
    "bsgd-rehearsal-binary": (
        lambda: streaming(BudgetedSGDClassifier(budget=50, random_state=0), rehearsal=2),
        _binary,
    ),
    "bsca-rehearsal-one-vs-rest": (
        lambda: streaming(BudgetedSCAClassifier(budget=40, random_state=0), rehearsal=2),
        _digits,
    ),
}


def _learned(case):
    """The case's estimator after 3/4 of its rows in batches of 200 (no flush: the shuffle
    buffer, reservoirs and rehearsal memory hold rows), and the last quarter as probe."""
    make, data = CASES[case]
    X, y = data()
    cut = 3 * X.shape[0] // 4
    est = make()
    for start in range(0, cut, 200):
        est.partial_fit(
            X[start : min(cut, start + 200)], y[start : min(cut, start + 200)], classes=np.unique(y)
        )
    return est, X[cut:]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_serving_encoding_predicts_and_counts_as_the_snapshot(case, tmp_path):
    est, probe = _learned(case)
    written = SnapshotStore(tmp_path).write(
        "m", ModelConfig(), est.get_state(), version=7, n_features=probe.shape[1], extra={"stream_id": "5-0"}
    )
    whole = decode_snapshot(written.path.read_bytes(), written.path)
    blob = serving_blob(written.arrays, written.meta)
    served = decode_serving(blob)
    omitted = decode_meta(blob)["service"]["omitted"]
    if case.startswith("plain-"):
        assert omitted == {}  # nothing held for learning outside the streaming stages
    else:
        assert omitted  # the rows held for learning (buffer, reservoirs) are left out
        if "rehearsal" in case:
            assert any(name.split("__")[-1] == "reh_X" for name in omitted), sorted(omitted)
        assert len(blob) < written.path.stat().st_size
    for name, (shape, dtype) in omitted.items():
        assert OMITTED.search(name) and written.arrays[name].shape == tuple(shape)
        assert np.dtype(dtype) == written.arrays[name].dtype
    assert (served.name, served.version, served.extra, served.path) == ("m", 7, {"stream_id": "5-0"}, None)
    assert served.n_features == whole.n_features and served.classes == whole.classes
    for method in ("decision_function", "predict_proba", "predict"):
        expected = getattr(est, method)(probe)
        np.testing.assert_array_equal(getattr(whole.estimator, method)(probe), expected)
        np.testing.assert_array_equal(getattr(served.estimator, method)(probe), expected)
    # the counters (received, learned, pending...) and every other figure: as the snapshot's
    # (a plain estimator is not a served model: it has no report of the model contract,
    # solvers/contract.py; the service wraps every online estimator in a pipeline)
    if case.startswith("plain-"):
        return
    assert json.dumps(estimator_stats(served.estimator), sort_keys=True, default=str) == json.dumps(
        estimator_stats(whole.estimator), sort_keys=True, default=str
    )


def test_serving_state_leaves_its_inputs_alone_and_keeps_empty_arrays(tmp_path):
    est, _ = _learned("bsgd-binary")
    written = SnapshotStore(tmp_path).write(
        "m", ModelConfig(), est.get_state(), version=1, n_features=5, extra={}
    )
    names, service = set(written.arrays), dict(written.meta["service"])
    arrays, meta = serving_state(written.arrays, written.meta)
    assert set(written.arrays) == names and written.meta["service"] == service  # not modified
    assert "omitted" not in written.meta["service"]
    for name, value in written.arrays.items():
        if name in arrays:
            assert arrays[name] is value or np.array_equal(arrays[name], value)
            assert not (OMITTED.search(name) and value.size)
        else:
            assert OMITTED.search(name) and value.size


def test_a_serving_encoding_that_omits_what_predictions_read_is_refused(tmp_path):
    est, _ = _learned("bsgd-binary")
    written = SnapshotStore(tmp_path).write(
        "m", ModelConfig(), est.get_state(), version=1, n_features=5, extra={}
    )
    arrays, meta = serving_state(written.arrays, written.meta)
    for omitted in ({"sv_t": [[5, 50], "<f8"]}, {"reh_X": "not a shape"}, {"reh_X": [[-1, 5], "<f8"]}):
        bad_arrays = {k: v for k, v in arrays.items() if k not in omitted}
        bad_meta = {**meta, "service": {**meta["service"], "omitted": omitted}}
        with pytest.raises(CorruptStateError):
            decode_serving(encode_state(bad_arrays, bad_meta))
    # a whole snapshot file decodes as well (nothing omitted)
    whole_arrays, _ = decode_state(written.path.read_bytes())
    assert decode_serving(written.path.read_bytes()).version == 1 and "reh_X" in whole_arrays
