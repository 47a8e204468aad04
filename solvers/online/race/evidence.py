"""The paired evidence of a race: tests on the prequential 0/1 losses of two models that learned
the same rows in the same order (each pair: both predicted an example before learning it).
Two tests, each named for what it tests:

* :class:`PairedEvidence` — "the challenger is better than the champion", sequentially and
  anytime-valid: a betting e-value on the paired differences (the service's challengers:
  promotion by evidence), with :func:`challenger_alpha`, the level each challenger is tested at;
* :func:`mcnemar_p` — "this survivor is more accurate than the first one" on a fixed window:
  the one-sided exact McNemar test (the selector's ``leader="evidence"`` rule).

Imports nothing of the service and no numba.

The betting e-value (``docs/challengers.md``).  On every example both models predicted before learning
it, the paired difference of their 0/1 losses is ``d = loss(champion) - loss(challenger)`` in
{-1, 0, 1}.  The null hypothesis "the challenger is not better" says ``E[d | past] <= 0`` at
every example.  For a fixed bet ``λ`` in [0, 1) the wealth ``Π (1 + λ d_i)`` is then a
nonnegative supermartingale starting at 1 (a *test supermartingale*), and so is the average of
such wealths over a grid of bets (:data:`BETS`).  Ville's inequality bounds the chance that it
*ever* reaches ``1/α`` by ``α``: the challenger is promoted when its e-value
``E = mean_λ Π (1 + λ d_i)`` reaches ``1/α_i``, checked as often as one likes (the test is
anytime-valid: no fixed sample size, no penalty for looking after every batch).  Concordant
pairs (both right or both wrong) have ``d = 0`` and change nothing: the e-value is a function
of the discordant counts only, ``E = mean_λ (1 + λ)^wins (1 - λ)^losses`` -- a sequential,
betting form of McNemar's paired test.

Sources: J. Ville, *Étude critique de la notion de collectif* (1939), the maximal inequality;
I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by betting",
JRSS B 86(1), 2024 (wealth processes of bets on bounded observations, mixtures over bets);
A. Ramdas, P. Grünwald, V. Vovk and G. Shafer, "Game-theoretic statistics and safe
anytime-valid inference", Statistical Science 38(4), 2023.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import binom

#: The bets λ whose wealths are averaged: 1/2, 1/4, ..., 1/256 (large bets win fast against a
#: much worse champion; small ones still grow when the edge is a few points).
BETS = np.array([2.0**-k for k in range(1, 9)], dtype=np.float64)
_LOG_UP = np.log1p(BETS)
_LOG_DOWN = np.log1p(-BETS)


def challenger_alpha(alpha: float, slot: int, max_challengers: int, drift_number: int | None) -> float:
    """The level at which one challenger is tested between two promotions (Bonferroni).

    Half of ``alpha`` goes to the challengers a user names (``max_challengers`` slots:
    ``alpha / (2 max_challengers)`` each), half to the challengers drift detections start,
    the j-th of them (``drift_number`` j >= 1, counted since the last promotion) at
    ``alpha / (2 j (j + 1))``: their sum never exceeds ``alpha / 2`` however many start.
    So the chance that the champion is replaced by a model that is not better, before the next
    promotion, is at most ``alpha``.  ``slot`` is unused (every user slot has the same level)
    but named for the record.

    Returns
    -------
    float in (0, alpha]
    """
    del slot
    if drift_number is None:
        return alpha / (2.0 * max(1, max_challengers))
    j = max(1, int(drift_number))
    return alpha / (2.0 * j * (j + 1))


class PairedEvidence:
    """The paired record of one challenger against the champion since the challenger started
    or the champion last changed: paired examples, wins (challenger right, champion wrong),
    losses (the reverse), and a window of the last ``window`` pairs for the accuracies shown.

    Parameters
    ----------
    window : int >= 1
        Pairs kept for the sliding-window accuracies.
    """

    __slots__ = ("n", "wins", "losses", "tentative", "_ring", "_pos", "_count")

    def __init__(self, window: int):
        self.n = 0
        self.wins = 0
        self.losses = 0
        #: pairs of the current one-class run, held until it ends (then counted) or proves
        #: improbable (then dropped): [pairs, wins, losses]
        self.tentative = [0, 0, 0]
        # code 2 * champion_right + challenger_right per pair, 255: empty
        self._ring = np.full(max(1, int(window)), 255, dtype=np.uint8)
        self._pos = 0
        self._count = 0

    def add(
        self, champion_right: np.ndarray, challenger_right: np.ndarray, *, tentative: bool = False
    ) -> None:
        """Append pairs: two (m,) bool arrays of the same examples, in order; ``tentative``:
        held (:meth:`commit`, :meth:`discard`) instead of counted now.  The window gets them
        either way."""
        a = np.asarray(champion_right, dtype=bool)
        b = np.asarray(challenger_right, dtype=bool)
        m = a.shape[0]
        if m == 0:
            return
        counts = [m, int(np.count_nonzero(b & ~a)), int(np.count_nonzero(a & ~b))]
        if tentative:
            self.tentative = [t + c for t, c in zip(self.tentative, counts)]
        else:
            self._add_counts(*counts)
        codes = (2 * a.astype(np.uint8) + b.astype(np.uint8))[-self._ring.shape[0] :]
        k = codes.shape[0]
        size = self._ring.shape[0]
        idx = (self._pos + np.arange(k)) % size
        self._ring[idx] = codes
        self._pos = int((self._pos + k) % size)
        self._count = min(size, self._count + k)

    def _add_counts(self, n: int, wins: int, losses: int) -> None:
        self.n, self.wins, self.losses = self.n + n, self.wins + wins, self.losses + losses

    def commit(self) -> None:
        """Count the held pairs (their run ended before it proved improbable)."""
        self._add_counts(*self.tentative)
        self.tentative = [0, 0, 0]

    def discard(self) -> None:
        """Drop the held pairs (their run proved improbable)."""
        self.tentative = [0, 0, 0]

    def log_e_value(self) -> float:
        """log E: the log of the mixture wealth ``mean_λ (1 + λ)^wins (1 - λ)^losses``."""
        logs = self.wins * _LOG_UP + self.losses * _LOG_DOWN
        top = float(logs.max())
        return top + float(np.log(np.mean(np.exp(logs - top))))

    def window_accuracies(self) -> tuple[float | None, float | None, int]:
        """``(champion, challenger, pairs)``: accuracies over the window (None when empty)."""
        codes = self._ring[self._ring != 255]
        if codes.shape[0] == 0:
            return None, None, 0
        return float(np.mean(codes >= 2)), float(np.mean(codes & 1)), int(codes.shape[0])

    # ------------------------------------------------------------------ persistence
    def to_json(self) -> dict[str, Any]:
        """The counts and the window (one character per pair: ``0``-``3``, ``.`` empty)."""
        chars = self._ring + np.uint8(ord("0"))  # 255 wraps to ord("0") - 1 = ord("/")
        chars[self._ring == 255] = ord(".")
        window = chars.tobytes().decode("ascii")
        return {"n": self.n, "wins": self.wins, "losses": self.losses, "pos": self._pos, "count": self._count,
                "window": window, "tentative": list(self.tentative)}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any], window: int) -> PairedEvidence:
        """Rebuild from :meth:`to_json` (a window of another size: emptied)."""
        ev = cls(window)
        ev.n, ev.wins, ev.losses = int(data["n"]), int(data["wins"]), int(data["losses"])
        ev.tentative = [int(k) for k in data.get("tentative", (0, 0, 0))]
        saved = str(data.get("window", ""))
        if len(saved) == ev._ring.shape[0]:
            chars = np.frombuffer(saved.encode("ascii"), dtype=np.uint8)
            ev._ring[:] = np.where(chars == ord("."), 255, chars - ord("0"))
            ev._pos, ev._count = int(data["pos"]), int(data["count"])
        return ev


def mcnemar_p(better: int, worse: int) -> float:
    """One-sided exact McNemar test (McNemar, *Psychometrika* 12, 1947; the exact conditional
    form, e.g. Fagerland, Lydersen & Laake, *BMC Med. Res. Methodol.* 13:91, 2013; recommended for
    comparing two classifiers on the same examples by Dietterich, *Neural Computation* 10(7),
    1998).  Of the ``better + worse`` discordant pairs — examples one classifier got right and the
    other wrong — ``better`` favour the challenger; under the null hypothesis (equal accuracy)
    ``better ~ Binomial(better + worse, 1/2)``.  Returns ``P(X >= better)``, a float in [0, 1]
    (1.0 with no discordant pair).  The prequential hits of a learning model are not independent
    examples: the level is nominal."""
    n = int(better) + int(worse)
    if n == 0:
        return 1.0
    return float(binom.sf(int(better) - 1, n, 0.5))
