"""``svmstream train`` run locally, and the job helpers it shares with the worker processes
(data loading and format detection, parameter validation, path checks, progress display).

The server side (``--server``) is tested in ``tests/test_jobs.py``.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import os

import numpy as np
import pytest
import scipy.sparse as sp

from svmstream.app.cli.main import add_train_parser
from svmstream.app.cli.train import ProgressDisplay, TrainError, collect_params, default_model_name
from svmstream.app.jobs.datasets import detect_format, load_csv, load_dataset, prepare_X, sniff
from svmstream.app.jobs.uploads import JobError, UploadStore, resolve_data_ref
from svmstream.app.jobs.worker import run_training
from svmstream.app.models.factory import make_job_estimator
from tests.conftest import (
    run_cli,
    two_moons_like,
    write_libsvm,
)


def _csv(X, y, header=True) -> str:
    head = "y," + ",".join(f"x{j}" for j in range(X.shape[1])) + "\n" if header else ""
    return head + "".join(f"{lab}," + ",".join(repr(float(v)) for v in row) + "\n" for row, lab in zip(X, y))


def test_sniff_detects_compression_and_format():
    libsvm = b"-1 1:0.5 3:2\n1 2:1\n"
    csv = b"label,a,b\n1,0.5,2\n"
    assert sniff(libsvm) == (None, "libsvm")
    assert sniff(csv) == (None, "csv")
    assert sniff(bz2.compress(libsvm)) == ("bz2", "libsvm")
    assert sniff(gzip.compress(csv)) == ("gzip", "csv")
    assert sniff(b"# comment\n\n1\n") == (None, "libsvm")  # a label-only row (all features zero)
    assert sniff(b"hello world\n")[1] is None
    assert sniff(bytes(range(256)) * 4)[1] is None
    assert sniff(b"BZh91AY&SY garbage")[1] is None


def test_load_csv_and_libsvm(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    y = rng.integers(0, 3, size=20)
    path = tmp_path / "d.csv.gz"
    path.write_bytes(gzip.compress(_csv(X, y).encode()))
    Xr, yr = load_dataset(path)  # header skipped, gzip by magic, csv by name
    np.testing.assert_array_equal(Xr, X)
    np.testing.assert_array_equal(yr, y)
    nohead = tmp_path / "noheader"
    nohead.write_text(_csv(X, y, header=False))
    assert detect_format(nohead) == "csv"
    np.testing.assert_array_equal(load_dataset(nohead)[0], X)
    with pytest.raises(ValueError, match="3 feature columns, expected 4"):
        load_csv(nohead, n_features=4)
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n1,2\n")
    with pytest.raises(ValueError, match="bad.csv"):
        load_csv(bad)
    nan = tmp_path / "nan.csv"
    nan.write_text("1,2,3\n0,nan,1\n")
    with pytest.raises(ValueError, match="row 1: non-finite"):
        load_csv(nan)
    # a LIBSVM test file with a smaller largest index loads at the training width
    test = tmp_path / "t.libsvm"
    test.write_text("1 1:0.5\n-1 2:1\n")
    Xt, yt = load_dataset(test, n_features=5)
    assert Xt.shape == (2, 5) and sp.issparse(Xt) and list(yt) == [1, -1]
    broken = tmp_path / "broken.libsvm"
    broken.write_text("1 1:0.5\n-1 2:zz\n")
    with pytest.raises(ValueError, match="broken.libsvm: not a valid LIBSVM file"):
        load_dataset(broken)


def test_prepare_X_densifies_dense_enough_data():
    dense = sp.random(50, 10, density=0.5, format="csr", random_state=0)
    sparse = sp.random(50, 1000, density=0.01, format="csr", random_state=0)
    out = prepare_X(dense)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    np.testing.assert_array_equal(out, dense.toarray())
    out = prepare_X(sparse)
    assert sp.issparse(out) and out.indices.dtype == np.int32 and (out != sparse).nnz == 0


def test_resolve_data_ref_confines_paths_to_the_data_dir(tmp_path):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "a.csv").write_text("1,2\n")
    (tmp_path / "secret").write_text("1 1:1\n")
    os.symlink(tmp_path / "secret", data / "link")
    uploads = UploadStore(tmp_path / "uploads")
    assert resolve_data_ref("sub/a.csv", "data", data, uploads) == ((data / "sub" / "a.csv").resolve(), "csv")
    assert (
        resolve_data_ref(str(data / "sub" / "a.csv"), "data", data, uploads)[0]
        == (data / "sub/a.csv").resolve()
    )
    cases = {
        "../secret": 403,
        "sub/../../secret": 403,
        str(tmp_path / "secret"): 403,
        "link": 403,
        "missing": 404,
        "": 422,
        "a\x00b": 422,
        "up-" + "f" * 20: 404,
        "up-xyz": 404,
    }
    for ref, status in cases.items():
        with pytest.raises(JobError) as err:
            resolve_data_ref(ref, "test", data, uploads)
        assert err.value.status == status and err.value.field in ("test", "upload"), (ref, err.value.message)
    with pytest.raises(JobError) as err:
        resolve_data_ref("sub/a.csv", "data", None, uploads)  # no data dir: only uploads
    assert err.value.status == 403 and "POST /uploads" in err.value.message
    # an upload is found by id, its format from its stored name
    uid = uploads.new_id()
    temp = uploads.temp_path(uid)
    temp.write_bytes(bz2.compress(b"1 1:0.5\n"))
    info = uploads.finish(uid, temp)
    assert (info.format, info.compression, info.path.name) == ("libsvm", "bz2", f"{uid}.libsvm.bz2")
    assert resolve_data_ref(uid, "data", None, uploads) == (info.path, "libsvm")


def test_make_job_estimator_validates_parameters():
    est = make_job_estimator("dcsvm", {"C": 32, "gamma": 2}, 2, default_n_jobs=1)
    assert (est.C, est.gamma, est.early_level, est.n_jobs) == (32, 2, 2, 1)
    assert make_job_estimator("avsf", {"C": 0.5}).selection == "avsf"
    assert make_job_estimator("liblinear-cd", {}).selection == "uniform"
    for algorithm, params, early, match in [
        ("dcsvm", {"bogus": 1}, None, "unknown parameter"),
        ("dcsvm", {"C": 0}, None, "C must be"),
        ("dcsvm", {"gamma": [1]}, None, "must be a number"),
        ("dcsvm", {}, 9, "early_level"),
        ("avsf", {"selection": "uniform"}, None, "set by the algorithm"),
        ("avsf", {}, 2, "dcsvm only"),
        ("svm", {}, None, "unknown algorithm"),
    ]:
        with pytest.raises(ValueError, match=match):
            make_job_estimator(algorithm, params, early)


@pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning"
)  # a linear model of non-linear data
@pytest.mark.parametrize(
    "algorithm,params",
    [
        ("dcsvm", {"C": 10, "gamma": 1.0, "n_levels": 2, "random_state": 0, "n_jobs": 1}),
        ("liblinear-cd", {"C": 1.0, "random_state": 0}),
    ],
)
def test_run_training_equals_a_direct_fit(tmp_path, algorithm, params):
    from svmstream.solvers.exact._classes import DCSVMClassifier
    from svmstream.solvers.linear._classes import LinearDualCDClassifier

    X, y = two_moons_like(600, seed=5)
    Xt, yt = two_moons_like(300, seed=6)
    train = write_libsvm(tmp_path / "tr.bz2", X, y)
    test = write_libsvm(tmp_path / "te", Xt, yt)
    task = {"algorithm": algorithm, "data": str(train), "test": str(test), "params": params}
    reports, stages = [], []
    est, res = run_training(task, reports.append, None, stages.append, label_indices=True)
    assert stages == ["loading", "training", "testing"]
    assert reports and all("stage" in r and "objective" in r for r in reports)
    ref_cls = DCSVMClassifier if algorithm == "dcsvm" else LinearDualCDClassifier
    extra = {} if algorithm == "dcsvm" else {"selection": "uniform"}
    Xr = load_dataset(train)[0].toarray()  # the file's values (6 significant digits)
    ref = ref_cls(**params, **extra).fit(Xr, (y > 0).astype(int))  # class indices, as the service trains
    Xtr = load_dataset(test, n_features=8)[0].toarray()
    np.testing.assert_allclose(est.decision_function(Xtr), ref.decision_function(Xtr), rtol=1e-12, atol=1e-12)
    correct = int(np.sum(np.where(ref.decision_function(Xtr) > 0, 1, -1) == yt))
    assert (res["test_correct"], res["n_test"], res["n_train"], res["n_features"]) == (correct, 300, 600, 8)
    assert res["test_accuracy"] == correct / 300 and res["classes"] == [-1, 1]
    assert res["dual_objective"] == pytest.approx(list(ref.dual_objective_), rel=1e-12)
    # with the file's labels (svmstream train --save): same model, labels -1/+1
    est2, res2 = run_training(task, label_indices=False)
    np.testing.assert_array_equal(est2.predict(Xtr), np.where(ref.decision_function(Xtr) > 0, 1.0, -1.0))
    assert res2["test_accuracy"] == res["test_accuracy"]


def test_cli_params_and_model_names():
    import argparse

    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "train",
            "f.bz2",
            "--algorithm",
            "dcsvm",
            "--C",
            "32",
            "--gamma",
            "scale",
            "--levels",
            "3",
            "--no-refine",
            "--param",
            "n_sample=500",
            "--param",
            'kernel="poly"',
        ]
    )
    assert collect_params(args) == {
        "C": 32.0,
        "gamma": "scale",
        "n_levels": 3,
        "refine": False,
        "n_sample": 500,
        "kernel": "poly",
    }
    args = parser.parse_args(["train", "f.bz2", "--algorithm", "avsf", "--gamma", "2"])
    with pytest.raises(TrainError, match="--gamma does not apply to avsf"):
        collect_params(args)
    assert default_model_name("/x/ijcnn1.bz2", "dcsvm") == "ijcnn1-dcsvm"
    assert default_model_name("my data (v2).csv.gz", "avsf") == "my-data-v2-avsf"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _show_a_dcsvm_run(out) -> str:
    display = ProgressDisplay(out=out)
    display.stage("loading")
    display.stage("training")
    for level, k in ((2, 16), (1, 4)):
        display.update({"stage": "kmeans", "level": level, "n_clusters": k, "objective": 0.0})
        for done in range(1, k + 1):
            display.update(
                {
                    "stage": "level",
                    "level": level,
                    "n_clusters": k,
                    "subproblems_done": done,
                    "subproblems": k,
                    "objective": 10.0 * done,
                    "max_violation": 1e-3,
                }
            )
    display.update(
        {"stage": "global", "level": 0, "iterations": 500, "objective": 99.5, "max_violation": 9e-4}
    )
    display.update({"stage": "done", "level": 0})
    display.stage("testing")
    display.close()
    return out.getvalue()


def test_progress_display_draws_one_bar_per_level_on_a_terminal():
    text = _show_a_dcsvm_run(_Terminal())
    assert "loading" in text and "testing" in text
    assert "level 2 (16 clusters): 100%" in text and "16/16" in text and "level 1 (4 clusters): 100%" in text
    assert "global solve: 500 upd" in text and "obj=99.5" in text and "viol=0.0009" in text


def test_progress_display_writes_a_line_per_step_off_a_terminal():
    """A log or a pipe gets one line per step (level, k-means, global solve), no bars."""
    text = _show_a_dcsvm_run(io.StringIO())
    assert "\r" not in text and "%|" not in text, text
    lines = text.splitlines()
    assert len(lines) == 7, lines  # loading, 2 x (k-means, level), global solve, testing
    assert any(line.endswith("level 2 (16 clusters): 16/16 sub obj=160 viol=0.001") for line in lines), lines
    assert any("global solve: 500 upd obj=99.5 viol=0.0009" in line for line in lines), lines


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_train_locally_prints_accuracy_and_saves_the_model(tmp_path, capsys):
    from svmstream.solvers.persistence import load_estimator

    X, y = two_moons_like(800, seed=7)
    Xt, yt = two_moons_like(400, seed=8)
    train = write_libsvm(tmp_path / "tr.bz2", X, y)
    test = write_libsvm(tmp_path / "te.libsvm", Xt, yt)
    saved = tmp_path / "model.svmstate"
    argv = [
        "train",
        "--algorithm",
        "dcsvm",
        str(train),
        "--test",
        str(test),
        "--C",
        "10",
        "--gamma",
        "1",
        "--levels",
        "2",
        "--random-state",
        "0",
        "--save",
        str(saved),
    ]
    out = run_cli(argv, timeout=180)
    assert out.returncode == 0, out.stderr
    # stderr is a pipe, no terminal: one line per step, no bars (docs/jobs.md)
    assert "level 2 (16 clusters): 16/16 sub" in out.stderr and "level 1 (4 clusters): 4/4 sub" in out.stderr
    assert "\r" not in out.stderr and len(out.stderr.splitlines()) < 20, out.stderr
    acc_line = next(
        line for line in out.stdout.splitlines() if line.startswith("test accuracy on te.libsvm:")
    )
    assert "train seconds:" in out.stdout and f"saved to {saved}" in out.stdout
    model = load_estimator(saved)  # predicts the file's labels
    Xtr = load_dataset(test, n_features=8)[0]
    acc = float(np.mean(model.predict(Xtr) == yt))
    assert f"{100 * acc:.2f}%" in acc_line
    assert acc > 0.8
    # in-process from here on (the entry point is the same main())
    from svmstream.app.cli.main import main

    capsys.readouterr()
    assert main(["train", "--algorithm", "avsf", str(train), "--gamma", "1", "--json"]) == 2
    assert capsys.readouterr().err.strip() == "error: --gamma does not apply to avsf"
    assert (
        main(
            [
                "train",
                "--algorithm",
                "liblinear-cd",
                str(train),
                "--test",
                str(test),
                "--json",
                "--no-progress",
            ]
        )
        == 0
    )
    body = json.loads(capsys.readouterr().out)
    assert body["mode"] == "linear" and body["n_test"] == 400 and 0.5 < body["test_accuracy"] < 1.0
    assert main(["train", "--algorithm", "avsf", str(tmp_path / "missing.libsvm")]) == 1
    assert "missing.libsvm" in capsys.readouterr().err
