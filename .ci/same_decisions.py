"""Same decisions as another tree: run the same fits here and under another tree's interpreter,
compare every decision value exactly (max |Δ| = 0), and continue snapshots the other tree wrote.

    python .ci/same_decisions.py --before /work/base [--rows 6000] [--out DIR] [--real]

Each case is one model (plain BSGD, BSCA, Pegasos estimator; the streaming pipeline around
each; the no-settings selector; DC-SVM; the linear dual CD estimator) learning the first
``--rows`` rows of a data set (ijcnn1, letter, reuters from ``$SVMSTREAM_DATA``) in file order,
by ``partial_fit`` batches of 500 (pipelines and the selector: then ``flush``), and its ``decision_function`` on the first 2,000 rows of the
test file.  Snapshots: the other tree saves each online case half-way; this tree loads the file
and learns the second half, and its decisions must equal the other tree's uninterrupted run.

Uses only the public API both trees have (``svmstream.solvers`` estimators, ``save_estimator``,
``load_estimator``).  Exits 1 naming each case that differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

DATA = {
    "ijcnn1": ("ijcnn1.bz2", "ijcnn1.t.bz2", 22),
    "letter": ("letter.scale.bz2", "letter.scale.t.bz2", 16),
    "reuters": ("reuters_lasvm.trn.bz2", "reuters_lasvm.tst.bz2", 8315),
}
BATCH = 500


def _load(name, rows):
    from sklearn.datasets import load_svmlight_file

    root = Path(os.environ.get("SVMSTREAM_DATA", "/work/shared/data"))
    train, test, d = DATA[name]
    X, y = load_svmlight_file(str(root / train), n_features=d)
    Xt, _ = load_svmlight_file(str(root / test), n_features=d)
    X, y, Xt = X[:rows], y[:rows], Xt[:2000]
    if name != "reuters":  # dense data sets as users send them
        X, Xt = X.toarray(), Xt.toarray()
    return X, y, Xt


def _model(kind):
    from svmstream import solvers

    plain = {
        "bsgd": lambda: solvers.BudgetedSGDClassifier(budget=100, random_state=0),
        "bsca": lambda: solvers.BudgetedSCAClassifier(budget=100, random_state=0),
        "pegasos": lambda: solvers.PegasosClassifier(random_state=0),
    }
    if kind in plain:
        return plain[kind]()
    if kind.startswith("pipeline-"):
        return solvers.StreamingClassifier(plain[kind[len("pipeline-") :]](), warmup=500)
    if kind == "selection":  # the no-settings selector, through its whole race
        from svmstream.solvers.online.selection import SelectionClassifier

        return SelectionClassifier(plain["bsgd"]())
    if kind == "dcsvm":
        return solvers.DCSVMClassifier(C=1.0, gamma=0.5, n_levels=2, n_sample=200, random_state=0, n_jobs=1)
    return solvers.LinearDualCDClassifier(C=1.0, random_state=0)


ONLINE = ["bsgd", "bsca", "pegasos", "pipeline-bsgd", "pipeline-bsca", "pipeline-pegasos", "selection"]
BATCH_KINDS = ["dcsvm", "linear"]


def _learn(model, X, y, classes, start, stop):
    for lo in range(start, stop, BATCH):
        model.partial_fit(X[lo : min(lo + BATCH, stop)], y[lo : min(lo + BATCH, stop)], classes=classes)
    return model


def run(mode, rows, out):
    """``mode`` "fit": every case's decisions (and, for online cases, a half-way snapshot in
    ``out``); "continue": decisions after loading the snapshots in ``out`` and learning the rest."""
    from svmstream.solvers.persistence import load_estimator, save_estimator

    result = {}
    for name in DATA:
        X, y, Xt = _load(name, rows)
        classes = np.unique(y)
        half = (X.shape[0] // 2) // BATCH * BATCH
        for kind in ONLINE + (BATCH_KINDS if mode == "fit" else []):
            if name == "reuters" and kind in ("dcsvm",):
                continue
            key = f"{name}/{kind}"
            if kind in BATCH_KINDS:
                model = _model(kind).fit(X[: min(rows, 3000)], y[: min(rows, 3000)])
            elif mode == "fit":
                model = _learn(_model(kind), X, y, classes, 0, half)
                save_estimator(model, Path(out) / f"{name}-{kind}.state")
                model = _learn(model, X, y, classes, half, X.shape[0])
            else:
                model = load_estimator(Path(out) / f"{name}-{kind}.state")
                model = _learn(model, X, y, classes, half, X.shape[0])
            if hasattr(model, "flush") and (kind.startswith("pipeline") or kind == "selection"):
                model.flush()
            result[key] = np.asarray(model.decision_function(Xt), dtype=np.float64).tolist()
    return result


def _compare_real(before_tree) -> int:
    """Run ``tests/scenarios/real_decisions.py`` under both trees; print each case's max |Δ| and
    promotions; returns the number of cases that differ."""
    script = Path(__file__).resolve().parent.parent / "tests" / "scenarios" / "real_decisions.py"
    other = Path(before_tree) / ".venv" / "bin" / "python"
    runs = [
        json.loads(subprocess.run([str(py), str(script)], check=True, capture_output=True, cwd=cwd).stdout)
        for py, cwd in ((other, before_tree), (sys.executable, None))
    ]
    bad = 0
    for data, parts in runs[0].items():
        for part, cases in parts.items():
            for case, ref in cases.items():
                got = runs[1][data][part][case]
                delta = float(np.max(np.abs(np.asarray(ref["decisions"]) - np.asarray(got["decisions"]))))
                same = delta == 0.0 and ref.get("at") == got.get("at")
                bad += not same
                promoted = f"promotions {ref.get('promotions')} at {ref.get('at')}" if "at" in ref else ""
                print(
                    f"real {data}/{part}/{case:12s} max|Δ| = {delta:.3g} {promoted} {'ok' if same else 'DIFFERS'}"
                )
    return bad


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="root of the other tree (its .venv/bin/python runs the same fits)")
    parser.add_argument("--rows", type=int, default=6000)
    parser.add_argument("--mode", choices=["fit", "continue"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help="directory of the snapshots and decisions")
    parser.add_argument(
        "--real",
        action="store_true",
        help="also tests/scenarios/real_decisions.py in both trees: the service's models (the selector, "
        "a model whose challenger is promoted) in process, through the app and over HTTP",
    )
    args = parser.parse_args(argv)
    if args.mode is not None:  # a worker: write the decisions as JSON
        (Path(args.out) / f"{args.mode}.json").write_text(json.dumps(run(args.mode, args.rows, args.out)))
        return 0
    out = Path(args.out or tempfile.mkdtemp(prefix="same_decisions_"))
    before, after = out / "before", out / "after"
    for d in (before, after):
        d.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    other = [str(Path(args.before) / ".venv" / "bin" / "python"), str(Path(__file__).resolve())]
    common = ["--rows", str(args.rows)]
    subprocess.run([*other, "--mode", "fit", "--out", str(before), *common], check=True, cwd=args.before)
    subprocess.run([*me, "--mode", "fit", "--out", str(after), *common], check=True)
    subprocess.run([*me, "--mode", "continue", "--out", str(before), *common], check=True)
    ref = json.loads((before / "fit.json").read_text())
    bad = 0
    for label, path in (
        ("same fits", after / "fit.json"),
        ("old snapshots continued", before / "continue.json"),
    ):
        got = json.loads(path.read_text())
        for key, values in ref.items():
            if key not in got:
                continue
            delta = float(np.max(np.abs(np.asarray(values) - np.asarray(got[key])))) if values else 0.0
            status = "ok" if delta == 0.0 else "DIFFERS"
            bad += delta != 0.0
            print(f"{label:24s} {key:26s} max|Δ| = {delta:.3g}  {status}")
    if args.real:
        bad += _compare_real(args.before)
    print(f"{bad} case(s) differ" if bad else "every decision equal (max |Δ| = 0)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
