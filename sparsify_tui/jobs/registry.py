"""Job types, their handlers and their argument checks, named in code.

A handler is ``run(ctx: JobContext) -> dict``: it does the work (reporting through ``ctx.progress`` and
checking ``ctx.cancel``), stores its results through :mod:`sparsify_tui.services` and returns a small
JSON-able summary that includes the record id it wrote. Handler modules import the core inside ``run``, so
importing this registry stays cheap. A new job type is a module in :mod:`sparsify_tui.jobs.handlers` plus
one line here.
"""

from __future__ import annotations

from typing import Callable, Dict

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


def resolve(job_type: str) -> Callable:
    """The handler of ``job_type``; :class:`JobError` when unknown."""
    try:
        return JOB_TYPES[job_type]
    except KeyError:
        raise JobError(f"unknown job type {job_type!r}: use one of {', '.join(sorted(JOB_TYPES))}") from None
