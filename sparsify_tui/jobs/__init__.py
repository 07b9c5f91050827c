"""Background jobs in their own detached processes, with progress, cancel and a machine-wide
measuring lock. See :mod:`sparsify_tui.jobs.runner`. Never imports Textual."""

from sparsify_tui.jobs.runner import (
    ACTIVE,
    FINAL,
    JobContext,
    cancel,
    get_job,
    list_jobs,
    log_path,
    log_tail,
    measure_lock_path,
    refresh,
    run_here,
    run_job,
    submit,
    wait,
)

__all__ = [
    "ACTIVE", "FINAL", "JobContext", "cancel", "get_job", "list_jobs", "log_path", "log_tail",
    "measure_lock_path", "refresh", "run_here", "run_job", "submit", "wait",
]
