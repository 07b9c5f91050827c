"""The graph rules every module shares: the node id, the subgraph walk, and a node reduced to its wiring.

* **node id** (docs/design.md, Terms): the ONNX node name; else its first output name; else
  ``<op_type>_<index>`` with the node's position in its own graph (:func:`node_id`). The node table
  (:mod:`sparsify_tui.analysis.nodes`) makes ids unique model-wide by appending ``#1``, ``#2`` ... to repeats
  (:class:`UniqueKeys`, the rule the engine's kernel times and perf attribution key repeats with too).
* **subgraph walk**: If/Loop/Scan bodies are ``GRAPH``/``GRAPHS`` attributes of a node (:func:`subgraphs`).
  :func:`iter_graphs` yields every graph depth first; :func:`iter_nodes` yields every node with the nodes
  of its subgraphs right after it (the order of the node table and of perf attribution).
  A subgraph's path is ``"<node id>/<attribute name>"`` appended to its parent's path
  (``"If_0/then_branch"``, ``"Loop_3/body"``, ``"Scan_1/branches[0]"``); the main graph's path is ``""``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import onnx


def node_id(node: onnx.NodeProto, index: Optional[int] = None) -> str:
    """The node id: ``node.name``, else its first output, else ``"<op_type>_<index>"`` (``op_type`` alone
    when ``index`` is None). ``index`` is the node's position in its own graph."""
    if node.name:
        return node.name
    if node.output and node.output[0]:
        return node.output[0]
    return node.op_type if index is None else f"{node.op_type}_{index}"


class UniqueKeys:
    """The ``#k`` rule for repeated keys, in order of appearance: the first ``name`` stays ``name``, the next ones
    become ``name#1``, ``name#2``... (the first suffix not taken). Call it on each key in order; one instance per
    key space (a model's node table, one profiled run's kernels)."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def __call__(self, name: str) -> str:
        key, k = name, 0
        while key in self._taken:
            k += 1
            key = f"{name}#{k}"
        self._taken.add(key)
        return key


def subgraphs(node: onnx.NodeProto) -> list[tuple[str, onnx.GraphProto]]:
    """``[(label, graph)]`` of the node's subgraph attributes in attribute order: ``GRAPH`` attributes as
    ``(name, g)``, ``GRAPHS`` attributes as ``("name[i]", g)``. Empty for ordinary nodes."""
    out = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append((a.name, a.g))
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend((f"{a.name}[{i}]", g) for i, g in enumerate(a.graphs))
    return out


def has_subgraphs(node: onnx.NodeProto) -> bool:
    """True for control-flow nodes (a ``GRAPH`` or ``GRAPHS`` attribute)."""
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def outer_scope_reads(node: onnx.NodeProto) -> set:
    """Names the subgraphs (If/Loop/Scan bodies) of ``node`` read from outside them: inputs of the node as far as
    running it goes (empty for ordinary nodes)."""
    used, defined = set(), set()
    for _, sub in subgraphs(node):
        for _, g in iter_graphs(sub):
            defined.update(x.name for x in g.input)
            defined.update(x.name for x in g.initializer)
            for n in g.node:
                used.update(n.input)
                defined.update(n.output)
    return used - defined - {""}


def replace_nodes(graph: onnx.GraphProto, nodes: list) -> None:
    """Make ``nodes`` the node list of ``graph`` (in place; protobuf copies them, subgraphs included)."""
    del graph.node[:]
    graph.node.extend(nodes)


def subgraph_path(parent_path: str, nid: str, label: str) -> str:
    """Path of the subgraph ``label`` of node ``nid`` in the graph at ``parent_path``."""
    return f"{parent_path}/{nid}/{label}" if parent_path else f"{nid}/{label}"


def iter_graphs(graph: onnx.GraphProto, path: str = "") -> Iterator[tuple[str, onnx.GraphProto]]:
    """Yield ``(graph_path, graph)`` for ``graph`` and every subgraph (If/Loop/Scan bodies), depth first."""
    yield path, graph
    for i, node in enumerate(graph.node):
        subs = subgraphs(node)
        if subs:
            nid = node_id(node, i)
            for label, sub in subs:
                yield from iter_graphs(sub, subgraph_path(path, nid, label))


def iter_nodes(graph: onnx.GraphProto, path: str = "") -> Iterator[tuple[str, onnx.GraphProto, int, onnx.NodeProto]]:
    """Yield ``(graph_path, graph, index, node)`` for every node of ``graph`` and its subgraphs; a node's
    subgraph nodes come right after it. ``index`` is the position in ``graph.node`` of its own graph."""
    for i, node in enumerate(graph.node):
        yield path, graph, i, node
        subs = subgraphs(node)
        if subs:
            nid = node_id(node, i)
            for label, sub in subs:
                yield from iter_nodes(sub, subgraph_path(path, nid, label))


@dataclass
class GraphNode:
    """A node reduced to its wiring: what kernel attribution needs from a graph, whatever produced it
    (the user's model, a quantized model, or the graph an engine optimized). ``id`` follows
    :func:`node_id`; ``flops`` is per batch when known (0 otherwise)."""

    id: str
    name: str
    op_type: str
    inputs: list
    outputs: list
    flops: int = 0


def graph_nodes(model: onnx.ModelProto, *, with_initializers: bool = False):
    """Every node of ``model`` as :class:`GraphNode` in :func:`iter_nodes` order.

    Returns ``list[GraphNode]``, or ``(nodes, initializer names of all graphs)`` with
    ``with_initializers=True``.
    """
    nodes = [GraphNode(node_id(n, i), n.name, n.op_type, list(n.input), list(n.output))
             for _path, _graph, i, n in iter_nodes(model.graph)]
    if not with_initializers:
        return nodes
    return nodes, {t.name for _path, g in iter_graphs(model.graph) for t in g.initializer}
