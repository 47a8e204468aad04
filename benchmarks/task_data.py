"""Data sets of the regression and novelty benchmarks, all from installed packages (no download).

Regression (``REGRESSION``), each ``(X dense float64, y float64)`` in the package's row order:

* ``diabetes`` — scikit-learn's bundled diabetes set (442 × 10, continuous, standardised already);
* ``friedman1`` — ``sklearn.datasets.make_friedman1(10000, noise=1.0, random_state=0)`` (a
  generator: 10 features, 5 of them irrelevant, a non-linear target);
* ``boston`` — ``MASS::Boston`` from Debian's ``r-cran-mass`` (506 × 13, categorical-coded
  ``chas`` and ``rad``; target ``medv``, censored at 50);
* ``diamonds`` — ``ggplot2::diamonds`` from Debian's ``r-cran-ggplot2`` (53,940 rows; ``cut``,
  ``color``, ``clarity`` ordinal factors coded 1..k; target ``price``, heavy-tailed: skewness 1.6).

The R sets are read from the packages' lazy-load databases (``data/Rdata.rdx`` / ``.rdb``) with the
``rdata`` wheel (:func:`r_dataset`); install them with ``apt-get install r-cran-mass
r-cran-ggplot2``.  A missing package skips the set with a message.

Novelty (``NOVELTY``): the shared LIBSVM multi-class sets letter and pendigits
(``SVMSTREAM_DATA``), "one class is normal": learn the training rows of one class, score the whole
test set (the other classes are the novelties).
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

R_DIRS = (Path("/usr/lib/R/library"), Path("/usr/lib/R/site-library"), Path("/usr/share/R/library"))
SPLIT_SEED = 0
TEST_FRACTION = 0.25


def _r_object(raw: bytes):
    import rdata

    return rdata.conversion.convert(rdata.parser.parse_data(raw))


def r_dataset(package: str, name: str):
    """Data set ``name`` of installed R ``package`` as a pandas DataFrame (FileNotFoundError if
    the package is not installed).  An R lazy-load database: the index ``Rdata.rdx`` (gzip'd R
    serialisation) maps each name to (offset, length) in ``Rdata.rdb``, whose entry is a 4-byte
    length and a zlib stream of the object's R serialisation."""
    for base in R_DIRS:
        rdx = base / package / "data" / "Rdata.rdx"
        if rdx.exists():
            break
    else:
        raise FileNotFoundError(
            f"R package {package} is not installed (apt-get install r-cran-{package.lower()})"
        )
    index = _r_object(gzip.decompress(rdx.read_bytes()))
    offset, length = (int(v) for v in index["variables"][name])
    with open(rdx.with_suffix(".rdb"), "rb") as f:
        f.seek(offset)
        entry = f.read(length)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tibble classes: read as a data.frame
        return _r_object(zlib.decompress(entry[4:]))


def _coded(frame) -> np.ndarray:
    """Every column as float64; a factor (categorical) as its codes 1..k (ordered factors keep
    their order)."""
    cols = []
    for name in frame.columns:
        col = frame[name]
        if hasattr(col, "cat"):
            cols.append(col.cat.codes.to_numpy(dtype=np.float64) + 1.0)
        else:
            cols.append(col.to_numpy(dtype=np.float64))
    return np.column_stack(cols)


def _diabetes():
    from sklearn.datasets import load_diabetes

    return load_diabetes(return_X_y=True)


def _friedman1():
    from sklearn.datasets import make_friedman1

    return make_friedman1(10_000, noise=1.0, random_state=0)


def _boston():
    frame = r_dataset("MASS", "Boston")
    return _coded(frame.drop(columns=["medv"])), frame["medv"].to_numpy(dtype=np.float64)


def _diamonds():
    frame = r_dataset("ggplot2", "diamonds")
    return _coded(frame.drop(columns=["price"])), frame["price"].to_numpy(dtype=np.float64)


REGRESSION = {
    "diabetes": (_diabetes, "scikit-learn bundled (load_diabetes)"),
    "friedman1": (_friedman1, "scikit-learn generator make_friedman1(10000, noise=1)"),
    "boston": (_boston, "Debian r-cran-mass: MASS::Boston"),
    "diamonds": (_diamonds, "Debian r-cran-ggplot2: ggplot2::diamonds"),
}


def regression_split(name: str, order: str):
    """``(X, y, X_test, y_test)``: one 75/25 split (``SPLIT_SEED``); training rows in the
    package's order (``"file"``) or shuffled (``"shuffled"``)."""
    from sklearn.model_selection import train_test_split

    X, y = REGRESSION[name][0]()
    train, test = train_test_split(np.arange(len(y)), test_size=TEST_FRACTION, random_state=SPLIT_SEED)
    if order == "file":
        train = np.sort(train)
    return (
        np.ascontiguousarray(X[train], dtype=np.float64),
        y[train],
        np.ascontiguousarray(X[test]),
        y[test],
    )
