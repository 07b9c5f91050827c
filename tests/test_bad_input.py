"""Bad model files through the CLI: exit code 2, exactly one stderr line naming the problem, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]


def run_analyze(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "sparsify_tui", "analyze", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def small_model(path: Path, *, external: bool = False, domain: str = "", input_shape=(1, 4)) -> Path:
    weight = numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "W")
    op = helper.make_node("MatMul", ["x", "W"], ["y"]) if not domain else helper.make_node(
        "FancyOp", ["x", "W"], ["y"], domain=domain)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)
    if input_shape is None:
        x = onnx.ValueInfoProto(name="x")
        x.type.tensor_type.elem_type = TensorProto.FLOAT
    graph = helper.make_graph([op], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    if external:
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                  size_threshold=0)
    else:
        onnx.save(model, path)
    return path


def test_good_model_exits_zero(tmp_path):
    proc = run_analyze(str(small_model(tmp_path / "ok.onnx")))
    assert proc.returncode == 0, proc.stderr
    assert "MACs" in proc.stdout


def test_truncated_onnx(tmp_path):
    good = small_model(tmp_path / "good.onnx").read_bytes()
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(good[: len(good) // 2])
    assert_one_line_error(run_analyze(str(bad)), "truncated.onnx", "truncated")


def test_text_file_named_onnx(tmp_path):
    bad = tmp_path / "notes.onnx"
    bad.write_text("this is not a model\nsecond line\n")
    assert_one_line_error(run_analyze(str(bad)), "notes.onnx", "text file")


def test_unknown_domain_op(tmp_path):
    path = small_model(tmp_path / "custom.onnx", domain="com.example.custom")
    assert_one_line_error(run_analyze(str(path)), "FancyOp", "com.example.custom", "onnxruntime")


def test_missing_external_data(tmp_path):
    path = small_model(tmp_path / "ext.onnx", external=True)
    (tmp_path / "weights.bin").unlink()
    assert_one_line_error(run_analyze(str(path)), "weights.bin", "missing")


def test_input_without_shape(tmp_path):
    path = small_model(tmp_path / "noshape.onnx", input_shape=None)
    assert_one_line_error(run_analyze(str(path)), "'x'", "no shape")


def test_directory(tmp_path):
    assert_one_line_error(run_analyze(str(tmp_path)), "directory")


def test_nonexistent_path(tmp_path):
    assert_one_line_error(run_analyze(str(tmp_path / "nope.onnx")), "nope.onnx", "does not exist")


def test_zero_byte_file(tmp_path):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert_one_line_error(run_analyze(str(empty)), "empty.onnx", "0 bytes")


def test_missing_symbolic_dim_names_the_dim_and_the_fix(demo_model):
    line = assert_one_line_error(run_analyze(str(demo_model)), "x:2", "x:3", "--dim")
    assert "=1 " not in line  # never silently set to 1


def test_bad_dim_argument(demo_model):
    assert_one_line_error(run_analyze(str(demo_model), "--dim", "x:2"), "--dim")
