"""Budget-searched optimizations of a project: build a channel optimization from the project's profiles (with
channel sensitivities measured after reconstruction on the search's calibration items when the project has none:
:func:`sensitivities`), run the budget search (:func:`sparsify_tui.optimization.budget_search.search_budget`) and
store the optimization at the configuration it chose (channel target, INT8 exclusions) with every trial. When FP32
wins, the optimization is stored with nothing thinned and INT8 off, and says so: never a model slower than the
original. Nothing is stored when the search fails (bad data or labels, a model that cannot run) or is canceled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

from sparsify_tui.progress import CancelToken, ProgressFn
from sparsify_tui.services import profiles
from sparsify_tui.services.job_settings import budget_settings
from sparsify_tui.services.optimizations import TABLE, build_record, check_name_free
from sparsify_tui.services.projects import file_sha256

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization


def search_budget_optimization(ws, project_id: str, args: Dict[str, Any], *, progress: Optional[ProgressFn] = None,
                               cancel: Optional[CancelToken] = None, timing: Optional[dict] = None) -> "Optimization":
    """Create the channel optimization ``args["name"]`` at the configuration the budget search chose; returns it as
    stored. ``args``: see :func:`sparsify_tui.services.job_settings.budget_settings`; ``timing``: overrides of the
    search's timing rounds."""
    from sparsify_tui.engine.run import RunSpec
    from sparsify_tui.optimization import core
    from sparsify_tui.optimization.budget_search import search_budget
    from sparsify_tui.optimization.structures import load_optimization

    project = ws.get_project(project_id)
    pid = project["id"]
    s = budget_settings(project, args)
    check_name_free(ws, pid, s["name"])
    prog = progress or (lambda step, frac: None)
    model = ws.model_path(pid)
    sens = sensitivities(ws, pid, s, progress=lambda step, f: prog(f"sensitivities: {step}", 0.1 * f),
                         cancel=cancel)
    prog("building the channel optimization", 0.1)
    channel = {"structure": "channel", "target": "speedup"}
    if s["importance"]:
        channel["importance"] = s["importance"]
    rec = build_record(ws, pid, s["name"], perf=s["perf"], loss=s["loss"], sparsity=0.3, balance=s["balance"],
                       settings=channel, loss_profile=sens)
    runs = [RunSpec(engine=e, precision=p, core_count=s["core_count"]) for e, p in s["runtimes"]]
    search = search_budget(model, rec, max_drop=s["max_drop"], data=s["data"], metric=s["metric"],
                           labels_key=s["labels"], dims=s["dims"], calibration_items=s["calibration_size"],
                           quantize=s["quantize"], calibration_method=s["calibration"], max_trials=s["max_trials"],
                           runs=runs, timing=timing,
                           progress=lambda step, f: prog(step, 0.12 + 0.87 * f), cancel=cancel)
    search.data_sha256 = file_sha256(s["data"])
    search.warnings = list(s["runtime_notes"]) + list(search.warnings)
    rec = chosen_record(rec, search, calibration_method=s["calibration"])
    rec = core.evaluate(rec)
    rec.warnings = list(search.warnings) + list(rec.warnings)
    if sens is not None:  # stored with the optimization, only now that the search succeeded
        rec.loss_profile = profiles.store_loss_profile(ws, pid, sens)["record_id"]
    return load_optimization(ws.add_record(pid, TABLE, rec.to_dict()))


def sensitivities(ws, project_id: str, s: Dict[str, Any], *, progress: Optional[ProgressFn] = None,
                  cancel: Optional[CancelToken] = None):
    """The channel sensitivities the search allocates with, when the project has none measured after
    reconstruction: a channel one-shot loss profile (:func:`sparsify_tui.profiling.loss_channel.channel_profile`,
    each group's consumers refit, so the allocation sums what apply delivers) measured now on the first calibration
    items of the search's data (never a held-out item); None when ``--loss`` names a profile, when the newest
    channel loss profile is already one-shot after reconstruction, or when the calibration items are too few to hold
    its measured and refit items (then the newest channel profile, else the group-norm magnitude, is used). Not
    stored here: the caller stores it with the optimization."""
    from sparsify_tui.analysis.labels import item_count
    from sparsify_tui.optimization.budget_search import check_split
    from sparsify_tui.profiling.loss_channel import RECONSTRUCT_ITEMS, channel_profile
    from sparsify_tui.settings import LOSS_BATCHES

    if s["loss"] is not None:
        return None
    prof, ref, _name = profiles.resolve_loss_profile(ws, project_id, None, structure="channel")
    if ref != profiles.APPROXIMATED and prof.method == "one-shot" and prof.settings.get("reconstructed"):
        return None
    model = ws.model_path(project_id)
    n_cal, _held = check_split(item_count(model, s["data"], labels_key=s["labels"], dims=s["dims"]),
                               s["calibration_size"])
    if n_cal < LOSS_BATCHES + RECONSTRUCT_ITEMS:
        return None
    return channel_profile(model, method="one-shot", data=s["data"], batches=LOSS_BATCHES, dims=s["dims"],
                           name=f"{s['name']}: channel one-shot after reconstruction (budget search)",
                           core_count=s["core_count"], reconstruct=True, progress=progress, cancel=cancel)


def chosen_record(rec: "Optimization", search, *, calibration_method: str = "minmax") -> "Optimization":
    """``rec`` set to the configuration ``search`` chose (in place; returned): the chosen trial's target speedup
    (nothing thinned when FP32 was kept or the chosen trial is the unthinned model), its runtime (``rec.runtime``,
    when not onnxruntime fp32), the search's data file (apply calibrates, reconstructs and scores on it) and, for an
    INT8 trial, INT8 on with the nodes its INT8 search kept FP32 (that search moves to ``quantization.search``), or
    dynamic INT8 (``calibration_method`` "dynamic"). ``rec.search`` holds
    the search. Re-evaluate it afterwards."""
    from sparsify_tui.optimization.int8_search import excluded_nodes, kept_trial
    from sparsify_tui.optimization.record import TargetRuntime

    chosen = search.chosen_trial
    data = {"data": search.data, "data_sha256": search.data_sha256, "labels_key": search.labels_key}
    if chosen is not None and chosen.target > 1.0:
        rec.settings = rec.settings.with_changes(target="speedup", target_speedup=chosen.target, **data)
    else:
        rec.settings = rec.settings.with_changes(target="uniform", sparsity=0.0, **data)
    if chosen is not None and chosen.runtime != ("onnxruntime", "fp32"):
        rec.runtime = TargetRuntime(engine=chosen.runtime[0], precision=chosen.runtime[1])
    q = rec.quantization
    q.enabled = bool(chosen is not None and chosen.quantized)
    q.excluded = []
    if q.enabled and chosen.int8_mode == "dynamic":
        q.calibration_method = "dynamic"  # activation ranges taken at run time (apply: quantize_dynamic_int8)
    elif q.enabled:
        q.search, chosen.int8_search = chosen.int8_search, None
        if q.search.chosen is None:  # FP32 won the INT8 search's own timing, not the budget search's
            q.search.chosen = kept_trial(q.search).index
            q.search.status = "kept by the budget search (faster than FP32 in every round of its timing)"
        q.calibration_method = calibration_method
        q.excluded = excluded_nodes(q.search.groups, chosen.fp32_groups)
    rec.search = search
    return rec


__all__ = ["search_budget_optimization", "sensitivities", "chosen_record"]
