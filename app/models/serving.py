"""The serving encoding of a snapshot: what a prediction replica needs, without the rows kept
for learning (``docs/deployment.md``, "Prediction replicas").

A learner's snapshot holds, besides the model predictions read (support vectors,
coefficients, scaling, calibration, classes, counters), rows kept only for learning: the
rehearsal memory (``reh_X``, ``reh_y``, ``reh_alpha``: up to 20,000 rows by default), the run
guard's reservoirs (``pp_res_X``) and the shuffle buffer (``pp_buf_X``, ``pp_buf_y``; the
``pp_sbuf_*``/``pp_sres_*`` arrays of sparse rows).  An ijcnn1 model at B = 500 saves 4.05 MB,
3.9 MB of it such rows; its serving encoding is 0.2 MB.

:func:`serving_blob` encodes a snapshot's ``(arrays, meta)`` (:meth:`SnapshotStore.write`'s,
from memory) in the snapshot format (:func:`svmstream.solvers.persistence.encode_state`) with
those arrays left out and their shapes and dtypes listed in ``meta["service"]["omitted"]``.
:func:`decode_serving` decodes it and puts zero-filled arrays of those shapes in their place,
so the estimator rebuilds exactly as from the file (same counters, same figures, the same
decision values: predictions never read those rows) — but it must not learn from them, and a
prediction replica never learns (``ModelHandle.follower_of``) nor writes snapshots.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from svmstream.app.models.snapshots import RestoredModel, restored_from_state
from svmstream.solvers.persistence import CorruptStateError, decode_state, encode_state

#: Arrays no prediction reads, by name (after any ``ovr{k}__`` or ``challengers.{i}.`` prefix).
OMITTED = re.compile(
    r"(?:^|__|\.)(?:reh_X|reh_y|reh_alpha|pp_buf_X|pp_buf_y|pp_res_X|"
    r"pp_sbuf_data|pp_sbuf_indices|pp_sres_data|pp_sres_indices)\Z"
)


def serving_state(
    arrays: dict[str, np.ndarray], meta: dict[str, Any]
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``(arrays, meta)`` of a snapshot (``meta["service"]`` set) without the arrays matching
    :data:`OMITTED`; ``meta["service"]["omitted"]``: name -> ``[shape, dtype string]`` of each
    array left out (empty arrays are kept).  Neither input is modified."""
    kept: dict[str, np.ndarray] = {}
    omitted: dict[str, list] = {}
    for name, value in arrays.items():
        value = np.asarray(value)
        if value.size and OMITTED.search(name):
            omitted[name] = [list(value.shape), value.dtype.str]
        else:
            kept[name] = value
    out = dict(meta)
    out["service"] = {**meta["service"], "omitted": omitted}
    return kept, out


def serving_blob(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> bytes:
    """The serving encoding (bytes) of a snapshot's ``(arrays, meta)`` (:func:`serving_state`)."""
    return encode_state(*serving_state(arrays, meta))


def decode_serving(blob: bytes) -> RestoredModel:
    """Decode the bytes of :func:`serving_blob` (or of a whole snapshot file) into the model
    a replica installs, the omitted arrays zero-filled.

    Raises
    ------
    CorruptStateError
        If the bytes are truncated, fail their checksum, list an unusable omitted array, or do
        not rebuild a model.
    """
    arrays, meta = decode_state(blob)
    omitted = meta.get("service", {}).get("omitted") or {}
    try:
        for name, (shape, dtype) in omitted.items():
            if name in arrays or not OMITTED.search(name):
                raise ValueError(f"array {name!r} cannot be omitted")
            arrays[name] = np.zeros(tuple(int(n) for n in shape), dtype=np.dtype(dtype))
    except (TypeError, ValueError) as exc:
        raise CorruptStateError(f"bad omitted arrays: {exc}") from exc
    return restored_from_state(arrays, meta, None)
