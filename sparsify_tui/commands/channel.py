"""CLI for channel pruning: ``sparsify-tui profile channel-calibration`` (the channel time model measured on this
server, stored with a perf profile) and ``sparsify-tui optimization show`` (an optimization's estimates next to
its measured benchmark), plus the text layout of a channel optimization.

    sparsify-tui profile channel-calibration PROJECT [--perf NAME] [--ratios 0.25,0.5,0.7] [--json]
    sparsify-tui optimization show PROJECT OPTIMIZATION [--json]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparsify_tui.cli import stderr_progress as _stderr_progress
from sparsify_tui.commands import profile_group

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization


def render_channel_text(opt: "Optimization", project_name: str) -> str:
    """Text summary of a channel optimization: target, estimates (onnxruntime, time model named, measured when
    benchmarked) and one line per group (channels, kept, ratio, est. ms, est. loss, note)."""
    from sparsify_tui.formatting import format_fixed as _fmt, shell_arg

    est, st, q = opt.estimates, opt.settings, opt.quantization
    target = {"uniform": f"uniform ratio {st.sparsity:.2f} per group",
              "sparsity": f"{st.sparsity:.2f} of all prunable channels (allocated)",
              "speedup": f"{st.target_speedup:.2f}x estimated speedup", "macs": f"{st.macs_reduction:.2f}x fewer MACs",
              }.get(st.target, st.target)
    if not q.enabled:
        int8 = ""
    elif est.int8_measured:
        int8 = f"; with INT8: {_fmt(est.ort_speedup)}x (est.)"
    else:  # no measured INT8 time (the FLOPS profile, or a profile without INT8): the gain is not known
        int8 = "; with INT8: not estimated (no measured INT8 time; benchmark the applied model)"
    lines = [
        f"optimization {opt.name!r} ({opt.id}) of project {project_name!r}: CHANNEL pruning",
        f"  profiles: perf {opt.perf_profile_name}, loss {opt.loss_profile_name}",
        f"  target: {target}; achieved {_fmt(est.achieved, '.3f')}; balance {st.balance:.2f}, cap {st.max_sparsity:.2f}"
        f" per group, round_to {st.round_to}",
        f"  channels kept: {est.kept_channels} of {est.channels} prunable ({est.groups_thinned} groups thinned)",
        f"  quantization: {'INT8 after thinning' if q.enabled else 'off'}",
        "  estimates (onnxruntime, thinned dense model):",
        f"    FP32: {_fmt(est.ort_ms_fp32, '.3f')} ms/batch (baseline {_fmt(est.baseline_ms, '.3f')}), "
        f"speedup {_fmt(est.ort_speedup_fp32)}x (est.)" + int8,
        f"    time model: {est.time_model_note}",
        f"    MACs {_fmt(est.macs, '.4g')} -> {_fmt(est.macs_pruned, '.4g')} ({_fmt(est.macs_reduction)}x fewer), "
        f"params {_fmt(est.params, '.4g')} -> {_fmt(est.params_nonzero, '.4g')}",
        f"    est. output change {_fmt(est.est_output_change, '.4g')} ({est.loss_metric}, summed over groups)",
    ]
    from sparsify_tui.commands.optimize import measured_lines

    lines += measured_lines(opt)
    timed = est.baseline_ms is not None  # group ms only from a measured perf profile (FLOPS: relative units)
    lines.append(f"  groups (id, channels -> kept, ratio, {'est. ms' if timed else 'est. speedup'}, est. loss, note):")
    for l in opt.layers:
        note = "override" if l.override else (l.reason or "")
        kept = l.kept if l.kept is not None else l.channels
        t = _fmt(l.est_ms, '.3f') if timed else _fmt(l.est_speedup) + "x"
        lines.append(f"    {l.weight_name[:40]:<40} {l.channels:>5} -> {kept:<5} {l.sparsity:.3f}  "
                     f"{t:>8}  {_fmt(l.est_loss, '.3g'):>8}  {note[:60]}")
    for w in opt.all_warnings():  # the TUI's card and the report list the same
        lines.append(f"  warning: {w}")
    lines.append(f"next: sparsify-tui apply {shell_arg(project_name)} {shell_arg(opt.name)} --json, then "
                 f"sparsify-tui benchmark {shell_arg(project_name)} -O {shell_arg(opt.name)}")
    return "\n".join(lines)


def cmd_calibrate(args) -> int:
    from sparsify_tui.cli import print_json
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
    from sparsify_tui.cli import print_json
    from sparsify_tui.commands.optimize import render_text, summary
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
    c.set_defaults(handler=cmd_calibrate)

    o = sub.add_parser("optimization", help="show an optimization (estimates next to its measured benchmark)")
    osub = o.add_subparsers(dest="optimization_cmd", metavar="CMD")
    o.set_defaults(handler=lambda args: (o.print_help(), 2)[1])
    s = osub.add_parser("show", help="show an optimization: settings, estimates, measured speedup, rows")
    s.add_argument("project", metavar="PROJECT", help="project id or name")
    s.add_argument("optimization", metavar="OPTIMIZATION", help="optimization name or id")
    s.add_argument("--json", action="store_true", help="print the optimization as JSON (optimize --json's layout)")
    s.set_defaults(handler=cmd_show)
