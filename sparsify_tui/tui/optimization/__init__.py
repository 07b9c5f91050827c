"""Optimization section: per-layer pruning + INT8 configurations, estimates, recipe and code export."""

from sparsify_tui.tui.optimization.dialogs import CreateOptimizationDialog, ExportDialog, SparsityDialog
from sparsify_tui.tui.optimization.section import OptimizationSection

__all__ = ["CreateOptimizationDialog", "ExportDialog", "OptimizationSection", "SparsityDialog"]
