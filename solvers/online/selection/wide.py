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
#: The fewest warm-up rows a wide race's window holds (its scaling and γ come from them).
MIN_WINDOW_ROWS = 256


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


def race_peak(k, one, window, batch=None):
    """Peak bytes of a race of ``k`` candidates of ``one`` bytes each, ``window`` the bytes of
    the warm-up rows, ``batch`` those of a caller's batch (None: a window's): the batch (the
    held rows are views of it), the window scaled into its order and the rows the buffer
    releases (closing a window; the probe: the window scaled and ``np.var``'s temporary), and
    the candidates.  Later batches are cut into pieces of at most the window's rows
    (:func:`piece_rows`), each costing no more than a close.  Measured by tracemalloc at
    d = 10,000 (``docs/selection.md``, "Wide dense rows")."""
    return (window if batch is None else batch) + 2 * window + k * one


def wide_race(sel, n_candidates, n_features, max_bytes):
    """``(k, buffer, rows)``: the most candidates (at least one) with the pipeline's full
    shuffle buffer and the full warm-up window whose race fits ``max_bytes``
    (:func:`race_peak`, a caller's batch counted as ``warmup`` rows), ``buffer`` and ``rows``
    None; when not even one fits, one with the most buffer rows that fit (at least
    :data:`MIN_BUFFER_ROWS`); when that does not fit either, one with that buffer and the
    most window rows that fit (at least :data:`MIN_WINDOW_ROWS`); nothing fits: one with the
    full buffer and window.  Smaller candidates racing together were measured and lost
    accuracy (``docs/selection.md``, "Wide dense rows").  ``max_bytes`` None: every
    candidate, full sizes."""
    if max_bytes is None:
        return int(n_candidates), None, None
    full = buffer_capacity(int(sel.shuffle_buffer), n_features)
    window = dense_window_bytes(sel.warmup, n_features)
    for k in range(int(n_candidates), 0, -1):
        if race_peak(k, wide_candidate_bytes(sel, n_features, full), window) <= max_bytes:
            return k, None, None
    buffer = smaller_buffer(sel, n_features, max_bytes, full, window)
    if buffer is not None or not full:
        return 1, buffer, None
    return (1, *smaller_window(sel, n_features, max_bytes, full, window))


def smaller_buffer(sel, n_features, max_bytes, full, window):
    """The most shuffle-buffer rows (at least :data:`MIN_BUFFER_ROWS`, at most ``full``) with
    which one candidate's race fits ``max_bytes``; None when none does."""
    row = (max(1, int(n_features)) + 1) * 8
    fixed = wide_candidate_bytes(sel, n_features, 0)
    rows = min(full, max(0, (int(max_bytes) - race_peak(0, 0, window) - fixed) // row))
    return int(rows) if full and rows >= min(MIN_BUFFER_ROWS, full) else None


def smaller_window(sel, n_features, max_bytes, full, window):
    """``(buffer, rows)``: one candidate with :data:`MIN_BUFFER_ROWS` buffer rows (or ``full``
    if fewer) and the most window rows (at least :data:`MIN_WINDOW_ROWS`, fewer than
    ``warmup``) that fit ``max_bytes``; ``(None, None)`` when none do."""
    row = (max(1, int(n_features)) + 1) * 8
    buffer = min(MIN_BUFFER_ROWS, full)
    room = int(max_bytes) - window - wide_candidate_bytes(sel, n_features, buffer)
    rows = min(int(sel.warmup) - 1, max(0, room // (2 * row)))
    return (buffer, int(rows)) if rows >= MIN_WINDOW_ROWS else (None, None)


def piece_rows(sel):
    """Rows a candidate is given at once once the window is smaller than ``warmup``
    (``window_rows_``; None: batches as they come, cut at the race's grid points only)."""
    rows = sel.__dict__.get("window_rows_")
    return None if rows is None or rows >= sel.warmup else int(rows)
