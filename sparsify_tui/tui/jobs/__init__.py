"""The Jobs view: every job of every project (status, progress, ETA, error), with cancel and its log."""

from sparsify_tui.tui.jobs.screen import JobsScreen

__all__ = ["JobsScreen"]
