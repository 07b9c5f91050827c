"""Map an engine's profiled kernels back to the original ONNX nodes.

The engine's profiled pass (:meth:`sparsify_tui.engine.base.Engine.profile`) hands over neutral data: the
graph it ran as :class:`~sparsify_tui.analysis.graph.GraphNode` rows and ms per kernel keyed by those
nodes' names. This module only matches graphs, so it stays in profiling. The renaming and layout rules
below are onnxruntime's (the engine sparsify-tui measures with); on a runtime that keeps node names,
step 1 anchors every kernel by name and the rest is never needed.

onnxruntime (``ORT_ENABLE_ALL``) does not run the graph the user gave it:

* it folds and fuses nodes: Conv+BatchNormalization (the BN disappears into the Conv's weights),
  Conv+Relu, Conv+Add(+Relu) (the Add becomes the NCHWc Conv's ``Sum`` input), MatMul+Add -> Gemm,
  DequantizeLinear->Conv->QuantizeLinear -> QLinearConv in INT8 QDQ models, GELU/LayerNorm/attention
  fusions...;
* it renames the nodes it rewrites: the NCHWc transformer names a Conv after its *output tensor*
  (``conv0``+``relu0`` writing ``r0`` runs as ``r0_nchwc``), the NHWC transformer appends
  ``_token_<n>`` (``conv0`` -> ``conv0_token_1``), and intermediate tensors become ``reorder_token_<n>``;
* it inserts layout conversions: ``ReorderInput``/``ReorderOutput`` (NCHWc) and ``Transpose`` (NHWC for
  INT8 kernels).

The profiler reports one ``<kernel name>_kernel_time`` event per executed kernel. To attribute, we save
the optimized graph (``SessionOptions.optimized_model_filepath``) and match each optimized node
("kernel") to original nodes:

1. **Anchor**: the original node with the kernel's name; else with its name stripped of ``_nchwc`` /
   ``_token_<n>`` / ``/MatMulAddFusion`` suffixes; else the producer of the original tensor named so;
   else the producers of the kernel's output tensors (tensor names are mapped through layout
   conversions, e.g. ``ReorderOutput(reorder_token_7) -> gap`` makes ``reorder_token_7`` mean ``gap``;
   a tensor named like an original node means that node's output); else (unnamed kernels with new
   tensor names, e.g. a HardSwish decomposed into HardSigmoid + QLinearMul) the first unmatched
   original node of the same op type (``QLinear``/``Fused`` prefix removed) within 3 hops downstream of
   the kernel's known input tensors. Unnamed nodes are profiled as ``<op>_<node index>``; they are
   paired with the unnamed nodes of the saved graph by op type in execution order.
2. **Post-ops** first: a non-layer node whose input tensor is read only by it and produced by a node
   already matched joins that node's kernel (Conv -> BN -> Add -> Relu chains; a QuantizeLinear after a
   QLinearConv). Then **pre-ops**: walking the *original* graph backwards from the anchor until the kernel's own (mapped)
   input tensors, graph inputs/initializers, or nodes anchored by other kernels, collects the original
   nodes the kernel covers (``bn1_nchwc`` anchored at BatchNormalization ``bn1`` covers Conv ``conv1``).
   A node is only included when all consumers of its outputs are already in the region (a tensor
   that is also read elsewhere, like a residual, is a kernel boundary).
3. **Leftovers** (nodes that have no kernel and were not reached, e.g. a fused Add or Relu after the
   Conv, an Identity, a QuantizeLinear folded into a QLinearConv) join the kernel of their input's
   producer, preferring an input tensor that only this node consumes (a residual ``Add`` joins the
   Conv whose output feeds only that Add, which is what onnxruntime fuses); else the kernel of their
   consumer. Nodes that still have none were removed outright (constant folding, Identity elimination):
   they get 0 ms.
4. **Recipient**: a kernel's whole time goes to the Conv/ConvTranspose/Gemm/MatMul ("the layer") it
   covers; when it covers several (e.g. a fused attention), the time is split in proportion to their
   FLOPs (equally when FLOPs are unknown); when it covers none, to its anchor node. The other covered
   nodes show 0 ms and ``fused_into`` = the recipient's node id.
5. **Special rows**, never dropped: ``[layout conversion]`` (ReorderInput/ReorderOutput and inserted
   Transposes), ``[quantize/dequantize]`` (INT8 only: standalone QuantizeLinear/DequantizeLinear kernels
   that have no original node, e.g. quantizing the model input) and ``[unattributed]`` (kernels that
   cannot be matched). By construction the node rows plus special rows add up to the sum of kernel times.

INT8 QDQ models keep the original node names (verified: ``quantize_static`` names the Conv of node
``conv0`` still ``conv0`` and adds ``<tensor>_QuantizeLinear``/``_DequantizeLinear`` nodes), so the INT8
kernels are attributed in two steps: kernel -> node of the QDQ model (steps 1-4), then QDQ node ->
original node by name, else by output tensor; Q/DQ nodes map to ``[quantize/dequantize]``.

Control-flow kernels (If/Loop/Scan) include the time of the subgraph kernels they run; the engine's
trace parsing subtracts nested kernel events from the enclosing one, so nothing is counted twice.

**Engines that name the original nodes** (OpenVINO: each node of the runtime model lists the ONNX nodes fused
into it, ``originalLayersNames``) hand over :class:`~sparsify_tui.engine.base.RuntimeNode` rows. Step 1 then
anchors each kernel at the original nodes it names (by node name, else node id, else the producer of the tensor
so named; names the runtime made up match nothing). Steps 2-3 collect what the runtime left unnamed (OpenVINO drops the name of a Conv whose
BatchNormalization it folds, keeping the BN's: walking back from the BN finds the Conv); as the runtime names no
kernel inputs, the walk back stops at a layer (a layer's inputs are its kernel's), and it runs before the
post-ops (a Softmax the runtime names after the Identity behind it is that kernel's, not a post-op of the
MatMul before it). Step 4 splits the time the
same way, except that a kernel without a layer gives its time to the first node it covers that computes
something (not Q/DQ, Identity, Reshape...). A node named by two kernels counts in both. The runtime's layout
and precision conversions (``RuntimeNode.layout``) that name no original node are the
``[layout conversion]`` row; kernels that name none and are no conversion, ``[unattributed]``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from sparsify_tui.analysis.graph import GraphNode, UniqueKeys
from sparsify_tui.engine.base import RuntimeNode

LAYOUT_ROW = "[layout conversion]"
UNATTRIBUTED_ROW = "[unattributed]"
QDQ_ROW = "[quantize/dequantize]"
SPECIAL_ROWS = (LAYOUT_ROW, QDQ_ROW, UNATTRIBUTED_ROW)

#: Op types that are "the layer" a fused kernel's time goes to.
LAYER_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "QLinearConv", "QLinearMatMul", "ConvInteger",
             "MatMulInteger", "FusedConv", "FusedGemm", "FusedMatMul", "QGemm"}
_LAYOUT_OPS = {"ReorderInput", "ReorderOutput", "Transpose"}
_QDQ_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
_SUFFIXES = re.compile(r"(_nchwc|_token_\d+|/MatMulAddFusion)$")
#: ops that move or relabel data without computing (an explicit-origins kernel without a layer gives its time to
#: the first node it covers that is none of these)
_PASS_THROUGH_OPS = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Dropout"} | _QDQ_OPS


# --------------------------------------------------------------------------- attribution
@dataclass
class Attribution:
    """Result of :func:`attribute`: ms per run for each original node id and each special row.

    ``node_ms``: node id -> ms (0 for nodes fused into another or removed); ``special_ms``: special row
    -> ms; ``fused_into``: node id -> recipient node id (for covered nodes that got no time);
    ``kernels``: node id -> optimized kernel names covering it; ``kernel_recipients``: kernel ->
    list of (recipient id or special row, ms). After :func:`over_runs`, ``node_ms`` / ``special_ms`` are each
    row's median over the profiled runs, and ``mean_ms`` / ``spread_ms`` (node id or special row -> ms) its mean
    and interquartile range over them (empty before).
    """

    node_ms: dict = field(default_factory=dict)
    special_ms: dict = field(default_factory=dict)
    fused_into: dict = field(default_factory=dict)
    kernels: dict = field(default_factory=dict)
    kernel_recipients: dict = field(default_factory=dict)
    mean_ms: dict = field(default_factory=dict)
    spread_ms: dict = field(default_factory=dict)

    @property
    def total_ms(self) -> float:
        return float(sum(self.node_ms.values()) + sum(self.special_ms.values()))


def attributed_ms(kernels) -> dict:
    """The per-kernel times a pass is attributed with (``kernels``: a
    :class:`~sparsify_tui.engine.base.KernelTimes`): the means when the engine gives each run's times (``per_run``:
    :func:`over_runs` then takes each row's median over the runs; the means only fix which rows a kernel's time goes
    to, and a kernel that ran in any run has a mean above 0), else the engine's robust per-kernel figure
    (``median_ms``; OpenVINO's counters are running means, so one run's times are not known)."""
    return kernels.ms if kernels.per_run else (kernels.median_ms or kernels.ms)


def over_runs(att: Attribution, runs: Sequence[dict]) -> Attribution:
    """Each row's time as the **median over the profiled runs** (docs/design.md: a mean follows one interrupted run).

    ``att``: an attribution of one profiled pass (:func:`attribute` or :func:`attribute_int8`, from any per-kernel
    times of the pass, e.g. their means: which kernel goes to which rows, and in which shares, does not depend on
    the times); ``runs``: the pass's kernel times of each run (:attr:`sparsify_tui.engine.base.KernelTimes.per_run`,
    ``{kernel key: ms}``). Each run's kernel times are attributed with the same shares (a kernel's time split over
    its recipients as in ``att``), giving each row (node or special row) its ms in every run; the result's
    ``node_ms`` / ``special_ms`` are the medians of those, ``mean_ms`` the means and ``spread_ms`` the interquartile
    range (p75 − p25, linear interpolation: :func:`sparsify_tui.engine.timing.percentile`). The rows' medians need
    not add up to the median run: the whole run's median is the unprofiled timing's, which the rows are scaled to
    (:func:`sparsify_tui.profiling.perf.fill_scaled`). ``att`` unchanged when there are no runs."""
    import numpy as np

    if not runs:
        return att
    n = len(runs)
    per_row: dict = {rid: np.zeros(n) for rid in list(att.node_ms) + list(att.special_ms)}
    for key, recips in att.kernel_recipients.items():
        total = sum(float(ms) for _, ms in recips)
        if total <= 0:
            continue
        times = np.array([float(run.get(key, 0.0)) for run in runs])
        for rid, ms in recips:
            per_row.setdefault(rid, np.zeros(n))
            per_row[rid] += times * (float(ms) / total)
    stats = {rid: np.percentile(v, [25, 50, 75]) for rid, v in per_row.items()}
    out = Attribution(fused_into=dict(att.fused_into), kernels=dict(att.kernels),
                      kernel_recipients=dict(att.kernel_recipients))
    for rid, (p25, p50, p75) in stats.items():
        (out.special_ms if rid in SPECIAL_ROWS else out.node_ms)[rid] = float(p50)
        out.mean_ms[rid] = float(per_row[rid].mean())
        out.spread_ms[rid] = float(p75 - p25)
    return out


def _strip(name: str) -> str:
    prev = None
    while prev != name:
        prev, name = name, _SUFFIXES.sub("", name)
    return name


def _opt_keys(opt_nodes: Sequence[GraphNode]) -> list:
    """Kernel keys for optimized nodes, matching the engine's :class:`~sparsify_tui.engine.base.KernelTimes`
    (duplicates get ``#k``: :class:`~sparsify_tui.analysis.graph.UniqueKeys`)."""
    unique_key = UniqueKeys()
    return [unique_key(n.name) for n in opt_nodes]


def attribute(
    original: Sequence,
    optimized: Sequence[GraphNode],
    kernel_ms: dict,
    *,
    optimized_initializers: Iterable[str] = (),
    kernel_op_types: Optional[dict] = None,
) -> Attribution:
    """Attribute kernel times to original nodes (algorithm in the module docstring).

    Args:
        original: original nodes in graph order; objects with ``id, name, op_type, inputs, outputs``
            and optionally ``flops`` (e.g. ``analysis.nodes.NodeInfo`` or :class:`GraphNode`).
        optimized: nodes of the optimized model (:attr:`sparsify_tui.engine.base.ProfiledPass.nodes`); when they
            are :class:`~sparsify_tui.engine.base.RuntimeNode` rows, kernels are matched by the original node names
            they carry (module docstring).
        kernel_ms: kernel key -> ms per run (:attr:`sparsify_tui.engine.base.KernelTimes.ms`).
        optimized_initializers: initializer names of the optimized model (never treated as activations).
        kernel_op_types: kernel key -> op type from the trace, for kernels missing from ``optimized``.

    Returns: :class:`Attribution`; ``total_ms`` equals ``sum(kernel_ms.values())``.
    """
    att = _Attributor(list(original), optimized, kernel_ms, set(optimized_initializers), kernel_op_types or {})
    if att.explicit:  # 1 by the names the engine gives, then 2b before 2a (module docstring)
        att.anchor_origins()
        att.fuse_pre_ops()
        att.fuse_post_ops()
    else:
        att.anchor_kernels()  # 1
        att.fuse_post_ops()  # 2a
        att.fuse_pre_ops()  # 2b
    att.assign_leftovers()  # 3
    return att.distribute()  # 4


def _base_op(op: str) -> str:
    """The op a quantized or fused kernel computes: ``QLinearConv`` -> ``Conv``, ``FusedConv`` -> ``Conv``."""
    for pre in ("QLinear", "Fused", "Q"):
        if op.startswith(pre) and op[len(pre):]:
            return op[len(pre):]
    return op


class _Attributor:
    """The state of one :func:`attribute` call and its steps, in the order of the module docstring."""

    def __init__(self, orig: list, optimized: Sequence[GraphNode], kernel_ms: dict, opt_inits: set,
                 kernel_op_types: dict) -> None:
        self.orig, self.optimized, self.kernel_ms = orig, optimized, kernel_ms
        self.opt_inits, self.kops = opt_inits, kernel_op_types
        self.by_name = {n.name: i for i, n in enumerate(orig) if getattr(n, "name", "")}
        self.producer: dict = {}
        self.consumers: dict = defaultdict(list)
        for i, n in enumerate(orig):
            for t in n.outputs:
                if t and t not in self.producer:
                    self.producer[t] = i
            for t in n.inputs:
                if t:
                    self.consumers[t].append(i)
        self.by_id = {n.id: i for i, n in enumerate(orig)}
        #: the engine names each kernel's original nodes (module docstring)
        self.explicit = any(isinstance(n, RuntimeNode) for n in optimized)
        self.opt_by_key = self._match_kernels()
        self.equiv = {} if self.explicit else self._tensor_equivalence()
        self.kernel_anchor: dict = {}  # kernel key -> anchor orig indices
        self.owner: dict = {}  # orig index -> kernel key

    def _match_kernels(self) -> dict:
        """Kernel key -> optimized node. Unnamed optimized nodes are profiled as "<op>_<node index>": they pair
        with the unnamed nodes of the saved graph by op type, in execution order (both are topological orders of
        the same graph)."""
        keys = _opt_keys(self.optimized)
        opt_by_key = dict(zip(keys, self.optimized))
        unnamed: dict = defaultdict(list)
        for n in self.optimized:
            if not n.name:
                unnamed[n.op_type].append(n)
        for key in self.kernel_ms:
            if key not in opt_by_key and unnamed.get(self.kops.get(key, "")):
                opt_by_key[key] = unnamed[self.kops[key]].pop(0)
        return opt_by_key

    def _tensor_equivalence(self) -> dict:
        """Optimized tensor -> original tensor: shared names; tensors onnxruntime names after the node that
        produced them (QDQ fusions); through layout ops and renamed single-output nodes."""
        orig, by_name, producer = self.orig, self.by_name, self.producer
        orig_tensors = set(producer) | set(self.consumers)
        equiv: dict = {t: t for n in self.optimized for t in list(n.outputs) + list(n.inputs) if t in orig_tensors}
        for n in self.optimized:
            for t in list(n.inputs) + list(n.outputs):
                if t and t not in equiv and t in by_name and orig[by_name[t]].outputs:
                    equiv[t] = orig[by_name[t]].outputs[0]
        for _ in range(3):
            for n in self.optimized:
                if n.op_type in _LAYOUT_OPS and n.inputs and n.outputs:
                    a, b = n.inputs[0], n.outputs[0]
                    if b in equiv and a not in equiv:
                        equiv[a] = equiv[b]
                    elif a in equiv and b not in equiv:
                        equiv[b] = equiv[a]
                s = _strip(n.name)
                if s in producer and len(n.outputs) == 1 and n.outputs[0] not in equiv:
                    equiv[n.outputs[0]] = s
        return equiv

    # -- the kernels' anchors ------------------------------------------------------------------------------
    def is_layout(self, n: GraphNode) -> bool:
        """A layout conversion the engine added (its own row), not an original Transpose."""
        if isinstance(n, RuntimeNode):
            return n.layout and not self.origin_nodes(n)
        if n.op_type in ("ReorderInput", "ReorderOutput"):
            return True
        if n.op_type == "Transpose":
            i = self.by_name.get(n.name, self.by_name.get(_strip(n.name)))
            return i is None or self.orig[i].op_type != "Transpose"
        return False

    def origin_nodes(self, n: RuntimeNode) -> list:
        """The original nodes a :class:`RuntimeNode` names (by node name, else node id, else as the producer of the
        tensor so named: OpenVINO names a node that writes a graph output after that output), in its order."""
        found = []
        for name in n.origins:
            i = self.by_name.get(name, self.by_id.get(name, self.producer.get(name)))
            if i is not None and i not in found:
                found.append(i)
        return found

    def anchor_origins(self) -> None:
        """Step 1 for an engine that names each kernel's original nodes: those nodes are its anchors; a node
        named by several kernels is owned by the first (and still counts in each, :meth:`distribute`)."""
        for key in self.kernel_ms:
            n = self.opt_by_key.get(key)
            if not isinstance(n, RuntimeNode) or self.is_layout(n):
                continue
            a = self.origin_nodes(n)
            if a:
                self.kernel_anchor[key] = a
        for key, a in self.kernel_anchor.items():
            for i in a:
                self.owner.setdefault(i, key)

    def anchors(self, n: GraphNode) -> list:
        """The original nodes a kernel is by name, by a stripped name, or by its outputs."""
        for cand in (n.name, _strip(n.name)):
            if cand and cand in self.by_name:
                return [self.by_name[cand]]
        s = _strip(n.name)
        if s in self.producer:
            return [self.producer[s]]
        found = []
        for t in n.outputs:
            o = self.equiv.get(t)
            if o in self.producer and self.producer[o] not in found:
                found.append(self.producer[o])
        return found

    def downstream_anchor(self, n: GraphNode, taken: set) -> list:
        """An untaken original node of the same (base) op type at most 3 hops after the kernel's inputs."""
        want = _base_op(n.op_type)
        frontier = [self.equiv[t] for t in n.inputs if t in self.equiv]
        seen: set = set()
        for _ in range(3):
            nxt = []
            for t in frontier:
                for c in self.consumers.get(t, ()):
                    if c in seen:
                        continue
                    seen.add(c)
                    if c not in taken and _base_op(self.orig[c].op_type) == want:
                        return [c]
                    nxt.extend(self.orig[c].outputs)
            frontier = nxt
        return []

    def anchor_kernels(self) -> None:
        """Step 1: each kernel's anchors (by name or outputs; else by op type downstream), which it owns."""
        anchored: dict = {}
        for key in self.kernel_ms:
            n = self.opt_by_key.get(key)
            if n is None or self.is_layout(n):
                continue
            a = self.anchors(n)
            if a:
                self.kernel_anchor[key] = a
                for i in a:
                    anchored.setdefault(i, key)
        for key in self.kernel_ms:  # kernels with neither a known name nor known outputs: by op type, downstream
            n = self.opt_by_key.get(key)
            if n is None or key in self.kernel_anchor or self.is_layout(n):
                continue
            a = self.downstream_anchor(n, set(anchored))
            if a:
                self.kernel_anchor[key] = a
                anchored.setdefault(a[0], key)
        for key, a in self.kernel_anchor.items():
            for i in a:
                self.owner.setdefault(i, key)

    # -- fusions -------------------------------------------------------------------------------------------
    def fuse_post_ops(self) -> None:
        """Step 2a: a non-layer node reading a tensor that only it consumes, produced by an owned node, is fused
        after that node (Conv -> BN -> Add -> Relu chains, Q after QLinearConv)."""
        for i, n in enumerate(self.orig):
            if i in self.owner or n.op_type in LAYER_OPS:
                continue
            for t in n.inputs:
                p = self.producer.get(t)
                if p is not None and p in self.owner and len(self.consumers.get(t, ())) == 1:
                    self.owner[i] = self.owner[p]
                    break

    def fuse_pre_ops(self) -> None:
        """Step 2b: walking back from each anchor, nodes whose outputs stay inside the kernel are fused into it
        (up to the kernel's own inputs)."""
        owner = self.owner
        for key, a in self.kernel_anchor.items():
            n = self.opt_by_key[key]
            stop = {self.equiv.get(t, t) for t in n.inputs if t and t not in self.opt_inits}
            stack = [i for i in a if owner.get(i) == key]
            while stack:
                v = stack.pop()
                if self.explicit and self.orig[v].op_type in LAYER_OPS:
                    continue  # the engine names no kernel inputs: a layer's inputs are its kernel's
                for t in self.orig[v].inputs:
                    if not t or t in stop or t not in self.producer:
                        continue
                    p = self.producer[t]
                    if p in owner or any(c not in owner or owner[c] != key
                                         for o in self.orig[p].outputs for c in self.consumers.get(o, ())):
                        continue
                    owner[p] = key
                    stack.append(p)

    def assign_leftovers(self) -> None:
        """Step 3: a node no kernel owns joins an input producer's kernel (single-consumer tensors first), else a
        consumer's."""
        for _ in range(2):
            while self._join_producers():
                pass
            self._join_consumers()

    def _join_producers(self) -> bool:
        changed = False
        for i, n in enumerate(self.orig):
            if i in self.owner:
                continue
            best = None
            for t in n.inputs:
                p = self.producer.get(t)
                if p is None or p not in self.owner:
                    continue
                single = len(self.consumers.get(t, ())) == 1
                if best is None or (single and not best[1]):
                    best = (self.owner[p], single)
            if best:
                self.owner[i] = best[0]
                changed = True
        return changed

    def _join_consumers(self) -> None:
        for i in range(len(self.orig) - 1, -1, -1):
            if i in self.owner:
                continue
            for t in self.orig[i].outputs:
                ks = [self.owner[c] for c in self.consumers.get(t, ()) if c in self.owner]
                if ks:
                    self.owner[i] = ks[0]
                    break

    # -- the recipients ------------------------------------------------------------------------------------
    def distribute(self) -> Attribution:
        """Step 4: each kernel's time goes to its layers by FLOPs (else to its anchor); layout kernels and kernels
        nothing owns go to their own rows."""
        orig, owner = self.orig, self.owner
        groups: dict = defaultdict(list)
        for i in sorted(owner):
            groups[owner[i]].append(i)
        if self.explicit:  # a node two kernels name counts in both
            for key, a in self.kernel_anchor.items():
                groups[key].extend(i for i in a if i not in groups[key])
        res = Attribution(node_ms={n.id: 0.0 for n in orig}, special_ms={})
        for i, key in owner.items():
            res.kernels.setdefault(orig[i].id, []).append(key)
        if self.explicit:
            for key, a in self.kernel_anchor.items():
                for i in a:
                    if key not in res.kernels[orig[i].id]:
                        res.kernels[orig[i].id].append(key)
        for key, ms in self.kernel_ms.items():
            ms = float(ms)
            n = self.opt_by_key.get(key)
            row = self._special_row(key, n, groups)
            if row is not None:
                res.special_ms[row] = res.special_ms.get(row, 0.0) + ms
                res.kernel_recipients[key] = [(row, ms)]
                continue
            members = groups[key]
            recips = self._recipients(key, members)
            res.kernel_recipients[key] = []
            for i, share in recips:
                res.node_ms[orig[i].id] += ms * share
                res.kernel_recipients[key].append((orig[i].id, ms * share))
            rid = orig[recips[0][0]].id
            for i in members:
                if all(i != r for r, _ in recips):
                    res.fused_into.setdefault(orig[i].id, rid)
        return res

    def _special_row(self, key: str, n: Optional[GraphNode], groups: dict) -> Optional[str]:
        """:data:`LAYOUT_ROW` for a layout kernel, :data:`UNATTRIBUTED_ROW` for one no node is fused into, else
        None."""
        if n is not None and self.is_layout(n):
            return LAYOUT_ROW
        if n is None and self.kops.get(key) in ("ReorderInput", "ReorderOutput"):
            return LAYOUT_ROW
        return None if groups.get(key) else UNATTRIBUTED_ROW

    def _recipients(self, key: str, members: list) -> list:
        """``[(orig index, share)]`` of a kernel's time: its layers by FLOPs (equal shares without FLOPs), else its
        anchor (else its last member)."""
        layers = [i for i in members if self.orig[i].op_type in LAYER_OPS]
        if layers:
            fl = [max(int(getattr(self.orig[i], "flops", 0) or 0), 0) for i in layers]
            tot = sum(fl)
            shares = [f / tot for f in fl] if tot > 0 else [1.0 / len(layers)] * len(layers)
            return list(zip(layers, shares))
        if self.explicit:  # the first named node that computes, else the first walked-in one, else the anchor
            named = self.kernel_anchor.get(key, [])
            for i in named + sorted(members):
                if self.orig[i].op_type not in _PASS_THROUGH_OPS:
                    return [(i, 1.0)]
            return [((named or members)[0], 1.0)]
        a = [i for i in self.kernel_anchor.get(key, []) if self.owner.get(i) == key] or members[-1:]
        return [(a[0], 1.0)]


def attribute_int8(
    original: Sequence,
    qdq: Sequence[GraphNode],
    optimized: Sequence[GraphNode],
    kernel_ms: dict,
    *,
    optimized_initializers: Iterable[str] = (),
    kernel_op_types: Optional[dict] = None,
) -> Attribution:
    """Two-step attribution of INT8 kernels: kernel -> QDQ-model node -> original node.

    ``qdq``: nodes of the quantized (QDQ) model that was run. A QDQ node maps to the original node of the
    same name, else to the producer of its first output in the original graph; QuantizeLinear /
    DequantizeLinear nodes without an original go to ``[quantize/dequantize]``, anything else unmatched
    to ``[unattributed]``. Special rows of step one carry over.
    """
    step = attribute(qdq, optimized, kernel_ms, optimized_initializers=optimized_initializers,
                     kernel_op_types=kernel_op_types)
    orig = list(original)
    by_name = {n.name: n.id for n in orig if getattr(n, "name", "")}
    by_id = {n.id for n in orig}
    producer = {}
    for n in orig:
        for t in n.outputs:
            producer.setdefault(t, n.id)
    res = Attribution(node_ms={n.id: 0.0 for n in orig}, special_ms=dict(step.special_ms))
    qdq_by_id = {n.id: n for n in qdq}
    orig_by_id = {n.id: n for n in orig}
    qdq_consumers: dict = defaultdict(list)
    for n in qdq:
        for t in n.inputs:
            qdq_consumers[t].append(n)

    def target(qid: str) -> str:
        q = qdq_by_id.get(qid)
        if q is not None and q.op_type in _QDQ_OPS and q.name not in by_name:
            return QDQ_ROW
        if q is not None and q.name and q.name in by_name:
            return by_name[q.name]
        if qid in by_id:
            return qid
        if q is not None:
            for t in q.outputs:
                if t in producer:
                    hit = producer[t]
                    if q.op_type in LAYER_OPS and orig_by_id[hit].op_type not in LAYER_OPS:
                        # MatMul+Add fused into Gemm by pre-processing: the time belongs to the MatMul
                        for u in orig_by_id[hit].inputs:
                            p = producer.get(u)
                            if p is not None and orig_by_id[p].op_type in LAYER_OPS:
                                return p
                    return hit
            # a piece of a decomposed op (HardSwish -> HardSigmoid + Mul by pre-processing): the first
            # node downstream (through Q/DQ, at most 4 hops) whose output is an original tensor
            frontier, seen = list(q.outputs), set()
            for _ in range(4):
                nxt = []
                for t in frontier:
                    for c in qdq_consumers.get(t, ()):
                        if c.id in seen:
                            continue
                        seen.add(c.id)
                        for o in c.outputs:
                            if o in producer and c.op_type not in _QDQ_OPS:
                                return producer[o]
                        nxt.extend(c.outputs)
                frontier = nxt
        return UNATTRIBUTED_ROW

    for key, recips in step.kernel_recipients.items():
        res.kernel_recipients[key] = []
        for qid, ms in recips:
            tid = qid if qid in SPECIAL_ROWS else target(qid)
            if tid in SPECIAL_ROWS:
                if qid not in SPECIAL_ROWS:
                    res.special_ms[tid] = res.special_ms.get(tid, 0.0) + ms
            else:
                res.node_ms[tid] += ms
            res.kernel_recipients[key].append((tid, ms))
    for qid, ks in step.kernels.items():
        tid = target(qid)
        if tid not in SPECIAL_ROWS:
            res.kernels.setdefault(tid, [])
            res.kernels[tid].extend(k for k in ks if k not in res.kernels[tid])
    for qid, rid in step.fused_into.items():
        tid, rt = target(qid), target(rid)
        if tid not in SPECIAL_ROWS and rt not in SPECIAL_ROWS and tid != rt and res.node_ms.get(tid, 0) == 0:
            res.fused_into.setdefault(tid, rt)
    # original nodes absent from the QDQ graph (BatchNormalization folded by pre-processing, Relu absorbed
    # by QuantizeLinear): fused into the node that produces their input
    prod_node = {}
    for n in orig:
        for t in n.outputs:
            prod_node.setdefault(t, n.id)
    for n in orig:
        if n.id in res.kernels or n.id in res.fused_into:
            continue
        for t in n.inputs:
            p = prod_node.get(t)
            if p is not None and (p in res.kernels or p in res.fused_into):
                res.fused_into[n.id] = res.fused_into.get(p, p)
                break
    return res
