"""Results the Optimization section's workers post (to the section and its export dialog)."""

from __future__ import annotations

from typing import Optional

from textual.message import Message


class OptimizationsListed(Message):
    """The project's optimization records."""

    def __init__(self, records: list[dict]) -> None:
        super().__init__()
        self.records = records


class OptimizationChanged(Message):
    """An optimization was created, copied, re-evaluated or edited (`record`: the stored record after
    the change), or deleted (`record` None)."""

    def __init__(self, record: Optional[dict]) -> None:
        super().__init__()
        self.record = record


class CreateDialogReady(Message):
    """Open the create dialog: perf profile options (label, id), loss profile options, a free name."""

    def __init__(self, perf_options: list[tuple[str, str]], loss_options: list[tuple[str, str]],
                 default_name: str) -> None:
        super().__init__()
        self.perf_options = perf_options
        self.loss_options = loss_options
        self.default_name = default_name


class ExportDialogReady(Message):
    """Open the export dialog for `record_id`, with the default recipe path."""

    def __init__(self, record_id: str, default_path: str) -> None:
        super().__init__()
        self.record_id = record_id
        self.default_path = default_path


class ExportPreviewed(Message):
    """The texts of an export (``{"recipe", "code", "warnings", "notes"}``), or why it cannot be made
    (`error`, shown in the dialog)."""

    def __init__(self, export: Optional[dict], error: Optional[BaseException] = None) -> None:
        super().__init__()
        self.export = export
        self.error = error


class ExportWritten(Message):
    """The files were written (`result`: ``recipe_path``, ``code_path``…), or not (`error`, shown in
    the dialog)."""

    def __init__(self, result: Optional[dict], error: Optional[BaseException] = None) -> None:
        super().__init__()
        self.result = result
        self.error = error
