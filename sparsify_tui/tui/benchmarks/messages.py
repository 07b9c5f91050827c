"""Results the Benchmarks section's workers post to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class BenchmarkLoaded(Message):
    """One stored benchmark result (``benchmark.runner.BenchmarkResult``)."""

    record_id: str
    result: Any


@dataclass
class BenchmarkDialogReady(Message):
    """Open the create dialog: the project's optimizations, its batch size and core count (from setup)."""

    optimizations: list[dict]
    batch_size: int
    core_count: int


@dataclass
class ApplyDialogReady(Message):
    """Open the apply dialog: the optimizations, each one's default .onnx path and state (applied, stale,
    not applied)."""

    optimizations: list[dict]
    default_paths: dict[str, str]
    states: dict[str, str]
