"""A benchmark's head (:class:`~sparsify_tui.benchmark.runner.BenchmarkResult`): ``sparsify-tui benchmark`` prints
it above its table, the Benchmarks screen shows it above its charts. The accuracy table is shared one level down
(:func:`sparsify_tui.benchmark.summary.accuracy_table`)."""

from __future__ import annotations

from sparsify_tui.text import Fact


def head_facts(result) -> list:
    """The benchmark's name, when it ran, the warm-up and timed runs of every row, and the models (the baseline
    first); across runtimes, the runtimes measured and what every speedup is against (the reference)."""
    facts = [Fact("benchmark", f"{result.name} · {result.created[:16].replace('T', ' ')} · warm-up {result.warmup}, "
                               f"{result.iterations} timed runs per row · " + ", ".join(m.label for m in result.models))]
    if len(result.runtimes) > 1:
        facts.append(Fact("runtimes", ", ".join(r["label"] for r in result.runtimes)
                          + f" · speedups vs the {result.reference_label}"))
    return facts


__all__ = ["head_facts"]
