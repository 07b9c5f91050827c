"""CLI: optimize + export (issue 5 item 5), through cli.main in-process."""

from __future__ import annotations

import json

import pytest
import yaml

from sparsify_tui.cli import main
from sparsify_tui.services.projects import create_project


class TagLoader(yaml.SafeLoader):
    pass


TagLoader.add_multi_constructor("!", lambda l, s, n: {"__tag__": s, **l.construct_mapping(n, deep=True)})


@pytest.fixture
def project(workspace_home, demo_model):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    return ws, create_project(ws, str(demo_model), name="demo", dims={"x:2": 48, "x:3": 192})


def test_optimize_json_then_export_default_and_custom_paths(project, capsys, tmp_path):
    ws, p = project
    assert main(["optimize", "demo", "--name", "v1", "--sparsity", "0.7", "--balance", "0.3", "--quantize",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "v1" and out["perf_profile"] == "flops" and out["loss_profile"] == "approximated"
    assert abs(out["estimates"]["avg_sparsity"] - 0.7) <= 0.02
    assert out["settings"]["balance"] == 0.3 and out["quantization"]["enabled"]
    assert "time_curve" not in out["layers"][0]
    # default recipe path: <project>/recipes/<name>.yaml
    assert main(["export", "demo", "v1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["recipe_path"] == str(ws.project_dir(p["id"]) / "recipes" / "v1.yaml")
    data = yaml.load(open(res["recipe_path"]).read(), Loader=TagLoader)
    assert data["version"] == "1.1.0" and data["modifiers"][0]["__tag__"] == "EpochRangeModifier"
    # custom paths + code
    recipe, code = tmp_path / "r.yaml", tmp_path / "train.py"
    assert main(["export", "demo", "v1", "-o", str(recipe), "--code", "pytorch-plain", "-O", str(code)]) == 0
    printed = capsys.readouterr().out
    assert str(recipe) in printed and str(code) in printed
    compile(code.read_text(), str(code), "exec")
    for fw in ("pytorch", "keras", "tensorflow"):
        assert main(["export", "demo", "v1", "-o", str(recipe), "--code", fw, "--json"]) == 0
        res = json.loads(capsys.readouterr().out)
        assert res["code_path"].endswith(f"r_{fw}.py")


def test_optimize_errors_are_one_line(project, capsys):
    assert main(["optimize", "demo", "--name", "a", "--sparsity", "1.5"]) == 2
    err = capsys.readouterr().err
    assert "sparsity" in err and err.count("\n") == 1
    assert main(["optimize", "demo", "--name", "a", "--perf", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["optimize", "demo", "--name", "a", "--override", "nosuchweight=0.5"]) == 2
    assert "nosuchweight" in capsys.readouterr().err
    assert main(["export", "demo", "missing"]) == 2
    assert "missing" in capsys.readouterr().err
    # nothing was stored by the failed commands
    ws, p = project
    assert ws.list_records(p["id"], "optimizations") == []


def test_optimize_text_output_and_override(project, capsys):
    ws, p = project
    w = next(n["weight_name"] for n in ws.analysis_of(p["id"])["nodes"] if n.get("prunable"))
    assert main(["optimize", "demo", "--name", "t", "--sparsity", "0.6", "--override", f"{w}=0.3"]) == 0
    text = capsys.readouterr().out
    assert "onnxruntime" in text and "est." in text and "override" in text
    from sparsify_tui.optimization import layer_sparsities
    from sparsify_tui.services.optimizations import get_optimization

    rec = get_optimization(ws, p["id"], "t")
    assert layer_sparsities(rec)[w] == 0.3


def test_next_hints_name_the_project_and_the_optimization(workspace_home, demo_model, capsys):
    """Issue 24 friction: the CLI's hints said ``sparsify-tui optimize PROJECT``; they name the project (and quote
    names for the shell)."""
    from seeded_workspace import seed_demo

    from sparsify_tui.cli import main
    from sparsify_tui.store import Workspace

    seed_demo(Workspace(), demo_model)
    assert main(["optimization", "show", "demo", "channel 1.5x"]) == 0
    assert "next: sparsify-tui apply demo 'channel 1.5x' --json, then sparsify-tui benchmark demo -O 'channel 1.5x'" \
        in capsys.readouterr().out
    assert main(["optimization", "show", "demo", "pruned 0.7 + INT8"]) == 0
    assert "next: sparsify-tui export demo 'pruned 0.7 + INT8' --code pytorch-plain" in capsys.readouterr().out


def test_show_puts_the_measured_speedup_and_accuracy_beside_the_estimate_for_every_structure(workspace_home,
                                                                                             demo_model, capsys):
    """Issue 24 friction: `optimization show` printed "measured … vs estimated" for a channel optimization only (and
    after the typed records, for none); with no measured INT8 time a channel + INT8 optimization printed its FP32
    figure as "with INT8"."""
    from seeded_workspace import seed_demo

    from sparsify_tui.cli import main
    from sparsify_tui.services.optimizations import create_optimization
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid = seed_demo(ws, demo_model)
    for name in ("pruned 0.7 + INT8", "channel 1.5x"):
        rec = ws.find_record(pid, "optimizations", name)
        ws.update_record(pid, "optimizations", rec["id"], applied={
            "path": "/nowhere/x.onnx", "output_diff": {"nmse": 0.0183, "top1_agreement": 0.96875, "samples": 16}},
            measured={"benchmark": "bench1", "benchmark_name": "benchmark 1", "batch_size": 1, "core_count": 1,
                      "speedup": 3.16, "estimated_speedup": 2.95})
        assert main(["optimization", "show", "demo", name]) == 0
        out = capsys.readouterr().out
        assert ("applied: top-1 agreement 96.9%, NMSE 0.0183 on 16 batches; measured 3.16× vs the original on "
                "onnxruntime fp32 ('benchmark 1', batch 1, 1 core), estimated 2.95×") in out, name
    create_optimization(ws, pid, "chan int8", perf="flops", quantize=True,
                        settings={"structure": "channel", "round_to": 8, "target": "speedup", "target_speedup": 1.5})
    assert main(["optimization", "show", "demo", "chan int8"]) == 0
    out = capsys.readouterr().out
    assert "with INT8: not estimated (no measured INT8 time" in out and "speed not measured yet" in out
