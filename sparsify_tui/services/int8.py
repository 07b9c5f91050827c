"""Accuracy-controlled INT8 optimizations of a project: build the optimization from the project's profiles, run
the INT8 search (:func:`sparsify_tui.optimization.int8_search.search_int8`) on the model as apply will write it,
store the optimization with the exclusions the search chose and its trial table. Nothing is stored when the
search fails (``quantize_static`` error, bad data or labels) or is canceled."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional

from sparsify_tui.progress import CancelToken, ProgressFn
from sparsify_tui.tempfiles import temp_dir
from sparsify_tui.services import profiles
from sparsify_tui.services.optimizations import TABLE, check_name_free  # noqa: F401 (public here too)
from sparsify_tui.services.projects import model_analysis

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization


def search_int8_optimization(ws, project_id: str, args: Dict[str, Any], *, progress: Optional[ProgressFn] = None,
                             cancel: Optional[CancelToken] = None) -> "Optimization":
    """Create the optimization ``args["name"]`` with INT8 chosen by the accuracy-controlled search; returns it as
    stored. ``args``: see :func:`int8_settings`. The search runs on the model apply would write before
    quantizing (pruned when ``sparsity`` > 0) and compares with the project's FP32 model."""
    from sparsify_tui.optimization import core
    from sparsify_tui.optimization.apply import apply_optimization
    from sparsify_tui.optimization.int8_search import excluded_nodes, search_int8
    from sparsify_tui.optimization.record import Settings, TargetRuntime
    from sparsify_tui.optimization.structures import load_optimization

    from sparsify_tui.services.job_settings import int8_settings

    s = int8_settings(ws.get_project(project_id), args)
    project = ws.get_project(project_id)
    pid = project["id"]
    check_name_free(ws, pid, s["name"])
    prog = progress or (lambda step, frac: None)
    perf_prof, perf_ref, perf_name = profiles.resolve_perf_profile(ws, pid, s["perf"])
    loss_prof, loss_ref, loss_name = profiles.resolve_loss_profile(ws, pid, s["loss"], require=True)
    st = Settings(sparsity=s["sparsity"], balance=s["balance"]).with_changes()
    rec = core.build_optimization(s["name"], model_analysis(ws, pid), perf_prof, loss_prof,
                                  training=project.get("training"), sparsity=st.sparsity, balance=st.balance,
                                  quantize=True, perf_ref=perf_ref, perf_name=perf_name, loss_ref=loss_ref,
                                  loss_name=loss_name, settings=st,
                                  model_file=(project.get("model") or {}).get("file", ""))
    model = ws.model_path(pid)
    sparsities = core.layer_sparsities(rec)
    with temp_dir("int8") as tmp:
        candidate = model
        share = 0.0
        if sparsities:
            share = 0.1
            prog("pruning (the search quantizes the model apply writes)", 0.0)
            candidate = apply_optimization(model, sparsities, s["run"], quantize=False, measure_outputs=False,
                                           structure=st.structure, out_path=Path(tmp) / "pruned.onnx",
                                           cancel=cancel).out_path

        def sprog(step, frac):
            prog(step, share + (1 - share) * frac)

        search = search_int8(candidate, s["run"], reference_path=model, max_drop=s["max_drop"], metric=s["metric"],
                             data=s["data"], labels_key=s["labels"], dims=s["dims"],
                             calibration_method=s["calibration"], calibration_size=s["calibration_size"],
                             loss_profile=loss_prof, progress=sprog, cancel=cancel)
    rec.runtime = TargetRuntime(engine=s["run"].engine, precision=s["run"].precision)
    q = rec.quantization
    q.search = search
    q.calibration_method = s["calibration"]
    chosen = search.chosen_trial
    q.enabled = chosen is not None
    q.excluded = excluded_nodes(search.groups, chosen.groups) if chosen is not None else []
    rec = core.evaluate(rec)  # the search's warnings stay on the search: all_warnings() lists them once
    return load_optimization(ws.add_record(pid, TABLE, rec.to_dict()))
