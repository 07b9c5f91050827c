"""The budget search (issue 23, deliverable 5): trials over the channel target speedup, each thinned, reconstructed
and scored on held-out items, timed with FP32; the fastest measured model within budget, FP32 included.

Speed is never asserted: the timing is replaced by a deterministic stub (a model's ms per batch is its file size in
MB, so thinned and INT8 models are "faster" by construction, or FP32 is made the fastest), and the tests assert what
the search does with the times it is given. The models are small hand-built CNNs; their labels are the FP32 model's
own classes on seeded inputs (the mechanics, not an accuracy claim: real labelled data is benchmarks/ business)."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from sparsify_tui.errors import JobCanceled, SampleDataError


# ------------------------------------------------------------------------------------------------ fixtures


def _cnn(path, seed: int = 0):
    """x[N,3,16,16] -> conv0 (32) -> relu -> conv1 (64) -> relu -> conv2 (64) -> relu -> GAP -> fc (4 classes)."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    for i, (ci, co) in enumerate([(3, 32), (32, 64), (64, 64)]):
        w = (rng.standard_normal((co, ci, 3, 3)) / np.sqrt(ci * 9)).astype(np.float32)
        b = (rng.standard_normal(co) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"conv{i}.weight"), numpy_helper.from_array(b, f"conv{i}.bias")]
        nodes += [helper.make_node("Conv", ["x" if i == 0 else f"r{i - 1}", f"conv{i}.weight", f"conv{i}.bias"],
                                   [f"c{i}"], name=f"conv{i}", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}")]
    nodes += [helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["f"], name="flat"),
              helper.make_node("Gemm", ["f", "fc.weight"], ["y"], name="fc", transB=1)]
    inits.append(numpy_helper.from_array((rng.standard_normal((4, 64)) / 8).astype(np.float32), "fc.weight"))
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _data(model, path, n: int = 64, labelled: bool = True):
    import onnxruntime as ort

    x = np.random.default_rng(1).standard_normal((n, 3, 16, 16)).astype(np.float32)
    arrays = {"x": x}
    if labelled:
        arrays["labels"] = ort.InferenceSession(str(model)).run(None, {"x": x})[0].argmax(1)
    np.savez(path, **arrays)
    return path


def _stub(fp32_ms=None):
    """interleaved_times stand-in: every run of a model takes its file size in MB (fp32_ms for the first model, FP32,
    when given)."""
    def times(engine, models, feeds, core_count, *, rounds=3, warmup=2, iterations=12, cancel=None, on_step=None, **kw):
        out = []
        for i, m in enumerate(models):
            ms = fp32_ms if (i == 0 and fp32_ms is not None) else os.path.getsize(m) / 1e6
            out.append([ms] * int(iterations))
        return out
    return times


@pytest.fixture
def size_timing(monkeypatch):
    from sparsify_tui.engine import timing

    monkeypatch.setattr(timing, "interleaved_times", _stub())


@pytest.fixture
def fp32_fastest(monkeypatch):
    from sparsify_tui.engine import timing

    monkeypatch.setattr(timing, "interleaved_times", _stub(fp32_ms=1e-6))


TIMING = {"rounds": 2, "warmup": 0, "iterations": 2}


def _rec(model):
    """A channel optimization of ``model`` as the service builds it (FLOPS profile, group-norm curves)."""
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.optimization import core
    from sparsify_tui.optimization.structures import get_structure
    from sparsify_tui.optimization.structures.channel import ChannelSettings

    kind = get_structure("channel")
    st = ChannelSettings(target="speedup", round_to=8)
    analysis = analyze_model(str(model))
    extras = kind.analysis_extras(model, analysis, settings=st)
    return core.build_optimization("b", analysis, None, None, settings=st, sparsity=0.3, extras=extras)


# ------------------------------------------------------------------------------------------------ pure rules


def test_targets_climb_a_ladder_then_bisect_between_within_and_over():
    from sparsify_tui.optimization.budget_search import next_target

    assert next_target([], None) == 1.5
    assert next_target([(1.5, True)], None) == pytest.approx(2.25)
    assert next_target([(1.5, True), (2.25, True)], 3.0) == pytest.approx(3.0)  # capped at the reachable
    assert next_target([(1.5, True), (2.25, True), (3.0, True)], 3.0) is None  # nothing faster to ask for
    assert next_target([(1.5, True), (2.25, False)], None) == pytest.approx((1.5 * 2.25) ** 0.5)
    assert next_target([(1.5, False)], None) == pytest.approx(1.5 ** 0.5)  # between FP32 (1.0) and the first over
    assert next_target([(1.5, True), (1.6, False)], None) is None  # within the resolution
    assert next_target([(1.05, False)], None) is None  # nothing worth a trial below it
    assert next_target([], 1.2) == pytest.approx(1.2)


def test_calibration_and_held_out_items_are_disjoint_and_named():
    from sparsify_tui.optimization.budget_search import check_split, item_range

    assert check_split(192) == (64, 128)
    assert check_split(40) == (20, 20)  # at most half the data calibrates by default, as apply splits it
    assert check_split(100, 10) == (10, 90)
    assert item_range([64, 191]) == "64-191" and item_range([3, 3]) == "3"
    with pytest.raises(SampleDataError, match="at least one other item to score"):
        check_split(8, 8)


def test_a_trial_beats_fp32_only_when_faster_in_every_round():
    from sparsify_tui.engine.timing import beats_every_round
    from sparsify_tui.optimization.budget_search import choose
    from sparsify_tui.optimization.record import BudgetTrial

    assert beats_every_round([1.0, 1.0], [2.0, 2.0])
    assert not beats_every_round([1.0, 2.5], [2.0, 2.0])  # slower in one round
    assert not beats_every_round([1.95, 1.95], [2.0, 2.0])  # within the 3 % margin
    fast_over = BudgetTrial(index=0, within_budget=False, median_ms=0.5, round_ms=[0.5, 0.5])
    noisy = BudgetTrial(index=1, within_budget=True, median_ms=0.8, round_ms=[0.6, 2.2])
    steady = BudgetTrial(index=2, within_budget=True, median_ms=1.0, round_ms=[1.0, 1.0])
    assert choose([fast_over, noisy, steady], [2.0, 2.0]) is steady  # over budget never; noisy is not faster in r2
    assert choose([fast_over, noisy], [2.0, 2.0]) is None


# ------------------------------------------------------------------------------------------------ the search


def test_search_picks_the_fastest_measured_trial_within_budget(tmp_path, size_timing):
    from sparsify_tui.engine.outputs import run_outputs
    from sparsify_tui.optimization.budget_search import search_budget
    from sparsify_tui.profiling.metrics import choose_metric, evaluate

    model = _cnn(tmp_path / "cnn.onnx")
    data = _data(model, tmp_path / "d.npz", n=64)
    keep = tmp_path / "keep"
    keep.mkdir()
    res = search_budget(model, _rec(model), max_drop=0.1, data=data, timing=TIMING, keep_dir=keep)
    assert res.metric == "top1" and res.labelled and res.accuracy_fp32 == 1.0  # labels are the FP32 classes
    assert (res.calibration_items, res.held_out_items, res.items, res.held_out) == (32, 32, "0-31", "32-63")
    assert [t.index for t in res.trials] == list(range(len(res.trials))) and len(res.trials) >= 2
    targets = [t.target for t in res.trials]
    assert targets[0] == 1.5 and len(set(targets)) == len(targets)
    for t in res.trials:  # every trial recorded: target, INT8, kept channels, held-out metric, budget, timing
        assert not t.quantized and t.fp32_groups == 0 and t.kept_channels < t.channels
        assert t.within_budget == (t.metric_value <= 0.1 + 1e-12)
        assert t.median_ms is not None and t.speedup is not None and len(t.round_ms) == 2
        assert t.reconstruction["items"] == 32 and t.reconstruction["consumers"] >= 1
    within = [t for t in res.trials if t.within_budget]
    chosen = res.chosen_trial
    assert res.status == "within budget" and chosen is not None and chosen.within_budget
    assert chosen.median_ms == min(t.median_ms for t in within)  # the fastest measured, not the first tried
    # the chosen model, scored again on the held-out items outside the search, gives the recorded metric
    x = np.load(data)["x"]
    held = [{"x": x[i:i + 1]} for i in range(32, 64)]
    ref = run_outputs(model, held)
    outs = run_outputs(keep / "chosen.onnx", held)
    labels = [np.load(data)["labels"][i:i + 1] for i in range(32, 64)]
    ev = evaluate(ref, outs, choose_metric(ref[0], None, labelled=True), labels)
    assert ev.drop == pytest.approx(chosen.metric_value) and ev.accuracy == pytest.approx(chosen.accuracy)


def test_fp32_is_kept_when_no_trial_beats_it(tmp_path, fp32_fastest):
    """FP32 is within any budget: when it is the fastest, the search chooses nothing and says so, and the service
    stores the optimization with nothing thinned and INT8 off (never a model slower than the original)."""
    from sparsify_tui.optimization.budget_search import search_budget
    from sparsify_tui.optimization.core import layer_sparsities
    from sparsify_tui.services.budget import chosen_record

    model = _cnn(tmp_path / "cnn.onnx")
    data = _data(model, tmp_path / "d.npz", n=48)
    rec = _rec(model)
    res = search_budget(model, rec, max_drop=0.5, data=data, timing=TIMING, max_trials=2)
    assert any(t.within_budget for t in res.trials)
    assert res.chosen is None and res.status == "FP32 fastest within budget"
    assert any("FP32 is kept" in w for w in res.warnings)
    from sparsify_tui.optimization import core

    out = core.evaluate(chosen_record(rec, res))
    assert layer_sparsities(out) == {} and not out.quantization.enabled and out.search is res


def test_nothing_within_budget_keeps_fp32(tmp_path, size_timing):
    from sparsify_tui.optimization.budget_search import search_budget

    model = _cnn(tmp_path / "cnn.onnx")
    data = _data(model, tmp_path / "d.npz", n=32, labelled=False)
    res = search_budget(model, _rec(model), max_drop=0.0, metric="nmse", data=data, timing=TIMING, max_trials=3)
    assert res.metric == "nmse" and not res.labelled
    assert res.trials and not any(t.within_budget for t in res.trials)
    assert [t.target for t in res.trials][:2] == pytest.approx([1.5, 1.5 ** 0.5])  # over: bisect toward FP32
    assert res.chosen is None and res.status == "only FP32 within budget"
    assert any("no thinned model met the budget 0" in w for w in res.warnings)


def test_cancel_stops_the_search_and_leaves_nothing(workspace_home, tmp_path, size_timing, monkeypatch):
    import tempfile

    from sparsify_tui.progress import CancelToken
    from sparsify_tui.services.budget import search_budget_optimization
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    ws = Workspace()
    model = _cnn(tmp_path / "cnn.onnx")
    project = create_project(ws, str(model), name="cnn")
    data = _data(model, tmp_path / "d.npz", n=48)  # 24 calibration items: the sensitivities are measured first
    token = CancelToken()
    steps = []

    def progress(step, frac):
        steps.append(step)
        if step.startswith("trial 2"):
            token.cancel()

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    with pytest.raises(JobCanceled):
        search_budget_optimization(ws, project["id"], {"name": "b", "max_drop": 0.1, "data": str(data),
                                                             "engines": "onnxruntime"},
                                   progress=progress, cancel=token, timing=TIMING)
    assert any(s.startswith("sensitivities") for s in steps) and any(s.startswith("trial 1") for s in steps)
    assert ws.list_records(project["id"], "optimizations") == []
    assert ws.list_records(project["id"], "loss_profiles") == []  # the measured sensitivities went with it
    assert os.listdir(tmp) == []  # the trials' models went with the search


def test_quantize_adds_int8_trials_and_stores_the_chosen_exclusions(workspace_home, tmp_path, size_timing):
    """With --quantize the INT8 search runs on the best thinned trial and on the unthinned model; an INT8 model is
    smaller, so the stub times it faster: the optimization is stored with INT8 on, the exclusions of its search,
    and that search under quantization.search."""
    from sparsify_tui.services.budget import search_budget_optimization
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    ws = Workspace()
    model = _cnn(tmp_path / "cnn.onnx")
    project = create_project(ws, str(model), name="cnn")
    data = _data(model, tmp_path / "d.npz", n=48)
    rec = search_budget_optimization(ws, project["id"], {"name": "bq", "max_drop": 0.2, "data": str(data),
                                                         "quantize": True, "max_trials": 2}, timing=TIMING)
    s = rec.search
    q_trials = [t for t in s.trials if t.quantized]
    assert s.quantize and q_trials
    assert {t.source for t in q_trials} <= {None} | {t.index for t in s.trials if not t.quantized}
    chosen = s.chosen_trial
    assert chosen is not None and chosen.quantized and chosen.within_budget
    q = rec.quantization
    assert q.enabled and q.search is not None and q.search.calibration_size == s.calibration_items
    assert chosen.int8_search is None  # moved to quantization.search
    from sparsify_tui.optimization.int8_search import excluded_nodes

    assert q.excluded == excluded_nodes(q.search.groups, chosen.fp32_groups)
    assert rec.settings.target == ("speedup" if chosen.target > 1 else "uniform")


# ------------------------------------------------------------------------------------------------ CLI and jobs


def _project(tmp_path):
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    ws = Workspace()
    model = _cnn(tmp_path / "cnn.onnx")
    return ws, create_project(ws, str(model), name="cnn"), model


def test_cli_budget_search_stores_every_trial_and_the_choice(workspace_home, tmp_path, capsys, size_timing):
    from sparsify_tui.cli import main
    from sparsify_tui.optimization.core import layer_sparsities
    from sparsify_tui.services.optimizations import get_optimization

    ws, project, model = _project(tmp_path)
    data = _data(model, tmp_path / "d.npz", n=48)
    assert main(["optimize", "cnn", "--name", "b", "--structure", "channel", "--max-drop", "0.1", "--data",
                 str(data), "--max-trials", "3", "--engines", "onnxruntime", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["search"]
    assert s["max_drop"] == 0.1 and s["metric"] == "top1" and s["items"] == "0-23" and s["held_out"] == "24-47"
    assert 1 <= len(s["trials"]) <= 3
    assert all({"target", "quantized", "fp32_groups", "metric_value", "within_budget", "speedup"} <= set(t)
               for t in s["trials"])
    opt = get_optimization(ws, project["id"], "b")
    chosen = opt.search.chosen_trial
    # no channel loss profile in the project: sensitivities after reconstruction were measured on calibration items
    # and stored with the optimization, which allocates with them
    prof = next(r for r in ws.list_records(project["id"], "loss_profiles") if r["id"] == opt.loss_profile)
    assert prof["method"] == "one-shot" and prof["settings"]["structure"] == "channel"
    assert prof["settings"]["reconstructed"] and opt.loss_profile_name == prof["name"]
    assert chosen is not None and opt.settings.target == "speedup"
    assert opt.settings.target_speedup == chosen.target and layer_sparsities(opt)
    # the stored record re-evaluates to the chosen trial's channels
    assert opt.estimates.kept_channels == chosen.kept_channels
    # apply writes the model the search measured: same data, same split, same channels and refit, same score
    assert main(["apply", "cnn", "b", "--json"]) == 0
    capsys.readouterr()
    applied = get_optimization(ws, project["id"], "b").applied
    assert applied.reconstruction and applied.reconstruction.get("items") == 24
    assert applied.diff["metric_name"] == "top1"
    assert applied.diff["metric_value"] == pytest.approx(chosen.metric_value, abs=1e-9)
    assert applied.diff["nmse"] == pytest.approx(chosen.nmse, rel=1e-4)
    # the text layout names the split and marks the choice
    assert main(["optimize", "cnn", "--name", "b2", "--structure", "channel", "--max-drop", "0.1", "--data",
                 str(data), "--max-trials", "1"]) == 0
    text = capsys.readouterr().out
    assert "calibration items 0-23, held-out items 24-47" in text and "* = chosen" in text


@pytest.mark.parametrize("argv, msg", [
    (["--max-drop", "0.01"], "the budget search needs real items"),
    (["--max-drop", "-1", "--data", "D"], "--max-drop -1 is not allowed"),
    (["--max-drop", "0.01", "--data", "D", "--sparsity", "0.3"], "--sparsity is not used with --max-drop"),
    (["--max-drop", "0.01", "--data", "D", "--target-speedup", "2"], "--target-speedup is not used with --max-drop"),
    (["--metric", "nmse", "--data", "D"], "add --max-drop D"),
    (["--max-drop", "0.01", "--data", "D", "--metric", "f1"], "--metric 'f1' is not allowed"),
    (["--max-drop", "0.01", "--data", "D", "--calibration-size", "64"], "at least one other item to score"),
    (["--max-drop", "0.01", "--data", "D", "--max-trials", "0"], "--max-trials 0 is not allowed"),
    (["--max-drop", "0.01", "--data", "missing.npz"], "does not exist"),
    (["--max-drop", "0.01", "--data", "D", "--labels", "nope"], "has no array 'nope'"),
])
def test_cli_bad_budget_arguments_are_one_line_exit_2_and_leave_nothing(workspace_home, tmp_path, capsys, argv,
                                                                       msg, size_timing):
    from sparsify_tui.cli import main
    from sparsify_tui.jobs import list_jobs

    ws, project, model = _project(tmp_path)
    data = str(_data(model, tmp_path / "d.npz", n=16))
    argv = [data if a == "D" else a for a in argv]
    assert main(["optimize", "cnn", "--name", "b", "--structure", "channel"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err
    assert ws.list_records(project["id"], "optimizations") == [] and list_jobs(ws, project["id"]) == []


def test_max_trials_without_the_budget_search_is_refused(workspace_home, tmp_path, capsys):
    from sparsify_tui.cli import main

    _project(tmp_path)
    assert main(["optimize", "cnn", "--name", "b", "--max-trials", "3"]) == 2
    assert "--max-trials belongs to the budget search" in capsys.readouterr().err


def test_the_job_check_refuses_before_a_job_record_exists(workspace_home, tmp_path):
    from sparsify_tui.errors import SparsifyError
    from sparsify_tui.jobs import list_jobs, submit

    ws, project, model = _project(tmp_path)
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((4, 3, 16, 16), np.float32), labels=np.full(4, 9))
    with pytest.raises(SparsifyError, match="labels 'labels' contain 9"):
        submit(ws, project["id"], "budget_search", {"name": "b", "max_drop": 0.01, "data": str(bad)})
    with pytest.raises(SparsifyError, match="needs a budget"):
        submit(ws, project["id"], "budget_search", {"name": "b", "data": str(bad)})
    assert list_jobs(ws, project["id"]) == []


def test_older_records_read_back_unchanged_and_the_search_round_trips():
    from sparsify_tui.optimization.record import BudgetSearch, BudgetTrial, Optimization

    rec = Optimization(name="x")
    assert "search" not in rec.to_dict()
    rec.search = BudgetSearch(max_drop=0.02, trials=[BudgetTrial(index=0, target=2.0, median_ms=1.0,
                                                                 round_ms=[1.0, 1.1])], chosen=0)
    back = Optimization.from_dict(rec.to_dict())
    assert back.to_dict() == rec.to_dict() and back.search.chosen_trial.target == 2.0
    assert back.search.chosen_trial.label == "2.00× target"


# ------------------------------------------------------------------------------------------------ honest cards


def test_too_far_from_the_original_by_agreement_else_nmse():
    from sparsify_tui.optimization.fidelity import TOO_FAR, applied_fidelity, too_far

    assert too_far(0.89, 0.0) == (True, "top-1 agreement 89.0% < 90%")
    assert too_far(0.9, 5.0)[0] is False  # a class output: agreement decides, not NMSE
    assert too_far(None, 0.11) == (True, "NMSE 0.11 > 0.1") and too_far(None, 0.1)[0] is False
    assert too_far(None, None) == (False, "")
    fid = applied_fidelity({"accuracy": 0.5, "accuracy_baseline": 0.953, "top1_agreement": 0.52, "nmse": 0.58,
                            "samples": 128})
    assert fid.text == "accuracy 50.0% (FP32 95.3%), top-1 agreement 52.0%, NMSE 0.58 on 128 batches"
    assert fid.too_far and fid.flag == f"{TOO_FAR} (top-1 agreement 52.0% < 90%)"
    # what apply stores (score_items): held_out True, the count in items; never "on True held-out item"
    fid = applied_fidelity({"top1_agreement": 0.97, "nmse": 0.0168, "samples": 112, "held_out": True,
                            "items": {"held_out": [16, 127], "held_out_count": 112, "calibration_count": 16}})
    assert fid.text == "top-1 agreement 97.0%, NMSE 0.0168 on 112 held-out items"
    assert TOO_FAR == "too far from the original to use without fine-tuning: export the training code (`e`)"
    assert applied_fidelity({}) is None


def _applied(ws, pid, name, diff, speedup=1.7):
    """Store an applied model's output difference and a measured speedup on optimization ``name`` (what apply and a
    benchmark write), as the card and `optimization show` read them."""
    from sparsify_tui.optimization.record import AppliedModel, Measured
    from sparsify_tui.services.optimizations import get_optimization, store_fields

    opt = get_optimization(ws, pid, name)
    opt.applied = AppliedModel(path="x.onnx", structure="channel", output_diff=diff, groups=[])
    opt.measured = Measured(benchmark_name="bench", batch_size=1, core_count=2, speedup=speedup, median_ms=1.0,
                            baseline_ms=1.7)
    return store_fields(ws, pid, opt, "applied", "measured")


def test_optimization_show_puts_the_held_out_score_beside_the_speed_and_flags(workspace_home, tmp_path, capsys,
                                                                              size_timing):
    from sparsify_tui.cli import main

    ws, project, model = _project(tmp_path)
    data = _data(model, tmp_path / "d.npz", n=32)
    assert main(["optimize", "cnn", "--name", "b", "--structure", "channel", "--max-drop", "0.5", "--data",
                 str(data), "--max-trials", "2", "--engines", "onnxruntime"]) == 0
    capsys.readouterr()
    assert main(["optimization", "show", "cnn", "b"]) == 0
    out = capsys.readouterr().out
    # before apply: the predicted change is the search's held-out measurement of the chosen trial
    assert "predicted output change: measured by the budget search on 16 held-out items: top1" in out
    assert "applied: not yet" in out
    _applied(ws, project["id"], "b", {"accuracy": 0.61, "accuracy_baseline": 1.0, "top1_agreement": 0.61,
                                      "nmse": 0.4, "samples": 16})
    assert main(["optimization", "show", "cnn", "b"]) == 0
    out = capsys.readouterr().out
    assert ("applied: accuracy 61.0% (FP32 100.0%), top-1 agreement 61.0%, NMSE 0.4 on 16 batches; measured "
            "1.70× vs the original on onnxruntime fp32 ('bench', batch 1, 2 cores)") in out
    assert "warning: too far from the original to use without fine-tuning: export the training code (`e`)" in out
    _applied(ws, project["id"], "b", {"top1_agreement": 0.97, "nmse": 0.01, "samples": 16})
    assert main(["optimization", "show", "cnn", "b"]) == 0
    assert "too far" not in capsys.readouterr().out


def test_the_search_thins_with_the_record_s_importance(tmp_path, size_timing):
    """A data importance (activation, measured on the calibration items) is what the search thins with when the
    optimization asks for it; an unknown importance is refused with the choices."""
    from sparsify_tui.optimization.budget_search import search_budget
    from sparsify_tui.optimization.structures.channel import ChannelSettings

    model = _cnn(tmp_path / "cnn.onnx")
    data = _data(model, tmp_path / "d.npz", n=32)
    rec = _rec(model)
    rec.settings = rec.settings.with_changes(importance="activation")
    res = search_budget(model, rec, max_drop=0.5, data=data, timing=TIMING, max_trials=1)
    assert len(res.trials) == 1 and res.trials[0].reconstruction["items"] == 16
    assert res.trials[0].importance == "activation"
    assert search_budget(model, _rec(model), max_drop=0.5, data=data, timing=TIMING,
                         max_trials=1).trials[0].importance == "thinet"  # auto: ThiNet on the data, as apply
    with pytest.raises(ValueError, match="use auto, l2, bn_scale, activation, thinet"):
        ChannelSettings(importance="random").validate()
