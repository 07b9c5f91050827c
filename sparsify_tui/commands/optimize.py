"""CLI: ``sparsify-tui optimize`` (create an optimization) and ``sparsify-tui export`` (recipe + code).

    sparsify-tui optimize PROJECT --name NAME [--perf NAME|flops] [--loss NAME|approximated]
                          [--sparsity 0.85] [--balance 0.5] [--quantize] [--override WEIGHT=S ...] [--json]
    sparsify-tui optimize PROJECT --name NAME --quantize --max-drop D [--metric top1|nmse|kl|max_abs]
                          [--data FILE.npz [--labels KEY]] [--calibration minmax|entropy|percentile] [--json]
    sparsify-tui optimize PROJECT --name NAME --structure channel
                          (--sparsity R [--allocate] | --target-speedup X | --macs-reduction X)
                          [--max-sparsity 0.7] [--round-to N] [--override GROUP=R ...] [--quantize] [--json]
    sparsify-tui export PROJECT OPTIMIZATION [-o recipe.yaml]
                        [--code pytorch|pytorch-plain|keras|tensorflow [-O file.py]] [--json]
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from sparsify_tui.formatting import plural

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization

FRAMEWORK_CHOICES = ["pytorch", "pytorch-plain", "keras", "tensorflow"]


def register(sub) -> None:
    o = sub.add_parser("optimize", help="create an optimization (per-layer pruning + INT8) from a project's profiles")
    o.add_argument("project", metavar="PROJECT", help="project id or name")
    o.add_argument("--name", required=True, help="name of the new optimization")
    o.add_argument("--perf", metavar="NAME", default=None,
                   help="perf profile name or id, or 'flops' (default: newest perf profile, else FLOPS)")
    o.add_argument("--loss", metavar="NAME", default=None,
                   help="loss profile name or id, or 'approximated' (default: newest loss profile, else Approximated)")
    o.add_argument("--structure", choices=("unstructured", "channel"), default="unstructured",
                   help="what is pruned: single weights (default) or whole channels (a smaller dense model)")
    o.add_argument("--sparsity", type=float, default=None, metavar="S",
                   help="unstructured: target params-weighted average sparsity (default 0.85; 0 with --max-drop: "
                        "INT8 only); channel: the fraction R of channels removed from every prunable group "
                        "(default 0.3)")
    o.add_argument("--allocate", action="store_true",
                   help="channel: remove R of all prunable channels where it hurts least, instead of R per group")
    o.add_argument("--target-speedup", type=float, default=None, metavar="X",
                   help="channel: thin to an estimated X times faster model on onnxruntime, at the least loss")
    o.add_argument("--macs-reduction", type=float, default=None, metavar="X",
                   help="channel: thin to X times fewer MACs, at the least loss")
    o.add_argument("--round-to", type=int, default=None, metavar="N",
                   help="channel: kept channel counts round to a multiple of N (default: this CPU's NCHWc block)")
    o.add_argument("--balance", type=float, default=0.5, metavar="B",
                   help="0 = rank layers by time saved only, 1 = by loss sensitivity only (default 0.5)")
    o.add_argument("--quantize", action="store_true", help="add the INT8 quantization modifier")
    o.add_argument("--min-sparsity", type=float, default=None, metavar="S", help="filter: min layer sparsity (0.4)")
    o.add_argument("--max-sparsity", type=float, default=None, metavar="S",
                   help="per-layer cap (0.95); channel: per-group cap on the fraction removed (0.7)")
    o.add_argument("--override", action="extend", nargs="+", default=[], metavar="WEIGHT=S",
                   help="fix a layer's sparsity by weight name, or a channel group's ratio by group id "
                        "(GROUP=0 keeps it whole; repeatable)")
    g = o.add_argument_group("accuracy-controlled INT8 (with --quantize)")
    g.add_argument("--max-drop", default=None, metavar="D",
                   help="search the fastest INT8 config whose metric stays within D: absolute drop for top1 "
                        "(0.01 = 1 point), the value itself for nmse/kl/max_abs")
    g.add_argument("--metric", default=None, metavar="M",
                   help="top1 | nmse | kl | max_abs (default from the model outputs; the choice is printed)")
    g.add_argument("--data", default=None, metavar="FILE", help="sample inputs .npz (+ labels) or .npy")
    g.add_argument("--labels", default=None, metavar="KEY", help="key of the labels array in --data (default labels)")
    g.add_argument("--calibration", default=None, metavar="METHOD", help="minmax (default) | entropy | percentile")
    g.add_argument("--calibration-size", default=None, metavar="N", help="calibration batches of 1 item (16)")
    o.add_argument("--json", action="store_true", help="print the optimization as JSON")
    o.set_defaults(handler=_optimize)

    e = sub.add_parser("export", help="write an optimization's SparseML recipe (YAML) and integration code")
    e.add_argument("project", metavar="PROJECT", help="project id or name")
    e.add_argument("optimization", metavar="OPTIMIZATION", help="optimization name or id")
    e.add_argument("-o", "--output", metavar="RECIPE.yaml", default=None,
                   help="recipe path (default <project dir>/recipes/<name>.yaml)")
    e.add_argument("--code", choices=FRAMEWORK_CHOICES, default=None,
                   help="also write integration code for this framework")
    e.add_argument("-O", "--code-output", metavar="FILE.py", default=None,
                   help="code path (default next to the recipe: <name>_<framework>.py)")
    e.add_argument("--json", action="store_true", help="print the written paths as JSON")
    e.set_defaults(handler=_export)


def _ws():
    from sparsify_tui.store import Workspace

    return Workspace()


def summary(opt: "Optimization") -> dict:
    """The JSON printed by ``optimize --json``: the stored record (an
    :class:`~sparsify_tui.optimization.record.Optimization`) without the per-layer curves and the per-node
    times; ``model`` and ``layers`` last."""
    rec = opt.to_dict()
    drop = {"time_curve", "loss_curve", "gain_curve"}
    out = {k: v for k, v in rec.items() if k not in ("layers", "model")}
    out["model"] = {k: v for k, v in rec["model"].items() if k not in ("perf_nodes", "channel_time_model",
                                                                        "channel_layers")}
    tm = rec["model"].get("channel_time_model")
    if tm:  # the per-node time model is large: its kind and calibration only
        out["model"]["channel_time_model"] = {k: tm.get(k) for k in ("kind", "description", "round_to", "calibration",
                                                                      "batch_size", "core_count")}
    out["layers"] = [{k: v for k, v in l.items() if k not in drop} for l in rec["layers"]]
    return out


def _optimize(args) -> int:
    from sparsify_tui.cli import print_json
    from sparsify_tui.errors import ProjectError
    from sparsify_tui.services.optimizations import create_optimization

    overrides = {}
    for item in args.override:
        if "=" not in item:
            raise ProjectError(f"--override {item!r} is not WEIGHT=SPARSITY: e.g. --override conv1.weight=0.5")
        k, v = item.rsplit("=", 1)
        try:
            overrides[k] = float(v)
        except ValueError:
            raise ProjectError(f"--override {item!r}: {v!r} is not a number") from None
    searched = [f for f, v in (("--max-drop", args.max_drop), ("--metric", args.metric), ("--data", args.data),
                                ("--labels", args.labels), ("--calibration", args.calibration),
                                ("--calibration-size", args.calibration_size)) if v is not None]
    channel = args.structure == "channel"
    if searched:
        if channel:
            raise ProjectError(f"{searched[0]} belongs to the INT8 search of an unstructured optimization: drop "
                               "--structure channel (a channel optimization takes --quantize alone)")
        return _optimize_int8(args, overrides, searched)
    extra = {k: v for k, v in (("min_sparsity", args.min_sparsity), ("max_sparsity", args.max_sparsity))
             if v is not None}
    targets = [f for f, v in (("--target-speedup", args.target_speedup), ("--macs-reduction", args.macs_reduction))
               if v is not None]
    if not channel:
        used = targets + [f for f, v in (("--allocate", args.allocate), ("--round-to", args.round_to)) if v]
        if used:
            raise ProjectError(f"{used[0]} is a channel-pruning setting: add --structure channel")
    else:
        if len(targets) > 1 or (targets and args.sparsity is not None):
            raise ProjectError("give one channel target: --sparsity R, --target-speedup X or --macs-reduction X")
        extra["structure"] = "channel"
        if args.target_speedup is not None:
            extra.update(target="speedup", target_speedup=args.target_speedup)
        elif args.macs_reduction is not None:
            extra.update(target="macs", macs_reduction=args.macs_reduction)
        else:
            extra["target"] = "sparsity" if args.allocate else "uniform"
        if args.round_to is not None:
            if args.round_to < 1:
                raise ProjectError(f"--round-to {args.round_to} is not allowed: --round-to must be 1 or more")
            extra["round_to"] = args.round_to
    sparsity = args.sparsity if args.sparsity is not None else (0.3 if channel else 0.85)
    ws = _ws()
    project = ws.get_project(args.project)
    opt = create_optimization(ws, project["id"], args.name, perf=args.perf, loss=args.loss, sparsity=sparsity,
                              balance=args.balance, quantize=args.quantize, settings=extra, overrides=overrides)
    if args.json:
        print_json(summary(opt))
        return 0
    print(render_text(opt, project["name"]))
    return 0


def _optimize_int8(args, overrides: dict, flags: list) -> int:
    """``optimize --quantize --max-drop D``: the INT8 search as an ``int8_search`` job in this process (the
    measuring lock, progress on stderr); bad arguments fail before the job exists."""
    from sparsify_tui.cli import print_json, stderr_progress
    from sparsify_tui.errors import ProjectError
    from sparsify_tui.jobs import run_here
    from sparsify_tui.services.int8 import int8_settings
    from sparsify_tui.services.optimizations import get_optimization

    if not args.quantize:
        raise ProjectError(f"{flags[0]} belongs to the INT8 search: add --quantize (and --max-drop D)")
    if args.max_drop is None:
        raise ProjectError("the INT8 search needs a budget: add --max-drop D (e.g. 0.01 for 1 point of top-1)")
    if overrides or args.min_sparsity is not None or args.max_sparsity is not None:
        raise ProjectError("--override/--min-sparsity/--max-sparsity are not used with --max-drop: create the "
                           "INT8 optimization first, then edit it")
    ws = _ws()
    project = ws.get_project(args.project)
    job_args = {"name": args.name, "perf": args.perf, "loss": args.loss, "sparsity": args.sparsity,
                "balance": args.balance, "max_drop": args.max_drop, "metric": args.metric, "data": args.data,
                "labels": args.labels, "calibration": args.calibration, "calibration_size": args.calibration_size}
    # the defaults filled in; run_here's job check (name free, data and labels) refuses bad ones before a record
    checked = int8_settings(project, job_args)
    job_args = {k: v for k, v in checked.items() if k != "dims" and v is not None}
    summary = run_here(ws, project["id"], "int8_search", job_args, progress=stderr_progress(args.json))
    if args.sparsity is None:
        print("sparsity 0 (INT8 only): give --sparsity to prune too", file=sys.stderr)
    opt = get_optimization(ws, project["id"], summary["optimization"])
    if args.json:
        print_json(summary_json(opt))
        return 0
    print(render_int8_text(opt))
    print(render_text(opt, project["name"]))
    return 0


def summary_json(opt: "Optimization") -> dict:
    """:func:`summary` (the ``optimize --json`` document)."""
    return summary(opt)


def render_int8_text(opt: "Optimization") -> str:
    """The INT8 search of an optimization for the CLI: metric and why, budget, every trial, per-layer states."""
    from sparsify_tui.formatting import format_fixed as _fmt
    from sparsify_tui.optimization.int8_search import layer_states

    s = opt.quantization.search
    if s is None:
        return ""
    lines = [
        f"metric: {s.metric} ({s.metric_reason})",
        f"budget: --max-drop {s.max_drop:g} = {s.budget_units}",
        f"data: {s.data or 'synthetic'}, {s.eval_items} items evaluated, calibration {s.calibration_method} on "
        f"{s.calibration_size} batches" + (f", FP32 accuracy {s.accuracy_fp32:.4f}" if s.accuracy_fp32 is not None
                                             else ""),
        f"ranking: {s.ranking_source or 'not needed (full INT8 fits)'}",
        f"result: {s.status}; {plural(len(s.trials), 'trial')} in {s.seconds:.1f} s; FP32 {_fmt(s.fp32_ms, '.3f')} ms/batch "
        f"(short interleaved timing, {s.timing.get('rounds')} rounds)",
        "  trial  FP32 groups  FP32 nodes  metric      within  median ms  speedup  note",
    ]
    for t in s.trials:
        mark = "*" if t.index == s.chosen else " "
        lines.append(f"{mark} {t.index:>4}  {t.groups:>11}  {t.excluded_count:>10}  {t.metric_value:<10.4g}  "
                     f"{'yes' if t.within_budget else 'no ':<6}  {_fmt(t.median_ms, '.3f'):>9}  "
                     f"{_fmt(t.speedup):>6}x  {t.note}")
    lines.append("  (* = chosen: the fastest trial within budget)")
    rows = [r for r in layer_states(opt.quantization, opt.layers) if r["state"] == "FP32"]
    if rows and opt.quantization.enabled:
        lines.append(f"  layers kept FP32 ({len(rows)}):")
        for r in rows[:20]:
            lines.append(f"    {str(r['node_id'])[:40]:<40} INT8 sens. {_fmt(r['sensitivity'], '.3g', '-'):>9}  {r['why']}")
        if len(rows) > 20:
            lines.append(f"    ... {len(rows) - 20} more (--json lists them)")
    return "\n".join(lines)


def measured_lines(opt: "Optimization") -> list:
    """The applied model's accuracy and its measured speedup next to the estimate, for every structure:
    ``applied: output vs baseline NMSE 0.0183, top-1 agreement 96.9% on 16 batches`` and ``measured (benchmark
    'b1', batch 1, 2 cores): speedup 3.16x vs estimated 2.95x``; how to get them when they are missing."""
    from sparsify_tui.formatting import format_fixed as _fmt

    lines = []
    a = opt.applied
    if a is not None:
        d = a.output_diff or {}
        parts = [f"NMSE {_fmt(d.get('nmse'), '.4g')}"]
        if d.get("top1_agreement") is not None:
            parts.append(f"top-1 agreement {d['top1_agreement']:.1%}")
        if d.get("accuracy") is not None:
            parts.append(f"top-1 accuracy {d['accuracy']:.1%}"
                         + (f" (baseline {d['accuracy_baseline']:.1%})" if d.get("accuracy_baseline") is not None
                            else ""))
        lines.append("  applied: output vs baseline "
                     f"{', '.join(parts)}" + (f" on {d['samples']} batches" if d.get("samples") else ""))
    m = opt.measured
    if m is not None and m.speedup is not None:
        stale = " (stale: the optimization changed since)" if m.stale else ""
        lines.append(f"  measured (benchmark {m.benchmark_name!r}, batch {m.batch_size}, "
                     f"{plural(m.core_count, 'core')}): speedup {_fmt(m.speedup)}x vs estimated "
                     f"{_fmt(m.estimated_speedup)}x{stale}")
    else:
        lines.append("  measured: not yet (apply it, then benchmark it against the baseline)")
    return lines


def render_text(opt: "Optimization", project_name: str) -> str:
    """Human-readable summary of a stored, evaluated optimization for the CLI (its structure's layout)."""
    if opt.settings.structure == "channel":
        from sparsify_tui.commands.channel import render_channel_text

        return render_channel_text(opt, project_name)
    return _render_unstructured(opt, project_name)


def _fp32_count(opt: "Optimization") -> str:
    """"N layers" kept FP32, plus the node count when it differs (an INT8 search also keeps the nodes between
    layers FP32)."""
    excluded = set(opt.quantization.excluded or [])
    layers = sum(1 for l in opt.layers if l.node_id in excluded)
    return f"{layers} layers" + (f" ({len(excluded)} nodes)" if len(excluded) != layers else "")


def _render_unstructured(opt: "Optimization", project_name: str) -> str:
    """Human-readable summary of a stored, evaluated optimization (an
    :class:`~sparsify_tui.optimization.record.Optimization`) for the CLI."""
    from sparsify_tui.formatting import format_fixed as _fmt, shell_arg
    from sparsify_tui.optimization.estimates import recovery_text

    est, st, ep, q = opt.estimates, opt.settings, opt.epochs, opt.quantization
    lines = [
        f"optimization {opt.name!r} ({opt.id}) of project {project_name!r}",
        f"  profiles: perf {opt.perf_profile_name}, loss {opt.loss_profile_name}",
        f"  target sparsity {st.sparsity:.2f}, achieved {est.avg_sparsity:.3f} (params-weighted), "
        f"balance {st.balance:.2f}",
        f"  quantization: {'INT8' if q.enabled else 'off'}"
        + (f", {_fp32_count(opt)} kept FP32" if q.enabled else ""),
        f"  epochs: stabilize to {ep.pruning_start_epoch}, prune to {ep.pruning_end_epoch}, "
        f"fine-tune to {ep.total_epochs}, update every {ep.update_frequency}",
        "  estimates:",
        f"    {est.sparse_runtime}: {_fmt(est.sparse_ms)} ms/batch, speedup {_fmt(est.sparse_speedup)}x (est.)",
        f"    onnxruntime: {_fmt(est.ort_ms)} ms/batch, speedup {_fmt(est.ort_speedup)}x "
        f"(no gain from sparsity; INT8 {'measured' if est.int8_measured else 'not measured'}"
        + (f": {est.int8_source}" if est.int8_source else "") + ")",
        f"    FLOPs reduction {_fmt(est.flops_reduction)}x, params compression "
        f"{_fmt(est.params_compression)}x, est. recovery {recovery_text(est.est_recovery, opt.loss_profile)}",
        *measured_lines(opt),
        "  layers (weight name, sparsity, note):",
    ]
    for l in opt.layers:
        note = "override" if l.override else (l.reason or "")
        lines.append(f"    {l.weight_name[:48]:<48} {l.sparsity:.3f}  {note}")
    for w in opt.all_warnings():  # the TUI's card and the report list the same
        lines.append(f"  warning: {w}")
    lines.append(f"next: sparsify-tui export {shell_arg(project_name)} {shell_arg(opt.name)} --code pytorch-plain")
    return "\n".join(lines)


def _export(args) -> int:
    from sparsify_tui.cli import print_json
    from sparsify_tui.errors import ProjectError
    from sparsify_tui.services.optimizations import export_optimization

    if args.code_output and not args.code:
        raise ProjectError("-O/--code-output needs --code FRAMEWORK: e.g. --code pytorch-plain -O train_prune.py")
    ws = _ws()
    project = ws.get_project(args.project)
    res = export_optimization(ws, project["id"], args.optimization, recipe_path=args.output,
                              framework=args.code, code_path=args.code_output)
    if args.json:
        print_json(res)
        return 0
    print(f"recipe: {res['recipe_path']}  ({res['layers']} pruned weights, {len(res['modifiers'])} modifiers)")
    if res["code_path"]:
        print(f"code:   {res['code_path']}  ({res['framework']})")
    for w in res["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    for n in res.get("notes") or []:
        print(f"note: {n}", file=sys.stderr)
    return 0
