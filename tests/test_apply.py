"""One-shot apply: exact per-layer sparsity in the written file, INT8 QDQ around every layer except the
excluded ones, the file loads in onnxruntime, outputs within the recorded difference."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from sparsify_tui.engine.outputs import output_difference
from sparsify_tui.optimization.apply import apply_optimization, export_model

DEMO_DIMS = {"x:2": 48, "x:3": 192}


def build_small_model(path, external=False):
    """x[N,3,8,8] -> conv1 -> relu -> conv2 -> GAP -> flatten -> MatMul(Transpose(fc_w)) -> y[N,10]."""
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2
    fc = rng.standard_normal((10, 16)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "conv2.weight"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Transpose", ["fc.weight"], ["fc.weight_t"], name="fc_t", perm=[1, 0]),
        helper.make_node("MatMul", ["f", "fc.weight_t"], ["y"], name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(w1, "conv1.weight"), numpy_helper.from_array(w2, "conv2.weight"),
         numpy_helper.from_array(fc, "fc.weight")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True, location=path.name + ".data", size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    return path


def calib(n=4, batch=1, seed=0):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((batch, 3, 8, 8)).astype(np.float32)} for _ in range(n)]


def zeros_of(model, name):
    arr = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == name))
    return arr.size - np.count_nonzero(arr), arr.size


SPARSITIES = {"conv1.weight": 0.3, "conv2.weight": 0.85, "fc.weight_t": 0.7}


@pytest.mark.parametrize("external", [False, True])
def test_pruned_file_exact_sparsity_loads_and_runs(tmp_path, external):
    src = build_small_model(tmp_path / "m.onnx", external=external)
    out = tmp_path / "out" / "opt.onnx"
    res = apply_optimization(src, SPARSITIES, out_path=out, calibration=calib())
    assert out.is_file()
    written = onnx.load(str(out))
    assert written.ir_version <= 10
    # the Transposed MatMul weight is pruned at its source initializer
    expected = {"conv1.weight": ("conv1.weight", 0.3), "conv2.weight": ("conv2.weight", 0.85),
                "fc.weight_t": ("fc.weight", 0.7)}
    for w, (src_name, s) in expected.items():
        z, n = zeros_of(written, src_name)
        assert abs(z - s * n) <= 1, (w, z, n)
        layer = next(l for l in res.layers if l.weight_name == w)
        assert layer.source_name == src_name and layer.zero_weights == z
        assert abs(layer.measured_sparsity - s) <= 1 / n
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    y = sess.run(None, calib(1, batch=2)[0])[0]
    assert y.shape == (2, 10) and np.isfinite(y).all()
    # the recorded difference is what the outputs really differ by
    d = output_difference(src, out, calib())
    assert d["max_abs"] == pytest.approx(res.output_diff["max_abs"], rel=1e-6, abs=1e-7)
    assert res.output_diff["max_abs"] > 0 and 0 < res.output_diff["nmse"]
    assert res.output_diff["top1_agreement"] is not None
    if external:
        assert (tmp_path / "out" / "opt.onnx.data").is_file()


def test_zero_sparsity_leaves_weights_identical(tmp_path):
    src = build_small_model(tmp_path / "m.onnx")
    res = apply_optimization(src, {"conv1.weight": 0.0}, out_path=tmp_path / "o.onnx", calibration=calib(2))
    assert res.output_diff["max_abs"] == 0.0 and res.output_diff["top1_agreement"] == 1.0


def test_unknown_weight_is_a_user_error(tmp_path):
    from sparsify_tui.errors import ModelError

    src = build_small_model(tmp_path / "m.onnx")
    with pytest.raises(ModelError, match="nope"):
        apply_optimization(src, {"nope": 0.5}, out_path=tmp_path / "o.onnx", calibration=calib(1))
    assert not (tmp_path / "o.onnx").exists()


def _dq_fed(model, node, idx):
    prod = {o: n for n in model.graph.node for o in n.output}
    p = prod.get(node.input[idx])
    return p is not None and p.op_type == "DequantizeLinear"


def test_quantized_has_qdq_around_every_layer_except_excluded(tmp_path):
    src = build_small_model(tmp_path / "m.onnx")
    out = tmp_path / "q.onnx"
    res = apply_optimization(src, SPARSITIES, quantize=True, excluded=["conv2"], out_path=out,
                             calibration=calib(8))
    q = onnx.load(str(out))
    nodes = {n.name: n for n in q.graph.node}
    for name in ("conv1", "fc"):
        assert _dq_fed(q, nodes[name], 0) and _dq_fed(q, nodes[name], 1), name
    # the excluded layer keeps its FP32 weight (its input may be a dequantized activation shared with
    # the previous layer's output quantization, but the Conv itself runs in FP32)
    assert not _dq_fed(q, nodes["conv2"], 1)
    w2 = next(t for t in q.graph.initializer if t.name == "conv2.weight")
    assert w2.data_type == TensorProto.FLOAT
    # sparsity is still exact in the INT8 file (int8 weights for conv1/fc, FP32 for conv2)
    for l in res.layers:
        assert abs(l.zero_weights - l.pruned_weights) <= 1, l
    assert {l.weight_name: l.quantized for l in res.layers} == {
        "conv1.weight": True, "conv2.weight": False, "fc.weight_t": True}
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert sess.run(None, calib(1)[0])[0].shape == (1, 10)
    d = output_difference(src, out, calib(8))
    assert d["max_abs"] <= res.output_diff["max_abs"] * (1 + 1e-6) + 1e-7
    assert res.quantized and res.quantization["excluded_nodes"] == ["conv2"]


def test_demo_model_constant_weights(tmp_path, demo_model):
    """The bundled demo stores weights as Constant nodes: they are pruned in place, exact to the weight."""
    m = onnx.load(str(demo_model))
    convs = [n for n in m.graph.node if n.op_type in ("Conv", "MatMul")]
    sp = {n.input[1]: 0.8 for n in convs[1:6]}
    rng = np.random.default_rng(0)
    cal = [{"x": rng.standard_normal((1, 3, 48, 192)).astype(np.float32)} for _ in range(2)]
    out = tmp_path / "demo_opt.onnx"
    res = apply_optimization(demo_model, sp, out_path=out, calibration=cal)
    written = onnx.load(str(out))
    # weights may stay Constant nodes or become initializers of the same name: both are the weight
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in written.graph.node
              if n.op_type == "Constant"}
    consts.update({t.name: numpy_helper.to_array(t) for t in written.graph.initializer})
    for w in sp:
        a = consts[w]
        assert abs((a.size - np.count_nonzero(a)) - 0.8 * a.size) <= 1
    assert all(l.measured_sparsity is not None for l in res.layers)
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, cal[0])


def test_export_copies_and_resaves_external_data(tmp_path):
    src = build_small_model(tmp_path / "m.onnx", external=True)
    out = apply_optimization(src, SPARSITIES, out_path=tmp_path / "a" / "opt.onnx", calibration=calib(1)).out_path
    dst = export_model(out, tmp_path / "b" / "exported.onnx")
    assert (tmp_path / "b" / "exported.onnx.data").is_file()
    sess = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    assert sess.run(None, calib(1)[0])[0].shape == (1, 10)
