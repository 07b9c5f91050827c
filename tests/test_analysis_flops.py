"""MACs / FLOPs / params / prunable flags against hand-computed values on small models built here."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from sparsify_tui.analysis.nodes import analyze_model, prunable_layers


def build(nodes, inputs, outputs, inits=(), opset=17):
    """A model from nodes; inputs/outputs are (name, shape) with float elements; inits are (name, array)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(a, dtype=np.float32), n) for n, a in inits],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def w(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def one(model, op_type, **kw):
    a = analyze_model(model, include_system=False, **kw)
    nodes = [n for n in a.nodes if n.op_type == op_type]
    assert len(nodes) == 1
    return nodes[0], a


def test_conv_padding_bias():
    m = build([helper.make_node("Conv", ["x", "W", "B"], ["y"], pads=[1, 1, 1, 1])],
              [("x", [1, 3, 32, 32])], [("y", None)], [("W", w(16, 3, 3, 3)), ("B", w(16))])
    n, a = one(m, "Conv")
    assert n.output_shapes == [[1, 16, 32, 32]]
    # Cout*Hout*Wout*(Cin/group)*kH*kW
    assert n.macs == 16 * 32 * 32 * 3 * 3 * 3 == 442368
    # 2 per MAC + one bias add per output element
    assert n.flops == 2 * 442368 + 16 * 32 * 32
    assert n.params == 16 * 27 + 16
    assert n.weight_name == "W" and n.weight_shape == [16, 3, 3, 3]
    assert n.bias_name == "B" and n.bias_shape == [16]
    assert n.prunable and [l.id for l in prunable_layers(a)] == [n.id]
    assert a.totals["macs"] == n.macs and a.totals["params"] == n.params == a.totals["prunable_params"] + 16


def test_conv_stride_dilation_and_no_bias():
    m = build([helper.make_node("Conv", ["x", "W"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])],
              [("x", [1, 3, 32, 32])], [("y", None)], [("W", w(16, 3, 3, 3))])
    n, _ = one(m, "Conv")
    assert n.output_shapes == [[1, 16, 16, 16]]
    assert n.macs == 16 * 16 * 16 * 27 and n.flops == 2 * n.macs and n.bias_name is None

    m = build([helper.make_node("Conv", ["x", "W"], ["y"], dilations=[2, 2])],
              [("x", [1, 3, 32, 32])], [("y", None)], [("W", w(16, 3, 3, 3))])
    n, _ = one(m, "Conv")
    # effective kernel 5: 32 - 4 = 28
    assert n.output_shapes == [[1, 16, 28, 28]]
    assert n.macs == 16 * 28 * 28 * 27


def test_grouped_and_depthwise_conv():
    m = build([helper.make_node("Conv", ["x", "W"], ["y"], group=4, pads=[1, 1, 1, 1])],
              [("x", [1, 8, 10, 10])], [("y", None)], [("W", w(16, 2, 3, 3))])
    n, _ = one(m, "Conv")
    assert n.macs == 16 * 10 * 10 * (8 // 4) * 9 == 28800
    assert n.attrs["group"] == 4

    m = build([helper.make_node("Conv", ["x", "W"], ["y"], group=8, pads=[1, 1, 1, 1])],
              [("x", [1, 8, 10, 10])], [("y", None)], [("W", w(8, 1, 3, 3))])
    n, _ = one(m, "Conv")
    assert n.macs == 8 * 10 * 10 * 1 * 9 == 7200
    assert n.params == 72


def test_batch_size_scales_macs_through_symbolic_batch():
    m = build([helper.make_node("Conv", ["x", "W"], ["y"])],
              [("x", ["N", 3, 8, 8])], [("y", None)], [("W", w(4, 3, 1, 1))])
    n1, _ = one(m, "Conv")
    n4, a4 = one(m, "Conv", batch_size=4)
    assert n4.output_shapes == [[4, 4, 8, 8]] and n4.macs == 4 * n1.macs == 4 * 4 * 64 * 3
    assert a4.batch_size == 4


def test_conv_transpose():
    m = build([helper.make_node("ConvTranspose", ["x", "W"], ["y"], strides=[2, 2])],
              [("x", [1, 4, 5, 5])], [("y", None)], [("W", w(4, 6, 3, 3))])
    n, _ = one(m, "ConvTranspose")
    # (5-1)*2 + 3 = 11
    assert n.output_shapes == [[1, 6, 11, 11]]
    # Cin*Hin*Win*(Cout/group)*kH*kW
    assert n.macs == 4 * 5 * 5 * 6 * 9 == 5400 and n.flops == 10800
    assert not n.prunable  # only Conv/Gemm/MatMul are prunable layers


def test_gemm_trans_a_trans_b_with_bias():
    m = build([helper.make_node("Gemm", ["a", "B", "C"], ["y"], transA=1, transB=1)],
              [("a", [8, 4])], [("y", None)], [("B", w(16, 8)), ("C", w(16))])
    n, _ = one(m, "Gemm")
    assert n.output_shapes == [[4, 16]]
    assert n.macs == 4 * 8 * 16 == 512  # M*K*N
    assert n.flops == 2 * 512 + 4 * 16
    assert n.weight_name == "B" and n.bias_name == "C" and n.prunable
    assert n.params == 16 * 8 + 16


def test_gemm_without_transpose():
    m = build([helper.make_node("Gemm", ["a", "B"], ["y"])],
              [("a", [3, 5])], [("y", None)], [("B", w(5, 7))])
    n, _ = one(m, "Gemm")
    assert n.macs == 3 * 5 * 7 and n.flops == 2 * n.macs


def test_batched_matmul_with_broadcasting():
    m = build([helper.make_node("MatMul", ["a", "b"], ["y"])],
              [("a", [2, 1, 5, 6]), ("b", [3, 6, 7])], [("y", None)])
    n, a = one(m, "MatMul")
    assert n.output_shapes == [[2, 3, 5, 7]]
    assert n.macs == 2 * 3 * 5 * 7 * 6 == 1260 and n.flops == 2520
    assert not n.prunable and n.params == 0 and prunable_layers(a) == []


def test_matmul_weight_through_transpose_and_reshape_is_prunable():
    m = build(
        [
            helper.make_node("Transpose", ["Wt"], ["wT"], perm=[1, 0]),
            helper.make_node("MatMul", ["x", "wT"], ["h"]),
            helper.make_node("Reshape", ["Wr", "shape"], ["wR"]),
            helper.make_node("MatMul", ["h", "wR"], ["y"]),
        ],
        [("x", [2, 6])], [("y", None)], [("Wt", w(7, 6)), ("Wr", w(14)), ("shape", [7, 2])],
    )
    m.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.array([7, 2], dtype=np.int64), "shape"))
    a = analyze_model(m, include_system=False)
    mm = [n for n in a.nodes if n.op_type == "MatMul"]
    assert [n.weight_name for n in mm] == ["Wt", "Wr"]
    assert [n.weight_shape for n in mm] == [[7, 6], [14]]
    assert all(n.prunable for n in mm)
    assert mm[0].macs == 2 * 7 * 6 and mm[1].macs == 2 * 2 * 7
    # the Transpose/Reshape carrying the weight have no params of their own; the int64 shape is not a param
    assert all(n.params == 0 for n in a.nodes if n.op_type in ("Transpose", "Reshape"))
    assert a.totals["params"] == 42 + 14 == a.totals["prunable_params"]


def test_matmul_weight_as_first_input():
    m = build([helper.make_node("MatMul", ["W", "x"], ["y"])], [("x", [6, 3])], [("y", None)], [("W", w(4, 6))])
    n, _ = one(m, "MatMul")
    assert n.weight_name == "W" and n.prunable and n.macs == 4 * 3 * 6


def test_pooling_and_elementwise():
    m = build(
        [
            helper.make_node("Add", ["x", "b"], ["s"]),
            helper.make_node("Relu", ["s"], ["r"]),
            helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
            helper.make_node("AveragePool", ["r"], ["q"], kernel_shape=[2, 2], strides=[2, 2]),
            helper.make_node("GlobalAveragePool", ["r"], ["g"]),
            helper.make_node("Reshape", ["r", "shp"], ["flat"]),
            helper.make_node("Softmax", ["flat"], ["sm"], axis=-1),
        ],
        [("x", [1, 8, 16, 16])], [("p", None), ("q", None), ("g", None), ("sm", None)],
        [("b", w(8, 1, 1))],
    )
    m.graph.initializer.append(numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shp"))
    a = analyze_model(m, include_system=False)
    by = {n.op_type: n for n in a.nodes}
    size = 8 * 16 * 16
    assert by["Add"].flops == size and by["Add"].macs == 0 and by["Add"].params == 8
    assert by["Relu"].flops == size
    assert by["MaxPool"].output_shapes == [[1, 8, 8, 8]] and by["MaxPool"].flops == 8 * 8 * 8 * 9
    assert by["AveragePool"].flops == 8 * 8 * 8 * 4
    assert by["GlobalAveragePool"].flops == size  # one per input element
    assert by["Reshape"].flops == 0 and by["Reshape"].params == 0  # data movement
    assert by["Softmax"].flops == 3 * size
    assert a.totals["flops"] == sum(n.flops for n in a.nodes)
    assert a.totals["macs"] == 0


def test_zero_params_and_sparsity():
    weight = w(10, 4, 1, 1)
    weight[:5] = 0.0  # half of the output channels pruned
    m = build([helper.make_node("Conv", ["x", "W"], ["y"])], [("x", [1, 4, 3, 3])], [("y", None)], [("W", weight)])
    n, a = one(m, "Conv")
    assert n.zero_params == 20 and n.params == 40 and n.sparsity == pytest.approx(0.5)
    assert a.totals["zero_params"] == 20


def test_if_subgraph_nodes_are_counted_once_per_run():
    def branch(name, k):
        node = helper.make_node("MatMul", ["x", f"W{name}"], [f"y_{name}"], name=f"mm_{name}")
        g = helper.make_graph([node], name, [], [helper.make_tensor_value_info(f"y_{name}", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w(4, k), f"W{name}")])
        return g

    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="If_0", then_branch=branch("then", 8), else_branch=branch("else", 2))],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]), cond],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    a = analyze_model(m, include_system=False)
    mm = {n.id: n for n in a.nodes if n.op_type == "MatMul"}
    assert set(mm) == {"mm_then", "mm_else"}
    assert mm["mm_then"].graph == "If_0/then_branch" and mm["mm_else"].graph == "If_0/else_branch"
    assert mm["mm_then"].macs == 3 * 8 * 4 and mm["mm_else"].macs == 3 * 2 * 4
    assert mm["mm_then"].weight_name == "Wthen" and mm["mm_then"].params == 32
    assert not mm["mm_then"].prunable  # subgraph weights are not pruned by apply/loss profiles
    # only one branch runs: the totals take the larger when the condition is unknown...
    assert a.totals["macs"] == 96 and mm["mm_then"].counted and not mm["mm_else"].counted
    # ...and the one the condition selects when its value is given
    a = analyze_model(m, dims={"c": 0}, include_system=False)
    assert a.totals["macs"] == 24
    # params: both branches' weights are in the file
    assert a.totals["params"] == 32 + 8


def test_to_dict_round_trip_has_the_cli_keys():
    m = build([helper.make_node("Conv", ["x", "W", "B"], ["y"])], [("x", [1, 3, 4, 4])], [("y", None)],
              [("W", w(2, 3, 1, 1)), ("B", w(2))])
    from sparsify_tui.analysis.nodes import ModelAnalysis

    a = analyze_model(m)
    d = a.to_dict()
    assert set(d) == {"model", "nodes", "totals", "system"}
    for key in ("id", "op_type", "inputs", "outputs", "output_shapes", "weight_name", "weight_shape", "bias_name",
                "params", "zero_params", "prunable", "macs", "flops"):
        assert key in d["nodes"][0]
    assert {"params", "prunable_params", "macs", "flops"} <= set(d["totals"])
    assert d["system"]["available_cores"] >= 1
    back = ModelAnalysis.from_dict(d)
    assert back.to_dict() == d
    assert back.nodes[0].sparsity == a.nodes[0].sparsity


def test_einsum_and_lstm():
    m = build([helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")],
              [("a", [2, 3, 4]), ("b", [2, 4, 5])], [("y", None)])
    n, _ = one(m, "Einsum")
    assert n.output_shapes == [[2, 3, 5]] and n.macs == 2 * 3 * 4 * 5

    seq, batch, inp, hidden = 7, 2, 6, 5
    m = build([helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=hidden)],
              [("x", [seq, batch, inp])], [("y", None)],
              [("W", w(1, 4 * hidden, inp)), ("R", w(1, 4 * hidden, hidden))])
    n, _ = one(m, "LSTM")
    # per step and item: 4 gates x hidden x (input + hidden)
    assert n.macs == seq * batch * 4 * hidden * (inp + hidden)
    assert n.params == 4 * hidden * (inp + hidden) and not n.prunable
