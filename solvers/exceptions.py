"""Exceptions shared by every solver family."""

from __future__ import annotations


class Cancelled(Exception):
    """Raised by a solver when its ``should_stop()`` callable returned true.

    One class for every solver (kernel dual CD, DC-SVM, linear dual CD / AVSF), so a caller
    catches one name.

    Attributes
    ----------
    n_iter : int
        Outer iterations completed before the cancellation (linear dual CD; else 0).
    n_steps : int
        Coordinate steps completed before the cancellation (linear dual CD; else 0).
    """

    def __init__(self, message: str = "cancelled", n_iter: int = 0, n_steps: int = 0):
        super().__init__(message)
        self.n_iter = n_iter
        self.n_steps = n_steps
