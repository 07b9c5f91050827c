"""Performance Profiles section: the FLOPS profile, measured profiles (view, add, rerun, delete)."""

from sparsify_tui.tui.perf.dialogs import PerfProfileDialog
from sparsify_tui.tui.perf.profile import PerfProfileView
from sparsify_tui.tui.perf.section import FlopsProfileView, PerfSection

__all__ = ["FlopsProfileView", "PerfProfileDialog", "PerfProfileView", "PerfSection"]
