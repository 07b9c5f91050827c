"""Benchmarks: measured ms/batch of the baseline and its optimizations across batch sizes and core
counts (see :mod:`sparsify_tui.benchmark.runner`). Never imports textual."""

from sparsify_tui.benchmark.runner import (  # noqa: F401
    BenchmarkResult, BenchmarkRun, ModelSpec, benchmark_project, load_benchmark, run_benchmark,
)
