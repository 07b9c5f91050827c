"""Results the Optimization section's workers post (to the section and its export dialog)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from textual.message import Message


@dataclass
class OptimizationsListed(Message):
    """The project's optimizations (typed :class:`~sparsify_tui.optimization.record.Optimization`), and the
    project's training settings now (an optimization keeps its own copy: the Training tab compares them)."""

    records: list
    project_training: Optional[dict] = None


@dataclass
class OptimizationChanged(Message):
    """An optimization was created, copied, re-evaluated or edited (`record`: the typed record as stored after
    the change), or deleted (`record` None)."""

    record: Optional[Any]


@dataclass
class CreateDialogReady(Message):
    """Open the create dialog: perf profile options (label, id), loss profile options, a free name, and the id of
    the newest perf profile with a channel calibration (the default of a channel optimization; None without one)."""

    perf_options: list[tuple[str, str]]
    loss_options: list[tuple[str, str]]
    default_name: str
    calibrated_perf: Optional[str] = None
    loss_structures: dict = field(default_factory=dict)  # loss profile id -> the structure it measured


@dataclass
class ExportDialogReady(Message):
    """Open the export dialog for `record_id`, with the default recipe path."""

    record_id: str
    default_path: str


@dataclass
class ExportPreviewed(Message):
    """The texts of an export (``{"recipe", "code", "warnings", "notes"}``), or why it cannot be made
    (`error`, shown in the dialog)."""

    export: Optional[dict]
    error: Optional[BaseException] = None


@dataclass
class ExportWritten(Message):
    """The files were written (`result`: ``recipe_path``, ``code_path``…), or not (`error`, shown in
    the dialog)."""

    result: Optional[dict]
    error: Optional[BaseException] = None


@dataclass
class OptimizationsCompared(Message):
    """Optimizations side by side (``optimization.comparison.OptimizationComparison``) for the ids in `ids`, for
    :class:`~sparsify_tui.tui.optimization.compare_screen.OptimizationCompareScreen`."""

    comparison: Any
    ids: tuple


@dataclass
class SearchSubmitted(Message):
    """A search job (`job_type`: ``int8_search`` or ``budget_search``) was submitted (`job`), or its arguments were
    refused (`error`, shown in a dialog)."""

    job_type: str
    job: Optional[dict]
    error: Optional[BaseException] = None
