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
                    strategy: str = "auto", feeds: Optional[list] = None, engine=None, progress=None, cancel=None):
    """Channel loss profile of the model at ``model_path`` (module docstring): ``method`` "magnitude" or
    "one-shot"; ``levels`` fractions of channels removed (default :data:`CHANNEL_LEVELS`); ``round_to`` (default
    :func:`~sparsify_tui.analysis.channels.default_round_to`) and ``importance`` as thinning uses them; the other
    arguments as :func:`sparsify_tui.profiling.loss.profile_loss`. Returns a
    :class:`~sparsify_tui.profiling.loss.LossProfile` whose rows are the prunable groups and whose
    ``settings["structure"]`` is ``"channel"``. Raises ``ModelError`` (no prunable group), ``SparsifyError``
    (bad levels or method), ``DimensionError`` / ``SampleDataError``, ``JobCanceled``."""
    from sparsify_tui.analysis.channels import default_round_to, groups_from_analysis
    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.engine import get_engine
    from sparsify_tui.profiling.loss import LossProfile, _total_params
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
                                            feeds=feeds, engine=engine, progress=step, cancel=cancel)
        extras.update(more)
        settings.update({"batches": more.get("batches"), "data": str(data) if data else None,
                         "metric": metric or "auto", "strategy": strategy})
    layers = _entries(groups, sens, prunable[0].id)
    flat = extras.get("flat_outputs")
    return LossProfile(name=name, method=method, settings=settings, metric=metric_name, levels=levels,
                       total_params=_total_params(model), prunable_params=sum(x.prunable_params for x in layers),
                       layers=layers, model_path=str(path), seconds=time.perf_counter() - t0, extras=extras,
                       warnings=[flat_warning(flat)] if flat else [])


# -------------------------------------------------------------------------------------------- one-shot


def _one_shot(path: Path, model, analysis, groups, *, levels, data, batches, batch_size, dims, metric, round_to,
              importance, core_count, strategy, feeds, engine, progress, cancel):
    """``({group id: {level key: value}}, metric label, extras)`` (module docstring)."""
    import onnx

    from sparsify_tui.analysis.channels import ConstantLookup, channel_importance, constant_view, round_kept
    from sparsify_tui.engine.timing import canceled_as_job
    from sparsify_tui.engine.weights import strip_initializers
    from sparsify_tui.profiling.loss import level_key
    from sparsify_tui.profiling.loss_oneshot import (
        GraphIndex, build_group_model, dense_reference, node_costs, open_session, plan_groups, sample_batches,
    )

    if strategy not in ("auto", "single", "layer"):
        raise SparsifyError(f"unknown one-shot strategy {strategy!r}: use auto, single or layer")
    scores = channel_importance(model, groups, importance, base_dir=path.parent)
    prunable = [g for g in groups.groups if g.prunable]
    batches_list = feeds if feeds is not None else sample_batches(path, data, batches, batch_size, dims)
    nb = len(batches_list)

    # consumer slots: (node index, input index) of every consumer weight, made a plain initializer read by that
    # node alone (a weight chain or a shared weight gets its own evaluated copy), so it can be overridden
    lookup = ConstantLookup(model, path.parent)
    nodes = model.graph.node
    inits = {t.name: t for t in model.graph.initializer}
    readers: dict = {}
    for n in nodes:
        for x in n.input:
            readers[x] = readers.get(x, 0) + 1
    slot_name: dict = {}
    slot_dense: dict = {}
    copies = []
    for e in groups.consumer_edits():
        key = (e.node, e.input)
        if key in slot_name:
            continue
        name = nodes[e.node].input[e.input]
        if name in inits and readers.get(name, 0) == 1:
            slot_name[key] = name
        else:
            arr = np.ascontiguousarray(constant_view(model, name, lookup))
            new = f"__channel_slot_{len(slot_name)}"
            copies.append(onnx.numpy_helper.from_array(arr, new))
            nodes[e.node].input[e.input] = new
            slot_name[key] = new
    model.graph.initializer.extend(copies)
    gi = GraphIndex(model)
    arrays = strip_initializers(model)
    for key, name in slot_name.items():
        slot_dense[key] = arrays[name] if name in arrays else onnx.numpy_helper.to_array(
            next(t for t in model.graph.initializer if t.name == name))

    # per group: its consumer slots and nodes, and the zeroed weights of each level
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
    # order units by their first consumer so that planned groups are contiguous in graph order
    order = sorted(range(len(units)), key=lambda u: units[u][2][0])
    units = [units[u] for u in order]
    masks = [masks[u] for u in order]

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
    total_runs = sum((b - a) for a, b in ref.groups) * len(run_levels) * nb
    done = 0
    sens: dict = {}
    n_sessions = 1
    t_sessions = 0.0
    stats: list = []
    skipped = 0
    with canceled_as_job(cancel):
        for (a, b), m in zip(ref.groups, ref.group_masks):
            maybe_check(cancel)
            ts = time.perf_counter()
            slots = sorted({(e.node, e.input) for _g, edits, _c in units[a:b] for e in edits})
            names = [slot_name[s] for s in slots]
            front = gi.frontier(m)
            sub = build_group_model(model, gi, m, names, ref.cache[0])
            sess = open_session(engine, sub, arrays, core_count)
            del sub
            n_sessions += 1
            create_s = time.perf_counter() - ts
            t_sessions += create_s
            outs = list(sess.output_names)
            run = sess.runner(outs, cancel)
            gfeeds = [{k: c[k] for k in front} for c in ref.cache]
            tm = time.perf_counter()
            for g, edits, _c in units[a:b]:
                vals: dict = {}
                by_kept: dict = {}
                order_g = np.argsort(scores[g.id], kind="stable")
                for s in levels:
                    kept = round_kept(g.channels, s, g.round_to(round_to)) if s > 0 else g.channels
                    if kept == g.channels:
                        vals[level_key(s)] = 0.0  # nothing removed: equals dense
                        if s > 0:
                            done += nb
                            skipped += nb
                        continue
                    if kept in by_kept:
                        vals[level_key(s)] = by_kept[kept]  # same channels removed as a previous level
                        done += nb
                        skipped += nb
                        continue
                    removed = np.sort(order_g[: g.channels - kept])
                    dead = groups.removed_elements({g.id: removed})
                    feed_w = {}
                    for e in edits:
                        key = (e.node, e.input)
                        arr = feed_w.get(key)
                        if arr is None:
                            arr = feed_w[key] = np.array(slot_dense[key], copy=True)
                        view = np.moveaxis(arr, e.axis, 0)
                        view[dead[e.emap]] = 0
                    acc = []
                    for f, d in zip(gfeeds, ref.dense_outs):
                        maybe_check(cancel)
                        for key, arr in feed_w.items():
                            f[slot_name[key]] = arr
                        acc.append(ref.metric.value(d, dict(zip(outs, run(f)))))
                        done += 1
                    for f in gfeeds:
                        for key in feed_w:
                            f.pop(slot_name[key], None)
                    by_kept[kept] = vals[level_key(s)] = float(np.mean(acc))
                    progress(f"one-shot {g.id}", done / max(1, total_runs))
                sens[g.id] = {level_key(s): vals[level_key(s)] for s in levels}
            stats.append({"groups": b - a, "nodes_share": round(float(m.mean()), 4),
                          "flops_share": round(float(costs[m].sum() / costs.sum()), 4),
                          "create_s": round(create_s, 4), "measure_s": round(time.perf_counter() - tm, 3)})
            del run
            sess.close()
            del sess
    progress("one-shot", 1.0)
    for g in prunable:  # a group without consumer layers (never the case for a prunable group): no change
        sens.setdefault(g.id, {level_key(s): 0.0 for s in levels})
    extras = {"sessions": n_sessions, "runs": total_runs - skipped, "runs_skipped": skipped, "batches": nb,
              "plan": [[units[a][0].id, units[b - 1][0].id, b - a] for a, b in ref.groups],
              "output_metrics": dict(ref.metric.kinds), "seconds_group_sessions": round(t_sessions, 3),
              "seconds_setup": round(ref.setup_s, 3),
              "calibration": {"create_s": round(ref.t_create, 4), "run_s": round(ref.t_run, 5)},
              "group_stats": stats}
    flat = ref.metric.flat_outputs(ref.dense_outs)
    if flat:
        extras["flat_outputs"] = {k: float(v) for k, v in flat.items()}
    return sens, ref.metric.label, extras
