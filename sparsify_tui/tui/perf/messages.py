"""Results the Performance Profiles section's workers post (to the section, its views and its dialog)."""

from __future__ import annotations

from typing import Any, Optional

from textual.message import Message


class FlopsAnalysisLoaded(Message):
    """The stored model analysis (``analyze --json`` dict) and the project record, for the FLOPS view."""

    def __init__(self, analysis: dict, project: Optional[dict]) -> None:
        super().__init__()
        self.analysis = analysis
        self.project = project


class PerfProfilesListed(Message):
    """The project's measured perf profile records (the list polls every few seconds)."""

    def __init__(self, records: list[dict]) -> None:
        super().__init__()
        self.records = records


class PerfProfileLoaded(Message):
    """One measured profile (``profiling.perf.PerfProfile``), for :class:`PerfProfileView`."""

    def __init__(self, record_id: str, profile: Any) -> None:
        super().__init__()
        self.record_id = record_id
        self.profile = profile


class PerfDialogReady(Message):
    """Open the perf profile dialog with these form `defaults`; `job`: the rerun job already submitted
    (the dialog then shows its progress)."""

    def __init__(self, defaults: dict, job: Optional[dict] = None) -> None:
        super().__init__()
        self.defaults = defaults
        self.job = job


class PerfJobSubmitted(Message):
    """The dialog's ``perf_profile`` job was submitted (`job`), or refused (`error`, shown in the form)."""

    def __init__(self, job: Optional[dict], error: Optional[BaseException] = None) -> None:
        super().__init__()
        self.job = job
        self.error = error


class PerfProfileDeleted(Message):
    """A measured profile and its stored result were deleted."""

    def __init__(self, record_id: str) -> None:
        super().__init__()
        self.record_id = record_id
