"""Prunable layers of an ONNX graph, found without shape inference (fast enough for BERT-base).

A *layer* (CONTRACT.md terms) is a Conv, Gemm or MatMul node of the main graph whose weight (input 1)
is an initializer with at least 2 dimensions. Weights are read one tensor at a time, so a model with
external data is never held twice in memory by the weight-magnitude profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

PRUNABLE_OPS = ("Conv", "Gemm", "MatMul")


@dataclass
class LayerRef:
    """One prunable layer: ``index`` = position among the model's nodes (topological order),
    ``node_id`` = ONNX node name or its first output, ``weight_shape`` as stored."""

    node_index: int
    node_id: str
    op_type: str
    weight_name: str
    weight_shape: tuple
    bias_name: Optional[str]
    group: int
    trans_b: int

    @property
    def prunable_params(self) -> int:
        return int(np.prod(self.weight_shape)) if self.weight_shape else 0

    @property
    def depthwise(self) -> bool:
        """Conv with ``group > 1`` (depthwise or grouped): left dense by default (DESIGN.md)."""
        return self.op_type == "Conv" and self.group > 1

    @property
    def kernel_size(self) -> int:
        """Spatial kernel elements (kh·kw) of a Conv, 1 for Gemm/MatMul."""
        if self.op_type == "Conv" and len(self.weight_shape) > 2:
            return int(np.prod(self.weight_shape[2:]))
        return 1

    @property
    def channel_axis(self) -> int:
        """Axis of output channels in the weight (per-channel INT8 quantization axis, as onnxruntime uses)."""
        if self.op_type == "Conv":
            return 0
        if self.op_type == "Gemm":
            return 0 if self.trans_b else 1
        return len(self.weight_shape) - 1


def node_id(node) -> str:
    """CONTRACT.md node id: the ONNX node name, else its first output."""
    return node.name or (node.output[0] if node.output else "")


def find_layers(model) -> list[LayerRef]:
    """Prunable layers of ``model`` (an ``onnx.ModelProto``, data not needed) in graph order."""
    inits = {t.name: t for t in model.graph.initializer}
    layers = []
    for i, node in enumerate(model.graph.node):
        if node.op_type not in PRUNABLE_OPS or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        w = inits.get(node.input[1])
        if w is None or len(w.dims) < 2 or w.data_type not in (1, 10, 11, 16):  # float, f16, double, bf16
            continue
        attrs = {a.name: a for a in node.attribute}
        group = int(attrs["group"].i) if "group" in attrs else 1
        trans_b = int(attrs["transB"].i) if "transB" in attrs else 0
        bias = node.input[2] if len(node.input) > 2 and node.input[2] in inits else None
        layers.append(
            LayerRef(i, node_id(node), node.op_type, w.name, tuple(int(d) for d in w.dims), bias, group, trans_b)
        )
    return layers


def load_model_proto(model_path, load_external_data: bool = True):
    """``onnx.load`` through the analysis loader when present (one-line ``ModelError`` on bad files)."""
    try:
        from sparsify_tui.analysis.loading import load_model
    except ImportError:  # pragma: no cover - analysis not landed yet
        import onnx

        return onnx.load(str(model_path), load_external_data=load_external_data)
    return load_model(model_path, load_external_data=load_external_data)


def iter_weights(model, layers: list[LayerRef], base_dir: Optional[Path]) -> Iterator[tuple[LayerRef, np.ndarray]]:
    """Yield ``(layer, weight array)`` one tensor at a time (external data read per tensor from ``base_dir``)."""
    inits = {t.name: t for t in model.graph.initializer}
    try:
        from sparsify_tui.analysis.loading import tensor_array
    except ImportError:  # pragma: no cover - analysis not landed yet
        from onnx import numpy_helper

        def tensor_array(t, base_dir=None):
            return numpy_helper.to_array(t, base_dir=str(base_dir) if base_dir else "")

    for layer in layers:
        yield layer, tensor_array(inits[layer.weight_name], base_dir)


def initializer_size(model, name: Optional[str]) -> int:
    """Element count of initializer ``name`` (0 when absent)."""
    if not name:
        return 0
    for t in model.graph.initializer:
        if t.name == name:
            return int(np.prod(t.dims)) if t.dims else 1
    return 0
