"""Compare two perf profiles per node, and two loss profiles per layer (issue 16).

**Perf profiles** (:func:`compare_perf`). Each side is one measurement of a :class:`~sparsify_tui.profiling.perf.
PerfProfile`: its FP32 times (view ``"fp32"``) or the times measured in its INT8 model (view ``"int8"``), each
node's profiled time scaled to that model's unprofiled median (``PerfProfile.node_ms``, the figures every screen
shows; the raw profiled ``time_ms`` stay in the profile). So FP32 vs INT8 is one profile against itself, and batch 1 vs 8,
1 core vs all, or this server vs another are two profiles. Rows are matched **by node id** (the ONNX node name, else
its first output: :func:`sparsify_tui.analysis.graph.node_id`), so two projects of the same model, or a model and
its optimized copy (pruning and QDQ quantization keep node names), compare too.

Every row of both profiles appears once, in A's graph order, then B's extra rows, then the special rows:

* ``matched``: the node is in both, and both sides gave it time (or both none);
* ``fused differently``: the node is in both, but only one side gave it time: onnxruntime fused it into a
  neighbour on the other side (Conv+Add in FP32, a separate QLinearAdd in INT8, say). Its time sits in another
  row on that side: :attr:`PerfComparison.fusion_groups` joins the nodes that share a kernel on either side, so
  the group's ratio compares like with like;
* ``removed in A`` / ``removed in B``: the node is in both, has time on one side and no kernel at all on the
  other (folded away there: a Clip absorbed into the INT8 quantization range, a constant-folded node);
* ``only in A`` / ``only in B``: the node id is missing on the other side (different models);
* ``op type differs``: the same id names nodes of different op types;
* ``not a node``: the special rows ``[layout conversion]``, ``[quantize/dequantize]`` and ``[unattributed]``.

Only ``matched`` rows are ``matched``; nothing is dropped, so **the A column adds up to A's total and the B column
to B's total**: the sum of the profile's rows in that view, which is that model's measured median latency (the
per-node times are scaled to it; a profile without a median keeps its raw profiled times). The whole-model latency
(median and p90 of unprofiled runs) is given next to the totals (``totals.a_latency_ms``...).

Units: ms per batch; ``ratio`` = B ms / A ms (None when A is 0 or a side is missing); ``share`` = row ms / that
side's total (0..1).

**Loss profiles** (:func:`compare_loss`): per prunable layer (matched by node id, else weight name), each profile's
sensitivity at one sparsity level (or its INT8 sensitivity), their ratio, each layer's rank in each profile (1 = most
sensitive) and the rank change, plus the Spearman rank correlation of the matched layers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterable, Optional, Sequence

from sparsify_tui.engine.run import runtime_label

VIEWS = ("fp32", "int8")
MATCHED = "matched"
FUSED_DIFFERENTLY = "fused differently"
REMOVED_A = "removed in A"
REMOVED_B = "removed in B"
ONLY_A = "only in A"
ONLY_B = "only in B"
OP_DIFFERS = "op type differs"
NOT_A_NODE = "not a node"


def _is_special(node_id: str) -> bool:
    return node_id.startswith("[")


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None or b is None or a <= 0:
        return None
    return b / a


# ------------------------------------------------------------------------------------------------ perf
@dataclass
class ProfileSide:
    """One side of a perf comparison: a profile and which of its measurements (``view`` "fp32" or "int8").

    ``label``: how the side is shown ("b1", "b1 INT8", "server2:b1"); ``total_ms``: the sum of its rows (ms per
    batch, profiled pass); ``latency_ms``: median/p90/mean/min ms per batch of unprofiled runs of that model;
    ``items_per_second``: of the median; ``target``: the machine it ran on (``cpu_model``, ``instruction_sets``,
    ``core_count``, ``hostname`` when known, ``runtime``: engine, version and precision,
    :func:`sparsify_tui.engine.run.runtime_label`)."""

    label: str
    name: str
    view: str
    project: str
    batch_size: int
    core_count: int
    total_ms: float
    latency_ms: dict
    items_per_second: Optional[float]
    target: dict = field(default_factory=dict)
    model_sha256: Optional[str] = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CompareRow:
    """One node (or special row) of a perf comparison. ``a_ms`` / ``b_ms``: ms per batch on each side (None when the
    node is not on that side); ``ratio`` = b_ms / a_ms; ``a_share`` / ``b_share``: fraction of that side's total;
    ``status``: see the module docstring; ``matched`` is ``status == "matched"``; ``group``: index into
    :attr:`PerfComparison.fusion_groups` for rows fused differently (else None)."""

    id: str
    op_type: str
    a_ms: Optional[float]
    b_ms: Optional[float]
    ratio: Optional[float]
    matched: bool
    status: str
    a_share: Optional[float] = None
    b_share: Optional[float] = None
    group: Optional[int] = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class GroupRow:
    """Time per node group (op type, as in Layer Summaries; special rows are their own group): ``name``,
    ``a_ms`` / ``b_ms`` (ms per batch, sums of the rows), ``ratio``, shares of each side's total, ``nodes``."""

    name: str
    a_ms: float
    b_ms: float
    ratio: Optional[float]
    a_share: float
    b_share: float
    nodes: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FusionGroup:
    """Nodes that share a kernel on one side or the other, joined because at least one of them is fused
    differently (two or more nodes): ``ids`` (graph order), ``a_ms`` / ``b_ms`` (sums over the ids), ``ratio``."""

    ids: list
    a_ms: float
    b_ms: float
    ratio: Optional[float]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class PerfComparison:
    """Result of :func:`compare_perf`. ``to_dict()`` is the ``compare --json`` document:
    ``{"kind": "perf", "a", "b", "rows", "groups", "fusion_groups", "totals", "unmatched", "notes"}``."""

    a: ProfileSide
    b: ProfileSide
    rows: list
    groups: list
    fusion_groups: list
    notes: list = field(default_factory=list)

    @property
    def totals(self) -> dict:
        """``a_ms`` / ``b_ms`` (sums of the rows = each side's total), ``ratio``, and each side's measured latency
        (``a_latency_ms`` / ``b_latency_ms`` median, ``a_p90_ms`` / ``b_p90_ms``, ``latency_ratio``) and items/s."""
        a_ms = sum(r.a_ms or 0.0 for r in self.rows)
        b_ms = sum(r.b_ms or 0.0 for r in self.rows)
        a_lat = (self.a.latency_ms or {}).get("median")
        b_lat = (self.b.latency_ms or {}).get("median")
        return {
            "a_ms": a_ms, "b_ms": b_ms, "ratio": _ratio(a_ms, b_ms),
            "a_latency_ms": a_lat, "b_latency_ms": b_lat, "latency_ratio": _ratio(a_lat, b_lat),
            "a_p90_ms": (self.a.latency_ms or {}).get("p90"), "b_p90_ms": (self.b.latency_ms or {}).get("p90"),
            "a_items_per_second": self.a.items_per_second, "b_items_per_second": self.b.items_per_second,
        }

    @property
    def unmatched(self) -> dict:
        """Rows that are not ``matched``: ``rows`` (count), ``a_ms`` / ``b_ms`` (their sums) and ``by_status``
        (count per status)."""
        rows = [r for r in self.rows if not r.matched]
        by: dict = {}
        for r in rows:
            by[r.status] = by.get(r.status, 0) + 1
        return {"rows": len(rows), "a_ms": sum(r.a_ms or 0.0 for r in rows),
                "b_ms": sum(r.b_ms or 0.0 for r in rows), "by_status": by}

    def top_rows(self, n: int = 20) -> list:
        """The ``n`` rows with the most time on either side (all rows when ``n`` is 0), most first."""
        rows = sorted(self.rows, key=lambda r: -max(r.a_ms or 0.0, r.b_ms or 0.0))
        return rows[:n] if n else rows

    def to_dict(self) -> dict:
        return {
            "kind": "perf",
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "rows": [r.to_dict() for r in self.rows],
            "groups": [g.to_dict() for g in self.groups],
            "fusion_groups": [g.to_dict() for g in self.fusion_groups],
            "totals": self.totals,
            "unmatched": self.unmatched,
            "notes": list(self.notes),
        }


def view_times(profile, view: str) -> dict:
    """``{node id: ms per batch}`` of every row of ``profile`` in ``view`` ("fp32", or "int8": rows without an INT8
    time count 0), scaled to that model's unprofiled median (:meth:`PerfProfile.node_ms`). Raises ``ValueError`` for an unknown view, or "int8" on a profile
    without a successful INT8 measurement."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}: use fp32 or int8")
    if view == "fp32":
        return {n.id: float(profile.node_ms(n) or 0.0) for n in profile.nodes}
    i8 = profile.int8
    if not i8.enabled or i8.error or all(n.int8_time_ms is None for n in profile.nodes):
        reason = i8.error or "it was measured without INT8"
        raise ValueError(f"perf profile {profile.name!r} has no INT8 measurement ({reason})")
    return {n.id: float(profile.node_ms(n, "int8") or 0.0) for n in profile.nodes}


def profile_side(profile, view: str = "fp32", *, label: Optional[str] = None, project: str = "",
                 model_sha256: Optional[str] = None) -> ProfileSide:
    """The :class:`ProfileSide` of ``profile`` in ``view`` (its latency is the INT8 model's for "int8", on the clock of
    the FP32 median: :attr:`~sparsify_tui.profiling.perf.PerfProfile.int8_latency_ms`, whose median over the FP32
    median is the profile's one INT8 ratio)."""
    times = view_times(profile, view)
    if view == "int8":
        lat = profile.int8_latency_ms
        ips = 1000.0 * profile.batch_size / profile.int8_ms if profile.int8_ms else None
    else:
        lat, ips = profile.latency_ms.to_dict(), profile.items_per_second
    settings = profile.settings or {}
    machine = profile.machine.to_dict()
    target = {
        "hostname": machine.get("hostname"),
        "cpu_model": machine.get("cpu_model") or settings.get("cpu_model"),
        "instruction_sets": list(machine.get("instruction_sets") or profile.instruction_sets or []),
        "core_count": profile.core_count,
        "runtime": runtime_label(profile.engine, profile.engine_version, profile.precision),
    }
    default = profile.name + (" INT8" if view == "int8" else "")
    return ProfileSide(label=label or default, name=profile.name, view=view, project=project,
                       batch_size=int(profile.batch_size), core_count=int(profile.core_count),
                       total_ms=float(sum(times.values())), latency_ms=lat, items_per_second=ips, target=target,
                       model_sha256=model_sha256)


class _Union:
    def __init__(self) -> None:
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, xs: Iterable) -> None:
        xs = list(xs)
        for x in xs[1:]:
            ra, rb = self.find(xs[0]), self.find(x)
            if ra != rb:
                self.parent[rb] = ra


def _covered(profile, view: str) -> Optional[set]:
    """Ids of the nodes some kernel covers in ``view``; None when the profile records no kernels (then a node
    without time counts as fused, not removed)."""
    attr = "int8_kernels" if view == "int8" else "kernels"
    ids = {n.id for n in profile.nodes if getattr(n, attr, None)}
    return ids or None


def _kernel_links(profile, view: str, union: _Union) -> None:
    """Join the nodes of ``profile`` that one kernel covers in ``view`` (else a node and its ``fused_into``)."""
    by_kernel: dict = {}
    for n in profile.nodes:
        kernels = n.int8_kernels if view == "int8" else n.kernels
        for k in kernels or []:
            by_kernel.setdefault(k, []).append(n.id)
        if view == "fp32" and n.fused_into:
            union.join([n.id, n.fused_into])
    for ids in by_kernel.values():
        union.join(ids)


def compare_perf(a, b, *, a_view: str = "fp32", b_view: str = "fp32", a_side: Optional[ProfileSide] = None,
                 b_side: Optional[ProfileSide] = None) -> PerfComparison:
    """Compare two perf profiles per node (rules and units in the module docstring).

    Args:
        a, b: :class:`~sparsify_tui.profiling.perf.PerfProfile` (may be the same object, for FP32 vs INT8).
        a_view, b_view: "fp32" or "int8" (the profile's measured INT8 model).
        a_side, b_side: how each side is described (default :func:`profile_side`).

    Returns: :class:`PerfComparison`; its rows add up to each side's ``total_ms``.

    Raises:
        ValueError: an unknown view, or "int8" on a profile without an INT8 measurement (one line).
    """
    ta, tb = view_times(a, a_view), view_times(b, b_view)
    a_side = a_side or profile_side(a, a_view)
    b_side = b_side or profile_side(b, b_view)
    a_nodes = {n.id: n for n in a.nodes}
    b_nodes = {n.id: n for n in b.nodes}
    a_total, b_total = sum(ta.values()), sum(tb.values())
    cov_a, cov_b = _covered(a, a_view), _covered(b, b_view)

    rows: list[CompareRow] = []
    order = [n.id for n in a.nodes if not _is_special(n.id)]
    order += [n.id for n in b.nodes if not _is_special(n.id) and n.id not in a_nodes]
    specials = [n.id for n in a.nodes if _is_special(n.id)]
    specials += [n.id for n in b.nodes if _is_special(n.id) and n.id not in specials]
    for nid in order + specials:
        na, nb = a_nodes.get(nid), b_nodes.get(nid)
        am = ta.get(nid) if na is not None else None
        bm = tb.get(nid) if nb is not None else None
        if _is_special(nid):
            am, bm = am or 0.0, bm or 0.0  # a special row missing on one side had no such time there
        status = _row_status(nid, na, nb, am, bm, cov_a, cov_b)
        op = (na or nb).op_type if not _is_special(nid) else nid
        if status == OP_DIFFERS:
            op = f"{na.op_type}/{nb.op_type}"
        rows.append(CompareRow(
            id=nid, op_type=op, a_ms=am, b_ms=bm, ratio=_ratio(am, bm), matched=status == MATCHED, status=status,
            a_share=(am / a_total if a_total > 0 else 0.0) if am is not None else None,
            b_share=(bm / b_total if b_total > 0 else 0.0) if bm is not None else None,
        ))

    fusion = _fusion_groups(a, b, a_view, b_view, rows)
    groups = _op_groups(rows, a_total, b_total)
    notes = _perf_notes(a, b, a_side, b_side, a_total, b_total, rows)
    return PerfComparison(a=a_side, b=b_side, rows=rows, groups=groups, fusion_groups=fusion, notes=notes)


def _row_status(nid: str, na, nb, am: Optional[float], bm: Optional[float], cov_a, cov_b) -> str:
    """A row's status (module docstring): not a node, on one side only, op differs, removed on one side (no kernel
    covers it there), fused differently (time on one side, a kernel covers it on the other) or matched."""
    if _is_special(nid):
        return NOT_A_NODE
    if na is None:
        return ONLY_B
    if nb is None:
        return ONLY_A
    if na.op_type != nb.op_type:
        return OP_DIFFERS
    if (am > 0) != (bm > 0):
        zero_side, covered = ("A", cov_a) if am <= 0 else ("B", cov_b)
        if covered is not None and nid not in covered:
            return REMOVED_A if zero_side == "A" else REMOVED_B
        return FUSED_DIFFERENTLY
    return MATCHED


def _perf_notes(a, b, a_side, b_side, a_total: float, b_total: float, rows: list) -> list:
    """What a reader must know before reading the rows: batch sizes or CPUs that differ, and how many rows are
    fused differently, removed on one side, or on one side only."""
    notes = []
    if a.batch_size != b.batch_size:
        per_item = (f"; per item B/A {(b_total / b.batch_size) / (a_total / a.batch_size):.3g}"
                    if a_total > 0 and b_total > 0 else "")
        notes.append(f"batch {a.batch_size} vs {b.batch_size}: times are ms per batch{per_item}")
    if (a_side.target.get("cpu_model") and b_side.target.get("cpu_model")
            and a_side.target["cpu_model"] != b_side.target["cpu_model"]):
        notes.append(f"different CPUs: {a_side.target['cpu_model']} vs {b_side.target['cpu_model']}")
    n_fused = sum(r.status == FUSED_DIFFERENTLY for r in rows)
    if n_fused:
        notes.append(f"{n_fused} nodes are fused differently: compare their fusion groups, not the single rows")
    n_removed = sum(r.status in (REMOVED_A, REMOVED_B) for r in rows)
    if n_removed:
        notes.append(f"{n_removed} nodes have time on one side only and no kernel on the other (folded away there)")
    only = sum(r.status in (ONLY_A, ONLY_B) for r in rows)
    if only:
        notes.append(f"{only} node ids are on one side only (different models?): listed, never dropped")
    return notes


def _fusion_groups(a, b, a_view: str, b_view: str, rows: list) -> list:
    fused = [r for r in rows if r.status == FUSED_DIFFERENTLY]
    if not fused:
        return []
    union = _Union()
    _kernel_links(a, a_view, union)
    _kernel_links(b, b_view, union)
    members: dict = {}
    for r in rows:
        if not _is_special(r.id):
            members.setdefault(union.find(r.id), []).append(r)
    out: list[FusionGroup] = []
    seen: dict = {}
    for r in fused:
        root = union.find(r.id)
        if root in seen:
            r.group = seen[root]
            continue
        group_rows = members.get(root, [r])
        if len(group_rows) < 2:
            continue
        a_ms = sum(x.a_ms or 0.0 for x in group_rows)
        b_ms = sum(x.b_ms or 0.0 for x in group_rows)
        seen[root] = r.group = len(out)
        out.append(FusionGroup(ids=[x.id for x in group_rows], a_ms=a_ms, b_ms=b_ms, ratio=_ratio(a_ms, b_ms)))
    for r in rows:
        if r.group is None and not _is_special(r.id) and union.find(r.id) in seen:
            r.group = seen[union.find(r.id)]
    return out


def _op_groups(rows: list, a_total: float, b_total: float) -> list:
    sums: dict = {}
    for r in rows:
        key = r.op_type
        g = sums.setdefault(key, [0.0, 0.0, 0])
        g[0] += r.a_ms or 0.0
        g[1] += r.b_ms or 0.0
        g[2] += 1
    out = [GroupRow(name=k, a_ms=v[0], b_ms=v[1], ratio=_ratio(v[0], v[1]),
                    a_share=v[0] / a_total if a_total > 0 else 0.0, b_share=v[1] / b_total if b_total > 0 else 0.0,
                    nodes=v[2]) for k, v in sums.items()]
    out.sort(key=lambda g: -max(g.a_ms, g.b_ms))
    return out


# ------------------------------------------------------------------------------------------------ loss
@dataclass
class LossSide:
    """One side of a loss comparison: ``label``, profile ``name``, ``method``, ``metric`` and its description,
    ``project``, and ``layers`` (count)."""

    label: str
    name: str
    method: str
    metric: str
    metric_description: str
    project: str
    layers: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LossCompareRow:
    """One prunable layer: ``a_value`` / ``b_value`` (sensitivity at the level, each in its profile's metric; None
    when the layer is not in that profile), ``ratio`` = b / a, ``a_rank`` / ``b_rank`` (1 = most sensitive in that
    profile), ``rank_change`` = a_rank − b_rank (> 0: ranks as more sensitive in B), ``matched``, ``status``
    ("matched", "only in A", "only in B")."""

    id: str
    weight_name: str
    op_type: str
    a_value: Optional[float]
    b_value: Optional[float]
    ratio: Optional[float]
    a_rank: Optional[int]
    b_rank: Optional[int]
    rank_change: Optional[int]
    matched: bool
    status: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LossComparison:
    """Result of :func:`compare_loss`. ``to_dict()``: ``{"kind": "loss", "a", "b", "level", "int8", "rows",
    "rank_correlation", "notes"}``; ``rank_correlation`` is Spearman's ρ over the matched layers (None below 3)."""

    a: LossSide
    b: LossSide
    level: Optional[float]
    int8: bool
    rows: list
    rank_correlation: Optional[float]
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"kind": "loss", "a": self.a.to_dict(), "b": self.b.to_dict(), "level": self.level, "int8": self.int8,
                "rows": [r.to_dict() for r in self.rows], "rank_correlation": self.rank_correlation,
                "notes": list(self.notes)}


def loss_side(profile, *, label: Optional[str] = None, project: str = "") -> LossSide:
    """The :class:`LossSide` of a :class:`~sparsify_tui.profiling.loss.LossProfile`."""
    return LossSide(label=label or profile.name, name=profile.name, method=profile.method, metric=profile.metric,
                    metric_description=profile.metric_description, project=project, layers=len(profile.layers))


def _ranks(values: dict) -> dict:
    """1 = largest value; ties keep the given order."""
    order = sorted(values, key=lambda k: -values[k])
    return {k: i + 1 for i, k in enumerate(order)}


def _spearman(xs: Sequence[float], ys: Sequence[float]) -> Optional[float]:
    import numpy as np

    if len(xs) < 3:
        return None

    def rank(v):
        v = np.asarray(v, dtype=float)
        order = v.argsort(kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        for val in np.unique(v):  # average ranks of ties
            idx = np.where(v == val)[0]
            r[idx] = r[idx].mean()
        return r

    rx, ry = rank(xs), rank(ys)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def compare_loss(a, b, *, level: float = 0.9, int8: bool = False, a_side: Optional[LossSide] = None,
                 b_side: Optional[LossSide] = None) -> LossComparison:
    """Compare two loss profiles per prunable layer.

    Args:
        a, b: :class:`~sparsify_tui.profiling.loss.LossProfile`.
        level: sparsity level (0..1) at which each layer's sensitivity is read (``LossLayer.value_at``: linear
            between measured levels); ignored with ``int8``.
        int8: compare the layers' INT8 sensitivity instead.

    Returns: :class:`LossComparison`, rows in A's layer order then B's extra layers.

    Raises:
        ValueError: ``level`` outside [0, 1), or ``int8`` and a profile has no INT8 sensitivity.
    """
    if not int8 and not (0.0 <= float(level) < 1.0):
        raise ValueError(f"level must be in [0, 1), got {level}")
    for p in (a, b):
        if int8 and all(layer.int8_sensitivity is None for layer in p.layers):
            raise ValueError(f"loss profile {p.name!r} has no INT8 sensitivity: measure one with --int8")

    def value(layer) -> Optional[float]:
        return layer.int8_sensitivity if int8 else layer.value_at(float(level))

    def key(layer) -> str:
        return layer.id or layer.weight_name

    a_layers = {key(x): x for x in a.layers}
    b_layers = {key(x): x for x in b.layers}
    # fall back to weight names when the ids do not line up (e.g. older profiles)
    if not set(a_layers) & set(b_layers):
        a_layers = {x.weight_name: x for x in a.layers}
        b_layers = {x.weight_name: x for x in b.layers}
    av = {k: value(x) for k, x in a_layers.items() if value(x) is not None}
    bv = {k: value(x) for k, x in b_layers.items() if value(x) is not None}
    ra, rb = _ranks(av), _ranks(bv)
    rows = []
    for k in list(a_layers) + [k for k in b_layers if k not in a_layers]:
        la, lb = a_layers.get(k), b_layers.get(k)
        x = la or lb
        status = MATCHED if la is not None and lb is not None else (ONLY_A if lb is None else ONLY_B)
        rank_a, rank_b = ra.get(k), rb.get(k)
        rows.append(LossCompareRow(
            id=x.id, weight_name=x.weight_name, op_type=x.op_type, a_value=av.get(k), b_value=bv.get(k),
            ratio=_ratio(av.get(k), bv.get(k)), a_rank=rank_a, b_rank=rank_b,
            rank_change=(rank_a - rank_b) if rank_a is not None and rank_b is not None else None,
            matched=status == MATCHED, status=status))
    both = [r for r in rows if r.a_value is not None and r.b_value is not None]
    rho = _spearman([r.a_value for r in both], [r.b_value for r in both])
    notes = []
    if a.metric != b.metric:
        notes.append(f"different metrics ({a.metric} vs {b.metric}): compare ranks, not values")
    return LossComparison(a=a_side or loss_side(a), b=b_side or loss_side(b), level=None if int8 else float(level),
                          int8=int8, rows=rows, rank_correlation=rho, notes=notes)
