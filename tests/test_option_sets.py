"""The service's option lists equal the solvers': both come from the hyperparameter table
(``svmstream.solvers._hyperparameters``, one definition, re-exported by ``_params``, by
``svmstream.solvers`` and by ``svmstream.app.models.config``, whose ``Literal`` types are built
from it).  ``tests/test_hyperparameter_table.py`` checks every exposure of the table itself.
"""

from __future__ import annotations

import typing

import svmstream.solvers as solvers
from svmstream.app.models import config
from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier, _params
from svmstream.solvers import _hyperparameters as table


def _literal(tp) -> set:
    return set(typing.get_args(tp))


def test_config_literals_equal_the_solver_option_sets():
    assert _literal(config.Algorithm) == set(solvers.ONLINE_ALGORITHMS)
    assert _literal(config.BatchAlgorithm) == set(solvers.BATCH_ALGORITHMS) == set(config.BATCH_ALGORITHMS)
    assert _literal(config.Maintenance) == set(solvers.MAINTENANCE)
    assert _literal(config.MergeSolver) == set(solvers.MERGE_SOLVERS)
    assert _literal(config.Schedule) == set(solvers.SCHEDULES)
    assert _literal(config.Scaling) == set(solvers.SCALINGS)
    # the service adds "challenger" (a drift starts a challenger: docs/challengers.md)
    assert _literal(config.OnDrift) == set(solvers.ON_DRIFT) | {"challenger"}
    assert _literal(config.Kernel) == set(solvers.KERNELS_ONLINE)
    assert _literal(config.SvStorage) == set(solvers.SV_STORAGES)


def test_config_on_drift_default_equals_the_estimators():
    # the service's model is the streaming pipeline; its drift stage owns on_drift
    assert config.ModelConfig().on_drift == solvers.StreamingClassifier().on_drift
    # the plain estimators (the pipeline's engines) react to nothing: no drift setting at all
    for cls in (BudgetedSCAClassifier, BudgetedSGDClassifier, solvers.PegasosClassifier):
        assert not hasattr(cls(), "on_drift") and "on_drift" not in cls().get_params(), cls


def test_config_stage_defaults_equal_the_pipelines():
    cfg, pipeline = config.ModelConfig(), solvers.StreamingClassifier()
    for name in ("scaling", "warmup", "shuffle_buffer", "run_guard"):  # the scaler and order stages
        assert getattr(cfg, name) == getattr(pipeline, name), name
        assert name not in BudgetedSGDClassifier().get_params(), name
        assert name not in BudgetedSCAClassifier().get_params(), name


def test_config_bounds_and_defaults_equal_the_solvers():
    from svmstream.solvers._params import REFERENCE_N, REFERENCE_N_LINEAR

    assert (config.C_MAX, config.LAMBDA_MIN) == (solvers.C_MAX, solvers.LAMBDA_MIN)
    assert (config.DEFAULT_WARMUP, config.DEFAULT_SHUFFLE_BUFFER) == (
        solvers.DEFAULT_WARMUP,
        solvers.DEFAULT_SHUFFLE_BUFFER,
    )
    assert (config.DEFAULT_REHEARSAL, config.DEFAULT_REHEARSAL_MEMORY) == (
        solvers.DEFAULT_REHEARSAL,
        solvers.DEFAULT_REHEARSAL_MEMORY,
    )
    assert config.ModelConfig().rehearsal == solvers.StreamingClassifier().rehearsal
    assert "rehearsal" not in BudgetedSGDClassifier().get_params()  # a stage of the pipeline
    assert config.REFERENCE_N == REFERENCE_N
    assert config.REFERENCE_N_LINEAR == REFERENCE_N_LINEAR
    assert config.ModelConfig().kernel == BudgetedSGDClassifier().kernel == "rbf"
    assert solvers.PegasosClassifier().kernel == "linear"


def test_one_definition_of_each_option_set_and_constant():
    names = (
        "ONLINE_ALGORITHMS",
        "BATCH_ALGORITHMS",
        "MAINTENANCE",
        "MERGE_SOLVERS",
        "SCHEDULES",
        "ON_DRIFT",
        "SCALINGS",
        "KERNELS_ONLINE",
        "SV_STORAGES",
        "C_MAX",
        "LAMBDA_MIN",
        "REFERENCE_N",
        "REFERENCE_N_LINEAR",
        "DEFAULT_WARMUP",
        "DEFAULT_SHUFFLE_BUFFER",
        "DEFAULT_REHEARSAL",
        "DEFAULT_REHEARSAL_MEMORY",
    )
    for name in names:
        assert getattr(_params, name) is getattr(table, name), name
        assert getattr(config, name) is getattr(table, name), name
    for name in ("REHEARSAL_MAX", "REHEARSAL_MEMORY_MAX", "DEFAULT_MAX_CLASSES", "MAX_CLASSES_LIMIT"):
        assert getattr(config, name) is getattr(table, name), name
