"""The batch size is the batch size (issue 21): a ``--dim`` naming the batch dim never pins what ``--batch-size``
asks for, every perf profile and benchmark records the input shapes it fed, and ms per item divides by the batch
actually fed.

Before the fix, ``create MODEL --dim batch=1`` stored ``batch=1`` with the project, and ``profile perf
--batch-size 8`` then fed batches of 1 while reporting 8 items per batch: every batch > 1 figure was 8× too good."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def _conv_model(path, batch="batch"):
    """Conv 3->32 (3x3) + Relu on ``[batch, 3, 64, 64]``: enough work per item that a batch of 8 costs about 8
    times a batch of 1 (the fixed per-run cost is small next to it)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(32, 3, 3, 3)).astype(np.float32), "W")
    w2 = numpy_helper.from_array(rng.normal(size=(32, 32, 3, 3)).astype(np.float32) * 0.1, "W2")
    nodes = [helper.make_node("Conv", ["x", "W"], ["h"], pads=[1, 1, 1, 1], name="conv0"),
             helper.make_node("Relu", ["h"], ["r"], name="relu0"),
             helper.make_node("Conv", ["r", "W2"], ["y"], pads=[1, 1, 1, 1], name="conv1")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 64, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "sparsify_tui", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_a_dim_naming_the_batch_never_pins_the_batch_size(tmp_path):
    from sparsify_tui.analysis.shapes import input_shapes

    model = onnx.load(_conv_model(tmp_path / "m.onnx"))
    for dims in ({"batch": 1}, {"x:0": 1}):  # by name, or by INPUT:AXIS
        assert input_shapes(model, 8, dims) == {"x": [8, 3, 64, 64]}


def test_create_refuses_a_dim_naming_the_batch_in_one_line(tmp_path, workspace_home):
    import os

    path = _conv_model(tmp_path / "m.onnx")
    env = {**os.environ, "SPARSIFY_TUI_HOME": str(workspace_home)}
    for flag in ("batch=1", "x:0=1"):
        r = _cli("create", str(path), "--name", "m", "--dim", flag, env=env)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stderr
        assert "batch axis" in lines[0] and "--batch-size" in lines[0]
    assert json.loads(_cli("list", "--json", env=env).stdout or "[]") == []  # nothing was made


def test_a_model_that_fixes_its_batch_refuses_another_batch_size(tmp_path):
    from sparsify_tui.analysis.run_inputs import check_run_inputs
    from sparsify_tui.errors import DimensionError

    path = _conv_model(tmp_path / "fixed.onnx", batch=1)
    check_run_inputs(path, 1)
    with pytest.raises(DimensionError, match="fixes its batch at 1.*batches of 8.*--batch-size 1"):
        check_run_inputs(path, 8)


def test_perf_profile_and_benchmark_feed_the_batch_they_report(tmp_path, workspace_home):
    """A project stored with ``dims {"batch": 1}`` (as projects made before this fix are): a perf profile and a
    benchmark at batch 8 feed batches of 8, record those shapes, and divide by 8; batch 8 takes more than 4
    times batch 1 (8 times the work; the fastest run of each, so a busy machine does not decide it)."""
    from sparsify_tui.jobs.handlers.perf import run as run_perf
    from sparsify_tui.services.benchmarks import benchmark_project
    from sparsify_tui.services.profiles import load_perf_profile
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid = create_project(ws, _conv_model(tmp_path / "m.onnx"), name="m")["id"]
    ws.update_project(pid, setup={**(ws.get_project(pid).get("setup") or {}), "dims": {"batch": 1}})

    class Ctx:
        def __init__(self, args):
            self.ws, self.project_id, self.args, self.job = ws, pid, args, None
            self.progress, self.cancel = (lambda step, frac: None), None

    profiles = {}
    for b in (1, 8):
        run_perf(Ctx({"name": f"b{b}", "batch_size": b, "core_count": 1, "warmup": 2, "iterations": 10,
                      "int8": False}))
        profiles[b] = load_perf_profile(ws, pid, f"b{b}")
    p8 = profiles[8]
    assert p8.batch_size == 8 and p8.inputs.shapes == {"x": [8, 3, 64, 64]}
    assert p8.items_per_second == pytest.approx(1000.0 * 8 / p8.latency_ms.median)
    assert p8.latency_ms.min > 4 * profiles[1].latency_ms.min

    result = benchmark_project(ws, pid, {"batch_sizes": [1, 8], "core_counts": [1], "warmup": 2,
                                         "iterations": 10})
    runs = {r.batch_size: r for r in result.runs}
    assert set(runs) == {1, 8} and runs[8].input_shapes == {"x": [8, 3, 64, 64]}
    assert runs[8].ms_per_item == pytest.approx(runs[8].median_ms / 8)
    assert runs[8].min_ms > 4 * runs[1].min_ms
