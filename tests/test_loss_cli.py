"""`sparsify-tui profile loss` (issue 4 item 4): JSON shape for a model path and a project, errors."""

from __future__ import annotations

import json

import numpy as np

from sparsify_tui.cli import main
from sparsify_tui.services.projects import create_project

LAYER_KEYS = {"id", "weight_name", "params", "prunable_params", "sparsity", "sensitivity", "int8_sensitivity"}


def run_json(capsys, *argv) -> dict:
    assert main(["profile", "loss", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_model_path_magnitude_json_without_a_workspace(capsys, demo_model, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSIFY_TUI_HOME", str(tmp_path / "never-created"))
    d = run_json(capsys, str(demo_model), "--name", "mag", "--int8")
    assert set(d) == {"profile", "layers"}
    p = d["profile"]
    assert p["name"] == "mag" and p["method"] == "magnitude" and p["metric"] == "magnitude"
    assert len(p["levels"]) == 100 and p["total_params"] == 133628  # the FLOPS profile's params (one definition)
    assert len(d["layers"]) == 54 and LAYER_KEYS <= set(d["layers"][0])
    layer = d["layers"][10]
    vals = list(layer["sensitivity"].values())
    assert vals == sorted(vals)  # magnitude curves are non-decreasing
    assert layer["int8_sensitivity"] > 0
    assert not (tmp_path / "never-created").exists()


def test_model_path_one_shot_json(capsys, demo_model):
    d = run_json(capsys, str(demo_model), "--method", "one-shot", "--levels", "0.2,0.99", "--batches", "1",
                 "--dim", "x:2=48", "--dim", "x:3=192")
    p = d["profile"]
    assert p["method"] == "one-shot" and p["metric"] == "kl" and p["levels"] == [0.2, 0.99]
    assert p["settings"]["batches"] == 1 and p["settings"]["dims"] == {"x:2": 48, "x:3": 192}
    assert list(d["layers"][0]["sensitivity"]) == ["0.2", "0.99"]
    total = {k: sum(x["sensitivity"][k] for x in d["layers"]) for k in ("0.2", "0.99")}
    assert total["0.99"] > total["0.2"]


def test_project_one_shot_is_stored_and_approximated_is_available(capsys, workspace_home, demo_model):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims={"x:2": 48, "x:3": 192})["id"]
    d = run_json(capsys, "demo", "--method", "one-shot", "--levels", "0.5", "--batches", "1", "--name", "os")
    assert d["profile"]["name"] == "os"
    recs = ws.list_records(pid, "loss_profiles")
    assert [r["name"] for r in recs] == ["os"]
    stored = ws.read_blob(pid, f"loss_profiles/{recs[0]['id']}.json")
    assert stored["layers"] == d["layers"]
    assert d["profile"]["extras"]["record_id"] == recs[0]["id"]  # the printed profile names its record
    a = run_json(capsys, "demo", "--method", "approximated")
    assert a["profile"]["method"] == "approximated" and len(a["layers"]) == len(d["layers"])
    assert len(ws.list_records(pid, "loss_profiles")) == 1  # approximated is never stored


def test_errors_exit_2_with_one_line(capsys, demo_model, tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, image=np.zeros((2, 3, 48, 192), np.float32))
    assert main(["profile", "loss", str(demo_model), "--method", "one-shot", "--data", str(bad),
                 "--dim", "x:2=48", "--dim", "x:3=192"]) == 2
    err = capsys.readouterr().err.strip()
    assert "image" in err and len(err.splitlines()) == 1
    assert main(["profile", "loss", str(demo_model), "--levels", "0.5,1.5"]) == 2
    assert "levels" in capsys.readouterr().err
    assert main(["profile", "loss", str(tmp_path / "missing.onnx")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_project_name_that_is_also_a_folder_here_is_the_project(capsys, workspace_home, demo_model, tmp_path,
                                                                   monkeypatch):
    """Issue 24 friction: with a folder `demo` in the current directory, `profile loss demo` said "demo is a
    directory, not an ONNX model"; the project wins, and a folder that is no project says both readings."""
    from sparsify_tui.store import Workspace

    ws = Workspace()
    create_project(ws, str(demo_model), "demo", dims={"x:2": 48, "x:3": 192})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo").mkdir()
    (tmp_path / "det").mkdir()
    out = run_json(capsys, "demo", "--method", "magnitude")
    assert out["profile"]["method"] == "magnitude"
    assert len(ws.list_records(ws.get_project("demo")["id"], "loss_profiles")) == 1
    assert main(["profile", "loss", "det", "--method", "magnitude"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "det is a folder here, not an ONNX model, and no project is named 'det'" in err[0]
