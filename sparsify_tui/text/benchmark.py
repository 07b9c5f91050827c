"""A benchmark's head (:class:`~sparsify_tui.benchmark.runner.BenchmarkResult`): ``sparsify-tui benchmark`` prints
it above its table, the Benchmarks screen shows it above its charts. The accuracy table is shared one level down
(:func:`sparsify_tui.benchmark.summary.accuracy_table`)."""

from __future__ import annotations

from sparsify_tui.text import Fact


def head_facts(result) -> list:
    """The benchmark's name, when it ran, the warm-up and timed runs of every row, and the models (the baseline
    first)."""
    return [Fact("benchmark", f"{result.name} · {result.created[:16].replace('T', ' ')} · warm-up {result.warmup}, "
                              f"{result.iterations} timed runs per row · " + ", ".join(m.label for m in result.models))]


__all__ = ["head_facts"]
