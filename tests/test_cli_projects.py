"""Project commands through the real CLI (`python -m sparsify_tui`) on a temp workspace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIMS = ["--dim", "x:2=48", "x:3=192"]


@pytest.fixture
def cli(workspace_home):
    env = dict(os.environ, SPARSIFY_TUI_HOME=str(workspace_home), PYTHONPATH=str(ROOT))

    def run(*args, ok=True):
        r = subprocess.run([sys.executable, "-m", "sparsify_tui", *map(str, args)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
        if ok:
            assert r.returncode == 0, r.stderr
        return r

    run.home = workspace_home
    return run


def _project_dirs(home: Path):
    d = home / "projects"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_create_list_show_edit_delete(cli, demo_model):
    created = json.loads(cli("create", demo_model, "--name", "ocr", "--description", "text dir", *DIMS, "--json").stdout)
    assert created["name"] == "ocr" and created["description"] == "text dir"
    assert created["model"]["file"] == "ppocr_cls.onnx" and len(created["model"]["sha256"]) == 64
    assert created["setup"]["dims"] == {"x:2": 48, "x:3": 192}
    assert _project_dirs(cli.home) == [created["id"]]

    listed = json.loads(cli("list", "--json").stdout)
    assert [p["id"] for p in listed] == [created["id"]]

    shown = json.loads(cli("show", "ocr", "--json").stdout)
    assert shown["id"] == created["id"]
    assert shown["size_bytes"] >= demo_model.stat().st_size
    assert shown["records"] == {"perf_profiles": 0, "loss_profiles": 0, "optimizations": 0, "benchmarks": 0}

    edited = json.loads(cli("edit", created["id"], "--name", "ocr2", "--optimizer", "Adam", "--epochs", "20",
                            "--init-lr", "0.001", "--final-lr", "0.00001", "--json").stdout)
    assert edited["name"] == "ocr2"
    assert edited["training"] == {"optimizer": "Adam", "epochs": 20, "init_lr": 0.001, "final_lr": 0.00001}
    assert json.loads(cli("show", "ocr2", "--json").stdout)["training"]["epochs"] == 20

    refused = cli("delete", "ocr2", ok=False)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert _project_dirs(cli.home) == [created["id"]]

    cli("delete", "ocr2", "--yes")
    assert json.loads(cli("list", "--json").stdout) == []
    assert _project_dirs(cli.home) == []
    missing = cli("show", "ocr2", ok=False)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1


def test_link_keeps_model_in_place(cli, demo_model):
    p = json.loads(cli("create", demo_model, "--name", "big", "--link", *DIMS, "--json").stdout)
    assert p["model"]["linked"] is True and p["model"]["path"] == str(demo_model.resolve())
    shown = json.loads(cli("show", "big", "--json").stdout)
    assert shown["size_bytes"] < demo_model.stat().st_size


def _tiny_model(path: Path, *, domain: str = "", external: bool = False) -> None:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "W")
    node = helper.make_node("MatMul", ["x", "W"], ["y"]) if not domain else \
        helper.make_node("Mystery", ["x", "W"], ["y"], domain=domain)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 8])], [w])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    if external:
        onnx.save_model(model, path, save_as_external_data=True, location="bad.data", size_threshold=0)
        (path.parent / "bad.data").unlink()
    else:
        onnx.save_model(model, path)


@pytest.mark.parametrize("kind", ["text", "empty", "missing", "directory", "truncated", "unknown_domain",
                                  "missing_external_data"])
def test_bad_model_exits_2_with_one_line_and_leaves_no_project(cli, tmp_path, demo_model, kind):
    path = tmp_path / "bad.onnx"
    if kind == "text":
        path.write_text("hello, not a model\n")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "directory":
        path.mkdir()
    elif kind == "truncated":
        path.write_bytes(demo_model.read_bytes()[:5000])
    elif kind == "unknown_domain":
        _tiny_model(path, domain="com.example.unknown")
    elif kind == "missing_external_data":
        _tiny_model(path, external=True)
    r = cli("create", path, "--name", "bad", "--json", ok=False)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and "bad.onnx" in lines[0]
    assert r.stdout == ""
    assert _project_dirs(cli.home) == []
    assert json.loads(cli("list", "--json").stdout) == []


def test_missing_dim_is_a_one_line_error_and_no_project(cli, demo_model):
    r = cli("create", demo_model, "--name", "nodims", ok=False)
    assert r.returncode == 2 and "--dim" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert _project_dirs(cli.home) == []


def test_duplicate_name_refused(cli, demo_model):
    cli("create", demo_model, "--name", "one", *DIMS)
    r = cli("create", demo_model, "--name", "one", *DIMS, ok=False)
    assert r.returncode == 2 and "already exists" in r.stderr
    assert len(json.loads(cli("list", "--json").stdout)) == 1


def test_demo_headless_creates_then_reuses(cli):
    first = json.loads(cli("demo", "--headless", "--no-profile", "--json").stdout)
    assert first["name"] == "demo" and first["model"]["file"] == "ppocr_cls.onnx"
    assert first["setup"]["dims"] == {"x:2": 48, "x:3": 192}
    assert first["model"]["flops"] > 0 and first["records"]["perf_profiles"] == 0
    second = json.loads(cli("demo", "--headless", "--no-profile", "--json").stdout)
    assert second["id"] == first["id"]
    assert len(json.loads(cli("list", "--json").stdout)) == 1


def test_demo_runs_the_baseline_profiles_once(cli):
    """The README's main command: the first `demo` measures the perf profile and the loss profile; the next reuses them."""
    first = cli("demo", "--headless", "--json")
    summary = json.loads(first.stdout)
    assert summary["records"]["perf_profiles"] == 1 and summary["records"]["loss_profiles"] == 1
    assert "baseline performance profile" in first.stderr and "100.0%" in first.stderr
    perf = json.loads(cli("job", "list", "--json").stdout)
    assert [j["type"] for j in perf if j["status"] == "completed"].count("perf_profile") == 1
    again = json.loads(cli("demo", "--headless", "--json").stdout)
    assert again["records"] == summary["records"]


def test_not_a_terminal_the_tui_refuses_and_the_demo_runs_headless(cli):
    """`sparsify-tui | tee log` and `sparsify-tui demo | tee log` (stdout a pipe): the TUI refuses with one line
    (exit 2); the demo does its work headless and prints its summary into the pipe."""
    r = cli(ok=False)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "the TUI needs a terminal (stdout is not a terminal)" in r.stderr
    r = cli("demo", "--no-profile", ok=False)
    assert r.returncode == 0, r.stderr
    assert "running the demo headless" in r.stderr
    assert r.stdout.startswith("demo (") and "ppocr_cls.onnx" in r.stdout and "\x1b[" not in r.stdout


def test_a_project_name_or_id_opens_that_project(cli, workspace_home, demo_model):
    """`sparsify-tui cls` with `cls` a project's name (or its id) opens that project; it said "cls does not exist:
    check the path of the .onnx file". A word that is neither: one line naming both fixes, exit 2."""
    from sparsify_tui.cli import tui_target
    from sparsify_tui.store import Workspace

    pid = json.loads(cli("create", str(demo_model), "--name", "cls", "--dim", "x:2=48", "--dim", "x:3=192",
                         "--json").stdout)["id"]
    ws = Workspace()
    assert tui_target(ws, "cls") == (None, pid)
    assert tui_target(ws, "CLS") == (None, pid)
    assert tui_target(ws, pid) == (None, pid)
    assert tui_target(ws, str(demo_model)) == (str(demo_model), None)
    assert tui_target(ws, "new.onnx") == ("new.onnx", None)
    r = cli("nosuch", ok=False)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "neither a project" in r.stderr and "sparsify-tui list" in r.stderr
