"""Rehearsal: extra learning steps on remembered examples, so one pass over a stream
approaches the accuracy of several epochs.

After each learned example the learner takes ``rehearsal`` more steps, each on an example
drawn uniformly from a bounded memory of the examples learned so far.  The memory is a
uniform reservoir sample of the stream (Vitter's Algorithm R): after n examples every one of
them is in it with the same probability capacity/n, so rehearsal steps sample the whole
stream seen so far, like the later epochs of a multi-epoch run, without storing it.

Every draw is a hash of ``(seed, example count, draw number)`` (splitmix64), not a call to
the model's generator, so the plan of steps depends only on the sequence of examples: a
stream cut into batches differently, or replayed after a crash (exactly-once recovery),
gives the identical model.

BSCA keeps each remembered example's dual variable α beside it, so a rehearsal step is a
true coordinate-ascent revisit of that coordinate (Qaadan et al. 2019, Algorithm 2 in dataset
mode) — the LaSVM idea of reprocessing old examples — instead of a fresh α = 0 coordinate.

Memory: the rows of the reservoir (scaled, stored dense, float64, also for CSR input) grow by
doubling up to ``capacity`` rows, at most :data:`REHEARSAL_MAX_BYTES`; where fewer than
:data:`REHEARSAL_MIN_ROWS` fit (d > ~2,000: wide text) there is no rehearsal
(``docs/online.md``).
"""

from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp

#: Bytes of remembered rows a model may hold (d + 2 float64 per row: row, label, α).
REHEARSAL_MAX_BYTES = 16 * 2**20
#: Fewer rows than this within the byte bound (d > ~2,000): no rehearsal — a small memory
#: would be rehearsed hundreds of times per row (wide text keeps one pass, docs/online.md).
REHEARSAL_MIN_ROWS = 1000

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(nogil=True, cache=True, inline="always")
def _mix(z):
    """splitmix64's finaliser: a bijective 64-bit hash (Steele, Lea & Flood 2014)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@nb.njit(nogil=True, cache=True, inline="always")
def _draw(seed, count, k, n):
    """An integer in [0, n) from the hash of (seed, example count, draw k); n ≥ 1."""
    z = _mix(np.uint64(seed) + _GOLDEN * np.uint64(count))
    z = _mix(z ^ (np.uint64(k) * _GOLDEN + np.uint64(1)))
    return np.int64(z % np.uint64(n))


@nb.njit(nogil=True, cache=True)
def plan_rehearsal(n_new, rehearsal, capacity, counts, seed, slot_src, order, new_pos):
    """The step order of a batch of ``n_new`` new examples with ``rehearsal`` extra steps each.

    Rows are numbered as in the extended batch: 0..n_new−1 the new examples, n_new + s the
    row held in reservoir slot s before the batch.  For each new example i (in order): its own
    step, then it enters the reservoir (Algorithm R: while not full into the next slot, then
    into a uniformly drawn slot with probability capacity/count), then ``rehearsal`` steps on
    uniformly drawn slots (the example itself can be drawn).

    n_new, rehearsal, capacity : int (capacity ≥ 1); counts : (2,) int64 — reservoir fill and
    examples counted so far, updated; seed : int ≥ 0; slot_src : (min(capacity, fill + n_new),)
    int64 — row held by each slot, in: n_new + s for the old rows, out: i for slots a new
    example took;
    order : (n_new·(1 + rehearsal),) int64, out — rows to learn, in order; new_pos : (n_new,)
    int64, out — position of example i's own step in ``order``.
    """
    fill = counts[0]
    seen = counts[1]
    k = 0
    for i in range(n_new):
        new_pos[i] = k
        order[k] = i
        k += 1
        seen += 1
        if fill < capacity:
            slot = fill
            fill += 1
        else:
            slot = _draw(seed, seen, 0, seen)
        if slot < capacity:
            slot_src[slot] = i
        for q in range(rehearsal):
            order[k] = slot_src[_draw(seed, seen, q + 1, fill)]
            k += 1
    counts[0] = fill
    counts[1] = seen


def memory_capacity(rehearsal_memory: int, n_features: int) -> int:
    """Rows a model remembers: ``rehearsal_memory``, at most :data:`REHEARSAL_MAX_BYTES` of
    rows of ``n_features`` float64 plus label and α; 0 (no rehearsal) when that bound leaves
    fewer than :data:`REHEARSAL_MIN_ROWS`.  It depends on d only, so dense and sparse input of
    the same data rehearse alike."""
    per_row = 8 * (max(1, int(n_features)) + 2)
    rows = REHEARSAL_MAX_BYTES // per_row
    if rows < REHEARSAL_MIN_ROWS:
        return 0
    return int(min(int(rehearsal_memory), rows))


class RehearsalMemory:
    """The reservoir of remembered examples and the plan of a batch's steps.

    Parameters
    ----------
    capacity : int ≥ 0 — rows remembered at most (0: rehearsal off)
    n_features : int — row width d
    seed : int ≥ 0 — the hash seed of every draw

    Attributes
    ----------
    X : (rows allocated, d) float64 scaled rows (grown by doubling); y : labels as the
    learner encodes them (±1 or class index); w : their importance weights (a rehearsal step
    on a row has the row's weight); alpha : BSCA's dual variable of each row;
    counts : (2,) int64 — rows held, examples counted.
    """

    def __init__(self, capacity: int, n_features: int, seed: int):
        self.capacity = int(capacity)
        self.seed = int(seed)
        self.counts = np.zeros(2, dtype=np.int64)
        self.steps = 0  # rehearsal steps taken (statistics)
        self.X = np.zeros((0, int(n_features)))
        self.y = np.zeros(0)
        self.w = np.zeros(0)
        self.alpha = np.zeros(0)

    @property
    def fill(self) -> int:
        return int(self.counts[0])

    def extend(self, X_new, rehearsal: int):
        """Plan the steps for new rows ``X_new`` (n, d): returns ``(order, new_pos, gather)``
        — ``order`` indexes the extended rows ``[X_new; self.X[gather]]``, ``new_pos`` the new
        examples' own steps.  Call :meth:`commit` with the learned rows afterwards."""
        n = X_new.shape[0]
        slots = min(self.capacity, int(self.counts[0]) + n)  # the slots this batch can reach
        slot_src = np.arange(n, n + slots, dtype=np.int64)
        order = np.empty(n * (1 + int(rehearsal)), dtype=np.int64)
        new_pos = np.empty(n, dtype=np.int64)
        plan_rehearsal(n, int(rehearsal), self.capacity, self.counts, self.seed, slot_src, order, new_pos)
        self.steps += n * int(rehearsal)
        old = order >= n
        gather = np.unique(order[old]) - n
        lut = np.empty(slots, dtype=np.int64)
        lut[gather] = n + np.arange(gather.shape[0])
        order[old] = lut[order[old] - n]
        self._slot_src, self._gather = slot_src, gather
        return order, new_pos, gather

    def extend_sweeps(self, X_new, sweeps: int):
        """Plan each new row's own step, in order, then ``sweeps`` passes over the new rows,
        each in a fresh random order (seeded by the seed and the examples counted): dataset-mode
        epochs over a batch that is the whole stream so far (a warm-up window a flush closes;
        BSCA: coordinate-ascent epochs, Qaadan et al. 2019, Algorithm 2).  Only when the memory
        is empty and every new row fits in it (:meth:`sweeps_fit`); returns ``(order, new_pos,
        gather)`` as :meth:`extend`, and every new row takes the next slot."""
        n = X_new.shape[0]
        if not self.sweeps_fit(n):
            raise ValueError(f"a sweep plan needs an empty memory with room for {n} rows")
        rng = np.random.default_rng([self.seed, int(self.counts[1])])
        passes = [np.arange(n, dtype=np.int64)] + [
            rng.permutation(n).astype(np.int64) for _ in range(int(sweeps))
        ]
        self.counts += n
        self.steps += n * int(sweeps)
        self._slot_src, self._gather = np.arange(n, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(passes), np.arange(n, dtype=np.int64), self._gather

    def sweeps_fit(self, n_new: int) -> bool:
        """Whether :meth:`extend_sweeps` can plan ``n_new`` rows: an empty memory that holds them."""
        return int(self.counts[0]) == 0 and 0 < int(n_new) <= self.capacity

    def rows(self, X_new, y_new, w_new, gather):
        """The extended rows, labels and weights ``[X_new; X[gather]]``, ``[y_new; y[gather]]``,
        ``[w_new; w[gather]]`` (CSR if ``X_new`` is: remembered rows are dense, at most 16 MiB)."""
        if gather.shape[0] == 0:
            return X_new, y_new, w_new
        labels = np.concatenate([y_new, self.y[gather]])
        weights = np.concatenate([w_new, self.w[gather]])
        if sp.issparse(X_new):
            return sp.vstack([X_new, sp.csr_matrix(self.X[gather])], format="csr"), labels, weights
        return np.concatenate([X_new, self.X[gather]]), labels, weights

    def commit(self, X_new, y_new, w_new, alpha_ext=None) -> None:
        """Store the rows new examples took slots for (and, BSCA, every α the batch changed:
        ``alpha_ext`` aligned with the extended rows)."""
        n = X_new.shape[0]
        fill = int(self.counts[0])
        self._grow(fill, X_new.shape[1])
        gather = self._gather
        if alpha_ext is not None and gather.shape[0]:
            self.alpha[gather] = alpha_ext[n:]
        slots = np.flatnonzero(self._slot_src[:fill] < n)
        src = self._slot_src[slots]
        self.X[slots] = X_new[src].toarray() if sp.issparse(X_new) else X_new[src]
        self.y[slots] = y_new[src]
        self.w[slots] = w_new[src]
        self.alpha[slots] = 0.0 if alpha_ext is None else alpha_ext[src]
        del self._slot_src, self._gather

    def alpha_ext(self, n_new: int, gather) -> np.ndarray:
        """α of the extended rows: 0 for the new examples (fresh coordinates), the stored α of
        the gathered ones."""
        return np.concatenate([np.zeros(n_new), self.alpha[gather]])

    def _grow(self, fill: int, d: int) -> None:
        rows = self.X.shape[0]
        if fill <= rows:
            return
        new = min(self.capacity, max(fill, 2 * rows, 64))
        X = np.zeros((new, d))
        X[:rows] = self.X
        y, w, alpha = np.zeros(new), np.ones(new), np.zeros(new)
        y[:rows], w[:rows], alpha[:rows] = self.y, self.w, self.alpha
        self.X, self.y, self.w, self.alpha = X, y, w, alpha

    def clear(self) -> None:
        """Forget every row (after a detected drift: they hold the old concept)."""
        self.counts[:] = 0

    def widen(self, n_features: int) -> None:
        """Rows get zeros in new features (``grow_features``)."""
        X = np.zeros((self.X.shape[0], int(n_features)))
        X[:, : self.X.shape[1]] = self.X
        self.X = X

    def get_state(self) -> tuple[dict[str, np.ndarray], dict]:
        fill = self.fill
        arrays = {
            "reh_X": self.X[:fill].copy(),
            "reh_y": self.y[:fill].copy(),
            "reh_w": self.w[:fill].copy(),
            "reh_alpha": self.alpha[:fill].copy(),
        }
        meta = {
            "capacity": self.capacity,
            "seed": self.seed,
            "counts": self.counts.tolist(),
            "steps": self.steps,
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta, n_features: int) -> RehearsalMemory:
        """Raises ValueError if the arrays do not fit the meta."""
        memory = cls(meta["capacity"], n_features, meta["seed"])
        fill, seen = (int(v) for v in meta["counts"])
        X = np.asarray(arrays["reh_X"], dtype=np.float64)
        if not (0 <= fill <= memory.capacity and seen >= fill and X.shape == (fill, int(n_features))):
            raise ValueError("saved rehearsal memory does not fit its capacity/dimension")
        memory.counts[:] = (fill, seen)
        memory.steps = int(meta.get("steps", 0))
        memory.X, memory.y, memory.alpha = (
            # a serving state's zero-filled rows (a read-only broadcast, no memory) stay unwritten
            np.zeros(X.shape) if _zero_broadcast(X) else X.copy(),
            np.array(arrays["reh_y"], float),
            np.array(arrays["reh_alpha"], float),
        )
        # saved before weights: every remembered row weighs 1
        memory.w = np.array(arrays["reh_w"], float) if "reh_w" in arrays else np.ones(fill)
        return memory


def _zero_broadcast(a: np.ndarray) -> bool:
    """Whether ``a`` is a broadcast of one zero (every stride 0), as the serving state holds
    for the rows predictions never read (``svmstream.app.models.serving``)."""
    return a.size > 0 and not any(a.strides) and not a.flat[0]
