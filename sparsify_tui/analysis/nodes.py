"""The node table: every node of a model (subgraphs included) with shapes, weights, params, MACs and FLOPs.

What counts as a node's **params** (documented choice):

* the elements of every constant tensor the node consumes as a *weight*: an initializer or a ``Constant``
  node value of a float type (or a quantized int8/uint8/int32 tensor reaching the node through
  ``DequantizeLinear``, and the int8 weight of MatMulInteger/ConvInteger), read directly
  or through a chain of ``Transpose``/``Reshape``/``Identity``/``Cast``/``Squeeze``/``Unsqueeze``/
  ``Flatten``/``DequantizeLinear`` nodes (those chain nodes themselves get 0 params);
* integer tensors (shapes, indices, axes) and scalar constants (``x * 0.5``) are not params, except a
  size-1 bias of a matrix op;
* for Conv/Gemm/MatMul that is exactly weight + bias; for BatchNormalization its scale/bias/mean/var,
  for Gather embeddings the table, for LSTM its W/R/B.

``totals.params`` counts each distinct tensor once (a tied embedding shared by two nodes counts once), so
it can be less than the sum of node params. ``zero_params`` are exact zeros in those tensors, read one
tensor at a time (streamed in 32 MB chunks for external data), so a model of any size is never fully in memory.

A node is a **prunable layer** by the one definition in :mod:`sparsify_tui.analysis.layers`: a Conv, Gemm
or MatMul whose weight (input 1; for Gemm/MatMul input 0 when input 1 is not constant) is a float
*main-graph initializer*, directly or through the chain above. Its ``weight_name`` is that initializer's
name, which is what a recipe's ``params`` lists. ``load_model`` turns weight-holding ``Constant`` nodes into
initializers first (PaddlePaddle exports store every weight that way). Layers inside If/Loop/Scan
subgraphs (silero_vad's network) are listed with their weights, params and MACs but are not prunable:
loss profiles, one-shot apply and recipes address main-graph initializers.

**Subgraphs** (If/Loop/Scan bodies) are listed after their parent node with ``graph`` set to the subgraph
path (``"If_0/then_branch"``). Totals of MACs/FLOPs count, for each ``If``, only its larger branch (only
one runs), and a Loop/Scan body once (the trip count is data-dependent); nodes left out have
``counted=False``.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import onnx
from onnx import TensorProto

from sparsify_tui.analysis.flops import OpShapes, count_macs_flops
from sparsify_tui.analysis.graph import UniqueKeys, iter_nodes, node_id, subgraph_path, subgraphs
from sparsify_tui.analysis.layers import FLOAT_TYPES as _PARAM_DTYPES
from sparsify_tui.analysis.layers import ConstSources
from sparsify_tui.analysis.loading import load_model, weight_stats, weight_warnings
from sparsify_tui.analysis.shapes import graph_inputs, infer_shapes_ex, resolve_dims

_QUANT_DTYPES = {TensorProto.INT8, TensorProto.UINT8}
#: quantized tensors counted as params when they reach the node through DequantizeLinear (int32 = QDQ biases)
_DQ_DTYPES = _QUANT_DTYPES | {TensorProto.INT32, TensorProto.INT16, TensorProto.UINT16}


@dataclass
class NodeInfo:
    """One ONNX node with everything the profiles need.

    Shapes are ``list[int]`` (concrete, batch included) or None when unknown. ``macs``/``flops`` are for
    the whole batch (see :mod:`sparsify_tui.analysis.flops`). ``params``/``zero_params`` are element counts.
    """

    index: int
    id: str
    op_type: str
    domain: str = ""
    graph: str = ""
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    input_shapes: list = field(default_factory=list)
    output_shapes: list = field(default_factory=list)
    weight_name: Optional[str] = None
    weight_shape: Optional[list] = None
    bias_name: Optional[str] = None
    bias_shape: Optional[list] = None
    params: int = 0
    zero_params: int = 0
    prunable: bool = False
    macs: int = 0
    flops: int = 0
    attrs: dict = field(default_factory=dict)
    counted: bool = True
    name: str = ""

    @property
    def sparsity(self) -> float:
        """Fraction of this node's params that are exactly zero (0..1; 0 for nodes without params)."""
        return self.zero_params / self.params if self.params else 0.0

    def to_dict(self) -> dict:
        """JSON-able dict (the node entry of ``analyze --json``)."""
        d = asdict(self)
        d["sparsity"] = self.sparsity
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "NodeInfo":
        """Rebuild from :meth:`to_dict` output (unknown keys are ignored)."""
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class ModelAnalysis:
    """The whole model: metadata, the node table (graph order, subgraph nodes after their parent) and totals.

    ``totals`` keys: ``params``, ``prunable_params``, ``zero_params`` (element counts), ``macs``, ``flops``
    (whole batch of ``batch_size`` items), ``nodes``, ``prunable_layers``.
    """

    path: Optional[str]
    file_size_bytes: int
    ir_version: int
    opset: int
    producer: str
    inputs: list
    outputs: list
    batch_size: int
    dims: dict
    nodes: list
    totals: dict
    opsets: dict = field(default_factory=dict)
    system: Optional[dict] = None
    analysis_seconds: float = 0.0
    warnings: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """Exactly the ``sparsify-tui analyze --json`` document: ``{"model", "nodes", "totals", "system"}``."""
        return {
            "model": {
                "path": self.path,
                "file_size_bytes": self.file_size_bytes,
                "ir_version": self.ir_version,
                "opset": self.opset,
                "opsets": dict(self.opsets),
                "producer": self.producer,
                "inputs": list(self.inputs),
                "outputs": list(self.outputs),
                "batch_size": self.batch_size,
                "dims": dict(self.dims),
                "analysis_seconds": self.analysis_seconds,
                "warnings": list(self.warnings),
            },
            "nodes": [n.to_dict() for n in self.nodes],
            "totals": dict(self.totals),
            "system": self.system if self.system is not None else {},
        }

    @classmethod
    def from_dict(cls, d: dict) -> "ModelAnalysis":
        """Rebuild from :meth:`to_dict` output (for example the stored ``analysis.json`` blob)."""
        m = d.get("model", {})
        return cls(
            path=m.get("path"),
            file_size_bytes=int(m.get("file_size_bytes", 0)),
            ir_version=int(m.get("ir_version", 0)),
            opset=int(m.get("opset", 0)),
            producer=m.get("producer", ""),
            inputs=list(m.get("inputs", [])),
            outputs=list(m.get("outputs", [])),
            batch_size=int(m.get("batch_size", 1)),
            dims=dict(m.get("dims", {})),
            nodes=[NodeInfo.from_dict(n) for n in d.get("nodes", [])],
            totals=dict(d.get("totals", {})),
            opsets=dict(m.get("opsets", {})),
            system=d.get("system"),
            analysis_seconds=float(m.get("analysis_seconds", 0.0)),
            warnings=list(m.get("warnings", [])),
        )

    def node(self, node_id: str) -> NodeInfo:
        """The node with this id (KeyError when absent)."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)


def prunable_layers(analysis: ModelAnalysis) -> list[NodeInfo]:
    """The prunable layers (Conv/Gemm/MatMul with an initializer weight), in graph order, one per weight name."""
    seen, out = set(), []
    for n in analysis.nodes:
        if n.prunable and n.weight_name not in seen:
            seen.add(n.weight_name)
            out.append(n)
    return out


# ---------------------------------------------------------------------------------------------------------------


def _attr_value(a: onnx.AttributeProto) -> Any:
    t = a.type
    A = onnx.AttributeProto
    if t == A.INT:
        return int(a.i)
    if t == A.FLOAT:
        return float(a.f)
    if t == A.STRING:
        return a.s.decode("utf-8", "replace")
    if t == A.INTS:
        return [int(x) for x in a.ints]
    if t == A.FLOATS:
        return [float(x) for x in a.floats]
    if t == A.STRINGS:
        return [s.decode("utf-8", "replace") for s in a.strings]
    return None  # graphs and tensors are not copied


def _dtype_name(elem_type: int) -> str:
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(elem_type).name
    except Exception:  # noqa: BLE001
        return onnx.TensorProto.DataType.Name(elem_type).lower()


def _io_list(vis, shapes: dict) -> list:
    out = []
    for vi in vis:
        tt = vi.type.tensor_type
        stored = [d.dim_param if d.HasField("dim_param") else (int(d.dim_value) if d.HasField("dim_value") else None)
                  for d in tt.shape.dim] if tt.HasField("shape") else None
        out.append({"name": vi.name, "dtype": _dtype_name(tt.elem_type), "shape": stored,
                    "resolved_shape": shapes.get(vi.name)})
    return out


class _ConstTable(ConstSources):
    """:class:`ConstSources` plus element counts and (lazily read) zero counts of the constants."""

    def __init__(self, base_dir: Optional[Path]):
        super().__init__()
        self.base_dir = base_dir
        self._zeros: dict[str, int] = {}
        self.nonfinite: dict[str, int] = {}

    def numel(self, name: str) -> int:
        t = self.tensors[name]
        return int(np.prod([int(d) for d in t.dims], dtype=np.int64)) if len(t.dims) else 1

    def zeros(self, name: str) -> int:
        """Exact zeros in one tensor, read lazily (streamed or viewed in place) and dropped right after."""
        if name not in self._zeros:
            self._zeros[name], bad = weight_stats(self.tensors[name], self.base_dir)
            if bad and self.tensors[name].data_type in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16):
                self.nonfinite[name] = bad
        return self._zeros[name]


def _walk(graph: onnx.GraphProto, consts: _ConstTable) -> list:
    """``[(graph_path, node, node id, subgraph paths)]`` in graph order, subgraph nodes after their parent;
    registers each graph's constants when its first node is reached."""
    out = []
    for path, g, i, node in iter_nodes(graph):
        if i == 0:
            consts.add_graph(g, main=not path)
        if node.op_type == "Constant":
            consts.add_constant_node(node)
        nid = node_id(node, i)
        out.append((path, node, nid, [subgraph_path(path, nid, label) for label, _ in subgraphs(node)]))
    return out


def param_count(model: onnx.ModelProto) -> int:
    """``totals["params"]`` of :func:`analyze_model` without shape inference or reading any weight: the
    elements of every distinct weight tensor the nodes use (module docstring), each counted once. The one
    definition of a model's params, for callers that have no analysis at hand (loss profiles)."""
    consts = _ConstTable(None)
    tensors: set[str] = set()
    for index, (gpath, node, nid, _subs) in enumerate(_walk(model.graph, consts)):
        tensors.update(_node_info(index, gpath, node, nid, {}, consts)[1])
    return int(sum(consts.numel(t) for t in tensors))


def analyze_model(
    path_or_model: Union[str, os.PathLike, onnx.ModelProto],
    batch_size: int = 1,
    dims: Optional[dict] = None,
    *,
    include_system: bool = True,
    count_zeros: bool = True,
    engine=None,
    progress=None,
    cancel=None,
) -> ModelAnalysis:
    """Analyze a model: shapes for ``batch_size`` items and the given ``dims``, then every node's weights,
    params, zero params, prunable flag, MACs and FLOPs, and totals.

    Args:
        path_or_model: an ``.onnx`` path (external data is read lazily from its folder) or a ModelProto.
        batch_size: items per batch used for the batch dims (MACs/FLOPs are per batch).
        dims: values of other symbolic dims, by name or ``"input:axis"`` (see ``shapes.resolve_dims``).
        include_system: describe this machine in the result (the ``system`` key of ``analyze --json``).
        engine: the runtime the model is analyzed for (``sparsify_tui.engine.get_engine()``; analysis
            never imports one): its ``system_info()`` is the ``system`` key, and its ``infer_shapes``
            is the last shape-inference pass. Without it, ``system`` describes the machine only (empty
            runtime fields) and onnx's inference and constant folding alone give the shapes.
        count_zeros: read every weight once to count exact zeros (``zero_params``). False skips the read
            (zero_params = 0), for a quick look at a very large model.
        progress, cancel: optional ``ProgressFn`` / ``CancelToken``.

    Raises:
        ModelError: the file cannot be loaded (see ``loading.load_model``).
        DimensionError: a symbolic dim has no value.
    """
    t0 = time.perf_counter()
    dims = dict(dims or {})
    if isinstance(path_or_model, onnx.ModelProto):
        model, path, base_dir, size = path_or_model, None, None, path_or_model.ByteSize()
    else:
        path = Path(path_or_model)
        model = load_model(path, load_external_data=False)
        base_dir = path.parent
        size = path.stat().st_size + _external_bytes(model, base_dir)
    if progress:
        progress("shape inference", 0.1)
    resolve_dims(model, batch_size, dims)
    shapes, taken = infer_shapes_ex(model, batch_size, dims,
                                    extra_inference=engine.infer_shapes if engine is not None else None)
    if cancel:
        cancel.check()
    if progress:
        progress("node table", 0.4)

    consts = _ConstTable(base_dir)
    walked = _walk(model.graph, consts)

    nodes: list[NodeInfo] = []
    unique_id = UniqueKeys()
    param_tensors: set[str] = set()
    prunable_weights: set[str] = set()
    node_tensors: list[list[str]] = []
    for index, (gpath, node, nid, _subs) in enumerate(walked):
        nid = unique_id(nid)
        info, tensors = _node_info(index, gpath, node, nid, shapes, consts)
        param_tensors.update(tensors)
        node_tensors.append(tensors)
        if info.prunable:
            prunable_weights.add(info.weight_name)
        nodes.append(info)
        if cancel and index % 256 == 0:
            cancel.check()
    if progress:
        progress("zero params", 0.7)
    zero_total = 0
    if count_zeros:
        for k, name in enumerate(sorted(param_tensors)):
            zero_total += consts.zeros(name)
            if cancel:
                cancel.check()
            if progress and k % 64 == 0:
                progress("zero params", 0.7 + 0.3 * k / max(1, len(param_tensors)))
        for n, tensors in zip(nodes, node_tensors):
            n.zero_params = sum(consts.zeros(t) for t in tensors)
    _mark_counted(nodes, walked, taken)

    totals = {
        "params": int(sum(consts.numel(t) for t in param_tensors)),
        "prunable_params": int(sum(consts.numel(t) for t in prunable_weights)),
        "zero_params": int(zero_total),
        "macs": int(sum(n.macs for n in nodes if n.counted)),
        "flops": int(sum(n.flops for n in nodes if n.counted)),
        "nodes": len(nodes),
        "prunable_layers": len(prunable_weights),
    }
    opsets = {(o.domain or "ai.onnx"): int(o.version) for o in model.opset_import}
    system = None
    if include_system:
        from sparsify_tui.analysis.system import machine_info

        system = (engine.system_info() if engine is not None else machine_info()).to_dict()
    if progress:
        progress("done", 1.0)
    return ModelAnalysis(
        path=str(path) if path is not None else None,
        file_size_bytes=int(size),
        ir_version=int(model.ir_version),
        opset=int(opsets.get("ai.onnx", 0)),
        producer=" ".join(x for x in (model.producer_name, model.producer_version) if x),
        inputs=_io_list(graph_inputs(model), shapes),
        outputs=_io_list(model.graph.output, shapes),
        batch_size=int(batch_size),
        dims=dims,
        nodes=nodes,
        totals=totals,
        opsets=opsets,
        system=system,
        analysis_seconds=round(time.perf_counter() - t0, 3),
        warnings=weight_warnings(consts.nonfinite, Path(path).name if path is not None else "the model"),
    )


def _external_bytes(model: onnx.ModelProto, base_dir: Path) -> int:
    from sparsify_tui.analysis.loading import external_data_info

    files = set()
    for t in model.graph.initializer:
        info = external_data_info(t)
        if info is not None:
            files.add(info["location"])
    total = 0
    for f in files:
        try:
            total += (base_dir / f).stat().st_size
        except OSError:
            pass
    return total


def _node_info(index, gpath, node, nid, shapes, consts: _ConstTable) -> tuple[NodeInfo, list[str]]:
    op = node.op_type
    inputs = list(node.input)
    outputs = list(node.output)
    in_shapes = [(shapes.get(i) if i else "absent") for i in inputs]
    out_shapes = [shapes.get(o) if o else None for o in outputs]
    # small attributes only (kernel_shape, strides, group, perm...): long lists would bloat the JSON
    attrs = {a.name: v for a in node.attribute
             if (v := _attr_value(a)) is not None and not (isinstance(v, list) and len(v) > 64)}
    info = NodeInfo(index=index, id=nid, op_type=op, domain=node.domain, graph=gpath, inputs=inputs,
                    outputs=outputs, input_shapes=[None if s == "absent" else s for s in in_shapes],
                    output_shapes=out_shapes, attrs=attrs, name=node.name)
    tensors: list[str] = []

    # weight chains: Transpose(W) / Reshape(W) / DequantizeLinear(Wq) ... carry the source forward
    if consts.follow(node):
        src = consts.source[outputs[0]].name
        for o in outputs[:1]:
            if shapes.get(o) is None and op in ("Identity", "Cast", "DequantizeLinear"):
                shapes[o] = [int(d) for d in consts.tensors[src].dims]
    else:
        weight_idx, bias_idx = consts.weight_slots(node)
        for i, name in enumerate(inputs):
            if not name or name not in consts.source:
                continue
            s = consts.source[name]
            src, dq = s.name, s.dequantized
            t = consts.tensors[src]
            ok_dtype = t.data_type in _PARAM_DTYPES or (dq and t.data_type in _DQ_DTYPES) or (
                i == weight_idx and t.data_type in _QUANT_DTYPES)
            if not ok_dtype:
                continue
            if consts.numel(src) <= 1 and i not in (weight_idx, bias_idx):
                continue
            if src not in tensors:
                tensors.append(src)
        if weight_idx is not None:
            src = consts.source[inputs[weight_idx]].name
            info.weight_name = src
            info.weight_shape = [int(d) for d in consts.tensors[src].dims]
            info.prunable = consts.is_prunable(node, weight_idx, in_main_graph=not gpath)
        if bias_idx is not None:
            src = consts.source[inputs[bias_idx]].name
            info.bias_name = src
            info.bias_shape = [int(d) for d in consts.tensors[src].dims]
    info.params = int(sum(consts.numel(t) for t in tensors))
    info.macs, info.flops = count_macs_flops(OpShapes(op, in_shapes, out_shapes, attrs))
    return info, tensors


def _mark_counted(nodes: list[NodeInfo], walked: list, taken: Optional[dict] = None) -> None:
    """Keep one branch of each If in the totals: the one its (statically known) condition selects, else the
    larger one. Nodes of the other branch get ``counted=False``."""
    taken = taken or {}
    by_graph: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        by_graph.setdefault(n.graph, []).append(i)
    subs_of = {i: w[3] for i, w in enumerate(walked)}

    def cost(gpath: str) -> int:
        total = 0
        for i in by_graph.get(gpath, []):
            total += nodes[i].macs + nodes[i].flops
            branches = subs_of[i]
            if nodes[i].op_type == "If" and branches:
                total += max(cost(b) for b in branches)
            else:
                total += sum(cost(b) for b in branches)
        return total

    def drop(gpath: str) -> None:
        for i in by_graph.get(gpath, []):
            nodes[i].counted = False
            for b in subs_of[i]:
                drop(b)

    def visit(gpath: str) -> None:
        for i in by_graph.get(gpath, []):
            branches = subs_of[i]
            if nodes[i].op_type == "If" and len(branches) > 1:
                raw_id = node_id(walked[i][1])
                chosen = [b for b in branches if b.endswith("/" + taken.get(raw_id, "?"))]
                keep = chosen[0] if chosen else branches[int(np.argmax([cost(b) for b in branches]))]
                for b in branches:
                    if b == keep:
                        visit(b)
                    else:
                        drop(b)
            else:
                for b in branches:
                    visit(b)

    visit("")
