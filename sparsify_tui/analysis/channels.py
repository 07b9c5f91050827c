"""Channel dependency groups: which tensors' channel axes must shrink together when channels are removed.

A **channel group** (docs/design.md, Terms) is the set of tensors whose channel axis must shrink together: the
producer's weight and bias, BatchNorm parameters, per-channel constants, residual partners, Concat slices and
the consumers' input axis. **Thinning** (:mod:`sparsify_tui.engine.thinning`) removes a group's channels from
every member. This module finds the groups on the ONNX graph itself (no PyTorch model needed), in the spirit
of Torch-Pruning's dependency graph (Fang et al., "DepGraph: Towards Any Structural Pruning", CVPR 2023;
github.com/VainF/Torch-Pruning), whose rules it follows for the facts: a layer's output channels couple to
its bias and to the BatchNorm after it; element-wise ops couple their operands' channels; Concat/Split map
channel indices by offset; a consumer's input axis couples to whatever it reads; a depthwise conv ties its
input and output channels; a grouped conv loses the same in-group channels in every conv group; attention
heads go whole (Q, K, V and the output projection's input rows).

How (all on the main graph, in topological order):

* Every **channel** is an *element*. Each prunable layer (:mod:`sparsify_tui.analysis.layers`: Conv, Gemm or
  MatMul with an initializer weight) creates a **space** of elements, one per output channel. Every tensor
  that carries channels gets an *element map*: its channel axis and, for each position along it, the
  element it holds (positions may repeat an element: a Flatten before a Gemm gives each channel a block of
  H·W features).
* Ops propagate the maps (a table of small functions keyed by op type, :data:`_HANDLERS`): per-channel
  followers keep it; joins (Add/Sub/Mul/Div/Max/Min/Where... of two channel tensors, the SE-block Mul)
  *unite* the elements position by position (union-find); Concat along the channel axis concatenates maps;
  Split/Slice along it take a range; Transpose/Squeeze/Unsqueeze/Flatten/Reshape move the axis. A depthwise
  Conv passes the map through (its weight and ``group`` shrink with it). A grouped Conv unites the channels at
  the same in-group offset of its conv groups (:func:`_conv_layer`). A Reshape splitting the channel axis
  into ``(heads, head_dim)`` unites each head's channels and the heads axis carries them
  (:func:`_split_heads`); MatMuls of two activations keep channels on their batch axes (the attention
  ``Q·Kᵀ`` and ``P·V``, :func:`_matmul_batched`), and merging ``(heads, head_dim)`` back repeats each head.
* A **channel group** is a connected set of spaces; its *channels* are its element classes (the elements
  united with each other). Removing channel ``c`` of a group removes, from every member, each position whose
  element is in class ``c``.
* Each edit thinning will make is recorded as a :class:`ChannelEdit` (slice a constant along an axis, rewrite a
  Slice's bounds, a Split's sizes, a Reshape's literal channel count, a depthwise Conv's ``group``).
* Anything not provably safe **pins** the channels it touches, and the whole group becomes not prunable with
  the reason: a graph output, an op not known to be per-channel (Softmax or a reduction over the channel
  axis, LayerNorm over it, a MatMul of two activations over the channels, a Reshape that mixes the channel
  axis with the axes before it...), a join with a tensor whose channels are fixed (a graph input, a computed
  tensor, one conv group of a grouped Conv tied to such channels, a per-head input), a shape computation that
  reads the channel count, a shape constant that would need two values, a weight that is quantized or shared
  in a way we cannot slice.

Exactness (the contract thinning is tested against): removing channel ``c`` gives the same outputs as
zeroing, in the original model, the input weights of every consumer that reads ``c``
(:meth:`ChannelGroups.consumer_edits`).

Group ids are the weight name of the group's first producer in graph order (``#2``, ``#3``... appended when a
weight is shared). A group's channel ``i`` is its ``i``-th element class ordered by first element, which is
output channel ``i`` of its first producer whenever that producer covers every channel of the group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple

import numpy as np
import onnx

from sparsify_tui.analysis.graph import has_subgraphs, iter_graphs, node_id
from sparsify_tui.analysis.layers import PRUNABLE_OPS, ConstSources
from sparsify_tui.errors import SparsifyError

_STANDARD = ("", "ai.onnx")

#: element-wise ops of one tensor input (extra inputs, when any, are attributes-like scalars handled by
#: :func:`_broadcast`)
UNARY_OPS = frozenset((
    "Relu LeakyRelu Elu Selu Celu Sigmoid HardSigmoid HardSwish Tanh Softplus Softsign Mish Gelu Erf Exp Log "
    "Abs Neg Sqrt Reciprocal Sin Cos Tan Floor Ceil Round Sign Not IsNaN IsInf ThresholdedRelu Shrink "
    "Identity Cast CastLike Dropout"
).split())
#: element-wise ops with broadcasting operands (joins when two operands carry channels)
BROADCAST_OPS = frozenset((
    "Add Sub Mul Div Pow Mod Max Min Sum Mean Where Equal Greater GreaterOrEqual Less LessOrEqual And Or Xor "
    "PRelu Clip BitShift BitwiseAnd BitwiseOr BitwiseXor"
).split())
#: pooling over the spatial axes (>= 2) of an NC... tensor
POOL_OPS = frozenset("MaxPool AveragePool LpPool GlobalAveragePool GlobalMaxPool GlobalLpPool".split())
REDUCE_OPS = frozenset(
    "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp "
    "ReduceSumSquare ArgMax ArgMin".split())
#: ops that compute 1-D integer shape vectors, followed symbolically (:meth:`_Walk.shape_vector`)
SHAPE_OPS = frozenset("Shape Gather Slice Concat Cast Squeeze Unsqueeze Identity".split())
#: edit roles whose weights enter the group-norm importance (Torch-Pruning's default target types: conv and
#: linear weights on both sides, BatchNorm scale; biases excluded)
IMPORTANCE_ROLES = frozenset({"producer", "consumer", "depthwise", "batchnorm_scale"})


# ------------------------------------------------------------------------------------------ results


@dataclass
class ChannelEdit:
    """One change thinning makes, for the channels of ``emap`` (element ids, one per position of the axis).

    ``kind``:

    * ``"weight"``: slice the constant input ``input`` of node ``node`` (main-graph index) along ``axis`` (of
      the tensor as that node sees it); ``role`` is ``producer`` (a layer's output-channel axis), ``bias``,
      ``batchnorm_scale``/``batchnorm`` (scale; B, mean, var), ``per_channel`` (a Mul/Add/PRelu... constant),
      ``consumer`` (a layer's input-channel axis) or ``depthwise`` (a depthwise Conv's weight);
    * ``"slice"``: node ``node`` is a Slice whose entry ``extra["pos"]`` of starts/ends covers
      ``[extra["start"], extra["end"])`` of the channel axis; the bounds become the counts of kept channels;
    * ``"split"``: node ``node`` is a Split along the channel axis with ``extra["sizes"]``; the sizes become
      the kept counts of each part;
    * ``"shape_literal"``: the integer constant ``extra["tensor"]`` holds at flat index ``extra["index"]`` a
      literal channel count (a Reshape target, a Resize size, a head count): it becomes the number of kept
      positions (of ``emap``: heads for a head split); with ``extra["reader"]`` (a node index) and
      ``extra["input"]``, the constant is shared with other nodes and that node's input gets its own copy;
    * ``"conv_group"``: node ``node`` is a depthwise Conv: ``group`` becomes the number of kept channels.
    """

    kind: str
    node: int
    emap: np.ndarray
    role: str = ""
    input: int = -1
    axis: int = 0
    extra: dict = field(default_factory=dict)


@dataclass
class ChannelMember:
    """A member of a channel group as users see it: ``tensor`` (an initializer name, or the Slice/Split/Reshape
    constant thinning rewrites), the node id reading it, its ``role`` (:class:`ChannelEdit`) and the ``axis``
    that shrinks (as the node sees the tensor)."""

    tensor: str
    node: str
    role: str
    axis: int

    def to_dict(self) -> dict:
        return {"tensor": self.tensor, "node": self.node, "role": self.role, "axis": self.axis}


@dataclass
class ChannelGroup:
    """One channel group.

    ``id``: the weight name of its first producer; ``channels``: how many channels it has (element classes);
    ``prunable``: False when anything pins it, with ``reason`` (the first reasons, ``"; "``-joined);
    ``members``; ``producers``/``consumers``: node ids of the layers whose output / input channels it is;
    ``macs``: MACs per batch of every Conv/Gemm/MatMul node with a member in the group (producers, consumers,
    depthwise convs), from the node table (:mod:`sparsify_tui.analysis.flops`).
    ``classes``: the union-find root of each channel, in channel order (internal: thinning maps indices with it).
    ``channel_size``: how many output positions of its first producer each channel spans (1 for plain channels;
    head_dim for an attention-head group, whose channels are whole heads; G when a grouped Conv of ``group`` G
    reads the group, whose channel ``j`` is in-group offset ``j`` of each conv group); ``unit``: ``"head"`` for
    an attention-head group, else ``"channel"``. Members and roles mean the same for every unit (a member's
    positions are removed where their channel is); channel indices (``kept_indices``) count the group's channels:
    heads for a head group, in-group offsets for a group read by a grouped Conv.
    """

    id: str
    channels: int
    prunable: bool
    reason: Optional[str]
    members: list
    producers: list
    consumers: list
    macs: int
    classes: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, np.int64))
    first_layer: bool = False
    channel_size: int = 1
    unit: str = "channel"

    def round_to(self, round_to: int) -> int:
        """The multiple (in this group's channels) its kept count rounds to for the CPU's block ``round_to``.

        An attention-head group keeps whole heads: 1 (a head is head_dim channels of each of q, k and v; its
        MatMuls are batched over the heads, which no CPU block constrains). Any other group rounds so that every
        thinned tensor keeps a multiple of ``round_to``: ``round_to / gcd(round_to, channel_size)`` (a group
        read by a grouped Conv of ``group`` G spans G positions per channel: ``round_to / gcd(round_to, G)``)."""
        return group_round_to(round_to, self.channel_size, self.unit)

    def to_dict(self) -> dict:
        """The entry of ``analyze --channel-groups --json``: ``{"id", "members": [tensor names], "channels",
        "prunable", "reason", "macs", "producers", "consumers", "roles", "channel_size", "unit"}`` (``roles``: one
        per member)."""
        return {
            "id": self.id,
            "members": [m.tensor for m in self.members],
            "channels": self.channels,
            "prunable": self.prunable,
            "reason": self.reason,
            "macs": self.macs,
            "producers": list(self.producers),
            "consumers": list(self.consumers),
            "roles": [m.role for m in self.members],
            "channel_size": self.channel_size,
            "unit": self.unit,
        }


@dataclass
class ChannelGroups:
    """The channel groups of a model and the edits thinning makes.

    ``groups``: graph order of their first producer; ``edits``: every :class:`ChannelEdit`;
    ``element_root``: the class root of every element (``int64[n_elements]``); ``matrix_macs``: MACs per batch
    of every Conv/Gemm/MatMul node of the node table (counted nodes); ``prunable_macs``: MACs of those
    touched by a prunable group (each node once); ``tensor_channels``: ``{tensor name: element map}`` of every
    main-graph tensor that carries channels (one element per position of its channel axis), for
    :func:`node_channel_factors`.
    """

    groups: list
    edits: list
    element_root: np.ndarray
    matrix_macs: int
    prunable_macs: int
    tensor_channels: dict = field(default_factory=dict, repr=False)

    @property
    def prunable_macs_share(self) -> float:
        """``prunable_macs / matrix_macs`` (0..1; 0 when the model has no Conv/Gemm/MatMul MACs)."""
        return self.prunable_macs / self.matrix_macs if self.matrix_macs else 0.0

    def group(self, group_id: str) -> ChannelGroup:
        """The group ``group_id``. Raises ``SparsifyError`` (one line, naming a few ids) when unknown."""
        for g in self.groups:
            if g.id == group_id:
                return g
        known = ", ".join(g.id for g in self.groups[:5]) + (" ..." if len(self.groups) > 5 else "")
        raise SparsifyError(f"unknown channel group {group_id!r}: use an id listed by "
                            f"`sparsify-tui analyze MODEL --channel-groups` ({known or 'this model has none'})")

    def removed_elements(self, removed: dict) -> np.ndarray:
        """Boolean mask over elements: True where the element's class is removed.

        ``removed``: ``{group id: channel indices (0..channels-1) to remove}``. Raises ``SparsifyError`` (one
        line) for an unknown group, a group that is not prunable (with its reason), an index out of range,
        or removing every channel of a group.
        """
        dead_roots = []
        for gid, idx in removed.items():
            g = self.group(gid)
            idx = np.unique(np.asarray(list(idx), dtype=np.int64))
            if idx.size == 0:
                continue
            if not g.prunable:
                raise SparsifyError(f"channel group {gid!r} is not prunable ({g.reason}): leave it out "
                                    "or set its ratio to 0")
            if idx.min() < 0 or idx.max() >= g.channels:
                raise SparsifyError(f"channel group {gid!r} has {g.channels} channels: indices must be in "
                                    f"0..{g.channels - 1} (got {int(idx.min())}..{int(idx.max())})")
            if idx.size >= g.channels:
                raise SparsifyError(f"removing all {g.channels} channels of group {gid!r} would cut the "
                                    "network: keep at least one")
            dead_roots.append(g.classes[idx])
        dead = np.zeros(len(self.element_root), dtype=bool)
        if dead_roots:
            roots = np.concatenate(dead_roots)
            dead = np.isin(self.element_root, roots)
        return dead

    def consumer_edits(self) -> list:
        """The edits of consumers' input weights (role ``consumer``): zeroing them at removed positions, in
        the original model, is the exactness reference of thinning."""
        return [e for e in self.edits if e.kind == "weight" and e.role == "consumer"]

    def to_dict(self) -> dict:
        """``{"channel_groups": [...], "channel_summary": {...}}`` for ``analyze --channel-groups --json``."""
        prunable = [g for g in self.groups if g.prunable]
        return {
            "channel_groups": [g.to_dict() for g in self.groups],
            "channel_summary": {
                "groups": len(self.groups),
                "prunable_groups": len(prunable),
                "channels": int(sum(g.channels for g in self.groups)),
                "prunable_channels": int(sum(g.channels for g in prunable)),
                "matrix_macs": int(self.matrix_macs),
                "prunable_macs": int(self.prunable_macs),
                "prunable_macs_share": self.prunable_macs_share,
                "top_reasons": top_reasons(self.groups),
            },
        }


def top_reasons(groups: Sequence[ChannelGroup], k: int = 5) -> list:
    """The ``k`` most frequent reasons groups are not prunable: ``[{"reason", "groups", "macs"}]`` with the
    node names stripped (``feeds Softmax 'x'`` and ``feeds Softmax 'y'`` are one reason)."""
    import re

    counts: dict = {}
    for g in groups:
        if g.prunable or not g.reason:
            continue
        for part in g.reason.split("; "):
            key = re.sub(r"'[^']*'", "'…'", part)
            c = counts.setdefault(key, {"reason": key, "groups": 0, "macs": 0})
            c["groups"] += 1
            c["macs"] += g.macs
    return sorted(counts.values(), key=lambda c: (-c["groups"], -c["macs"]))[:k]


# ------------------------------------------------------------------------------------------ walk


@dataclass
class _Chan:
    """The channels a tensor carries: its channel ``axis`` and the element of each position along it."""

    axis: int
    emap: np.ndarray


class _UnionFind:
    def __init__(self) -> None:
        self.parent: list = []

    def add(self, n: int) -> np.ndarray:
        start = len(self.parent)
        self.parent.extend(range(start, start + n))
        return np.arange(start, start + n, dtype=np.int64)

    def find(self, a: int) -> int:
        p = self.parent
        while p[a] != a:
            p[a] = p[p[a]]
            a = p[a]
        return a

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            if ra < rb:
                self.parent[rb] = ra
            else:
                self.parent[ra] = rb

    def roots(self) -> np.ndarray:
        return np.array([self.find(i) for i in range(len(self.parent))], dtype=np.int64)


class _Walk:
    """State of one pass over the main graph (see the module docstring)."""

    def __init__(self, model: onnx.ModelProto, shapes: dict, base_dir=None) -> None:
        self.model = model
        self.base_dir = base_dir
        self.nodes = list(model.graph.node)
        self.ids = [node_id(n, i) for i, n in enumerate(self.nodes)]
        self.shapes = shapes
        self.consts = ConstSources()
        self.consts.add_graph(model.graph, main=True)
        self.uf = _UnionFind()
        self.chan: dict = {}
        self.space_of: list = []  # per element: its space index
        self.spaces: list = []  # (kind "layer"|"fixed", node index, name)
        self.pins: list = []  # (emap, reason)
        self.edits: list = []
        self.shape_vals: dict = {}  # tensor -> list of shape-vector entries
        self.consumers: dict = {}
        for i, n in enumerate(self.nodes):
            for k, name in enumerate(n.input):
                if name:
                    self.consumers.setdefault(name, []).append((i, k))
        self.producer = {o: n for n in self.nodes for o in n.output}
        self.outputs = {o.name for o in model.graph.output}
        self.in_subgraphs = _subgraph_reads(model)
        self.shape_checked: set = set()  # nodes whose shape-vector input a handler validated
        self.lookup = ConstantLookup(model, base_dir)
        self.carriers: list = []  # (node index, emap): MatMuls of two activations whose batch axis holds channels
        self.head_splits: list = []  # emaps of the head axes Reshapes split off (attention heads)

    # -- spaces and elements
    def new_space(self, n: int, kind: str, node: int, name: str) -> np.ndarray:
        elems = self.uf.add(n)
        self.space_of.extend([len(self.spaces)] * n)
        self.spaces.append((kind, node, name))
        return elems

    def fixed(self, name: str, size: int, reason: str) -> np.ndarray:
        """Elements for ``size`` channels that cannot be removed (a graph input, a computed tensor): a pinned
        space, so anything joined with it is pinned too."""
        elems = self.new_space(size, "fixed", -1, name)
        self.pins.append((elems, reason))
        return elems

    def unite(self, a: np.ndarray, b: np.ndarray) -> None:
        for x, y in zip(a.tolist(), b.tolist()):
            self.uf.union(x, y)

    def pin(self, emap: Optional[np.ndarray], reason: str) -> None:
        if emap is not None and len(emap):
            self.pins.append((emap, reason))

    def pin_inputs(self, i: int, reason: str) -> None:
        for name in self.nodes[i].input:
            c = self.chan.get(name)
            if c is not None:
                self.pin(c.emap, reason)

    # -- tensors
    def shape(self, name: str) -> Optional[list]:
        s = self.shapes.get(name)
        return list(s) if s is not None else None

    def rank(self, name: str) -> Optional[int]:
        s = self.shapes.get(name)
        return len(s) if s is not None else None

    def is_const(self, name: str) -> bool:
        return bool(name) and name in self.consts.source

    def const_value(self, name: str) -> Optional[np.ndarray]:
        """Value of a small constant tensor as nodes see it (through the weight chain), or None."""
        if not self.is_const(name):
            return None
        try:
            return constant_view(self.model, name, self.lookup)
        except Exception:  # noqa: BLE001 - unusual chains: treat as unknown
            return None

    def attr(self, i: int, name: str, default=None):
        for a in self.nodes[i].attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def opset(self) -> int:
        for o in self.model.opset_import:
            if o.domain in _STANDARD:
                return int(o.version)
        return 0

    def edit(self, kind: str, i: int, emap: np.ndarray, **kw) -> None:
        self.edits.append(ChannelEdit(kind, i, np.asarray(emap, dtype=np.int64), **kw))

    def weight_edit(self, i: int, k: int, axis: int, emap: np.ndarray, role: str) -> bool:
        """Record slicing constant input ``k`` of node ``i`` along ``axis``; False (and pins) when that constant
        cannot be sliced (quantized, or the shapes disagree)."""
        name = self.nodes[i].input[k]
        src = self.consts.source.get(name)
        if src is None:
            self.pin(emap, f"{self.nodes[i].op_type} '{self.ids[i]}' reads these channels through a computed weight")
            return False
        if src.dequantized:
            self.pin(emap, f"weight of '{self.ids[i]}' is quantized (thin the FP32 model, then quantize)")
            return False
        shape = self.shape(name)
        if shape is None or axis >= len(shape) or shape[axis] != len(emap):
            self.pin(emap, f"{self.nodes[i].op_type} '{self.ids[i]}': weight {name} does not match the channels")
            return False
        self.edit("weight", i, emap, role=role, input=k, axis=axis)
        return True

    # -- the symbolic shape vectors (Shape -> Gather/Slice/Concat -> Reshape)
    def shape_vector(self, name: str, reader: Optional[tuple] = None) -> Optional[list]:
        """Entries of a 1-D integer tensor: ``("c", value, source)`` for a constant, ``("d", tensor, axis)``
        for a dim read by Shape; None when it cannot be followed. A constant's ``source`` says how thinning
        rewrites the entry: ``(initializer, flat index)`` in place when the initializer is read through this
        chain alone; else, with ``reader`` = ``(node index, input index)`` reading ``name``, ``("copy", node,
        input, flat index)``: that node gets its own copy (a shape shared by every layer's Reshape); else None."""
        if name in self.shape_vals:
            return self.shape_vals[name]
        if not self.is_const(name):
            return None
        val = self.const_value(name)
        if val is None or val.dtype.kind not in "iu" or val.ndim > 1 or val.size > 64:
            return None
        src = self.consts.source[name]
        direct = src.axes is not None and self.consts.origin.get(src.name) == "initializer" and \
            self._single_use_chain(name)
        flat = val.reshape(-1).tolist()
        if direct:
            entries = [("c", int(v), (src.name, j)) for j, v in enumerate(flat)]
            self.shape_vals[name] = entries
            return entries
        return [("c", int(v), ("copy", *reader, j) if reader is not None else None) for j, v in enumerate(flat)]

    def _single_use_chain(self, name: str) -> bool:
        """True when ``name`` and every tensor of its weight chain back to the initializer has one reader."""
        cur = name
        for _ in range(16):
            if len(self.consumers.get(cur, [])) > 1 or cur in self.outputs or cur in self.in_subgraphs:
                return False
            node = self.producer.get(cur)
            if node is None:
                return True
            cur = node.input[0]
        return False


def _subgraph_reads(model: onnx.ModelProto) -> set:
    """Names read inside If/Loop/Scan bodies (implicit inputs from the main graph among them)."""
    out: set = set()
    for path, g in iter_graphs(model.graph):
        if not path:
            continue
        for n in g.node:
            out.update(x for x in n.input if x)
        out.update(o.name for o in g.output)  # a branch may return an outer tensor as it is
    return out


# ---------------------------------------------------------------------- op handlers (one per op family)


def _pin_unknown(w: _Walk, i: int) -> None:
    node = w.nodes[i]
    w.pin_inputs(i, f"feeds {node.op_type} '{w.ids[i]}' (not known to keep channels apart)")


def _ranked_input(w: _Walk, i: int) -> Optional[Tuple[_Chan, int]]:
    """The channels node ``i``'s first input carries and that input's rank; None when it carries none, or when its
    rank is unknown (the channels are then pinned: "shape unknown at <op> '<node id>'")."""
    node = w.nodes[i]
    c = w.chan.get(node.input[0])
    if c is None:
        return None
    r = w.rank(node.input[0])
    if r is None:
        w.pin(c.emap, f"shape unknown at {node.op_type} '{w.ids[i]}'")
        return None
    return c, r


def _set_out(w: _Walk, i: int, axis: int, emap: np.ndarray, k: int = 0) -> None:
    outs = w.nodes[i].output
    if k < len(outs) and outs[k]:
        w.chan[outs[k]] = _Chan(int(axis), np.asarray(emap, dtype=np.int64))


def _unary(w: _Walk, i: int) -> None:
    node = w.nodes[i]
    c = w.chan.get(node.input[0]) if node.input else None
    if c is None:
        _broadcast(w, i)  # Clip with channel-carrying bounds, etc.
        return
    if any(w.chan.get(x) is not None for x in node.input[1:]):
        _broadcast(w, i)
        return
    for k in range(len(node.output)):  # Dropout's mask too
        _set_out(w, i, c.axis, c.emap, k)


def _broadcast(w: _Walk, i: int) -> None:
    """Element-wise ops with numpy broadcasting: channel-carrying operands are joined position by position,
    constants with one value per channel become ``per_channel`` members, other tensors with the same channel
    count pin the group (their channels are fixed)."""
    node = w.nodes[i]
    out = node.output[0] if node.output else ""
    rout = w.rank(out)
    tracked = [(k, w.chan[x]) for k, x in enumerate(node.input) if x and x in w.chan]
    if not tracked:
        return
    if rout is None:
        w.pin_inputs(i, f"shape of '{out}' unknown at {node.op_type} '{w.ids[i]}'")
        return
    axes = set()
    for k, c in tracked:
        r = w.rank(node.input[k])
        if r is None:
            w.pin_inputs(i, f"shape unknown at {node.op_type} '{w.ids[i]}'")
            return
        axes.add(c.axis + rout - r)
    if len(axes) != 1:
        w.pin_inputs(i, f"{node.op_type} '{w.ids[i]}' combines channels on different axes")
        return
    axis = axes.pop()
    size = w.shape(out)[axis]
    emap = tracked[0][1].emap
    if len(emap) != size or any(len(c.emap) != size for _, c in tracked):
        w.pin_inputs(i, f"{node.op_type} '{w.ids[i]}' broadcasts a channel axis")
        return
    for _, c in tracked[1:]:
        w.unite(emap, c.emap)
    for k, x in enumerate(node.input):
        if not x or x in w.chan:
            continue
        s = w.shape(x)
        if s is None:
            w.pin(emap, f"shape of '{x}' unknown at {node.op_type} '{w.ids[i]}'")
            return
        ax = axis - (rout - len(s))
        if ax < 0 or s[ax] == 1:
            continue  # broadcast along the channels: nothing to slice
        if s[ax] != size:
            w.pin(emap, f"{node.op_type} '{w.ids[i]}' operand '{x}' has {s[ax]} entries on the channel axis")
            return
        if w.is_const(x):
            w.weight_edit(i, k, ax, emap, "per_channel")
        else:
            w.unite(emap, w.fixed(x, size, f"joins '{x}' at {node.op_type} '{w.ids[i]}', whose channels are "
                                           "not prunable"))
    _set_out(w, i, axis, emap)


def _conv(w: _Walk, i: int) -> None:
    """Conv: the input axis 1 is read by the weight's axis 1 (``consumer``), or passed through by a depthwise
    conv (``group`` = input channels: weight axis 0 and bias follow, ``group`` is rewritten); a prunable layer
    opens a new space of output channels (weight axis 0 ``producer``, bias). Grouped convs (1 < group <
    channels): :func:`_conv_layer`."""
    node = w.nodes[i]
    x, wt = node.input[0], node.input[1] if len(node.input) > 1 else ""
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    c = w.chan.get(x)
    if not w.is_const(wt):
        if c is not None:
            w.pin(c.emap, f"Conv '{w.ids[i]}' has a computed weight")
        return
    wshape, xshape = w.shape(wt), w.shape(x)
    group = int(w.attr(i, "group", 1))
    if wshape is None or xshape is None or len(xshape) < 3:
        w.pin_inputs(i, f"shape unknown at Conv '{w.ids[i]}'")
        return
    cin, cout = xshape[1], wshape[0]
    if c is not None and c.axis != 1:
        w.pin(c.emap, f"Conv '{w.ids[i]}' reads the channels on axis {c.axis}")
        c = None
    if group > 1 and group == cin and wshape[1] == 1 and cout % cin == 0:
        if c is None:
            return  # a depthwise conv over fixed channels: its outputs follow its inputs, nothing to prune
        emap = np.repeat(c.emap, cout // cin)
        ok = w.weight_edit(i, 1, 0, emap, "depthwise")
        if ok and bias is not None:
            if w.is_const(bias):
                w.weight_edit(i, 2, 0, emap, "bias")
            else:
                w.pin(emap, f"Conv '{w.ids[i]}' has a computed bias")
        w.edit("conv_group", i, c.emap)
        _set_out(w, i, 1, emap)
        return
    _conv_layer(w, i, c, group, cin, wshape, bias)


def _conv_layer(w: _Walk, i: int, c: Optional[_Chan], group: int, cin: int, wshape: list,
                bias: Optional[str]) -> None:
    """A Conv of ``group`` 1, or a grouped Conv (1 < ``group`` < input channels) that keeps ``group`` and loses
    the same channels in every conv group, as Torch-Pruning does for group convs (its pruner removes the same
    in-group offsets from each of the ``group`` groups): the input channels at in-group offset ``j`` of all
    ``group`` groups are united into one channel, read by weight column ``j`` (axis 1, ``consumer``: its element
    map is the first conv group's ``cin/group`` positions); the layer's own output channels at offset ``j`` of
    every group are united likewise (``producer`` rows and bias). Each tensor so keeps ``group × kept``
    channels."""
    cout = wshape[0]
    if cin % group or wshape[1] != cin // group or cout % group:
        if c is not None:
            w.pin(c.emap, f"Conv '{w.ids[i]}' (group={group}): weight {wshape} does not match the {cin} input "
                          "channels")
        return
    if c is not None:
        cols = c.emap.reshape(group, cin // group)
        for row in cols[1:]:
            w.unite(cols[0], row)
        w.weight_edit(i, 1, 1, cols[0], "consumer")
    if w.consts.is_prunable(w.nodes[i], 1, True):
        out = w.new_space(cout, "layer", i, w.consts.source[w.nodes[i].input[1]].name)
        rows = out.reshape(group, cout // group)
        for row in rows[1:]:
            w.unite(rows[0], row)
        if w.weight_edit(i, 1, 0, out, "producer") and bias is not None:
            if w.is_const(bias):
                w.weight_edit(i, 2, 0, out, "bias")
            else:
                w.pin(out, f"Conv '{w.ids[i]}' has a computed bias")
        _set_out(w, i, 1, out)


def _conv_transpose(w: _Walk, i: int) -> None:
    """ConvTranspose reads its input channels on the weight's axis 0 (``consumer``, group 1 only); it is not a
    prunable layer, so its output channels are fixed."""
    node = w.nodes[i]
    c = w.chan.get(node.input[0])
    if c is None:
        return
    if int(w.attr(i, "group", 1)) != 1 or c.axis != 1 or not w.is_const(node.input[1]):
        w.pin(c.emap, f"ConvTranspose '{w.ids[i]}' reads these channels (grouped, computed weight or other axis)")
        return
    w.weight_edit(i, 1, 0, c.emap, "consumer")


def _gemm(w: _Walk, i: int) -> None:
    """Gemm ``Y = op(A)·op(B) + C``: the data operand's K axis is read by the weight's K axis (``consumer``);
    a prunable layer opens a space of N (data A) or M (data B, ``Gemm(W, x)``) output channels on the
    weight's other axis, and C follows them (broadcast)."""
    node = w.nodes[i]
    wi, _ = w.consts.weight_slots(node)
    if wi is None:
        w.pin_inputs(i, f"Gemm '{w.ids[i]}' multiplies two activations")
        return
    ta, tb = int(w.attr(i, "transA", 0)), int(w.attr(i, "transB", 0))
    di = 1 - wi
    data = node.input[di]
    c = w.chan.get(data)
    wt = node.input[wi]
    if wi == 1:  # Y = A·B: A's K axis, B's K axis, B's N axis -> Y axis 1
        data_k, w_k, w_out, y_axis = (0 if ta else 1), (1 if tb else 0), (0 if tb else 1), 1
    else:  # Y = A·B with A the weight: B's K axis, A's K axis, A's M axis -> Y axis 0
        data_k, w_k, w_out, y_axis = (1 if tb else 0), (0 if ta else 1), (1 if ta else 0), 0
    if c is not None:
        if c.axis == data_k:
            w.weight_edit(i, wi, w_k, c.emap, "consumer")
        else:
            w.pin(c.emap, f"Gemm '{w.ids[i]}' reads the channels on its M/N axis")
    if w.consts.is_prunable(node, wi, True):
        wshape = w.shape(wt)
        if wshape is None or len(wshape) != 2:
            return
        out = w.new_space(wshape[w_out], "layer", i, w.consts.source[wt].name)
        if w.weight_edit(i, wi, w_out, out, "producer"):
            _set_out(w, i, y_axis, out)
            if len(node.input) > 2 and node.input[2]:
                cname = node.input[2]
                cs = w.shape(cname)
                ax = y_axis - (2 - len(cs)) if cs is not None else -1
                if cs is None:
                    w.pin(out, f"shape of Gemm '{w.ids[i]}' bias unknown")
                elif ax >= 0 and cs[ax] != 1:
                    if w.is_const(cname):
                        w.weight_edit(i, 2, ax, out, "bias")
                    else:
                        w.pin(out, f"Gemm '{w.ids[i]}' has a computed bias")


def _matmul(w: _Walk, i: int) -> None:
    """MatMul with a 2-D constant weight: ``x·W`` reads x's last axis (W axis 0, ``consumer``) and opens a space
    on the output's last axis (W axis 1); ``W·x`` reads x's second-to-last axis (W axis 1) and opens a space on
    the output's second-to-last axis (W axis 0). Channels on any other axis of x pass through (rows and batch
    axes are independent). A MatMul of two activations (attention) pins what it reads."""
    node = w.nodes[i]
    wi, _ = w.consts.weight_slots(node)
    if wi is None:
        _matmul_batched(w, i)
        return
    di = 1 - wi
    data, wt = node.input[di], node.input[wi]
    wshape, r = w.shape(wt), w.rank(data)
    c = w.chan.get(data)
    if wshape is None or len(wshape) != 2 or r is None or r < 2:
        if c is not None:
            w.pin(c.emap, f"MatMul '{w.ids[i]}' has a batched weight or an unknown shape")
        return
    k_axis = r - 1 if wi == 1 else r - 2
    w_k, w_out = (0, 1) if wi == 1 else (1, 0)
    layer = w.consts.is_prunable(node, wi, True)
    passed = None
    if c is not None:
        if c.axis == k_axis:
            w.weight_edit(i, wi, w_k, c.emap, "consumer")
        elif layer:
            w.pin(c.emap, f"MatMul '{w.ids[i]}' would carry two channel axes")
        else:
            passed = c
    if layer:
        out = w.new_space(wshape[w_out], "layer", i, w.consts.source[wt].name)
        if w.weight_edit(i, wi, w_out, out, "producer"):
            _set_out(w, i, k_axis, out)
    elif passed is not None:
        _set_out(w, i, passed.axis, passed.emap)


def _matmul_batched(w: _Walk, i: int) -> None:
    """MatMul of two activations (attention scores ``Q·Kᵀ`` and context ``P·V``): channels on a batch axis (any
    axis but the last two) stay apart, the product of each batch entry being its own, and the batch axes
    broadcast as element-wise ops do: :func:`_broadcast` joins the operands' maps (an operand with the same count
    on that axis but no channels pins them). Channels on a matrix axis (rows or the contracted axis) pin the
    group: the product mixes them. The node's MACs follow the channels (:attr:`_Walk.carriers`)."""
    node = w.nodes[i]
    tracked = [(k, w.chan[x]) for k, x in enumerate(node.input[:2]) if x in w.chan]
    if not tracked:
        return
    ranks = [w.rank(x) for x in node.input[:2]]
    where = f"MatMul '{w.ids[i]}'"
    if w.rank(node.output[0]) is None or any(r is None or r < 2 for r in ranks):
        w.pin_inputs(i, f"{where} multiplies two activations (shape unknown or 1-D)")
        return
    if any(c.axis >= ranks[k] - 2 for k, c in tracked):
        w.pin_inputs(i, f"{where} multiplies two activations over the channel axis")
        return
    _broadcast(w, i)
    c = w.chan.get(node.output[0])
    if c is not None:
        w.carriers.append((i, c.emap))


def _batchnorm(w: _Walk, i: int) -> None:
    """BatchNormalization / InstanceNormalization normalize each channel of axis 1 on its own: scale (and B,
    mean, var) are ``batchnorm_scale``/``batchnorm`` members. InstanceNormalization over channels on another
    axis mixes them."""
    node = w.nodes[i]
    c = w.chan.get(node.input[0])
    if c is None:
        return
    if len(node.output) > 1 and any(node.output[1:]):
        w.pin(c.emap, f"{node.op_type} '{w.ids[i]}' in training mode")
        return
    if c.axis != 1:
        if node.op_type == "InstanceNormalization":
            w.pin(c.emap, f"InstanceNormalization '{w.ids[i]}' normalizes over the channel axis")
            return
        _set_out(w, i, c.axis, c.emap)  # BN acts per position of every other axis
        return
    for k in range(1, len(node.input)):
        if not node.input[k]:
            continue
        role = "batchnorm_scale" if k == 1 else "batchnorm"
        if w.chan.get(node.input[k]) is not None or not w.is_const(node.input[k]):
            w.pin(c.emap, f"{node.op_type} '{w.ids[i]}' has computed parameters")
            return
        if not w.weight_edit(i, k, 0, c.emap, role):
            return
    _set_out(w, i, 1, c.emap)


def _layernorm(w: _Walk, i: int) -> None:
    """LayerNormalization normalizes the axes from ``axis`` on: channels there are mixed (pinned); channels on
    an earlier axis pass through."""
    got = _ranked_input(w, i)
    if got is None:
        return
    c, r = got
    axis = int(w.attr(i, "axis", -1))
    axis = axis + r if axis < 0 else axis
    if c.axis >= axis:
        w.pin(c.emap, f"LayerNormalization '{w.ids[i]}' normalizes over the channel axis")
        return
    _set_out(w, i, c.axis, c.emap)


def _pool(w: _Walk, i: int) -> None:
    """Pooling acts on the spatial axes (2, 3, ...) of each channel."""
    node = w.nodes[i]
    c = w.chan.get(node.input[0])
    if c is None:
        return
    if c.axis >= 2:
        w.pin(c.emap, f"{node.op_type} '{w.ids[i]}' pools over the channel axis")
        return
    if node.op_type == "MaxPool" and len(node.output) > 1 and node.output[1]:
        w.pin(c.emap, f"MaxPool '{w.ids[i]}' returns indices that count channels")
        return
    _set_out(w, i, c.axis, c.emap)


def _same_size(w: _Walk, i: int) -> None:
    """Resize/Upsample/Pad/Tile: a follower when the channel axis keeps its size (scale 1, no padding, one
    repeat); a Resize ``sizes`` input must not hold the channel count as a literal (rewritten) or read it."""
    node = w.nodes[i]
    c = w.chan.get(node.input[0])
    if c is None:
        if any(w.chan.get(x) is not None for x in node.input[1:]):
            _pin_unknown(w, i)
        return
    xs, ys = w.shape(node.input[0]), w.shape(node.output[0])
    if xs is None or ys is None or len(xs) != len(ys) or xs[c.axis] != ys[c.axis]:
        w.pin(c.emap, f"{node.op_type} '{w.ids[i]}' changes the channel axis")
        return
    if node.op_type == "Resize" and len(node.input) > 3 and node.input[3]:
        axes = w.attr(i, "axes")  # opset 18: sizes list only these axes
        pos = c.axis if axes is None else next((j for j, a in enumerate(axes) if int(a) % len(xs) == c.axis), None)
        if pos is not None and not _check_shape_vector(w, i, node.input[3], pos, c.emap, node.input[0], c.axis):
            return
        w.shape_checked.add(i)
    if node.op_type == "Pad" and len(node.input) > 1 and node.input[1]:
        pads = w.const_value(node.input[1])
        axes = w.const_value(node.input[3]) if len(node.input) > 3 and node.input[3] else None
        r = len(xs)
        if pads is None:
            w.pin(c.emap, f"Pad '{w.ids[i]}' has computed pads")
            return
        ax_list = [int(a) % r for a in axes.reshape(-1)] if axes is not None else list(range(r))
        pads = pads.reshape(-1)
        n = len(ax_list)
        for j, a in enumerate(ax_list):
            if a == c.axis and (pads[j] != 0 or pads[j + n] != 0):
                w.pin(c.emap, f"Pad '{w.ids[i]}' pads the channel axis")
                return
    _set_out(w, i, c.axis, c.emap)


def _transpose(w: _Walk, i: int) -> None:
    node = w.nodes[i]
    c = w.chan.get(node.input[0])
    if c is None:
        return
    r = w.rank(node.input[0])
    perm = w.attr(i, "perm")
    if perm is None:
        if r is None:
            w.pin(c.emap, f"shape unknown at Transpose '{w.ids[i]}'")
            return
        perm = list(range(r))[::-1]
    _set_out(w, i, list(perm).index(c.axis), c.emap)


def _reshape_like(w: _Walk, i: int) -> None:
    """Reshape/Flatten/Squeeze/Unsqueeze, from the concrete shapes: the channel axis may stay whole, merge with
    the axes after it (each channel becomes a block of positions: Flatten before a Gemm), or be split back
    from such blocks. A Reshape may split real channels into ``(heads, head_dim)`` (:func:`_split_heads`: whole
    heads); merging them with the axes before them pins the group. A Reshape's target shape must leave the
    channel count to the data (``-1``, a copied dim) or hold it as a literal thinning can rewrite."""
    node = w.nodes[i]
    x, y = node.input[0], node.output[0]
    c = w.chan.get(x)
    if c is None:
        if len(node.input) > 1 and w.chan.get(node.input[1]) is not None:
            _pin_unknown(w, i)
        return
    s, t = w.shape(x), w.shape(y)
    if s is None or t is None:
        w.pin(c.emap, f"shape unknown at {node.op_type} '{w.ids[i]}'")
        return
    mapped = map_reshape(s, t, c.axis, c.emap)
    if mapped is None and node.op_type == "Reshape":
        mapped = _split_heads(w, s, t, c)
    if mapped is None:
        w.pin(c.emap, f"{node.op_type} '{w.ids[i]}' splits or mixes the channel axis {s} -> {t}")
        return
    b, emap = mapped
    if node.op_type == "Reshape":
        if not _check_shape_vector(w, i, node.input[1], b, emap, x, c.axis,
                                   allowzero=int(w.attr(i, "allowzero", 0))):
            return
    _set_out(w, i, b, emap)


def split_axis(s: Sequence[int], t: Sequence[int], axis: int) -> Optional[tuple]:
    """``(b, m)`` when a row-major reshape of shape ``s`` to ``t`` splits axis ``axis`` into the ``m >= 2``
    adjacent axes ``t[b:b+m]`` (their product is ``s[axis]``, the last two > 1) and leaves every other axis as
    it was: ``[B, S, 768] -> [B, S, 12, 64]`` (heads, head_dim) or a fused projection's ``[B, S, 360] ->
    [B, S, 3, 8, 15]`` (q/k/v, heads, head_dim); else None."""
    s, t = [int(v) for v in s], [int(v) for v in t]
    m = len(t) - len(s) + 1
    b = axis
    if m < 2 or t[:b] != s[:b] or t[b + m:] != s[axis + 1:]:
        return None
    if t[b + m - 2] < 2 or t[b + m - 1] < 2 or int(np.prod(t[b:b + m])) != s[axis]:
        return None
    return b, m


def _split_heads(w: _Walk, s: list, t: list, c: _Chan):
    """A Reshape splitting the channel axis into several axes (:func:`split_axis`), the last two being
    ``(heads, head_dim)`` (attention: ``[B, S, H·d] -> [B, S, H, d]``; a fused q/k/v projection ``[B, S, 3·H·d]
    -> [B, S, 3, H, d]``): the heads axis carries the channels, one per head, and every channel of a head
    (its ``d`` positions, in q, k and v) is united with it, so a head is removed whole; the other split axes
    never change size. Whatever later mixes the heads (or merges them with the axes before them) pins the
    group as usual; merging ``(H, d)`` back is :func:`map_reshape`'s block case. ``(heads axis, heads map)``
    or None."""
    found = split_axis(s, t, c.axis)
    if found is None:
        return None
    b, m = found
    h = b + m - 2
    blocks = np.moveaxis(c.emap.reshape(t[b:b + m]), m - 2, 0).reshape(t[h], -1)
    for col in blocks.T[1:]:
        w.unite(blocks[:, 0], col)
    heads = blocks[:, 0].copy()
    w.head_splits.append(heads)
    return h, heads


def map_reshape(s: Sequence[int], t: Sequence[int], axis: int, emap: np.ndarray):
    """Where channel axis ``axis`` of a tensor of shape ``s`` lands after a row-major reshape to ``t``:
    ``(new axis, new element map)`` or None when the channels would be split across axes or mixed with the
    axes before them.

    With ``L = prod(s[:axis])``, ``C = s[axis]``, ``R = prod(s[axis+1:])``, and ``b`` the output axis with
    ``prod(t[:b]) == L``: ``t[b] == C`` keeps the map; ``t[b] == C·r`` with ``r | R`` merges each channel with
    the ``r`` positions after it (``np.repeat(emap, r)``: a Flatten before a Gemm); ``t[b] == C/k`` is allowed
    when the map is already made of blocks of ``k`` equal elements (undoing such a merge).
    """
    s, t = [int(v) for v in s], [int(v) for v in t]
    lead = int(np.prod(s[:axis])) if axis else 1
    size, rest = s[axis], int(np.prod(s[axis + 1:])) if axis + 1 < len(s) else 1
    prefix = 1
    candidates = []
    for b, d in enumerate(t):
        if prefix == lead:
            candidates.append(b)
        prefix *= d
    for b in candidates:  # a leading run of size-1 axes gives several candidates: take the one that fits
        d = t[b]
        if d == size:
            return b, emap
        if d > size and d % size == 0 and rest % (d // size) == 0:
            return b, np.repeat(emap, d // size)
        if d < size and d > 0 and size % d == 0:
            blocks = emap.reshape(d, size // d)
            if (blocks == blocks[:, :1]).all():
                return b, blocks[:, 0].copy()
    return None


def _check_shape_vector(w: _Walk, i: int, shape_input: str, pos: int, emap: np.ndarray, data: str, data_axis: int,
                        allowzero: int = 0) -> bool:
    """A target-shape vector (Reshape ``shape``, Resize ``sizes``) whose entry ``pos`` sizes the channel axis:
    it must be ``-1``, ``0`` copying the same channel axis of the data, a dim Shape read from the same
    channels, or a literal thinning rewrites (``shape_literal`` edit); no other entry may read a channel
    count. Pins and returns False otherwise."""
    node = w.nodes[i]
    w.shape_checked.add(i)
    vec = w.shape_vector(shape_input, (i, list(node.input).index(shape_input)))
    where = f"{node.op_type} '{w.ids[i]}'"
    if vec is None or pos >= len(vec):
        w.pin(emap, f"{where} target shape is computed by ops that cannot be followed")
        return False
    for j, e in enumerate(vec):
        if e[0] == "d":
            dc = w.chan.get(e[1])
            reads_channels = dc is not None and dc.axis == e[2]
            if j == pos:
                if not reads_channels or not _same_elements(w, dc.emap, emap):
                    w.pin(emap, f"{where} target shape copies a dim that is not these channels")
                    return False
            elif reads_channels:
                w.pin(dc.emap, f"{where} target shape copies a channel count to another axis")
                return False
        elif e[0] == "?":
            w.pin(emap, f"{where} target shape is computed by ops that cannot be followed")
            return False
    e = vec[pos]
    if e[0] == "c":
        if e[1] == -1 and node.op_type == "Reshape":
            return True
        if e[1] == 0 and node.op_type == "Reshape" and not allowzero and pos == data_axis:
            return True
        if e[1] == len(emap) and e[2] is not None:
            if e[2][0] == "copy":
                _, reader, k, j = e[2]
                w.edit("shape_literal", i, emap, extra={"tensor": w.nodes[reader].input[k], "reader": reader,
                                                         "input": k, "index": j})
            else:
                w.edit("shape_literal", i, emap, extra={"tensor": e[2][0], "index": e[2][1]})
            return True
        w.pin(emap, f"{where} target shape holds the channel count in a constant that cannot be rewritten")
        return False
    return True


def _same_elements(w: _Walk, a: np.ndarray, b: np.ndarray) -> bool:
    if len(a) != len(b):
        return False
    return all(w.uf.find(x) == w.uf.find(y) for x, y in zip(a.tolist(), b.tolist()))


def _concat(w: _Walk, i: int) -> None:
    """Concat along the channel axis concatenates the inputs' maps (inputs without channels get fixed
    elements); along another axis it joins the inputs' channels position by position."""
    node = w.nodes[i]
    tracked = [(k, w.chan[x]) for k, x in enumerate(node.input) if x in w.chan]
    if not tracked:
        return
    r = w.rank(node.output[0])
    if r is None:
        w.pin_inputs(i, f"shape unknown at Concat '{w.ids[i]}'")
        return
    axis = int(w.attr(i, "axis", 0)) % r
    chan_axes = {c.axis for _, c in tracked}
    if len(chan_axes) != 1:
        w.pin_inputs(i, f"Concat '{w.ids[i]}' combines channels on different axes")
        return
    cax = chan_axes.pop()
    if axis == cax:
        parts = []
        for x in node.input:
            if x in w.chan:
                parts.append(w.chan[x].emap)
            else:
                s = w.shape(x)
                if s is None:
                    w.pin_inputs(i, f"shape unknown at Concat '{w.ids[i]}'")
                    return
                if s[axis]:
                    parts.append(w.fixed(x, s[axis], f"concatenated at Concat '{w.ids[i]}' with '{x}', "
                                                      "whose channels are not prunable"))
        _set_out(w, i, axis, np.concatenate(parts))
        return
    emap = tracked[0][1].emap
    for _, c in tracked[1:]:
        if len(c.emap) != len(emap):
            w.pin_inputs(i, f"Concat '{w.ids[i]}' joins different channel counts")
            return
        w.unite(emap, c.emap)
    for x in node.input:
        if x not in w.chan:
            w.unite(emap, w.fixed(x, len(emap), f"concatenated at Concat '{w.ids[i]}' with '{x}', whose channels "
                                                "are not prunable"))
    _set_out(w, i, cax, emap)


def _split(w: _Walk, i: int) -> None:
    """Split along the channel axis hands each output its range of the map (``split`` edit: the sizes become
    the kept counts); along another axis every output keeps the map."""
    node = w.nodes[i]
    got = _ranked_input(w, i)
    if got is None:
        return
    c, r = got
    axis = int(w.attr(i, "axis", 0)) % r
    if axis != c.axis:
        for k in range(len(node.output)):
            _set_out(w, i, c.axis, c.emap, k)
        return
    sizes = [w.shape(o)[axis] if w.shape(o) is not None else None for o in node.output]
    if any(s is None for s in sizes) or sum(sizes) != len(c.emap):
        w.pin(c.emap, f"Split '{w.ids[i]}' sizes unknown")
        return
    if len(node.input) > 1 and node.input[1] and not w.is_const(node.input[1]):
        w.pin(c.emap, f"Split '{w.ids[i]}' has computed sizes")
        return
    w.edit("split", i, c.emap, axis=axis, extra={"sizes": sizes})
    off = 0
    for k, s in enumerate(sizes):
        _set_out(w, i, axis, c.emap[off:off + s], k)
        off += s


def _slice(w: _Walk, i: int) -> None:
    """Slice along the channel axis (step 1, constant bounds) takes that range of the map (``slice`` edit:
    the bounds become counts of kept channels); along other axes it keeps the map. Slices of shape vectors
    are followed by :meth:`_Walk.shape_vector`."""
    node = w.nodes[i]
    c = w.chan.get(node.input[0])
    if c is None:
        _shape_op(w, i)
        return
    if any(w.chan.get(x) is not None for x in node.input[1:]):
        w.pin_inputs(i, f"Slice '{w.ids[i]}' bounds read the channels")
        return
    xs = w.shape(node.input[0])
    if xs is None:
        w.pin(c.emap, f"shape unknown at Slice '{w.ids[i]}'")
        return
    r = len(xs)
    if w.opset() < 10:
        starts, ends, axes = w.attr(i, "starts"), w.attr(i, "ends"), w.attr(i, "axes")
        steps = None
        if axes is None:
            axes = list(range(len(starts)))
    else:
        vals = [w.const_value(node.input[k]) if len(node.input) > k and node.input[k] else None for k in (1, 2, 3, 4)]
        if vals[0] is None or vals[1] is None or (len(node.input) > 3 and node.input[3] and vals[2] is None) or \
                (len(node.input) > 4 and node.input[4] and vals[3] is None):
            w.pin(c.emap, f"Slice '{w.ids[i]}' has computed bounds")
            return
        starts, ends = vals[0].reshape(-1).tolist(), vals[1].reshape(-1).tolist()
        axes = vals[2].reshape(-1).tolist() if vals[2] is not None else list(range(len(starts)))
        steps = vals[3].reshape(-1).tolist() if vals[3] is not None else None
    axes = [int(a) % r for a in axes]
    if c.axis not in axes:
        _set_out(w, i, c.axis, c.emap)
        return
    pos = axes.index(c.axis)
    if steps is not None and int(steps[pos]) != 1:
        w.pin(c.emap, f"Slice '{w.ids[i]}' steps over the channel axis")
        return
    size = len(c.emap)
    start, end = int(starts[pos]), int(ends[pos])
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, 0), size)
    if end <= start:
        w.pin(c.emap, f"Slice '{w.ids[i]}' selects no channels")
        return
    w.edit("slice", i, c.emap, axis=c.axis, extra={"pos": pos, "start": start, "end": end})
    _set_out(w, i, c.axis, c.emap[start:end])


def _gather(w: _Walk, i: int) -> None:
    """Gather along an axis other than the channel axis keeps the channels (moved by the indices' rank);
    along the channel axis it picks channels by index (pinned)."""
    node = w.nodes[i]
    c = w.chan.get(node.input[0])
    if c is None:
        _shape_op(w, i)
        return
    r, q = w.rank(node.input[0]), w.rank(node.input[1])
    if r is None or q is None or w.chan.get(node.input[1]) is not None:
        w.pin_inputs(i, f"Gather '{w.ids[i]}' reads the channels")
        return
    axis = int(w.attr(i, "axis", 0)) % r
    if axis == c.axis:
        w.pin(c.emap, f"Gather '{w.ids[i]}' picks channels by index")
        return
    _set_out(w, i, c.axis if c.axis < axis else c.axis + q - 1, c.emap)


def _reduce(w: _Walk, i: int) -> None:
    """Reductions over axes other than the channel axis keep the channels (moved when ``keepdims=0``);
    over the channel axis they mix them (pinned)."""
    node = w.nodes[i]
    got = _ranked_input(w, i)
    if got is None:
        return
    c, r = got
    if node.op_type in ("ArgMax", "ArgMin"):
        axes = [int(w.attr(i, "axis", 0))]
    else:
        axes = w.attr(i, "axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            v = w.const_value(node.input[1])
            if v is None:
                w.pin(c.emap, f"{node.op_type} '{w.ids[i]}' has computed axes")
                return
            axes = v.reshape(-1).tolist()
        if not axes:
            if int(w.attr(i, "noop_with_empty_axes", 0)):
                _set_out(w, i, c.axis, c.emap)
                return
            axes = list(range(r))
    axes = sorted({int(a) % r for a in axes})
    if c.axis in axes:
        w.pin(c.emap, f"{node.op_type} '{w.ids[i]}' reduces over the channel axis")
        return
    keep = int(w.attr(i, "keepdims", 1))
    _set_out(w, i, c.axis if keep else c.axis - sum(a < c.axis for a in axes), c.emap)


def _softmax(w: _Walk, i: int) -> None:
    """Softmax/LogSoftmax/Hardmax over the channel axis mixes channels (pinned); over another axis the
    channels pass through (before opset 13 the op flattens every axis from ``axis`` on)."""
    node = w.nodes[i]
    got = _ranked_input(w, i)
    if got is None:
        return
    c, r = got
    old = w.opset() < 13
    axis = int(w.attr(i, "axis", 1 if old else -1)) % r
    if c.axis == axis or (old and c.axis >= axis):
        w.pin(c.emap, f"{node.op_type} '{w.ids[i]}' normalizes over the channel axis")
        return
    _set_out(w, i, c.axis, c.emap)


def _expand(w: _Walk, i: int) -> None:
    """Expand keeps the channels when its shape has 1 on the channel axis (the data's own count is kept)."""
    node = w.nodes[i]
    c = w.chan.get(node.input[0])
    if c is None:
        if len(node.input) > 1 and w.chan.get(node.input[1]) is not None:
            _pin_unknown(w, i)
        return
    xs, ys = w.shape(node.input[0]), w.shape(node.output[0])
    vec = w.shape_vector(node.input[1])
    if xs is None or ys is None or vec is None:
        w.pin(c.emap, f"Expand '{w.ids[i]}' shape cannot be followed")
        return
    axis = c.axis + len(ys) - len(xs)
    j = axis - (len(ys) - len(vec))
    if j >= 0 and not (vec[j][0] == "c" and vec[j][1] == 1):
        w.pin(c.emap, f"Expand '{w.ids[i]}' states the channel count")
        return
    _set_out(w, i, axis, c.emap)


def _shape(w: _Walk, i: int) -> None:
    """Shape reads dims: its output is followed as a shape vector, so a channel count can flow only into a
    Reshape/Resize target that uses it for the same channels (checked there)."""
    node = w.nodes[i]
    r = w.rank(node.input[0])
    if r is None:
        if node.input[0] in w.chan:
            w.pin(w.chan[node.input[0]].emap, f"shape unknown at Shape '{w.ids[i]}'")
        return
    start, end = int(w.attr(i, "start", 0)), w.attr(i, "end")
    start = start + r if start < 0 else start
    end = r if end is None else (int(end) + r if int(end) < 0 else int(end))
    w.shape_vals[node.output[0]] = [("d", node.input[0], k) for k in range(max(0, start), min(r, end))]


def _shape_op(w: _Walk, i: int) -> None:
    """Cast/Identity/Squeeze/Unsqueeze/Gather/Slice/Concat of shape vectors (1-D integer tensors)."""
    node = w.nodes[i]
    op = node.op_type
    vec = w.shape_vector(node.input[0], (i, 0)) if node.input else None
    out: Optional[list] = None
    if op == "Concat":
        parts = [w.shape_vector(x, (i, k)) for k, x in enumerate(node.input)]
        if all(p is not None for p in parts):
            out = [e for p in parts for e in p]
    elif vec is None:
        return
    elif op in ("Cast", "Identity"):
        out = vec
    elif op in ("Squeeze", "Unsqueeze"):
        out = vec if len(vec) <= 1 else None
    elif op == "Gather":
        idx = w.const_value(node.input[1])
        if idx is not None and idx.size:
            flat = [int(v) for v in idx.reshape(-1).tolist()]
            if all(-len(vec) <= v < len(vec) for v in flat):
                out = [vec[v] for v in flat]
    elif op == "Slice":
        if w.opset() < 10:
            starts, ends, steps = w.attr(i, "starts"), w.attr(i, "ends"), [1]
        else:
            vals = [w.const_value(node.input[k]) if len(node.input) > k and node.input[k] else None for k in (1, 2, 4)]
            starts = vals[0].reshape(-1).tolist() if vals[0] is not None else None
            ends = vals[1].reshape(-1).tolist() if vals[1] is not None else None
            steps = vals[2].reshape(-1).tolist() if vals[2] is not None else [1]
        if starts is not None and ends is not None and len(starts) == 1:
            out = vec[slice(int(starts[0]), int(ends[0]) if int(ends[0]) < 2**62 else None, int(steps[0]))]
    if out is not None:
        w.shape_vals[node.output[0]] = out


def _subgraph_node(w: _Walk, i: int) -> None:
    w.pin_inputs(i, f"feeds {w.nodes[i].op_type} '{w.ids[i]}' (a subgraph)")


_HANDLERS: dict = {
    **{op: _unary for op in UNARY_OPS},
    **{op: _broadcast for op in BROADCAST_OPS},
    **{op: _pool for op in POOL_OPS},
    **{op: _reduce for op in REDUCE_OPS},
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "BatchNormalization": _batchnorm,
    "InstanceNormalization": _batchnorm,
    "LayerNormalization": _layernorm,
    "Resize": _same_size,
    "Upsample": _same_size,
    "Pad": _same_size,
    "Tile": _same_size,
    "Transpose": _transpose,
    "Reshape": _reshape_like,
    "Flatten": _reshape_like,
    "Squeeze": _reshape_like,
    "Unsqueeze": _reshape_like,
    "Concat": _concat,
    "Split": _split,
    "Slice": _slice,
    "Gather": _gather,
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "Hardmax": _softmax,
    "Expand": _expand,
    "Shape": _shape,
}
"""op type -> handler ``(walk, node index)``: propagates element maps, records edits and pins."""


#: input indices a handler reads channels from (None: every input); channels reaching any other input of
#: the op (a weight, a bound, axes) are pinned by :func:`_handle`
_CHANNEL_INPUTS: dict = {
    **{op: (0,) for op in UNARY_OPS | POOL_OPS | REDUCE_OPS},
    **{op: None for op in BROADCAST_OPS},
    "Conv": (0,), "ConvTranspose": (0,), "Gemm": (0, 1), "MatMul": (0, 1), "BatchNormalization": (0,),
    "InstanceNormalization": (0,), "LayerNormalization": (0,), "Resize": (0,), "Upsample": (0,), "Pad": (0,),
    "Tile": (0,), "Transpose": (0,), "Reshape": (0,), "Flatten": (0,), "Squeeze": (0,), "Unsqueeze": (0,),
    "Concat": None, "Split": (0,), "Slice": (0,), "Gather": (0,), "Softmax": (0,), "LogSoftmax": (0,),
    "Hardmax": (0,), "Expand": (0,), "Shape": (0,),
}


def _handle(w: _Walk, i: int) -> None:
    node = w.nodes[i]
    if w.consts.follow(node):  # Transpose/Reshape/Cast... of a constant: still a constant
        return
    if node.op_type == "Constant":
        return
    reads_chan = any(x in w.chan for x in node.input)
    handler = _HANDLERS.get(node.op_type)
    if node.domain not in _STANDARD or has_subgraphs(node) or handler is None:
        if reads_chan:
            _pin_unknown(w, i)
    else:
        allowed = _CHANNEL_INPUTS.get(node.op_type)
        if allowed is not None:
            for k, x in enumerate(node.input):
                if k not in allowed and x in w.chan:
                    w.pin(w.chan[x].emap, f"feeds input {k} of {node.op_type} '{w.ids[i]}'")
        if reads_chan or node.op_type in PRUNABLE_OPS:  # a layer opens a space anyway
            handler(w, i)
        elif node.op_type == "Shape":
            _shape(w, i)
        elif node.op_type in SHAPE_OPS:
            _shape_op(w, i)
    if node.op_type in SHAPE_OPS and node.op_type != "Shape" and node.output and node.output[0] in w.shape_vals:
        return
    if i in w.shape_checked:
        return
    # a shape vector that carries a channel count must not leave the shape ops unchecked (ConstantOfShape,
    # Range, arithmetic, an unvalidated Reshape target...): thinning would change that number
    for x in node.input:
        for e in w.shape_vals.get(x, []):
            if e[0] == "d" and e[1] in w.chan and w.chan[e[1]].axis == e[2]:
                w.pin(w.chan[e[1]].emap, f"the channel count is read by Shape and used by {node.op_type} "
                                         f"'{w.ids[i]}'")


# -------------------------------------------------------------------------------------------- entry


def find_channel_groups(model: onnx.ModelProto, shapes: dict, node_macs: Optional[Sequence[int]] = None,
                        counted_matrix_macs: Optional[int] = None, base_dir=None) -> ChannelGroups:
    """The channel groups of ``model`` (module docstring).

    Args:
        model: the model as :func:`sparsify_tui.analysis.loading.load_model` returns it (weight data not
            needed: structure and small constants only).
        shapes: concrete shape of every tensor (``{name: [d0, ...] or None}``, e.g. from the node table of
            :func:`sparsify_tui.analysis.nodes.analyze_model` or :func:`sparsify_tui.analysis.shapes.infer_shapes`).
        node_macs: MACs per batch of each main-graph node (by index); groups' ``macs`` are 0 without it.
        counted_matrix_macs: MACs of every Conv/Gemm/MatMul of the model (subgraphs included), the
            denominator of the prunable share; default: the sum over main-graph nodes.
        base_dir: folder of the model's external data (small constants are read from it when stored there).

    Returns:
        :class:`ChannelGroups`. Never raises for an unusual graph: what cannot be proven safe is reported
        as not prunable, with a reason.
    """
    w = _Walk(model, shapes, base_dir)
    for i in range(len(w.nodes)):
        _handle(w, i)
    for name, c in w.chan.items():
        if name in w.outputs:
            w.pin(c.emap, f"reaches graph output '{name}'")
        if name in w.in_subgraphs:
            w.pin(c.emap, f"read inside a subgraph ('{name}')")
    _pin_shared_literals(w)
    out = _collect(w, node_macs, counted_matrix_macs)
    out.tensor_channels = {name: c.emap for name, c in w.chan.items()}
    return out


def _pin_shared_literals(w: _Walk) -> None:
    """A literal rewritten by several ``shape_literal`` edits (a shape vector read by Reshapes of different
    channels) must get one value: allowed when they remove the same channels, else they are pinned."""
    by_target: dict = {}
    for e in w.edits:
        if e.kind == "shape_literal":
            key = (e.extra["tensor"], e.extra.get("reader"), e.extra.get("input"), e.extra["index"])
            by_target.setdefault(key, []).append(e)
    for key, edits in by_target.items():
        first = [w.uf.find(x) for x in edits[0].emap.tolist()]
        if any([w.uf.find(x) for x in e.emap.tolist()] != first for e in edits[1:]):
            for e in edits:
                w.pin(e.emap, f"shape constant '{key[0]}' sizes the channels of several groups")


def _components(w: _Walk, roots: np.ndarray, space_of: np.ndarray) -> tuple:
    """``(component of each space, {component: reasons it is pinned})``: spaces connected through shared element
    classes form one component (one channel group)."""
    n_spaces = len(w.spaces)
    suf = _UnionFind()
    suf.add(n_spaces)
    if len(roots):
        for e, r in zip(np.nonzero(roots != np.arange(len(roots)))[0].tolist(),
                        roots[roots != np.arange(len(roots))].tolist()):
            suf.union(int(space_of[e]), int(space_of[r]))
    comp = suf.roots() if n_spaces else np.zeros(0, np.int64)
    reasons: dict = {}
    for emap, reason in w.pins:
        for cidx in np.unique(comp[space_of[emap]]).tolist():
            lst = reasons.setdefault(cidx, [])
            if reason not in lst:
                lst.append(reason)
    return comp, reasons


def _component_edits(w: _Walk, comp: np.ndarray, space_of: np.ndarray) -> tuple:
    """``(component -> indices of its edits, component -> attention MatMul nodes it carries)``."""
    comp_edits: dict = {}
    carrier_nodes: dict = {}
    for k, e in enumerate(w.edits):
        if len(e.emap) == 0:
            continue
        for cidx in np.unique(comp[space_of[e.emap]]).tolist():
            comp_edits.setdefault(cidx, []).append(k)
    for ni, emap in w.carriers:  # attention MatMuls: no member, but their MACs follow the heads
        for cidx in np.unique(comp[space_of[emap]]).tolist():
            carrier_nodes.setdefault(cidx, set()).add(ni)
    return comp_edits, carrier_nodes


def _group_members(w: _Walk, edits: list) -> tuple:
    """``(members, producer node ids, consumer node ids, node indices of its layers)`` of a group's edits."""
    members, producers, consumers, nodes = [], [], [], set()
    for e in edits:
        node = w.nodes[e.node]
        nid = w.ids[e.node]
        if e.kind == "weight":
            src = w.consts.source.get(node.input[e.input])
            members.append(ChannelMember(src.name if src else node.input[e.input], nid, e.role, e.axis))
            if e.role == "producer":
                producers.append(nid)
            elif e.role == "consumer":
                consumers.append(nid)
        elif e.kind == "shape_literal":
            members.append(ChannelMember(e.extra["tensor"], nid, "shape_literal", 0))
        elif e.kind == "slice":
            members.append(ChannelMember(node.input[1] if len(node.input) > 1 else nid, nid, "slice", e.axis))
        elif e.kind == "split":
            members.append(ChannelMember(node.output[0], nid, "split", e.axis))
        if node.op_type in PRUNABLE_OPS or node.op_type == "ConvTranspose":
            nodes.add(e.node)
    return members, producers, consumers, nodes


def _collect(w: _Walk, node_macs, counted_matrix_macs) -> ChannelGroups:
    roots = w.uf.roots()
    space_of = np.asarray(w.space_of, dtype=np.int64)
    n_spaces = len(w.spaces)
    comp, reasons = _components(w, roots, space_of)
    comp_edits, carrier_nodes = _component_edits(w, comp, space_of)
    split_comps = {int(comp[space_of[h[0]]]) for h in w.head_splits if len(h)}
    head_comps = split_comps & set(carrier_nodes)
    macs = list(node_macs) if node_macs is not None else [0] * len(w.nodes)
    groups = []
    used_ids: dict = {}
    touched_prunable: set = set()
    first_layer = next((s for s, sp in enumerate(w.spaces) if sp[0] == "layer"), None)
    for cidx in sorted(set(comp.tolist()), key=lambda c: min(s for s in range(n_spaces) if comp[s] == c)):
        layer_spaces = [s for s in range(n_spaces) if comp[s] == cidx and w.spaces[s][0] == "layer"]
        if not layer_spaces:
            continue
        first = w.spaces[layer_spaces[0]]
        gid = first[2]
        if gid in used_ids:
            used_ids[gid] += 1
            gid = f"{gid}#{used_ids[gid]}"
        else:
            used_ids[first[2]] = 1
        elems = np.nonzero(comp[space_of] == cidx)[0]
        classes = []
        seen = set()
        for r in roots[elems].tolist():  # in element order: the first producer's channels first
            if r not in seen:
                seen.add(r)
                classes.append(r)
        members, producers, consumers, nodes = _group_members(w, [w.edits[k] for k in comp_edits.get(cidx, [])])
        nodes |= carrier_nodes.get(cidx, set())
        first_roots = roots[space_of == layer_spaces[0]]
        channel_size = math.gcd(*np.unique(first_roots, return_counts=True)[1].tolist()) if len(first_roots) else 1
        rs = reasons.get(cidx, [])
        prunable = not rs
        if prunable:
            touched_prunable.update(n for n in nodes if w.nodes[n].op_type in PRUNABLE_OPS)
        groups.append(ChannelGroup(
            id=gid, channels=len(classes), prunable=prunable,
            reason="; ".join(rs[:3]) + (f" (+{len(rs) - 3} more)" if len(rs) > 3 else "") if rs else None,
            members=members, producers=list(dict.fromkeys(producers)), consumers=list(dict.fromkeys(consumers)),
            macs=int(sum(macs[n] for n in nodes if n < len(macs))),
            classes=np.asarray(classes, dtype=np.int64),
            first_layer=first_layer is not None and first_layer in layer_spaces,
            channel_size=int(channel_size), unit="head" if cidx in head_comps else "channel",
        ))
    matrix = counted_matrix_macs if counted_matrix_macs is not None else \
        sum(m for n, m in zip(w.nodes, macs) if n.op_type in PRUNABLE_OPS)
    return ChannelGroups(groups=groups, edits=w.edits, element_root=roots, matrix_macs=int(matrix),
                         prunable_macs=int(sum(macs[n] for n in touched_prunable if n < len(macs))))



# ------------------------------------------------------------------------------ constants and importance


class ConstantLookup:
    """Initializers and node producers of a model's main graph, indexed once for :func:`constant_view`."""

    def __init__(self, model: onnx.ModelProto, base_dir=None) -> None:
        self.model = model
        self.base_dir = base_dir
        self.inits = {t.name: t for t in model.graph.initializer}
        self.producer = {o: n for n in model.graph.node for o in n.output}


def constant_view(model: onnx.ModelProto, name: str, lookup: Optional[ConstantLookup] = None,
                  base_dir=None) -> np.ndarray:
    """The value of constant tensor ``name`` as the nodes reading it see it: its initializer (a read-only view
    of the stored bytes when possible), followed forward through the weight chain
    (:data:`sparsify_tui.analysis.layers.WEIGHT_CHAIN_OPS`: Transpose, Reshape, Identity, Cast, Squeeze,
    Unsqueeze, Flatten) with numpy. ``lookup`` (:class:`ConstantLookup`) saves indexing the model on every
    call. Raises ``KeyError`` when ``name`` is not a constant of the main graph, ``ValueError`` for another op
    (a DequantizeLinear chain)."""
    from sparsify_tui.analysis.loading import tensor_array

    lk = lookup if lookup is not None else ConstantLookup(model, base_dir)
    if name in lk.inits:
        return np.asarray(tensor_array(lk.inits[name], lk.base_dir))
    node = lk.producer.get(name)
    if node is None:
        raise KeyError(name)
    if node.op_type == "Constant":
        return onnx.numpy_helper.to_array(next(a.t for a in node.attribute if a.name == "value"))
    x = constant_view(model, node.input[0], lk)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    op = node.op_type
    if op == "Identity":
        return x
    if op == "Cast":
        return x.astype(onnx.helper.tensor_dtype_to_np_dtype(attrs["to"]))
    if op == "Transpose":
        return np.transpose(x, attrs.get("perm"))
    if op == "Flatten":
        ax = attrs.get("axis", 1) % max(x.ndim, 1) if x.ndim else 0
        return x.reshape(int(np.prod(x.shape[:ax])), -1)
    if op in ("Squeeze", "Unsqueeze"):
        axes = attrs.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = constant_view(model, node.input[1], lk).reshape(-1).tolist()
        if op == "Squeeze":
            return np.squeeze(x, axis=tuple(int(a) for a in axes) if axes else None)
        out_rank = x.ndim + len(axes)
        for a in sorted(int(a) % out_rank for a in axes):
            x = np.expand_dims(x, a)
        return x
    if op == "Reshape":
        shape = [int(v) for v in constant_view(model, node.input[1], lk).reshape(-1).tolist()]
        if not attrs.get("allowzero", 0):
            shape = [x.shape[j] if v == 0 else v for j, v in enumerate(shape)]
        return x.reshape(shape)
    raise ValueError(f"cannot evaluate {op} '{node_id(node)}' on constants")


def channel_importance(model: onnx.ModelProto, groups: ChannelGroups, method: str = "l2",
                       base_dir=None) -> dict:
    """Importance of every channel of every prunable group: ``{group id: float64[channels]}``; higher = keep.

    * ``"l2"`` (default): the **group L2 norm** of DepGraph (Fang et al., CVPR 2023; Torch-Pruning's
      ``GroupMagnitudeImportance(p=2)``): for channel ``c``, ``sqrt(Σ w²)`` over every coupled weight slice of
      the group: the producers' output-channel slices, the consumers' input-channel slices, depthwise
      weights and BatchNorm scales (biases excluded, as Torch-Pruning's default ``bias=False``). Torch-Pruning
      averages the per-layer squared sums instead of adding them; the order of channels is the same.
    * ``"bn_scale"``: Σ |γ| of the group's BatchNorm scales (Liu et al., "Learning Efficient Convolutional
      Networks through Network Slimming", ICCV 2017; Torch-Pruning's ``BNScaleImportance``); groups without a
      BatchNorm fall back to ``"l2"``.

    ``model`` must hold the weights (or give ``base_dir`` for external data). Raises ``SparsifyError`` for
    an unknown method.
    """
    if method not in ("l2", "bn_scale"):
        raise SparsifyError(f"unknown channel importance {method!r}: use l2 or bn_scale")
    lookup = ConstantLookup(model, base_dir)
    n_el = len(groups.element_root)
    sq = np.zeros(n_el, dtype=np.float64)
    bn = np.zeros(n_el, dtype=np.float64)
    has_bn = np.zeros(n_el, dtype=bool)
    for e in groups.edits:
        if e.kind != "weight" or e.role not in IMPORTANCE_ROLES:
            continue
        arr = constant_view(model, model.graph.node[e.node].input[e.input], lookup)
        rows = np.moveaxis(arr, e.axis, 0).reshape(len(e.emap), -1)
        np.add.at(sq, e.emap, np.einsum("ij,ij->i", rows, rows, dtype=np.float64))
        if e.role == "batchnorm_scale":
            np.add.at(bn, e.emap, np.abs(rows).sum(axis=1, dtype=np.float64))
            has_bn[e.emap] = True
    root = groups.element_root
    sq_cls = np.zeros(n_el, dtype=np.float64)
    np.add.at(sq_cls, root, sq)
    bn_cls = np.zeros(n_el, dtype=np.float64)
    np.add.at(bn_cls, root, bn)
    bn_any = np.zeros(n_el, dtype=bool)
    np.logical_or.at(bn_any, root, has_bn)
    out = {}
    for g in groups.groups:
        if not g.prunable:
            continue
        if method == "bn_scale" and bn_any[g.classes].all():
            out[g.id] = bn_cls[g.classes]
        else:
            out[g.id] = np.sqrt(sq_cls[g.classes])
    return out


def default_round_to(instruction_sets: Optional[Sequence[str]] = None) -> int:
    """The multiple kept channel counts round to by default: onnxruntime's NCHWc channel block on this CPU,
    16 with AVX-512 (``AVX512F``) and 8 otherwise (MLAS blocks NCHWc convolutions by 16 on AVX-512F and by 8 on
    AVX2; other channel counts take slower paths). ``instruction_sets``: names as in
    :class:`sparsify_tui.analysis.system.SystemInfo` (default: this machine's).

    Measured (docs/optimize.md, "Channel pruning"; ResNet-50 and MobileNetV2 at R = 0.3, AVX2, batch 1 and 8): 8 and 16
    run equally fast (within the spread), while 1 is 15-20 % slower on ResNet-50 and makes MobileNetV2 *slower
    than the unpruned model*; so the finer of the fast options is the default on AVX2. 16 on AVX-512 follows from
    its block size (no AVX-512 machine was measured).
    """
    if instruction_sets is None:
        from sparsify_tui.analysis.system import machine_info

        instruction_sets = machine_info().instruction_sets
    return 16 if "AVX512F" in set(instruction_sets) else 8


def round_kept(channels: int, ratio: float, round_to: int = 1) -> int:
    """Channels kept when removing the fraction ``ratio`` (0..1) of ``channels``, rounded to the hardware.

    The target ``channels·(1 - ratio)`` goes to the nearest of ``{k·round_to : k >= 1, k·round_to <=
    channels} ∪ {channels}`` (ties keep more). So a kept count is always a multiple of ``round_to`` unless the
    group is left whole, and at least one block of ``round_to`` channels stays. (Torch-Pruning's ``round_to``
    floors ``int(channels·(1 - ratio))`` down to a multiple instead.) Raises ``SparsifyError`` for a ratio
    outside [0, 1) or ``round_to < 1``.
    """
    if not 0.0 <= float(ratio) < 1.0:
        raise SparsifyError(f"channel ratio {ratio} out of range: give the fraction of channels to remove, "
                            "0 <= R < 1")
    if int(round_to) < 1:
        raise SparsifyError(f"round_to must be at least 1 (got {round_to})")
    r = int(round_to)
    target = channels * (1.0 - float(ratio))
    options = sorted({k * r for k in range(1, channels // r + 1)} | {channels})
    return min(options, key=lambda v: (abs(v - target), -v))


def group_round_to(round_to: int, channel_size: int = 1, unit: str = "channel") -> int:
    """:meth:`ChannelGroup.round_to` from a group's stored fields (``channel_size``, ``unit``)."""
    if unit == "head":
        return 1
    r = max(int(round_to), 1)
    return r // math.gcd(r, max(int(channel_size), 1))


def choose_removed(groups: ChannelGroups, importance: dict, ratios: dict, round_to: int = 1) -> dict:
    """``{group id: channel indices to remove}``: for each group of ``ratios`` (``{group id: ratio}``), its
    least important channels so that :func:`round_kept` channels stay, rounded to the group's own multiple
    (:meth:`ChannelGroup.round_to`: whole heads, grouped convs; ties: the lower index is removed first, a
    stable order). Raises ``SparsifyError`` for an unknown or non-prunable group with a ratio > 0."""
    out = {}
    for gid, ratio in ratios.items():
        g = groups.group(gid)
        if float(ratio) == 0.0:
            continue
        if not g.prunable:
            raise SparsifyError(f"channel group {gid!r} is not prunable ({g.reason}): set its ratio to 0")
        kept = round_kept(g.channels, ratio, g.round_to(round_to))
        order = np.argsort(importance[gid], kind="stable")
        out[gid] = np.sort(order[: g.channels - kept])
    return out


def analyze_channels(path, batch_size: int = 1, dims: Optional[dict] = None, *, engine=None):
    """Load the model at ``path``, analyze it (:func:`sparsify_tui.analysis.nodes.analyze_model`: shapes for
    ``batch_size`` and ``dims``, MACs per node) and find its channel groups.

    Returns ``(model, analysis, groups)``: the ``onnx.ModelProto`` without external weight data, the
    :class:`~sparsify_tui.analysis.nodes.ModelAnalysis` and :class:`ChannelGroups`. Raises ``ModelError`` /
    ``DimensionError`` as ``analyze_model`` does.
    """
    from pathlib import Path

    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.analysis.nodes import analyze_model

    model = load_model(path, load_external_data=False)
    analysis = analyze_model(path, batch_size=batch_size, dims=dims, count_zeros=False, include_system=False,
                             engine=engine)
    return model, analysis, groups_from_analysis(model, analysis, base_dir=Path(path).parent)


def groups_from_analysis(model: onnx.ModelProto, analysis, base_dir=None) -> ChannelGroups:
    """:func:`find_channel_groups` with the shapes and MACs of a node table (``analysis``, made from the same
    file as ``model``)."""
    shapes: dict = {}
    main = [n for n in analysis.nodes if not n.graph]
    for n in main:
        for name, s in zip(n.inputs, n.input_shapes):
            if name and s is not None:
                shapes[name] = s
        for name, s in zip(n.outputs, n.output_shapes):
            if name and s is not None:
                shapes[name] = s
    for t in model.graph.initializer:
        shapes[t.name] = [int(d) for d in t.dims]
    for io in list(analysis.inputs) + list(analysis.outputs):
        if io.get("resolved_shape") is not None and io["name"] not in shapes:
            shapes[io["name"]] = io["resolved_shape"]
    matrix = sum(n.macs for n in analysis.nodes if n.counted and n.op_type in PRUNABLE_OPS)
    return find_channel_groups(model, shapes, [n.macs for n in main], counted_matrix_macs=matrix,
                               base_dir=base_dir)


# ------------------------------------------------------------------------------ cost factors of each node


@dataclass
class NodeChannels:
    """How the cost of one main-graph node follows the channel groups (the channel time model's input).

    ``id``: node id; ``op_type``; ``kind``: ``"layer"`` (Conv/Gemm/MatMul with an initializer weight: its MACs
    scale with kept input × kept output channels), ``"depthwise"`` (a depthwise Conv: its MACs scale with its
    channels once), ``"batched"`` (a MatMul of two activations, attention: its MACs scale once with the heads
    of its batch axis) or ``"other"`` (activations, BatchNorm, pooling, residual Add...: work per element of the
    output); ``inputs`` / ``outputs``: ``{group id: share}``, the share of the positions of the node's data
    input / first output channel axis that belong to each prunable group (the rest never changes);
    ``macs`` per batch; ``params``: weight elements of a layer (0 otherwise); ``weight``: the layer's weight
    initializer name ("" when unknown), so a weight shared by several layers is counted as thinning writes it.
    """

    id: str
    op_type: str
    kind: str
    inputs: dict
    outputs: dict
    macs: int = 0
    params: int = 0
    weight: str = ""

    def to_dict(self) -> dict:
        return {"id": self.id, "op_type": self.op_type, "kind": self.kind, "inputs": dict(self.inputs),
                "outputs": dict(self.outputs), "macs": int(self.macs), "params": int(self.params),
                "weight": self.weight}

    @classmethod
    def from_dict(cls, d: dict) -> "NodeChannels":
        return cls(id=d["id"], op_type=d.get("op_type", ""), kind=d.get("kind", "other"),
                   inputs=dict(d.get("inputs") or {}), outputs=dict(d.get("outputs") or {}),
                   macs=int(d.get("macs") or 0), params=int(d.get("params") or 0), weight=str(d.get("weight") or ""))


def group_shares(groups: ChannelGroups, emap: np.ndarray) -> dict:
    """``{group id: share}``: the share (0..1) of the positions of ``emap`` (element ids) whose channel belongs
    to each *prunable* group. Positions of non-prunable groups or fixed channels are left out."""
    if emap is None or len(emap) == 0:
        return {}
    owner = getattr(groups, "_root_owner", None)
    if owner is None:
        owner = {}
        for g in groups.groups:
            if g.prunable:
                for r in g.classes.tolist():
                    owner[int(r)] = g.id
        groups._root_owner = owner  # cached on the instance (not a dataclass field)
    roots = groups.element_root[np.asarray(emap, dtype=np.int64)]
    out: dict = {}
    for r, n in zip(*np.unique(roots, return_counts=True)):
        gid = owner.get(int(r))
        if gid is not None:
            out[gid] = out.get(gid, 0.0) + float(n) / len(roots)
    return out


def node_channel_factors(groups: ChannelGroups, analysis) -> list:
    """One :class:`NodeChannels` per main-graph node of ``analysis`` (the node table the groups were found
    with), graph order. The data input of a node is its first input that carries channels (weights never do),
    its output its first output that does."""
    chans = groups.tensor_channels
    out = []
    for n in analysis.nodes:
        if n.graph:
            continue
        ins = next((x for x in n.inputs if x in chans), None)
        outs = next((x for x in n.outputs if x in chans), None)
        group = int((n.attrs or {}).get("group", 1) or 1)
        xs = n.input_shapes[0] if n.input_shapes else None
        if n.op_type == "Conv" and group > 1 and (xs is None or len(xs) < 2 or group == xs[1]):
            kind = "depthwise"  # a grouped conv (group < input channels) scales with inputs × outputs: a layer
        elif n.prunable and n.op_type in PRUNABLE_OPS:
            kind = "layer"
        elif n.op_type == "MatMul" and n.macs:
            kind = "batched"
        else:
            kind = "other"
        params = 0
        if kind != "other" and n.weight_shape:
            params = int(np.prod(n.weight_shape))
        out.append(NodeChannels(
            id=n.id, op_type=n.op_type, kind=kind,
            inputs=group_shares(groups, chans[ins]) if ins is not None else {},
            outputs=group_shares(groups, chans[outs]) if outs is not None else {},
            macs=int(n.macs or 0), params=params, weight=str(n.weight_name or "") if params else ""))
    return out


def shares_kept(shares: dict, kept_fraction: dict) -> float:
    """The kept fraction of a channel axis with ``shares`` (:func:`group_shares`) when each group keeps
    ``kept_fraction[group id]`` (0..1; a missing group keeps all): ``(1 - Σ share) + Σ share · kept``."""
    total = 1.0
    for gid, share in shares.items():
        total -= share * (1.0 - float(kept_fraction.get(gid, 1.0)))
    return total


def node_fraction(node: NodeChannels, kept_fraction: dict) -> float:
    """The fraction of a node's dense work left when each group keeps ``kept_fraction[group id]`` of its
    channels: a layer's MACs scale with kept inputs × kept outputs (Conv: N·Cout·Hout·Wout·Cin·kH·kW), a
    depthwise conv's and any other node's with its kept output channels (its input's when it has no output
    channels), 1 for a node that carries no channels."""
    if node.kind == "layer":
        return shares_kept(node.inputs, kept_fraction) * shares_kept(node.outputs, kept_fraction)
    if node.outputs:
        return shares_kept(node.outputs, kept_fraction)
    if node.inputs:
        return shares_kept(node.inputs, kept_fraction)
    return 1.0
