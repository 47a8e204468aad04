"""Rehearsal: the plan of steps, the reservoir, determinism, persistence."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification

from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier, StreamingClassifier
from svmstream.solvers.budgeted._rehearsal import RehearsalMemory, _draw, memory_capacity, plan_rehearsal
from svmstream.solvers.persistence import decode_state, encode_state

ESTIMATORS = [BudgetedSGDClassifier, BudgetedSCAClassifier]


def streaming(cls, stages, **params):
    """``StreamingClassifier(cls(**params), **stages)``: rehearsal is a stage of the pipeline."""
    return StreamingClassifier(cls(**params), **stages)


def _raw_stream(n=3000, seed=0, n_classes=2):
    """Raw, unscaled features with string labels, sorted by label (a LIBSVM file's order)."""
    X, y = make_classification(
        n_samples=n, n_features=8, n_informative=5, n_classes=n_classes, random_state=seed, class_sep=1.2
    )
    X = X * np.array([1, 10, 100, 1000, 0.1, 5, 50, 2]) + 7.0
    labels = np.array(["churn", "stay", "maybe"])[y]
    order = np.argsort(labels, kind="stable")
    return X[order], labels[order]


def _brute_plan(n_new, rehearsal, capacity, fill, seen, seed):
    """Algorithm R and the draws, one example at a time in plain Python (the reference)."""
    src = list(range(n_new, n_new + capacity))
    order, new_pos = [], []
    for i in range(n_new):
        new_pos.append(len(order))
        order.append(i)
        seen += 1
        if fill < capacity:
            slot, fill = fill, fill + 1
        else:
            slot = int(_draw(seed, seen, 0, seen))
        if slot < capacity:
            src[slot] = i
        for q in range(rehearsal):
            order.append(src[int(_draw(seed, seen, q + 1, fill))])
    return order, new_pos, fill, seen


@pytest.mark.parametrize("fill,seen", [(0, 0), (3, 3), (10, 57)])
def test_the_plan_is_algorithm_r_with_hashed_draws(fill, seen):
    n_new, rehearsal, capacity, seed = 40, 3, 10, 7
    counts = np.array([fill, seen], dtype=np.int64)
    slot_src = np.arange(n_new, n_new + capacity, dtype=np.int64)
    order = np.empty(n_new * (1 + rehearsal), dtype=np.int64)
    new_pos = np.empty(n_new, dtype=np.int64)
    plan_rehearsal(n_new, rehearsal, capacity, counts, seed, slot_src, order, new_pos)
    ref_order, ref_pos, ref_fill, ref_seen = _brute_plan(n_new, rehearsal, capacity, fill, seen, seed)
    assert order.tolist() == ref_order
    assert new_pos.tolist() == ref_pos
    assert counts.tolist() == [ref_fill, ref_seen]
    # a rehearsal step only draws rows that exist: new rows already seen, or filled old slots
    for k, row in enumerate(order):
        if row < n_new:
            assert k >= new_pos[row]
        else:
            assert row - n_new < max(fill, 1)


def test_the_reservoir_is_a_uniform_sample_of_the_stream():
    """After n examples each is remembered with probability capacity / n (Algorithm R)."""
    capacity, n, trials = 20, 200, 400
    hits = np.zeros(n)
    for seed in range(trials):
        memory = RehearsalMemory(capacity, 1, seed)
        X = np.arange(n, dtype=np.float64)[:, None]
        memory.extend(X, 1)
        memory.commit(X, np.zeros(n), np.ones(n))
        hits[memory.X[: memory.fill, 0].astype(int)] += 1
    freq = hits / trials
    assert abs(freq.mean() - capacity / n) < 1e-12  # exactly `capacity` rows each trial
    # first and last quarters of the stream are remembered equally often (no recency bias)
    assert abs(freq[: n // 4].mean() - freq[-n // 4 :].mean()) < 0.02


def test_memory_capacity_is_bounded_in_bytes():
    assert memory_capacity(20_000, 22) == 20_000
    assert memory_capacity(20_000, 1_000) == 16 * 2**20 // (8 * 1_002)  # 2,093 rows in 16 MiB
    assert memory_capacity(20_000, 10_000) == 0  # 209 rows would be rehearsed too often: off
    assert memory_capacity(0, 5) == 0


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_rehearsal_takes_its_extra_steps_and_reports_only_the_new_examples(cls):
    X, y = _raw_stream()
    stages = dict(warmup=200, shuffle_buffer=500, on_drift="none")
    kw = dict(budget=40, random_state=0)
    est = streaming(cls, dict(rehearsal=3, **stages), **kw)
    est.partial_fit(X[:1500], y[:1500], classes=np.unique(y))
    pending = est.partial_fit(X[1500:], y[1500:]).n_pending_
    assert est.flush().last_margins_.shape[0] == pending  # margins of the new rows, not the rehearsed
    assert est.t_ == 4 * (X.shape[0] + est.n_replayed_)  # each learned row: its step + 3
    off = streaming(cls, dict(rehearsal=0, **stages), **kw)
    off.partial_fit(X, y, classes=np.unique(y)).flush()
    assert off.t_ == X.shape[0] + off.n_replayed_


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_batch_boundaries_do_not_change_the_model(cls):
    """Exactly-once recovery replays a stream cut differently: the model must be identical."""
    X, y = _raw_stream(2500, seed=1)
    Xt, _ = _raw_stream(400, seed=2)
    models = []
    for cut in (1000, 137):
        est = streaming(cls, dict(rehearsal=2, warmup=100, shuffle_buffer=300), budget=30, random_state=3)
        for start in range(0, X.shape[0], cut):
            est.partial_fit(X[start : start + cut], y[start : start + cut], classes=np.unique(y))
        models.append(est.flush().decision_function(Xt))
    np.testing.assert_array_equal(models[0], models[1])


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_a_restored_model_continues_exactly(cls):
    X, y = _raw_stream(3000, seed=4, n_classes=3)
    Xt, _ = _raw_stream(300, seed=5, n_classes=3)
    whole = streaming(cls, dict(rehearsal=2, warmup=100, shuffle_buffer=200), budget=30, random_state=1)
    whole.partial_fit(X[:1700], y[:1700], classes=np.unique(y))
    arrays, meta = whole.get_state()
    restored = type(whole).from_state(*decode_state(encode_state(arrays, meta)))
    for est in (whole, restored):
        est.partial_fit(X[1700:], y[1700:]).flush()
    np.testing.assert_array_equal(whole.decision_function(Xt), restored.decision_function(Xt))


def test_bsca_revisits_keep_alpha_in_the_box():
    X, y = _raw_stream(3000, seed=6)
    est = streaming(
        BudgetedSCAClassifier,
        dict(rehearsal=4, warmup=100, shuffle_buffer=0),
        budget=30,
        C=0.5,
        random_state=0,
    )
    est.partial_fit(X, y, classes=np.unique(y))
    memory = est._rehearsal.memory  # the pipeline's rehearsal stage, passed to the engine's learning calls
    alpha = memory.alpha[: memory.fill]
    assert alpha.min() >= 0.0 and alpha.max() <= est.C_eff_ + 1e-12
    assert np.count_nonzero(alpha) > 0  # rehearsal steps moved remembered coordinates


def _primal(est, X, y):
    """λ/2·‖w‖² + mean hinge loss on (X, y): the objective BSGD's steps descend (Wang et al. eq. 1),
    ‖w‖² computed directly from the support vectors' kernel matrix."""
    sv, alpha = est.support_vectors_, est.dual_coef_.ravel()
    sq = (sv**2).sum(1)
    K = np.exp(-est.gamma_ * np.maximum(sq[:, None] + sq[None, :] - 2 * sv @ sv.T, 0.0))
    signs = np.where(y == est.classes_[1], 1.0, -1.0)
    hinge = np.maximum(0.0, 1.0 - signs * est.decision_function(X)).mean()
    return 0.5 * est.lambda_eff_ * float(alpha @ K @ alpha) + hinge


def test_rehearsal_lowers_the_objective_of_one_pass_at_a_small_lambda():
    """At C = 32 one pass is far from the optimum; rehearsal steps descend further (the primal
    objective on the stream), which is what several epochs do."""
    X, y = make_classification(n_samples=4000, n_features=10, n_informative=6, random_state=0, flip_y=0.02)
    objective = {}
    for r in (0, 4):
        values = []
        for seed in range(3):
            est = streaming(
                BudgetedSGDClassifier,
                dict(rehearsal=r, scaling="none"),
                budget=60,
                C=32,
                n_samples=4000,
                random_state=seed,
                gamma=0.1,
            )
            for start in range(0, 4000, 500):
                est.partial_fit(X[start : start + 500], y[start : start + 500], classes=[0, 1])
            values.append(_primal(est.flush(), X, y))
        objective[r] = np.median(values)
    assert objective[4] < 0.8 * objective[0]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_bad_rehearsal_is_refused_naming_the_parameter(bad):
    X, y = _raw_stream(300)
    with pytest.raises(ValueError, match="rehearsal"):
        streaming(BudgetedSGDClassifier, dict(rehearsal=bad)).partial_fit(X, y, classes=np.unique(y))


def test_rehearsal_through_a_real_server_with_raw_sorted_string_labels(start_server):
    """A user sets only ``rehearsal``: raw, label-sorted breast_cancer with string labels over
    HTTP; every learned example takes 1 + rehearsal steps, the model beats the majority rate,
    survives a restart exactly, and a bad value is a 422 naming the field that changes nothing."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    data = load_breast_cancer()
    y_all = np.asarray(data.target_names)[data.target]
    X, Xte, y, yte = train_test_split(data.data, y_all, test_size=0.3, random_state=0, stratify=y_all)
    order = np.argsort(y, kind="stable")
    X, y = np.tile(X[order], (3, 1)), np.tile(y[order], 3)
    server = start_server()
    with server.client() as c:
        bad = c.put("/models/rh", json={"rehearsal": 1000})
        assert bad.status_code == 422 and "rehearsal" in bad.text
        assert c.get("/models/rh").status_code == 404
        assert c.put("/models/rh", json={"rehearsal": 3, "random_state": 0}).status_code in (200, 201)
        for start in range(0, len(X), 100):
            r = c.post(
                "/learn",
                json={
                    "model": "rh",
                    "X": X[start : start + 100].tolist(),
                    "y": y[start : start + 100].tolist(),
                },
            )
            assert r.status_code == 200, r.text
        assert c.post("/models/rh/flush").status_code == 200
        info = c.get("/models/rh").json()
        assert info["config"]["rehearsal"] == 3
        stats = info["statistics"]
        learned = stats["steps"] - stats["rehearsal_steps"]
        assert learned >= len(X) and stats["rehearsal_steps"] == 3 * learned
        pred = c.post("/predict", json={"model": "rh", "X": Xte.tolist()}).json()["labels"]
        accuracy = float(np.mean(np.asarray(pred) == yte))
        majority = max(np.mean(yte == "benign"), np.mean(yte == "malignant"))
        assert accuracy >= majority + 0.15, (accuracy, majority)
    server.terminate()
    restarted = start_server(snapshot_dir=server.snapshot_dir)
    with restarted.client() as c:
        again = c.post("/predict", json={"model": "rh", "X": Xte.tolist()}).json()["labels"]
        assert again == pred
        assert c.get("/models/rh").json()["config"]["rehearsal"] == 3


def test_the_pipeline_passes_its_stage_and_counts_from_it():
    """Rehearsal is declared: the pipeline owns its stage and passes it to the engine's learning
    calls, nothing is set on the engine or its binary models; one-vs-rest binary model k learns
    with ``children[k]``, made when the binary model is made (a binary model turning one-vs-rest:
    the bound shared by the 2 classes it had, a later class: by the classes before it)."""
    X, y = make_classification(
        n_samples=2400, n_features=8, n_informative=5, n_classes=4, random_state=8, class_sep=1.2
    )
    X = X * np.array([1, 10, 100, 1000, 0.1, 5, 50, 2]) + 7.0  # raw, unscaled; labels 0..3 mixed
    est = streaming(
        BudgetedSCAClassifier, dict(rehearsal=2, rehearsal_memory=6000, warmup=100, shuffle_buffer=0),
        budget=30, random_state=0,
    )  # fmt: skip
    binary = y < 2
    est.partial_fit(X[binary][:500], y[binary][:500], classes=[0, 1])
    stage = est._rehearsal
    assert "_rehearsal" not in vars(est.model_) and stage.children == []
    assert est.n_rehearsed_ == stage.steps == est.statistics()["rehearsal_steps"] == 2 * est.n_learned_ > 0
    est.add_class(2)
    assert [c.rehearsal_memory for c in stage.children] == [3000, 3000, 3000]
    est.partial_fit(X[y < 3][:400], y[y < 3][:400])
    est.add_class(3)
    assert [c.rehearsal_memory for c in stage.children] == [3000, 3000, 3000, 2000]
    est.partial_fit(X[:300], y[:300])
    assert not any("_rehearsal" in vars(b) for b in est.model_.estimators_)
    stats = est.statistics()
    own = [c.own_steps for c in stage.children]
    assert own == [2 * 700, 2 * 700, 2 * 700, 2 * 300]
    # binary models 0 and 1 are copies of the binary model: their t_ holds its rehearsal steps
    binary_phase = stage.own_steps
    assert binary_phase > 0
    steps = [o + (binary_phase if k < 2 else 0) for k, o in enumerate(own)]
    assert [part["rehearsal_steps"] for part in stats["per_class"]] == steps
    assert stats["rehearsal_steps"] == sum(steps) and est.n_rehearsed_ == steps[0]
    assert [part["examples_seen"] for part in stats["per_class"]] == [
        b.t_ - n for b, n in zip(est.model_.estimators_, steps)
    ]
    account = est.report().examples  # raised before (learned counted the binary phase's steps)
    assert account.received == 500 + 400 + 300 == account.learned + account.pending
    alone = BudgetedSCAClassifier(budget=30, random_state=0).partial_fit(X[:300], y[:300] % 2, classes=[0, 1])
    assert alone.n_rehearsed_ == 0 and alone.statistics()["rehearsal_steps"] == 0 and alone.n_seen_ == 300


def _late_third_class(sparse: bool):
    """A binary BSCA pipeline with rehearsal that meets a third class after learning (it splits
    into one-vs-rest: binary models 0 and 1 are copies of the binary model)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 5))
    y = (X[:, 0] > 0).astype(int)
    y[600::3] = 2
    model = StreamingClassifier(
        BudgetedSCAClassifier(C=1.0, budget=50, random_state=0), warmup=100, shuffle_buffer=100
    )
    model.partial_fit(sp.csr_matrix(X[:600]) if sparse else X[:600], y[:600], classes=[0, 1])
    assert model.report().examples.learned == 500
    model.add_class(2)
    return model, X, y


def test_a_class_met_late_keeps_the_example_account():
    """Regression: after the split the rehearsal steps of the binary phase stayed in binary
    model 0's ``t_`` but not in the count (learned 1,300 of 900 received: the report raised)."""
    model, X, y = _late_third_class(sparse=False)
    model.partial_fit(X[600:], y[600:])
    account = model.report().examples
    assert (account.received, account.learned + account.pending) == (900, 900)
    assert model.n_rehearsed_ == model.statistics()["per_class"][0]["rehearsal_steps"]
    seen = [part["examples_seen"] for part in model.statistics()["per_class"]]
    assert seen == [account.learned, account.learned, 300]  # the third since it was added


def test_a_class_met_late_then_wider_rows_widen_every_binary_memory():
    """Regression: ``grow_features`` widened the pipeline's memory only, not the binary models'
    (their next rehearsal step read rows of the old width)."""
    import scipy.sparse as sp

    model, X, y = _late_third_class(sparse=True)
    model.partial_fit(sp.csr_matrix(X[600:700]), y[600:700])
    wider = np.hstack([X[700:], np.ones((200, 2))])
    model.grow_features(7)
    model.partial_fit(sp.csr_matrix(wider), y[700:])
    account = model.report().examples
    assert (account.received, account.learned + account.pending) == (900, 900)
    assert model.decision_function(sp.csr_matrix(wider[:5])).shape == (5, 3)
