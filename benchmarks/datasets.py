"""The one registry of the benchmarks' data sets: each set's files, its dimension and, for a set
shipped without a test file, its one split.

Every benchmark reads its sets through this module: :func:`load` for the arrays, :func:`path`
for a file it hands to a command or to the service (``SETS[name].train`` / ``.test`` for the
file names relative to ``$SVMSTREAM_DATA``), so no other module names a data file.  A set is
split one way everywhere: scikit-learn's ``train_test_split(test_size=f, random_state=SPLIT_SEED)`` of its rows
(``f`` = the set's ``test_fraction``; phishing's 70/30 split is the one ``bench_rehearsal`` and
``bench_settings`` measured on).  ``order="file"`` gives the training rows in the file's order (a
stream as the file holds it), ``order="shuffled"`` in the split's.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.common import data_file
from svmstream.app.jobs.datasets import load_dataset


@dataclass(frozen=True)
class DataSet:
    train: str
    test: str | None = None
    n_features: int | None = None
    test_fraction: float = 0.0
    """Sets without a test file: the share of the rows held out for testing."""


SETS: dict[str, DataSet] = {
    "ijcnn1": DataSet("ijcnn1.bz2", "ijcnn1.t.bz2", 22),
    "a9a": DataSet("a9a.bz2", "a9a.t.bz2", 123),
    "letter": DataSet("letter.scale.bz2", "letter.scale.t.bz2", 16),
    "pendigits": DataSet("pendigits.bz2", "pendigits.t.bz2", 16),
    "reuters": DataSet("reuters_lasvm.trn.bz2", "reuters_lasvm.tst.bz2", 8315),
    "sector": DataSet("sector.scale.bz2", "sector.t.scale.bz2", 55197),
    "phishing": DataSet("phishing.bz2", None, 68, test_fraction=0.3),
    "skin_nonskin": DataSet("skin_nonskin.bz2", None, 3, test_fraction=0.2),
}
SPLIT_SEED = 0


def path(name: str, part: str = "train") -> Path:
    """The file of a registered set with a test file (``part``: ``"train"`` or ``"test"``);
    exits with a clear message when it is missing.  A set without a test file has no test
    path: read it with :func:`load`, which splits it.

    Raises ``KeyError`` for an unknown set, ``ValueError`` for another part or a set without
    a test file asked for its training file (it would be read without its split)."""
    spec = SETS[name]
    if spec.test is None:
        raise ValueError(f"{name} has no test file: read it with datasets.load, which splits it")
    if part not in ("train", "test"):
        raise ValueError(f"part: 'train' or 'test', not {part!r}")
    return data_file(spec.train if part == "train" else spec.test)


def split(n: int, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """``(train rows, test rows)`` of the one split, both in the split's (shuffled) order."""
    from sklearn.model_selection import train_test_split

    train, test = train_test_split(np.arange(n), test_size=test_fraction, random_state=SPLIT_SEED)
    return train, test


def load(name: str, *, order: str = "file", dense: bool = False):
    """``(X, y, X_test, y_test)`` of a registered set: CSR float64 (dense float64 with ``dense``),
    the test part at the training part's dimension; ``order``: ``"file"`` or ``"shuffled"``
    (the training rows; a set with a test file is always in file order)."""
    if order not in ("file", "shuffled"):
        raise ValueError(f"order: 'file' or 'shuffled', not {order!r}")
    spec = SETS[name]
    X, y = load_dataset(data_file(spec.train), n_features=spec.n_features, fmt="libsvm")
    if spec.test is not None:
        Xt, yt = load_dataset(data_file(spec.test), n_features=X.shape[1], fmt="libsvm")
    else:
        train, test = split(X.shape[0], spec.test_fraction)
        if order == "file":
            train = np.sort(train)
        X, y, Xt, yt = X[train], y[train], X[test], y[test]
    if dense:
        X, Xt = np.ascontiguousarray(X.toarray()), np.ascontiguousarray(Xt.toarray())
    return X, y, Xt, yt


# ---------------------------------------------------------------------- sets shipped in packages
#: Sets shipped inside installable packages (no download at run time): scikit-learn's bundled
#: files, River's bundled files, and the R package mlbench as Debian packs it (``r-cran-mlbench``:
#: its ``.rda`` files, read with the ``rdata`` wheel; the ``.deb`` is fetched with ``apt-get
#: download`` and unpacked under :data:`CACHE` when R's copy is not installed).  Each is split once,
#: ``train_test_split(test_size=..., random_state=SPLIT_SEED)``; "file" order is the package's row
#: order.  Value: ``(loader, test_size)``, the loader giving ``(X dense float64, y)``.
CACHE = Path(os.environ.get("SVMSTREAM_BENCH_CACHE", Path.home() / ".cache" / "svmstream-bench"))
MLBENCH_DIRS = (
    Path("/usr/lib/R/site-library/mlbench/data"),
    CACHE / "mlbench/usr/lib/R/site-library/mlbench/data",
)


def _sklearn(name):
    def load_set():
        from sklearn import datasets as skd

        return getattr(skd, f"load_{name}")(return_X_y=True)

    return load_set


def _river(cls_name):
    def load_set():
        from river import datasets as rd

        rows = list(getattr(rd, cls_name)())
        keys = sorted(rows[0][0])
        X = np.array([[float(x[k]) for k in keys] for x, _ in rows])
        y = np.array([str(label) for _, label in rows])
        return X, y

    return load_set


def mlbench_file(name: str) -> Path:
    """The ``.rda`` file of mlbench set ``name`` (R's copy, or the Debian package unpacked in
    :data:`CACHE`, fetched once with ``apt-get download r-cran-mlbench``)."""
    for folder in MLBENCH_DIRS:
        if (folder / f"{name}.rda").exists():
            return folder / f"{name}.rda"
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", "r-cran-mlbench"], cwd=CACHE, check=True, capture_output=True)
    deb = sorted(CACHE.glob("r-cran-mlbench_*.deb"))[-1]
    subprocess.run(["dpkg-deb", "-x", str(deb), str(CACHE / "mlbench")], check=True)
    return MLBENCH_DIRS[1] / f"{name}.rda"


def _mlbench(name):
    def load_set():
        import warnings

        import rdata

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Unknown encoding. Assumed ASCII."
            frame = next(iter(rdata.read_rda(str(mlbench_file(name))).values()))
        label = frame.columns[-1]  # the class is the last column ("Class", or "classes")
        X = frame.drop(columns=label).apply(lambda c: c.astype(float)).to_numpy(dtype=np.float64)
        return X, frame[label].astype(str).to_numpy()

    return load_set


PACKAGE_SETS = {
    "breast_cancer": (_sklearn("breast_cancer"), 0.3),
    "digits": (_sklearn("digits"), 0.3),
    "dna": (_mlbench("DNA"), 1186),  # 2,000 training rows, as LIBSVM's dna split
    "satellite": (_mlbench("Satellite"), 0.3),
    "vehicle": (_mlbench("Vehicle"), 0.3),
    "segment": (_river("ImageSegments"), 0.3),
    "bananas": (_river("Bananas"), 0.3),
}


def load_any(name: str, *, order: str = "file"):
    """``(X, y, X_test, y_test)`` of a registered LIBSVM set (:func:`load`, CSR) or of a
    package set (:data:`PACKAGE_SETS`, dense float64); ``order`` as for :func:`load`."""
    if name in SETS:
        return load(name, order=order)
    if order not in ("file", "shuffled"):
        raise ValueError(f"order: 'file' or 'shuffled', not {order!r}")
    loader, test_size = PACKAGE_SETS[name]
    X, y = loader()
    from sklearn.model_selection import train_test_split

    train, test = train_test_split(np.arange(X.shape[0]), test_size=test_size, random_state=SPLIT_SEED)
    if order == "file":
        train = np.sort(train)
    return X[train], y[train], X[test], y[test]
