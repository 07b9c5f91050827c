"""The two sides and the totals of a perf profile comparison
(:class:`~sparsify_tui.profiling.perf_compare.PerfComparison`): ``sparsify-tui compare`` prints them above its
tables, the compare screen (`=` in Performance Profiles) shows them in its header."""

from __future__ import annotations

from typing import Optional

from sparsify_tui.formatting import format_ms, plural
from sparsify_tui.text import Fact


def _x(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}×"


def side_fact(tag: str, side) -> Fact:
    """One side (``tag`` "A" or "B") of a comparison: the profile (and FP32 or INT8), batch, cores, the runtime
    (engine, version, precision), host and CPU, the measured median and p90 latency (ms per batch, unprofiled
    runs)."""
    lat = side.latency_ms or {}
    t = side.target or {}
    host = f"{t['hostname']} · " if t.get("hostname") else ""
    runtime = f"{t['runtime']} · " if t.get("runtime") else ""
    return Fact(tag, f"{side.label} · batch {side.batch_size} · {plural(side.core_count, 'core')} · {runtime}{host}"
                     f"{t.get('cpu_model') or 'CPU ?'} · median {format_ms(lat.get('median'))} ms "
                     f"(p90 {format_ms(lat.get('p90'))})")


def comparison_facts(cmp) -> list:
    """Side A, side B, and the totals: Σ of each side's rows (ms per batch, which every row adds up to) and their
    B/A, the B/A of the measured latencies (medians of unprofiled runs), and how many rows are unmatched."""
    t, u = cmp.totals, cmp.unmatched
    return [side_fact("A", cmp.a), side_fact("B", cmp.b),
            Fact("Σ rows", f"A {format_ms(t['a_ms'])} · B {format_ms(t['b_ms'])} ms (B/A {_x(t['ratio'])}) · "
                           f"latency B/A {_x(t['latency_ratio'])} · {u['rows']} unmatched")]


__all__ = ["comparison_facts", "side_fact"]
