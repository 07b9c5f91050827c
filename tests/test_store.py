"""Workspace: projects, records, blobs, atomic writes and two real processes writing at once."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import pytest

from sparsify_tui.errors import ModelError, ProjectError, RecordNotFound
from sparsify_tui.store import Workspace
from sparsify_tui.store.db import SCHEMA_VERSION
from sparsify_tui.services.projects import create_project

DEMO_DIMS = {"x:2": 48, "x:3": 192}


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(tmp_path / "ws")


@pytest.fixture
def project(ws, demo_model) -> dict:
    return create_project(ws, demo_model, "demo", "the demo", dims=DEMO_DIMS)


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_create_copies_model_records_sha_and_analysis(ws, project, demo_model):
    pid = project["id"]
    copy = ws.model_path(pid)
    assert copy.is_file() and copy.parent.parent == ws.project_dir(pid)
    assert copy.read_bytes() == demo_model.read_bytes()
    assert project["model"]["sha256"] == _sha256(demo_model)
    assert project["model"]["linked"] is False
    assert project["model"]["params"] > 0 and project["model"]["flops"] >= 2 * project["model"]["macs"] > 0
    analysis = ws.analysis_of(pid)
    assert analysis["totals"]["params"] == project["model"]["params"]
    assert project["setup"]["dims"] == DEMO_DIMS and project["setup"]["batch_size"] == 1
    assert project["setup"]["core_count"] >= 1 and project["setup"]["perf_name"] == "baseline"
    assert project["training"]["optimizer"] == "SGD"
    # returned dicts are plain dicts, and a fresh Workspace object sees the same data
    again = Workspace(ws.root).get_project(pid)
    assert type(again) is dict and again == project
    assert ws.get_project("DEMO")["id"] == pid


def test_link_references_model_in_place(ws, demo_model):
    p = create_project(ws, demo_model, "linked", link=True, dims=DEMO_DIMS)
    assert p["model"]["linked"] is True
    assert ws.model_path(p["id"]) == demo_model.resolve()
    assert not (ws.project_dir(p["id"]) / "model").exists()
    assert ws.project_size_bytes(p["id"]) < demo_model.stat().st_size


def test_external_data_files_are_copied(ws, tmp_path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 64])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    src = tmp_path / "src"
    src.mkdir()
    onnx.save_model(model, src / "ext.onnx", save_as_external_data=True, location="ext.data", size_threshold=0)
    p = create_project(ws, src / "ext.onnx", "ext")
    copied = ws.model_path(p["id"])
    assert (copied.parent / "ext.data").read_bytes() == (src / "ext.data").read_bytes()
    # the copy loads on its own once the source folder is gone
    import shutil

    shutil.rmtree(src)
    loaded = onnx.load(str(copied))
    assert numpy_helper.to_array(loaded.graph.initializer[0]).sum() == 64 * 64


def test_bad_model_leaves_nothing(ws, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a model")
    with pytest.raises(ModelError):
        create_project(ws, bad, "bad")
    assert ws.list_projects() == []
    assert not ws.projects_dir.exists() or list(ws.projects_dir.iterdir()) == []


def test_names_are_unique_and_refs_resolve(ws, project, demo_model):
    with pytest.raises(ProjectError):
        create_project(ws, demo_model, "Demo", dims=DEMO_DIMS)
    other = create_project(ws, demo_model, "other", dims=DEMO_DIMS)
    with pytest.raises(ProjectError):
        ws.update_project(other["id"], name="demo")
    with pytest.raises(RecordNotFound):
        ws.get_project("nope")
    assert [p["name"] for p in ws.list_projects()] == ["demo", "other"]


def test_edit_name_description_and_training(ws, project):
    p = ws.update_project(project["id"], name="renamed", description="d", optimizer="adam", epochs=30,
                          init_lr=0.05, final_lr=1e-5)
    assert p["name"] == "renamed" and p["description"] == "d"
    assert p["training"] == {"optimizer": "Adam", "epochs": 30, "init_lr": 0.05, "final_lr": 1e-5}
    assert p["modified"] >= project["modified"]
    assert ws.get_project("renamed") == p
    for bad in ({"epochs": 0}, {"init_lr": -1}, {"optimizer": "Lion"}, {"name": " "}, {"id": "x"}):
        with pytest.raises(ProjectError):
            ws.update_project(project["id"], **bad)


def test_records_and_blobs(ws, project):
    pid = project["id"]
    rec = ws.add_record(pid, "perf_profiles", {"name": "baseline", "batch_size": 1})
    assert {"id", "created", "modified"} <= set(rec)
    ws.write_blob(pid, f"perf_profiles/{rec['id']}.json", {"nodes": list(range(5))})
    assert ws.read_blob(pid, f"perf_profiles/{rec['id']}.json") == {"nodes": [0, 1, 2, 3, 4]}
    assert ws.find_record(pid, "perf_profiles", "baseline")["id"] == rec["id"]
    with pytest.raises(RecordNotFound, match=r"no perf_profiles record 'basline' .*: use a name or id of one of "
                                             r"its 1: 'baseline'$"):
        ws.find_record(pid, "perf_profiles", "basline")  # the error names what there is, not a command to find it
    with pytest.raises(RecordNotFound, match="no loss_profiles record 'x' .*: it has none yet$"):
        ws.find_record(pid, "loss_profiles", "x")
    upd = ws.update_record(pid, "perf_profiles", rec["id"], name="b2")
    assert upd["name"] == "b2" and ws.get_record(pid, "perf_profiles", rec["id"])["name"] == "b2"
    assert ws.count_records(pid)["perf_profiles"] == 1
    ws.delete_record(pid, "perf_profiles", rec["id"])
    assert ws.list_records(pid, "perf_profiles") == []
    with pytest.raises(RecordNotFound):
        ws.read_blob(pid, f"perf_profiles/{rec['id']}.json")
    with pytest.raises(ProjectError):
        ws.add_record(pid, "nope", {})
    with pytest.raises(ProjectError):
        ws.write_blob(pid, "../../escape.json", {})


def test_delete_project_removes_folder_and_index(ws, project):
    d = ws.project_dir(project["id"])
    ws.delete_project(project["id"])
    assert not d.exists()
    assert ws.list_projects() == []
    with pytest.raises(RecordNotFound):
        ws.get_project(project["id"])


def test_schema_version_stored_and_newer_refused(ws, project):
    data = json.loads(ws.db_path.read_text())
    assert data["meta"]["1"]["schema_version"] == SCHEMA_VERSION
    data["meta"]["1"]["schema_version"] = SCHEMA_VERSION + 1
    ws.db_path.write_text(json.dumps(data))
    with pytest.raises(ProjectError, match="newer"):
        ws.list_projects()


def _writer(root: str, pid: str, tag: str, n: int, start) -> None:
    ws = Workspace(root)
    start.wait()
    for i in range(n):
        ws.add_record(pid, "benchmarks", {"name": f"{tag}-{i}"})
        ws.update_project(pid, description=f"{tag}-{i}")
        ws.add_job({"id": f"{tag}-{i}", "project_id": pid, "status": "pending"})


def _reader(root: str, pid: str, stop) -> None:
    """Reads without the lock while others write: every file must always parse."""
    db = Path(root) / "projects" / pid / "project.json"
    wdb = Path(root) / "workspace.json"
    while not stop.is_set():
        for path in (db, wdb):
            json.loads(path.read_text())  # raises on a half-written file


def test_two_processes_writing_at_once_lose_nothing(ws, project):
    ctx = mp.get_context("spawn")
    start, stop = ctx.Event(), ctx.Event()
    n = 25
    writers = [ctx.Process(target=_writer, args=(str(ws.root), project["id"], tag, n, start)) for tag in "ab"]
    reader = ctx.Process(target=_reader, args=(str(ws.root), project["id"], stop))
    for p in writers + [reader]:
        p.start()
    start.set()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    stop.set()
    reader.join(30)
    assert reader.exitcode == 0, "a reader saw a half-written file"
    names = {r["name"] for r in ws.list_records(project["id"], "benchmarks")}
    assert names == {f"{t}-{i}" for t in "ab" for i in range(n)}
    assert {j["id"] for j in ws.list_jobs(project["id"])} == names
    assert ws.get_project(project["id"])["description"] in {"a-24", "b-24"}
    leftovers = [f for f in ws.project_dir(project["id"]).iterdir() if f.name.endswith(".tmp")]
    assert leftovers == []


def test_two_optimization_edits_at_once_both_land(workspace_home, demo_model, monkeypatch):
    """Two edits of one optimization from two threads at the same time (the TUI turns INT8 on, then keeps a layer
    FP32 before the first edit is stored): both are stored. Each is one locked read-modify-write; before, the
    later writer wrote back the state it had read before the first was stored, and the first edit was lost."""
    import threading
    import time

    from sparsify_tui.optimization import core
    from sparsify_tui.services import optimizations
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims={"x:2": 48, "x:3": 192})["id"]
    opt = optimizations.create_optimization(ws, pid, "base", sparsity=0.5)
    first_layer = opt.layers[0].node_id
    real = core.change_schedule

    def slow(rec, **changes):  # each edit takes a while to compute, so the two overlap
        time.sleep(0.3)
        return real(rec, **changes)

    monkeypatch.setattr(core, "change_schedule", slow)
    edits = [{"quantization": {"enabled": True}}, {"quantization": {"excluded": [first_layer]}}]
    threads = [threading.Thread(target=optimizations.update_schedule, args=(ws, pid, "base"), kwargs=e)
               for e in edits]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    q = optimizations.get_optimization(ws, pid, "base").quantization
    assert q.enabled and q.excluded == [first_layer]
