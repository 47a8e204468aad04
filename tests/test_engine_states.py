"""States written by the tree of 9ce9fa1 (``tests/data/e8_*.state``: the engines were the classes
``StreamingBSGD``/``StreamingBSCA`` behind the plain faces) load into one class per algorithm
and continue bit for bit: each learns the rest of its stream and decides as an uninterrupted run
of the same model in this tree, on this machine (``tests/data/make_9ce9fa1_states.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from svmstream.solvers import (
    BudgetedSCAClassifier,
    BudgetedSGDClassifier,
    PegasosClassifier,
    StreamingClassifier,
)
from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state

DATA = Path(__file__).resolve().parent / "data"
sys.path.insert(0, str(DATA))
try:
    from make_9ce9fa1_states import learn, streams
finally:
    sys.path.remove(str(DATA))

STREAMS = streams()
PLAIN = {
    "pipeline_bsgd": BudgetedSGDClassifier,
    "pipeline_bsca_3class": BudgetedSCAClassifier,
    "pipeline_pegasos_sparse": PegasosClassifier,
    "plain_bsgd": BudgetedSGDClassifier,
    "plain_bsca_3class": BudgetedSCAClassifier,
    "plain_pegasos": PegasosClassifier,
}


def _finish(model):
    return model.flush() if isinstance(model, StreamingClassifier) else model


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_a_state_of_9ce9fa1_loads_and_continues_bit_for_bit(name):
    make, X, y, classes, batch, save_after = STREAMS[name]
    arrays, meta = decode_state((DATA / f"e8_{name}.state").read_bytes())
    restored = estimator_from_state(arrays, meta)
    engine = restored.model_ if isinstance(restored, StreamingClassifier) else restored
    assert type(engine) is PLAIN[name]  # the engine is an instance of the plain class
    if PLAIN[name] is BudgetedSCAClassifier:  # one-vs-rest: its binary models too
        assert {type(b) for b in engine.estimators_} == {BudgetedSCAClassifier}
    uninterrupted = _finish(learn(make(), X, y, classes, batch, 0, X.shape[0]))
    resaved = estimator_from_state(*decode_state(encode_state(*restored.get_state())))  # today's layout
    for model in (restored, resaved):
        model = _finish(learn(model, X, y, classes, batch, save_after, X.shape[0]))
        np.testing.assert_array_equal(
            model.decision_function(X[:60]), uninterrupted.decision_function(X[:60])
        )
        assert model.get_params(deep=False).keys() == uninterrupted.get_params(deep=False).keys()


def test_an_engine_state_with_its_stages_on_is_refused_as_a_plain_estimator():
    """The guard of ``upgrades.engines_renamed``: a plain estimator's state (version 7 or 8)
    whose stages' settings are on belongs to a pipeline."""
    arrays, meta = decode_state((DATA / "e8_plain_bsgd.state").read_bytes())
    meta = {**meta, "params": {**meta["params"], "shuffle_buffer": 500}}
    with pytest.raises(ValueError, match="has no shuffle_buffer"):
        estimator_from_state(arrays, meta)
