"""The race of a wide dense stream (d > 256 features, dense rows): what it holds at its peak,
and smaller candidates so that more than one races where that fits (``docs/selection.md``,
"Wide dense rows").

At d > 256 :func:`~svmstream.solvers.model_bytes` counts a candidate by the bound of sparse
support vectors (2,048 nonzeros) and :func:`~svmstream.solvers.window_bytes` the window by the
same bound; dense rows are stored densely (``sv_storage="auto"`` keeps dense input dense), so
at d = 10,000 the window is 80 MB where 24.6 MB was counted, and the rehearsal memory (16 MiB)
was not counted at all.  Here a candidate is counted as it is stored (dense SVs, guard,
rehearsal memory, shuffle buffer of ``buffer`` rows) and the race at its peak
(:func:`race_peak`); the candidates are given the held rows one after the other, so that one
window is open at a time."""

from __future__ import annotations

from ...budgeted import model_bytes
from ...budgeted._preprocessing import buffer_capacity

#: The fewest shuffle-buffer rows a smaller candidate keeps (one grid step of the race).
MIN_BUFFER_ROWS = 256


def dense_window_bytes(warmup, n_features):
    """Bytes of ``warmup`` dense rows of ``n_features`` float64 values and a label."""
    return int(warmup) * (max(1, int(n_features)) + 1) * 8


def wide_candidate_bytes(sel, n_features, buffer):
    """One candidate of dense storage with a shuffle buffer of ``buffer`` rows (two classes)."""
    plain, pp = sel._plain(), sel.pipeline_params or {}
    return model_bytes(
        plain.budget, n_features, buffer, pp.get("run_guard", True), 2,
        plain.maintenance, "rbf", "dense", sel._pipeline_rehearsal_memory(),
    )  # fmt: skip


def race_peak(k, one, window):
    """Peak bytes of a race of ``k`` candidates of ``one`` bytes each, ``window`` the bytes of
    the warm-up rows: the held rows, 3 windows while a pipeline closes its window (the rows
    stacked, scaled, and the scaler's and γ's temporaries; measured by tracemalloc: 240 MB at
    d = 10,000, ``docs/selection.md``) and the candidates.  After the start the held rows are
    gone, and a batch of up to ``warmup`` rows costs no more than the 3 windows of a close."""
    return 4 * window + k * one


def wide_race(sel, n_candidates, n_features, max_bytes):
    """``(k, buffer)``: the most candidates (at least one) with the pipeline's full shuffle
    buffer whose race fits ``max_bytes`` (:func:`race_peak`), ``buffer`` None; when not even one
    full candidate fits, one with the most buffer rows that fit (at least
    :data:`MIN_BUFFER_ROWS`), or — nothing fits — one with the full buffer.  Smaller candidates
    racing together were measured and lost accuracy (``docs/selection.md``, "Wide dense rows").
    ``max_bytes`` None: every candidate, full buffers."""
    if max_bytes is None:
        return int(n_candidates), None
    full = buffer_capacity(int(sel.shuffle_buffer), n_features)
    window = dense_window_bytes(sel.warmup, n_features)
    for k in range(int(n_candidates), 0, -1):
        if race_peak(k, wide_candidate_bytes(sel, n_features, full), window) <= max_bytes:
            return k, None
    return 1, smaller_buffer(sel, n_features, max_bytes, full, window)


def smaller_buffer(sel, n_features, max_bytes, full, window):
    """The most shuffle-buffer rows (at least :data:`MIN_BUFFER_ROWS`, at most ``full``) with
    which one candidate's race fits ``max_bytes``; None when none does."""
    row = (max(1, int(n_features)) + 1) * 8
    fixed = wide_candidate_bytes(sel, n_features, 0)
    rows = min(full, max(0, (int(max_bytes) - 4 * window - fixed) // row))
    return int(rows) if full and rows >= min(MIN_BUFFER_ROWS, full) else None
