"""The channel time model and the channel allocation: how long the thinned model runs on onnxruntime for a
given kept channel count per group, and which groups to thin how much to reach a target at the least loss.

**Time model.** Every main-graph node ``n`` has a dense time ``t0_n`` and a fraction ``f_n`` of its dense work
left when each channel group ``g`` keeps the fraction ``k_g`` of its channels
(:func:`sparsify_tui.analysis.channels.node_fraction`: a layer's MACs scale with kept inputs × kept outputs, a
depthwise conv and every other node with its kept output channels). Its time is::

    t_n(k) = t0_n · (c0_n + c1_n · f_n(k))

and the model's latency ``L(k) = a · Σ_n t_n(k) + g``. Three kinds, named in every estimate:

* ``calibrated`` (a **channel calibration** stored with the perf profile,
  :mod:`sparsify_tui.profiling.channel_calibration`): ``t0_n``, ``c0_n``, ``c1_n`` fitted per node on the
  dense model and uniformly thinned models profiled on this server with the same attribution as a perf
  profile; ``a`` and ``g`` fitted on their unprofiled medians (so per-node profiling overhead and the time
  between kernels are accounted for). Rows onnxruntime adds itself (layout conversions) follow the model's
  MACs fraction.
* ``per-node`` (a perf profile without channel calibration): ``t0_n`` = the profile's measured node time,
  ``c0 = 0``, ``c1 = 1`` (each node's time proportional to its own work), special rows fixed, ``a`` = measured
  median / Σ node times, ``g = 0``. Not measured on thinned models: the estimate says so.
* ``macs`` (the FLOPS profile): ``t0_n`` = MACs of the layer, other nodes 0: speedup = MACs reduction, and the
  estimate says so (docs/calibration.md: latency "roughly follows" MACs on CPU, not exactly).

**Kept channels.** A group of ``C`` channels at ratio ``r`` keeps
:func:`~sparsify_tui.analysis.channels.round_kept` ``(C, r, round_to)`` (the multiple of ``round_to`` nearest
to ``C·(1 - r)``; an attention-head group rounds to whole heads and a group read by a grouped conv to its
own multiple, :meth:`~sparsify_tui.analysis.channels.ChannelGroup.round_to`), so ``k_g = kept / C``; records
store the *effective* ratio ``1 - kept/C``.

**Allocation** (:func:`allocate_channels`). Targets: ``uniform`` (every free group at ratio R, issue 12),
``sparsity`` (remove R of all prunable channels), ``macs`` (MACs reduced X times) and ``speedup`` (estimated
latency X times lower). Free groups are the prunable ones that are neither overridden nor excluded (the first
layer's group by default; groups feeding outputs are never prunable). A group's candidate kept counts are the
rounded counts for ratios 0, 0.025, ... up to the cap (``max_sparsity``, default 0.7 of its channels). The
cost of a group at ratio r is ``balance · L̂_g(r) - (1 - balance) · Ĝ_g(r)`` (the loss curve and the time
saved when only that group is thinned, each normalised to sum to 1 over the groups), as in the unstructured
allocation. Because a layer's time depends on two groups (its input and output channels) the costs of time are
not separable, so the solver is greedy on the exact model: starting dense, it repeatedly takes the move (one
group to a lower kept count) with the least cost per unit of the target resource gained (channels, MACs or
estimated ms), re-evaluating the moves of the groups that share a node with the one it moved, until the target
is met. With the target being time itself, the balance only shifts all costs by a constant per resource, so
the result is the least summed sensitivity for the target. Greedy ratio rules are the classic approximation for
such knapsack-like problems; it is exact when every curve is convex.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from sparsify_tui.analysis.channels import NodeChannels, node_fraction, round_kept
from sparsify_tui.optimization.layer_curves import GRID_LEVELS

TARGETS = ("uniform", "sparsity", "macs", "speedup")
"""Allocation targets of a channel optimization (``ChannelSettings.target``)."""
RATIO_STEP = 0.025
"""Step of the candidate ratios of a group (then rounded to kept counts)."""

KIND_TEXT = {
    "calibrated": "channel time model measured on this server (channel calibration: thinned models profiled "
                  "per node)",
    "per-node": "per-node times of the perf profile, each scaled by its own MACs (not calibrated on thinned "
                "models: k in Performance Profiles, or `sparsify-tui profile channel-calibration PROJECT`)",
    "macs": "MACs-proportional (FLOPS profile: no measured times; latency follows MACs only roughly)",
}


def point_time(c: dict, f: float) -> float:
    """Time of a node given as ``{"t0", "c0", "c1", "pts"}`` at work fraction ``f``
    (:func:`sparsify_tui.profiling.channel_calibration.node_time`: measured points interpolated, else the line)."""
    from sparsify_tui.profiling.channel_calibration import node_time

    return node_time(c, f)


@dataclass
class TimedNode:
    """One node of the time model: its :class:`NodeChannels`, dense time ``t0`` (ms per batch, or relative units
    with the FLOPS profile), the line ``t = t0·(c0 + c1·f)`` and, when calibrated, its measured points ``pts``
    (``[[f, t], ...]``, interpolated)."""

    node: NodeChannels
    t0: float
    c0: float = 0.0
    c1: float = 1.0
    pts: Optional[list] = None

    def time(self, f: float) -> float:
        """Time at work fraction ``f``."""
        if self.pts:
            return point_time({"t0": self.t0, "c0": self.c0, "c1": self.c1, "pts": self.pts}, f)
        return self.t0 * (self.c0 + self.c1 * f)

    def to_dict(self) -> dict:
        d = {**self.node.to_dict(), "t0": self.t0, "c0": self.c0, "c1": self.c1}
        if self.pts:
            d["pts"] = self.pts
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TimedNode":
        return cls(NodeChannels.from_dict(d), float(d.get("t0") or 0.0), float(d.get("c0", 0.0)),
                   float(d.get("c1", 1.0)), d.get("pts"))


@dataclass
class ChannelTimeModel:
    """See the module docstring. ``groups``: ``{group id: channels}`` of the prunable groups; ``special``: rows
    that follow the model's MACs fraction (``{"id", "t0", "c0", "c1"}``); ``a`` / ``g_ms``: latency fit;
    ``baseline_ms``: the perf profile's measured median (None with the FLOPS profile); ``macs_total`` /
    ``params_total``: the model's totals; ``calibration``: a summary of the channel calibration used;
    ``group_round_to``: ``{group id: multiple}`` for groups whose kept count rounds to other than ``round_to``
    (:meth:`sparsify_tui.analysis.channels.ChannelGroup.round_to`: whole attention heads, grouped convs)."""

    kind: str
    nodes: List[TimedNode]
    groups: Dict[str, int]
    round_to: int
    special: List[dict] = field(default_factory=list)
    a: float = 1.0
    g_ms: float = 0.0
    baseline_ms: Optional[float] = None
    macs_total: float = 0.0
    params_total: float = 0.0
    batch_size: int = 1
    core_count: Optional[int] = None
    calibration: Optional[dict] = None
    group_round_to: Dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._index()

    def _index(self) -> None:
        self.touching: Dict[str, List[int]] = {g: [] for g in self.groups}
        self.owner: List[Optional[str]] = []
        for i, tn in enumerate(self.nodes):
            n = tn.node
            for gid in set(n.inputs) | set(n.outputs):
                if gid in self.touching:
                    self.touching[gid].append(i)
            main = n.outputs or n.inputs
            self.owner.append(max(main, key=main.get) if main else None)
        self.matrix_macs = float(sum(tn.node.macs for tn in self.nodes if tn.node.kind != "other")) or 1.0

    # -- JSON
    def to_dict(self) -> dict:
        return {"kind": self.kind, "description": KIND_TEXT.get(self.kind, self.kind), "round_to": self.round_to,
                "groups": dict(self.groups), "a": self.a, "g_ms": self.g_ms, "baseline_ms": self.baseline_ms,
                "macs_total": self.macs_total, "params_total": self.params_total, "batch_size": self.batch_size,
                "core_count": self.core_count, "calibration": self.calibration,
                "group_round_to": dict(self.group_round_to),
                "special": [dict(s) for s in self.special], "nodes": [tn.to_dict() for tn in self.nodes]}

    @classmethod
    def from_dict(cls, d: dict) -> "ChannelTimeModel":
        return cls(kind=d["kind"], nodes=[TimedNode.from_dict(x) for x in d.get("nodes") or []],
                   groups={k: int(v) for k, v in (d.get("groups") or {}).items()}, round_to=int(d.get("round_to") or 1),
                   special=[dict(s) for s in d.get("special") or []], a=float(d.get("a", 1.0)),
                   g_ms=float(d.get("g_ms", 0.0)), baseline_ms=d.get("baseline_ms"),
                   macs_total=float(d.get("macs_total") or 0.0), params_total=float(d.get("params_total") or 0.0),
                   batch_size=int(d.get("batch_size") or 1), core_count=d.get("core_count"),
                   calibration=d.get("calibration"),
                   group_round_to={k: int(v) for k, v in (d.get("group_round_to") or {}).items()})

    @property
    def description(self) -> str:
        return KIND_TEXT.get(self.kind, self.kind)

    # -- evaluation
    def kept_count(self, gid: str, ratio: float) -> int:
        """Channels group ``gid`` keeps at ``ratio``."""
        return round_kept(self.groups[gid], min(float(ratio), 0.999), self.rounding(gid))

    def rounding(self, gid: str) -> int:
        """The multiple group ``gid``'s kept count rounds to (``group_round_to``, else ``round_to``)."""
        return int(self.group_round_to.get(gid, self.round_to))

    def kept_fraction(self, ratios: Dict[str, float]) -> Dict[str, float]:
        """``{group id: kept / channels}`` for ``ratios`` (``{group id: ratio}``; missing groups keep all)."""
        return {g: self.kept_count(g, r) / self.groups[g] for g, r in ratios.items() if g in self.groups and r > 0}

    def fractions(self, kf: Dict[str, float]) -> np.ndarray:
        return np.array([node_fraction(tn.node, kf) for tn in self.nodes], dtype=np.float64)

    def macs_fraction(self, f: np.ndarray) -> float:
        """Fraction of the Conv/Gemm/MatMul MACs left for per-node fractions ``f``."""
        macs = np.array([tn.node.macs if tn.node.kind != "other" else 0.0 for tn in self.nodes])
        return float((macs * f).sum()) / self.matrix_macs

    def special_time(self, macs_fraction: float) -> float:
        """Σ of the special rows at the model's Conv/Gemm/MatMul MACs fraction."""
        return float(sum(point_time(s, macs_fraction) for s in self.special))

    def total(self, kf: Dict[str, float]) -> float:
        """Σ node times at kept fractions ``kf``."""
        f = self.fractions(kf)
        return float(sum(tn.time(fi) for tn, fi in zip(self.nodes, f))) + self.special_time(self.macs_fraction(f))

    def latency(self, kf: Dict[str, float]) -> float:
        """Estimated latency ``a · Σ t_n + g`` (ms per batch, or relative units with the FLOPS profile)."""
        return self.a * self.total(kf) + self.g_ms

    def speedup(self, kf: Dict[str, float]) -> float:
        """``L(dense) / L(kf)``."""
        lk = self.latency(kf)
        return self.latency({}) / lk if lk > 0 else 1.0

    def scale_ms(self) -> float:
        """Factor from model units to the perf profile's measured ms (1 without a measured baseline)."""
        dense = self.latency({})
        return (self.baseline_ms / dense) if (self.baseline_ms and dense > 0) else 1.0

    def macs(self, kf: Dict[str, float]) -> float:
        """MACs per batch of the whole model after thinning (non-matrix MACs unchanged)."""
        f = self.fractions(kf)
        removed = sum(tn.node.macs * (1.0 - fi) for tn, fi in zip(self.nodes, f) if tn.node.kind != "other")
        return float(self.macs_total - removed)

    def params(self, kf: Dict[str, float]) -> float:
        """Params (elements) after thinning: each layer's weight scales with its MACs fraction (biases and
        BatchNorm parameters, a few per channel, are counted as unchanged). A weight shared by several layers is
        counted as thinning writes it (:func:`sparsify_tui.engine.thinning.apply_channel_edits`): once while no layer
        thins it, else one thinned copy per layer that thins it, plus the original while another layer still
        reads it whole."""
        f = self.fractions(kf)
        uses: Dict[str, list] = {}
        for tn, fi in zip(self.nodes, f):
            if tn.node.kind != "other":
                uses.setdefault(tn.node.weight or f"node:{tn.node.id}", []).append((float(fi), tn.node.params))
        removed = 0.0
        for readers in uses.values():
            size = readers[0][1]
            thinned = [size * fi for fi, _ in readers if fi < 1.0]
            kept_whole = size if len(thinned) < len(readers) else 0.0
            removed += size - (sum(thinned) + kept_whole)
        return float(self.params_total - removed)

    def group_ms(self, kf: Dict[str, float]) -> Dict[str, float]:
        """Estimated ms per batch of the nodes each group owns (the group its output channels, or a layer's
        input channels when its output is fixed, belong to), in the perf profile's ms."""
        f = self.fractions(kf)
        s = self.a * self.scale_ms()
        out = {g: 0.0 for g in self.groups}
        for tn, fi, own in zip(self.nodes, f, self.owner):
            if own in out:
                out[own] += s * tn.time(fi)
        return out


    def group_sums(self, node_ms: Dict[str, float]) -> Dict[str, float]:
        """Measured node times (``{node id: ms}``) summed per owning group (as :meth:`group_ms` assigns nodes)."""
        out = {g: 0.0 for g in self.groups}
        for tn, own in zip(self.nodes, self.owner):
            if own in out:
                out[own] += float(node_ms.get(tn.node.id, 0.0))
        return out


# ------------------------------------------------------------------------------------------- allocation


@dataclass
class GroupInput:
    """What the allocation needs of one row: ``id``, ``channels``, ``free`` (may be allocated), fixed ``ratio``
    (overrides and exclusions; 0 keeps all), ``loss`` / ``gain`` curves on :data:`GRID_LEVELS`."""

    id: str
    channels: int
    free: bool
    ratio: float
    loss: List[float]
    gain: List[float]


@dataclass
class ChannelAllocation:
    """``ratios``: ``{group id: effective ratio}`` (1 - kept/channels) of every group given; ``achieved``: the
    value of the target's measure (ratio of channels removed, MACs reduction or speedup); ``reachable``: its
    value with every free group at its cap; ``warnings``."""

    ratios: Dict[str, float]
    achieved: float
    reachable: float
    warnings: List[str] = field(default_factory=list)


def _norm(curves: Dict[str, List[float]]) -> Dict[str, np.ndarray]:
    tot = sum(max(c) if c else 0.0 for c in curves.values())
    return {k: (np.asarray(c, dtype=np.float64) / tot if tot > 0 else np.zeros(len(c))) for k, c in curves.items()}


def _options(channels: int, cap: float, round_to: int) -> List[int]:
    """Candidate kept counts of a group, descending from ``channels``: the rounded counts of ratios 0, 0.025...
    up to ``cap``, never fewer than ``(1 - cap)·channels``."""
    floor = (1.0 - cap) * channels - 1e-9
    out = {channels}
    for r in np.arange(0.0, cap + 1e-9, RATIO_STEP):
        k = round_kept(channels, min(float(r), 0.999), round_to)
        if k >= floor:
            out.add(k)
    return sorted(out, reverse=True)


def measure(model: ChannelTimeModel, target: str, kf: Dict[str, float], prunable_channels: int) -> float:
    """The target's measure at kept fractions ``kf``: fraction of prunable channels removed (``sparsity``,
    ``uniform``), MACs reduction (``macs``) or estimated speedup (``speedup``)."""
    if target == "macs":
        after = model.macs(kf)
        return model.macs_total / after if after > 0 else math.inf
    if target == "speedup":
        return model.speedup(kf)
    removed = sum(model.groups[g] * (1.0 - k) for g, k in kf.items())
    return removed / prunable_channels if prunable_channels else 0.0


def _kept_fractions(kept: Dict[str, int], channels: Dict[str, int]) -> Dict[str, float]:
    """Kept fraction of every thinned group, from kept counts and group channel counts."""
    return {g: v / channels[g] for g, v in kept.items() if v < channels[g]}


class _Greedy:
    """The greedy solver of :func:`allocate_channels` over the free groups (see the module docstring): the
    state of a solve (each free group's candidate kept counts ``opts`` and its ``level`` among them, the kept
    counts ``kept``, the node work fractions ``f`` and times ``t_now``), the resource ``need``-ed for the
    target and the resource ``gained`` so far, in the target's units (channels, MACs or estimated ms)."""

    def __init__(self, model: ChannelTimeModel, rows: List[GroupInput], free: List[GroupInput],
                 kept: Dict[str, int], *, target: str, value: float, balance: float, cap: float):
        self.model, self.target, self.balance = model, target, balance
        self.C = {r.id: r.channels for r in rows}
        self.kept = kept
        self.opts = {r.id: _options(r.channels, cap, model.rounding(r.id)) for r in free}
        self.lossn = _norm({r.id: r.loss for r in free})
        self.gainn = _norm({r.id: r.gain for r in free})
        # resource: what the target counts, as an amount that grows (channels, MACs or ms removed)
        self.macs = np.array([tn.node.macs if tn.node.kind != "other" else 0.0 for tn in model.nodes])
        self.kf = self.kf_of(kept)
        self.f = model.fractions(self.kf)
        self.t_now = np.array([tn.time(fi) for tn, fi in zip(model.nodes, self.f)])
        self.macs_now = float((self.macs * self.f).sum())
        self.kf_start = dict(self.kf)
        self.need = self._need(value)
        self.gained = 0.0
        self.neighbors = {g: {h for i in model.touching[g] for h in (set(model.nodes[i].node.inputs)
                                                                      | set(model.nodes[i].node.outputs))
                              if h in self.opts}
                          for g in self.opts}
        self.level = {g: 0 for g in self.opts}

    def kf_of(self, k: Dict[str, int]) -> Dict[str, float]:
        return _kept_fractions(k, self.C)

    def _need(self, value: float) -> float:
        """The resource the target asks for beyond what the fixed groups already give."""
        model, kept, C = self.model, self.kept, self.C
        if self.target == "sparsity":
            return value * sum(model.groups.values()) - sum(C[g] - k for g, k in kept.items())
        if self.target == "macs":
            return model.macs_total * (1.0 - 1.0 / value) - (model.macs_total - model.macs(self.kf))
        dense = model.latency({})
        return dense * (1.0 - 1.0 / value) - (dense - model.latency(self.kf))

    def short(self) -> bool:
        """The target is not met yet."""
        return self.need - self.gained > 1e-9

    def cost(self, g: str, k: int) -> float:
        ratio = 1.0 - k / self.C[g]
        return float(self.balance * np.interp(ratio, GRID_LEVELS, self.lossn[g])
                     - (1.0 - self.balance) * np.interp(ratio, GRID_LEVELS, self.gainn[g]))

    def left(self, k: Dict[str, float]) -> float:
        """What is left at kept fractions ``k``, in the target's resource: channels, MACs or estimated ms."""
        if self.target == "sparsity":
            return sum(c * k.get(g, 1.0) for g, c in self.model.groups.items())
        if self.target == "macs":
            return self.model.macs(k)
        return self.model.latency(k)

    def delta(self, g: str, k: int) -> float:
        """Resource gained by moving group g to kept count k (others as they are)."""
        model = self.model
        if self.target == "sparsity":
            return float(self.kept.get(g, self.C[g]) - k)
        trial = dict(self.kf)
        trial[g] = k / self.C[g]
        d_t = d_m = 0.0
        for i in model.touching[g]:
            fn = node_fraction(model.nodes[i].node, trial)
            d_m += self.macs[i] * (self.f[i] - fn)
            if self.target == "speedup":
                d_t += self.t_now[i] - model.nodes[i].time(fn)
        if self.target == "macs":
            return d_m
        if model.special:
            d_t += model.special_time(self.macs_now / model.matrix_macs) - \
                model.special_time((self.macs_now - d_m) / model.matrix_macs)
        return model.a * d_t

    def best_move(self, g: str) -> Optional[tuple]:
        """``(cost per resource, level, resource)`` of group g's cheapest move down, or None."""
        opts, level = self.opts[g], self.level[g]
        c_cur = self.cost(g, opts[level])
        out = None
        for j in range(level + 1, len(opts)):
            k = opts[j]
            d = self.delta(g, k)
            if d <= 1e-12:
                continue
            score = (self.cost(g, k) - c_cur) / d
            if out is None or score < out[0] - 1e-15:
                out = (score, j, d)
        return out

    def move(self, g: str, j: int, d: float) -> None:
        """Set group g to level j, gaining resource d, and update the nodes it touches."""
        model = self.model
        self.level[g] = j
        self.kept[g] = self.opts[g][j]
        self.kf = self.kf_of(self.kept)
        for i in model.touching[g]:
            self.f[i] = node_fraction(model.nodes[i].node, self.kf)
            self.t_now[i] = model.nodes[i].time(self.f[i])
        self.macs_now = float((self.macs * self.f).sum())
        self.gained += d

    def grow(self) -> None:
        """From the current state, take the cheapest move per resource until the target is met or none is left,
        re-evaluating the groups that share a node with the one moved."""
        best = {g: self.best_move(g) for g in self.opts}
        while self.short():
            cands = [(m[0], g) for g, m in best.items() if m is not None]
            if not cands:
                break
            _, g = min(cands)
            _, j, _ = best[g]
            # afresh: the special rows follow the whole model's MACs, which other moves changed
            self.move(g, j, self.delta(g, self.opts[g][j]))
            for h in self.neighbors[g] | {g}:
                best[h] = self.best_move(h)

    def restart_at_caps(self) -> None:
        """Every free group at its cap (when the greedy stalled short of a target the caps allow)."""
        model = self.model
        for g in self.opts:
            self.level[g] = len(self.opts[g]) - 1
            self.kept[g] = self.opts[g][self.level[g]]
        self.kf = self.kf_of(self.kept)
        self.f[:] = model.fractions(self.kf)
        self.t_now[:] = [tn.time(fi) for tn, fi in zip(model.nodes, self.f)]
        self.macs_now = float((self.macs * self.f).sum())
        self.gained = self.left(self.kf_start) - self.left(self.kf)

    def saving_of(self, g: str, k: int) -> float:
        """What giving group g back to kept count k saves: its loss alone with a speedup target, else its cost."""
        C, opts, level = self.C, self.opts, self.level
        if self.target == "speedup":
            r0, r1 = 1.0 - opts[g][level[g]] / C[g], 1.0 - k / C[g]
            return float(np.interp(r0, GRID_LEVELS, self.lossn[g]) - np.interp(r1, GRID_LEVELS, self.lossn[g]))
        return self.cost(g, opts[g][level[g]]) - self.cost(g, k)

    def give_back(self) -> None:
        """The last moves may overshoot: give channels back (one level at a time, the largest saving first) while
        the target still holds. With a speedup target the time is the constraint, not a cost: a give-back is
        judged by the loss it saves alone (a group whose loss is flat there goes back too, the largest first, so
        the result lands as close to the target as the rounded counts allow)."""
        while not self.short():
            back = None
            for g in self.opts:
                if self.level[g] == 0:
                    continue
                k = self.opts[g][self.level[g] - 1]
                d = self.delta(g, k)  # negative: resource given back
                if self.gained + d < self.need - 1e-9:
                    continue
                key = (self.saving_of(g, k), -d)
                if back is None or key > back[0]:
                    back = (key, g, d)
            if back is None or back[0][0] < (0.0 if self.target == "speedup" else 1e-15):
                break
            _, g, d = back
            self.move(g, self.level[g] - 1, d)


def allocate_channels(model: ChannelTimeModel, rows: List[GroupInput], *, target: str, value: float,
                      balance: float, cap: float) -> ChannelAllocation:
    """Per-group ratios for ``target`` (:data:`TARGETS`) at ``value`` (R for ``uniform`` / ``sparsity``, X for
    ``macs`` / ``speedup``); see the module docstring. Pure and deterministic."""
    prunable_channels = sum(model.groups.values())
    kept: Dict[str, int] = {}
    for r in rows:
        if not r.free and r.ratio > 0 and r.id in model.groups:
            kept[r.id] = model.kept_count(r.id, r.ratio)
    free = [r for r in rows if r.free and r.id in model.groups]

    warnings: List[str] = []
    if target == "uniform":
        for r in free:
            kept[r.id] = model.kept_count(r.id, value)
        kf = _kept_fractions(kept, {r.id: r.channels for r in rows})
        ratios = {r.id: 1.0 - kept.get(r.id, r.channels) / r.channels for r in rows}
        return ChannelAllocation(ratios, measure(model, "sparsity", kf, prunable_channels),
                                 measure(model, "sparsity", kf, prunable_channels), warnings)

    solve = _Greedy(model, rows, free, kept, target=target, value=value, balance=balance, cap=cap)
    reachable = measure(model, target, solve.kf_of(dict(kept, **{g: o[-1] for g, o in solve.opts.items()})),
                        prunable_channels)
    solve.grow()
    if solve.short() and reachable >= value and solve.opts:
        # the greedy stalled short of a target the caps allow (no single move gains any more: the measured
        # curves are flat there, yet moves together do): start again from every free group at its cap and give
        # back from there
        solve.restart_at_caps()
    solve.give_back()
    achieved = measure(model, target, solve.kf_of(kept), prunable_channels)
    if solve.short():
        label = {"sparsity": f"{value:.2f} of the channels", "macs": f"{value:.2f}x fewer MACs",
                 "speedup": f"{value:.2f}x estimated speedup"}[target]
        warnings.append(f"target {label} is not reachable with these caps, exclusions and overrides: the most is "
                        f"{reachable:.3g}; every free group is at its cap")
    ratios = {r.id: 1.0 - kept.get(r.id, r.channels) / r.channels for r in rows}
    return ChannelAllocation(ratios, achieved, reachable, warnings)


def loss_at(curve: List[float], ratio: float) -> float:
    """A row's loss curve (on :data:`GRID_LEVELS`) at ``ratio``."""
    return float(np.interp(float(ratio), GRID_LEVELS, curve)) if curve else 0.0


__all__ = ["TARGETS", "KIND_TEXT", "TimedNode", "ChannelTimeModel", "GroupInput", "ChannelAllocation",
           "allocate_channels", "measure", "loss_at"]
