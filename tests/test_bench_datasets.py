"""The benchmarks' one data-set registry (``benchmarks/datasets.py``): a set without a test file
is split one way, and no benchmark reads such a set's file on its own."""

from pathlib import Path

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.common import data_dir

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_the_split_is_disjoint_covering_and_fixed():
    train, test = datasets.split(1000, 0.3)
    assert train.size == 700 and test.size == 300
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(1000))
    again = datasets.split(1000, 0.3)
    assert np.array_equal(train, again[0]) and np.array_equal(test, again[1])
    assert not np.array_equal(train, np.sort(train))  # the permutation's order, not the file's


def test_only_the_registry_names_a_data_file():
    """Files, dimensions and splits are known in one place: no other benchmark module names a
    registered file (a set is read through ``datasets.load`` / ``datasets.path``)."""
    files = [f for spec in datasets.SETS.values() for f in (spec.train, spec.test) if f]
    readers = {
        path.name
        for path in BENCHMARKS.glob("*.py")
        if path.name != "datasets.py" and any(f'"{f}"' in path.read_text() for f in files)
    }
    assert not readers, readers


def test_path_refuses_a_set_that_needs_a_split():
    with pytest.raises(ValueError, match="no test file"):
        datasets.path("phishing")
    with pytest.raises(ValueError, match="part"):
        datasets.path("ijcnn1", "valid")


def test_no_benchmark_reads_a_set_that_needs_a_split_by_itself():
    """Each set without a test file is named by the registry only, so it cannot be split twice."""
    files = [spec.train for spec in datasets.SETS.values() if spec.test is None]
    assert files, datasets.SETS
    readers = {
        path.name
        for path in BENCHMARKS.glob("*.py")
        if path.name != "datasets.py" and any(f'"{f}"' in path.read_text() for f in files)
    }
    assert not readers, readers


@pytest.mark.skipif(not (data_dir() / "phishing.bz2").exists(), reason="needs $SVMSTREAM_DATA/phishing.bz2")
def test_phishing_has_one_70_30_split_in_two_orders():
    X, y, Xt, yt = datasets.load("phishing")
    Xs, ys, Xts, yts = datasets.load("phishing", order="shuffled")
    assert X.shape == (7738, 68) and Xt.shape == (3317, 68)
    assert (Xt != Xts).nnz == 0 and np.array_equal(yt, yts)  # the same test rows
    assert sorted(map(tuple, X.toarray())) == sorted(map(tuple, Xs.toarray()))  # the same training rows
    with pytest.raises(ValueError, match="order"):
        datasets.load("phishing", order="random")


def test_package_sets_split_once_in_two_orders():
    """scikit-learn's bundled sets (always installed): one split, the file order sorted."""
    X, y, Xt, yt = datasets.load_any("digits")
    Xs, ys, _, yts = datasets.load_any("digits", order="shuffled")
    assert X.shape == (1257, 64) and Xt.shape == (540, 64) and np.array_equal(yt, yts)
    assert np.array_equal(np.sort(ys), np.sort(y)) and not np.array_equal(ys, y)
    assert datasets.load_any("breast_cancer")[0].shape == (398, 30)
