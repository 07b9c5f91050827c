"""The one definition of a **prunable layer** (docs/design.md, Terms), shared by the node table, the loss
profiles and one-shot apply.

A node is a prunable layer when all of these hold:

1. it is a ``Conv``, ``Gemm`` or ``MatMul`` of the standard domain (``""`` / ``ai.onnx``) in the **main
   graph** (subgraph weights are listed by the node table but never pruned: apply, loss profiles and
   recipes address main-graph initializers);
2. its **weight** is input 1, or input 0 for ``Gemm``/``MatMul`` when input 1 is not a constant
   (``MatMul(W, x)``), read directly or through a chain of value-moving ops
   (:data:`WEIGHT_CHAIN_OPS`: ``Transpose``, ``Reshape``, ``Identity``, ``Cast``, ``Squeeze``,
   ``Unsqueeze``, ``Flatten``, ``DequantizeLinear``);
3. the chain starts at a **main-graph initializer** (``load_model`` turns weight-holding ``Constant`` nodes
   into initializers first) of a float type (float32/16, bfloat16, double).

The layer's **weight name** is that initializer's name, which is what a recipe's ``params`` lists. Layers
sharing one initializer are one layer (the first in graph order). :class:`ConstSources` tracks where each
tensor's values come from; :func:`find_layers` lists the layers of a model without shape inference (fast
enough for BERT-base); :mod:`sparsify_tui.analysis.nodes` marks the same nodes ``prunable``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto

PRUNABLE_OPS = frozenset({"Conv", "Gemm", "MatMul"})
#: ops a weight may pass through on its way from the initializer to the layer
WEIGHT_CHAIN_OPS = frozenset({"Transpose", "Reshape", "Identity", "Cast", "Squeeze", "Unsqueeze", "Flatten",
                              "DequantizeLinear"})
#: chain ops that keep every axis where it is (elementwise)
_ELEMENTWISE_CHAIN_OPS = frozenset({"Identity", "Cast", "DequantizeLinear"})
#: weight dtypes a layer can be pruned in
FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE})
_STANDARD_DOMAINS = ("", "ai.onnx")
#: op -> (weight input index, bias input index, may the weight be input 0)
WEIGHT_SLOTS = {
    "Conv": (1, 2, False), "ConvTranspose": (1, 2, False), "ConvInteger": (1, None, False),
    "Gemm": (1, 2, True), "MatMul": (1, None, True), "MatMulInteger": (1, None, True),
    "QLinearConv": (3, 8, False), "QLinearMatMul": (3, None, False),
}


@dataclass
class Source:
    """Where a tensor's values come from: the constant ``name`` (initializer or Constant output), whether
    the chain passed a ``DequantizeLinear`` (``dequantized``), and ``axes``: for each axis of the tensor,
    the constant's axis it reads (None when a Reshape-like op mixed the axes)."""

    name: str
    dequantized: bool = False
    axes: Optional[tuple] = None


class ConstSources:
    """Constant tensors by name (initializers and ``Constant`` values, graph by graph) and the
    :class:`Source` of every tensor computed from one through :data:`WEIGHT_CHAIN_OPS`."""

    def __init__(self) -> None:
        self.tensors: dict[str, TensorProto] = {}
        self.origin: dict[str, str] = {}  # "initializer" | "constant"
        self.source: dict[str, Source] = {}
        self.main_graph: set[str] = set()  # initializer names of the main graph

    def add_graph(self, graph: onnx.GraphProto, *, main: bool = False) -> None:
        """Register a graph's initializers (``main=True`` for the model's main graph)."""
        for t in graph.initializer:
            self._add(t.name, t, "initializer")
            if main:
                self.main_graph.add(t.name)

    def add_constant_node(self, node: onnx.NodeProto) -> None:
        """Register the tensor value of a ``Constant`` node."""
        for a in node.attribute:
            if a.name == "value" and a.type == onnx.AttributeProto.TENSOR and node.output:
                self._add(node.output[0], a.t, "constant")

    def _add(self, name: str, t: TensorProto, origin: str) -> None:
        self.tensors[name] = t
        self.origin[name] = origin
        self.source[name] = Source(name, False, tuple(range(len(t.dims))))

    def follow(self, node: onnx.NodeProto) -> bool:
        """If ``node`` is a chain op reading a constant, give its first output that constant's source and
        return True; else False."""
        op = node.op_type
        if op not in WEIGHT_CHAIN_OPS or not node.input or node.input[0] not in self.source or not node.output:
            return False
        src = self.source[node.input[0]]
        axes = src.axes
        if axes is not None and op == "Transpose":
            perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None) or list(range(len(axes)))[::-1]
            axes = tuple(axes[p] for p in perm) if sorted(perm) == list(range(len(axes))) else None
        elif op not in _ELEMENTWISE_CHAIN_OPS:
            axes = None
        self.source[node.output[0]] = Source(src.name, src.dequantized or op == "DequantizeLinear", axes)
        return True

    def weight_slots(self, node: onnx.NodeProto) -> tuple[Optional[int], Optional[int]]:
        """``(weight input index, bias input index)`` of a node, each None when absent or not constant
        (rule 2 of the module docstring, for every op in :data:`WEIGHT_SLOTS`)."""
        slots = WEIGHT_SLOTS.get(node.op_type)
        if not slots:
            return None, None
        w, b, may_swap = slots
        inputs = node.input
        weight = bias = None
        if w < len(inputs) and inputs[w] in self.source:
            weight = w
        elif may_swap and inputs and inputs[0] in self.source:
            weight = 0
        if b is not None and b < len(inputs) and inputs[b] in self.source:
            bias = b
        return weight, bias

    def is_prunable(self, node: onnx.NodeProto, weight_input: Optional[int], in_main_graph: bool) -> bool:
        """Rules 1 and 3 of the module docstring for a node whose weight is input ``weight_input``."""
        if weight_input is None or not in_main_graph or node.op_type not in PRUNABLE_OPS:
            return False
        if node.domain not in _STANDARD_DOMAINS:
            return False
        src = self.source[node.input[weight_input]].name
        return (self.origin[src] == "initializer" and src in self.main_graph
                and self.tensors[src].data_type in FLOAT_TYPES)


@dataclass
class LayerRef:
    """One prunable layer: ``node_index`` = position among the main graph's nodes (topological order),
    ``node_id`` = the node id (:func:`sparsify_tui.analysis.graph.node_id`), ``weight_name`` /
    ``weight_shape`` = the source initializer as stored, ``weight_input`` = which node input is the
    weight (1, or 0 for ``MatMul(W, x)``), ``weight_axes`` = for each axis the layer sees, the
    initializer's axis (None when the weight went through a Reshape-like op)."""

    node_index: int
    node_id: str
    op_type: str
    weight_name: str
    weight_shape: tuple
    bias_name: Optional[str]
    group: int
    trans_b: int
    weight_input: int = 1
    trans_a: int = 0
    weight_axes: Optional[tuple] = None

    @property
    def prunable_params(self) -> int:
        return int(np.prod(self.weight_shape)) if self.weight_shape else 0

    @property
    def data_input(self) -> int:
        """Index of the node input carrying the activations (the other operand of the weight)."""
        return 1 if self.weight_input == 0 else 0

    @property
    def depthwise(self) -> bool:
        """Conv with ``group > 1`` (depthwise or grouped): left dense by default (docs/design.md)."""
        return self.op_type == "Conv" and self.group > 1

    @property
    def kernel_size(self) -> int:
        """Spatial kernel elements (kh·kw) of a Conv, 1 for Gemm/MatMul."""
        if self.op_type == "Conv" and len(self.weight_shape) > 2:
            return int(np.prod(self.weight_shape[2:]))
        return 1

    @property
    def channel_axis(self) -> Optional[int]:
        """Axis of the stored weight that holds the output channels (the per-channel INT8 quantization
        axis, as onnxruntime's quantizer uses it): Conv 0; Gemm ``B`` 0 when ``transB`` else 1, Gemm ``A``
        1 when ``transA`` else 0; MatMul: the last axis of ``B``, the second-to-last of ``A``; mapped back
        through Transposes. None (quantize per tensor) for a vector weight or when a Reshape-like op lies
        between the initializer and the layer."""
        axes = self.weight_axes
        if axes is None or len(axes) < 2:  # a vector weight has no output-channel axis
            return None
        ndim = len(axes)
        if self.op_type == "Conv":
            view = 0
        elif self.op_type == "Gemm":
            view = (0 if self.trans_b else 1) if self.weight_input == 1 else (1 if self.trans_a else 0)
        else:
            view = ndim - 1 if self.weight_input == 1 else max(0, ndim - 2)
        return axes[view]


def find_layers(model: onnx.ModelProto) -> list[LayerRef]:
    """Prunable layers of ``model`` (an ``onnx.ModelProto``; weight data not needed) in graph order, one
    per weight initializer (module docstring)."""
    from sparsify_tui.analysis.graph import node_id

    srcs = ConstSources()
    srcs.add_graph(model.graph, main=True)
    layers: list[LayerRef] = []
    seen: set[str] = set()
    for i, node in enumerate(model.graph.node):
        if node.op_type == "Constant":
            srcs.add_constant_node(node)
        if srcs.follow(node):
            continue
        w, b = srcs.weight_slots(node)
        if not srcs.is_prunable(node, w, in_main_graph=True):
            continue
        src = srcs.source[node.input[w]]
        if src.name in seen:
            continue
        seen.add(src.name)
        attrs = {a.name: a for a in node.attribute}
        t = srcs.tensors[src.name]
        layers.append(LayerRef(
            node_index=i, node_id=node_id(node, i), op_type=node.op_type, weight_name=src.name,
            weight_shape=tuple(int(d) for d in t.dims),
            bias_name=srcs.source[node.input[b]].name if b is not None else None,
            group=int(attrs["group"].i) if "group" in attrs else 1,
            trans_b=int(attrs["transB"].i) if "transB" in attrs else 0,
            weight_input=w, trans_a=int(attrs["transA"].i) if "transA" in attrs else 0,
            weight_axes=src.axes,
        ))
    return layers
