"""Data files of the batch jobs, ``svmstream train`` and ``svmstream replay``: the one
LIBSVM/CSV loader.

* :func:`sniff` guesses compression and format from a file's first bytes (uploads);
* :func:`detect_format` picks ``libsvm`` or ``csv`` for a path (name, then first line);
* :func:`load_dataset` loads a LIBSVM/svmlight file (through
  :func:`sklearn.datasets.load_svmlight_file`) or a CSV file (:func:`load_csv`), ``.bz2`` and
  ``.gz`` read directly;
* :func:`prepare_X` gives the solvers the matrix form they run fastest on.
"""

from __future__ import annotations

import bz2
import gzip
import io
import os
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

FORMATS = ("libsvm", "csv")
"""The data file formats."""

DENSE_MIN_DENSITY = 0.25
"""Sparse training data at least this dense (and small enough, :data:`DENSE_MAX_BYTES`) is
densified before the solver: the dense kernel paths are faster there (ijcnn1: 59% dense)."""
DENSE_MAX_BYTES = 2 * 1024**3


def _open_binary(path: str | os.PathLike):
    """Open a possibly compressed file (bzip2 / gzip detected by magic bytes)."""
    with open(path, "rb") as fh:
        magic = fh.read(3)
    if magic[:3] == b"BZh":
        return bz2.open(path, "rb")
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def sniff(head: bytes) -> tuple[str | None, str | None]:
    """Guess ``(compression, format)`` of a data file from its first bytes.

    Parameters
    ----------
    head : bytes
        The first bytes of the file (a few KB; compressed files need enough to decompress
        their first line).

    Returns
    -------
    compression : {"bz2", "gzip", None}
    format : {"libsvm", "csv", None}
        ``libsvm`` when the first data line has ``index:value`` tokens (or is a lone
        label), ``csv`` when it has commas; None when it is neither (or not text).
    """
    compression = "bz2" if head[:3] == b"BZh" else "gzip" if head[:2] == b"\x1f\x8b" else None
    text = head
    if compression == "bz2":
        try:
            text = bz2.BZ2Decompressor().decompress(head)
        except (OSError, EOFError, ValueError):
            return compression, None
    elif compression == "gzip":
        try:
            text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head)
        except Exception:  # noqa: BLE001 - any zlib error: not readable
            return compression, None
    try:
        decoded = text[:65536].decode("utf-8")
    except UnicodeDecodeError as exc:  # a multi-byte character cut at the end is fine
        if exc.start < len(text[:65536]) - 4:
            return compression, None
        decoded = text[: exc.start].decode("utf-8")
    for line in decoded.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "," in line:
            return compression, "csv"
        tokens = line.split()
        if all(":" in t for t in tokens[1:]) and _is_number(tokens[0]):
            return compression, "libsvm"
        return compression, None
    return compression, None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def detect_format(path: str | os.PathLike) -> str:
    """``"csv"`` or ``"libsvm"`` for a data file: by name (``.csv``, ``.csv.gz``,
    ``.csv.bz2``; ``.libsvm``, ``.svm``), else by its first line (:func:`sniff`), else
    ``"libsvm"``."""
    name = Path(path).name.lower()
    for suffix in (".bz2", ".gz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if name.endswith(".csv"):
        return "csv"
    if name.endswith((".libsvm", ".svm", ".svmlight")):
        return "libsvm"
    try:
        with open(path, "rb") as fh:
            head = fh.read(256 * 1024)
    except OSError:
        return "libsvm"
    return sniff(head)[1] or "libsvm"


def load_csv(path: str | os.PathLike, n_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read a CSV data file: label in the first column, then the features.

    Labels may be numbers or strings (``cat,0.5,1.2``).  A first line whose fields are not
    all numbers after the first is a header and skipped (a header must name at least one
    feature column with a non-number); lines starting with ``#`` are comments.
    ``.bz2``/``.gz`` files are decompressed.

    Parameters
    ----------
    path : path-like
    n_features : int, optional
        Expected number of feature columns (a test file must match its training file).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), float64, or of str when a label is not a number

    Raises
    ------
    ValueError
        On a ragged or non-numeric line, non-finite values, no rows, or a width that
        differs from ``n_features``.
    """
    with _open_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8")
        first = text.readline()
        while first and (not first.strip() or first.lstrip().startswith("#")):
            first = text.readline()
        if not first:
            raise ValueError(f"{Path(path).name}: no data rows")
        fields = [f.strip() for f in first.split(",")]
        header = len(fields) < 2 or not all(_is_number(f) for f in fields[1:])
        lines = [] if header else [first]
        if not header and not _is_number(fields[0]):
            return _load_csv_text_labels(path, _chain(lines, text), n_features, False)
        try:
            data = np.loadtxt(_chain(lines, text), delimiter=",", comments="#", dtype=np.float64, ndmin=2)
        except ValueError as exc:
            if "could not convert" not in str(exc):
                raise ValueError(f"{Path(path).name}: not a numeric CSV file: {exc}") from None
            data = None
    if data is None:  # a later label is not a number: read the labels as strings
        with _open_binary(path) as raw:
            return _load_csv_text_labels(path, io.TextIOWrapper(raw, encoding="utf-8"), n_features, header)
    if data.ndim == 2 and data.shape[1] < 2:
        raise ValueError(f"{Path(path).name}: a CSV row needs a label and at least one feature")
    return _checked(path, data[:, 1:], data[:, 0], n_features)


def _load_csv_text_labels(
    path, lines, n_features: int | None, skip_header: bool
) -> tuple[np.ndarray, np.ndarray]:
    """A CSV file whose labels are strings: labels kept as ``str``, features as float64."""
    labels: list[str] = []
    rows: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if skip_header:
            skip_header = False
            continue
        label, _, rest = stripped.partition(",")
        if not rest.strip():
            raise ValueError(f"{Path(path).name}: a CSV row needs a label and at least one feature")
        labels.append(label.strip())
        rows.append(rest)
    if not rows:
        raise ValueError(f"{Path(path).name}: no data rows")
    try:
        X = np.loadtxt(rows, delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"{Path(path).name}: not a numeric CSV file after the label column: {exc}") from None
    return _checked(path, X, np.array(labels), n_features)


def _checked(path, X: np.ndarray, y: np.ndarray, n_features: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The last checks of a CSV file's ``(X, y)``: rows, finite values, width."""
    data = X
    if data.shape[0] == 0:
        raise ValueError(f"{Path(path).name}: no data rows")
    if not np.isfinite(data).all():
        row = int(np.flatnonzero(~np.isfinite(data).all(axis=1))[0])
        raise ValueError(f"{Path(path).name}: row {row}: non-finite value")
    X, y = np.ascontiguousarray(data), np.ascontiguousarray(y)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{Path(path).name}: {X.shape[1]} feature columns, expected {n_features}")
    return X, y


def _chain(first: list[str], rest):
    yield from first
    yield from rest


def load_dataset(
    path: str | os.PathLike, n_features: int | None = None, fmt: str | None = None
) -> tuple[Any, np.ndarray]:
    """Load a LIBSVM/svmlight or CSV data file (``.bz2``/``.gz`` read directly).

    Parameters
    ----------
    path : path-like
    n_features : int, optional
        Width of the training data (pass it for a test file: LIBSVM test files may have a
        smaller largest index).
    fmt : {"libsvm", "csv"}, optional
        Default: :func:`detect_format`.

    Returns
    -------
    X : CSR matrix (LIBSVM) or ndarray (CSV) of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), float64

    Raises
    ------
    ValueError
        The file does not parse (the loader's message, prefixed with the file name).
    OSError
        The file cannot be read.
    """
    fmt = fmt or detect_format(path)
    if fmt == "csv":
        return load_csv(path, n_features)
    try:
        X, y = load_svmlight_file(str(path), n_features=n_features, dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"{Path(path).name}: not a valid LIBSVM file: {exc}") from None
    if X.shape[0] == 0:
        raise ValueError(f"{Path(path).name}: no data rows")
    return X.tocsr(), y


def prepare_X(X):
    """The training/test matrix in the form the solvers run fastest on: dense float64 for
    dense enough data (:data:`DENSE_MIN_DENSITY`), else CSR float64 with int32 indices."""
    if not sp.issparse(X):
        return np.ascontiguousarray(X, dtype=np.float64)
    n, d = X.shape
    if n * d and X.nnz >= DENSE_MIN_DENSITY * n * d and n * d * 8 <= DENSE_MAX_BYTES:
        return np.ascontiguousarray(X.toarray(), dtype=np.float64)
    X = sp.csr_matrix(X, dtype=np.float64)
    if X.indices.dtype != np.int32 and X.nnz < 2**31:
        X.indices = X.indices.astype(np.int32)
    return X
