"""The one validation path (svmstream.app.ingest) and the model configuration (svmstream.app.models.config)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from svmstream.app.errors import InvalidInput as BatchError
from svmstream.app.ingest.decode import decode_body
from svmstream.app.ingest.examples import parse_examples
from svmstream.app.ingest.features import conform, parse_features
from svmstream.app.ingest.labels import LabelCodec
from svmstream.app.models.config import ModelConfig, normalise_classes
from svmstream.app.settings import Settings


def test_dense_rows_parse_to_float64_matrix():
    rows = [[1, 2.5, -3], [0, 0, 1e-300]]
    X = parse_features(rows)
    assert isinstance(X, np.ndarray) and X.dtype == np.float64 and X.flags.c_contiguous
    np.testing.assert_array_equal(X, np.array(rows, dtype=np.float64))


def test_sparse_and_mixed_rows_equal_the_dense_matrix():
    dense = np.array([[0.0, 1.5, 0.0, -2.0], [3.0, 0.0, 0.0, 0.0], [0.5, 0.25, 1.0, 0.0]])
    rows = [{"3": -2.0, "1": 1.5}, {"0": 3}, [0.5, 0.25, 1.0, 0.0]]  # keys unsorted, one dense row
    X = parse_features(rows)
    assert sp.issparse(X) and X.has_sorted_indices
    np.testing.assert_array_equal(X.toarray()[:, :4], dense[:, : X.shape[1]] if X.shape[1] < 4 else dense)
    widened = conform(X, 6)  # small: comes back dense
    assert isinstance(widened, np.ndarray) and widened.shape == (3, 6) and widened.flags.c_contiguous
    np.testing.assert_array_equal(widened[:, :4], dense)
    np.testing.assert_array_equal(widened[:, 4:], 0.0)


def test_only_small_sparse_batches_are_densified():
    wide = parse_features([{"0": 1.0}, {"5": 2.0}], n_features=2000)
    assert sp.issparse(conform(wide, 2000)) and conform(wide, 2000).shape == (2, 2000)
    narrow = conform(parse_features([{"0": 1.0}, {"5": 2.0}]), 10)
    assert isinstance(narrow, np.ndarray) and narrow.shape == (2, 10) and narrow[1, 5] == 2.0


def test_declared_n_features_widens_sparse_and_checks_dense():
    X = parse_features([{"0": 1.0}], n_features=5)
    assert X.shape == (1, 5)
    with pytest.raises(BatchError, match=r"^X\[0\]: has 2 features, the request \(n_features\) expects 3"):
        parse_features([[1.0, 2.0]], n_features=3)


def test_numeric_labels_compare_numerically():
    codec = LabelCodec(normalise_classes([1.0, -1]))
    assert codec.classes == [-1, 1]
    np.testing.assert_array_equal(codec.encode([1, -1.0, 1.0, -1]), [1, 0, 1, 0])
    assert codec.decode(np.array([0, 1, 1])) == [-1, 1, 1]


def test_string_labels_are_sorted_and_encoded():
    codec = LabelCodec(normalise_classes(["spam", "ham"]))
    assert codec.classes == ["ham", "spam"]
    np.testing.assert_array_equal(codec.encode(["spam", "ham", "spam"]), [1, 0, 1])
    with pytest.raises(
        BatchError, match=r"^y\[0\]: unknown label 1; model classes are \[\"ham\", \"spam\"\]"
    ):
        codec.encode([1])


@pytest.mark.parametrize(
    "obj, message, field, index",
    [
        (
            {"X": [[1, 2], [3, float("nan")]], "y": [1, 1]},
            "X[1][1]: nan is not a finite number",
            "X[1][1]",
            1,
        ),
        (
            {"X": [[1, 2], [float("-inf"), 0]], "y": [1, 1]},
            "X[1][0]: -inf is not a finite number",
            "X[1][0]",
            1,
        ),
        (
            {"X": [{"0": 1}, {"4": float("inf")}], "y": [1, 1]},
            "X[1][4]: inf is not a finite number",
            "X[1][4]",
            1,
        ),
        ({"X": [[1, 2], [1, 2], [3]], "y": [1, 1, 1]}, "X[2]: has 1 features but X[0] has 2", "X[2]", 2),
        ({"X": [[1, 2], [1, "a"]], "y": [1, 1]}, "X[1][1]: expected a number, got 'a'", "X[1][1]", 1),
        ({"X": [[1, 2], [None, 1]], "y": [1, 1]}, "X[1][0]: expected a number, got null", "X[1][0]", 1),
        ({"X": [[1, 2], [True, 1]], "y": [1, 1]}, "X[1][0]: expected a number, got true", "X[1][0]", 1),
        (
            {"X": [{"0": 1}, {"-1": 2}], "y": [1, 1]},
            "X[1]: feature key '-1' is not a non-negative integer",
            "X[1]",
            1,
        ),
        ({"X": [{"0": 1}, {"x": 2}], "y": [1, 1]}, "X[1]: feature key 'x'", "X[1]", 1),
        ({"X": [{"0": 1}, {"1": "b"}], "y": [1, 1]}, "X[1][1]: expected a number, got 'b'", "X[1][1]", 1),
        (
            {"X": [{"0": 1.5}, {"1": False}], "y": [1, 1]},
            "X[1][1]: expected a number, got false",
            "X[1][1]",
            1,
        ),
        (
            {"X": [[1], 7], "y": [1, 1]},
            "X[1]: expected a list of numbers or an {index: value} object",
            "X[1]",
            1,
        ),
        ({"X": [], "y": []}, "X: empty batch", "X", None),
        ({"X": {"0": 1}, "y": [1]}, "X: expected a list of examples", "X", None),
        ({"X": [[1]], "y": [1, 1]}, "y: has 2 labels for 1 examples in X", "y", None),
        ({"X": [[1], [2]], "y": [1, 2]}, "y[1]: unknown label 2; model classes are [-1, 1]", "y[1]", 1),
        ({"X": [[1], [2]], "y": [1, "1"]}, "y[1]: unknown label '1'", "y[1]", 1),
        ({"X": [[1], [2]], "y": [1, None]}, "y[1]: unknown label null", "y[1]", 1),
        ({"X": [[1], [2]], "y": [1, True]}, "y[1]: unknown label true", "y[1]", 1),
        ({"X": [[1]], "y": 1}, "y: expected a list of labels", "y", None),
        ({"X": [[1]]}, "y: field required", "y", None),
        ({"y": [1]}, "X: field required", "X", None),
        ({"X": [[1]], "y": [1], "labels": [1]}, "body: unknown field 'labels'", "labels", None),
        ({"X": [[1]], "x": [[1]], "y": [1]}, "body: give the examples as 'X' or as 'x', not both", "x", None),
        (
            {"X": [[1]], "y": [1], "n_features": 0},
            "n_features: expected a positive integer",
            "n_features",
            None,
        ),
        (
            {"X": [{"9": 1}], "y": [1], "n_features": 3},
            "X[0]: feature index 9 is out of range: the request (n_features) expects 3 features",
            "X[0]",
            0,
        ),
    ],
)
def test_each_bad_batch_names_field_and_index(obj, message, field, index):
    with pytest.raises(BatchError) as info:
        parse_examples(obj, LabelCodec([-1, 1]))
    err = info.value
    assert err.message.startswith(message), err.message
    assert (err.field, err.index, err.status) == (field, index, 422)


def test_lowercase_x_is_accepted():
    batch = parse_examples({"x": [[1.0, 2.0]], "y": [-1]}, LabelCodec([-1, 1]))
    np.testing.assert_array_equal(batch.X, [[1.0, 2.0]])
    np.testing.assert_array_equal(batch.y, [0])


def test_conform_checks_the_model_dimension():
    with pytest.raises(BatchError, match=r"^X\[0\]: has 3 features, model 'm' expects 4"):
        conform(np.zeros((2, 3)), 4, model="m")
    X = sp.csr_matrix(np.array([[0, 0, 0, 0, 0], [0, 0, 0, 0, 1.0]]))
    with pytest.raises(
        BatchError,
        match=r"^X\[1\]: feature index 4 is out of range: model 'm' expects 4 features \(indices 0..3\)",
    ):
        conform(X, 4, model="m")
    with pytest.raises(BatchError, match=r"^n_features: the request declares 5 features, model 'm' has 4"):
        conform(np.zeros((1, 4)), 4, declared=5, model="m")


def test_decode_body_reads_nan_literals_and_rejects_garbage():
    obj = decode_body(b'{"X": [[NaN, Infinity, -Infinity, 1e999]]}')
    assert np.isnan(obj["X"][0][0]) and obj["X"][0][1:] == [float("inf"), float("-inf"), float("inf")]
    with pytest.raises(BatchError) as info:
        decode_body(b'{"X": [[1, 2]')
    assert info.value.status == 400 and info.value.message.startswith("body: invalid JSON")


def test_model_config_normalises_and_validates():
    cfg = ModelConfig.model_validate({"classes": [1.0, 0.0], "lambda": 0.01, "C": None})
    assert cfg.classes == [0, 1] and cfg.lambda_ == 0.01 and cfg.to_json()["lambda"] == 0.01
    assert ModelConfig().classes is None and ModelConfig().learns_classes
    assert ModelConfig.model_validate({"classes": [3, 1, 2]}).classes == [1, 2, 3]
    for bad in (
        {"classes": [1]},
        {"classes": [1, 2, 3], "max_classes": 2},
        {"classes": [1, 1.0]},
        {"classes": [1, "a"]},
        {"classes": [True, 0]},
        {"C": None, "lambda": None},
        {"budget": 0},
        {"gamma": float("inf")},
        {"bogus": 1},
    ):
        with pytest.raises(ValueError):
            ModelConfig.model_validate(bad)


def test_settings_read_the_svmstream_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SVMSTREAM_DEFAULT_BUDGET", "77")
    monkeypatch.setenv("SVMSTREAM_SNAPSHOT_DIR", str(tmp_path))
    monkeypatch.setenv("SVMSTREAM_DEFAULT_CLASSES", '["a", "b"]')
    monkeypatch.setenv("SVMSTREAM_DEFAULT_LAMBDA", "")
    s = Settings()
    assert s.default_budget == 77 and s.snapshot_dir == tmp_path and s.default_lambda is None
    assert s.model_defaults()["classes"] == ["a", "b"]
    assert s.max_body_bytes == 64 * 1024 * 1024 and s.snapshot_interval_s == 30 and s.keep_versions == 20
