"""Profiles and models for the compare / report / Model Explorer tests, built without measuring anything."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from sparsify_tui.profiling import perf_estimate as est
from sparsify_tui.profiling.perf import (Int8Profile, LatencySummary, MachineRecord, NodePerf, PerfProfile,
                                        _model_estimates)

DEMO_DIMS = {"x:2": 48, "x:3": 192}
SPECIALS = ("[layout conversion]", "[quantize/dequantize]", "[unattributed]")


def profile_from_analysis(analysis: dict, name: str, *, scale: float = 1.0, batch_size: int = 1, core_count: int = 2,
                          int8_factor: float = 0.4, hostname: str = "server-a") -> PerfProfile:
    """A deterministic profile over an analysis' nodes: Convs 0.02-0.08 ms (× scale), every third other node
    0.005 ms, the rest fused into the Conv before them (kernel lists say so); INT8 times = int8_factor × FP32;
    the three special rows."""
    nodes = []
    last_conv = None
    for n in analysis["nodes"]:
        i = n["index"]
        if n["op_type"] == "Conv":
            t, kernels, fused = 0.01 * (i % 7 + 2) * scale, [f"k{i}"], None
            last_conv = n["id"]
        elif i % 3 == 0:
            t, kernels, fused = 0.005 * scale, [f"k{i}"], None
        else:
            t, kernels, fused = 0.0, ([f"k{last_conv}"] if last_conv else []), last_conv
        nodes.append(NodePerf(index=i, id=n["id"], op_type=n["op_type"], weight_name=n.get("weight_name"),
                              time_ms=t, flops=int(n.get("flops") or 0), prunable=bool(n.get("prunable")),
                              est_pruned_ms=est.estimate_node_ms(t, bool(n.get("prunable")), 0.2),
                              int8_time_ms=t * int8_factor, fused_into=fused, kernels=list(kernels),
                              int8_kernels=list(kernels)))
    for k, row in enumerate(SPECIALS):
        t = 0.01 * (k + 1) * scale
        nodes.append(NodePerf(index=len(analysis["nodes"]) + k, id=row, op_type=row.strip("[]"), time_ms=t,
                              est_pruned_ms=est.estimate_node_ms(t, False, 0.0), int8_time_ms=t * 2))
    total = sum(n.time_ms for n in nodes)
    for n in nodes:
        n.share = n.time_ms / total
    median = 1.25 * scale
    prof = PerfProfile(
        name=name, batch_size=batch_size, core_count=core_count, instruction_sets=["AVX2"],
        latency_ms=LatencySummary(median=median, p90=median * 1.1, mean=median * 1.05, min=median * 0.9),
        items_per_second=1000.0 * batch_size / median,
        int8=Int8Profile.from_dict({"enabled": True, "error": None,
                                    "latency_ms": {"median": median * int8_factor, "p90": median * 0.5,
                                                   "mean": median * 0.45, "min": median * 0.35},
                                    "items_per_second": 1000.0 * batch_size / (median * int8_factor),
                                    "speedup": 1 / int8_factor}),
        nodes=nodes, engine_version="1.20.0", created="2026-01-01T00:00:00Z", settings={"cpu_model": "Test CPU"},
        machine=MachineRecord.from_dict({"hostname": hostname, "cpu_model": "Test CPU", "instruction_sets": ["AVX2"],
                                         "available_cores": 2}))
    prof.pruned_estimate = _model_estimates(nodes, median, 0.2)
    return prof


def tiny_model(path: Path, last_op: str = "Add", *, seed: int = 0) -> Path:
    """conv0 (Conv 3->8, 3x3) -> relu0 -> last0 (``last_op`` of relu0 with itself), ir_version 8, opset 17."""
    rng = np.random.default_rng(seed)
    w = helper.make_tensor("w0", TensorProto.FLOAT, [8, 3, 3, 3], rng.normal(size=8 * 27).astype(np.float32))
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], name="conv0", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
             helper.make_node(last_op, ["r0", "r0"], ["y"], name="last0")]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def edge_model(path: Path) -> Path:
    """A model whose Model Explorer node ids differ from its ONNX names: an unnamed node, a name repeated across
    subgraphs (nested If branches, flattened by the adapter, each with an unnamed Constant and an Add named the
    same; onnxruntime refuses a name repeated within one graph), an unnamed Loop whose body holds an If and a
    nested Loop, a node named "node", and a main graph with an empty name."""
    h, T = helper, TensorProto

    def branch(name, out, val, extra_if=None):
        if extra_if is not None:
            nodes = [extra_if, h.make_node("Identity", [extra_if.output[0]], [out])]
        else:
            nodes = [h.make_node("Constant", [], [out + "_c"], value=h.make_tensor("v", T.FLOAT, [1], [val])),
                     h.make_node("Add", ["x", out + "_c"], [out], name="add")]
        return h.make_graph(nodes, name, [], [h.make_tensor_value_info(out, T.FLOAT, [1])])

    inner_if = h.make_node("If", ["cond"], ["inner_out"], name="inner",
                           then_branch=branch("it", "it_out", 1.0), else_branch=branch("ie", "ie_out", 2.0))
    inner_loop_body = h.make_graph(
        [h.make_node("Identity", ["c2"], ["c2o"]), h.make_node("Add", ["v2", "v2"], ["v2o"])], "ilb",
        [h.make_tensor_value_info("i2", T.INT64, []), h.make_tensor_value_info("c2", T.BOOL, []),
         h.make_tensor_value_info("v2", T.FLOAT, [1])],
        [h.make_tensor_value_info("c2o", T.BOOL, []), h.make_tensor_value_info("v2o", T.FLOAT, [1])])
    body_if = h.make_node("If", ["cond"], ["bif"], then_branch=branch("bt", "bt_out", 4.0),
                          else_branch=branch("be", "be_out", 5.0))
    body = h.make_graph(
        [h.make_node("Identity", ["c"], ["c_out"]), h.make_node("Add", ["v", "x"], ["v1"]), body_if,
         h.make_node("Add", ["v1", "bif"], ["v_out"], name="node"),
         h.make_node("Loop", ["n", "c", "v1"], ["v_inner"], name="inner_loop", body=inner_loop_body)],
        "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                 h.make_tensor_value_info("v", T.FLOAT, [1])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("v_out", T.FLOAT, [1])])
    nodes = [
        h.make_node("Relu", ["x"], ["r0"]),
        h.make_node("Relu", ["r0"], ["r1"], name="dup"),
        h.make_node("Relu", ["r1"], ["r2"], name="dup2"),
        h.make_node("If", ["cond"], ["if_out"], name="outer",
                    then_branch=branch("ot", "ot_out", 0, extra_if=inner_if), else_branch=branch("oe", "oe_out", 3.0)),
        h.make_node("Loop", ["n", "cond", "r2"], ["loop_out"], body=body),
        h.make_node("Add", ["if_out", "loop_out"], ["y"]),
    ]
    g = h.make_graph(nodes, "", [h.make_tensor_value_info("x", T.FLOAT, [1]),
                                 h.make_tensor_value_info("cond", T.BOOL, []),
                                 h.make_tensor_value_info("n", T.INT64, [])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), str(path))
    return path
