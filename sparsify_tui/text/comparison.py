"""The two sides and the totals of a perf profile comparison
(:class:`~sparsify_tui.profiling.perf_compare.PerfComparison`): ``sparsify-tui compare`` prints them above its
tables, the compare screen (`=` in Performance Profiles) shows them in its header. The measured part of an
optimization comparison (:class:`~sparsify_tui.optimization.comparison.OptimizationComparison`): ``sparsify-tui
compare --optimizations`` prints it, the Measured tab of `=` in Optimization shows it."""

from __future__ import annotations

from typing import Optional

from sparsify_tui.formatting import format_bytes, format_ms, format_percent, format_value, format_x, plural
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


def measured_facts(measured: dict) -> list:
    """What was measured of one compared optimization (``measured``: its entry of
    ``OptimizationComparison.measured``; the front end puts its name above): the applied model (stale or not, its
    file size in MB, its output difference from the baseline: NMSE, max |diff|, top-1 agreement as %) and each
    benchmark run of it (batch, cores, median ms per batch, items/s, measured speedup)."""
    a = measured.get("applied")
    if a:
        d = a.get("output_diff") or {}
        stale = " (stale: settings changed since)" if a.get("stale") else ""
        facts = [Fact("applied", f"yes{stale}, {format_bytes(a.get('file_size_bytes'), none='? MB')}; output vs "
                                 f"baseline: NMSE {format_value(d.get('nmse'))}, max |diff| "
                                 f"{format_value(d.get('max_abs'))}, top-1 agreement "
                                 f"{format_percent(d.get('top1_agreement'), none='-')}")]
    else:
        facts = [Fact("applied", "not yet (a in Benchmarks, or sparsify-tui apply)")]
    for b in measured.get("benchmarks") or []:
        facts.append(Fact(f"benchmark {b['benchmark']}",
                          f"batch {b['batch_size']}, {plural(b['core_count'], 'core')}: median "
                          f"{format_ms(b['median_ms'])} ms, {b['items_per_second']:.1f} items/s, "
                          f"{format_x(b['speedup'])} (measured)"))
    if not measured.get("benchmarks"):
        facts.append(Fact("benchmarks", "none yet"))
    return facts


__all__ = ["comparison_facts", "measured_facts", "side_fact"]
