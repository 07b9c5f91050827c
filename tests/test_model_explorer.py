"""Per-node overlays for Model Explorer: ``profile export --format model-explorer``.

The node ids must be the ones the ``model-explorer-onnx`` adapter gives the graph. The first tests pin them on a
model built to exercise every renaming rule (the expected ids were read from the real adapter 0.4.2). The last test
runs the real packages (``ai-edge-model-explorer`` + ``model-explorer-onnx``): every value's node id must exist in
the adapter's graph of the same id, and every file must load into ``model_explorer.node_data_builder``'s classes.
They are not a dependency of sparsify-tui: the test uses them when importable here, or through the Python named by
``$SPARSIFY_TUI_MODEL_EXPLORER_PYTHON`` (a separate venv), and skips otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from compare_fixtures import DEMO_DIMS, edge_model, profile_from_analysis
from conftest import SHARED_MODELS

from sparsify_tui.cli import main
from sparsify_tui.profiling.model_explorer import model_explorer_ids
from sparsify_tui.profiling.perf import fill_scaled
from sparsify_tui.services.profiles import store_perf_profile
from sparsify_tui.services.projects import create_project

#: our node id -> (Model Explorer graph id, node id), read from model-explorer-onnx 0.4.2 on edge_model()
EDGE_IDS = {
    "r0": ("", "node"), "dup": ("", "dup"), "dup2": ("", "dup2"), "outer": ("", "outer"),
    "add": ("", "outer/else_branch/add"), "inner": ("", "outer/then_branch/inner"),
    "add#1": ("", "outer/then_branch/inner/else_branch/add"), "add#2": ("", "outer/then_branch/inner/then_branch/add"),
    "ot_out": ("", "outer/then_branch/node"), "loop_out": ("", "node_1"),
    "c_out": ("node_1/body", "node"), "v1": ("node_1/body", "node_2"), "bif": ("node_1/body", "node_3"),
    "add#3": ("node_1/body", "node_3/else_branch/add"), "add#4": ("node_1/body", "node_3/then_branch/add"),
    "node": ("node_1/body", "node_4"), "inner_loop": ("node_1/body", "inner_loop"),
    "c2o": (None, None), "v2o": (None, None),  # a Loop inside a Loop body: not converted by the adapter
    "y": ("", "node_6"),
}


@pytest.fixture
def ws(workspace_home):
    from sparsify_tui.store import Workspace

    return Workspace()


def export(ws, capsys, project: str, out: Path, *extra) -> dict:
    capsys.readouterr()
    assert main(["profile", "export", project, "b1", "--format", "model-explorer", "-o", str(out), "--json",
                 *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_ids_follow_the_adapter_on_every_renaming_rule(ws, capsys, tmp_path):
    model = edge_model(tmp_path / "edge.onnx")
    pid = create_project(ws, str(model), name="edge")["id"]
    prof = profile_from_analysis(ws.analysis_of(pid), "b1")
    for n in prof.nodes:  # every node gets time, so every one is in the ms overlay
        n.time_ms = n.time_ms or 0.001 * (n.index + 1)
    fill_scaled(prof)
    store_perf_profile(ws, pid, prof)
    res = export(ws, capsys, "edge", tmp_path / "nodes.json")
    ms = json.loads((tmp_path / "nodes.json").read_text())
    placed = {gid: set(g["results"]) for gid, g in ms.items()}
    for ours, (gid, me_id) in EDGE_IDS.items():
        if gid is None:
            assert ours in res["not_on_graph"]
        else:
            assert me_id in placed[gid], (ours, gid, me_id)
    assert set(res["not_on_graph"]) == {"c2o", "v2o", "[layout conversion]", "[quantize/dequantize]",
                                        "[unattributed]"}
    inner_add = "outer/then_branch/inner/else_branch/add"  # our "add#1": the second node named "add"
    assert ms[""]["results"][inner_add]["value"] == round(next(prof.node_ms(n) for n in prof.nodes if n.id == "add#1"),
                                                          4)
    assert res["nodes"] == sum(len(v) for v in placed.values()) == len(EDGE_IDS) - 2


def test_main_graph_without_a_name_is_main(tmp_path):
    import onnx

    model = onnx.load(str(edge_model(tmp_path / "edge.onnx")))
    model.graph.ClearField("name")
    graphs = {e.graph_id for e in model_explorer_ids(model) if e.graph_id is not None}
    assert graphs == {"<main>", "node_1/body"}


def test_overlays_of_the_demo(ws, capsys, tmp_path, demo_model):
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    prof = profile_from_analysis(ws.analysis_of(pid), "b1")
    store_perf_profile(ws, pid, prof)
    res = export(ws, capsys, "demo", tmp_path / "demo.json")
    assert set(res["files"]) == {"ms", "share", "int8_ratio", "sensitivity"}
    assert res["files"]["share"] == str(tmp_path / "demo.share.json") and res["loss_profile"] == "Approximated"
    assert res["command"].startswith("model-explorer --extensions=model_explorer_onnx ")
    assert str(ws.model_path(pid)) in res["command"] and "--node_data_paths=" in res["command"]
    docs = {m: json.loads(Path(p).read_text()) for m, p in res["files"].items()}
    (gid, graph), = docs["ms"].items()
    assert gid == "paddle-onnx"
    conv = next(n for n in prof.nodes if n.op_type == "Conv" and n.time_ms > 0)
    # the node times every screen shows: scaled to the measured median (FP32 and INT8 each to their own)
    assert graph["results"][conv.id]["value"] == round(prof.node_ms(conv), 4)
    assert docs["int8_ratio"][gid]["results"][conv.id]["value"] == pytest.approx(
        0.4 * prof.int8_scale / prof.scale, abs=1e-3)
    assert sum(r["value"] for r in docs["share"][gid]["results"].values()) == pytest.approx(
        100 * (1 - sum(n.time_ms for n in prof.nodes if n.id.startswith("[")) / prof.total_node_ms), abs=0.05)
    assert "gradient" in graph and "thresholds" in docs["int8_ratio"][gid]
    # bad input: one line, nothing written
    capsys.readouterr()
    assert main(["profile", "export", "demo", "b1", "--format", "model-explorer", "-o", str(tmp_path / "x.txt")]) == 2
    assert "must end in .json" in capsys.readouterr().err
    assert not (tmp_path / "x.txt").exists()


# ------------------------------------------------------------------------------------------ the real package
CHECKER = r'''
import json, sys
from model_explorer import node_data_builder as ndb
from model_explorer_onnx.main import ONNXAdapter

model, files = sys.argv[1], sys.argv[2:]
graphs = {g.id: {n.id for n in g.nodes} for g in ONNXAdapter().convert(model, {})["graphs"]}
missing, placed = [], 0
for path in files:
    doc = json.load(open(path))
    built = {}
    for gid, g in doc.items():
        if gid not in graphs:
            missing.append([path, gid, None])
            continue
        for nid in g["results"]:
            if nid in graphs[gid]:
                placed += 1
            else:
                missing.append([path, gid, nid])
        built[gid] = ndb.GraphNodeData(
            results={k: ndb.NodeDataResult(**v) for k, v in g["results"].items()}, name=g.get("name"),
            gradient=[ndb.GradientItem(**x) for x in g.get("gradient", [])],
            thresholds=[ndb.ThresholdItem(**x) for x in g.get("thresholds", [])])
    back = json.loads(ndb.ModelNodeData(graphsData=built).to_json_string())
    for gid, g in doc.items():
        for key in g:
            assert back[gid][key] == g[key], (path, gid, key)
print(json.dumps({"missing": missing, "placed": placed, "graphs": sorted(graphs)}))
'''


def model_explorer_python() -> str:
    try:
        import model_explorer  # noqa: F401
        import model_explorer_onnx  # noqa: F401

        return sys.executable
    except ImportError:
        pass
    exe = os.environ.get("SPARSIFY_TUI_MODEL_EXPLORER_PYTHON")
    if exe and Path(exe).is_file():
        return exe
    pytest.skip("ai-edge-model-explorer and model-explorer-onnx are not installed "
                "(set SPARSIFY_TUI_MODEL_EXPLORER_PYTHON to a Python that has them)")


def check_with_model_explorer(model: Path, files: list, tmp_path: Path) -> dict:
    script = tmp_path / "check_me.py"
    script.write_text(CHECKER)
    proc = subprocess.run([model_explorer_python(), str(script), str(model), *map(str, files)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _models(tmp_path, demo_model) -> list:
    out = [("edge", edge_model(tmp_path / "edge.onnx"), {}), ("demo", demo_model, DEMO_DIMS)]
    for name, dims in (("silero_vad.onnx", {"input:1": 512, "sr": 16000}), ("mobilenet_v2.onnx", {})):
        if (SHARED_MODELS / name).is_file():
            out.append((name.split(".")[0], SHARED_MODELS / name, dims))
    return out


def test_node_data_loads_in_the_real_model_explorer(ws, capsys, tmp_path, demo_model):
    model_explorer_python()  # skip early
    for name, path, dims in _models(tmp_path, demo_model):
        pid = create_project(ws, str(path), name=name, dims=dims)["id"]
        prof = profile_from_analysis(ws.analysis_of(pid), "b1")
        for n in prof.nodes:
            n.time_ms = n.time_ms or 0.001
        store_perf_profile(ws, pid, prof)
        res = export(ws, capsys, name, tmp_path / f"{name}.json")
        out = check_with_model_explorer(ws.model_path(pid), list(res["files"].values()), tmp_path)
        assert out["missing"] == [], (name, out["missing"][:5])
        assert out["placed"] >= res["nodes"] * 2 > 0, name  # ms and share at least, every node on the graph
