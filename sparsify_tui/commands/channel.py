"""CLI for channel pruning: ``sparsify-tui profile channel-calibration`` (the channel time model measured on this
server, stored with a perf profile) and ``sparsify-tui optimization show`` (an optimization's estimates next to
its measured benchmark; the text of a channel optimization is in :mod:`~sparsify_tui.commands.optimization_text`).

    sparsify-tui profile channel-calibration PROJECT [--perf NAME] [--ratios 0.25,0.5,0.7] [--json]
    sparsify-tui optimization show PROJECT OPTIMIZATION [--json]
"""

from __future__ import annotations

from sparsify_tui.commands import profile_group
from sparsify_tui.commands.output import stderr_progress as _stderr_progress


def cmd_calibrate(args) -> int:
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.jobs import run_here
    from sparsify_tui.jobs.handlers.channel_calibration import calibration_settings
    from sparsify_tui.services.profiles import perf_profile_extras
    from sparsify_tui.store import Workspace

    ws = Workspace()
    project = ws.get_project(args.project)
    job_args = {"perf": args.perf, "ratios": args.ratios}
    calibration_settings(ws, project, job_args)  # bad arguments fail here, before a job record exists
    summary = run_here(ws, project["id"], "channel_calibration", job_args, progress=_stderr_progress(args.json))
    calib = perf_profile_extras(ws, project["id"], summary["record_id"]).get("channel_calibration") or {}
    if args.json:
        print_json({"perf_profile": summary["record_id"], "channel_calibration": calib})
        return 0
    from sparsify_tui.formatting import format_fixed as _fmt, shell_arg

    print(f"channel calibration of perf profile {summary['name']!r} ({summary['record_id']}): "
          f"{calib.get('seconds', 0):.1f} s")
    for p in calib.get("points") or []:
        print(f"  ratio {p['ratio']:.2f}: median {_fmt(p.get('median_ms'), '.3f')} ms/batch, "
              f"MACs {_fmt(p.get('macs'), '.4g')}, speedup {_fmt(p.get('speedup'))}x")
    print(f"  fit: latency = {calib['latency']['a']:.3f} x node sum + {calib['latency']['g_ms']:.3f} ms; "
          f"mean relative error of the fitted node sums {_fmt(calib.get('fit_rel_error'), '.3f')}")
    for w in calib.get("warnings") or []:
        print(f"  warning: {w}")
    print(f"next: sparsify-tui optimize {shell_arg(project['name'])} --name N --structure channel "
          "--target-speedup 1.5")
    return 0


def cmd_show(args) -> int:
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.commands.optimization_text import render_text, summary
    from sparsify_tui.services.optimizations import get_optimization
    from sparsify_tui.store import Workspace

    ws = Workspace()
    project = ws.get_project(args.project)
    opt = get_optimization(ws, project["id"], args.optimization)
    if args.json:
        print_json(summary(opt))
    else:
        print(render_text(opt, project["name"]))
    return 0


def register(sub) -> None:
    from sparsify_tui.commands.output import add_memory_option

    group = profile_group(sub)
    c = group.add_parser(
        "channel-calibration",
        help="channel time model: thinned models profiled per node on this server (stored with a perf profile)",
        description="Thin the project's model uniformly at a few ratios, profile each per node with the same "
                    "attribution as a perf profile (and its unprofiled latency), fit each node's time against its "
                    "kept channels, and store the fit with the perf profile: channel optimizations then estimate "
                    "their speedup from measured times instead of MACs.")
    c.add_argument("project", metavar="PROJECT", help="project id or name")
    c.add_argument("--perf", metavar="NAME", default=None, help="perf profile name or id (default: the newest)")
    c.add_argument("--ratios", default=None, metavar="R1,R2",
                   help="uniform ratios of channels removed that are measured (default 0.25,0.5,0.7)")
    c.add_argument("--json", action="store_true", help="print the calibration as JSON")
    add_memory_option(c)
    c.set_defaults(handler=cmd_calibrate)

    o = sub.add_parser("optimization", help="show an optimization (estimates next to its measured benchmark)")
    osub = o.add_subparsers(dest="optimization_cmd", metavar="CMD")
    o.set_defaults(handler=lambda args: (o.print_help(), 2)[1])
    s = osub.add_parser("show", help="show an optimization: settings, estimates, measured speedup, rows")
    s.add_argument("project", metavar="PROJECT", help="project id or name")
    s.add_argument("optimization", metavar="OPTIMIZATION", help="optimization name or id")
    s.add_argument("--json", action="store_true", help="print the optimization as JSON (optimize --json's layout)")
    s.set_defaults(handler=cmd_show)
