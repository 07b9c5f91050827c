"""Reusable TUI widgets: charts (BarChart, LineChart), FilterableTable, dialogs, job progress (jobs.py)."""

from sparsify_tui.tui.widgets.charts import BarChart, LineChart
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog, ErrorDialog, error_message
from sparsify_tui.tui.widgets.tables import Column, FilterableTable, format_count, format_percent, format_shape

__all__ = [
    "BarChart", "LineChart", "Column", "FilterableTable", "ConfirmDialog", "ErrorDialog", "error_message",
    "format_count", "format_percent", "format_shape",
]
