"""Background jobs in their own detached processes, with progress, cancel and a machine-wide
measuring lock (:mod:`sparsify_tui.jobs.runner`); the handlers of each job type
(:mod:`sparsify_tui.jobs.handlers`, routed by :mod:`sparsify_tui.jobs.registry`); the baseline profiles of
a new project (:mod:`sparsify_tui.jobs.baseline`). Never imports Textual."""

from sparsify_tui.jobs.baseline import baseline_jobs
from sparsify_tui.jobs.runner import (
    ACTIVE,
    FINAL,
    active_jobs,
    active_jobs_phrase,
    JobContext,
    cancel,
    delete_project,
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
    "ACTIVE", "FINAL", "JobContext", "active_jobs", "active_jobs_phrase", "delete_project", "baseline_jobs", "cancel", "get_job", "list_jobs", "log_path", "log_tail",
    "measure_lock_path", "refresh", "run_here", "run_job", "submit", "wait",
]
