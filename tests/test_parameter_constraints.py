"""The plain estimators' ``_parameter_constraints`` come from the one hyperparameter table
(``solvers/_hyperparameters.py``: ``HYPERPARAMETERS`` and ``ESTIMATOR_ONLY``), so every bound is
declared once and agrees everywhere: the table, the service's schema, the estimators.

The budget is the case that disagreed (the table said >= 1, the JSON schema >= 2, the
estimators refused < 2): merging needs two support vectors, so B >= 2 everywhere.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import pydantic
import pytest
from sklearn.datasets import make_classification
from sklearn.utils._param_validation import Interval, StrOptions

from svmstream.app.models.config import ModelConfig
from svmstream.solvers import BUDGET_MIN, BudgetedSCAClassifier, BudgetedSGDClassifier, PegasosClassifier
from svmstream.solvers._hyperparameters import BY_NAME, ESTIMATOR_ONLY
from svmstream.solvers._params import parameter_constraints

ROWS = {**BY_NAME, **{row.name: row for row in ESTIMATOR_ONLY}}
PLAIN = [BudgetedSGDClassifier, BudgetedSCAClassifier, PegasosClassifier]


def _bounds(constraint) -> dict:
    """What an Interval says, as the table's bound keywords (``{"ge": 2}``)."""
    out = {}
    if constraint.left is not None:
        out["ge" if constraint.closed in ("left", "both") else "gt"] = constraint.left
    if constraint.right is not None:
        out["le" if constraint.closed in ("right", "both") else "lt"] = constraint.right
    return out


@pytest.mark.parametrize("cls", PLAIN)
def test_every_parameter_has_its_rows_constraint(cls):
    params = cls().get_params()
    assert set(cls._parameter_constraints) == set(params)
    for name, constraints in cls._parameter_constraints.items():
        row = ROWS[name]  # KeyError: a parameter without a row of the table
        if name == "random_state":
            assert constraints == ["random_state"]
            continue
        intervals = [c for c in constraints if isinstance(c, Interval)]
        options = [c for c in constraints if isinstance(c, StrOptions)]
        if row.type in (int, float):
            (interval,) = intervals
            assert interval.type is (Integral if row.type is int else Real), name
            assert _bounds(interval) == row.bounds, name
            assert {o for c in options for o in c.options} == set(row.words), name
        elif row.type is str:
            assert options[0].options == set(row.choices), name
        assert (None in constraints) == (row.nullable and row.null_in_estimator), name
        assert params[name] == row.default or not row.same_in_estimator or name == "gss_eps", name
    assert cls._parameter_constraints.keys() == parameter_constraints(params).keys()


def test_the_budget_bound_is_two_everywhere():
    row = BY_NAME["budget"]
    assert row.bounds == {"ge": BUDGET_MIN} and BUDGET_MIN == 2
    # the service's schema and validation
    schema = ModelConfig.model_json_schema(by_alias=True)["properties"]["budget"]
    minimum = [b.get("minimum") for b in schema.get("anyOf", [schema]) if "minimum" in b]
    assert minimum == [BUDGET_MIN], schema
    with pytest.raises(pydantic.ValidationError, match="budget"):
        ModelConfig(budget=1)
    assert ModelConfig(budget=2).budget == 2
    # the estimators
    X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    for cls in (BudgetedSGDClassifier, BudgetedSCAClassifier):
        with pytest.raises(ValueError, match="budget"):
            cls(budget=1).fit(X, y)
        model = cls(budget=2, random_state=0).fit(X, y)
        assert model.n_support_vectors_ <= 2 and np.isfinite(model.decision_function(X)).all()


def test_a_bound_changed_in_the_table_changes_the_estimators_constraint():
    import dataclasses

    from svmstream.solvers import _params

    altered = dataclasses.replace(BY_NAME["budget"], ge=7)
    saved = _params._ESTIMATOR_ROWS["budget"]
    _params._ESTIMATOR_ROWS["budget"] = altered
    try:
        (interval,) = parameter_constraints(["budget"])["budget"]
    finally:
        _params._ESTIMATOR_ROWS["budget"] = saved
    assert _bounds(interval) == {"ge": 7}
