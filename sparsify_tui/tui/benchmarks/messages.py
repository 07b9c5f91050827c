"""Results the Benchmarks section's workers post to it."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class BenchmarksListed(Message):
    """The project's benchmark records, and its ``benchmark``/``apply`` jobs still pending or running."""

    def __init__(self, records: list[dict], active_jobs: list[dict]) -> None:
        super().__init__()
        self.records = records
        self.active_jobs = active_jobs


class BenchmarkLoaded(Message):
    """One stored benchmark result (``benchmark.runner.BenchmarkResult``)."""

    def __init__(self, record_id: str, result: Any) -> None:
        super().__init__()
        self.record_id = record_id
        self.result = result


class BenchmarkJobSubmitted(Message):
    """A ``benchmark`` or ``apply`` job was started."""

    def __init__(self, job: dict) -> None:
        super().__init__()
        self.job = job


class BenchmarkDeleted(Message):
    """A benchmark record and its result were deleted."""

    def __init__(self, record_id: str) -> None:
        super().__init__()
        self.record_id = record_id


class BenchmarkDialogReady(Message):
    """Open the create dialog: the project's optimizations, its batch size and core count (from setup)."""

    def __init__(self, optimizations: list[dict], batch_size: int, core_count: int) -> None:
        super().__init__()
        self.optimizations = optimizations
        self.batch_size = batch_size
        self.core_count = core_count


class ApplyDialogReady(Message):
    """Open the apply dialog: the optimizations, each one's default .onnx path and state (applied, stale,
    not applied)."""

    def __init__(self, optimizations: list[dict], default_paths: dict[str, str], states: dict[str, str]) -> None:
        super().__init__()
        self.optimizations = optimizations
        self.default_paths = default_paths
        self.states = states
