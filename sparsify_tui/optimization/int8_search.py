"""Accuracy-controlled INT8: keep the most sensitive parts of the model FP32 until the metric fits the budget.

:func:`search_int8` (``sparsify-tui optimize PROJECT --name N --quantize --max-drop D``):

1. **Data and metric.** The sample data (``--data``, with labels under ``--labels``) or seeded synthetic batches,
   one item per batch. The FP32 model runs once on them: its outputs are the reference, and the metric is
   chosen from them (:func:`sparsify_tui.profiling.metrics.choose_metric`, reason recorded). The first
   ``calibration_size`` batches calibrate; every batch is evaluated.
2. **Full INT8** (static QDQ, per-channel, after ``quant_pre_process``; the engine's ``quantize_int8``): if
   its metric is within ``max_drop``, done. Pre-processing and calibration run once; every later trial reuses
   them (``reuse_dir``), so a trial costs one ``quantize_static`` graph rewrite plus the evaluation runs.
3. **Groups and ranking**, in the graph the engine quantizes (:meth:`Engine.int8_graph`: after
   ``quant_pre_process``, which folds BatchNormalization into Conv and inlines HardSwish as new
   HardSigmoid/Mul nodes: names from the original graph would miss those). Reverting a Conv/Gemm/MatMul alone leaves its input activation quantized (the node
   producing it still gets a Quantize/DequantizeLinear pair), so the unit reverted is a **group**: a prunable
   layer plus the quantizable nodes between it and the layers above it (:func:`int8_groups`). Its
   sensitivity is the layer's measured one-shot INT8 sensitivity (weight and input activation quantized, the
   rest FP32): the loss profile's when it is a one-shot profile with INT8, else measured now with the
   one-shot engine (:func:`sparsify_tui.profiling.loss_oneshot.one_shot_profile`, level 0 only, on up to
   ``ranking_batches`` batches). The **tail** (nodes below the last layers, e.g. a detector's Sigmoid) has no
   layer: its sensitivity is measured by one real trial with only the tail INT8, same one-shot metric.
4. **Bisection over the ranked list.** The first k is predicted from the ranking (:func:`predicted_k`:
   errors of independent groups roughly add, so reverting the top k leaves about the full-INT8 metric times
   the share of sensitivity not yet reverted); then k doubles until the metric fits (or, when the guess fits
   at once, k shrinks by 4× until it does not), and bisection between the last k over budget and the first
   within finds the fewest: a few trials, about log2 of the answer, not one per layer. It stops at the fewest
   groups within budget (the metric is taken as non-increasing in k). A tail of fewer than
   :data:`TAIL_TRIAL_NODES` nodes is ranked last without a trial.
5. **Speed.** Every trial the search touched, the FP32 model and full INT8 are timed together in a short
   interleaved timing (:func:`sparsify_tui.engine.timing.interleaved_times`: ``rounds`` rounds, one
   session at a time). The result is the **fastest trial within budget** (with ms per batch measured in the
   same rounds as FP32), not just the smallest exclusion list (:func:`choose_fastest`: a trial with more
   groups FP32 wins over the fewest-groups one only when it is faster by more than 3 % in every timing round,
   :func:`sparsify_tui.engine.timing.beats_every_round`). FP32 itself is within any budget, so it is a candidate
   too: a trial is chosen only when it beats FP32 the same way; otherwise the result says so (``status = "FP32 fastest within budget"``, ``chosen``
   None) and INT8 is left off, never a model slower than the original.

``quantize_static`` failures stop the search with ``ModelError`` and onnxruntime's reason. When no trial fits
(every group reverted is still over budget), the result says so (``status = "over budget"``, ``chosen``
None) and the caller leaves INT8 off.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from sparsify_tui.engine.run import REFERENCE, RunSpec
from sparsify_tui.engine.timing import BEAT_MARGIN, beats_every_round, round_medians
from sparsify_tui.engine.outputs import run_outputs
from sparsify_tui.formatting import plural
from sparsify_tui.optimization.record import Int8Group, Int8Search, Int8Trial
from sparsify_tui.progress import CancelToken, ProgressFn, maybe_check
from sparsify_tui.tempfiles import make_temp_dir
from sparsify_tui.settings import CALIBRATION_METHODS

#: ops that onnxruntime's QDQ quantizer never touches: they do not join a group (shape and control ops)
_NOT_QUANTIZED = frozenset({"Constant", "Shape", "Size", "Identity", "If", "Loop", "Scan", "ConstantOfShape",
                            "Range", "NonZero"})
#: a tail group of at least this many nodes is ranked by a real "tail only INT8" trial; a smaller one goes last
TAIL_TRIAL_NODES = 4
#: defaults of the search's short interleaved timing
TIMING = {"rounds": 3, "warmup": 2, "iterations": 12}


# ----------------------------------------------------------------------------------------------- groups


def int8_groups(model) -> List[Int8Group]:
    """The units the search reverts, in graph order (module docstring, step 3): one per prunable layer of
    ``model`` (an ``onnx.ModelProto`` with its Constant weights turned into initializers, as
    :func:`sparsify_tui.analysis.loading.load_model` returns it), holding the layer and every quantizable node
    that produces its data input without passing through another layer; then the ``tail`` group (nodes that
    feed no layer) when there is one. A node feeding several layers belongs to each of their groups."""
    from sparsify_tui.analysis.graph import node_id
    from sparsify_tui.analysis.layers import find_layers

    nodes = list(model.graph.node)
    ids = [node_id(n, i) for i, n in enumerate(nodes)]
    producer = {o: i for i, n in enumerate(nodes) for o in n.output}
    layers = find_layers(model)
    layer_idx = {r.node_index for r in layers}
    inits = {t.name for t in model.graph.initializer}
    claimed: set = set()
    groups: List[Int8Group] = []
    for r in layers:
        members = [r.node_index]
        stack = [nodes[r.node_index].input[r.data_input]]
        seen: set = set()
        while stack:
            t = stack.pop()
            i = producer.get(t)
            if i is None or i in seen or i in layer_idx or t in inits:
                continue
            seen.add(i)
            if nodes[i].op_type not in _NOT_QUANTIZED:
                members.append(i)
            stack.extend(x for x in nodes[i].input if x)
        claimed.update(members)
        groups.append(Int8Group(node_id=r.node_id, weight_name=r.weight_name,
                                nodes=[ids[i] for i in sorted(members)]))
    tail = [ids[i] for i, n in enumerate(nodes) if i not in claimed and n.op_type not in _NOT_QUANTIZED]
    if tail:
        groups.append(Int8Group(node_id=None, weight_name=None, nodes=tail))
    return groups


def predicted_k(ranked: Sequence[Int8Group], full_metric: float, max_drop: float, safety: float = 0.8) -> int:
    """First guess of how many of the ``ranked`` groups (most sensitive first) must be FP32: the smallest k with
    ``full_metric · (1 − S_k / S) ≤ safety · max_drop``, S_k the sum of the top k sensitivities and S the sum of
    all (unmeasured ones count as 0). At least 1, at most ``len(ranked)``; 1 when nothing is measured."""
    vals = [max(0.0, float(g.sensitivity)) if g.sensitivity is not None else 0.0 for g in ranked]
    total = sum(vals)
    if not ranked or total <= 0 or full_metric <= 0:
        return 1
    acc = 0.0
    for k, v in enumerate(vals, start=1):
        acc += v
        if full_metric * (1.0 - acc / total) <= safety * max_drop:
            return k
    return len(ranked)


def excluded_nodes(groups: Sequence[Int8Group], k: int) -> List[str]:
    """Node ids of the first ``k`` groups (rank order), each once, in first-seen order."""
    out, seen = [], set()
    for g in groups[:k]:
        for n in g.nodes:
            if n not in seen:
                seen.add(n)
                out.append(n)
    return out


# ------------------------------------------------------------------------------------------------- runs


def _ranking(model_path, groups, loss_profile, feeds, metric_choice, dims, engine, core_count, progress,
             cancel) -> tuple:
    """(sensitivity by layer node id, source text, metric label) for the layer groups. ``model_path``: the graph
    the engine quantizes (its node ids are the groups')."""
    if not any(g.weight_name for g in groups):
        return {}, "no prunable layer in the main graph: only the tail group", ""
    prof = loss_profile
    if prof is not None and prof.method == "one-shot" and any(l.int8_sensitivity is not None for l in prof.layers):
        ids = {g.node_id for g in groups}
        sens = {l.id: l.int8_sensitivity for l in prof.layers if l.int8_sensitivity is not None}
        if sum(1 for k in sens if k in ids) >= 0.8 * max(1, sum(1 for g in groups if g.weight_name)):
            return sens, f"loss profile {prof.name!r} (one-shot INT8 sensitivity)", prof.metric
    from sparsify_tui.profiling.loss_oneshot import one_shot_profile

    proxy = "nmse" if metric_choice.name in ("nmse", "max_abs") else ("auto" if metric_choice.user else "kl")
    prof = one_shot_profile(model_path, levels=[0.0], int8=True, feeds=list(feeds), metric=proxy, dims=dims,
                            core_count=core_count, engine=engine, name="int8 ranking", progress=progress,
                            cancel=cancel)
    sens = {l.id: l.int8_sensitivity for l in prof.layers}
    return sens, f"measured now: one-shot INT8 sensitivity on {plural(len(feeds), 'batch', 'batches')}", prof.metric


def _rank_groups(result: Int8Search, groups: List[Int8Group], graph, loss_profile, rank_feeds: Sequence[dict],
                 reference: Sequence[dict], choice, trial: Callable, *, dims: Optional[dict], engine: Any,
                 core_count: Optional[int], prog: ProgressFn, cancel: Optional[CancelToken]) -> None:
    """Step 3 of the module docstring: each group's INT8 sensitivity (:func:`_ranking`: the loss profile's one-shot
    INT8 sensitivity, else measured now on ``rank_feeds``) set on ``groups``, with ``result.ranking_source`` /
    ``ranking_metric``; the tail (nodes of no layer) measured with only itself INT8 (one ``trial``, not a
    candidate) unless it has fewer than :data:`TAIL_TRIAL_NODES` nodes (then ranked last); ``result.groups`` gets
    the groups most sensitive first, each with its ``rank``."""
    from sparsify_tui.profiling.metrics import OutputMetric

    prog("ranking layers by INT8 sensitivity", 0.2)

    def rprog(step, frac):
        prog(f"INT8 sensitivity: {step}", 0.2 + 0.2 * frac)

    sens, source, rmetric = _ranking(graph, groups, loss_profile, rank_feeds, choice, dims, engine,
                                     core_count, rprog, cancel)
    result.ranking_source, result.ranking_metric = source, rmetric
    for g in groups:
        if g.weight_name is not None:
            g.sensitivity = sens.get(g.node_id)
    tail = next((g for g in groups if g.weight_name is None), None)
    if tail is not None and len(tail.nodes) < TAIL_TRIAL_NODES:
        tail.sensitivity = None  # a few nodes: ranked last rather than paying a trial to rank them
    elif tail is not None:
        # the tail has no layer: measure it with only the tail INT8, in the ranking's metric
        others = [n for g in groups if g is not tail for n in g.nodes]
        tt = trial(0, others, "tail only INT8 (ranks the tail)", 0.4)
        kinds = {"kl+nmse": None, "kl": "kl", "nmse": "nmse"}
        out_names = list(reference[0])
        om = OutputMetric(out_names, [reference[0][n] for n in out_names], kinds.get(rmetric))
        tail.sensitivity = float(np.mean([om.value(r, o) for r, o in
                                          zip(reference[:len(rank_feeds)], tt.extra["outputs"])]))
        tt.within_budget = False  # a ranking measurement, not a candidate
        tt.note = "tail only INT8 (ranking measurement)"
    ranked = sorted(groups, key=lambda g: -(g.sensitivity if g.sensitivity is not None else -1.0))
    for i, g in enumerate(ranked):
        g.rank = i + 1
    result.groups = ranked


def _mark_reverted(result: Int8Search) -> None:
    """Each ranked group's ``reverted_in``: the first candidate trial that kept it FP32."""
    for t in result.trials:
        for g in result.groups[:t.groups]:
            if g.reverted_in is None and t.groups > 0 and t.note != "tail only INT8 (ranking measurement)":
                g.reverted_in = t.index


def _fewest_groups(trial: Callable, ranked: List[Int8Group], full_value: float, max_drop: float) -> bool:
    """Step 4 of the module docstring: the fewest top-ranked groups kept FP32 for the model to be within budget:
    a first guess from the ranking (:func:`predicted_k`), galloping up (×2) until a ``trial`` is within budget,
    down (÷4) when the guess fit at once, then bisection. Every trial is ``trial(k, excluded nodes, note, progress
    fraction)``; True when one was within budget."""
    n = len(ranked)
    # a first guess from the ranking, then galloping up (x2) and bisection, over the ranked list
    lo, hi = 0, None
    k = predicted_k(ranked, full_value, max_drop)
    while k <= n:
        t = trial(k, excluded_nodes(ranked, k), f"top {plural(k, 'group')} FP32", 0.45 + 0.3 * min(1, k / n))
        if t.within_budget:
            hi = k
            break
        lo = k
        if k == n:
            break
        k = min(n, k * 2)
    if hi is None:
        return False
    if hi > 1 and lo == 0:  # the guess fit at once: gallop down to find the fewest
        k = max(1, hi // 4)
        while k < hi:
            t = trial(k, excluded_nodes(ranked, k), f"top {plural(k, 'group')} FP32 (down)", 0.7)
            if t.within_budget:
                hi = k
                k = max(1, k // 4)
                if k == hi:
                    break
            else:
                lo = k
                break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t = trial(mid, excluded_nodes(ranked, mid), f"bisection: top {plural(mid, 'group')} FP32", 0.75)
        if t.within_budget:
            hi = mid
        else:
            lo = mid
    return True


def time_with_fp32(result: Any, ref_path: Path, trials: Sequence[Any], paths: Dict[int, Path],
                   feeds: Sequence[dict], tm: dict, *, core_count: Optional[int], engine: Any, on_step: Callable,
                   cancel: Optional[CancelToken], trial_engine: Optional[Callable] = None):
    """FP32 (``ref_path``) and ``trials`` (their files in ``paths`` by ``index``) timed together
    (:func:`~sparsify_tui.engine.timing.interleaved_times` on ``feeds``, ``tm``'s rounds, warm-up, iterations):
    each trial gets ``median_ms``, ``p90_ms``, ``round_ms`` (:func:`~sparsify_tui.engine.timing.round_medians`)
    and ``speedup`` (FP32 median / its median); ``result`` gets ``fp32_ms`` and ``fp32_round_ms``. FP32 runs on
    ``engine``, each trial on ``trial_engine(trial)`` (default ``engine`` too). The INT8 and budget searches'
    timing step. Returns FP32's :class:`~sparsify_tui.engine.timing.LatencyStats`."""
    from sparsify_tui.engine.timing import LatencyStats, interleaved_times

    engines = [engine] + [trial_engine(t) if trial_engine is not None else engine for t in trials]
    times = interleaved_times(engines, [str(ref_path)] + [str(paths[t.index]) for t in trials], feeds, core_count,
                              rounds=tm["rounds"], warmup=tm["warmup"], iterations=tm["iterations"],
                              cancel=cancel, on_step=on_step)
    fp32 = LatencyStats.from_times(times[0])
    result.fp32_ms = fp32.median
    result.fp32_round_ms = round_medians(times[0], tm["rounds"], tm["iterations"])
    for t, ts in zip(trials, times[1:]):
        st = LatencyStats.from_times(ts)
        t.median_ms, t.p90_ms = st.median, st.p90
        t.round_ms = round_medians(ts, tm["rounds"], tm["iterations"])
        t.speedup = fp32.median / st.median if st.median > 0 else None
    return fp32


def _time_and_choose(result: Int8Search, ref_path: Path, paths: Dict[int, Path], feeds: Sequence[dict], tm: dict, *,
                     core_count: Optional[int], engine: Any, label: str, prog: ProgressFn,
                     cancel: Optional[CancelToken]) -> None:
    """Step 5 of the module docstring: FP32 (``ref_path``) and every candidate trial timed together
    (:func:`~sparsify_tui.engine.timing.interleaved_times` on ``feeds``), each trial's median, p90, per-round
    medians and speedup recorded, then the choice (:func:`choose_fastest`) or why INT8 is left off, in
    ``result.chosen`` / ``status`` / ``warnings``."""
    cands = [t for t in result.trials if "ranking measurement" not in t.note]
    prog("timing FP32 and the candidates (interleaved)", 0.8)

    def tprog(done, total):
        prog("timing FP32 and the candidates (interleaved)", 0.8 + 0.19 * done / total)

    fp32 = time_with_fp32(result, ref_path, cands, paths, feeds, tm, core_count=core_count, engine=engine,
                          on_step=tprog, cancel=cancel)
    within = [t for t in cands if t.within_budget and t.median_ms is not None]
    if within:
        best = choose_fastest(within, result.fp32_round_ms)
        if best is None:
            fastest = min(within, key=lambda t: t.median_ms)
            result.status = "FP32 fastest within budget"
            result.warnings.append(f"no INT8 configuration within budget runs faster than FP32 on this server "
                                   f"(the fastest, {fastest.median_ms:.3g} ms, against FP32's {fp32.median:.3g} "
                                   "ms): INT8 is left off, since FP32 is within any budget")
        else:
            result.chosen = best.index
    else:
        best_t = min(cands, key=lambda t: t.metric_value)
        result.warnings.append(f"no INT8 configuration met the budget {result.max_drop:g} ({label}): the best, "
                               f"with {plural(best_t.groups, 'group')} FP32, measured {best_t.metric_value:.4g}; "
                               "INT8 is left off")


class _TrialRunner:
    """One INT8 trial of the search: ``runner(k, excluded, note, frac)`` quantizes the model with ``excluded`` nodes
    FP32 (the top ``k`` groups), scores it against the FP32 ``reference`` on ``feeds`` in the search's metric,
    appends the :class:`Int8Trial` to ``result.trials`` (its outputs in ``extra["outputs"]`` until the caller
    drops them) and its file to ``paths``; returns it."""

    def __init__(self, result: Int8Search, paths: Dict[int, Path], work: Path, src: Path, calib: Sequence[dict],
                 feeds: Sequence[dict], reference: Sequence[dict], choice, labels, *, engine: Any,
                 calibration_method: str, phase: Callable, prog: ProgressFn, cancel: Optional[CancelToken]) -> None:
        self.result, self.paths, self.work, self.src, self.calib, self.feeds = result, paths, work, src, calib, feeds
        self.reference, self.choice, self.labels, self.engine = reference, choice, labels, engine
        self.calibration_method, self.phase, self.prog, self.cancel = calibration_method, phase, prog, cancel

    def __call__(self, k: int, excluded: List[str], note: str, frac: float) -> Int8Trial:
        from sparsify_tui.profiling.metrics import evaluate

        result = self.result
        idx = len(result.trials)
        self.prog(f"trial {idx + 1}: {note}", frac)
        path = self.work / f"trial_{idx}.onnx"
        t0 = time.perf_counter()
        q = self.engine.quantize_int8(self.src, path, self.calib, per_channel=True, excluded_nodes=excluded,
                                      cancel=self.cancel, calibration_method=self.calibration_method,
                                      reuse_dir=self.work / "reuse")
        for w in q.warnings:
            if w not in result.warnings and not w.startswith("excluded nodes not in"):
                result.warnings.append(w)
        t1 = time.perf_counter()
        outs = run_outputs(path, self.feeds, cancel=self.cancel, engine=self.engine)
        ev = evaluate(self.reference, outs, self.choice, self.labels)
        t = Int8Trial(index=idx, groups=k, excluded_count=len(excluded), metric_value=ev.drop,
                      within_budget=ev.within(result.max_drop), score=ev.score, nmse=ev.nmse, max_abs=ev.max_abs, kl=ev.kl,
                      top1_agreement=ev.top1_agreement, accuracy=ev.accuracy, quantize_s=round(t1 - t0, 3),
                      eval_s=round(time.perf_counter() - t1, 3), note=note)
        t.extra["outputs"] = outs  # dropped before the search returns
        result.trials.append(t)
        self.paths[idx] = path
        self.phase("trials")
        return t


def _reference_set(src: Path, ref_path: Path, *, data, labels_key: Optional[str], dims: Optional[dict],
                   calibration_size: int, eval_batches: int, metric: Optional[str], engine: Any, prog: ProgressFn,
                   cancel: Optional[CancelToken]):
    """Step 1 of the module docstring: the items (``data``, else ``calibration_size`` synthetic batches; at most
    ``eval_batches`` evaluated), the FP32 model's (``ref_path``) outputs on them and the metric chosen from those
    outputs (labels checked against the class output). Returns ``(samples, reference outputs, metric choice)``."""
    from sparsify_tui.analysis.labels import sample_set
    from sparsify_tui.profiling.metrics import choose_metric

    prog("loading data", 0.0)
    n_eval = max(int(eval_batches), int(calibration_size)) if data else int(calibration_size)
    samples = sample_set(src, data=data, labels_key=labels_key, dims=dims, batch_size=1,
                         synthetic_batches=int(calibration_size), max_batches=n_eval, metric=metric)
    maybe_check(cancel)
    prog("FP32 reference", 0.02)
    reference = run_outputs(ref_path, samples.feeds, cancel=cancel, engine=engine)
    choice = choose_metric(reference[0], metric, labelled=samples.labels is not None)
    if samples.labels is not None and choice.class_output is not None:
        samples.check_classes(int(np.shape(reference[0][choice.class_output])[-1]))
    return samples, reference, choice


def search_int8(
    model_path,
    run: RunSpec = REFERENCE,
    *,
    max_drop: float,
    reference_path=None,
    metric: Optional[str] = None,
    data=None,
    labels_key: Optional[str] = None,
    dims: Optional[dict] = None,
    calibration_method: str = "minmax",
    calibration_size: int = 16,
    eval_batches: int = 64,
    ranking_batches: int = 4,
    loss_profile=None,
    timing: Optional[dict] = None,
    keep_path=None,
    progress: Optional[ProgressFn] = None,
    cancel: Optional[CancelToken] = None,
) -> Int8Search:
    """Find the fastest INT8 configuration of ``model_path`` whose metric is within ``max_drop`` (module
    docstring for every step).

    Args:
        reference_path: the FP32 model the metric compares with and the timing divides by (default
            ``model_path``; the original model when ``model_path`` is its pruned copy, so pruning counts
            against the budget as it does in apply's output difference).
        max_drop: the budget, in the metric's units (:data:`sparsify_tui.profiling.metrics.BUDGET_UNITS`).
        metric: one of :data:`sparsify_tui.profiling.metrics.METRICS`, a user metric (``/path/FILE.py:FUNCTION``,
            :mod:`sparsify_tui.profiling.user_metric`), or None for the default from the outputs.
        data / labels_key: sample data (``.npz``/``.npy``) and the key of its labels (default ``labels`` when
            present); None: ``calibration_size`` synthetic batches.
        dims: symbolic dims and scalar inputs (``{"x:2": 640}``).
        calibration_method: "minmax", "entropy" or "percentile"; ``calibration_size``: calibration batches
            (1 item each); ``eval_batches``: at most this many batches are evaluated per trial.
        ranking_batches: batches of the one-shot sensitivity measured now (when ``loss_profile`` has none).
        loss_profile: a typed :class:`~sparsify_tui.profiling.loss.LossProfile` whose one-shot INT8
            sensitivity ranks the layers (None or without it: measured now).
        run: the runtime searched (:class:`~sparsify_tui.engine.run.RunSpec`): its engine quantizes (with its own
            INT8 activation type), runs and times the trials in its precision, with the run's cores; the FP32
            reference outputs come from the reference runtime (onnxruntime fp32), so a lower precision counts
            against the budget, and FP32 is timed on the run's runtime. ``timing``: overrides of :data:`TIMING`
            (``rounds``, ``warmup``, ``iterations``).
        keep_path: where to copy the INT8 model of :func:`kept_trial` (the chosen trial, else the fastest within
            budget; None: not kept; nothing is written when no trial is within budget), so a caller that times
            it against other candidates (the budget search) uses the model the search measured.

    Returns: :class:`~sparsify_tui.optimization.record.Int8Search`. Raises ``ModelError`` (quantize_static
    failed: one line with onnxruntime's reason; or the model cannot run), ``SampleDataError`` /
    ``DimensionError`` (data, labels), ``SparsifyError`` (bad budget or method), ``JobCanceled``.
    """
    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.engine import get_engine
    from sparsify_tui.profiling.metrics import reference_evaluation

    t_start = time.perf_counter()
    from sparsify_tui import settings

    max_drop = settings.max_drop(max_drop)
    calibration_method = settings.calibration_method(calibration_method)
    engine, core_count = run.runtime(), run.core_count
    prog = progress or (lambda step, frac: None)
    tm = {**TIMING, **(timing or {})}
    src = Path(model_path)
    ref_path = Path(reference_path) if reference_path else src

    phases: Dict[str, float] = {}
    phase = phase_timer(phases)

    samples, reference, choice = _reference_set(src, ref_path, data=data, labels_key=labels_key, dims=dims,
                                                calibration_size=calibration_size, eval_batches=eval_batches,
                                                metric=metric, engine=get_engine(REFERENCE.engine, REFERENCE.precision),
                                                prog=prog, cancel=cancel)
    feeds, labels = samples.feeds, samples.labels
    calib = feeds[: max(1, int(calibration_size))]
    ref_eval = reference_evaluation(reference, choice, labels)
    phase("data_and_fp32_reference")
    result = Int8Search(max_drop=max_drop, metric=choice.name, metric_reason=choice.reason,
                        budget_units=choice.budget_units, labelled=choice.labelled,
                        data=str(data) if data else None, labels_key=samples.labels_key,
                        eval_items=samples.items, calibration_method=calibration_method,
                        calibration_size=len(calib), accuracy_fp32=ref_eval.accuracy_reference,
                        timing={**tm, "cores": core_count, "engine": run.engine, "precision": run.precision},
                        user_metric=choice.user_metric, score_fp32=ref_eval.score)
    work = make_temp_dir("int8search")  # named after this pid: removed at start-up if we are killed
    paths: Dict[int, Path] = {}
    try:
        reuse = work / "reuse"
        # groups, names and ranking live in the graph the engine quantizes (after its pre-processing)
        graph = engine.int8_graph(src, reuse)
        model = load_model(graph)
        groups = int8_groups(model)
        del model
        phase("preprocess_and_groups")

        trial = _TrialRunner(result, paths, work, src, calib, feeds, reference, choice, labels, engine=engine,
                             calibration_method=calibration_method, phase=phase, prog=prog, cancel=cancel)

        full = trial(0, [], "full INT8", 0.05)
        if full.within_budget:
            result.status = "full INT8 within budget"
        else:
            _rank_groups(result, groups, graph, loss_profile, feeds[: max(1, int(ranking_batches))], reference,
                         choice, trial, dims=dims, engine=engine, core_count=core_count, prog=prog, cancel=cancel)
            phase("ranking")
            found = _fewest_groups(trial, result.groups, full.metric_value, max_drop)
            result.status = "within budget" if found else "over budget"
            _mark_reverted(result)
        for t in result.trials:
            t.extra.pop("outputs", None)
        # timing: FP32 + every candidate trial (not the ranking measurement), then the choice
        _time_and_choose(result, ref_path, paths, feeds[:1], tm, core_count=core_count, engine=engine,
                         label=choice.label, prog=prog, cancel=cancel)
        phase("timing")
        kept = kept_trial(result)
        if keep_path is not None and kept is not None:
            shutil.copyfile(paths[kept.index], keep_path)
        result.seconds = round(time.perf_counter() - t_start, 3)
        result.timing["phases_s"] = phases
        prog("done", 1.0)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def phase_timer(phases: Dict[str, float]):
    """``phase(name)``: adds the wall seconds since the previous call (or since this one) to ``phases[name]`` (the
    searches' ``timing["phases_s"]``)."""
    last = [time.perf_counter()]

    def phase(name: str) -> None:
        now = time.perf_counter()
        phases[name] = round(phases.get(name, 0.0) + now - last[0], 3)
        last[0] = now
    return phase


def kept_trial(search: Int8Search) -> Optional[Int8Trial]:
    """The trial a caller comparing INT8 with other candidates keeps: the chosen one, else (FP32 won the search's
    own timing) the fastest timed trial within budget; None when no trial is within budget."""
    if search.chosen_trial is not None:
        return search.chosen_trial
    within = [t for t in search.trials if t.within_budget and t.median_ms is not None]
    return min(within, key=lambda t: (t.median_ms, t.index)) if within else None


def choose_fastest(within: Sequence[Any], fp32_rounds_ms: Optional[Sequence[float]] = None,
                   margin: float = BEAT_MARGIN, prefer=None) -> Optional[Any]:
    """The trial to keep among ``within`` (trials within budget, timed: ``median_ms``, ``round_ms``, ``index``):
    start from the preferred one (``prefer``, a sort key, smallest first; default the fewest groups FP32); another
    replaces it only when it is faster in every timing round by more than ``margin``
    (:func:`sparsify_tui.engine.timing.beats_every_round`: a short timing on a shared machine moves by a few percent
    between identical models). ``fp32_rounds_ms``: the FP32 model's median in each of the same rounds; FP32 is
    within any budget, so the pick is kept only when it beats FP32 the same way, else None (keep FP32). The budget
    search calls a trial faster by the same rule (:mod:`sparsify_tui.optimization.budget_search`)."""
    base = min(within, key=prefer or (lambda t: (t.groups, t.index)))
    best = base
    for t in sorted(within, key=lambda t: t.median_ms):
        if t is not base and t.median_ms < best.median_ms and beats_every_round(t.round_ms, base.round_ms, margin):
            best = t
    if fp32_rounds_ms is not None and not beats_every_round(best.round_ms, fp32_rounds_ms, margin):
        return None
    return best


# ------------------------------------------------------------------------------------------------ views


def layer_states(quantization, layers) -> List[dict]:
    """Per layer of an optimization: ``{"node_id", "weight_name", "sensitivity", "state": "FP32"|"INT8",
    "why"}`` from its ``quantization`` (:class:`~sparsify_tui.optimization.record.QuantizationSettings`) and
    ``layers`` (rows), in the order of the search's ranking when there is one, else graph order."""
    excluded = set(quantization.excluded or [])
    search = quantization.search
    by_id = {g.node_id: g for g in (search.groups if search else []) if g.node_id}
    by_weight = {g.weight_name: g for g in (search.groups if search else []) if g.weight_name}
    chosen = search.chosen_trial if search else None
    rows = []
    for l in layers:
        g = by_id.get(l.node_id) or by_weight.get(l.weight_name)
        sens = g.sensitivity if g is not None and g.sensitivity is not None else l.int8_sensitivity
        fp32 = l.node_id in excluded
        if not quantization.enabled:
            why = "quantization off"
        elif fp32 and g is not None and chosen is not None and g.rank <= chosen.groups:
            why = (f"rank {g.rank} of {len(search.groups)} by INT8 sensitivity: reverted to fit the budget "
                   f"(trial {chosen.index})")
        elif fp32:
            why = "kept FP32 (INT8-sensitivity outlier or your choice)"
        elif g is not None and search is not None and search.chosen is not None:
            why = f"rank {g.rank}: INT8 fits the budget" if g.rank else "INT8 fits the budget"
        else:
            why = "INT8"
        rows.append({"node_id": l.node_id, "weight_name": l.weight_name, "sensitivity": sens,
                     "state": "FP32" if fp32 or not quantization.enabled else "INT8", "why": why,
                     "rank": g.rank if g is not None else None})
    if search and search.groups:
        rows.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0))
    return rows


__all__ = ["CALIBRATION_METHODS", "TIMING", "TAIL_TRIAL_NODES", "int8_groups", "predicted_k", "excluded_nodes", "search_int8", "choose_fastest", "time_with_fp32", "kept_trial", "phase_timer",
           "layer_states"]
