"""Budget search: the fastest *measured* model whose held-out metric stays within an accuracy budget, over the
runtime (engine and precision), the channel target speedup and INT8; FP32 on onnxruntime (the deployment the user has
today, the reference of every speedup) is always a candidate, so the search never returns a slower model.

:func:`search_budget` (``sparsify-tui optimize PROJECT --name N --structure channel --max-drop D --data F.npz``):

1. **Data, split, metric.** The items of ``data`` (one per batch) are split in file order as apply splits them
   (:func:`sparsify_tui.analysis.labels.split_items`): the first ``calibration_items`` (default half the items, at
   most 64) fit the reconstruction (and calibrate INT8), **every other item** scores the trials. The two never
   overlap and are named in the result (``items`` / ``held_out``); a file too small to hold both is refused. The
   FP32 model runs once on the held-out items on the reference runtime (onnxruntime fp32): its outputs are the
   reference of every trial on every runtime (a lower precision counts against the budget like any other change),
   and the metric is chosen from them (:func:`sparsify_tui.profiling.metrics.choose_metric`, reason recorded; with
   labels, top-1 accuracy against them).
   **Runtimes** (``runs``, default every installed engine and every precision this CPU runs): the unthinned model is
   scored on each and timed on each, interleaved with the reference; a runtime over budget, or slower than
   :data:`SCREEN_KEEP` × the fastest, is dropped with its reason (``runtimes``), every other one is **kept** and its
   unthinned model is a trial.
2. **Trials over the target speedup.** A trial asks the channel allocation of the optimization record
   (:meth:`~sparsify_tui.optimization.structures.channel.ChannelPruning.allocate_record`: its loss curves and time
   model) for ``target``× estimated speedup and writes that model as apply writes it (the structure's
   :meth:`~sparsify_tui.optimization.structures.channel.ChannelPruning.apply_model`: thinned with the record's
   channel importance, every consumer of a thinned group refit on the calibration items,
   :func:`sparsify_tui.engine.channel_prune.thin_and_reconstruct`), so the model the search measured is the model
   apply writes; then scores it on the held-out items (:func:`sparsify_tui.profiling.metrics.evaluate`) on the
   reference runtime, and, within budget there, on every other kept runtime (a trial of its own, ``model_of``). The
   targets are a short ladder then a bisection (:func:`next_target`): from :data:`START` up by ×:data:`STEP` while
   within budget (capped at the speedup the caps allow), then between the last target within budget and the first
   over it, in log space, until they are within a factor :data:`RESOLUTION` or ``max_trials`` trials were made. The
   metric is taken as non-decreasing in the target; a trial whose allocation equals an earlier one is not rebuilt.
3. **INT8** (``quantize``): the INT8 search (:func:`sparsify_tui.optimization.int8_search.search_int8`, the
   original model as the reference, so thinning counts against the same budget) runs on the best thinned
   candidates (:func:`int8_sources`: the highest target within budget, the highest with at least half the budget
   left, and the unthinned model), on each kept engine with its own INT8 activation type; the configuration it
   chose is scored on the held-out items like any trial. A model whose MatMul/Gemm weights carry
   :data:`DYNAMIC_MIN_SHARE` of its MACs (a transformer) also gets **dynamic INT8** trials (weights per channel,
   activations quantized at run time: no calibrated range to clip).
4. **Speed.** FP32 on the reference runtime and every trial on its kept runtime are timed together
   (:func:`sparsify_tui.engine.timing.interleaved_times`: ``rounds`` rounds, one live session at a time, on a
   held-out item). The result is the **fastest measured trial within budget** (lowest median) that beats FP32 by more
   than :data:`~sparsify_tui.engine.timing.BEAT_MARGIN` **in every round**, paired (:func:`choose`, with
   :func:`sparsify_tui.engine.timing.beats_every_round`, the INT8 search's rule too); INT8 must beat its own model
   before INT8 the same way, or that model is kept. Otherwise the result says so (``chosen`` None): FP32 is within
   any budget, so the search never returns a model slower than the original.

The reconstruction's normal equations, the thinning and the metrics are the engine's and the profiling
package's: this module only chooses what to try and what to keep.
"""

from __future__ import annotations

import copy
import math
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from sparsify_tui.engine.run import REFERENCE, RunSpec
from sparsify_tui.engine.timing import BEAT_MARGIN, beats_every_round
from sparsify_tui.errors import SampleDataError
from sparsify_tui.optimization.record import BudgetSearch, BudgetTrial, Optimization
from sparsify_tui.progress import CancelToken, ProgressFn, maybe_check
from sparsify_tui.tempfiles import make_temp_dir

#: the first target speedup tried (estimated, onnxruntime FP32)
START = 1.5
#: the ladder's factor between targets while they stay within budget
STEP = 1.5
#: the bisection stops when the last target within budget and the first over it are within this factor
RESOLUTION = 1.08
#: the smallest target worth a trial (below it the thinned model is within the timing's noise of FP32)
MIN_TARGET = 1.05
#: thinned trials at most (the INT8 trials come on top)
MAX_TRIALS = 7
#: defaults of the final interleaved timing (FP32 and every trial)
TIMING = {"rounds": 3, "warmup": 2, "iterations": 24}
#: a runtime whose unthinned model is slower than this multiple of the fastest runtime's is not searched further
SCREEN_KEEP = 1.3
#: dynamic INT8 is tried when MatMul/Gemm weights carry at least this share of the MACs
DYNAMIC_MIN_SHARE = 0.25

FP32_FASTEST = "FP32 fastest within budget"
ONLY_FP32 = "only FP32 within budget"
WITHIN = "within budget"


# ------------------------------------------------------------------------------------------------ pure rules


def next_target(tried: Sequence[tuple], reachable: Optional[float], *, start: float = START, step: float = STEP,
                resolution: float = RESOLUTION) -> Optional[float]:
    """The next target speedup to try, or None when the search is done (module docstring, step 2).

    ``tried``: ``(target, within_budget)`` of the trials so far, in order; ``reachable``: the highest estimated
    speedup the allocation can reach (None: unbounded). Up by ``step`` from ``start`` while every trial was within
    budget; once one was over, the geometric midpoint of the highest target within budget (1.0, FP32, when none)
    and the lowest over it, until the two are within ``resolution`` of each other."""
    cap = float(reachable) if reachable and reachable > 1.0 else math.inf
    if not tried:
        t = min(start, cap)
        return t if t >= MIN_TARGET else None
    ok = [t for t, w in tried if w]
    over = [t for t, w in tried if not w]
    lo = max(ok, default=1.0)
    hi = min((t for t in over if t > lo), default=None)
    if hi is None:
        if lo >= cap * (1 - 1e-6):
            return None
        t = min(lo * step, cap)
    else:
        if hi / lo <= resolution:
            return None
        t = math.sqrt(lo * hi)
    if t < MIN_TARGET or any(abs(t - x) <= 1e-6 * t for x, _ in tried):
        return None
    return t


def check_split(items: int, calibration_items: Optional[int] = None) -> tuple:
    """``(calibration count, held-out count)`` of a data set of ``items`` items, as
    :func:`sparsify_tui.analysis.labels.split_items` splits it (the first ``calibration_items``, default half the
    items and at most :data:`~sparsify_tui.analysis.labels.DEFAULT_CALIBRATION_ITEMS`; the rest held out). Raises
    ``SampleDataError`` when no item would be held out: the search scores on items it did not fit."""
    from sparsify_tui.analysis.labels import DEFAULT_CALIBRATION_ITEMS

    if calibration_items is None:
        n_cal = max(1, min(DEFAULT_CALIBRATION_ITEMS, items // 2))
    else:
        n_cal = int(calibration_items)
    if n_cal < 1 or items - n_cal < 1:
        raise SampleDataError(f"the data has {items} item(s): the budget search needs calibration items and at "
                              f"least one other item to score (give more items or a smaller --calibration-size)")
    return n_cal, items - n_cal


def item_range(first_last: Sequence[int]) -> str:
    """``"64-191"`` from ``[64, 191]`` (0-based, inclusive item indices, :class:`~sparsify_tui.analysis.labels.
    ItemSplit`'s), ``"7"`` for one item."""
    first, last = int(first_last[0]), int(first_last[1])
    return f"{first}" if first == last else f"{first}-{last}"


def int8_sources(trials: Sequence[BudgetTrial], max_drop: float) -> List[Optional[int]]:
    """Which models the INT8 search runs on (module docstring, step 3): indexes of thinned trials within budget,
    the highest target first and the highest whose metric leaves at least half the budget to INT8, then None (the
    unthinned model). Each once."""
    within = sorted((t for t in trials if t.within_budget and not t.quantized), key=lambda t: -t.target)
    out: List[Optional[int]] = []
    if within:
        out.append(within[0].index)
        roomy = next((t for t in within if t.metric_value <= 0.5 * max_drop), None)
        if roomy is not None and roomy.index not in out:
            out.append(roomy.index)
    out.append(None)
    return out


def choose(trials: Sequence[BudgetTrial], fp32_rounds_ms: Sequence[float], margin: float = BEAT_MARGIN
           ) -> Optional[BudgetTrial]:
    """The trial to keep (module docstring, step 4): among the timed trials within budget, fastest median first,
    the first that beats FP32 in every round (:func:`beats_every_round`); None when none does (keep FP32). INT8 must
    pay for itself: a quantized trial that does not beat its own model before INT8 on the same runtime
    (:func:`unquantized_of`) in every round gives way to that model, when it is within budget and beats FP32 too."""
    within = sorted((t for t in trials if t.within_budget and t.median_ms is not None),
                    key=lambda t: (t.median_ms, t.metric_value, t.index))
    best = next((t for t in within if beats_every_round(t.round_ms, fp32_rounds_ms, margin)), None)
    plain = unquantized_of(best, within) if best is not None and best.quantized else None
    if plain is not None and beats_every_round(plain.round_ms, fp32_rounds_ms, margin) \
            and not beats_every_round(best.round_ms, plain.round_ms, margin):
        return plain
    return best


def unquantized_of(trial: BudgetTrial, trials: Sequence[BudgetTrial]) -> Optional[BudgetTrial]:
    """The trial among ``trials`` that runs ``trial``'s model before INT8 on the same runtime (the thinned trial it
    quantized, or its copy on that runtime; the unthinned model on that runtime for INT8 of the unthinned model), or
    None (the unthinned model on the reference runtime is FP32 itself, not a trial)."""
    for t in trials:
        if t.quantized or t.runtime != trial.runtime:
            continue
        if trial.source is None and t.target <= 1.0 and t.model_of is None and t.source is None:
            return t
        if trial.source is not None and trial.source in (t.index, t.model_of):
            return t
    return None


# ------------------------------------------------------------------------------------------------ allocation


def allocation(rec: Optimization, target: float) -> Optimization:
    """A copy of the channel optimization ``rec`` evaluated at ``target``× estimated speedup (its overrides, caps
    and curves kept): its rows hold the per-group ratios, its estimates the estimated speedup."""
    from sparsify_tui.optimization.core import change_settings

    return change_settings(copy.deepcopy(rec), target="speedup", target_speedup=float(target))


def _ratios(rec: Optimization) -> Dict[str, float]:
    from sparsify_tui.optimization.core import layer_sparsities

    return {k: round(v, 6) for k, v in layer_sparsities(rec).items()}


# ------------------------------------------------------------------------------------------------ the search


class _Runtimes:
    """The runtimes a search scores and times on: ``reference`` (onnxruntime fp32, whose FP32 model is the reference
    of every speedup and whose outputs the reference of every metric), ``kept`` (the candidates still searched, the
    screening's survivors, as engines bound to a precision) and ``core_count``."""

    def __init__(self, runs: Sequence[RunSpec]):
        from sparsify_tui.engine import get_engine

        self.reference = get_engine(REFERENCE.engine, REFERENCE.precision)
        self.core_count = runs[0].core_count if runs else None
        self.kept: list = []
        #: (engine, precision) -> the unthinned model's median ms in the screening (empty without one)
        self.median: Dict[tuple, float] = {}
        for r in [REFERENCE, *runs]:
            e = r.runtime()
            if all((e.name, e.precision) != (k.name, k.precision) for k in self.kept):
                self.kept.append(e)

    def of(self, trial: BudgetTrial):
        """The engine a trial runs on."""
        return next(e for e in self.kept + [self.reference] if (e.name, e.precision) == trial.runtime)

    @property
    def searched(self) -> bool:
        """More than the reference runtime is searched."""
        return len(self.kept) > 1 or (self.kept[0].name, self.kept[0].precision) != (REFERENCE.engine,
                                                                                          REFERENCE.precision)

    def extra(self) -> list:
        """The kept runtimes other than the reference."""
        return [e for e in self.kept if (e.name, e.precision) != (REFERENCE.engine, REFERENCE.precision)]

    def has_reference(self) -> bool:
        return any((e.name, e.precision) == (REFERENCE.engine, REFERENCE.precision) for e in self.kept)


def _on(engine, **fields) -> BudgetTrial:
    """A trial on ``engine``'s runtime (its engine and precision recorded off the reference runtime only, so a
    search of onnxruntime fp32 alone writes what it always wrote)."""
    t = BudgetTrial(**fields)
    if (engine.name, engine.precision) != (REFERENCE.engine, REFERENCE.precision):
        t.engine, t.precision = engine.name, engine.precision
    return t


def _screen_runtimes(result: BudgetSearch, rt: _Runtimes, src: Path, feeds: Sequence[dict], tm: dict, score: Callable,
                     prog: ProgressFn, cancel: Optional[CancelToken]) -> None:
    """Step 1 of the module docstring: the unthinned model on every candidate runtime, scored on the held-out items
    (a lower precision moves the metric) and timed together with the reference (interleaved, one live session at a
    time); a runtime over budget or slower than :data:`SCREEN_KEEP` × the fastest within budget is dropped (with its
    reason), every other one is kept and its unthinned model becomes a trial. ``result.runtimes`` records all."""
    from sparsify_tui.engine.timing import LatencyStats, interleaved_times
    from sparsify_tui.errors import ModelError

    rows, engines = [], []
    for e in rt.kept:
        row = {"engine": e.name, "precision": e.precision, "label": e.label, "median_ms": None, "speedup": None,
               "metric_value": 0.0, "kept": False, "note": ""}
        if (e.name, e.precision) != (REFERENCE.engine, REFERENCE.precision):
            t = _on(e, index=-1, note="runtime screening")
            try:
                score(t, src, e)
            except ModelError as err:
                row["note"] = f"cannot run the model: {err}"
                rows.append(row)
                continue
            row["metric_value"] = t.metric_value
            if not t.within_budget:
                row["note"] = f"over budget on the unthinned model ({t.metric_value:.4g} > {result.max_drop:g})"
                rows.append(row)
                continue
        rows.append(row)
        engines.append(e)
    prog("timing the runtimes on the unthinned model (interleaved)", 0.04)
    times = interleaved_times(engines, [str(src)] * len(engines), feeds, rt.core_count, rounds=tm["rounds"],
                              warmup=tm["warmup"], iterations=tm["iterations"], cancel=cancel)
    med = rt.median = {(e.name, e.precision): LatencyStats.from_times(ts).median for e, ts in zip(engines, times)}
    best = min(med.values())
    ref_ms = med[(REFERENCE.engine, REFERENCE.precision)]
    kept = []
    for row in rows:
        key = (row["engine"], row["precision"])
        if key not in med:
            continue
        row["median_ms"], row["speedup"] = med[key], ref_ms / med[key]
        if med[key] <= SCREEN_KEEP * best:
            row["kept"] = True
            kept.append(next(e for e in engines if (e.name, e.precision) == key))
        else:
            row["note"] = f"{med[key] / best:.2f}× the fastest runtime on the unthinned model: dropped"
    rt.kept = kept
    result.runtimes = rows
    for row in rows:
        if not row["kept"]:
            result.warnings.append(f"{row['label']} not searched: {row['note']}")


def _thinned_trials(result: BudgetSearch, rec: Optimization, src: Path, calib: Sequence[dict],
                    paths: Dict[int, Path], work: Path, *, max_trials: int, dims: Optional[dict], rt: _Runtimes,
                    score: Callable, prog: ProgressFn, cancel: Optional[CancelToken]) -> None:
    """Step 2 of the module docstring: the thinned trials over the target speedup (:func:`next_target`), each
    allocated (:func:`allocation`), built (:func:`build_thinned`: thinned, reconstructed on ``calib``) into ``work``
    and scored on the held-out items (``score``) on the reference runtime (its verdict drives the targets), then on
    every other kept runtime as a trial of its own (``model_of``); appended to ``result.trials``, their files in
    ``paths``. A target whose rounded allocation repeats an earlier one is not rebuilt."""
    top = allocation(rec, 1e6)
    result.reachable_speedup = top.estimates.max_reachable if top.estimates is not None else None
    del top
    seen: Dict[tuple, int] = {}
    tried: List[tuple] = []
    n_max = max(1, int(max_trials))
    built = 0
    while built < n_max and len(tried) < 4 * n_max:  # repeats cost nothing but are bounded too
        target = next_target(tried, result.reachable_speedup)
        if target is None:
            break
        maybe_check(cancel)
        alloc = allocation(rec, target)
        ratios = _ratios(alloc)
        key = tuple(sorted(ratios.items()))
        frac = 0.05 + 0.6 * built / n_max
        if not ratios:
            tried.append((target, True))  # nothing to thin at this target: the unthinned model, within budget
            continue
        if key in seen:  # rounding gave the same channels as an earlier target: same model, same verdict
            same = result.trials[seen[key]]
            tried.append((target, same.within_budget))
            continue
        idx = len(result.trials)
        t = BudgetTrial(index=idx, target=float(target), note="ladder" if all(w for _, w in tried)
                        else "bisection")
        est = alloc.estimates
        t.est_speedup = getattr(est, "ort_speedup_fp32", None)
        t.groups_thinned = int(getattr(est, "groups_thinned", 0) or 0)
        t.kept_channels = int(getattr(est, "kept_channels", 0) or 0)
        t.channels = int(getattr(est, "channels", 0) or 0)

        def tprog(step, f, _i=idx, _f=frac):
            prog(f"trial {_i + 1} ({target:.2f}× target): {step}", _f + 0.6 / n_max * f)

        t0 = time.perf_counter()
        path = work / f"trial_{idx}.onnx"
        rep = build_thinned(src, path, ratios, alloc.settings, calib, dims=dims, engine=rt.reference,
                            progress=tprog, cancel=cancel)
        t.macs_reduction, t.importance = rep["macs_reduction"], rep["importance"]
        t.reconstruction = rep["reconstruction"]
        tprog("scoring the held-out items", 0.95)
        score(t, path, rt.reference)
        t.seconds = round(time.perf_counter() - t0, 3)
        result.trials.append(t)
        paths[idx] = path
        seen[key] = idx
        tried.append((target, t.within_budget))
        built += 1
        for e in rt.extra() if t.within_budget else ():  # over budget in FP32: not worth another runtime's time
            other = _on(e, **{f: getattr(t, f) for f in _MODEL_FIELDS}, index=len(result.trials), model_of=idx,
                        note=f"trial {idx} on {e.label}")
            score(other, path, e)
            result.trials.append(other)
            paths[other.index] = path


#: the fields of a trial that describe its model (what a copy of it on another runtime keeps)
_MODEL_FIELDS = ("target", "quantized", "source", "fp32_groups", "excluded_count", "est_speedup", "groups_thinned",
                 "kept_channels", "channels", "macs_reduction", "importance", "reconstruction", "int8_mode")


def _time_and_choose(result: BudgetSearch, src: Path, paths: Dict[int, Path], feeds: Sequence[dict], tm: dict, *,
                     rt: _Runtimes, keep_dir, label: str, prog: ProgressFn, cancel: Optional[CancelToken]) -> None:
    """Step 4 of the module docstring: FP32 on the reference runtime and every built trial on a kept runtime, each
    on its own runtime, timed together (:func:`~sparsify_tui.engine.timing.interleaved_times` on ``feeds``,
    ``tm``'s rounds), each trial's median, p90, per-round medians and speedup recorded, then the choice
    (:func:`choose`) or why FP32 is kept, in ``result.status`` / ``chosen`` / ``warnings``; the chosen model is copied
    to ``keep_dir/chosen.onnx``."""
    from sparsify_tui.optimization.int8_search import time_with_fp32

    prog("timing FP32 and the trials (interleaved)", 0.85)
    kept = {(e.name, e.precision) for e in rt.kept}
    order = [t for t in result.trials if t.index in paths and t.runtime in kept]

    def step_prog(done, total):
        prog("timing FP32 and the trials (interleaved)", 0.85 + 0.14 * done / total)

    fp32 = time_with_fp32(result, src, order, paths, feeds, tm, core_count=rt.core_count, engine=rt.reference,
                          on_step=step_prog, cancel=cancel, trial_engine=rt.of)
    for t in result.trials:
        if t.index in paths and t.runtime not in kept:
            t.note += " (not timed: the screening dropped its runtime)"
    within = [t for t in order if t.within_budget and t.median_ms is not None]
    if not within:
        result.status = ONLY_FP32
        best_t = min(result.trials, key=lambda t: t.metric_value, default=None)
        result.warnings.append(
            f"no thinned model met the budget {result.max_drop:g} ({label}) on the held-out items"
            + (f": the closest, {best_t.label}, measured {best_t.metric_value:.4g}" if best_t else "")
            + "; FP32 is kept")
    else:
        best = choose(within, result.fp32_round_ms)
        if best is None:
            fastest = min(within, key=lambda t: t.median_ms)
            result.status = FP32_FASTEST
            result.warnings.append(
                f"no model within budget runs faster than FP32 on this server in every timing round (the "
                f"fastest, {fastest.label}, {fastest.median_ms:.3g} ms against FP32's {fp32.median:.3g} ms): "
                "FP32 is kept, since it is within any budget")
        else:
            result.chosen = best.index
            result.status = WITHIN
            if keep_dir is not None:
                shutil.copyfile(paths[best.index], Path(keep_dir) / "chosen.onnx")


def search_budget(
    model_path,
    rec: Optimization,
    *,
    max_drop: float,
    data,
    metric: Optional[str] = None,
    labels_key: Optional[str] = None,
    dims: Optional[dict] = None,
    calibration_items: Optional[int] = None,
    quantize: bool = False,
    calibration_method: str = "minmax",
    max_trials: int = MAX_TRIALS,
    runs: Sequence[RunSpec] = (REFERENCE,),
    timing: Optional[dict] = None,
    keep_dir=None,
    progress: Optional[ProgressFn] = None,
    cancel: Optional[CancelToken] = None,
) -> BudgetSearch:
    """Search the fastest measured model within ``max_drop`` (module docstring for every step).

    Args:
        model_path: the FP32 model (the reference, and what is thinned).
        rec: an evaluated channel optimization of that model (:func:`sparsify_tui.optimization.core.
            build_optimization` with ``structure="channel"``): its allocation turns a target into ratios.
        max_drop: the budget, in the metric's units (:data:`sparsify_tui.profiling.metrics.BUDGET_UNITS`).
        data / labels_key: the sample data (``.npz``/``.npy``, required: reconstruction fits real items) and the
            key of its labels (default ``labels`` when present).
        metric: one of :data:`sparsify_tui.profiling.metrics.METRICS`, a user metric (``/path/FILE.py:FUNCTION``,
            :mod:`sparsify_tui.profiling.user_metric`), or None for the default from the outputs.
        dims: symbolic dims and scalar inputs.
        calibration_items: the split (:func:`check_split`; None: half the items, at most 64).
        quantize: run the INT8 search on the best thinned candidates (module docstring, step 3), calibrated on the
            same ``calibration_items`` with ``calibration_method``, on every kept runtime with that engine's INT8
            activation type; and, for a model with MatMul/Gemm weights, dynamic INT8.
        max_trials: thinned trials at most.
        runs: the candidate runtimes (:class:`~sparsify_tui.engine.run.RunSpec`: engine and precision, the cores of
            every session); the reference (onnxruntime fp32) is always one. ``timing``: overrides of :data:`TIMING`.
        keep_dir: a folder where the chosen trial's model is copied as ``chosen.onnx`` (None: not kept).

    Returns: :class:`~sparsify_tui.optimization.record.BudgetSearch`. Raises ``SampleDataError`` /
    ``DimensionError`` (data, labels, too few items), ``ModelError`` (a model that cannot run or quantize),
    ``SparsifyError`` (bad budget; a runtime not installed or a precision this CPU lacks), ``JobCanceled``.
    """
    from sparsify_tui import settings
    import numpy as np

    from sparsify_tui.analysis.labels import check_labels, item_count, split_items
    from sparsify_tui.engine.outputs import run_outputs
    from sparsify_tui.optimization.int8_search import phase_timer
    from sparsify_tui.profiling.metrics import choose_metric, evaluate, reference_evaluation

    t_start = time.perf_counter()
    max_drop = settings.max_drop(max_drop)
    rt = _Runtimes(list(runs))
    prog = progress or (lambda step, frac: None)
    tm = {**TIMING, **(timing or {})}
    src = Path(model_path)
    if not data:
        raise SampleDataError("the budget search needs real items: give --data FILE.npz (inputs, and labels for "
                              "top-1 accuracy)")
    phases: Dict[str, float] = {}
    phase = phase_timer(phases)

    prog("loading data", 0.0)
    check_split(item_count(src, data, labels_key=labels_key, dims=dims), calibration_items)
    split = split_items(src, data=data, labels_key=labels_key, dims=dims, batch_size=1,
                        calibration_items=calibration_items, metric=metric)
    calib, held, labels = split.calibration, split.held_out, split.held_out_labels
    maybe_check(cancel)
    prog("FP32 reference on the held-out items", 0.02)
    reference = run_outputs(src, held, cancel=cancel, engine=rt.reference)
    choice = choose_metric(reference[0], metric, labelled=labels is not None)
    if labels is not None and choice.class_output is not None:
        check_labels(np.concatenate(labels), len(held), split.labels_key or "labels",
                     int(reference[0][choice.class_output].shape[-1]))
    ref_eval = reference_evaluation(reference, choice, labels)
    phase("data_and_fp32_reference")
    result = BudgetSearch(
        max_drop=max_drop, metric=choice.name, metric_reason=choice.reason, budget_units=choice.budget_units,
        labelled=choice.labelled, data=str(data), labels_key=split.labels_key,
        calibration_items=len(calib), held_out_items=len(held), items=item_range(split.calibration_items),
        held_out=item_range(split.held_out_items), quantize=bool(quantize), accuracy_fp32=ref_eval.accuracy_reference,
        timing={**tm, "cores": rt.core_count}, user_metric=choice.user_metric, score_fp32=ref_eval.score)
    paths: Dict[int, Path] = {}
    work = make_temp_dir("budgetsearch")  # named after this pid: removed at start-up if we are killed

    def score(t: BudgetTrial, path: Path, engine) -> None:
        outs = run_outputs(path, held, cancel=cancel, engine=engine)
        ev = evaluate(reference, outs, choice, labels)
        t.metric_value, t.within_budget, t.score = float(ev.drop), ev.within(max_drop), ev.score
        t.nmse, t.max_abs, t.kl = ev.nmse, ev.max_abs, ev.kl
        t.top1_agreement, t.accuracy = ev.top1_agreement, ev.accuracy

    try:
        # ---- the runtimes on the unthinned model: drop those that cannot win
        if rt.searched:
            _screen_runtimes(result, rt, src, held[:1], tm, score, prog, cancel)
            for e in rt.extra():
                t = _on(e, index=len(result.trials), note=f"the unthinned model on {e.label}")
                score(t, src, e)
                result.trials.append(t)
                paths[t.index] = src
            phase("runtimes")

        # ---- thinned trials over the target speedup
        _thinned_trials(result, rec, src, calib, paths, work, max_trials=max_trials, dims=dims, rt=rt,
                        score=score, prog=prog, cancel=cancel)
        phase("trials")

        # ---- INT8 on the best thinned candidates, on every kept runtime
        if quantize:
            _int8_trials(result, paths, src, rec=rec, max_drop=max_drop, data=data, labels_key=labels_key, dims=dims,
                         n_cal=len(calib), calibration_method=calibration_method, rt=rt, timing=tm,
                         work=work, score=score, prog=prog, cancel=cancel)
            _dynamic_trials(result, paths, src, max_drop=max_drop, dims=dims, rt=rt, work=work, score=score,
                            prog=prog, cancel=cancel)
            phase("int8")

        # ---- one interleaved timing of FP32 and every trial, then the choice
        _time_and_choose(result, src, paths, held[:1], tm, rt=rt, keep_dir=keep_dir, label=choice.label, prog=prog,
                         cancel=cancel)
        phase("timing")
        result.seconds = round(time.perf_counter() - t_start, 3)
        result.timing["phases_s"] = phases
        prog("done", 1.0)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_thinned(src: Path, out: Path, ratios: Dict[str, float], settings, calibration: Sequence[dict], *,
                  dims: Optional[dict] = None, engine: Any = None, progress: Optional[Callable] = None,
                  cancel: Optional[CancelToken] = None) -> dict:
    """Write ``out``: ``src`` thinned at ``ratios`` (group id -> ratio) and reconstructed on ``calibration``, exactly
    as apply writes a channel optimization with ``settings`` (the structure's ``apply_model``: its ``round_to`` and
    ``importance``, the exactness check on the first calibration items); returns ``{"macs_reduction",
    "reconstruction": {items, consumers, seconds, peak_mb, rel_error_before, rel_error_after}}`` (the consumers'
    mean errors)."""
    from sparsify_tui.optimization.structures import get_structure

    rep = get_structure("channel").apply_model(src, out, ratios, settings=settings, batch_size=1, dims=dims,
                                               feeds=list(calibration)[:4], calibration=list(calibration),
                                               reconstruct=True, real_data=True, engine=engine, progress=progress,
                                               cancel=cancel)
    r = rep.get("reconstruction") or {}
    fits = [c for c in r.get("consumers") or [] if c.get("rel_error_after") is not None]
    mean = (lambda xs: float(sum(xs) / len(xs)) if xs else None)
    return {"macs_reduction": rep.get("macs_reduction"), "importance": rep.get("importance"),
            "reconstruction": {"items": r.get("items"), "consumers": len(r.get("consumers") or []),
                               "seconds": r.get("seconds"), "peak_mb": r.get("peak_mb"),
                               "rel_error_before": mean([c["rel_error_before"] for c in fits]),
                               "rel_error_after": mean([c["rel_error_after"] for c in fits])}}


def _int8_trials(result: BudgetSearch, paths: Dict[int, Path], src: Path, *, rec, max_drop, data, labels_key, dims,
                 n_cal, calibration_method, rt: _Runtimes, timing, work: Path, score, prog, cancel) -> None:
    """INT8 searches on :func:`int8_sources`, on each kept runtime (one per engine: the fastest precision the
    screening kept; the engine's own INT8 activation type); each chosen configuration becomes a trial on that runtime
    (with its INT8 search, ``BudgetTrial.int8_search``)."""
    from sparsify_tui.optimization.int8_search import kept_trial, search_int8

    sources = int8_sources(_built(result), max_drop)
    engines, seen = [], set()
    for e in sorted(rt.kept, key=lambda e: rt.median.get((e.name, e.precision), 0.0)):  # each engine once: its
        if e.name not in seen:                                                            # fastest precision
            seen.add(e.name)
            engines.append(e)
    jobs = [(source, e) for e in engines for source in sources]
    for k, (source, engine) in enumerate(jobs):
        maybe_check(cancel)
        base = src if source is None else paths[source]
        base_trial = None if source is None else next(t for t in result.trials if t.index == source)
        what = "the unthinned model" if source is None else f"trial {source} ({base_trial.target:.2f}× target)"
        where = "" if not rt.searched else f" on {engine.label}"

        def qprog(step, f, _k=k, _what=what, _where=where):
            prog(f"INT8 search on {_what}{_where}: {step}", 0.7 + 0.15 * (_k + f) / len(jobs))

        idx = len(result.trials)
        keep = work / f"trial_{idx}.onnx"
        t0 = time.perf_counter()
        run = RunSpec(engine=engine.name, precision=engine.precision, core_count=rt.core_count)
        search = search_int8(base, run, reference_path=src, max_drop=max_drop, metric=result.metric, data=data,
                             labels_key=labels_key, dims=dims, calibration_method=calibration_method,
                             calibration_size=n_cal, eval_batches=n_cal,
                             timing={k2: timing[k2] for k2 in ("rounds", "warmup", "iterations")},
                             keep_path=keep, progress=qprog, cancel=cancel)
        chosen = kept_trial(search)
        if chosen is None or not keep.is_file():
            result.warnings.append(f"INT8 on {what}{where}: {search.status} (no INT8 configuration within budget)")
            continue
        model = {f: getattr(base_trial, f) for f in _MODEL_FIELDS} if base_trial else {"est_speedup": 1.0,
                                                                                       "macs_reduction": 1.0}
        model.update(quantized=True, source=source, fp32_groups=chosen.groups, excluded_count=chosen.excluded_count)
        t = _on(engine, index=idx, **model, note=f"INT8 search on {what}{where}: {search.status}")
        t.reconstruction = dict(t.reconstruction or {})
        score(t, keep, engine)
        t.seconds = round(time.perf_counter() - t0, 3)
        t.int8_search = search
        result.trials.append(t)
        paths[idx] = keep


def _built(result: BudgetSearch) -> list:
    """The thinned trials as built and scored on the reference runtime (not their copies on other runtimes, not
    the unthinned model on another runtime, not INT8): what :func:`int8_sources` picks from."""
    return [t for t in result.trials if t.model_of is None and t.engine is None and not t.quantized
            and t.target > 1.0]


def dynamic_share(src: Path, dims: Optional[dict]) -> float:
    """The share (0..1) of the model's MACs (batch 1) in MatMul/Gemm nodes with a weight: what dynamic INT8 speeds up."""
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.engine import get_engine

    a = analyze_model(str(src), batch_size=1, dims=dict(dims or {}), include_system=False, count_zeros=False,
                      engine=get_engine())
    total = sum(float(n.macs or 0) for n in a.nodes)
    mm = sum(float(n.macs or 0) for n in a.nodes if n.op_type in ("MatMul", "Gemm") and n.prunable)
    return mm / total if total > 0 else 0.0


def _dynamic_trials(result: BudgetSearch, paths: Dict[int, Path], src: Path, *, max_drop, dims, rt: _Runtimes,
                    work: Path, score, prog, cancel) -> None:
    """Dynamic INT8 (MatMul/Gemm weights per channel, activations quantized at run time:
    :meth:`~sparsify_tui.engine.base.Engine.quantize_dynamic_int8`) of :func:`int8_sources`, for a model whose
    MatMul/Gemm weights carry at least :data:`DYNAMIC_MIN_SHARE` of its MACs (a transformer; not a CNN whose only
    MatMul is its classifier): one file each, scored and timed on every kept runtime that runs it."""
    from sparsify_tui.errors import ModelError

    if dynamic_share(src, dims) < DYNAMIC_MIN_SHARE:
        return
    for source in int8_sources(_built(result), max_drop):
        maybe_check(cancel)
        base = src if source is None else paths[source]
        base_trial = None if source is None else next(t for t in result.trials if t.index == source)
        what = "the unthinned model" if source is None else f"trial {source} ({base_trial.target:.2f}× target)"
        prog(f"dynamic INT8 of {what}", 0.85)
        path = work / f"dynamic_{'base' if source is None else source}.onnx"
        try:
            rt.reference.quantize_dynamic_int8(base, path, cancel=cancel)
        except ModelError as err:
            if "nothing to quantize" not in str(err):
                result.warnings.append(f"dynamic INT8 of {what}: {err}")
            return
        first = None
        for e in rt.kept:
            model = {f: getattr(base_trial, f) for f in _MODEL_FIELDS} if base_trial else {"est_speedup": 1.0,
                                                                                           "macs_reduction": 1.0}
            model.update(quantized=True, source=source, int8_mode="dynamic")
            t = _on(e, index=len(result.trials), **model, model_of=first,
                    note=f"dynamic INT8 of {what}" + (f" on {e.label}" if rt.searched else ""))
            try:
                score(t, path, e)
            except ModelError as err:
                result.warnings.append(f"dynamic INT8 of {what} on {e.label}: {err}")
                continue
            result.trials.append(t)
            paths[t.index] = path
            first = t.index if first is None else first


__all__ = ["START", "STEP", "RESOLUTION", "MAX_TRIALS", "TIMING", "SCREEN_KEEP", "DYNAMIC_MIN_SHARE", "next_target",
           "check_split", "item_range", "int8_sources", "choose", "unquantized_of", "dynamic_share", "allocation",
           "search_budget",
           "build_thinned"]
