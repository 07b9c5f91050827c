"""Benchmarks section: measured baseline-vs-optimized runs; apply and export an optimized .onnx."""

from sparsify_tui.tui.benchmarks.dialogs import ApplyDialog, BenchmarkDialog
from sparsify_tui.tui.benchmarks.section import BenchmarksSection

__all__ = ["ApplyDialog", "BenchmarkDialog", "BenchmarksSection"]
