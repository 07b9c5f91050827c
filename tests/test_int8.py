"""Accuracy-controlled INT8 (issue 14): the metric functions against hand values, labels validation, the search
on a model with one deliberately INT8-sensitive layer (it must revert exactly that layer), a model where
quantize_static fails (the search stops with the reason), and the CLI's one-line errors."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from sparsify_tui.errors import ModelError, SampleDataError, SparsifyError
from sparsify_tui.profiling import metrics as M

from conftest import shared_model


# ------------------------------------------------------------------------------------------------ metrics


def test_metric_functions_against_hand_values():
    # KL(softmax([0,0]) || softmax([ln3, 0])) = 0.5 ln(0.5/0.75) + 0.5 ln(0.5/0.25)
    want = 0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25)
    assert M.kl_divergence(np.array([[0.0, 0.0]]), np.array([[math.log(3.0), 0.0]]), False) == pytest.approx(want)
    # probabilities are used as they are
    assert M.kl_divergence(np.array([[0.5, 0.5]]), np.array([[0.75, 0.25]]), True) == pytest.approx(want)
    assert M.nmse(np.array([3.0, 4.0]), np.array([3.0, 5.0])) == pytest.approx(1 / 25)
    assert M.nmse(np.zeros(2), np.array([1.0, 1.0])) == pytest.approx(2.0)  # all-zero reference: plain SSE
    assert M.max_abs(np.array([1.0, 2.0]), np.array([1.5, 1.0])) == pytest.approx(1.0)
    assert list(M.top1(np.array([[0.1, 0.9], [2.0, 1.0]]))) == [1, 0]


def test_evaluate_top1_agreement_accuracy_and_drop():
    ref = [{"y": np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)}, {"y": np.array([[0.0, 1.0]], np.float32)}]
    new = [{"y": np.array([[0.0, 1.0], [0.0, 1.0]], np.float32)}, {"y": np.array([[0.0, 1.0]], np.float32)}]
    labels = [np.array([1, 1]), np.array([0])]
    c = M.choose_metric(ref[0], None, labelled=True)
    assert (c.name, c.labelled, c.class_output) == ("top1", True, "y") and "labels" in c.reason
    ev = M.evaluate(ref, new, c, labels)
    assert ev.items == 3
    assert ev.top1_agreement == pytest.approx(2 / 3)
    assert ev.accuracy_reference == pytest.approx(1 / 3)  # ref argmax 1,0,1 vs labels 1,1,0
    assert ev.accuracy == pytest.approx(2 / 3)  # new argmax 1,1,1 vs labels 1,1,0
    assert ev.drop == pytest.approx(-1 / 3)  # absolute accuracy drop: negative, the model got better
    c2 = M.choose_metric(ref[0], None, labelled=False)
    assert c2.name == "top1" and not c2.labelled and "agreement" in c2.reason
    assert M.evaluate(ref, new, c2).drop == pytest.approx(1 / 3)  # 1 - agreement
    # nmse over every float output: the changed row adds (1-0)^2 + (0-1)^2 = 2, the reference energy is 3
    c3 = M.choose_metric(ref[0], "nmse")
    assert M.evaluate(ref, new, c3).drop == pytest.approx(2 / 3)
    assert M.evaluate(ref, new, M.choose_metric(ref[0], "max_abs")).drop == pytest.approx(1.0)


def test_metric_choice_from_outputs_and_errors():
    det = {"map": np.zeros((1, 1, 8, 8), np.float32)}
    c = M.choose_metric(det)
    assert c.name == "nmse" and "not class scores" in c.reason and "[1, 1, 8, 8]" in c.reason
    with pytest.raises(SampleDataError, match="no model output is class scores"):
        M.choose_metric(det, None, labelled=True)
    with pytest.raises(SampleDataError, match="--metric top1 needs a class-score output"):
        M.choose_metric(det, "top1")
    with pytest.raises(SparsifyError, match="unknown metric"):
        M.choose_metric(det, "f1")
    with pytest.raises(ModelError, match="no float outputs"):
        M.choose_metric({"ids": np.zeros((1, 3), np.int64)})


def test_loss_profile_metrics_are_the_same_functions():
    from sparsify_tui.profiling import loss_oneshot

    assert loss_oneshot.kl_divergence is M.kl_divergence and loss_oneshot.OutputMetric is M.OutputMetric
    assert loss_oneshot.nmse is M.nmse


# ------------------------------------------------------------------------------------------------ labels


def _mlp(path, sensitive: bool = True, seed: int = 0):
    """x[N,16] -> fc1 -> relu1 -> fc2 -> relu2 -> fc3 -> relu3 -> fc4 -> y[N,8] (Gemm, transB=1).

    With ``sensitive``, fc2 is made INT8-sensitive on purpose: each of its output channels has one weight of
    1000 on input 0, which is always exactly 0 (fc1's weight row 0 is zero), so FP32 never sees it; but the
    per-channel INT8 scale becomes 1000/127.5 and every other weight of fc2 rounds to 0 (full INT8: NMSE 1.0).
    The other layers in INT8 cost about NMSE 0.02 in a net this small, so budgets here are 0.05."""
    rng = np.random.default_rng(seed)
    w = {f"fc{i}.weight": (rng.standard_normal(s) / np.sqrt(s[1])).astype(np.float32)
         for i, s in ((1, (16, 16)), (2, (16, 16)), (3, (16, 16)), (4, (8, 16)))}
    if sensitive:
        w["fc1.weight"][0] = 0.0  # unit 0 of fc1 is exactly 0 for every input
        w["fc2.weight"][:, 0] = 1000.0
    inits = [numpy_helper.from_array(v, k) for k, v in w.items()]
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight"], ["h1"], name="fc1", transB=1)]
    prev = "h1"
    for i in (1, 2, 3):
        nodes.append(helper.make_node("Relu", [prev], [f"r{i}"], name=f"relu{i}"))
        nodes.append(helper.make_node("Gemm", [f"r{i}", f"fc{i + 1}.weight"], [f"h{i + 1}"] if i < 3 else ["y"],
                                      name=f"fc{i + 1}", transB=1))
        prev = f"h{i + 1}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _data(path, n=12, labels=None, **extra):
    rng = np.random.default_rng(3)
    arrays = {"x": rng.standard_normal((n, 16)).astype(np.float32)}
    if labels is not None:
        arrays["labels"] = labels
    arrays.update(extra)
    np.savez(path, **arrays)
    return path


def test_labels_are_split_from_the_inputs_and_validated(tmp_path):
    from sparsify_tui.analysis.labels import sample_set

    model = _mlp(tmp_path / "mlp.onnx")
    ok = sample_set(model, data=_data(tmp_path / "ok.npz", labels=np.arange(12) % 8))
    assert ok.items == 12 and len(ok.feeds) == 12 and ok.labels_key == "labels"
    assert [int(x[0]) for x in ok.labels[:3]] == [0, 1, 2] and set(ok.feeds[0]) == {"x"}
    assert sample_set(model, data=_data(tmp_path / "nolab.npz")).labels is None  # default key absent: no labels
    cases = [
        (_data(tmp_path / "count.npz", labels=np.arange(11)), None, "11 items and the inputs 12"),
        (_data(tmp_path / "dtype.npz", labels=np.zeros(12, np.float32)), None, "are float32: save them as integer"),
        (_data(tmp_path / "onehot.npz", labels=np.eye(12, 8, dtype=np.int64)), None, "shape \\[12, 8\\]"),
        (_data(tmp_path / "neg.npz", labels=-np.ones(12, np.int64)), None, "class indices start at 0"),
        (_data(tmp_path / "key.npz", y_true=np.zeros(12, np.int64)), "y", "has no array 'y' \\(it has x, y_true\\)"),
    ]
    for path, key, msg in cases:
        with pytest.raises(SampleDataError, match=msg):
            sample_set(model, data=path, labels_key=key)
    with pytest.raises(SampleDataError, match="--labels y needs --data"):
        sample_set(model, labels_key="y")
    big = sample_set(model, data=_data(tmp_path / "big.npz", labels=np.full(12, 9)))
    with pytest.raises(SampleDataError, match="contain 9 but the model's class output has 8 classes"):
        big.check_classes(8)


def test_labels_and_metric_are_checked_against_the_declared_outputs(tmp_path):
    """Before anything runs: labels at or above the class count, and labels or top1/kl on a model without a
    class-score output, are refused from the graph's declared outputs (what choose_metric refuses after a run)."""
    from sparsify_tui.analysis.run_inputs import check_run_inputs

    model = _mlp(tmp_path / "mlp.onnx")  # y: [N, 8]
    with pytest.raises(SampleDataError, match="contain 9 but the model's class output has 8 classes"):
        check_run_inputs(model, 1, None, _data(tmp_path / "big.npz", labels=np.full(12, 9)), scores_outputs=True)
    # a run that does not score outputs (perf profile) only checks the labels as data
    check_run_inputs(model, 1, None, tmp_path / "big.npz")
    check_run_inputs(model, 1, None, _data(tmp_path / "ok.npz", labels=np.arange(12) % 8), metric="kl",
                     scores_outputs=True)
    m = onnx.load(str(model))  # y becomes [N, 8, 1]: no class-score output
    m.graph.node.append(helper.make_node("Unsqueeze", ["y", "ax"], ["y3"], name="unsq"))
    m.graph.initializer.append(numpy_helper.from_array(np.array([2], np.int64), "ax"))
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info("y3", TensorProto.FLOAT, ["N", 8, 1]))
    onnx.save(m, str(tmp_path / "map.onnx"))
    with pytest.raises(SampleDataError, match=r"labels were given but no model output is class scores .*'y3' is "
                                              r"\[\?, 8, 1\]"):
        check_run_inputs(tmp_path / "map.onnx", 1, None, tmp_path / "ok.npz", scores_outputs=True)
    for metric in ("top1", "kl"):
        with pytest.raises(SampleDataError, match=f"--metric {metric} needs a class-score output"):
            check_run_inputs(tmp_path / "map.onnx", 1, None, None, metric=metric, scores_outputs=True)
    check_run_inputs(tmp_path / "map.onnx", 1, None, None, metric="nmse", scores_outputs=True)


# ------------------------------------------------------------------------------------------------ search


@pytest.fixture
def flat_timing(monkeypatch):
    """FP32 (the first model timed) takes 2.0 ms and every INT8 trial 1.0 ms: the choice among trials within
    budget then depends on no clock (speed is measured by benchmarks/int8_budget.py, never asserted in tests)."""
    from sparsify_tui.engine import timing

    monkeypatch.setattr(timing, "interleaved_times",
                        lambda engine, models, *a, **k: [[2.0 if i == 0 else 1.0] * 3 for i in range(len(models))])


def test_choose_fastest_needs_more_than_the_noise():
    from sparsify_tui.optimization.int8_search import choose_fastest
    from sparsify_tui.optimization.record import Int8Trial

    few = Int8Trial(index=1, groups=1, median_ms=10.0, round_ms=[10.0, 10.1, 9.9])
    more = Int8Trial(index=2, groups=3, median_ms=9.9, round_ms=[9.9, 10.0, 9.8])
    assert choose_fastest([more, few]) is few  # 1% faster: within the noise
    much = Int8Trial(index=3, groups=5, median_ms=8.0, round_ms=[8.0, 8.1, 7.9])
    assert choose_fastest([more, few, much]) is much
    # faster by the median but not in every round (one round drifted): not faster
    drifting = Int8Trial(index=4, groups=5, median_ms=8.0, round_ms=[8.0, 10.5, 7.9])
    assert choose_fastest([few, drifting]) is few


def test_search_never_returns_a_model_slower_than_fp32(tmp_path, monkeypatch):
    """FP32 is within any budget: when no INT8 trial within budget beats it by more than the noise (here every
    trial times 1.0 ms against FP32's 0.9 ms: INT8 slower, as on small models without VNNI), the search keeps
    FP32 and says so; the service stores the optimization with INT8 off."""
    from sparsify_tui.engine import timing
    from sparsify_tui.optimization.int8_search import choose_fastest, search_int8
    from sparsify_tui.optimization.record import Int8Trial

    monkeypatch.setattr(timing, "interleaved_times",
                        lambda engine, models, *a, **k: [[0.9 if i == 0 else 1.0] * 3 for i in range(len(models))])
    res = search_int8(_mlp(tmp_path / "mlp.onnx"), max_drop=0.05, metric="nmse", calibration_size=8,
                      timing={"rounds": 1, "warmup": 0, "iterations": 1})
    assert any(t.within_budget for t in res.trials)  # a trial fit the budget...
    assert res.chosen is None and res.status == "FP32 fastest within budget"  # ...but FP32 is faster
    assert any("faster than FP32" in w and "INT8 is left off" in w for w in res.warnings)
    # within the noise of FP32 is not faster either; clearly faster is
    t = Int8Trial(index=1, groups=1, median_ms=9.9, round_ms=[9.9, 9.9, 10.0])
    assert choose_fastest([t], [10.0, 10.0, 10.1]) is None
    assert choose_fastest([t], [12.0, 12.0, 12.1]) is t
    assert res.fp32_round_ms and all(len(t.round_ms) == len(res.fp32_round_ms) for t in res.trials
                                     if t.median_ms is not None)


def test_search_reverts_exactly_the_deliberately_sensitive_layer(tmp_path, flat_timing):
    from sparsify_tui.optimization.int8_search import excluded_nodes, search_int8

    model = _mlp(tmp_path / "mlp.onnx")
    res = search_int8(model, max_drop=0.05, metric="nmse", calibration_size=8,
                      timing={"rounds": 1, "warmup": 0, "iterations": 1})
    full = res.full_int8
    assert full is not None and not full.within_budget and full.metric_value > 0.5  # fc2 in INT8 breaks it
    assert res.status == "within budget" and res.chosen is not None
    chosen = res.chosen_trial
    assert chosen.within_budget and chosen.groups == 1
    assert res.groups[0].node_id == "fc2" and res.groups[0].rank == 1
    excl = excluded_nodes(res.groups, chosen.groups)
    assert excl == ["relu1", "fc2"]  # the layer and the node producing its input: its activation stays FP32
    layers = [n for n in excl if n.startswith("fc")]
    assert layers == ["fc2"]
    # every trial is recorded: excluded count, metric, measured ms
    assert all(t.median_ms is not None for t in res.trials if "ranking" not in t.note)
    assert res.fp32_ms and res.calibration_size == 8 and res.calibration_method == "minmax"
    assert res.metric == "nmse" and res.budget_units.startswith("normalized MSE")


def test_full_int8_within_budget_is_one_trial(tmp_path, flat_timing):
    from sparsify_tui.optimization.int8_search import search_int8

    res = search_int8(_mlp(tmp_path / "plain.onnx", sensitive=False), max_drop=0.05, metric="nmse",
                      calibration_size=4, timing={"rounds": 1, "warmup": 0, "iterations": 1})
    assert res.status == "full INT8 within budget" and [t.groups for t in res.trials] == [0] and res.chosen == 0
    assert res.groups == []  # no ranking needed


def test_search_on_a_model_whose_int8_fails_stops_with_the_reason(tmp_path, monkeypatch):
    from sparsify_tui.engine import ort_quant
    from sparsify_tui.optimization.int8_search import search_int8

    def boom(*args, **kwargs):
        raise ValueError("The truth value of an array with more than one element is ambiguous")

    monkeypatch.setattr("onnxruntime.quantization.quantize_static", boom)
    assert ort_quant  # quantize_static is imported inside quantize_int8, so the patch applies
    with pytest.raises(ModelError, match="INT8 quantization of mlp.onnx failed: ValueError: The truth value"):
        search_int8(_mlp(tmp_path / "mlp.onnx"), max_drop=0.01, calibration_size=2)


@pytest.mark.realmodels
def test_real_model_where_quantize_static_fails():
    """magika's quantize_static raises inside onnxruntime (measured with onnxruntime 1.32)."""
    from sparsify_tui.optimization.int8_search import search_int8

    path = shared_model("magika_standard_v3_3.onnx")
    with pytest.raises(ModelError, match="INT8 quantization of magika_standard_v3_3.onnx failed"):
        search_int8(path, max_drop=0.01, calibration_size=2)


# ------------------------------------------------------------------------------------------------ CLI


def _project(tmp_path):
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    ws = Workspace()
    model = _mlp(tmp_path / "mlp.onnx")
    return ws, create_project(ws, str(model), name="mlp")


def test_cli_search_stores_the_trials_and_the_exclusions(workspace_home, tmp_path, capsys, flat_timing):
    from sparsify_tui.cli import main

    ws, project = _project(tmp_path)
    data = _data(tmp_path / "d.npz", n=8)
    assert main(["optimize", "mlp", "--name", "q", "--quantize", "--max-drop", "0.05", "--metric", "nmse",
                 "--data", str(data), "--calibration", "entropy"]) == 0
    out = capsys.readouterr()
    assert "metric: nmse (--metric nmse" in out.out and "budget: max drop 0.05" in out.out
    assert "calibration entropy on 8 batches" in out.out and "chosen" in out.out
    rec = next(r for r in ws.list_records(project["id"], "optimizations") if r["name"] == "q")
    q = rec["quantization"]
    assert q["enabled"] and q["calibration_method"] == "entropy" and set(q["excluded"]) == {"relu1", "fc2"}
    s = q["search"]
    assert s["calibration_size"] == 8 and s["data"] == str(data)
    assert all({"excluded_count", "metric_value", "median_ms"} <= set(t) for t in s["trials"])
    assert rec["estimates"]["int8_source"].startswith("INT8 search")
    # apply writes the configuration the search measured
    assert main(["apply", "mlp", "q", "--json"]) == 0
    applied = next(r for r in ws.list_records(project["id"], "optimizations") if r["name"] == "q")["applied"]
    chosen = next(t for t in s["trials"] if t["index"] == s["chosen"])
    assert applied["output_diff"]["metric_name"] == "nmse"
    assert applied["output_diff"]["metric_value"] == pytest.approx(chosen["metric_value"], rel=1e-6)


def test_one_labelled_npz_serves_every_command(workspace_home, tmp_path, capsys, flat_timing):
    """The labels array (default key) is not an input: the perf profile, the search, apply and the benchmark's
    timing all skip it, and the benchmark's accuracy block reads it (the timing loader once refused it)."""
    from sparsify_tui.cli import main

    ws, project = _project(tmp_path)
    data = _data(tmp_path / "lab.npz", n=8, labels=np.arange(8) % 8)
    assert main(["profile", "perf", "mlp", "--name", "p", "--iterations", "3", "--cores", "1", "--no-int8",
                 "--data", str(data)]) == 0
    assert main(["optimize", "mlp", "--name", "q", "--quantize", "--max-drop", "0.5", "--data", str(data)]) == 0
    assert main(["apply", "mlp", "q", "--data", str(data)]) == 0
    capsys.readouterr()
    assert main(["benchmark", "mlp", "-O", "q", "--batch-sizes", "1", "--cores", "1", "--iterations", "3",
                 "--data", str(data), "--json"]) == 0
    acc = json.loads(capsys.readouterr().out)["accuracy"]
    assert acc["metric"] == "top1" and acc["items"] == 8
    assert acc["models"]["baseline"]["accuracy"] is not None and acc["models"]["q"]["accuracy"] is not None


@pytest.mark.parametrize("argv, msg", [
    (["--quantize", "--max-drop", "-1"], "--max-drop -1 is not allowed: --max-drop must be 0 or more"),
    (["--quantize", "--max-drop", "0.01", "--metric", "f1"], "--metric 'f1' is not allowed: --metric must be one of"),
    (["--quantize", "--max-drop", "0.01", "--calibration", "kmeans"],
     "--calibration 'kmeans' is not allowed: --calibration must be one of"),
    (["--max-drop", "0.01"], "add --quantize"),
    (["--quantize", "--metric", "nmse"], "needs a budget: add --max-drop"),
    (["--quantize", "--max-drop", "0.01", "--labels", "y"], "--labels y needs --data"),
])
def test_cli_bad_search_arguments_are_one_line_exit_2(workspace_home, tmp_path, capsys, argv, msg):
    from sparsify_tui.cli import main

    ws, project = _project(tmp_path)
    assert main(["optimize", "mlp", "--name", "q"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0]
    assert ws.list_records(project["id"], "optimizations") == []
    from sparsify_tui.jobs import list_jobs

    assert list_jobs(ws, project["id"]) == []


def test_cli_bad_labels_are_one_line_exit_2_and_nothing_is_left(workspace_home, tmp_path, capsys):
    from sparsify_tui.cli import main
    from sparsify_tui.jobs import list_jobs

    ws, project = _project(tmp_path)
    bad = _data(tmp_path / "bad.npz", n=8, labels=np.arange(5))
    big = _data(tmp_path / "big.npz", n=8, labels=np.full(8, 8))  # y has 8 classes: 0..7
    for data, msg in ((bad, "labels 'labels' have 5 items and the inputs 8"),
                      (big, "labels 'labels' contain 8 but the model's class output has 8 classes")):
        for argv in (["optimize", "mlp", "--name", "q", "--quantize", "--max-drop", "0.01", "--data", str(data)],
                     ["benchmark", "mlp", "--data", str(data)]):
            assert main(argv) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and msg in err[0]
    assert ws.list_records(project["id"], "optimizations") == [] and list_jobs(ws, project["id"]) == []


def test_cli_int8_failure_stops_cleanly(workspace_home, tmp_path, capsys, monkeypatch):
    from sparsify_tui.cli import main

    ws, project = _project(tmp_path)

    def boom(*args, **kwargs):
        raise ValueError("unsupported op in this model")

    monkeypatch.setattr("onnxruntime.quantization.quantize_static", boom)
    assert main(["optimize", "mlp", "--name", "q", "--quantize", "--max-drop", "0.01"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("sparsify-tui: error: INT8 quantization of mlp.onnx failed: ValueError: unsupported op")
    assert ws.list_records(project["id"], "optimizations") == []


def test_older_records_read_back_unchanged_and_search_round_trips():
    from sparsify_tui.optimization.record import Int8Search, Int8Trial, Optimization, QuantizationSettings

    q = QuantizationSettings(enabled=True, excluded=["a"])
    assert "search" not in q.to_dict() and "calibration_method" not in q.to_dict()
    q.search = Int8Search(max_drop=0.02, trials=[Int8Trial(index=0, metric_value=0.1, median_ms=2.0)], chosen=0)
    q.calibration_method = "percentile"
    back = QuantizationSettings.from_dict(q.to_dict())
    assert back.to_dict() == q.to_dict() and back.search.chosen_trial.median_ms == 2.0
    rec = Optimization(quantization=q)
    assert Optimization.from_dict(rec.to_dict()).to_dict() == rec.to_dict()


def test_predicted_k_from_the_sensitivity_shares():
    from sparsify_tui.optimization.int8_search import predicted_k
    from sparsify_tui.optimization.record import Int8Group

    groups = [Int8Group(node_id=f"n{i}", sensitivity=s) for i, s in enumerate([0.5, 0.3, 0.1, 0.1])]
    # full 1.0, budget 0.25 (x0.8 = 0.2): reverting the top 2 leaves 0.2 of the sensitivity
    assert predicted_k(groups, 1.0, 0.25) == 2
    assert predicted_k(groups, 1.0, 0.7) == 1
    assert predicted_k(groups, 1.0, 0.0) == 4
    assert predicted_k([Int8Group(node_id="t")], 1.0, 0.1) == 1  # nothing measured
