"""CLI: ``sparsify-tui profile perf PROJECT_OR_MODEL`` (performance profiles).

A model path runs :func:`sparsify_tui.profiling.perf.profile_performance` in this process without a
workspace. A project (id or name) runs a ``perf_profile`` job through :func:`sparsify_tui.jobs.run_here`
(machine-wide measuring lock, stored record + blob). ``--json`` prints exactly ``PerfProfile.to_dict()``
on stdout; progress goes to stderr (rate-limited), so stdout stays pure JSON.

The ``profile`` group itself comes from :func:`sparsify_tui.commands.profile_group`, shared with ``profile loss``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sparsify_tui.commands import add_runtime_options, looks_like_model, profile_group, runtime_args
from sparsify_tui.commands.output import stderr_progress as _stderr_progress
from sparsify_tui.text import cli_lines
from sparsify_tui.text.perf import summary_facts


def register(sub) -> None:
    from sparsify_tui.commands.output import add_memory_option

    prof = profile_group(sub)
    p = prof.add_parser(
        "perf",
        help="measure a performance profile (per-layer times, INT8, pruned estimates)",
        description="Measure how fast each layer of a model runs on this machine with a runtime: latency "
                    "(median, p90, mean, min ms per batch), items/s, per-node times attributed to the original "
                    "ONNX nodes, measured INT8, and estimated pruned times (estimates for a sparse-kernel "
                    "runtime; the dense runtimes gain nothing from unstructured sparsity).",
    )
    p.add_argument("target", metavar="PROJECT_OR_MODEL", help="project id or name, or a path to an .onnx model")
    p.add_argument("--name", default=None, help="profile name (default: the project's setup name, or 'baseline')")
    p.add_argument("--batch-size", type=int, default=None, help="items per batch (default: project setup, or 1)")
    p.add_argument("--cores", type=int, default=None, help="cores / intra-op threads (default: project setup, or all)")
    add_runtime_options(p)
    p.add_argument("--warmup", type=int, default=None, help="unprofiled warm-up runs (default 5)")
    p.add_argument("--iterations", type=int, default=None, help="unprofiled timed runs (default 30)")
    p.add_argument("--data", default=None, metavar="FILE.npz", help="sample data (.npz by input name, or .npy)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="value of a symbolic dim or scalar input (repeatable): seq=128, x:2=48, sr=16000")
    p.add_argument("--no-int8", action="store_true", help="skip the measured INT8 profile")
    p.add_argument("--json", action="store_true", help="print the profile as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_memory_option(p)
    p.set_defaults(handler=cmd_profile_perf)


def cmd_profile_perf(args) -> int:
    from sparsify_tui.analysis.shapes import parse_dim_args
    from sparsify_tui.commands.output import print_json, print_warnings
    from sparsify_tui.services.job_settings import perf_settings

    dims = parse_dim_args(args.dim) if args.dim else None
    job_args = {"name": args.name, "batch_size": args.batch_size, "core_count": args.cores,
                "warmup": args.warmup, "iterations": args.iterations,
                "data": str(Path(args.data).absolute()) if args.data else None,
                "int8": not args.no_int8, "dims": dims, **runtime_args(args)}
    job_args = {k: v for k, v in job_args.items() if v is not None}
    if looks_like_model(args.target):
        from sparsify_tui.profiling.perf import profile_performance

        # bad arguments and inputs fail here, before any progress line
        s = perf_settings({}, job_args, model_path=args.target)
        prof = profile_performance(args.target, progress=_stderr_progress(args.quiet), **s)
    else:
        from sparsify_tui.jobs import run_here
        from sparsify_tui.services.profiles import load_perf_profile
        from sparsify_tui.store import Workspace

        ws = Workspace()
        project = ws.get_project(args.target)
        # bad arguments and inputs are refused by run_here before a job record exists (jobs.registry.JOB_CHECKS)
        summary = run_here(ws, project["id"], "perf_profile", job_args, progress=_stderr_progress(args.quiet))
        prof = load_perf_profile(ws, project["id"], summary["record_id"])
        if not args.json:
            print(f"stored as perf profile {summary['record_id']} in project {project['name']!r}", file=sys.stderr)
    print_warnings(prof.warnings)
    if args.json:
        print_json(prof.to_dict())
    else:
        print(format_profile(prof))
    return 0


def format_profile(prof, top: int = 15) -> str:
    """Human-readable summary: model latency, INT8, estimates, and the ``top`` slowest nodes (ms: the median over
    the profiled runs, scaled to the measured median; its mean and interquartile range over the runs beside it)."""
    facts = summary_facts(prof)
    lines = cli_lines(facts[:1]) + cli_lines(facts[1:], "  ") + [""]
    rows = [("node id", "op", "ms", "mean ms", "IQR ms", "raw ms", "share", "GFLOP/s", "est. 0.9 ms", "INT8 ms")]

    def ms(v) -> str:
        return f"{v:.3f}" if v is not None else "-"

    for n in sorted(prof.nodes, key=lambda n: -n.time_ms)[:top]:
        rows.append((n.id[-48:], n.op_type, ms(prof.node_ms(n)), ms(prof.node_ms(n, "mean")),
                     ms(prof.node_ms(n, "spread")), ms(n.time_ms), f"{n.share * 100:.1f}%",
                     f"{n.gflops_per_s:.1f}" if n.gflops_per_s else "-",
                     ms(prof.node_ms(n, '0.9')), ms(prof.node_ms(n, "int8"))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        lines.append("  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)
