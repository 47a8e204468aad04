"""The state file format (``solvers/persistence.py``): format 2 (raw arrays at offsets listed in
the header) round-trips every array kind a model saves, format-1 files (``.npz`` payload) are
still read, and an index that points outside the payload or names an object dtype is refused;
the capacity sum taken once for a run of installs refuses where the per-install sum does."""

from __future__ import annotations

import hashlib
import io
import json

import numpy as np
import pytest

from svmstream.app.errors import InvalidInput
from svmstream.app.models.config import ModelConfig
from svmstream.app.models.limits import held_bytes
from svmstream.app.models.registry import Registry
from svmstream.app.models.serving import read_serving
from svmstream.app.models.snapshots import SnapshotStore, decode_snapshot
from svmstream.app.settings import Settings
from svmstream.solvers.persistence import (
    _HEADER,
    MAGIC,
    CorruptStateError,
    decode_meta,
    decode_state,
    encode_state,
)
from tests.test_serving_state import _learned

ARRAYS = {
    "f8": np.arange(12, dtype=np.float64).reshape(3, 4) / 7,
    "fortran": np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)),
    "strided": np.arange(20, dtype=np.int64)[::3],
    "scalar": np.array(3.5),
    "empty": np.zeros((0, 5), dtype=np.float32),
    "labels": np.array(["cat", "dog", "zebra"]),
    "flags": np.array([True, False, True]),
    "u1": np.arange(5, dtype=np.uint8),
}


def format_1(arrays, meta) -> bytes:
    """A state as format 1 wrote it (an ``.npz`` payload), for the compatibility test."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    payload = buffer.getvalue()
    header = json.dumps(
        {
            "format_version": 1,
            "payload_bytes": len(payload),
            "payload_sha256": hashlib.sha256(payload).hexdigest(),
            "meta": meta,
        }
    ).encode()
    return MAGIC + _HEADER.pack(1, len(header)) + header + payload


def same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        np.testing.assert_array_equal(a[name], b[name])


def test_format_2_round_trips_every_array_kind_and_gives_writable_copies():
    blob = encode_state(ARRAYS, {"estimator": "X", "k": [1, 2]})
    arrays, meta = decode_state(blob)
    same(arrays, ARRAYS)
    assert meta == {"estimator": "X", "k": [1, 2]} and decode_meta(blob) == meta
    assert arrays["fortran"].flags.f_contiguous
    for value in arrays.values():
        assert value.flags.writeable and value.flags.owndata
    arrays["f8"][0, 0] = 99.0  # its own memory: the blob is untouched
    assert decode_state(blob)[0]["f8"][0, 0] == 0.0
    assert encode_state(arrays | {"f8": ARRAYS["f8"]}, meta) == blob  # deterministic bytes


def test_format_1_files_are_still_read():
    arrays, meta = decode_state(format_1(ARRAYS, {"estimator": "X"}))
    same(arrays, ARRAYS)
    assert meta == {"estimator": "X"}


@pytest.mark.parametrize(
    "entry",
    [
        ["a", "<f8", [4], "C", 0, 32 + 8],  # beyond the payload
        ["a", "|O", [4], "C", 0, 32],  # an object dtype
        ["a", "<f8", [5], "C", 0, 32],  # shape and length disagree
        ["a", "<f8", [-4], "C", 0, 32],
        ["a", "<f8", [4], "Z", 0, 32],
        ["a", "<f8", [4], "C", -8, 32],
        ["a", "<f8", [4], "C"],
    ],
)
def test_an_index_that_does_not_hold_is_refused(entry):
    blob = encode_state({"a": np.arange(4.0)}, {"estimator": "X"})
    start = len(MAGIC) + _HEADER.size
    length = _HEADER.unpack_from(blob, len(MAGIC))[1]
    header = json.loads(blob[start : start + length])
    header["arrays"] = [entry]
    raw = json.dumps(header).encode()
    bad = MAGIC + _HEADER.pack(2, len(raw)) + raw + blob[start + length :]
    with pytest.raises(CorruptStateError, match="bad array index"):
        decode_state(bad)


def test_a_state_of_an_unknown_format_version_is_refused():
    blob = encode_state({"a": np.arange(4.0)}, {"estimator": "X"})
    with pytest.raises(CorruptStateError, match="version 3"):
        decode_state(
            MAGIC
            + _HEADER.pack(3, _HEADER.unpack_from(blob, len(MAGIC))[1])
            + blob[len(MAGIC) + _HEADER.size :]
        )


@pytest.mark.parametrize("case", ["bsgd-rehearsal-binary", "bsca-rehearsal-one-vs-rest"])
def test_a_served_file_of_either_format_reads_only_what_predictions_need(case, tmp_path):
    """read_serving on a file of format 2 and of format 1: the rows kept for learning are
    zero-filled and not counted, the decisions equal the whole snapshot's."""
    est, probe = _learned(case)
    written = SnapshotStore(tmp_path).write(
        "m", ModelConfig(), est.get_state(), version=7, n_features=probe.shape[1], extra={"stream_id": "5-0"}
    )
    whole = decode_snapshot(written.path.read_bytes(), written.path).estimator.decision_function(probe)
    total = sum(np.asarray(v).nbytes for v in written.arrays.values())
    for kind, blob in (("2", written.path.read_bytes()), ("1", format_1(written.arrays, written.meta))):
        path = tmp_path / f"m-{kind}.svmstate"
        path.write_bytes(blob)
        restored, kept = read_serving(path)
        assert 0 < kept < total / 2, (kind, kept, total)
        np.testing.assert_array_equal(restored.estimator.decision_function(probe), whole)


def test_the_kept_sum_of_estimates_refuses_where_a_sum_taken_each_time_does():
    """The registry's HeldTotal (summed at most once a second, each passing check adding its
    own) refuses the same model as a sum over every model at each check, also after models were
    deleted and created within the second."""

    def fill(kept: bool) -> list[str]:
        config = Registry(Settings(), None).resolve_config(
            {"algorithm": "bsgd", "budget": 50, "n_features": 10, "C": 1.0}
        )
        one = held_bytes(config, 10)
        registry = Registry(Settings(max_total_model_bytes=int(10.5 * one), max_models=10_000), None)
        if not kept:
            registry.held_total = None
        made = []
        for k in range(14):
            if k == 6:
                registry.delete(made.pop(0))
            try:
                registry.create(f"m{k}", config, snapshot=False)
                made.append(f"m{k}")
            except InvalidInput as exc:
                assert "max_total_model_bytes" in str(exc)
        return made

    each = fill(False)
    assert len(each) == 10 and each[-1] == "m10"
    assert fill(True) == each
