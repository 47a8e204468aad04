"""``GET /models/{name}`` answers every key it answered before the model contract (issue 37):
the keys of a plain, a no-settings (selection) and a challenged model after a few batches,
compared with ``tests/data/models_keys.json``, written by ``tests/scenarios/models_keys.py`` with
the tree before the contract (``main`` at 9ce9fa1)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scenarios.models_keys import answers

STORED = Path(__file__).parent / "data" / "models_keys.json"


def test_models_answer_every_key_they_answered_before_the_contract():
    before = json.loads(STORED.read_text())
    now = answers()
    assert set(now) == set(before) == {"plain", "nosettings", "challenged"}
    for name, keys in before.items():
        lost = sorted(set(keys) - set(now[name]))
        assert not lost, f"{name}: keys no longer answered: {lost}"
        assert len(keys) > 100  # the stored list is a whole answer, not a stub
