"""`ReportDialog`: choose the format and the path, `ctrl+s` writes the report of the open project.

The report is :func:`sparsify_tui.services.report.write_report`'s (the same as ``sparsify-tui report PROJECT -o
FILE``): the model, the machine, each perf profile's latency and top layers, each loss profile's most and least
sensitive layers, each optimization's settings, estimates and measured results, and the benchmarks. The path
defaults to ``<project>/reports/<name>.<format>`` and follows the chosen format until the user edits it.
"""

from __future__ import annotations

from typing import Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import Input, Select, Static

from sparsify_tui.formatting import format_bytes
from sparsify_tui.tui.report.messages import ReportPathsFound, ReportWritten
from sparsify_tui.tui.widgets.dialogs import FormDialog, dialog_css, field_row, form_buttons, select_row
from sparsify_tui.tui.widgets.inputs import TextInput
from sparsify_tui.tui.workers import app_work, post_result

FORMAT_OPTIONS = [("HTML (self-contained, charts as SVG)", "html"), ("Markdown (tables)", "md"), ("JSON (data)", "json")]


class ReportDialog(FormDialog[Optional[dict]]):
    """Write a project report. Dismisses with the last write's ``{"path", "format", "bytes"}`` (None when nothing
    was written)."""

    DEFAULT_CSS = dialog_css("ReportDialog", 78) + """
    ReportDialog #error { max-height: 4; }
    """

    BINDINGS = [
        Binding("escape", "close", "Close", id="report.close", tooltip="Close the report dialog"),
        Binding("ctrl+s", "run", "Write", id="report.write", tooltip="Write the report file"),
    ]

    def __init__(self, project_id: str) -> None:
        super().__init__()
        self.project_id = project_id
        self.paths: dict = {}
        self.result: Optional[dict] = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Write a report of this project", classes="dialog-title")
            yield Static("One file for a ticket: model, machine, profiles, optimizations, benchmarks.",
                         classes="hint")
            yield from select_row("Format", "report-format", FORMAT_OPTIONS, "html")
            yield from field_row("File", TextInput("", placeholder="report.html", id="report-path", compact=True))
            yield from form_buttons("Write (ctrl+s)", "run", "close", cancel_label="Close")

    def on_mount(self) -> None:
        self.query_one("#report-path", Input).focus()
        self._find_paths()

    @app_work(group="report-paths", description="default report paths")
    def _find_paths(self) -> None:
        from sparsify_tui.services.report import default_report_path

        ws = self.app.workspace
        post_result(self, ReportPathsFound({f: str(default_report_path(ws, self.project_id, f))
                                            for f in ("html", "md", "json")}))

    @on(ReportPathsFound)
    def _paths_found(self, message: ReportPathsFound) -> None:
        self.paths = message.paths
        inp = self.query_one("#report-path", Input)
        if not inp.value:
            inp.value = self.paths.get(self._format(), "")

    def _format(self) -> str:
        value = self.query_one("#report-format", Select).value
        return value if isinstance(value, str) else "html"

    @on(Select.Changed, "#report-format")
    def _format_changed(self) -> None:
        inp = self.query_one("#report-path", Input)
        if not inp.value or inp.value in self.paths.values():  # still a default: follow the format
            inp.value = self.paths.get(self._format(), inp.value)

    def action_run(self) -> None:
        path = self.query_one("#report-path", Input).value.strip() or None
        self.show_form_error("Writing…")
        self._write(path, self._format())

    @app_work(group="report-write", description="write report")
    def _write(self, path: Optional[str], fmt: str) -> None:
        from sparsify_tui.services.report import write_report

        ws = self.app.workspace
        try:
            if path is not None and path == str(self.paths.get(fmt)):
                path = None  # the default path: its folder is created
            result = write_report(ws, self.project_id, path, fmt)
        except Exception as err:  # noqa: BLE001 - shown in the dialog
            post_result(self, ReportWritten(None, err))
            return
        post_result(self, ReportWritten(result))

    @on(ReportWritten)
    def _written(self, message: ReportWritten) -> None:
        if message.error is not None:
            from sparsify_tui.tui.widgets.dialogs import error_message

            self.show_form_error(f"[b red]{escape(error_message(message.error))}[/]")
            return
        self.result = message.result
        r = message.result or {}
        self.show_form_error(f"[b green]Wrote[/] {escape(str(r.get('path')))} ({format_bytes(r.get('bytes'), '?')}, "
                             f"{r.get('format')}).")

    def action_close(self) -> None:
        self.dismiss(self.result)
