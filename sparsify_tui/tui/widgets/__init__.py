"""Reusable TUI widgets: charts (BarChart, LineChart), FilterableTable, dialogs, job progress (jobs.py), check boxes
that read as text (toggles.py), the keys every section shares (keys.py), short labels (labels.py).

The names below are imported on first use (charts pull in plotext: the Projects screen starts without it)."""

from importlib import import_module

_WHERE = {
    "BarChart": "charts", "LineChart": "charts",
    "ConfirmDialog": "dialogs", "ErrorDialog": "dialogs", "error_message": "dialogs",
    "Column": "tables", "FilterableTable": "tables", "format_count": "tables", "format_percent": "tables",
    "format_shape": "tables",
}

__all__ = list(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"sparsify_tui.tui.widgets.{_WHERE[name]}"), name)
    raise AttributeError(name)
