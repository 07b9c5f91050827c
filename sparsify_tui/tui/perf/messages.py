"""Results the Performance Profiles section's workers post (to the section, its views and its dialog)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from textual.message import Message


@dataclass
class FlopsAnalysisLoaded(Message):
    """The stored model analysis (``analyze --json`` dict) and the project record, for the FLOPS view."""

    analysis: dict
    project: Optional[dict]


@dataclass
class PerfProfileLoaded(Message):
    """One measured profile (``profiling.perf.PerfProfile``), for :class:`PerfProfileView`."""

    record_id: str
    profile: Any


@dataclass
class PerfDialogReady(Message):
    """Open the perf profile dialog with these form `defaults`; `job`: the rerun job already submitted
    (the dialog then shows its progress)."""

    defaults: dict
    job: Optional[dict] = None


@dataclass
class PerfJobSubmitted(Message):
    """The dialog's ``perf_profile`` job was submitted (`job`), or refused (`error`, shown in the form)."""

    job: Optional[dict]
    error: Optional[BaseException] = None


@dataclass
class PerfComparisonLoaded(Message):
    """A per-node comparison of two perf profiles (``profiling.perf_compare.PerfComparison``), for
    :class:`~sparsify_tui.tui.perf.compare_screen.PerfCompareScreen`; ``specs`` are the (A, B) specs it was made from."""

    comparison: Any
    specs: tuple
