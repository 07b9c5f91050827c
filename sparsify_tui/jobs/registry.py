"""Job types and their handlers.

A handler is ``run_job(ctx: JobContext) -> dict``: it does the work (reporting through
``ctx.progress`` and checking ``ctx.cancel``), stores its own results in ``ctx.ws`` (records and
blobs) and returns a small JSON-able summary that includes the record id it wrote.
Handlers are named as ``"module:function"`` strings and imported only when a job runs.
"""

from __future__ import annotations

import importlib
from typing import Callable, Dict, Union

from sparsify_tui.errors import JobError

JOB_TYPES: Dict[str, Union[str, Callable]] = {
    "perf_profile": "sparsify_tui.profiling.perf:run_job",
    "loss_profile": "sparsify_tui.profiling.loss:run_job",
    "apply": "sparsify_tui.optimization.apply:run_job",
    "benchmark": "sparsify_tui.benchmark.runner:run_job",
    # test and diagnostic job: sleeps in steps, reports progress, honours cancel
    "sleep": "sparsify_tui.jobs.builtin:sleep_job",
}


def register(job_type: str, target: Union[str, Callable]) -> None:
    """Add or replace a job type: ``target`` is ``"module:function"`` or a callable.

    A callable only works for :func:`sparsify_tui.jobs.runner.run_here`; a job process
    (``submit``) can only find handlers named by a string registered at import time.
    """
    JOB_TYPES[job_type] = target


def resolve(job_type: str) -> Callable:
    """The handler function of ``job_type``; :class:`JobError` when unknown or not importable."""
    target = JOB_TYPES.get(job_type)
    if target is None:
        raise JobError(f"unknown job type {job_type!r}: use one of {', '.join(sorted(JOB_TYPES))}")
    if callable(target):
        return target
    module_name, _, func = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, func)
    except (ImportError, AttributeError) as err:
        raise JobError(f"job type {job_type!r} is not available in this install ({target}: {err})") from None
