"""Report dialog: write the open project's report (Markdown, self-contained HTML or JSON); `w` or the palette."""

from sparsify_tui.tui.report.dialog import ReportDialog

__all__ = ["ReportDialog"]
