"""Compare two perf profiles per node, two loss profiles per layer, optimizations side by side; export and import
profiles across workspaces. Through the CLI (``main([...])``) and the services, on stored profiles (nothing
measured) and, for realism, on profiles measured on the bundled demo model."""

from __future__ import annotations

import json

import pytest
from compare_fixtures import DEMO_DIMS, profile_from_analysis, tiny_model

from sparsify_tui.engine.run import RunSpec
from sparsify_tui.cli import main
from sparsify_tui.profiling.perf_compare import compare_perf
from sparsify_tui.profiling.perf import Int8Profile, fill_scaled
from sparsify_tui.services.profiles import store_perf_profile
from sparsify_tui.services.projects import create_project


@pytest.fixture
def ws(workspace_home):
    from sparsify_tui.store import Workspace

    return Workspace()


def run_json(capsys, *argv):
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def run_error(capsys, *argv) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("sparsify-tui: error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


@pytest.fixture
def demo(ws, demo_model):
    """The demo project with profiles b1 and b8 (B: 3-7× the time of A per node, batch 8)."""
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    analysis = ws.analysis_of(pid)
    a = profile_from_analysis(analysis, "b1")
    b = profile_from_analysis(analysis, "b8", scale=5.0, batch_size=8)
    for i, n in enumerate(b.nodes):
        n.time_ms *= 1 + (i % 3) * 0.5
    fill_scaled(b)  # the times changed: their scaled figures too
    store_perf_profile(ws, pid, a)
    store_perf_profile(ws, pid, b)
    return pid, a, b


def test_rows_add_up_to_each_total_and_match_the_stored_times(capsys, demo):
    """Per-node times are the profile's, scaled to its measured median as every screen shows them (the profiled
    pass's raw figures include the profiler's overhead), so each column adds up to that side's latency."""
    pid, a, b = demo
    d = run_json(capsys, "compare", "demo", "b1", "b8", "--json")
    assert set(d) >= {"a", "b", "rows", "totals"}
    assert {"id", "op_type", "a_ms", "b_ms", "ratio", "matched"} <= set(d["rows"][0])
    assert len(d["rows"]) == len(a.nodes)  # nothing dropped
    assert sum(r["a_ms"] or 0 for r in d["rows"]) == pytest.approx(a.latency_ms.median)
    assert sum(r["b_ms"] or 0 for r in d["rows"]) == pytest.approx(b.latency_ms.median)
    assert d["totals"]["a_ms"] == pytest.approx(a.latency_ms.median)
    assert d["totals"]["b_ms"] == pytest.approx(b.latency_ms.median)
    assert d["totals"]["a_latency_ms"] == a.latency_ms.median
    assert d["totals"]["b_latency_ms"] == b.latency_ms.median
    by_a, by_b = {n.id: n for n in a.nodes}, {n.id: n for n in b.nodes}
    for r in d["rows"]:
        assert r["a_ms"] == pytest.approx(a.node_ms(by_a[r["id"]])) and r["b_ms"] == pytest.approx(b.node_ms(by_b[r["id"]]))
        assert r["a_ms"] == pytest.approx(by_a[r["id"]].time_ms * a.scale)  # the raw time × the profile's scale
        if r["a_ms"] > 0:
            assert r["ratio"] == pytest.approx(r["b_ms"] / r["a_ms"])
    # node groups as in Layer Summaries: per op type, the same sums
    assert {g["name"]: g["a_ms"] for g in d["groups"]} == pytest.approx(a.op_type_totals("baseline"))
    assert d["a"]["batch_size"] == 1 and d["b"]["batch_size"] == 8 and d["a"]["target"]["hostname"] == "server-a"
    # the special rows are listed, as unmatched
    specials = [r for r in d["rows"] if r["id"].startswith("[")]
    assert len(specials) == 3 and not any(r["matched"] for r in specials)
    assert all(r["status"] == "not a node" for r in specials)
    assert any("batch 1 vs 8" in n for n in d["notes"])


def test_fp32_vs_int8_of_one_profile(capsys, demo):
    pid, a, _ = demo
    d = run_json(capsys, "compare", "demo", "b1", "b1:int8", "--json")
    assert d["a"]["view"] == "fp32" and d["b"]["view"] == "int8" and d["b"]["label"] == "b1 INT8"
    assert sum(r["b_ms"] for r in d["rows"]) == pytest.approx(a.int8_ms)  # the INT8 time the summary shows
    assert d["totals"]["b_latency_ms"] == pytest.approx(a.int8_ms)
    conv = next(r for r in d["rows"] if r["op_type"] == "Conv")
    assert conv["ratio"] == pytest.approx(0.4 * a.int8_scale / a.scale) and conv["matched"]
    text = main(["compare", "demo", "b1", "b1:int8"])
    out = capsys.readouterr().out
    assert text == 0 and "B: b1 INT8" in out and "per op type:" in out and "unmatched rows: 3" in out


def test_fused_differently_and_removed_nodes_are_listed_never_dropped(demo_model, ws):
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    analysis = ws.analysis_of(pid)
    a = profile_from_analysis(analysis, "a")
    b = profile_from_analysis(analysis, "b")
    conv = next(n for n in b.nodes if n.op_type == "Conv" and n.time_ms > 0)
    fused = next(n for n in b.nodes if n.fused_into == conv.id)   # 0 ms in both, covered by conv's kernel
    # in B, the fused node gets its own kernel and takes 0.01 ms from the Conv: fused differently
    fused.time_ms, conv.time_ms = 0.01, conv.time_ms - 0.01
    fused.kernels = [f"k{fused.id}"]
    # in B, another timed node has no kernel at all: removed (folded away) in B
    gone = next(n for n in b.nodes if n.op_type != "Conv" and n.time_ms > 0 and not n.id.startswith("[")
                and n is not fused)
    gone.time_ms, gone.kernels = 0.0, []
    fill_scaled(b)
    cmp = compare_perf(a, b)
    rows = {r.id: r for r in cmp.rows}
    assert rows[fused.id].status == "fused differently" and not rows[fused.id].matched
    assert rows[gone.id].status == "removed in B" and rows[gone.id].b_ms == 0.0
    group = cmp.fusion_groups[rows[fused.id].group]
    assert conv.id in group.ids and fused.id in group.ids
    # the time moved inside the group: the same profiled time on both sides (each scaled to its own median)
    assert group.a_ms / a.scale == pytest.approx(group.b_ms / b.scale)
    assert sum(r.a_ms for r in cmp.rows) == pytest.approx(a.latency_ms.median)
    assert sum(r.b_ms for r in cmp.rows) == pytest.approx(b.latency_ms.median)
    assert cmp.unmatched["rows"] == 2 + 3
    d = cmp.to_dict()
    assert d["unmatched"]["by_status"] == {"fused differently": 1, "removed in B": 1, "not a node": 3}


def test_two_projects_are_matched_by_node_id(capsys, ws, tmp_path):
    """Different models (Add vs Mul at the end): conv0 and relu0 match by id, last0 differs, nothing is dropped."""
    p1 = create_project(ws, str(tiny_model(tmp_path / "m1.onnx", "Add")), name="one")["id"]
    p2 = create_project(ws, str(tiny_model(tmp_path / "m2.onnx", "Mul")), name="two")["id"]
    a = profile_from_analysis(ws.analysis_of(p1), "base")
    b = profile_from_analysis(ws.analysis_of(p2), "base", scale=2.0, hostname="server-b")
    store_perf_profile(ws, p1, a)
    store_perf_profile(ws, p2, b)
    d = run_json(capsys, "compare", "one", "base", "base", "--project-b", "two", "--json")
    rows = {r["id"]: r for r in d["rows"]}
    assert rows["conv0"]["matched"] and rows["conv0"]["ratio"] == pytest.approx(2.0)
    assert rows["last0"]["status"] == "op type differs" and rows["last0"]["op_type"] == "Add/Mul"
    assert d["a"]["label"] == "one/base" and d["b"]["label"] == "two/base"
    assert d["b"]["target"]["hostname"] == "server-b"
    assert any("different models" in n for n in d["notes"])
    assert sum(r["b_ms"] or 0 for r in d["rows"]) == pytest.approx(b.latency_ms.median)


def test_compare_bad_input_one_line(capsys, demo):
    assert "compare needs two profiles" in run_error(capsys, "compare", "demo", "b1")
    assert "no perf_profiles record 'nope'" in run_error(capsys, "compare", "demo", "b1", "nope")
    assert "no project 'ghost'" in run_error(capsys, "compare", "ghost", "b1", "b8")
    assert "not both" in run_error(capsys, "compare", "demo", "b1", "b8", "--optimizations", "x,y")
    assert "--top" in run_error(capsys, "compare", "demo", "b1", "b8", "--top", "-1")


def test_int8_view_without_int8_is_refused(capsys, demo, ws):
    pid, a, _ = demo
    a.name, a.int8 = "noint8", Int8Profile(enabled=False)
    for n in a.nodes:
        n.int8_time_ms = None
    store_perf_profile(ws, pid, a)
    err = run_error(capsys, "compare", "demo", "noint8", "noint8:int8")
    assert "has no INT8 measurement" in err


def test_loss_profiles_per_layer_with_rank_change(capsys, ws, demo_model):
    from sparsify_tui.profiling.loss import LossProfile
    from sparsify_tui.services.profiles import store_loss_profile

    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    a = run_json(capsys, "profile", "loss", "demo", "--name", "mag", "--json")
    prof = LossProfile.from_dict(a)
    # B: the same layers, the order of sensitivity reversed
    rev = LossProfile.from_dict(a)
    rev.name = "reversed"
    values = sorted(layer.value_at(0.9) for layer in prof.layers)
    order = sorted(range(len(rev.layers)), key=lambda i: -prof.layers[i].value_at(0.9))
    for rank, i in enumerate(order):
        rev.layers[i].sensitivity = {"0.0": 0.0, "0.9": values[rank]}
    store_loss_profile(ws, pid, rev)
    d = run_json(capsys, "compare", "demo", "mag", "reversed", "--loss", "--level", "0.9", "--json")
    assert d["kind"] == "loss" and d["level"] == 0.9 and len(d["rows"]) == len(prof.layers)
    top = min(d["rows"], key=lambda r: r["a_rank"])
    assert top["a_rank"] == 1 and top["b_rank"] == len(prof.layers) and top["rank_change"] == 1 - len(prof.layers)
    assert top["a_value"] == pytest.approx(prof.layers[order[0]].value_at(0.9))
    assert d["rank_correlation"] == pytest.approx(-1.0)
    assert "is a loss profile: add --loss" in run_error(capsys, "compare", "demo", "mag", "reversed")
    same = run_json(capsys, "compare", "demo", "mag", "mag", "--loss", "--json")
    assert same["rank_correlation"] == pytest.approx(1.0) and all(r["rank_change"] == 0 for r in same["rows"])
    assert main(["compare", "demo", "mag", "approximated", "--loss"]) == 0
    out = capsys.readouterr().out
    assert "rank correlation" in out and "different metrics" in out
    assert "level must be in [0, 1)" in run_error(capsys, "compare", "demo", "mag", "mag", "--loss", "--level", "1.5")


def test_optimizations_side_by_side(capsys, ws, demo_model):
    from sparsify_tui.services.optimizations import copy_optimization, create_optimization, reevaluate

    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    create_optimization(ws, pid, "opt", sparsity=0.85)
    copy_optimization(ws, pid, "opt")
    reevaluate(ws, pid, "opt v2", sparsity=0.6)
    d = run_json(capsys, "compare", "demo", "--optimizations", "opt,opt v2", "--json")
    assert [o["name"] for o in d["optimizations"]] == ["opt", "opt v2"]
    settings = {r["key"]: r for r in d["settings"]}
    assert settings["sparsity"]["values"] == [0.85, 0.6] and settings["sparsity"]["differs"]
    assert not settings["balance"]["differs"]
    est = {r["key"]: r for r in d["estimates"]}
    assert est["avg_sparsity"]["values"][0] > est["avg_sparsity"]["values"][1]
    assert any(r["differs"] for r in d["layers"]) and all(len(r["sparsity"]) == 2 for r in d["layers"])
    assert d["measured"] == [{"applied": None, "benchmarks": []}] * 2
    assert main(["compare", "demo", "--optimizations", "opt,opt v2"]) == 0
    out = capsys.readouterr().out
    assert "*  sparsity" in out and "applied: not yet" in out
    assert "two or more" in run_error(capsys, "compare", "demo", "--optimizations", "opt")


# ------------------------------------------------------------------------------------------- export / import
def test_export_import_into_a_second_workspace_and_compare(capsys, demo, tmp_path, monkeypatch, demo_model):
    pid, a, _ = demo
    out = tmp_path / "b1.json"
    assert main(["profile", "export", "demo", "b1", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "sparsify-tui/perf-profile" and doc["model"]["sha256"]
    assert doc["machine"]["hostname"] == "server-a" and doc["settings"]["batch_size"] == 1
    assert len(doc["nodes"]) == len(a.nodes)
    # the second workspace: another machine, a project of the same model
    monkeypatch.setenv("SPARSIFY_TUI_HOME", str(tmp_path / "ws2"))
    from sparsify_tui.store import Workspace

    ws2 = Workspace()
    p2 = create_project(ws2, str(demo_model), name="here", dims=DEMO_DIMS)["id"]
    store_perf_profile(ws2, p2, profile_from_analysis(ws2.analysis_of(p2), "b1", scale=2.0, hostname="server-b"))
    rec = run_json(capsys, "profile", "import", "here", str(out), "--json")
    assert rec["name"] == "b1 (server-a)"  # b1 is taken here
    assert rec["imported"]["hostname"] == "server-a" and rec["imported"]["project"] == "demo"
    d = run_json(capsys, "compare", "here", "b1 (server-a)", "b1", "--json")
    assert d["a"]["target"]["hostname"] == "server-a" and d["b"]["target"]["hostname"] == "server-b"
    assert sum(r["a_ms"] for r in d["rows"]) == pytest.approx(a.latency_ms.median)
    conv = next(r for r in d["rows"] if r["op_type"] == "Conv" and r["a_ms"])
    assert conv["ratio"] == pytest.approx(2.0)
    # the exported JSON also goes to stdout
    again = run_json(capsys, "profile", "export", "here", "b1 (server-a)")
    assert again["nodes"] == doc["nodes"] and again["imported"]["hostname"] == "server-a"


def test_import_refuses_another_model_and_stores_nothing(capsys, demo, ws, tmp_path):
    out = tmp_path / "b1.json"
    assert main(["profile", "export", "demo", "b1", "-o", str(out)]) == 0
    other = create_project(ws, str(tiny_model(tmp_path / "tiny.onnx")), name="tiny")["id"]
    before = ws.list_records(other, "perf_profiles")
    err = run_error(capsys, "profile", "import", "tiny", str(out))
    assert "measured on another model" in err and "sha256" in err
    assert ws.list_records(other, "perf_profiles") == before == []
    assert not list((ws.project_dir(other)).glob("perf_profiles/*"))
    # a bad file, a missing file, a taken name: one line each, nothing stored
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    assert "not a sparsify-tui perf profile" in run_error(capsys, "profile", "import", "demo", str(bad))
    bad.write_text("{not json")
    assert "not valid JSON" in run_error(capsys, "profile", "import", "demo", str(bad))
    assert "does not exist" in run_error(capsys, "profile", "import", "demo", str(tmp_path / "nope.json"))
    assert "already exists" in run_error(capsys, "profile", "import", "demo", str(out), "--name", "b8")
    doc = json.loads(out.read_text())
    doc["nodes"] = doc["nodes"][1:]
    bad.write_text(json.dumps(doc))
    assert "do not match" in run_error(capsys, "profile", "import", "demo", str(bad))
    assert len(ws.list_records(ws.get_project("demo")["id"], "perf_profiles")) == 2


def test_export_bad_paths(capsys, demo, tmp_path):
    assert "does not exist" in run_error(capsys, "profile", "export", "demo", "b1", "-o", str(tmp_path / "no" / "x.json"))
    assert "is a folder" in run_error(capsys, "profile", "export", "demo", "b1", "-o", str(tmp_path))
    assert "needs -o" in run_error(capsys, "profile", "export", "demo", "b1", "--format", "model-explorer")
    assert list(tmp_path.iterdir()) == [tmp_path / "workspace"]  # nothing left behind


# ------------------------------------------------------------------------------------------- measured
def test_measured_demo_profiles_fp32_int8_and_batch(ws, demo_model):
    """Real profiles of the bundled model (b1 with INT8, b2): rows add up to each side's measured median (the stored
    times scaled to it), and every ratio is the ratio of the times each profile shows."""
    from sparsify_tui.profiling.perf import profile_performance
    from sparsify_tui.services.comparisons import compare_perf_profiles
    from sparsify_tui.services.profiles import load_perf_profile

    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    for name, batch, int8 in (("b1", 1, True), ("b2", 2, False)):
        prof = profile_performance(ws.model_path(pid), RunSpec(batch_size=batch, core_count=1), dims=DEMO_DIMS, warmup=1,
                                   iterations=6, int8=int8, name=name)
        assert prof.machine.hostname and prof.machine.cpu_model is not None
        store_perf_profile(ws, pid, prof)
    b1, b2 = load_perf_profile(ws, pid, "b1"), load_perf_profile(ws, pid, "b2")
    for spec_a, spec_b, pa, pb, key_b, median_b in (
            ("b1", "b1:int8", b1, b1, "int8", b1.int8_ms),
            ("b1", "b2", b1, b2, "baseline", b2.latency_ms.median)):
        cmp = compare_perf_profiles(ws, pid, spec_a, spec_b)
        assert sum(r.a_ms or 0 for r in cmp.rows) == pytest.approx(pa.latency_ms.median)
        assert sum(r.b_ms or 0 for r in cmp.rows) == pytest.approx(median_b)
        assert {r.id for r in cmp.rows} == {n.id for n in pa.nodes} | {n.id for n in pb.nodes}
        by_a = {n.id: pa.node_ms(n) for n in pa.nodes}
        by_b = {n.id: pb.node_ms(n, key_b) for n in pb.nodes}
        for r in cmp.rows:
            if r.ratio is not None:
                assert r.ratio == pytest.approx(by_b[r.id] / by_a[r.id])
    cmp = compare_perf_profiles(ws, pid, "b1", "b1:int8")
    # the INT8 side is on the FP32 median's clock: its latency over FP32's is the profile's one INT8 ratio
    assert cmp.totals["b_latency_ms"] == pytest.approx(b1.int8_ms)
    assert b1.latency_ms.median / cmp.totals["b_latency_ms"] == pytest.approx(b1.int8.speedup_interleaved)
    # the raw INT8 kernel times, scaled: the profiled pass's total maps onto the INT8 time
    assert sum(r.b_ms for r in cmp.rows) == pytest.approx(b1.int8.profiled.kernel_total_ms * b1.int8_scale)


def test_structure_row_fields_are_compared_too():
    """A structure's own per-layer fields (here kept channels, stored next to the shared ones) are compared like
    the sparsity."""
    from sparsify_tui.optimization.comparison import compare_optimizations

    def rec(rid, kept):
        return {"id": rid, "name": rid, "layers": [{"weight_name": "w0", "node_id": "conv0", "op_type": "Conv",
                                                   "params": 216, "sparsity": 0.5, "kept_channels": kept}]}

    cmp = compare_optimizations([rec("a", 8), rec("b", 4)])
    (row,) = cmp.layers
    assert row.sparsity == [0.5, 0.5] and row.extra == {"kept_channels": [8, 4]} and row.differs
    with pytest.raises(ValueError):
        compare_optimizations([rec("a", 8)])
