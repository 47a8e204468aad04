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
    or the champion last changed: paired examples, wins (the challenger's loss smaller than the
    champion's), losses (the reverse), and a window of the last ``window`` pairs for the figures
    shown (0/1 losses: the accuracies; continuous losses: the mean losses).

    Two kinds of pairs, fixed by the first ones: 0/1 losses (:meth:`add`, or :meth:`add_losses`
    without a ``scale``: a classifier's, a novelty model's against evaluation labels) and
    continuous losses (:meth:`add_losses` with ``scale``: a regressor's absolute errors), whose
    difference is divided by ``scale`` and clipped to [-1, 1] so the bets stay bounded.

    Parameters
    ----------
    window : int >= 1
        Pairs kept for the sliding-window figures.
    """

    __slots__ = ("n", "wins", "losses", "tentative", "scale", "_sure", "_rest", "_held_rest", "_ring",
                 "_loss_ring", "_pos", "_count")  # fmt: skip

    def __init__(self, window: int):
        self.n = 0
        self.wins = 0
        self.losses = 0
        #: pairs of the current one-class run, held until it ends (then counted) or proves
        #: improbable (then dropped): [pairs, wins, losses, full wins, full losses]
        self.tentative = [0, 0, 0, 0, 0]
        #: continuous losses: the scale of a loss difference (None: 0/1 losses)
        self.scale: float | None = None
        # pairs with d = +1 / -1 (every discordant 0/1 pair), and Σ log(1 + λ d) per bet over
        # the pairs with 0 < |d| < 1 (continuous losses only; zero for 0/1 losses)
        self._sure = [0, 0]
        self._rest = np.zeros(BETS.shape[0])
        self._held_rest = np.zeros(BETS.shape[0])
        # code 2 * champion_right + challenger_right per pair, 255: empty (0/1 losses)
        self._ring = np.full(max(1, int(window)), 255, dtype=np.uint8)
        self._loss_ring: np.ndarray | None = None  # (window, 2) losses, NaN: empty (continuous)
        self._pos = 0
        self._count = 0

    def add(
        self, champion_right: np.ndarray, challenger_right: np.ndarray, *, tentative: bool = False
    ) -> None:
        """Append pairs of 0/1 losses: two (m,) bool arrays (right) of the same examples, in
        order; ``tentative``: held (:meth:`commit`, :meth:`discard`) instead of counted now.
        The window gets them either way."""
        a = np.asarray(champion_right, dtype=bool)
        b = np.asarray(challenger_right, dtype=bool)
        self.add_losses((~a).astype(np.float64), (~b).astype(np.float64), tentative=tentative)

    def add_losses(
        self, champion_losses, challenger_losses, *, scale: float | None = None, tentative: bool = False
    ) -> None:
        """Append pairs of losses: two (m,) float arrays of the same examples, in order (NaN in
        either: no pair, e.g. a novelty row without an evaluation label).  ``scale``: the losses
        are continuous; each difference ``d = (champion - challenger) / scale`` is clipped to
        [-1, 1] (the evidence keeps the scale of its first pairs); None: 0/1 losses.
        ``tentative``: held (:meth:`commit`, :meth:`discard`) instead of counted now."""
        a = np.asarray(champion_losses, dtype=np.float64)
        b = np.asarray(challenger_losses, dtype=np.float64)
        keep = np.isfinite(a) & np.isfinite(b)
        a, b = a[keep], b[keep]
        m = a.shape[0]
        if m == 0:
            return
        if self.n == 0 and self.tentative[0] == 0 and self._count == 0 and scale is not None:
            self.scale = float(scale)
        d = a - b if self.scale is None else np.clip((a - b) / self.scale, -1.0, 1.0)
        full_w, full_l = int(np.count_nonzero(d >= 1.0)), int(np.count_nonzero(d <= -1.0))
        counts = [m, int(np.count_nonzero(d > 0)), int(np.count_nonzero(d < 0)), full_w, full_l]
        part = d[(np.abs(d) < 1.0) & (d != 0.0)]
        rest = np.log1p(np.outer(part, BETS)).sum(axis=0) if part.shape[0] else None
        if tentative:
            self.tentative = [t + c for t, c in zip(self.tentative, counts)]
            if rest is not None:
                self._held_rest += rest
        else:
            self._add_counts(counts, rest)
        self._remember(a, b)

    def _remember(self, a: np.ndarray, b: np.ndarray) -> None:
        """The window: codes of 0/1 pairs, or the losses of continuous ones."""
        size = self._ring.shape[0]
        a, b = a[-size:], b[-size:]
        k = a.shape[0]
        idx = (self._pos + np.arange(k)) % size
        if self.scale is None:
            self._ring[idx] = 2 * (a == 0).astype(np.uint8) + (b == 0).astype(np.uint8)
        else:
            if self._loss_ring is None:
                self._loss_ring = np.full((size, 2), np.nan)
            self._loss_ring[idx, 0], self._loss_ring[idx, 1] = a, b
        self._pos = int((self._pos + k) % size)
        self._count = min(size, self._count + k)

    def _add_counts(self, counts, rest) -> None:
        n, wins, losses, full_w, full_l = counts
        self.n, self.wins, self.losses = self.n + n, self.wins + wins, self.losses + losses
        self._sure = [self._sure[0] + full_w, self._sure[1] + full_l]
        if rest is not None:
            self._rest = self._rest + rest

    def commit(self) -> None:
        """Count the held pairs (their run ended before it proved improbable)."""
        self._add_counts(self.tentative, self._held_rest if self._held_rest.any() else None)
        self.discard()

    def discard(self) -> None:
        """Drop the held pairs (their run proved improbable)."""
        self.tentative = [0, 0, 0, 0, 0]
        self._held_rest = np.zeros(BETS.shape[0])

    def log_e_value(self) -> float:
        """log E: the log of the mixture wealth ``mean_λ Π (1 + λ d_i)`` (0/1 losses:
        ``mean_λ (1 + λ)^wins (1 - λ)^losses``)."""
        logs = self._sure[0] * _LOG_UP + self._sure[1] * _LOG_DOWN + self._rest
        top = float(logs.max())
        return top + float(np.log(np.mean(np.exp(logs - top))))

    def window_accuracies(self) -> tuple[float | None, float | None, int]:
        """``(champion, challenger, pairs)``: accuracies over the window (None when empty or
        when the losses are continuous)."""
        codes = self._ring[self._ring != 255]
        if codes.shape[0] == 0:
            return None, None, self._count if self._loss_ring is not None else 0
        return float(np.mean(codes >= 2)), float(np.mean(codes & 1)), int(codes.shape[0])

    def window_losses(self) -> tuple[float | None, float | None]:
        """``(champion, challenger)``: the mean continuous losses over the window (None: 0/1
        losses, or empty)."""
        if self._loss_ring is None:
            return None, None
        held = self._loss_ring[np.isfinite(self._loss_ring[:, 0])]
        if not held.shape[0]:
            return None, None
        return float(np.mean(held[:, 0])), float(np.mean(held[:, 1]))

    # ------------------------------------------------------------------ persistence
    def to_json(self) -> dict[str, Any]:
        """The counts and the window (0/1 losses: one character per pair, ``0``-``3``, ``.``
        empty; continuous losses: the scale, the sums of the bets and the window's losses)."""
        chars = self._ring + np.uint8(ord("0"))  # 255 wraps to ord("0") - 1 = ord("/")
        chars[self._ring == 255] = ord(".")
        window = chars.tobytes().decode("ascii")
        out = {"n": self.n, "wins": self.wins, "losses": self.losses, "pos": self._pos, "count": self._count,
               "window": window, "tentative": list(self.tentative)}  # fmt: skip
        if self._sure != [self.wins, self.losses] or self.scale is not None:
            out["sure"] = list(self._sure)
        if self.scale is not None:
            out["scale"] = self.scale
            out["rest"] = self._rest.tolist()
            out["held_rest"] = self._held_rest.tolist()
            ring = (
                self._loss_ring if self._loss_ring is not None else np.full((self._ring.shape[0], 2), np.nan)
            )
            out["window_losses"] = [[None if not np.isfinite(v) else float(v) for v in row] for row in ring]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], window: int) -> PairedEvidence:
        """Rebuild from :meth:`to_json` (a window of another size: emptied)."""
        ev = cls(window)
        ev.n, ev.wins, ev.losses = int(data["n"]), int(data["wins"]), int(data["losses"])
        held = [int(k) for k in data.get("tentative", (0, 0, 0))]
        ev.tentative = held if len(held) == 5 else [*held, held[1], held[2]]  # saved before 5: 0/1 pairs
        ev._sure = [int(k) for k in data.get("sure", (ev.wins, ev.losses))]
        if data.get("scale") is not None:
            ev.scale = float(data["scale"])
            ev._rest = np.asarray(data["rest"], dtype=np.float64)
            ev._held_rest = np.asarray(data["held_rest"], dtype=np.float64)
        saved = str(data.get("window", ""))
        if len(saved) == ev._ring.shape[0]:
            chars = np.frombuffer(saved.encode("ascii"), dtype=np.uint8)
            ev._ring[:] = np.where(chars == ord("."), 255, chars - ord("0"))
            ev._pos, ev._count = int(data["pos"]), int(data["count"])
            losses = data.get("window_losses")
            if ev.scale is not None and losses is not None:
                ev._loss_ring = np.array([[np.nan if v is None else v for v in row] for row in losses])
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
