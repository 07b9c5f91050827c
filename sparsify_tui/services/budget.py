"""Budget-searched optimizations of a project: build a channel optimization from the project's profiles, run the
budget search (:func:`sparsify_tui.optimization.budget_search.search_budget`) and store the optimization at the
configuration it chose (channel target, INT8 exclusions) with every trial. When FP32 wins, the optimization is
stored with nothing thinned and INT8 off, and says so: never a model slower than the original. Nothing is stored
when the search fails (bad data or labels, a model that cannot run) or is canceled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

from sparsify_tui.progress import CancelToken, ProgressFn
from sparsify_tui.services.job_settings import budget_settings
from sparsify_tui.services.optimizations import TABLE, build_record, check_name_free
from sparsify_tui.services.projects import file_sha256

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization


def search_budget_optimization(ws, project_id: str, args: Dict[str, Any], *, progress: Optional[ProgressFn] = None,
                               cancel: Optional[CancelToken] = None, timing: Optional[dict] = None) -> "Optimization":
    """Create the channel optimization ``args["name"]`` at the configuration the budget search chose; returns it as
    stored. ``args``: see :func:`sparsify_tui.services.job_settings.budget_settings`; ``timing``: overrides of the search's timing rounds."""
    from sparsify_tui.optimization import core
    from sparsify_tui.optimization.budget_search import search_budget
    from sparsify_tui.optimization.structures import load_optimization

    project = ws.get_project(project_id)
    pid = project["id"]
    s = budget_settings(project, args)
    check_name_free(ws, pid, s["name"])
    prog = progress or (lambda step, frac: None)
    prog("building the channel optimization", 0.0)
    channel = {"structure": "channel", "target": "speedup"}
    if s["importance"]:
        channel["importance"] = s["importance"]
    rec = build_record(ws, pid, s["name"], perf=s["perf"], loss=s["loss"], sparsity=0.3, balance=s["balance"],
                       settings=channel)
    search = search_budget(ws.model_path(pid), rec, max_drop=s["max_drop"], data=s["data"], metric=s["metric"],
                           labels_key=s["labels"], dims=s["dims"], calibration_items=s["calibration_size"],
                           quantize=s["quantize"], calibration_method=s["calibration"], max_trials=s["max_trials"],
                           core_count=s["core_count"], timing=timing,
                           progress=lambda step, f: prog(step, 0.02 + 0.97 * f), cancel=cancel)
    search.data_sha256 = file_sha256(s["data"])
    rec = chosen_record(rec, search, calibration_method=s["calibration"])
    rec = core.evaluate(rec)
    rec.warnings = list(search.warnings) + list(rec.warnings)
    return load_optimization(ws.add_record(pid, TABLE, rec.to_dict()))


def chosen_record(rec: "Optimization", search, *, calibration_method: str = "minmax") -> "Optimization":
    """``rec`` set to the configuration ``search`` chose (in place; returned): the chosen trial's target speedup
    (nothing thinned when FP32 was kept or the chosen trial is the unthinned model), the search's data file (apply
    calibrates, reconstructs and scores on it) and, for an INT8 trial, INT8 on
    with the nodes its INT8 search kept FP32 (that search moves to ``quantization.search``). ``rec.search`` holds
    the search. Re-evaluate it afterwards."""
    from sparsify_tui.optimization.int8_search import excluded_nodes, kept_trial

    chosen = search.chosen_trial
    data = {"data": search.data, "data_sha256": search.data_sha256, "labels_key": search.labels_key}
    if chosen is not None and chosen.target > 1.0:
        rec.settings = rec.settings.with_changes(target="speedup", target_speedup=chosen.target, **data)
    else:
        rec.settings = rec.settings.with_changes(target="uniform", sparsity=0.0, **data)
    q = rec.quantization
    q.enabled = bool(chosen is not None and chosen.quantized)
    q.excluded = []
    if q.enabled:
        q.search, chosen.int8_search = chosen.int8_search, None
        if q.search.chosen is None:  # FP32 won the INT8 search's own timing, not the budget search's
            q.search.chosen = kept_trial(q.search).index
            q.search.status = "kept by the budget search (faster than FP32 in every round of its timing)"
        q.calibration_method = calibration_method
        q.excluded = excluded_nodes(q.search.groups, chosen.fp32_groups)
    rec.search = search
    return rec


__all__ = ["search_budget_optimization", "chosen_record"]
