"""Job types and their handlers, named in code.

A handler is ``run(ctx: JobContext) -> dict``: it does the work (reporting through ``ctx.progress`` and
checking ``ctx.cancel``), stores its results through :mod:`sparsify_tui.services` and returns a small
JSON-able summary that includes the record id it wrote. Handler modules import the core inside ``run``, so
importing this registry stays cheap. A new job type is a module in :mod:`sparsify_tui.jobs.handlers` plus
one line here.
"""

from __future__ import annotations

from typing import Callable, Dict

from sparsify_tui.errors import JobError
from sparsify_tui.jobs.handlers import apply, benchmark, channel_calibration, loss, perf, sleep

JOB_TYPES: Dict[str, Callable] = {
    "perf_profile": perf.run,
    "loss_profile": loss.run,
    "apply": apply.run,
    "benchmark": benchmark.run,
    "channel_calibration": channel_calibration.run,
    # test and diagnostic job: sleeps in steps, reports progress, honours cancel
    "sleep": sleep.run,
}


def resolve(job_type: str) -> Callable:
    """The handler of ``job_type``; :class:`JobError` when unknown."""
    try:
        return JOB_TYPES[job_type]
    except KeyError:
        raise JobError(f"unknown job type {job_type!r}: use one of {', '.join(sorted(JOB_TYPES))}") from None
