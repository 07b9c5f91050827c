"""Channel optimizations (issues 12 and 13): optimize --structure channel (uniform, allocated, targets, overrides,
caps), apply (thin, then INT8) and its JSON, benchmark -> measured next to the estimate, channel loss profiles
(magnitude; one-shot equal to the thinned model's output change), the channel calibration, the recipe's SparseML
modifiers and the integration code. Through cli.main and the services, on the bundled demo model."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import yaml

from sparsify_tui.cli import main
from sparsify_tui.services.projects import create_project

DIMS = {"x:2": 48, "x:3": 192}


class TagLoader(yaml.SafeLoader):
    pass


TagLoader.add_multi_constructor("!", lambda l, s, n: {"__tag__": s, **l.construct_mapping(n, deep=True)})


@pytest.fixture
def project(workspace_home, demo_model):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    return ws, create_project(ws, str(demo_model), name="demo", dims=DIMS)


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_uniform_channel_optimization_apply_and_benchmark(project, capsys, tmp_path):
    ws, p = project
    assert main(["optimize", "demo", "--name", "u", "--structure", "channel", "--sparsity", "0.3", "--json"]) == 0
    opt = _json(capsys)
    assert opt["settings"]["structure"] == "channel" and opt["settings"]["target"] == "uniform"
    rows = opt["layers"]
    assert rows[0]["reason"] == "first layer" and rows[0]["sparsity"] == 0
    assert any(r["reason"] and r["reason"].startswith("not prunable") for r in rows)
    rt = opt["settings"]["round_to"]
    for r in rows:
        assert r["kept"] == r["channels"] or r["kept"] % rt == 0
    assert opt["estimates"]["time_model"] == "macs" and "MACs-proportional" in opt["estimates"]["time_model_note"]

    out = tmp_path / "thin.onnx"
    assert main(["apply", "demo", "u", "-o", str(out), "--json"]) == 0
    a = _json(capsys)["applied"]
    assert a["structure"] == "channel" and a["layers_exact"]
    assert a["exactness_max_rel_diff"] <= 1e-4
    assert a["macs_after"] < a["macs_before"]
    assert {"nmse", "max_abs", "top1_agreement"} <= set(a["output_diff"])
    assert a["file_size_bytes"] < a["baseline_size_bytes"]
    kept = {r["weight_name"]: r["kept"] for r in rows if r["reason"] != "first layer"}
    for g in a["groups"]:
        assert {"id", "channels", "kept", "kept_indices"} <= set(g)
        assert len(g["kept_indices"]) == g["kept"]
        if g["id"] in kept:
            assert g["kept"] == kept[g["id"]]
    m = onnx.load(str(out))
    assert [i.name for i in m.graph.input] == ["x"]

    assert main(["benchmark", "demo", "-O", "u", "--batch-sizes", "1", "--cores", "1", "--iterations", "3",
                 "--warmup", "1", "--json"]) == 0
    capsys.readouterr()
    assert main(["optimization", "show", "demo", "u", "--json"]) == 0
    shown = _json(capsys)
    assert shown["estimates"]["ort_speedup"] > 1 and shown["measured"]["speedup"] > 0
    assert shown["measured"]["stale"] is False and set(shown["measured"]["groups"]) == set(a["groups"][i]["id"]
                                                                                          for i in range(len(a["groups"])))
    # a change after the benchmark marks the measurement stale
    assert main(["optimize", "demo", "--name", "u2", "--structure", "channel", "--sparsity", "0.5"]) == 0
    from sparsify_tui.services.optimizations import reevaluate

    reevaluate(ws, p["id"], "u", sparsity=0.5)
    capsys.readouterr()
    assert main(["optimization", "show", "demo", "u", "--json"]) == 0
    assert _json(capsys)["measured"]["stale"] is True


def test_bad_channel_arguments_one_line_exit_2_nothing_stored(project, capsys):
    ws, p = project
    bad = [
        ["--override", "save_infer_model/scale_0.tmp_1=0.3"],  # not a group id
        ["--target-speedup", "1.5", "--macs-reduction", "2"],
        ["--target-speedup", "0.5"],
        ["--sparsity", "1.0"],
    ]
    for extra in bad:
        assert main(["optimize", "demo", "--name", "x", "--structure", "channel", *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
    assert main(["optimize", "demo", "--name", "x", "--target-speedup", "1.5"]) == 2
    assert "--structure channel" in capsys.readouterr().err
    # a group that is not prunable takes no override above 0
    from sparsify_tui.analysis.channels import analyze_channels

    _m, _a, groups = analyze_channels(ws.model_path(p["id"]), 1, DIMS)
    pinned = next(g for g in groups.groups if not g.prunable)
    assert main(["optimize", "demo", "--name", "x", "--structure", "channel", "--override", f"{pinned.id}=0.3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not prunable" in err
    assert main(["optimize", "demo", "--name", "x", "--structure", "channel", "--override", f"{pinned.id}=0"]) == 0
    capsys.readouterr()
    assert [r["name"] for r in ws.list_records(p["id"], "optimizations")] == ["x"]


def test_quantize_thins_first_then_int8(project, capsys):
    ws, p = project
    assert main(["optimize", "demo", "--name", "q", "--structure", "channel", "--sparsity", "0.3", "--quantize"]) == 0
    capsys.readouterr()
    assert main(["apply", "demo", "q", "--json"]) == 0
    a = _json(capsys)["applied"]
    assert a["quantized"] and a["structure"] == "channel" and a["macs_after"] < a["macs_before"]
    m = onnx.load(a["path"])
    assert any(n.op_type == "QuantizeLinear" for n in m.graph.node)
    assert "thinned_output_diff" in a and a["output_diff"]["nmse"] >= 0


def test_allocation_targets_caps_overrides(project):
    from sparsify_tui.services.optimizations import create_optimization, reevaluate, set_override

    ws, p = project
    rec = create_optimization(
        ws, p["id"], "s", settings={"structure": "channel", "target": "speedup", "target_speedup": 1.4})
    est = rec.estimates
    assert est.ort_speedup_fp32 >= 1.4 - 1e-6 and est.achieved >= 1.4 - 1e-6
    assert all(l.sparsity <= 0.7 + 1e-9 for l in rec.layers)  # the cap: kept >= 30 % of each group
    assert rec.layers[0].sparsity == 0 and rec.layers[0].reason == "first layer"
    gid = next(l.weight_name for l in rec.layers if l.sparsity > 0)
    rec = set_override(ws, p["id"], "s", gid, 0.0)
    assert rec.layer(gid).sparsity == 0 and rec.layer(gid).override
    rec = reevaluate(ws, p["id"], "s", target_speedup=1.6)
    assert rec.layer(gid).sparsity == 0 and rec.overrides == {gid: 0.0}  # overrides survive re-evaluation
    assert rec.estimates.ort_speedup_fp32 >= 1.6 - 1e-6 or rec.warnings

    m = create_optimization(
        ws, p["id"], "m", settings={"structure": "channel", "target": "macs", "macs_reduction": 2.0})
    assert m.estimates.macs_reduction >= 2.0 - 1e-6
    sp = create_optimization(
        ws, p["id"], "r", sparsity=0.4, settings={"structure": "channel", "target": "sparsity"})
    assert sp.estimates.avg_sparsity >= 0.4 - 1e-6
    hard = create_optimization(
        ws, p["id"], "h", settings={"structure": "channel", "target": "speedup", "target_speedup": 50})
    assert hard.warnings and "not reachable" in hard.warnings[0]


def test_channel_one_shot_equals_the_thinned_models_output_change(demo_model, tmp_path):
    from sparsify_tui.analysis.inputs import input_specs, synthetic_inputs
    from sparsify_tui.engine.outputs import output_difference
    from sparsify_tui.engine.thinning import thin_model
    from sparsify_tui.profiling.loss_channel import channel_profile

    feeds = [synthetic_inputs(input_specs(str(demo_model), batch_size=1, dims=DIMS), seed=3)]
    prof = channel_profile(demo_model, method="one-shot", levels=[0.0, 0.5], dims=DIMS, metric="nmse", feeds=feeds,
                           reconstruct=False)
    assert prof.settings["structure"] == "channel" and prof.extras["sessions"] >= 2
    checked = 0
    for layer in [l for l in prof.layers if l.prunable_params >= 24][:3]:
        out = tmp_path / f"{checked}.onnx"
        res = thin_model(demo_model, out, ratios={layer.id: 0.5}, dims=DIMS, check=False)
        if all(g.kept == g.channels for g in res.groups):
            continue
        ref = output_difference(demo_model, out, feeds)["nmse"]
        assert layer.sensitivity["0.5"] == pytest.approx(ref, rel=1e-3, abs=1e-9)
        checked += 1
    assert checked >= 2


def test_channel_magnitude_profile(demo_model):
    from sparsify_tui.profiling.loss_channel import channel_profile

    prof = channel_profile(demo_model, method="magnitude", dims=DIMS)
    assert prof.metric == "channel magnitude" and len(prof.layers) == 26
    for layer in prof.layers:
        vals = [layer.sensitivity[k] for k in sorted(layer.sensitivity, key=float)]
        assert vals[0] == 0 and all(b >= a for a, b in zip(vals, vals[1:]))


def test_channel_loss_profile_cli_and_its_use(project, capsys):
    ws, p = project
    assert main(["profile", "loss", "demo", "--name", "ch", "--method", "magnitude", "--structure", "channel",
                 "--json"]) == 0
    prof = _json(capsys)
    assert prof["profile"]["settings"]["structure"] == "channel"
    assert main(["profile", "loss", "demo", "--structure", "channel", "--int8"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    # the channel optimization picks the channel profile; an unstructured one picks a per-layer profile
    assert main(["optimize", "demo", "--name", "c", "--structure", "channel", "--json"]) == 0
    assert _json(capsys)["loss_profile_name"] == "ch"
    assert main(["optimize", "demo", "--name", "w", "--json"]) == 0
    assert _json(capsys)["loss_profile_name"] == "Approximated"
    assert main(["optimize", "demo", "--name", "bad", "--structure", "channel", "--loss", "approximated",
                 "--json"]) == 0
    assert _json(capsys)["loss_profile_name"].startswith("Channel magnitude")


def test_channel_calibration_is_stored_with_the_perf_profile(project, capsys):
    from sparsify_tui.profiling.channel_calibration import node_time

    ws, p = project
    assert main(["profile", "perf", "demo", "--name", "base", "--batch-size", "1", "--cores", "1", "--iterations", "3",
                 "--warmup", "1", "--no-int8", "--json"]) == 0
    capsys.readouterr()
    assert main(["optimize", "demo", "--name", "before", "--structure", "channel", "--json"]) == 0
    assert _json(capsys)["estimates"]["time_model"] == "per-node"
    assert main(["profile", "channel-calibration", "demo", "--ratios", "0.25,0.5", "--json"]) == 0
    cal = _json(capsys)["channel_calibration"]
    assert [pt["ratio"] for pt in cal["points"]] == [0.0, 0.25, 0.5] and cal["seconds"] > 0
    # the fit's error against the measured latencies is reported (its size depends on how quiet the machine is,
    # so only its range is asserted); every node passes through its own measured points exactly
    assert 0.0 <= cal["fit_rel_error"] < 1.0
    for c in cal["nodes"].values():
        for f, t in c["pts"]:
            assert node_time(c, f) == pytest.approx(t)
    rec = next(r for r in ws.list_records(p["id"], "perf_profiles"))
    assert rec["channel_calibration"]["ratios"] == [0.25, 0.5]
    assert main(["optimize", "demo", "--name", "after", "--structure", "channel", "--target-speedup", "1.3",
                 "--json"]) == 0
    after = _json(capsys)
    est = after["estimates"]
    assert est["time_model"] == "calibrated" and "measured on this server" in est["time_model_note"]
    # the optimization's time model goes through the calibration's measured points: at each calibrated ratio,
    # thinned uniformly, it gives the speedup the calibration fitted (the measured one up to fit_rel_error)
    from sparsify_tui.optimization.structures import load_optimization
    from sparsify_tui.optimization.structures.channel import ChannelPruning

    tm = ChannelPruning.model_of(load_optimization(ws.find_record(p["id"], "optimizations", "after")))
    for pt in cal["points"][1:]:
        uniform = tm.kept_fraction({g: pt["ratio"] for g in tm.groups})
        assert tm.speedup(uniform) == pytest.approx(cal["points"][0]["modeled_ms"] / pt["modeled_ms"], rel=1e-6)
        assert tm.latency(uniform) == pytest.approx(pt["median_ms"], rel=max(0.1, 3 * cal["fit_rel_error"]))
    assert main(["profile", "channel-calibration", "demo", "--perf", "flops"]) == 2
    assert main(["profile", "channel-calibration", "demo", "--ratios", "0.5,1.2"]) == 2


def test_recipe_structured_pruning_and_layer_thinning(project, capsys, tmp_path):
    from sparsify_tui.analysis.channels import analyze_channels

    from sparsify_tui.services.optimizations import set_override

    ws, p = project
    assert main(["optimize", "demo", "--name", "r", "--structure", "channel", "--sparsity", "0.3", "--json"]) == 0
    rows = _json(capsys)["layers"]
    free = [r["weight_name"] for r in rows if r["sparsity"] > 0]
    set_override(ws, p["id"], "r", free[-1], 0.6)  # a second distinct ratio: a second modifier
    recipe = tmp_path / "r.yaml"
    assert main(["export", "demo", "r", "-o", str(recipe), "--json"]) == 0
    capsys.readouterr()
    doc = yaml.load(recipe.read_text(), Loader=TagLoader)
    # the header says what was asked and reached in channel terms, not an average sparsity
    assert "# channel pruning: uniform ratio 0.300" in recipe.read_text().splitlines()[1]
    assert "average sparsity" not in recipe.read_text()
    mods = doc["modifiers"]
    sp = [m for m in mods if m["__tag__"] == "StructuredPruningModifier"]
    thin = [m for m in mods if m["__tag__"] == "LayerThinningModifier"]
    assert sp and len(thin) == 1
    from sparsify_tui.analysis.loading import load_model

    model = load_model(ws.model_path(p["id"]), load_external_data=False)  # Paddle's Constant weights named too
    inits = {t.name for t in model.graph.initializer}
    _m, _a, groups = analyze_channels(ws.model_path(p["id"]), 1, DIMS)
    engine_groups = {g.id: sorted({m.tensor for m in g.members if m.role in ("producer", "depthwise")})
                     for g in groups.groups if g.prunable}
    seen = []
    finals = [m["final_sparsity"] for m in sp]
    assert finals == sorted(set(finals))  # one modifier per distinct final sparsity
    for m in sp:
        assert m["mask_type"] == "filter" and m["inter_func"] == "cubic" and m["leave_enabled"] is True
        assert {"init_sparsity", "start_epoch", "end_epoch", "update_frequency"} <= set(m)
        for group in m["param_groups"]:
            assert set(group) <= inits
            assert sorted(group) in engine_groups.values()
            seen.append(",".join(group))
        assert m["params"] == [w for g in m["param_groups"] for w in g]
    dep = thin[0]["param_group_dependency_map"]
    assert set(dep) == set(seen)
    assert all(set(v) <= inits for v in dep.values())
    assert thin[0]["structure_type"] == "filter"


def test_integration_code_per_framework(project, capsys, tmp_path):
    ws, p = project
    assert main(["optimize", "demo", "--name", "c", "--structure", "channel", "--sparsity", "0.3"]) == 0
    capsys.readouterr()
    for fw in ("pytorch", "pytorch-plain", "keras", "tensorflow"):
        code = tmp_path / f"{fw}.py"
        assert main(["export", "demo", "c", "-o", str(tmp_path / "r.yaml"), "--code", fw, "-O", str(code)]) == 0
        text = code.read_text()
        compile(text, str(code), "exec")
        assert "CHANNEL pruning" in text
        if fw == "pytorch-plain":
            assert "torch_pruning" in text and "GroupMagnitudeImportance" in text and "export_onnx" in text
        if fw in ("keras", "tensorflow"):
            assert "WHAT IS NOT SUPPORTED" in text and "NotImplementedError" in text
    capsys.readouterr()


def test_channel_time_model_matches_thinned_macs(demo_model, tmp_path):
    """The time model's MACs of a per-group config equal the MACs counted on the thinned file."""
    from sparsify_tui.analysis.channels import analyze_channels, node_channel_factors, node_fraction, round_kept
    from sparsify_tui.engine.thinning import thin_model

    _m, analysis, groups = analyze_channels(demo_model, 1, DIMS)
    nodes = node_channel_factors(groups, analysis)
    rng = np.random.default_rng(0)
    ratios = {g.id: float(rng.choice([0.0, 0.25, 0.5])) for g in groups.groups if g.prunable and not g.first_layer}
    kf = {g: round_kept(groups.group(g).channels, r, 8) / groups.group(g).channels for g, r in ratios.items() if r}
    res = thin_model(demo_model, tmp_path / "t.onnx", ratios=ratios, round_to=8, dims=DIMS, check=False)
    other = analysis.totals["macs"] - sum(n.macs for n in nodes)
    assert other + sum(n.macs * node_fraction(n, kf) for n in nodes) == pytest.approx(res.macs_after, rel=1e-9)


def test_exactness_measures_bounded_outputs_against_their_range():
    from sparsify_tui.engine.thinning import exactness_figure

    outs = {"prob": {"max_abs": 9e-8, "ref_max_abs": 2e-7}, "logits": {"max_abs": 1e-5, "ref_max_abs": 41.0}}
    assert exactness_figure(outs, {"prob"}) == pytest.approx(1e-5 / 41.0)
    assert exactness_figure(outs, set()) == pytest.approx(0.45)
    # a Softmax over large logits moves by at most the logits' own (compared) change
    outs = {"prob": {"max_abs": 1.6e-4, "ref_max_abs": 1.0}, "logits": {"max_abs": 2.4e-3, "ref_max_abs": 1100.0}}
    assert exactness_figure(outs, {"prob": "logits"}) == pytest.approx(2.4e-3 / 1100.0)
    assert exactness_figure(outs, {"prob": None}) == exactness_figure(outs, {"prob"}) == pytest.approx(1.6e-4)


@pytest.mark.realmodels
def test_single_group_thinning_of_the_detector_is_exact(tmp_path):
    """PP-OCRv4 det: each of these groups thinned alone (per-group ratios, as allocations make them) used to fail
    the exactness check on the saturated probability map; the logits agree, and so does the check now."""
    from conftest import shared_model

    from sparsify_tui.engine.thinning import EXACTNESS_TOLERANCE, thin_model

    det = shared_model("ch_PP-OCRv4_det_infer.onnx")
    for gid in ("conv2d_153.w_0", "conv2d_132.w_0", "conv2d_417.w_0"):
        res = thin_model(det, tmp_path / "d.onnx", ratios={gid: 0.5}, dims={"x:2": 320, "x:3": 320}, samples=1)
        assert any(g.kept < g.channels for g in res.groups)
        assert res.exactness_max_rel_diff <= EXACTNESS_TOLERANCE


def test_the_code_header_says_what_each_variant_does_with_onnx_names(workspace_home, demo_model):
    """Issue 24 friction: the SparseML variant's header said the weight names "are mapped to your training model's
    modules" where it maps nothing (Paddle names such as conv2d_4.w_0 pass through)."""
    from seeded_workspace import seed_demo

    from sparsify_tui.optimization.integration_channel import generate_channel_code
    from sparsify_tui.services.optimizations import get_optimization
    from sparsify_tui.store import Workspace

    ws = Workspace()
    rec = get_optimization(ws, seed_demo(ws, demo_model), "channel 1.5x")
    sparseml = generate_channel_code(rec, "pytorch")
    header = sparseml.split("\nimport", 1)[0]
    assert "mapped to your training" not in header
    assert "SparseML looks" in header and "must match" in header
    plain = generate_channel_code(rec, "pytorch-plain").split("\nimport", 1)[0]
    assert "resolve_layers() maps each to a module" in plain and "def resolve_layers" in generate_channel_code(
        rec, "pytorch-plain")
