"""The standard protocols through a real server and real clients: Open Inference Protocol v2
with NVIDIA's ``tritonclient[http]``, MLflow scoring with the payloads MLflow's own client
builds (``mlflow.utils.proto_json_utils.dump_input_data`` = pandas ``to_dict(orient="split")``,
and ``ScoringServerClient``).

Models learn raw data the way a user sends it (no hyperparameters, unscaled features, string
or integer labels): scikit-learn's breast-cancer set (labels ``"malignant"``/``"benign"``),
its digits (integer pixels 0..16, labels 0..9) and, when ``SVMSTREAM_DATA`` has it, ijcnn1.
Every answer is compared with ``POST /predict``'s for the same rows: equal labels, equal
decision values, equal probabilities (bit for bit: the same published view answers both).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.conftest import ServerProcess

tritonclient_http = pytest.importorskip(
    "tritonclient.http", reason="pip install 'tritonclient[http]' (test extra)"
)
pd = pytest.importorskip("pandas", reason="pandas builds MLflow's dataframe payloads (test extra)")
from tritonclient.utils import InferenceServerException  # noqa: E402


def _data_dir() -> Path | None:
    path = Path(
        os.environ.get("SVMSTREAM_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data")
    )
    return path if (path / "ijcnn1.bz2").exists() and (path / "ijcnn1.t.bz2").exists() else None


@pytest.fixture(scope="module")
def raw_sets():
    """Raw scikit-learn data: breast cancer (X float, string labels) and digits (X int, int labels)."""
    from sklearn.datasets import load_breast_cancer, load_digits

    bc = load_breast_cancer()
    digits = load_digits()
    return {
        "bc": (bc.data, np.asarray(bc.target_names)[bc.target].tolist(), [str(c) for c in bc.feature_names]),
        "digits": (digits.data.astype(np.int64), digits.target.tolist(), [f"px{j}" for j in range(64)]),
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory, raw_sets):
    """One real server for the module, with models learned from raw data (no hyperparameters)."""
    tmp = tmp_path_factory.mktemp("protocols")
    proc = ServerProcess(tmp / "snapshots", tmp / "server.log").wait_ready()
    try:
        with proc.client() as http:
            for name, (X, y, _) in raw_sets.items():
                assert http.put(f"/models/{name}", json={}).status_code == 201
                r = http.post("/learn", json={"model": name, "X": X.tolist(), "y": y})
                assert r.status_code == 200, r.text
                assert http.post(f"/models/{name}/flush").status_code == 200
            data = _data_dir()
            if data is not None:
                from sklearn.datasets import load_svmlight_file

                X, y = load_svmlight_file(str(data / "ijcnn1.bz2"), n_features=22)
                assert http.put("/models/ijcnn1", json={}).status_code == 201
                X = X[:10_000].toarray()
                for start in range(0, 10_000, 5_000):
                    body = {"model": "ijcnn1", "X": X[start : start + 5_000].tolist()}
                    body["y"] = y[start : start + 5_000].astype(int).tolist()
                    assert http.post("/learn", json=body).status_code == 200
                assert http.post("/models/ijcnn1/flush").status_code == 200
        yield proc
    finally:
        if proc.proc.poll() is None:
            proc.terminate()


@pytest.fixture(scope="module")
def http(server):
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def triton(server):
    client = tritonclient_http.InferenceServerClient(server.url.removeprefix("http://"))
    yield client
    client.close()


def predict(http, model: str, X: np.ndarray) -> dict:
    """``POST /predict`` with probabilities, the reference of every comparison."""
    r = http.post("/predict", json={"model": model, "X": np.asarray(X).tolist(), "proba": True})
    assert r.status_code == 200, r.text
    return r.json()


def model_state(http, model: str) -> tuple:
    info = http.get(f"/models/{model}").json()
    return info["version"], info["n_seen"], info["n_support_vectors"]


def decoded(values: np.ndarray) -> list:
    """Labels as JSON gives them: BYTES come back as bytes (binary) or str (JSON)."""
    return [
        v.decode() if isinstance(v, bytes) else v if isinstance(v, str) else v.item()
        for v in values.reshape(-1)
    ]


# ----------------------------------------------------------------------------- OIP: health, metadata


def test_health_and_metadata_read_through_tritonclient(triton):
    assert triton.is_server_live() and triton.is_server_ready()
    meta = triton.get_server_metadata()
    assert meta["name"] == "svmstream" and "binary_tensor_data" in meta["extensions"]
    assert triton.is_model_ready("bc") and triton.is_model_ready("digits")
    assert not triton.is_model_ready("default")  # created at start, has learned nothing
    assert not triton.is_model_ready("no-such-model")

    bc = triton.get_model_metadata("bc")
    assert bc["platform"] == "svmstream_bsgd"
    assert bc["inputs"] == [{"name": "input", "datatype": "FP64", "shape": [-1, 30]}]
    outputs = {o["name"]: (o["datatype"], o["shape"]) for o in bc["outputs"]}
    assert outputs == {
        "label": ("BYTES", [-1]),  # string labels
        "decision": ("FP64", [-1]),  # binary: one value per row
        "proba": ("FP64", [-1, 2]),
        "classes": ("BYTES", [2]),
    }
    digits = {o["name"]: (o["datatype"], o["shape"]) for o in triton.get_model_metadata("digits")["outputs"]}
    assert digits["label"] == ("INT64", [-1]) and digits["decision"] == ("FP64", [-1, 10])
    with pytest.raises(InferenceServerException) as err:
        triton.get_model_metadata("no-such-model")
    assert err.value.status() == "404" and "no-such-model" in err.value.message()


def test_model_ready_and_metadata_by_version(http):
    version = http.get("/models/bc").json()["version"]
    assert http.get(f"/v2/models/bc/versions/{version}").json()["versions"] == [str(version)]
    assert http.get(f"/v2/models/bc/versions/{version}/ready").json() == {"name": "bc", "ready": True}
    r = http.get(f"/v2/models/bc/versions/{version + 1}")
    assert r.status_code == 404 and r.json().keys() == {"error"} and "in its history" in r.json()["error"]
    r = http.get("/v2/models/default/ready")
    assert r.status_code == 400 and "has not learned" in r.json()["error"]


# ----------------------------------------------------------------------------- OIP: infer


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("datatype", ["FP64", "FP32"])
def test_tritonclient_infer_equals_predict(http, triton, raw_sets, binary, datatype):
    X = raw_sets["bc"][0][::7]  # 82 raw rows
    dtype = np.float64 if datatype == "FP64" else np.float32
    inp = tritonclient_http.InferInput("input", list(X.shape), datatype)
    inp.set_data_from_numpy(X.astype(dtype), binary_data=binary)
    outputs = [
        tritonclient_http.InferRequestedOutput(n, binary_data=binary) for n in ("label", "decision", "proba")
    ]
    result = triton.infer("bc", [inp], outputs=outputs, request_id="req-7")
    # an FP32 tensor holds float32 values: /predict gets the same values widened
    ref = predict(http, "bc", X.astype(dtype).astype(np.float64))
    assert result.get_response()["id"] == "req-7"
    assert result.get_response()["model_version"] == str(ref["version"])
    assert decoded(result.as_numpy("label")) == ref["labels"]
    assert set(ref["labels"]) == {"malignant", "benign"}
    assert np.array_equal(result.as_numpy("decision"), np.asarray(ref["decision"]))
    assert np.array_equal(result.as_numpy("proba"), np.asarray(ref["proba"]))
    assert [o["name"] for o in result.get_response()["outputs"]] == ["label", "decision", "proba"]


def test_tritonclient_defaults_give_every_output(http, triton, raw_sets):
    """No outputs named: tritonclient asks for binary outputs; every output comes back."""
    X = raw_sets["digits"][0][:200]
    inp = tritonclient_http.InferInput("pixels", list(X.shape), "INT64")  # integer features, any input name
    inp.set_data_from_numpy(X)
    result = triton.infer("digits", [inp])
    ref = predict(http, "digits", X)
    assert [o["name"] for o in result.get_response()["outputs"]] == ["label", "decision", "proba", "classes"]
    assert result.as_numpy("label").dtype == np.int64
    assert result.as_numpy("label").tolist() == ref["labels"]
    assert result.as_numpy("decision").shape == (200, 10)
    assert np.array_equal(result.as_numpy("decision"), np.asarray(ref["decision"]))
    assert np.array_equal(result.as_numpy("proba"), np.asarray(ref["proba"]))
    assert result.as_numpy("classes").tolist() == ref["classes"] == list(range(10))
    assert np.mean(np.asarray(ref["labels"]) == np.asarray(raw_sets["digits"][1][:200])) > 0.8


def test_compressed_request_equals_plain(http, triton, raw_sets):
    X = raw_sets["bc"][0][:40]
    inp = tritonclient_http.InferInput("input", list(X.shape), "FP64")
    inp.set_data_from_numpy(X)
    out = [tritonclient_http.InferRequestedOutput("decision")]
    plain = triton.infer("bc", [inp], outputs=out).as_numpy("decision")
    for algorithm in ("gzip", "deflate"):
        packed = triton.infer("bc", [inp], outputs=out, request_compression_algorithm=algorithm)
        assert np.array_equal(packed.as_numpy("decision"), plain)


def test_json_request_outputs_by_name_nested_or_flat(http, raw_sets):
    X = raw_sets["bc"][0][:5]
    ref = predict(http, "bc", X)
    base = {"id": "abc", "outputs": [{"name": "proba"}, {"name": "label"}]}
    for data in (X.tolist(), X.reshape(-1).tolist()):
        body = {**base, "inputs": [{"name": "x", "shape": [5, 30], "datatype": "FP64", "data": data}]}
        r = http.post("/v2/models/bc/infer", json=body)
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["id"] == "abc" and answer["model_name"] == "bc"
        assert [o["name"] for o in answer["outputs"]] == ["proba", "label"]
        proba, label = answer["outputs"]
        assert proba["shape"] == [5, 2] and proba["data"] == np.asarray(ref["proba"]).reshape(-1).tolist()
        assert label["datatype"] == "BYTES" and label["data"] == ref["labels"]
    # the versioned path answers with the current version only
    version = ref["version"]
    body = {"inputs": [{"name": "x", "shape": [5, 30], "datatype": "FP64", "data": X.tolist()}]}
    assert http.post(f"/v2/models/bc/versions/{version}/infer", json=body).status_code == 200
    r = http.post(f"/v2/models/bc/versions/{version + 5}/infer", json=body)
    assert r.status_code == 404 and r.json().keys() == {"error"}


def _tensor(**changes) -> dict:
    tensor = {"name": "input", "shape": [2, 30], "datatype": "FP64", "data": [0.5] * 60}
    tensor.update(changes)
    return {"inputs": [tensor]}


BAD_TENSORS = {
    "one dimension": (_tensor(shape=[60]), "inputs[0].shape: [60] has 1 dimension"),
    "three dimensions": (_tensor(shape=[2, 30, 1]), "inputs[0].shape: [2, 30, 1] has 3 dimensions"),
    "no rows": (_tensor(shape=[0, 30], data=[]), "inputs[0].shape: [0, 30]: need n >= 1"),
    "wrong width": (_tensor(shape=[3, 20]), "inputs[0].shape: rows of 20 features; model 'bc' expects 30"),
    "BYTES": (
        _tensor(datatype="BYTES", data=["a"] * 60),
        "inputs[0].shape: [2, 30]: a BYTES input of named fields has shape [n] or [n, 1]",
    ),
    "BOOL": (_tensor(datatype="BOOL", data=[True] * 60), "inputs[0].datatype: BOOL is not supported"),
    "unknown datatype": (_tensor(datatype="FP128"), "inputs[0].datatype: unknown datatype 'FP128'"),
    "too short": (_tensor(data=[0.5] * 59), "inputs[0].data: has 59 values; shape [2, 30] needs 60"),
    "too large": (
        _tensor(shape=[100_000, 30]),
        "inputs[0].data: has 60 values; shape [100000, 30] needs 3000000",
    ),
    "nested mismatch": (_tensor(data=[[0.5] * 20] * 3), "inputs[0].data: nested data has shape [3, 20]"),
    "ragged": (_tensor(data=[[0.5] * 30, [0.5] * 29]), "inputs[0].data: nested lists of unequal lengths"),
    "string value": (
        _tensor(data=[0.5] * 59 + ["7"]),
        "inputs[0].data[59]: expected a number, got '7' (row 1, column 29)",
    ),
    "boolean value": (
        _tensor(data=[0.5, True] + [0.5] * 58),
        "inputs[0].data[1]: expected a number, got true",
    ),
    "null value": (_tensor(data=[None] + [0.5] * 59), "inputs[0].data[0]: expected a number, got null"),
    "fraction in INT32": (
        _tensor(datatype="INT32", data=[1] * 59 + [1.5]),
        "inputs[0].data[59]: INT32 data must be integers, got 1.5",
    ),
    "INT8 out of range": (
        _tensor(datatype="INT8", data=[300] + [1] * 59),
        "inputs[0].data[0]: 300 is out of the range of INT8",
    ),
    "FP32 overflow": (
        _tensor(datatype="FP32", data=[1e300] + [1.0] * 59),
        "inputs[0].data[0]: 1e+300 overflows FP32",
    ),
    "two inputs": ({"inputs": _tensor()["inputs"] * 2}, "inputs: a model has one input tensor"),
    "no inputs": ({"inputs": []}, "inputs: a model has one input tensor"),
    "missing data": (
        {"inputs": [{"name": "input", "shape": [2, 30], "datatype": "FP64"}]},
        "inputs[0].data: field required",
    ),
    "unknown output": (
        {**_tensor(), "outputs": [{"name": "score"}]},
        "outputs[0].name: 'score' is not an output of model 'bc'",
    ),
    "classification": (
        {**_tensor(), "outputs": [{"name": "label", "parameters": {"classification": 2}}]},
        "outputs[0].parameters.classification: the classification extension is not served",
    ),
    "id not a string": ({**_tensor(), "id": 7}, "id: expected a string, got 7"),
    "unknown field": ({**_tensor(), "input": []}, "input: unknown field"),
    "not an object": ([1, 2], "body: expected a JSON object"),
}


@pytest.mark.parametrize("case", list(BAD_TENSORS), ids=list(BAD_TENSORS))
def test_bad_tensor_is_400_naming_the_problem(http, case):
    body, message = BAD_TENSORS[case]
    before = model_state(http, "bc")
    r = http.post("/v2/models/bc/infer", json=body)
    assert r.status_code == 400, r.text
    assert r.json().keys() == {"error"}
    assert r.json()["error"].startswith(message), r.json()["error"]
    assert model_state(http, "bc") == before


RAW_BAD = {
    "NaN literal": (
        b'{"inputs": [{"name": "x", "shape": [1, 30], "datatype": "FP64", "data": [NaN'
        + b", 1" * 29
        + b"]}]}",
        None,
        "inputs[0].data[0]: nan is not a finite number (row 0, column 0)",
    ),
    "Infinity literal": (
        b'{"inputs": [{"name": "x", "shape": [1, 30], "datatype": "FP64", "data": [1'
        + b", 1" * 28
        + b", -Infinity]}]}",
        None,
        "inputs[0].data[29]: -inf is not a finite number (row 0, column 29)",
    ),
    "not JSON": (b"{inputs", None, "body: invalid JSON"),
    "binary size mismatch": (
        orjson.dumps(
            {
                "inputs": [
                    {
                        "name": "x",
                        "shape": [1, 30],
                        "datatype": "FP64",
                        "parameters": {"binary_data_size": 232},
                    }
                ]
            }
        ),
        np.ones(29).tobytes(),
        "inputs[0].parameters.binary_data_size: is 232 bytes; shape [1, 30] of FP64 needs 240",
    ),
    "binary NaN": (
        orjson.dumps(
            {
                "inputs": [
                    {
                        "name": "x",
                        "shape": [1, 30],
                        "datatype": "FP32",
                        "parameters": {"binary_data_size": 120},
                    }
                ]
            }
        ),
        np.r_[np.ones(29), np.nan].astype("<f4").tobytes(),
        "inputs[0].data[29]: nan is not a finite number",
    ),
    "bytes after the tensor": (
        orjson.dumps(
            {
                "inputs": [
                    {
                        "name": "x",
                        "shape": [1, 30],
                        "datatype": "FP64",
                        "parameters": {"binary_data_size": 240},
                    }
                ]
            }
        ),
        np.ones(31).tobytes(),
        "body: 8 bytes after the binary input tensor",
    ),
    "data and binary": (
        orjson.dumps(
            {
                "inputs": [
                    {
                        "name": "x",
                        "shape": [1, 30],
                        "datatype": "FP64",
                        "data": [1.0] * 30,
                        "parameters": {"binary_data_size": 240},
                    }
                ]
            }
        ),
        np.ones(30).tobytes(),
        "inputs[0].data: give 'data' or the parameter binary_data_size, not both",
    ),
}


@pytest.mark.parametrize("case", list(RAW_BAD), ids=list(RAW_BAD))
def test_bad_raw_body_is_400(http, case):
    head, binary, message = RAW_BAD[case]
    headers = {}
    if binary is not None:
        headers["Inference-Header-Content-Length"] = str(len(head))
    before = model_state(http, "bc")
    r = http.post("/v2/models/bc/infer", content=head + (binary or b""), headers=headers)
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith(message), r.json()["error"]
    assert model_state(http, "bc") == before


def test_header_length_outside_the_body_and_bad_content_types(http):
    body = orjson.dumps(_tensor())
    r = http.post(
        "/v2/models/bc/infer", content=body, headers={"Inference-Header-Content-Length": str(len(body) + 1)}
    )
    assert r.status_code == 400 and r.json()["error"].startswith("Inference-Header-Content-Length:")
    for ctype in ("text/plain", "application/x-www-form-urlencoded"):
        r = http.post("/v2/models/bc/infer", content=body, headers={"content-type": ctype})
        assert r.status_code == 415 and r.json()["error"].startswith("content-type:")
    r = http.post("/v2/models/bc/infer", content=body, headers={"content-encoding": "br"})
    assert r.status_code == 415 and r.json()["error"].startswith("content-encoding:")
    r = http.post("/v2/models/bc/infer", content=b"\x1f\x8b not gzip", headers={"content-encoding": "gzip"})
    assert r.status_code == 400 and "gzip" in r.json()["error"]


def test_tritonclient_sees_the_errors(triton, http):
    wrong = tritonclient_http.InferInput("input", [1, 4], "FP64")
    wrong.set_data_from_numpy(np.ones((1, 4)))
    with pytest.raises(InferenceServerException) as err:
        triton.infer("bc", [wrong])
    assert err.value.status() == "400" and "expects 30" in err.value.message()
    with pytest.raises(InferenceServerException) as err:
        triton.infer("no-such-model", [wrong])
    assert err.value.status() == "404"
    with pytest.raises(InferenceServerException) as err:
        triton.infer("default", [wrong])  # exists, has learned nothing
    assert err.value.status() == "400" and "has not learned" in err.value.message()


@pytest.mark.skipif(
    _data_dir() is None, reason="ijcnn1 not found (set SVMSTREAM_DATA to the LIBSVM data folder)"
)
def test_ijcnn1_1000_test_rows_through_tritonclient_equal_predict(http, triton):
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(_data_dir() / "ijcnn1.t.bz2"), n_features=22)
    X = X[:1000].toarray()
    ref = predict(http, "ijcnn1", X)
    for binary in (True, False):
        inp = tritonclient_http.InferInput("input", [1000, 22], "FP64")
        inp.set_data_from_numpy(X, binary_data=binary)
        outs = [tritonclient_http.InferRequestedOutput(n, binary_data=binary) for n in ("label", "decision")]
        result = triton.infer("ijcnn1", [inp], outputs=outs)
        assert result.as_numpy("label").tolist() == ref["labels"]
        assert np.array_equal(result.as_numpy("decision"), np.asarray(ref["decision"]))
    assert np.mean(np.asarray(ref["labels"]) == y[:1000]) > 0.9  # a model worth serving


# ----------------------------------------------------------------------------- MLflow


def mlflow_payloads(X: np.ndarray, columns: list[str]) -> dict[str, dict]:
    """Each payload form of MLflow's scoring protocol, built the way MLflow builds it."""
    df = pd.DataFrame(X, columns=columns)
    return {
        # mlflow.utils.proto_json_utils.dump_input_data(df): {"dataframe_split": df.to_dict(orient="split")}
        "dataframe_split": {"dataframe_split": df.to_dict(orient="split")},
        "dataframe_records": {"dataframe_records": df.to_dict(orient="records")},
        # dump_input_data(ndarray) / (ndarray, inputs_key="instances")
        "inputs": {"inputs": X.tolist()},
        "instances": {"instances": X.tolist()},
        "instances records": {"instances": df.to_dict(orient="records")},
        "inputs columns": {"inputs": df.to_dict(orient="list")},
        "inputs named tensor": {"inputs": {"x": X.tolist()}},
    }


@pytest.mark.parametrize("model", ["bc", "digits"])
def test_invocations_each_payload_form_equals_predict(http, raw_sets, model):
    X, _, columns = raw_sets[model]
    X = X[::9]
    ref = predict(http, model, X)
    for form, payload in mlflow_payloads(X, columns).items():
        r = http.post(
            "/invocations",
            content=orjson.dumps(payload | {"params": {"model": model}}),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 200, (form, r.text)
        assert r.json() == {"predictions": ref["labels"]}, form
    for output, key in (("decision", "decision"), ("proba", "proba")):
        payload = mlflow_payloads(X, columns)["dataframe_split"] | {
            "params": {"model": model, "output": output}
        }
        answer = http.post("/invocations", json=payload).json()
        assert answer["classes"] == ref["classes"]
        assert np.array_equal(np.asarray(answer["predictions"]), np.asarray(ref[key]))


def test_invocations_default_model_and_mlflow_client(server, http):
    """``params.model`` omitted: the default model (``SVMSTREAM_DEFAULT_MODEL``), which has learned
    nothing yet (409 in MLflow's shape); MLflow's own client scores a named model."""
    r = http.post("/invocations", json={"inputs": [[1.0, 2.0]]})
    assert r.status_code == 409 and r.json()["error_code"] == "RESOURCE_CONFLICT"
    assert "'default' has not learned" in r.json()["message"]


def test_mlflow_scoring_server_client(server, http, raw_sets):
    scoring = pytest.importorskip("mlflow.pyfunc.scoring_server.client", reason="mlflow-skinny (test extra)")
    X, _, columns = raw_sets["bc"]
    X = X[:50]
    client = scoring.ScoringServerClient("127.0.0.1", server.port)
    client.wait_server_ready(timeout=10)  # GET /ping
    answer = client.invoke(pd.DataFrame(X, columns=columns), params={"model": "bc"})
    assert list(answer.get_predictions(predictions_format="ndarray")) == predict(http, "bc", X)["labels"]


BAD_PAYLOADS = {
    "two forms": ({"inputs": [[1.0]], "instances": [[1.0]]}, "body: expected exactly one of"),
    "no form": ({"params": {"model": "bc"}}, "body: expected exactly one of"),
    "unknown field": ({"inputs": [[1.0]], "data": 1}, "data: unknown field"),
    "unknown param": ({"inputs": [[1.0]], "params": {"modell": "bc"}}, "params.modell: unknown parameter"),
    "bad output": (
        {"inputs": [[1.0]], "params": {"model": "bc", "output": "score"}},
        "params.output: expected one of",
    ),
    "wrong width": (
        {"inputs": [[1.0, 2.0]], "params": {"model": "bc"}},
        "inputs[0]: rows of 2 features; model 'bc' expects 30",
    ),
    "string cell": (
        {"dataframe_split": {"columns": ["a", "b"], "data": [[1.0, "x"]]}},
        "dataframe_split.data[0][1]: expected a number, got 'x'",
    ),
    "columns mismatch": (
        {"dataframe_split": {"columns": ["a"], "data": [[1.0, 2.0]]}},
        "dataframe_split.data[0]: has 2 values but 'columns' names 1",
    ),
    "null in a record": (
        {"dataframe_records": [{"a": 1.0, "b": None}]},
        'dataframe_records[0]["b"]: expected a number, got null',
    ),
    "missing column": (
        {"dataframe_records": [{"a": 1.0, "b": 2.0}, {"a": 1.0}]},
        "dataframe_records[1]: missing column 'b'",
    ),
    "extra column": (
        {"dataframe_records": [{"a": 1.0}, {"a": 1.0, "c": 2.0}]},
        'dataframe_records[1]["c"]: a column the first record does not have',
    ),
    "boolean": ({"instances": [[1.0, True]]}, "instances[0][1]: expected a number, got true"),
    "ragged": ({"instances": [[1.0, 2.0], [1.0]]}, "instances[1]: has 1 values, the first row has 2"),
    "flat list": ({"inputs": [1.0, 2.0]}, "inputs[0]: expected a row (a list of numbers), got 1.0"),
    "unequal columns": (
        {"inputs": {"a": [1.0, 2.0], "b": [1.0]}},
        'inputs["b"]: has 1 values, inputs["a"] has 2',
    ),
    "no rows": ({"instances": []}, "instances: no rows"),
    "not an object": ([[1.0]], "body: expected a JSON object"),
}


@pytest.mark.parametrize("case", list(BAD_PAYLOADS), ids=list(BAD_PAYLOADS))
def test_bad_payload_is_400_in_mlflow_shape(http, case):
    payload, message = BAD_PAYLOADS[case]
    if isinstance(payload, dict) and "params" not in payload:
        payload = payload | {"params": {"model": "bc"}}
    before = model_state(http, "bc")
    r = http.post("/invocations", json=payload)
    assert r.status_code == 400, r.text
    assert r.json().keys() == {"error_code", "message"} and r.json()["error_code"] == "BAD_REQUEST"
    assert r.json()["message"].startswith(message), r.json()["message"]
    assert model_state(http, "bc") == before


def test_invocations_nan_unknown_model_and_csv(http):
    r = http.post(
        "/invocations", content=b'{"inputs": [[1.0, NaN]]}', headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["message"].startswith("inputs[0][1]: nan is not a finite number")
    r = http.post("/invocations", json={"inputs": [[1.0]], "params": {"model": "nope"}})
    assert r.status_code == 404 and r.json() == {
        "error_code": "RESOURCE_DOES_NOT_EXIST",
        "message": "model 'nope' not found",
    }
    r = http.post("/invocations", content=b"a,b\n1,2\n", headers={"content-type": "text/csv"})
    assert r.status_code == 415 and r.json()["message"].startswith("content-type: 'text/csv'")
    body = gzip.compress(orjson.dumps({"inputs": [[1.0] * 30], "params": {"model": "bc"}}))
    r = http.post(
        "/invocations", content=body, headers={"content-type": "application/json", "content-encoding": "gzip"}
    )
    assert r.status_code == 200 and len(r.json()["predictions"]) == 1


def test_an_empty_record_is_a_400_naming_it(http):
    r = http.post("/invocations", json={"dataframe_records": [{}]})
    assert r.status_code == 400 and "dataframe_records[0]" in r.json()["message"], r.text
