"""Per-node overlays for Google's Model Explorer (``ai-edge-model-explorer`` with the ``model-explorer-onnx`` adapter).

Model Explorer colours graph nodes from a **node-data JSON** file (``model_explorer.node_data_builder``): a
``ModelNodeData``, ``{graph id: GraphNodeData}``, where ``GraphNodeData`` is ``{"results": {node id: {"value":
number}}, "gradient": [{"stop": 0..1, "bgColor": "#rrggbb"}], "thresholds": [...]}``. One file holds one number per
node; Model Explorer names the overlay after the file and lists every loaded file as a run. So an export writes one
file per metric (:data:`METRICS`).

**Node ids.** The values must be keyed by the ids the ONNX adapter gives the graph's nodes, and the adapter renames
some of them (``model_explorer_onnx.main.ONNXAdapter.convert`` with the passes of ``model_explorer_onnx._passes``,
adapter 0.4.2, onnx-ir 1.1), which :func:`model_explorer_ids` reproduces:

1. ``onnx_ir``'s ``NameFixPass`` walks every node (a node, then the nodes of its subgraphs, in attribute order):
   an unnamed node is named ``node`` (``node_1``, ``node_2``... when taken), a name already used in the same graph
   gets ``_1``, ``_2``...; names are unique per graph, the counter is shared by the whole model. (sparsify-tui's own
   node id of an unnamed node is its first output instead: :func:`sparsify_tui.analysis.graph.node_id`.)
2. ``EmbedIfPass`` moves the nodes of each ``If``'s branches into the ``If``'s graph, renamed
   ``<if id>/<branch>/<name>`` (nested ``If``s compose).
3. The main graph's id is its ``graph.name`` (``<main>`` when the field is absent; an empty name stays ``""``). The ``GRAPH`` attributes of the main graph's
   nodes (``Loop``/``Scan`` bodies) become graphs of their own, id ``<node id>/<attribute>``; subgraphs nested deeper
   are not shown, nor are the special rows (``[layout conversion]``...), so they get no value
   (:attr:`NodeData.not_on_graph`).

Checked against the real packages by ``tests/test_model_explorer.py`` (skipped when they are not installed).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import onnx

from sparsify_tui.analysis.graph import node_id, subgraph_path, subgraphs
from sparsify_tui.analysis.loading import is_weight_constant

#: metric -> (what the value is, unit). ``int8_ratio`` < 1: the node ran faster in the INT8 model. Values are
#: rounded for display: ms to 0.1 µs, % to 0.001, ratios to 0.001, sensitivities to 4 significant digits.
METRICS = {
    "ms": ("measured ms per batch of the node (profiled pass; 0 when fused into another node)", "ms"),
    "share": ("share of the profile's total node time", "%"),
    "int8_ratio": ("INT8 ms / FP32 ms of the node, both measured (< 1: faster in INT8)", "x"),
    "sensitivity": ("loss sensitivity of the layer at the chosen sparsity, in the loss profile's metric", ""),
}
MAIN_GRAPH = "<main>"

_WHITE_RED = [{"stop": 0, "bgColor": "#ffffff"}, {"stop": 0.5, "bgColor": "#fdae61"},
              {"stop": 1, "bgColor": "#d7191c"}]
_WHITE_PURPLE = [{"stop": 0, "bgColor": "#ffffff"}, {"stop": 1, "bgColor": "#762a83"}]
#: int8 ratio: green when faster, grey about the same, red when slower (a value above the last one has no colour)
_RATIO_THRESHOLDS = [{"value": 0.5, "bgColor": "#1b7837"}, {"value": 0.9, "bgColor": "#7fbf7b"},
                     {"value": 1.1, "bgColor": "#e0e0e0"}, {"value": 2.0, "bgColor": "#ef8a62"},
                     {"value": 1e12, "bgColor": "#b2182b"}]


@dataclass
class ExplorerNode:
    """One node of the ONNX file as Model Explorer shows it: ``graph_path`` / ``index`` (where it is in the file,
    :func:`sparsify_tui.analysis.graph.iter_nodes`), ``op_type``, ``graph_id`` and ``node_id`` in Model Explorer
    (``graph_id`` None when the adapter does not show that subgraph), and ``weight_constant`` (a Constant holding a
    weight, which sparsify-tui's node table turns into an initializer)."""

    graph_path: str
    index: int
    op_type: str
    graph_id: Optional[str]
    node_id: str
    weight_constant: bool = False


def _unique(preferred: str, used: set, counter: Counter) -> str:
    """``onnx_ir.passes.common.naming._find_and_record_next_unique_name``."""
    name = preferred
    while name in used:
        counter[preferred] += 1
        name = f"{preferred}_{counter[preferred]}"
    used.add(name)
    return name


def model_explorer_ids(model: onnx.ModelProto) -> list[ExplorerNode]:
    """Every node of ``model`` (main graph and subgraphs, :func:`~sparsify_tui.analysis.graph.iter_nodes` order) with
    the graph id and node id the Model Explorer ONNX adapter gives it (rules in the module docstring). ``model`` is
    the file as stored (weight Constants not yet turned into initializers)."""
    # 1. NameFixPass: fixed name per (graph path, index)
    fixed: dict = {}
    counter: Counter = Counter()

    def fix(graph: onnx.GraphProto, path: str) -> None:
        used: set = set()
        for i, node in enumerate(graph.node):
            fixed[(path, i)] = _unique(node.name or "node", used, counter)
            for label, sub in subgraphs(node):
                fix(sub, subgraph_path(path, node_id(node, i), label))

    fix(model.graph, "")
    main_id = model.graph.name if model.graph.HasField("name") else MAIN_GRAPH
    out: list[ExplorerNode] = []

    # 2./3. If branches flattened into their graph, Loop/Scan bodies of main-graph nodes as graphs of their own
    def place(graph: onnx.GraphProto, path: str, graph_id: Optional[str], prefix: str, top: bool) -> None:
        for i, node in enumerate(graph.node):
            me_id = prefix + fixed[(path, i)]
            out.append(ExplorerNode(path, i, node.op_type, graph_id, me_id, is_weight_constant(node)))
            nid = node_id(node, i)
            embed = node.op_type == "If" and node.domain == ""
            for a in node.attribute:
                subs = [(a.name, a.g)] if a.type == onnx.AttributeProto.GRAPH else \
                    [(f"{a.name}[{k}]", g) for k, g in enumerate(a.graphs)] if a.type == onnx.AttributeProto.GRAPHS \
                    else []
                for label, sub in subs:
                    sub_path = subgraph_path(path, nid, label)
                    if embed and a.type == onnx.AttributeProto.GRAPH:
                        place(sub, sub_path, graph_id, f"{me_id}/{label}/", top)
                    elif top and graph_id is not None and a.type == onnx.AttributeProto.GRAPH:
                        place(sub, sub_path, f"{me_id}/{label}", "", False)
                    else:
                        place(sub, sub_path, None, "", False)

    place(model.graph, "", main_id, "", True)
    # place() visits a node's subgraphs right after it, like iter_nodes: the order matches the node table
    return out


@dataclass
class NodeData:
    """Result of :func:`node_data`: ``files`` maps a metric of :data:`METRICS` to its ``ModelNodeData`` document
    (``{graph id: {"name", "results": {node id: {"value"}}, "gradient" | "thresholds"}}``); ``nodes`` (profile rows
    placed on the graph), ``not_on_graph`` (profile rows Model Explorer does not show: special rows, nodes of
    subgraphs it does not convert), ``skipped`` (metric -> why it was not written)."""

    files: dict = field(default_factory=dict)
    nodes: int = 0
    not_on_graph: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)


def match_profile_nodes(model: onnx.ModelProto, profile_nodes: list) -> dict:
    """``{profile node id: ExplorerNode}`` pairing the profile's node rows (graph order, special rows excluded)
    with the nodes of ``model`` (weight Constants excluded, as in the node table). Raises ``ValueError`` when the
    profile was not measured on this model (the op types do not line up)."""
    explorer = [n for n in model_explorer_ids(model) if not n.weight_constant]
    rows = [n for n in profile_nodes if not str(n.id).startswith("[")]
    if len(rows) != len(explorer) or any(r.op_type != e.op_type for r, e in zip(rows, explorer)):
        raise ValueError(f"the profile's {len(rows)} nodes do not line up with the model's {len(explorer)} nodes: "
                         "export it with the model it was measured on")
    return {r.id: e for r, e in zip(rows, explorer)}


def node_data(model: onnx.ModelProto, profile, *, loss=None, level: float = 0.9, label: str = "") -> NodeData:
    """The Model Explorer node data of a perf profile (and optionally a loss profile) on ``model``.

    Args:
        model: the ONNX model the profile was measured on (as stored; weights need not be loaded).
        profile: :class:`~sparsify_tui.profiling.perf.PerfProfile`.
        loss: :class:`~sparsify_tui.profiling.loss.LossProfile` for the ``sensitivity`` overlay (its layers are
            matched by node id); without it that overlay is skipped.
        level: the sparsity level (0..1) of the sensitivity values.
        label: prefix of each overlay's name (e.g. the profile name).

    Returns: :class:`NodeData` (``ms`` and ``share`` always; ``int8_ratio`` when the profile has INT8 times).

    Raises: ``ValueError`` when the profile does not line up with the model.
    """
    placed = match_profile_nodes(model, profile.nodes)
    total = sum(float(n.time_ms or 0.0) for n in profile.nodes)
    values: dict = {m: {} for m in METRICS}
    for n in profile.nodes:
        e = placed.get(n.id)
        if e is None or e.graph_id is None:
            continue
        values["ms"][n.id] = round(float(n.time_ms or 0.0), 4)
        values["share"][n.id] = round(100.0 * float(n.time_ms or 0.0) / total, 3) if total > 0 else 0.0
        if n.int8_time_ms is not None and n.time_ms and n.time_ms > 0:
            values["int8_ratio"][n.id] = round(float(n.int8_time_ms) / float(n.time_ms), 3)
    if loss is not None:
        for layer in loss.layers:
            e = placed.get(layer.id)
            if e is not None and e.graph_id is not None:
                values["sensitivity"][layer.id] = float(f"{float(layer.value_at(level)):.4g}")
    out = NodeData(nodes=sum(1 for e in placed.values() if e.graph_id is not None))
    out.not_on_graph = [n.id for n in profile.nodes if n.id not in placed or placed[n.id].graph_id is None]
    prefix = f"{label} " if label else ""
    names = {"ms": f"{prefix}ms per batch", "share": f"{prefix}% of node time",
             "int8_ratio": f"{prefix}INT8 / FP32 time", "sensitivity": f"{prefix}sensitivity at {level:g}"}
    for metric, vals in values.items():
        if not vals:
            out.skipped[metric] = {"int8_ratio": "the profile has no INT8 times",
                                   "sensitivity": "no loss profile given" if loss is None else
                                   "no layer of the loss profile is on the graph"}.get(metric, "no values")
            continue
        graphs: dict = {}
        for nid, v in vals.items():
            e = placed[nid]
            g = graphs.setdefault(e.graph_id, {"name": names[metric], "results": {}})
            g["results"][e.node_id] = {"value": v}
        for g in graphs.values():
            if metric == "int8_ratio":
                g["thresholds"] = [dict(t) for t in _RATIO_THRESHOLDS]
            else:
                g["gradient"] = [dict(s) for s in (_WHITE_PURPLE if metric == "sensitivity" else _WHITE_RED)]
        out.files[metric] = graphs
    return out
