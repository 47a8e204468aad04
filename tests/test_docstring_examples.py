"""The ``Examples`` section of every public estimator runs as a doctest."""

from __future__ import annotations

import doctest

import pytest

import svmstream.solvers as solvers
import svmstream.solvers.budgeted.tasks as task_estimators
import svmstream.solvers.online.novelty as novelty_pipeline
import svmstream.solvers.online.tasks as task_pipelines

ESTIMATORS = [
    pytest.param(solvers, "BudgetedSGDClassifier"),
    pytest.param(solvers, "BudgetedSCAClassifier"),
    pytest.param(solvers, "PegasosClassifier"),
    pytest.param(solvers, "StreamingClassifier"),
    pytest.param(solvers, "SelectionClassifier"),
    pytest.param(solvers, "DCSVMClassifier"),
    pytest.param(solvers, "LinearDualCDClassifier"),
    # regression and novelty (issue 38)
    pytest.param(task_estimators, "BudgetedSGDRegressor"),
    pytest.param(task_estimators, "BudgetedSCARegressor"),
    pytest.param(task_estimators, "BudgetedOneClassSVM"),
    pytest.param(task_pipelines, "StreamingRegressor"),
    pytest.param(novelty_pipeline, "StreamingNovelty"),
]


@pytest.mark.parametrize("module, name", ESTIMATORS)
def test_estimator_docstring_example_runs(module, name):
    cls = getattr(module, name)
    assert ">>> " in (cls.__doc__ or ""), f"{name} has no runnable Examples section"
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(cls, name, globs={}):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0, f"{name}: {result}"
