"""CLI: ``sparsify-tui optimize`` (create an optimization) and ``sparsify-tui export`` (recipe + code).

    sparsify-tui optimize PROJECT --name NAME [--perf NAME|flops] [--loss NAME|approximated]
                          [--sparsity 0.85] [--balance 0.5] [--quantize] [--override WEIGHT=S ...] [--json]
    sparsify-tui optimize PROJECT --name NAME --quantize --max-drop D [--metric top1|nmse|kl|max_abs|FILE.py:FN]
                          [--data FILE.npz [--labels KEY]] [--calibration minmax|entropy|percentile] [--json]
    sparsify-tui optimize PROJECT --name NAME --structure channel
                          (--sparsity R [--allocate] | --target-speedup X | --macs-reduction X)
                          [--max-sparsity 0.7] [--round-to N] [--override GROUP=R ...] [--quantize]
                          [--data FILE.npz [--labels KEY]] [--importance auto|l2|bn_scale|activation|thinet] [--json]
    sparsify-tui optimize PROJECT --name NAME --structure channel --max-drop D --data FILE.npz
                          [--metric top1|nmse|kl|max_abs|FILE.py:FN] [--labels KEY] [--quantize] [--calibration-size N]
                          [--importance ...] [--max-trials N] [--json]
    sparsify-tui export PROJECT OPTIMIZATION [-o recipe.yaml]
                        [--code pytorch|pytorch-plain|keras|tensorflow [-O file.py]] [--json]
"""

from __future__ import annotations

import sys

from sparsify_tui.commands import add_runtime_options, runtime_args

FRAMEWORK_CHOICES = ["pytorch", "pytorch-plain", "keras", "tensorflow"]


def register(sub) -> None:
    from sparsify_tui.commands.output import add_memory_option

    o = sub.add_parser("optimize", help="create an optimization (per-layer pruning + INT8) from a project's profiles")
    o.add_argument("project", metavar="PROJECT", help="project id or name")
    o.add_argument("--name", required=True, help="name of the new optimization")
    o.add_argument("--perf", metavar="NAME", default=None,
                   help="perf profile name or id, or 'flops' (default: newest perf profile, else FLOPS)")
    o.add_argument("--loss", metavar="NAME", default=None,
                   help="loss profile name or id, or 'approximated' (default: newest loss profile, else Approximated)")
    o.add_argument("--structure", default="unstructured", metavar="NAME",
                   help="what is pruned: unstructured (single weights, default), channel (whole channels: a smaller "
                        "dense model), or another registered pruning structure")
    o.add_argument("--sparsity", type=float, default=None, metavar="S",
                   help="unstructured: target params-weighted average sparsity (default 0.85; 0 with --max-drop: "
                        "INT8 only); channel: the fraction R of channels removed from every prunable group "
                        "(default 0.3)")
    o.add_argument("--allocate", action="store_true",
                   help="channel: remove R of all prunable channels where it hurts least, instead of R per group")
    o.add_argument("--target-speedup", type=float, default=None, metavar="X",
                   help="channel: thin to an estimated X times faster model on the target runtime (--engine, --precision), at the least loss")
    o.add_argument("--macs-reduction", type=float, default=None, metavar="X",
                   help="channel: thin to X times fewer MACs, at the least loss")
    o.add_argument("--round-to", type=int, default=None, metavar="N",
                   help="channel: kept channel counts round to a multiple of N (default: this CPU's NCHWc block)")
    o.add_argument("--importance", choices=("auto", "l2", "bn_scale", "activation", "thinet"), default=None,
                   help="channel: which channels go: auto (default: ThiNet on the sample data when apply has it, else "
                        "l2), l2 (group L2 norm), bn_scale, activation (weight norm x mean |activation|), thinet "
                        "(greedy on the consumers' output)")
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
                        "(0.01 = 1 point), the value itself for nmse/kl/max_abs, the allowed worsening of a metric "
                        "of your own vs FP32")
    g.add_argument("--metric", default=None, metavar="M",
                   help="top1 | nmse | kl | max_abs | FILE.py:FUNCTION, a metric of your own called as "
                        "FUNCTION(outputs, reference, labels) -> float (default from the model outputs; the choice "
                        "is printed)")
    g.add_argument("--data", default=None, metavar="FILE", help="sample inputs .npz (+ labels) or .npy")
    g.add_argument("--labels", default=None, metavar="KEY", help="key of the labels array in --data (default labels)")
    g.add_argument("--calibration", default=None, metavar="METHOD", help="minmax (default) | entropy | percentile")
    add_runtime_options(g)
    g.add_argument("--calibration-size", default=None, metavar="N",
                   help="calibration batches of 1 item (INT8 search: 16; budget search: 64 items, at most half the "
                        "data, fit the reconstruction and the rest score it)")
    b = o.add_argument_group("budget search (--structure channel --max-drop D --data FILE.npz)")
    b.add_argument("--max-trials", default=None, metavar="N",
                   help="thinned trials at most (7): targets on a ladder from 1.5x, then bisection")
    add_runtime_options(b, many=True)
    o.add_argument("--json", action="store_true", help="print the optimization as JSON")
    add_memory_option(o)
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


def _optimize(args) -> int:
    from sparsify_tui.commands.output import print_json
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
    if channel:  # sample data (and labels) are the channel optimization's own: apply calibrates and scores on them
        searched = [f for f in searched if f not in ("--data", "--labels")]
    elif args.importance is not None:
        raise ProjectError("--importance is a channel-pruning setting: add --structure channel")
    if searched:
        if channel:
            return _optimize_budget(args, overrides, searched)
        if args.structure != "unstructured":
            raise ProjectError(f"{searched[0]} belongs to the INT8 search, which makes unstructured optimizations: "
                               f"drop --structure {args.structure}")
        return _optimize_int8(args, overrides, searched)
    if args.max_trials is not None:
        raise ProjectError("--max-trials belongs to the budget search: add --structure channel --max-drop D "
                           "--data FILE.npz")
    extra = {k: v for k, v in (("min_sparsity", args.min_sparsity), ("max_sparsity", args.max_sparsity))
             if v is not None}
    targets = [f for f, v in (("--target-speedup", args.target_speedup), ("--macs-reduction", args.macs_reduction))
               if v is not None]
    if not channel:
        extra["structure"] = args.structure  # any registered structure (build_record refuses an unknown one)
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
        if args.importance is not None:
            extra["importance"] = args.importance
        if args.data is not None or args.labels is not None:
            from sparsify_tui.services.optimizations import channel_data_settings

            extra.update(channel_data_settings(args.data, args.labels))
    sparsity = args.sparsity if args.sparsity is not None else (0.3 if channel else 0.85)
    ws = _ws()
    project = ws.get_project(args.project)
    from sparsify_tui.commands.optimization_text import render_text, summary

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
    from sparsify_tui.commands.output import stderr_progress
    from sparsify_tui.errors import ProjectError
    from sparsify_tui.jobs import run_here
    from sparsify_tui.services.job_settings import int8_settings
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
    checked = int8_settings(project, {**job_args, **runtime_args(args)})
    checked.update(checked.pop("run").to_dict())
    job_args = {k: v for k, v in checked.items() if k not in ("dims", "batch_size") and v is not None}
    summary = run_here(ws, project["id"], "int8_search", job_args, progress=stderr_progress(args.json))
    if args.sparsity is None:
        print("sparsity 0 (INT8 only): give --sparsity to prune too", file=sys.stderr)
    from sparsify_tui.commands.optimization_text import render_int8_text

    return _print_search_result(get_optimization(ws, project["id"], summary["optimization"]), project["name"],
                                args.json, render_int8_text)


def _print_search_result(opt, project_name: str, as_json: bool, render_search) -> int:
    """Print the optimization a search made: its JSON summary, or the search's text then the optimization's."""
    from sparsify_tui.commands.optimization_text import render_text, summary_json
    from sparsify_tui.commands.output import print_json

    if as_json:
        print_json(summary_json(opt))
        return 0
    print(render_search(opt))
    print(render_text(opt, project_name))
    return 0


def _optimize_budget(args, overrides: dict, flags: list) -> int:
    """``optimize --structure channel --max-drop D --data F``: the budget search as a ``budget_search`` job in this
    process (the measuring lock, progress on stderr); bad arguments fail before the job exists."""
    from sparsify_tui.commands.optimization_text import render_budget_text
    from sparsify_tui.commands.output import stderr_progress
    from sparsify_tui.errors import ProjectError
    from sparsify_tui.jobs import run_here
    from sparsify_tui.services.job_settings import budget_settings
    from sparsify_tui.services.optimizations import get_optimization

    if args.max_drop is None:
        raise ProjectError(f"{flags[0]} with --structure channel belongs to the budget search: add --max-drop D "
                           "(e.g. 0.01 for 1 point of top-1) with --data FILE.npz")
    fixed = [f for f, v in (("--sparsity", args.sparsity), ("--allocate", args.allocate or None),
                            ("--target-speedup", args.target_speedup), ("--macs-reduction", args.macs_reduction),
                            ("--override", overrides or None), ("--min-sparsity", args.min_sparsity),
                            ("--max-sparsity", args.max_sparsity), ("--round-to", args.round_to)) if v is not None]
    if fixed:
        raise ProjectError(f"{fixed[0]} is not used with --max-drop: the budget search chooses the channel target "
                           "itself (create the optimization first, then edit it)")
    ws = _ws()
    project = ws.get_project(args.project)
    job_args = {"name": args.name, "perf": args.perf, "loss": args.loss, "balance": args.balance,
                "max_drop": args.max_drop, "metric": args.metric, "data": args.data, "labels": args.labels,
                "quantize": args.quantize, "calibration": args.calibration,
                "calibration_size": args.calibration_size, "max_trials": args.max_trials,
                "importance": args.importance}
    # the defaults filled in; run_here's job check (name free, data and labels) refuses bad ones before a record
    checked = budget_settings(project, {**job_args, **runtime_args(args)})
    job_args = {k: v for k, v in checked.items() if k not in ("dims", "runtimes", "runtime_notes") and v is not None}
    job_args.update(runtime_args(args))
    result = run_here(ws, project["id"], "budget_search", job_args, progress=stderr_progress(args.json))
    return _print_search_result(get_optimization(ws, project["id"], result["optimization"]), project["name"],
                                args.json, render_budget_text)


def _export(args) -> int:
    from sparsify_tui.commands.output import print_json
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
    print(f"deploy: {res['deploy_path']}  ({res['runtime']}: how to run the optimized model as it was measured)")
    for w in res["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    for n in res.get("notes") or []:
        print(f"note: {n}", file=sys.stderr)
    return 0
