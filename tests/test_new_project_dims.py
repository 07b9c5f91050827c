"""The New Project dialog asks for every value the model needs: symbolic dims and scalar inputs."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from sparsify_tui.tui.new_project.dialog import inspect_model


def _model_with_scalar_input(path):
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    mm = helper.make_node("MatMul", ["x", "W"], ["h"])
    cast = helper.make_node("Cast", ["sr"], ["srf"], to=TensorProto.FLOAT)
    mul = helper.make_node("Mul", ["h", "srf"], ["y"])
    graph = helper.make_graph(
        [mm, cast, mul], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_dialog_asks_for_named_dims_and_scalar_inputs_but_not_the_batch(tmp_path):
    path = tmp_path / "m.onnx"
    _model_with_scalar_input(path)
    _, dims = inspect_model(str(path))
    assert [d["key"] for d in dims] == ["seq", "sr"]
    assert all(d["suggestion"] > 0 for d in dims)


def test_dialog_addresses_anonymous_dims_by_input_and_axis(demo_model):
    _, dims = inspect_model(str(demo_model))
    assert [d["key"] for d in dims] == ["x:2", "x:3"]
