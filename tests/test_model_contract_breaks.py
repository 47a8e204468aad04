"""The contract test can fail (issue 37): each promise broken on purpose in a served model makes
the check of :mod:`tests.test_model_contract` for that promise fail, with the message a user of
the contract would read."""

from __future__ import annotations

import pytest

from svmstream.solvers import StreamingClassifier
from svmstream.solvers.online.selection import SelectionClassifier
from tests import test_model_contract as contract


def test_a_model_that_loses_an_example_breaks_the_account(monkeypatch):
    # learned forgets one example: received = learned + pending no longer holds
    honest = StreamingClassifier.n_learned_
    monkeypatch.setattr(
        StreamingClassifier, "n_learned_", property(lambda self: max(0, honest.fget(self) - 1))
    )
    with pytest.raises(ValueError, match=r"example account broken: received \d+ != learned"):
        contract.test_received_is_learned_plus_pending_at_every_call("bsgd")


def test_a_model_that_does_not_count_every_row_given_breaks_the_account(monkeypatch):
    # the account stays consistent, but the last row of every batch is never received
    honest = StreamingClassifier.partial_fit
    monkeypatch.setattr(
        StreamingClassifier,
        "partial_fit",
        lambda self, X, y, classes=None: honest(self, X[:-1], y[:-1], classes),
    )
    with pytest.raises(AssertionError, match="assert 119 == 120"):
        contract.test_received_is_learned_plus_pending_at_every_call("bsgd")


def test_a_published_copy_that_reports_another_model_breaks_its_promise(monkeypatch):
    # the selector's copy before the contract: its leader's pipeline copy, which reports the
    # leader's figures (no race, the leader's example account), not the selector's
    monkeypatch.setattr(SelectionClassifier, "published_copy", lambda self: self._leader().published_copy())
    with pytest.raises(AssertionError, match="ModelReport"):
        contract.test_published_copy_reports_and_predicts_what_the_model_does("selection")
