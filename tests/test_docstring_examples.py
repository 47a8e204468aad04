"""The ``Examples`` section of every public estimator runs as a doctest."""

from __future__ import annotations

import doctest

import pytest

import svmstream.solvers as solvers

ESTIMATORS = ["BudgetedSGDClassifier", "BudgetedSCAClassifier", "DCSVMClassifier", "LinearDualCDClassifier"]


@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_docstring_example_runs(name):
    cls = getattr(solvers, name)
    assert ">>> " in (cls.__doc__ or ""), f"{name} has no runnable Examples section"
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(cls, name, globs={}):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0, f"{name}: {result}"
