"""Benchmarks: measured ms/batch of the baseline and its optimizations across batch sizes and core
counts (see :mod:`sparsify_tui.benchmark.runner`). Project benchmarks are run and stored by
:mod:`sparsify_tui.services.benchmarks`."""

from sparsify_tui.benchmark.runner import BenchmarkResult, BenchmarkRun, ModelSpec, run_benchmark  # noqa: F401
