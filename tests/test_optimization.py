"""Optimization core: allocation, estimates, overrides, versions (issue 5 item 6)."""

from __future__ import annotations

import copy

import pytest

from sparsify_tui.analysis.nodes import ModelAnalysis
from sparsify_tui.optimization.allocation import allocate
from sparsify_tui.optimization.layer_curves import GRID_LEVELS, Settings
from sparsify_tui.optimization.core import build_optimization, change_settings, layer_sparsities, override
from sparsify_tui.optimization.record import LayerRow, Optimization
from sparsify_tui.profiling.loss import LossProfile
from sparsify_tui.profiling.perf import Int8Profile, LatencySummary, PerfProfile
from sparsify_tui.services.projects import create_project

LEVELS = ["0.4", "0.6", "0.7", "0.8", "0.85", "0.9", "0.95", "0.975", "0.99"]


def weighted_avg(rec_or_layers, sparsities=None):
    layers = rec_or_layers.layers if isinstance(rec_or_layers, Optimization) else rec_or_layers
    sp = sparsities or {l.weight_name: l.sparsity for l in layers}
    n = sum(l.params for l in layers)
    return sum(l.params * sp[l.weight_name] for l in layers) / n


def make_layers(gains, losses, params=None):
    """Synthetic allocation inputs: gain = time saved at 0.99 (linear in s), loss = value at 0.99 (cubic)."""
    params = params or [1000] * len(gains)
    out = []
    for i, (g, lo, n) in enumerate(zip(gains, losses, params)):
        out.append(LayerRow(weight_name=f"l{i}.weight", node_id=f"n{i}", op_type="Conv", params=n,
                            flops=n * 100.0, group=1, excluded=None,
                            time_curve=[g * (1 - 0.9 * s) for s in GRID_LEVELS],
                            gain_curve=[g * 0.9 * s for s in GRID_LEVELS],
                            loss_curve=[lo * s ** 3 for s in GRID_LEVELS]))
    return out


def fake_profiles(analysis, int8=True):
    """Perf and loss profiles (typed, read from dicts in the issue 3 / issue 4 JSON shapes) for an analysis dict."""
    layers = [n for n in analysis["nodes"] if n["prunable"]]
    total = 0.0
    pnodes, llayers = [], []
    for k, n in enumerate(analysis["nodes"]):
        t = 0.001 + n["flops"] / 1e9
        total += t
        node = {"index": k, "id": n["id"], "op_type": n["op_type"], "weight_name": n.get("weight_name"), "time_ms": t,
                "share": 0.0, "flops": n["flops"], "gflops_per_s": 1.0, "est_pruned_ms": {},
                "int8_time_ms": t / 2.5 if int8 else None}
        if n["prunable"]:
            # sparse-runtime estimate: no gain below 0.85, then up to 2x at 0.99
            node["est_pruned_ms"] = {lv: t * (1.0 if float(lv) <= 0.85 else 1 - (float(lv) - 0.85) * 3.5)
                                     for lv in LEVELS}
        pnodes.append(node)
    for k, n in enumerate(layers):
        sens = {f"{s:.2f}": (k % 5 + 1) * 0.01 * s ** 2 for s in [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99]}
        llayers.append({"id": n["id"], "weight_name": n["weight_name"], "op_type": n["op_type"],
                        "params": n["params"], "prunable_params": n["params"], "sparsity": 0.0, "sensitivity": sens,
                        "int8_sensitivity": 0.5 if k == 3 else 0.01})
    perf = {"profile": {"name": "baseline", "batch_size": 1, "core_count": 2, "instruction_sets": [],
                        "latency_ms": {"median": total, "p90": total, "mean": total, "min": total},
                        "items_per_second": 1000 / total,
                        "int8": {"latency_ms": {"median": total / 2.5}} if int8 else {}},
            "nodes": pnodes}
    loss = {"profile": {"name": "fake", "method": "one-shot"}, "layers": llayers}
    return PerfProfile.from_dict(perf), LossProfile.from_dict(loss)


@pytest.fixture(scope="module")
def demo_analysis():
    from sparsify_tui.analysis.nodes import analyze_model
    from tests.conftest import DEMO_MODEL

    return analyze_model(str(DEMO_MODEL), batch_size=1, dims={"x:2": 48, "x:3": 192}).to_dict()


GAINS = [5.0, 1.0, 3.0, 0.2, 2.0, 4.0, 0.5, 1.5]
LOSSES = [1.0, 0.1, 2.0, 0.5, 0.05, 3.0, 1.5, 0.3]
PARAMS = [1000, 4000, 250, 8000, 2000, 500, 16000, 1000]


@pytest.mark.parametrize("target", [0.5, 0.7, 0.85, 0.9])
@pytest.mark.parametrize("balance", [0.0, 0.3, 0.5, 1.0])
def test_weighted_average_hits_target_with_caps_and_min_sparsity(target, balance):
    layers = make_layers(GAINS, LOSSES, PARAMS)
    st = Settings(sparsity=target, balance=balance)
    alloc = allocate(layers, st)
    assert abs(weighted_avg(layers, alloc.sparsities) - target) <= 0.02
    assert abs(alloc.avg_sparsity - target) <= 0.02
    for s in alloc.sparsities.values():
        assert s == 0 or st.min_sparsity - 1e-9 <= s <= st.max_sparsity + 1e-9


def test_exclusions_stay_dense_and_target_still_met(demo_analysis):
    rec = build_optimization("o", ModelAnalysis.from_dict(demo_analysis), None, None, sparsity=0.7)
    first = rec.layers[0]
    assert first.sparsity == 0 and first.reason == "first layer"
    grouped = [l for l in rec.layers if l.group > 1]
    assert grouped and all(l.sparsity == 0 for l in grouped)
    assert all(l.sparsity <= 0.95 for l in rec.layers)
    assert abs(weighted_avg(rec) - 0.7) <= 0.02
    # turning the exclusions off lets them be pruned
    rec2 = change_settings(copy.deepcopy(rec), dense_grouped=False, dense_first_layer=False)
    assert any(l.sparsity > 0 for l in rec2.layers if l.group > 1)
    assert abs(weighted_avg(rec2) - 0.7) <= 0.02


def test_unreachable_target_caps_every_layer_and_warns(demo_analysis):
    rec = build_optimization("o", ModelAnalysis.from_dict(demo_analysis), None, None, sparsity=0.95)
    free = [l for l in rec.layers if not l.excluded]
    assert all(l.sparsity == pytest.approx(0.95) for l in free)
    assert rec.warnings and "not reachable" in rec.warnings[0]


def test_balance_one_is_loss_only():
    a = make_layers(GAINS, LOSSES, PARAMS)
    b = make_layers(list(reversed(GAINS)), LOSSES, PARAMS)  # very different time savings
    st = Settings(sparsity=0.7, balance=1.0)
    assert allocate(a, st).sparsities == allocate(b, st).sparsities
    # with equal sizes, the least loss-sensitive layer gets at least as much as the most sensitive
    eq = make_layers([1.0] * 4, [0.1, 1.0, 5.0, 20.0])
    sp = allocate(eq, Settings(sparsity=0.6, balance=1.0)).sparsities
    assert sp["l0.weight"] >= sp["l1.weight"] >= sp["l2.weight"] >= sp["l3.weight"]
    assert sp["l0.weight"] > sp["l3.weight"]


def test_balance_zero_prunes_time_savers_first():
    # layer 0 saves the most time but is the most loss-sensitive: at balance 0 loss is ignored
    layers = make_layers([10.0, 5.0, 1.0, 0.1], [100.0, 1.0, 1.0, 0.01])
    sp = allocate(layers, Settings(sparsity=0.5, balance=0.0)).sparsities
    assert sp["l0.weight"] > sp["l3.weight"]
    assert sp["l0.weight"] >= sp["l1.weight"] >= sp["l2.weight"] >= sp["l3.weight"]
    # and the perf term rewards time saved at mid balance too (sign check against the original Sparsify)
    flat_loss = make_layers([10.0, 0.1], [1.0, 1.0])
    sp = allocate(flat_loss, Settings(sparsity=0.6, balance=0.5)).sparsities
    assert sp["l0.weight"] > sp["l1.weight"]


def test_filters_min_perf_gain_and_min_recovery():
    layers = make_layers([10.0, 10.0, 0.01, 10.0], [1.0, 1.0, 1.0, 50.0])
    alloc = allocate(layers, Settings(sparsity=0.5, min_perf_gain=0.01, min_recovery=0.5))
    assert alloc.sparsities["l2.weight"] == 0 and alloc.reasons["l2.weight"] == "filter: min perf gain"
    # layer 3's loss at high sparsity is the model maximum: its cap is lowered by min recovery
    assert alloc.sparsities["l3.weight"] < 0.95


def test_overrides_survive_reevaluation(demo_analysis):
    perf, loss = fake_profiles(demo_analysis)
    rec = build_optimization("o", ModelAnalysis.from_dict(demo_analysis), perf, loss, sparsity=0.6, perf_ref="p", loss_ref="l")
    target = rec.layers[5].weight_name
    rec = override(rec, target, 0.25)
    assert layer_sparsities(rec)[target] == 0.25
    rec = change_settings(rec, sparsity=0.7, balance=0.2)
    lay = next(l for l in rec.layers if l.weight_name == target)
    assert lay.sparsity == 0.25 and lay.override
    assert abs(weighted_avg(rec) - 0.7) <= 0.02
    # overriding an excluded layer (the first one) is allowed too
    rec = override(rec, rec.layers[0].weight_name, 0.5)
    assert rec.layers[0].sparsity == 0.5
    rec = override(rec, target, None)
    assert not next(l for l in rec.layers if l.weight_name == target).override


def test_estimates_name_runtime_and_use_measured_int8(demo_analysis):
    perf, loss = fake_profiles(demo_analysis)
    rec = build_optimization("o", ModelAnalysis.from_dict(demo_analysis), perf, loss, sparsity=0.7, quantize=True, perf_ref="p",
                             loss_ref="l")
    est = rec.estimates
    assert "onnxruntime" in est.ort_note and "no speedup" in est.ort_note
    assert est.int8_measured and est.ort_speedup == pytest.approx(2.5, rel=0.05)
    assert est.sparse_speedup >= est.ort_speedup
    assert est.flops_reduction > 1.5 and est.params_compression > 1.5
    assert 0 <= est.est_recovery <= 1
    # default INT8 exclusion: the outlier layer (index 3 has 50x the others' INT8 sensitivity)
    assert rec.quantization.excluded == [rec.layers[3].node_id]
    off = change_settings(copy.deepcopy(rec))
    off.quantization.enabled = False
    from sparsify_tui.optimization.core import evaluate

    assert evaluate(off).estimates.ort_speedup == pytest.approx(1.0)


def test_int8_estimate_uses_the_interleaved_ratio_when_recorded(demo_analysis):
    """A perf profile's INT8 block median (2.5x here) is minutes away from its FP32 block; the interleaved
    ratio (1.6x) measured both on one clock, so the estimate follows it; older profiles keep the block median."""
    from sparsify_tui.optimization.layer_curves import perf_int8_ms

    perf, loss = fake_profiles(demo_analysis)
    assert perf_int8_ms(perf) == pytest.approx(perf.latency_ms.median / 2.5)
    perf.int8.speedup_interleaved = 1.6
    assert perf_int8_ms(perf) == pytest.approx(perf.latency_ms.median / 1.6)
    rec = build_optimization("o", ModelAnalysis.from_dict(demo_analysis), perf, loss, sparsity=0.0, quantize=True, perf_ref="p",
                             loss_ref="l")
    rec.quantization.excluded = []
    from sparsify_tui.optimization.core import evaluate

    assert evaluate(rec).estimates.ort_speedup == pytest.approx(1.6, rel=1e-6)


def test_flops_profile_has_no_ms_and_no_ort_pruning_gain(demo_analysis):
    rec = build_optimization("o", ModelAnalysis.from_dict(demo_analysis), None, None, sparsity=0.7, quantize=True)
    est = rec.estimates
    assert est.baseline_ms is None and est.time_units.startswith("relative")
    assert est.ort_speedup == pytest.approx(1.0) and not est.int8_measured


def test_epochs_and_lr_from_training_settings(demo_analysis):
    rec = build_optimization("o", ModelAnalysis.from_dict(demo_analysis), None, None, training={"epochs": 90, "init_lr": 0.1,
                                                                       "final_lr": 0.001})
    ep = rec.epochs
    assert ep.pruning_start_epoch == 1 and ep.pruning_epochs == 30 and ep.fine_tune_epochs == 22.5
    assert ep.total_epochs == pytest.approx(1 + 30 + 22.5)
    from sparsify_tui.optimization.schedule import lr_at

    assert lr_at(0, rec.lr_modifiers) == pytest.approx(0.1)
    assert lr_at(ep.total_epochs, rec.lr_modifiers) == pytest.approx(0.001, rel=0.1)


def test_workspace_create_override_copy(workspace_home, demo_model):
    from sparsify_tui.services import optimizations
    from sparsify_tui.store import Workspace

    ws = Workspace()
    p = create_project(ws, str(demo_model), name="demo", dims={"x:2": 48, "x:3": 192})
    rec = optimizations.create_optimization(ws, p["id"], "v1", sparsity=0.6)
    assert rec.perf_profile == "flops" and rec.loss_profile == "approximated"
    w = rec.layers[4].weight_name
    optimizations.set_override(ws, p["id"], "v1", w, 0.9)
    rec = optimizations.reevaluate(ws, p["id"], "v1", sparsity=0.7)
    assert layer_sparsities(rec)[w] == 0.9
    v2 = optimizations.copy_optimization(ws, p["id"], "v1")
    assert v2.name == "v1 v2" and v2.copied_from == rec.id and v2.overrides == {w: 0.9}
    with pytest.raises(Exception, match="already exists"):
        optimizations.create_optimization(ws, p["id"], "v1")


def test_one_pruned_time_calibration_for_flops_and_perf_profiles(demo_analysis):
    """The FLOPS profile's layer times follow perf_estimate's rule on FLOPs-proportional times: equal, relative
    to each layer's dense time, to an optimization on a perf profile whose node times are proportional to
    FLOPs and whose pruned estimates perf_estimate wrote."""
    from sparsify_tui.optimization import layer_curves as config
    from sparsify_tui.profiling import perf_estimate as pe
    from sparsify_tui.profiling.perf import NodePerf

    prunable = [n for n in demo_analysis["nodes"] if n["prunable"]]
    d = pe.depthwise_share((n["op_type"], n.get("attrs"), n["flops"]) for n in prunable)
    assert 0 < d < 1  # the demo model has depthwise convs: the blend matters
    nodes = [NodePerf(index=k, id=n["id"], op_type=n["op_type"], weight_name=n.get("weight_name"),
                      time_ms=n["flops"] / 1e6, est_pruned_ms=pe.estimate_node_ms(n["flops"] / 1e6, n["prunable"], d),
                      prunable=n["prunable"])
             for k, n in enumerate(demo_analysis["nodes"])]
    total = sum(n.time_ms for n in nodes)
    perf = PerfProfile(name="flops-like", batch_size=1, core_count=1, instruction_sets=[],
                       latency_ms=LatencySummary.from_dict({"median": total}), items_per_second=1000 / total,
                       int8=Int8Profile.from_dict({}), nodes=nodes)
    by_flops = build_optimization("f", ModelAnalysis.from_dict(demo_analysis), None, None, sparsity=0.7)
    by_perf = build_optimization("p", ModelAnalysis.from_dict(demo_analysis), perf, None, sparsity=0.7, perf_ref="p")
    share = 1.0 / demo_analysis["totals"]["flops"]
    for a, b in zip(by_flops.layers, by_perf.layers):  # the same rule: dense time / max(1, f(s)) at every level
        assert a.time_curve == pytest.approx([a.flops * share / pe.layer_speedup(s, d) for s in GRID_LEVELS], abs=1e-6)
        assert b.time_curve == pytest.approx([b.flops / 1e6 / pe.layer_speedup(s, d) for s in GRID_LEVELS], abs=1e-6)
    assert any(l.time_curve[-1] < 0.95 * l.time_curve[0] for l in by_flops.layers)
    # the runtime and the note are perf_estimate's, and there is no second table
    assert by_flops.estimates.sparse_runtime == pe.RUNTIME and by_flops.estimates.ort_note == pe.NOTE
    assert not hasattr(config, "SPARSE_RUNTIME_TIME_FACTOR") and not hasattr(config, "ORT_NOTE")


def test_depthwise_share_is_the_share_of_prunable_time_in_grouped_convs():
    from sparsify_tui.profiling import perf_estimate as pe

    layers = [("Conv", {"group": 1}, 3.0), ("Conv", {"group": 32}, 1.0), ("Gemm", None, 4.0)]
    assert pe.depthwise_share(layers) == pytest.approx(1.0 / 8.0)
    assert pe.depthwise_share([]) == 0.0


def test_estimates_from_a_noisy_profile_say_so(demo_analysis):
    """Issue 29, deliverable 3: a perf profile flagged noisy (on its own screen) flags every optimization built
    from it: the estimates store why, the performance card says "unreliable: estimated from a noisy profile: rerun
    it" and the warnings name the profile; a quiet profile gives no flag."""
    from sparsify_tui.optimization.core import evaluate
    from sparsify_tui.optimization.structures import load_optimization
    from sparsify_tui.text import cli_lines
    from sparsify_tui.text.optimization import Hints, estimate_facts, header_facts

    hints = Hints(apply="a", benchmark="b")
    perf, loss = fake_profiles(demo_analysis)
    quiet = build_optimization("o", ModelAnalysis.from_dict(demo_analysis), perf, loss, sparsity=0.7, quantize=True,
                               perf_ref="p", perf_name="baseline", loss_ref="l")
    assert quiet.estimates.noise is None and quiet.model.noise is None and quiet.all_warnings() == []
    assert not any(f.label == "unreliable" for f in estimate_facts(quiet, hints)["performance"])
    noise = ("noisy timing: p90 2.234 ms is 2.5× the median 0.896 ms (was the machine busy?); rerun the profile")
    perf.warnings = ["1 initializer holds NaN", noise]
    rec = build_optimization("o", ModelAnalysis.from_dict(demo_analysis), perf, loss, sparsity=0.7, quantize=True,
                             perf_ref="p", perf_name="baseline", loss_ref="l")
    assert rec.model.noise == [noise]  # what the profile flagged, not its other warnings
    assert rec.estimates.noise == [f"perf profile baseline: {noise}"]
    assert rec.all_warnings()[0] == f"perf profile baseline: {noise}"
    perf_card = cli_lines(estimate_facts(rec, hints)["performance"])
    assert "unreliable: estimated from a noisy profile: rerun it" in perf_card
    assert any(f.label == "unreliable" for f in header_facts(rec, hints))
    stored = load_optimization(rec.to_dict())  # stored and read back; evaluated again
    assert stored.estimates.noise == rec.estimates.noise and evaluate(stored).estimates.noise == rec.estimates.noise


def test_a_channel_estimate_from_a_noisy_calibration_says_it_is_unreliable():
    """Issue 29 goal: a channel optimization's estimate says it is unreliable when its calibration was noisy (the
    calibration's busy-machine warning travels with the time model it fitted)."""
    from sparsify_tui.optimization.estimates import noise_flag
    from sparsify_tui.optimization.structures import load_optimization
    from sparsify_tui.text import cli_lines
    from sparsify_tui.text.optimization import Hints, estimate_facts

    busy = "the machine was busy while measuring (other processes' 1-minute load about 3.1 next to our 2 threads)"
    rec = load_optimization({"name": "c", "perf_profile": "p", "perf_profile_name": "baseline",
                             "settings": {"structure": "channel", "target": "speedup", "target_speedup": 1.5},
                             "model": {"baseline_ms": 1.0, "channel_time_model": {
                                 "kind": "calibrated", "calibration": {"warnings": [busy]}}},
                             "estimates": {"time_model": "calibrated", "ort_speedup_fp32": 1.65}})
    assert rec.noise_sources() == [f"channel calibration: {busy}"]
    card = cli_lines(estimate_facts(rec, Hints(apply="a", benchmark="b"))["performance"])
    assert card[0].startswith("estimated: 1.65× FP32 on onnxruntime")
    assert card[-1] == "unreliable: estimated from a noisy channel calibration: rerun it"
    assert noise_flag(["perf profile p: noisy timing", "channel calibration: busy"]) == \
        "estimated from a noisy profile and channel calibration: rerun them"
    assert noise_flag([]) is None and noise_flag(None) is None
