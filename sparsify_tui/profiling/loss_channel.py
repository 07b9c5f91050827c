"""Channel loss profiles: how much each channel group hurts the model when it loses a fraction of its
channels (``profile loss --structure channel``).

Rows are the channel groups of :mod:`sparsify_tui.analysis.channels` (id = the weight name of the group's first
producer), one per **prunable** group; a level ``r`` removes the group's least important channels (group L2 norm,
:func:`~sparsify_tui.analysis.channels.channel_importance`) so that
:func:`~sparsify_tui.analysis.channels.round_kept` ``(C, r, round_to)`` stay: exactly what thinning removes at
that ratio.

* ``magnitude``: the **group L2 norm of the channels removed** at each level,
  ``sqrt(Σ_{c removed} importance_c²)`` (the L2 norm of every coupled weight slice of those channels: producers'
  output rows, consumers' input columns, depthwise weights, BatchNorm scales; DepGraph's group norm, Fang et
  al., CVPR 2023). Non-decreasing in the level; 0 while nothing is removed. Unit: L2 norm of weights.
* ``one-shot``: the output change on data when **only that group** loses those channels. Removing channel ``c``
  equals zeroing, in the original model, the input weights of every consumer that reads ``c`` (the exactness
  contract of :mod:`sparsify_tui.engine.thinning`), so each measurement feeds zeroed consumer weights to the
  fast one-shot engine of :mod:`sparsify_tui.profiling.loss_oneshot`: overridable weights (no session per
  measurement), sub-models holding only the nodes downstream of the group's consumers (the part above is not
  re-run: its activations come from one dense pass), groups of groups planned by the same cost model, one live
  session at a time. A level whose rounded kept count equals a previous level's reuses its value (no run);
  level 0 is 0. Metric: the one-shot metric (KL for class outputs, NMSE otherwise; ``metric`` overrides it).
  **After reconstruction** (``reconstruct``, the default): at each level the group's consumers are refit as apply
  refits them (:mod:`sparsify_tui.engine.reconstruction`: ridge least squares to their original outputs, the bias
  too, a zero bias added where a Conv/Gemm had none) and fed in place of the zeroed weights, so the allocation sums
  the output changes apply delivers. The refits come from the Gram matrix of each consumer's original inputs over
  :data:`RECONSTRUCT_ITEMS` other items than the measured ones (one run of the model), factored once per consumer
  in the order its channels go, so each level costs two matrix products
  (:meth:`~sparsify_tui.engine.reconstruction.DenseRefit.order`); ridge :data:`PROFILE_RIDGE`.

INT8 sensitivity is a per-layer measurement (``--structure unstructured``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np

from sparsify_tui.errors import ModelError, SparsifyError
from sparsify_tui.progress import maybe_check

CHANNEL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Default levels (fractions of a group's channels removed) of channel loss profiles."""


#: calibration items the one-shot profile refits consumers on (other items than the ones it measures)
RECONSTRUCT_ITEMS = 16
#: the ridge of the profile's refits (relative, as :func:`sparsify_tui.engine.reconstruction.reconstruct`'s)
PROFILE_RIDGE = 1e-2


class _Refits:
    """The refits of one profile: :class:`~sparsify_tui.engine.reconstruction.DenseRefit` of every consumer, the
    bias slot of each (``(node index, input index)``), a cache per (node, kept positions) and the solve time."""

    def __init__(self, rf, items: int) -> None:
        self.rf, self.items = rf, items
        self.bias_slots: dict = {}
        for i, c in rf.consumers.items():
            if c.intercept:
                self.bias_slots[i] = (c.add_index, c.add_slot) if getattr(c, "add_index", None) is not None \
                    else (i, 2)
        self.solve_s = 0.0
        self._cache: dict = {}

    def order(self, groups, g, edits, order_g: np.ndarray) -> None:
        """Tell each consumer of group ``g`` the order its channels go in (``order_g``: channel indices, removed
        first), so that every level's refit is a leading block of one factorization
        (:meth:`~sparsify_tui.engine.reconstruction.DenseRefit.order`)."""
        t = time.perf_counter()
        step = np.empty(g.channels)
        step[order_g] = np.arange(g.channels)
        chan_of_root = {int(r): i for i, r in enumerate(g.classes)}
        for e in edits:
            if e.node not in self.rf.consumers or len(e.emap) != self.rf.positions(e.node):
                continue
            roots = groups.element_root[e.emap]
            rank = np.array([step[chan_of_root[int(r)]] if int(r) in chan_of_root else np.inf for r in roots])
            self.rf.order(e.node, rank, PROFILE_RIDGE)
        self.solve_s += time.perf_counter() - t

    def weights(self, node: int, kept: np.ndarray):
        """``(weight, ((node, slot), bias) | None)`` of consumer ``node`` refit on its ``kept`` positions (bool),
        or ``(None, None)`` when the positions do not map onto its rows."""
        if len(kept) != self.rf.positions(node):
            return None, None
        key = (node, kept.tobytes())
        if key not in self._cache:
            t = time.perf_counter()
            w, b = self.rf.refit(node, kept, PROFILE_RIDGE)
            self._cache = {key: (np.array(w, copy=True), None if b is None else (b[0], np.array(b[1], copy=True)))}
            self.solve_s += time.perf_counter() - t
        w, b = self._cache[key]
        if b is not None:
            b = (self.bias_slots[node], b[1])
        return w, b


def _add_zero_biases(model, node_indices, lookup) -> None:
    """Give each Conv/ConvTranspose/Gemm among ``node_indices`` without a bias a zero one (same outputs), so a refit
    bias has a slot to be fed into."""
    from onnx import helper, numpy_helper

    from sparsify_tui.analysis.channels import constant_view

    for i in node_indices:
        n = model.graph.node[i]
        if n.op_type not in ("Conv", "ConvTranspose", "Gemm") or (len(n.input) > 2 and n.input[2]):
            continue
        try:
            w = np.asarray(constant_view(model, n.input[1], lookup))
        except (KeyError, ValueError):
            continue
        if n.op_type == "Conv":
            size = w.shape[0]
        elif n.op_type == "ConvTranspose":
            size = w.shape[1] * int(next((a.i for a in n.attribute if a.name == "group"), 1) or 1)
        else:
            tb = int(next((a.i for a in n.attribute if a.name == "transB"), 0))
            size = w.shape[0] if tb else w.shape[1]
            if float(next((a.f for a in n.attribute if a.name == "beta"), 1.0)) == 0.0:
                continue
        name = f"__channel_bias_{i}"
        model.graph.initializer.append(numpy_helper.from_array(np.zeros(size, w.dtype), name))
        while len(n.input) < 2:
            n.input.append("")
        if len(n.input) == 2:
            n.input.append(name)
        else:
            n.input[2] = name
    del helper


def _dense_refit(path, model, cons_nodes, feeds, batch_size, dims, items, engine, core_count, cancel, progress):
    """``(_Refits, seconds)``: the Gram matrices of the consumers' original inputs over the calibration ``feeds``
    (the data's items after the measured ones), or without them over ``items`` synthetic items of other seeds than
    the measured ones."""
    import onnx

    from sparsify_tui.engine.reconstruction import DenseRefit

    t = time.perf_counter()
    progress("reconstruction: calibration", 0.0)
    if not feeds:
        from sparsify_tui.analysis.inputs import input_specs, synthetic_inputs

        specs = input_specs(str(path), batch_size=batch_size, dims=dims or {})
        feeds = [synthetic_inputs(specs, seed=1000 + i) for i in range(items)]
    full = onnx.ModelProto()
    full.CopyFrom(model)
    for ti in full.graph.initializer:  # weights read from the model file when the proto does not hold them
        if ti.data_location == onnx.TensorProto.EXTERNAL:
            from sparsify_tui.analysis.loading import tensor_array

            ti.CopyFrom(onnx.numpy_helper.from_array(np.ascontiguousarray(tensor_array(ti, path.parent)), ti.name))
    rf = DenseRefit(full, cons_nodes, engine=engine, core_count=core_count, cancel=cancel)
    rf.accumulate(feeds)
    del full
    return _Refits(rf, len(feeds) * batch_size), time.perf_counter() - t


def _check_channel_levels(levels) -> list:
    out = sorted({round(float(x), 6) for x in levels})
    if not out or out[0] < 0 or out[-1] >= 1:
        raise SparsifyError(f"channel levels must be fractions of channels in [0, 1), got {list(levels)}")
    return out


def removed_at(groups, importance: dict, gid: str, level: float, round_to: int) -> np.ndarray:
    """Channel indices of group ``gid`` removed at ``level`` (least important first, rounded as thinning does)."""
    from sparsify_tui.analysis.channels import choose_removed

    if level <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(choose_removed(groups, importance, {gid: float(level)}, round_to).get(gid, []), dtype=np.int64)


def magnitude_values(importance: np.ndarray, order: np.ndarray, kept_counts: list, levels: list) -> dict:
    """``{level key: sqrt(Σ importance² of the removed channels)}`` for one group: ``order`` = channel indices by
    increasing importance, ``kept_counts[i]`` = channels kept at ``levels[i]``."""
    from sparsify_tui.profiling.loss import level_key

    sq = np.concatenate([[0.0], np.cumsum(np.asarray(importance, dtype=np.float64)[order] ** 2)])
    c = len(importance)
    return {level_key(s): float(np.sqrt(sq[c - k])) for s, k in zip(levels, kept_counts)}


def channel_magnitude(model, groups, *, levels=CHANNEL_LEVELS, round_to: int = 8, importance: str = "l2",
                      base_dir=None) -> dict:
    """``{group id: {level key: removed group norm}}`` for every prunable group (see the module docstring);
    ``model`` must give access to its weights (in the proto or under ``base_dir``)."""
    from sparsify_tui.analysis.channels import channel_importance, round_kept

    levels = _check_channel_levels(levels)
    scores = channel_importance(model, groups, importance, base_dir=base_dir)
    out = {}
    for g in groups.groups:
        if not g.prunable:
            continue
        imp = scores[g.id]
        order = np.argsort(imp, kind="stable")
        kept = [round_kept(g.channels, s, g.round_to(round_to)) if s > 0 else g.channels for s in levels]
        out[g.id] = magnitude_values(imp, order, kept, levels)
    return out


def _entries(groups, sens: dict, first_prunable: Optional[str]) -> list:
    from sparsify_tui.profiling.loss import LossLayer

    rows = []
    for g in groups.groups:
        if not g.prunable:
            continue
        rows.append(LossLayer(id=g.id, weight_name=g.id, op_type="channel group", params=int(g.channels),
                              prunable_params=int(g.channels), sparsity=0.0, sensitivity=sens[g.id],
                              first=bool(g.first_layer or g.id == first_prunable)))
    return rows


def channel_profile(model_path, *, method: str = "magnitude", levels=None, data=None, batches: int = 2,
                    batch_size: int = 1, dims=None, metric: Optional[str] = None, name: str = "baseline",
                    round_to: Optional[int] = None, importance: str = "l2", core_count: Optional[int] = None,
                    strategy: str = "auto", feeds: Optional[list] = None, reconstruct: bool = True,
                    calibration_items: int = RECONSTRUCT_ITEMS, engine=None, progress=None, cancel=None):
    """Channel loss profile of the model at ``model_path`` (module docstring): ``method`` "magnitude" or
    "one-shot"; ``levels`` fractions of channels removed (default :data:`CHANNEL_LEVELS`); ``round_to`` (default
    :func:`~sparsify_tui.analysis.channels.default_round_to`) and ``importance`` as thinning uses them; the other
    arguments as :func:`sparsify_tui.profiling.loss.profile_loss`. ``reconstruct`` (one-shot): measure each level
    with the group's consumers refit (module docstring), on ``calibration_items`` other items. Returns a
    :class:`~sparsify_tui.profiling.loss.LossProfile` whose rows are the prunable groups and whose
    ``settings["structure"]`` is ``"channel"``. Raises ``ModelError`` (no prunable group), ``SparsifyError``
    (bad levels or method), ``DimensionError`` / ``SampleDataError``, ``JobCanceled``."""
    from sparsify_tui.analysis.channels import default_round_to, groups_from_analysis
    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.engine import get_engine
    from sparsify_tui.profiling.loss import LossProfile
    from sparsify_tui.profiling.metrics import flat_warning

    if method not in ("magnitude", "one-shot"):
        raise SparsifyError(f"channel loss profiles are magnitude or one-shot, not {method!r}: use --method "
                            "magnitude or --method one-shot")
    t0 = time.perf_counter()
    step = progress or (lambda s, f: None)
    levels = _check_channel_levels(CHANNEL_LEVELS if levels is None else levels)
    round_to = default_round_to() if round_to is None else int(round_to)
    engine = get_engine(engine)
    path = Path(model_path)
    step("channel groups", 0.0)
    model = load_model(path, load_external_data=(method == "one-shot"))
    analysis = analyze_model(model, batch_size=batch_size, dims=dict(dims or {}), count_zeros=False,
                             include_system=False, engine=engine)
    groups = groups_from_analysis(model, analysis, base_dir=path.parent)
    prunable = [g for g in groups.groups if g.prunable]
    if not prunable:
        raise ModelError(f"{path.name} has no prunable channel group: see `sparsify-tui analyze {path.name} "
                         "--channel-groups` for the reasons")
    maybe_check(cancel)
    extras: dict = {"round_to": round_to, "importance": importance, "groups": len(groups.groups),
                    "prunable_groups": len(prunable)}
    settings = {"levels": levels, "structure": "channel", "round_to": round_to, "importance": importance}
    if method == "magnitude":
        sens = channel_magnitude(model, groups, levels=levels, round_to=round_to, importance=importance,
                                 base_dir=path.parent)
        metric_name = "channel magnitude"
        step("group norms", 1.0)
    else:
        sens, metric_name, more = _one_shot(path, model, analysis, groups, levels=levels, data=data, batches=batches,
                                            batch_size=batch_size, dims=dims, metric=metric, round_to=round_to,
                                            importance=importance, core_count=core_count, strategy=strategy,
                                            feeds=feeds, reconstruct=reconstruct, calibration_items=calibration_items,
                                            engine=engine, progress=step, cancel=cancel)
        extras.update(more)
        settings.update({"batches": more.get("batches"), "data": str(data) if data else None,
                         "metric": metric or "auto", "strategy": strategy,
                         "reconstructed": bool(more.get("reconstruction"))})
    layers = _entries(groups, sens, prunable[0].id)
    flat = extras.get("flat_outputs")
    return LossProfile.of_model(model, layers, model_path=path, started=t0, name=name, method=method,
                                settings=settings, metric=metric_name, levels=levels, extras=extras,
                                warnings=[flat_warning(flat)] if flat else [])


# -------------------------------------------------------------------------------------------- one-shot


def _one_shot(path: Path, model, analysis, groups, *, levels, data, batches, batch_size, dims, metric, round_to,
              importance, core_count, strategy, feeds, reconstruct, calibration_items, engine, progress, cancel):
    """``({group id: {level key: value}}, metric label, extras)`` (module docstring)."""
    from sparsify_tui.analysis.channels import ConstantLookup, channel_importance
    from sparsify_tui.profiling.loss import level_key
    from sparsify_tui.profiling.loss_oneshot import (
        GraphIndex, dense_reference, group_sessions, node_costs, plan_groups, stripped_weights,
    )

    if strategy not in ("auto", "single", "layer"):
        raise SparsifyError(f"unknown one-shot strategy {strategy!r}: use auto, single or layer")
    scores = channel_importance(model, groups, importance, base_dir=path.parent)
    prunable = [g for g in groups.groups if g.prunable]
    batches_list, refit_feeds = _one_shot_feeds(path, data, feeds, reconstruct, batches, calibration_items,
                                                batch_size, dims)
    nb = len(batches_list)

    lookup = ConstantLookup(model, path.parent)
    cons_nodes = sorted({e.node for e in groups.consumer_edits()})
    refit = None
    seconds_refit = 0.0
    if reconstruct:
        _add_zero_biases(model, cons_nodes, lookup)
        lookup = ConstantLookup(model, path.parent)
    slot_keys = [(e.node, e.input) for e in groups.consumer_edits()]
    if reconstruct:
        refit, seconds_refit = _dense_refit(path, model, cons_nodes, refit_feeds, batch_size, dims,
                                            calibration_items, engine, core_count, cancel, progress)
        slot_keys += [at for at in refit.bias_slots.values()]
    slot_name = _consumer_slots(model, slot_keys, lookup)
    gi = GraphIndex(model)
    arrays, by_name = stripped_weights(model, slot_name.values())
    slot_dense = {key: by_name[name] for key, name in slot_name.items()}
    units, masks = _group_units(path, groups, prunable, gi)

    run_levels = [s for s in levels if s > 0]
    costs = node_costs(path, model, batch_size, dims, batches_list[0], engine)

    def plan(t_create: float, t_run: float) -> list:
        runs = len(run_levels) * nb
        if strategy == "single":
            return [(0, len(units))]
        if strategy == "layer":
            return [(i, i + 1) for i in range(len(units))]
        return plan_groups(masks, costs, runs, t_create, t_run)

    progress("dense pass", 0.0)
    ref = dense_reference(engine, model, gi, arrays, masks, batches_list, core_count, cancel, metric, plan)
    meter = _LevelMeter(groups=groups, levels=levels, round_to=round_to, scores=scores, refit=refit,
                        slot_name=slot_name, slot_dense=slot_dense, ref=ref, cancel=cancel, progress=progress,
                        total_runs=sum((b - a) for a, b in ref.groups) * len(run_levels) * nb)
    sens: dict = {}
    stats, t_sessions = group_sessions(engine, model, gi, arrays, core_count, cancel, ref, costs, count_key="groups",
                                       slots=lambda a, b: meter.slots(units[a:b]),
                                       measure=lambda a, b, outs, run, gfeeds: meter.measure(
                                           units, a, b, outs, run, gfeeds, sens))
    n_sessions = 1 + len(stats)
    progress("one-shot", 1.0)
    for g in prunable:  # a group without consumer layers (never the case for a prunable group): no change
        sens.setdefault(g.id, {level_key(s): 0.0 for s in levels})
    extras = {"sessions": n_sessions, "runs": meter.total_runs - meter.skipped, "runs_skipped": meter.skipped,
              "batches": nb,
              "reconstruction": ({"items": refit.items, "ridge": PROFILE_RIDGE, "consumers": len(refit.rf.consumers),
                                  "seconds": round(seconds_refit + refit.solve_s, 3)} if refit is not None else None),
              "plan": [[units[a][0].id, units[b - 1][0].id, b - a] for a, b in ref.groups],
              "output_metrics": dict(ref.metric.kinds), "seconds_group_sessions": round(t_sessions, 3),
              "seconds_setup": round(ref.setup_s, 3),
              "calibration": {"create_s": round(ref.t_create, 4), "run_s": round(ref.t_run, 5)},
              "group_stats": stats}
    flat = ref.metric.flat_outputs(ref.dense_outs)
    if flat:
        extras["flat_outputs"] = {k: float(v) for k, v in flat.items()}
    return sens, ref.metric.label, extras


def _one_shot_feeds(path, data, feeds, reconstruct, batches, calibration_items, batch_size, dims):
    """``(measured batches, refit calibration batches or None)``: the given ``feeds``, else one read of the data
    file (the measured items, then, reconstructing, the refits' calibration items)."""
    from sparsify_tui.profiling.loss_oneshot import sample_batches

    if feeds is not None:
        return feeds, None
    if reconstruct and data:
        every = sample_batches(path, data, batches + calibration_items, batch_size, dims)
        return every[:batches], every[batches:] or None
    return sample_batches(path, data, batches, batch_size, dims), None


def _consumer_slots(model, slot_keys, lookup) -> dict:
    """Consumer slots: ``{(node index, input index): initializer name}`` for every consumer weight (and,
    reconstructing, its bias: a zero bias is added where a Conv/Gemm has none), each made a plain initializer read
    by that node alone (a weight chain or a shared weight gets its own evaluated copy, added to ``model``), so it
    can be overridden."""
    import onnx

    from sparsify_tui.analysis.channels import constant_view

    nodes = model.graph.node
    inits = {t.name: t for t in model.graph.initializer}
    readers: dict = {}
    for n in nodes:
        for x in n.input:
            readers[x] = readers.get(x, 0) + 1
    slot_name: dict = {}
    copies = []
    for key in slot_keys:
        if key in slot_name:
            continue
        name = nodes[key[0]].input[key[1]]
        if name in inits and readers.get(name, 0) == 1:
            slot_name[key] = name
        else:
            arr = np.ascontiguousarray(constant_view(model, name, lookup))
            new = f"__channel_slot_{len(slot_name)}"
            copies.append(onnx.numpy_helper.from_array(arr, new))
            nodes[key[0]].input[key[1]] = new
            slot_name[key] = new
    model.graph.initializer.extend(copies)
    return slot_name


def _group_units(path: Path, groups, prunable, gi):
    """``(units, masks)``: per prunable group with consumers, ``(group, its consumer edits, their node
    indices)`` and the mask of the nodes its consumers reach, ordered by first consumer (so that planned groups
    are contiguous in graph order). :class:`ModelError` when no group has a consumer layer."""
    units = []
    for g in prunable:
        mine = [e for e in groups.consumer_edits() if np.isin(groups.element_root[e.emap], g.classes).any()]
        if not mine:
            continue
        units.append((g, mine, sorted({e.node for e in mine})))
    if not units:
        raise ModelError(f"{path.name}: no prunable channel group has a consumer layer to measure")
    masks = []
    for _g, _edits, cnodes in units:
        m = np.zeros(len(gi.nodes), dtype=bool)
        for i in cnodes:
            m |= gi.descendants(i)
        masks.append(m)
    order = sorted(range(len(units)), key=lambda u: units[u][2][0])
    return [units[u] for u in order], [masks[u] for u in order]


class _LevelMeter:
    """Measures the groups of one planned session at every level: zeroes each level's removed channels in the
    group's consumer slots, runs the sub-graph on the dense reference's cached feeds and scores it against the
    dense outputs. Counts the runs ``done`` (for progress) and ``skipped`` (levels that remove nothing new)."""

    def __init__(self, *, groups, levels, round_to, scores, refit, slot_name, slot_dense, ref, cancel, progress,
                 total_runs):
        self.groups, self.levels, self.round_to, self.scores = groups, levels, round_to, scores
        self.refit, self.slot_name, self.slot_dense, self.ref = refit, slot_name, slot_dense, ref
        self.cancel, self.progress, self.total_runs = cancel, progress, total_runs
        self.done = 0
        self.skipped = 0

    def slots(self, units) -> list:
        """The slot initializers of ``units`` (consumer weights and, reconstructing, their biases)."""
        refit = self.refit
        slots = sorted({(e.node, e.input) for _g, edits, _c in units for e in edits}
                       | ({refit.bias_slots[e.node] for _g, edits, _c in units for e in edits
                           if e.node in refit.bias_slots} if refit is not None else set()))
        return [self.slot_name[s] for s in slots]

    def measure(self, units, a, b, outs, run, gfeeds, sens: dict) -> None:
        """Measure ``units[a:b]`` (one session's groups) at every level into ``sens``."""
        refit = self.refit
        for g, edits, _c in units[a:b]:
            sens[g.id] = self._levels(g, edits, gfeeds, outs, run)
            if refit is not None:
                for e in edits:
                    if sum(1 for _u, ed, _c in units for x in ed if x.node == e.node) <= len(
                            [x for x in edits if x.node == e.node]):
                        refit.rf.release(e.node)  # its only group is measured: free its matrices

    def _levels(self, g, edits, gfeeds, outs, run) -> dict:
        """``{level key: value}`` of group ``g``: each level's removed channels zeroed (or refit) and measured."""
        from sparsify_tui.analysis.channels import round_kept
        from sparsify_tui.profiling.loss import level_key

        nb = len(gfeeds)
        vals: dict = {}
        by_kept: dict = {}
        order_g = np.argsort(self.scores[g.id], kind="stable")
        if self.refit is not None:
            self.refit.order(self.groups, g, edits, order_g)
        for s in self.levels:
            kept = round_kept(g.channels, s, g.round_to(self.round_to)) if s > 0 else g.channels
            if kept == g.channels:
                vals[level_key(s)] = 0.0  # nothing removed: equals dense
                if s > 0:
                    self.done += nb
                    self.skipped += nb
                continue
            if kept in by_kept:
                vals[level_key(s)] = by_kept[kept]  # same channels removed as a previous level
                self.done += nb
                self.skipped += nb
                continue
            removed = np.sort(order_g[: g.channels - kept])
            feed_w = self._level_weights(edits, self.groups.removed_elements({g.id: removed}))
            acc = []
            for f, d in zip(gfeeds, self.ref.dense_outs):
                maybe_check(self.cancel)
                for key, arr in feed_w.items():
                    f[self.slot_name[key]] = arr
                acc.append(self.ref.metric.value(d, dict(zip(outs, run(f)))))
                self.done += 1
            for f in gfeeds:
                for key in feed_w:
                    f.pop(self.slot_name[key], None)
            by_kept[kept] = vals[level_key(s)] = float(np.mean(acc))
            self.progress(f"one-shot {g.id}", self.done / max(1, self.total_runs))
        return {level_key(s): vals[level_key(s)] for s in self.levels}

    def _level_weights(self, edits, dead) -> dict:
        """``{slot: array}``: the consumer weights with the ``dead`` elements removed: refit (with their bias)
        where reconstructing, else the dense weights with those channels zeroed."""
        feed_w = {}
        refit = self.refit
        for e in edits:
            key = (e.node, e.input)
            if refit is not None and e.node in refit.rf.consumers:
                weight, bias = refit.weights(e.node, ~dead[e.emap])
                if weight is not None:
                    feed_w[key] = weight
                    if bias is not None:
                        feed_w[bias[0]] = bias[1]
                    continue
            arr = feed_w.get(key)
            if arr is None:
                arr = feed_w[key] = np.array(self.slot_dense[key], copy=True)
            view = np.moveaxis(arr, e.axis, 0)
            view[dead[e.emap]] = 0
        return feed_w
