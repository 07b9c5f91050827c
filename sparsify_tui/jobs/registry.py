"""Job types, their handlers and their argument checks, named in code.

A handler is ``run(ctx: JobContext) -> dict``: it does the work (reporting through ``ctx.progress`` and
checking ``ctx.cancel``), stores its results through :mod:`sparsify_tui.services` and returns a small
JSON-able summary that includes the record id it wrote. Handler modules import the core inside ``run``, so
importing this registry stays cheap. A new job type is a module in :mod:`sparsify_tui.jobs.handlers` plus
one line here.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from sparsify_tui.errors import JobError
from sparsify_tui.jobs.handlers import (apply, benchmark, budget_search, channel_calibration, fleet, int8_search, loss,
                                        perf, sleep)

JOB_TYPES: Dict[str, Callable] = {
    "perf_profile": perf.run,
    "loss_profile": loss.run,
    "apply": apply.run,
    "benchmark": benchmark.run,
    "int8_search": int8_search.run,
    "budget_search": budget_search.run,
    "channel_calibration": channel_calibration.run,
    "fleet_profile": fleet.run_profile,
    "fleet_benchmark": fleet.run_benchmark_job,
    # test and diagnostic job: sleeps in steps, reports progress, honours cancel
    "sleep": sleep.run,
}

JOB_CHECKS: Dict[str, Callable] = {
    "perf_profile": perf.check,
    "loss_profile": loss.check,
    "apply": apply.check,
    "benchmark": benchmark.check,
    "int8_search": int8_search.check,
    "budget_search": budget_search.check,
    "channel_calibration": channel_calibration.check,
    "fleet_profile": fleet.check_profile,
    "fleet_benchmark": fleet.check_benchmark,
}
"""``check(ws, project, args)`` per job type: raises ``SparsifyError`` (one line) for bad arguments. Run by
:func:`sparsify_tui.jobs.submit` and :func:`sparsify_tui.jobs.run_here` before a job record exists, so a
refused job leaves nothing behind, from the CLI and the TUI alike."""


JOB_KINDS: Dict[str, str] = {
    "perf_profile": "perf profile", "loss_profile": "loss profile", "apply": "apply", "benchmark": "benchmark",
    "int8_search": "INT8 search", "channel_calibration": "channel calibration", "fleet_profile": "fleet perf profile",
    "fleet_benchmark": "fleet benchmark", "sleep": "sleep",
}
"""What a job of each type is called in job lists, logs and notices."""


def _record_name(ws, project_id: str, table: str, ref: Any) -> Optional[str]:
    try:
        return str(ws.find_record(project_id, table, str(ref)).get("name") or ref)
    except Exception:  # noqa: BLE001 - a title falls back to the reference it was given
        return None


def describe(ws, project: Optional[Dict[str, Any]], job_type: str, args: Dict[str, Any]) -> str:
    """A job's title, naming what it works on by name (never a bare id): ``perf profile 'baseline'``,
    ``apply 'pruned 0.85 + INT8'``, ``channel calibration of perf profile 'baseline'``, ``INT8 search 'int8-1'``.
    Stored with the job (``title``) when it is recorded, so every list, log and notice shows the same one."""
    kind = JOB_KINDS.get(job_type, job_type.replace("_", " "))
    pid = (project or {}).get("id")
    name = args.get("name")
    if job_type == "apply" and args.get("optimization"):
        name = _record_name(ws, pid, "optimizations", args["optimization"]) or args["optimization"]
    elif job_type == "channel_calibration":
        perf = args.get("perf")
        perf_name = _record_name(ws, pid, "perf_profiles", perf) if perf else None
        if perf_name is None and not perf and pid:
            from sparsify_tui.jobs.handlers.channel_calibration import calibration_settings

            try:
                perf_name = calibration_settings(ws, project, args)["perf_name"]
            except Exception:  # noqa: BLE001 - refused arguments are reported by the check
                perf_name = None
        return f"{kind} of perf profile {perf_name or perf!r}" if (perf_name or perf) else kind
    if name:
        return f"{kind} {str(name)!r}" + (" (rerun)" if args.get("record_id") else "")
    return kind


def resolve(job_type: str) -> Callable:
    """The handler of ``job_type``; :class:`JobError` when unknown."""
    try:
        return JOB_TYPES[job_type]
    except KeyError:
        raise JobError(f"unknown job type {job_type!r}: use one of {', '.join(sorted(JOB_TYPES))}") from None
