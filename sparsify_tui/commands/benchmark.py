"""CLI: ``sparsify-tui benchmark`` (measured baseline vs optimized) and ``sparsify-tui apply`` (write the
optimized .onnx). Both run through :func:`sparsify_tui.jobs.run_here`, which takes the machine-wide
measuring lock, so they queue behind other measuring jobs instead of corrupting their numbers."""

from __future__ import annotations

from sparsify_tui.commands import add_runtime_options, runtime_args
from sparsify_tui.text import cli_lines
from sparsify_tui.text.benchmark import head_facts
from sparsify_tui.commands.output import stderr_progress as _stderr_progress


def _list_type(check, flag: str):
    """An argparse type for a comma-separated list checked by :mod:`sparsify_tui.settings`."""

    def parse(text: str) -> list[int]:
        import argparse

        from sparsify_tui import settings
        from sparsify_tui.errors import SparsifyError

        try:
            return settings.whole_list(text, getattr(settings, check), flag)
        except SparsifyError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return parse


def _fmt_table(result) -> str:
    rows = [("model", "batch", "cores", "median ms", "p90 ms", "p99 ms", "mean ms", "ms/item", "items/s", "speedup",
             "noise")]
    for r in result.runs:
        rows.append((r.model, str(r.batch_size), str(r.core_count), f"{r.median_ms:.3f}", f"{r.p90_ms:.3f}",
                     f"{r.p99_ms:.3f}", f"{r.mean_ms:.3f}", f"{r.ms_per_item:.3f}", f"{r.items_per_second:.1f}",
                     f"{r.speedup:.2f}x", "! " + ", ".join(r.noise(result.rounds)) if r.noise(result.rounds) else ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i in (0, 10) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    if any(r.noise(result.rounds) for r in result.runs):
        lines.append("! noisy: the machine was busy while these ran (p90 > 2x median, or rounds > 20% apart); "
                     "rerun the benchmark")
    return "\n".join(lines)


def cmd_benchmark(args) -> int:
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.jobs import run_here
    from sparsify_tui.services.benchmarks import load_benchmark
    from sparsify_tui.store import Workspace

    ws = Workspace()
    project = ws.get_project(args.project)
    job_args = {
        "name": args.name,
        "optimizations": list(args.optimization or []),
        "batch_sizes": args.batch_sizes,
        "core_counts": args.cores,
        "warmup": args.warmup,
        "iterations": args.iterations,
        **runtime_args(args),
    }
    if args.dim:
        from sparsify_tui.analysis.shapes import parse_dim_args

        job_args["dims"] = parse_dim_args(args.dim)  # added to the setup's by benchmark_settings
    if args.data:
        from pathlib import Path

        job_args["data"] = str(Path(args.data).absolute())
    if args.labels:
        job_args["labels"] = args.labels
    if args.metric:
        from sparsify_tui import settings

        job_args["metric"] = settings.metric(args.metric)
    # bad arguments and inputs are refused by run_here before a job record exists (jobs.registry.JOB_CHECKS)
    summary = run_here(ws, project["id"], "benchmark", job_args, progress=_stderr_progress(args.json))
    result = load_benchmark(ws, project["id"], summary["benchmark"])
    if args.json:
        print_json(result.to_dict())
    else:
        print("\n".join(cli_lines(head_facts(result))))
        print(_fmt_table(result))
        print(f"speedup = median of the {result.reference_label} / the row's median, at the same batch size and "
              "cores")
        for w in result.warnings:
            print(f"warning: {w}")
        if result.accuracy:
            print(_fmt_accuracy(result.accuracy))
    return 0


def _fmt_accuracy(acc: dict) -> str:
    """Accuracy of each model against the baseline, next to the speed table (the TUI and the report show the same
    table: :func:`sparsify_tui.benchmark.summary.accuracy_table`)."""
    from sparsify_tui.benchmark.summary import accuracy_table, format_table, synthetic

    table = accuracy_table(acc)
    reason = f" ({acc['reason']})" if acc.get("reason") and not synthetic(acc) else ""
    return f"{table.title}{reason}\n{format_table(table.headers, table.rows)}"


def cmd_apply(args) -> int:
    from pathlib import Path

    from sparsify_tui.commands.output import print_json
    from sparsify_tui.jobs import run_here
    from sparsify_tui.services.optimizations import get_optimization
    from sparsify_tui.store import Workspace

    ws = Workspace()
    project = ws.get_project(args.project)
    opt = get_optimization(ws, project["id"], args.optimization)
    job_args = {"optimization": opt.id, "out_path": args.output}
    if args.data:
        from pathlib import Path

        job_args["data"] = str(Path(args.data).absolute())
    if args.labels:
        job_args["labels"] = args.labels
    if args.reconstruct is not None:
        job_args["reconstruct"] = args.reconstruct
    if args.calibration_size is not None:
        job_args["calibration_size"] = args.calibration_size
    if args.metric:
        from sparsify_tui import settings

        job_args["metric"] = settings.metric(args.metric)
    run_here(ws, project["id"], "apply", job_args, progress=_stderr_progress(args.json))
    applied = get_optimization(ws, project["id"], opt.id).applied
    if args.json:
        print_json({"optimization": {"id": opt.id, "name": opt.name}, "applied": applied.to_dict()})
    else:
        d = applied.diff
        top1 = d.get("top1_agreement")
        print(f"wrote {applied.path}" + (f"\nexported to {applied.exported_to}" if applied.exported_to else ""))
        print(f"  quantized INT8: {'yes' if applied.quantized else 'no'}"
              + (f" (FP32 kept: {', '.join(applied.excluded)})" if applied.excluded else ""))
        if applied.structure == "channel":
            groups = applied.groups or []
            thinned = [g for g in groups if g["kept"] < g["channels"]]
            print(f"  channel groups thinned: {len(thinned)} of {len(groups)}; MACs "
                  f"{applied.macs_before:,} -> {applied.macs_after:,} ({applied.macs_reduction:.2f}x fewer); "
                  f"exactness max rel diff {applied.exactness_max_rel_diff:.2e}")
        else:
            s = [v for v in applied.sparsity.values() if v is not None]
            print(f"  layers pruned: {len(s)}, every layer exact to the weight: "
                  f"{'yes' if applied.layers_exact else 'NO'}")
        print(f"  size: {applied.file_size_bytes / 1e6:.2f} MB (baseline {applied.baseline_size_bytes / 1e6:.2f} MB)")
        for line in _data_lines(applied):
            print(f"  {line}")
        if d:
            print(f"  output vs baseline on {_scored(d)}: max |diff| {d['max_abs']:.4g}, "
                  f"normalized MSE {d['nmse']:.4g}" + (f", top-1 agreement {top1:.1%}" if top1 is not None else "")
                  + (f", accuracy {d['accuracy']:.1%} (baseline {d['accuracy_baseline']:.1%})"
                     if d.get("accuracy") is not None else ""))
            if d.get("user_metric"):
                um = d["user_metric"]
                print(f"  metric {um['name']} ({Path(um['path']).name}, sha256 {um['sha256'][:12]}): "
                      f"{d['score']:.4g} (baseline {d['score_baseline']:.4g}; worsening {d['metric_value']:.4g}, "
                      f"{'higher' if um['higher_is_better'] else 'lower'} is better) ({d.get('metric_reason')})")
            elif d.get("metric_name"):
                print(f"  metric {d['metric_name']}: {d['metric_value']:.4g} ({d.get('metric_reason')})")
        for w in applied.warnings or []:
            print(f"  note: {w}")
    return 0


def _scored(d: dict) -> str:
    """Which items the output difference was measured on: the held-out item range of the data, or why not."""
    items = d.get("items") or {}
    n = items.get("held_out_count", d.get("samples"))
    if items.get("source") == "synthetic":
        return f"{n} synthetic items (not the calibration items)"
    if items.get("held_out"):
        a, b = items["held_out"]
        return f"{n} held-out items ({a}..{b} of {items.get('source')})"
    if items:
        return f"the {n} calibration items (the data has none left to hold out)"
    return f"{d.get('samples')} batches"


def _data_lines(applied) -> list:
    """The calibration data and the reconstruction of an applied model, as lines for ``apply``."""
    out = []
    cd = applied.calibration_data or {}
    if cd.get("path"):
        why = {"optimization": "recorded with the optimization", "search": "the INT8 search's data",
               "project": "the project's data", "--data": "--data"}.get(cd.get("from"), cd.get("from"))
        cal = cd.get("calibration")
        out.append(f"calibration data: {cd['path']} ({why}); calibration items "
                   + (f"{cal[0]}..{cal[1]}" if cal else "none"))
    rec = applied.reconstruction
    if rec:
        if rec.get("enabled"):
            cons = rec.get("consumers") or []
            fit = [c for c in cons if c.get("method") != "none"]
            before = sorted(c["rel_error_before"] for c in fit if c.get("rel_error_before") is not None)
            after = sorted(c["rel_error_after"] for c in fit if c.get("rel_error_after") is not None)
            med = (f"; median layer error {before[len(before) // 2]:.3g} -> {after[len(after) // 2]:.3g}"
                   if before and after else "")
            out.append(f"reconstruction: {len(fit)} of {len(cons)} consumers refit on {rec.get('items')} items "
                       f"(ridge {rec.get('ridge')}) in {rec.get('seconds', 0):.1f} s, +{rec.get('peak_mb', 0):.0f} MB"
                       + med)
        else:
            out.append(f"reconstruction: off ({rec.get('reason')})")
    if applied.importance:
        out.append(f"channels chosen by: {applied.importance}")
    return out


def register(sub) -> None:
    from sparsify_tui.commands.output import add_memory_option

    import argparse

    p = sub.add_parser(
        "benchmark",
        help="measure baseline vs optimized models across runtimes, batch sizes and core counts",
        description="Measure ms/batch of the project's baseline model and its optimizations (applied first "
                    "when needed) on every runtime x batch size x core count, interleaved, one session at a time. "
                    "Runtimes default to each optimization's own; the reference of every speedup, the baseline on "
                    "the default engine in fp32, is always measured.",
    )
    p.add_argument("project", metavar="PROJECT", help="project id or name")
    p.add_argument("--optimization", "-O", action="append", metavar="NAME",
                   help="optimization name or id to compare with the baseline (repeatable)")
    p.add_argument("--batch-sizes", type=_list_type("batch_size", "--batch-sizes"), default=None, metavar="B1,B2",
                   help="batch sizes, e.g. 1,8 (default: the project's batch size)")
    p.add_argument("--cores", type=_list_type("core_count", "--cores"), default=None, metavar="C1,C2",
                   help="core counts (intra-op threads), e.g. 1,2 (default: the project's core count)")
    add_runtime_options(p, many=True)
    p.add_argument("--warmup", type=int, default=None, metavar="N", help="untimed runs before timing (default 5)")
    p.add_argument("--iterations", type=int, default=None, metavar="N",
                   help="timed runs per combination (default 30)")
    p.add_argument("--name", default=None, help="benchmark name (default 'benchmark N')")
    p.add_argument("--dim", action="append", metavar="NAME=VALUE",
                   help="symbolic input dimension, e.g. x:2=48 or seq=128 (default: the project's)")
    p.add_argument("--data", default=None, metavar="FILE", help="sample inputs (.npz keyed by input name, or .npy)")
    p.add_argument("--labels", default=None, metavar="KEY",
                   help="key of the labels array in --data: accuracy of baseline and optimized (default labels)")
    p.add_argument("--metric", default=None, metavar="M",
                   help="top1 | nmse | kl | max_abs | FILE.py:FUNCTION (a metric of your own; default from the outputs)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_memory_option(p)
    p.set_defaults(handler=cmd_benchmark)

    a = sub.add_parser(
        "apply",
        help="write the optimized .onnx of an optimization (pruned, INT8 when it quantizes)",
        description="One-shot apply: magnitude-prune every layer to its configured sparsity (exact to the "
                    "weight) or, for a channel optimization, thin it and refit the thinned groups' consumers on the "
                    "calibration items; INT8-quantize when the optimization quantizes; write "
                    "<project>/optimized/<name>.onnx (and copy it to -o); score it against the original on every "
                    "item not used for calibration.",
    )
    a.add_argument("project", metavar="PROJECT", help="project id or name")
    a.add_argument("optimization", metavar="OPTIMIZATION", help="optimization name or id")
    a.add_argument("-o", "--output", default=None, metavar="OUT.onnx", help="also export the model to this path")
    a.add_argument("--data", default=None, metavar="FILE", help="calibration inputs (.npz/.npy); default synthetic")
    a.add_argument("--labels", default=None, metavar="KEY", help="key of the labels array in --data (default labels)")
    a.add_argument("--reconstruct", action=argparse.BooleanOptionalAction, default=None,
                   help="channel: refit the consumers of thinned groups on the calibration items (default: on with "
                        "sample data, off with synthetic inputs)")
    a.add_argument("--metric", default=None, metavar="M",
                   help="what the held-out items are scored in: top1 | nmse | kl | max_abs | FILE.py:FUNCTION "
                        "(default: the search's metric, else from the outputs)")
    a.add_argument("--calibration-size", type=int, default=None, metavar="N",
                   help="items of --data that calibrate (default: 16 for INT8; channel: half the items, at most 64); "
                        "every other item is held out and scored")
    a.add_argument("--json", action="store_true", help="print the result as JSON")
    add_memory_option(a)
    a.set_defaults(handler=cmd_apply)
