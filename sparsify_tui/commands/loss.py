"""CLI: ``sparsify-tui profile loss PROJECT_OR_MODEL`` (loss profiles).

A model path runs in this process without a workspace; a project (id or name) runs as a
``loss_profile`` job through :func:`sparsify_tui.jobs.run_here` and is stored in the project.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sparsify_tui.text import cli_lines
from sparsify_tui.text.loss import summary_facts
from sparsify_tui.commands.output import stderr_progress as _stderr_progress
from sparsify_tui.commands import add_runtime_options, looks_like_model, profile_group, runtime_args


def _summary_text(prof) -> str:
    """The summary (:mod:`sparsify_tui.text.loss`), the warnings, and a row per layer: sensitivity at 0.5, 0.9,
    0.95 and INT8 (channel groups: 0.3, 0.5, 0.7)."""
    facts = summary_facts(prof)
    lines = cli_lines(facts[:1]) + cli_lines(facts[1:], "  ") + [f"  warning: {w}" for w in prof.warnings] + [""]
    if (prof.settings or {}).get("structure") == "channel":
        lines.append(f"  {'group':40s} {'channels':>8s} {'@0.3':>10s} {'@0.5':>10s} {'@0.7':>10s}")
        for layer in prof.layers:
            lines.append(f"  {layer.id[-40:]:40s} {layer.prunable_params:>8,d} {layer.value_at(0.3):>10.3g} "
                         f"{layer.value_at(0.5):>10.3g} {layer.value_at(0.7):>10.3g}")
        return "\n".join(lines)
    lines.append(f"  {'layer':40s} {'params':>10s} {'@0.5':>10s} {'@0.9':>10s} {'@0.95':>10s} {'int8':>10s}")
    for layer in prof.layers:
        i8 = "" if layer.int8_sensitivity is None else f"{layer.int8_sensitivity:.3g}"
        lines.append(
            f"  {layer.id[-40:]:40s} {layer.prunable_params:>10,d} {layer.value_at(0.5):>10.3g} "
            f"{layer.value_at(0.9):>10.3g} {layer.value_at(0.95):>10.3g} {i8:>10s}"
        )
    return "\n".join(lines)


def cmd_profile_loss(args) -> int:
    from sparsify_tui.analysis.shapes import parse_dim_args
    from sparsify_tui.commands.output import print_json, print_warnings
    from sparsify_tui.services.job_settings import loss_settings

    dims = parse_dim_args(args.dim or [])
    job_args = {"name": args.name or "baseline", "method": args.method, "levels": args.levels,
                "data": str(Path(args.data).absolute()) if args.data else None, "batches": args.batches,
                "int8": args.int8, "metric": args.metric, "structure": args.structure, **runtime_args(args)}
    if dims:
        job_args["dims"] = dims
    if args.batch_size is not None:
        job_args["batch_size"] = args.batch_size
    if looks_like_model(args.target):
        from sparsify_tui.profiling.loss_methods import profile_loss

        # bad arguments and inputs fail here, before any progress line
        s = loss_settings({}, job_args, model_path=args.target)
        prof = profile_loss(Path(args.target), progress=_stderr_progress(args.json), **s)
    else:
        from sparsify_tui.jobs import run_here
        from sparsify_tui.services.profiles import load_loss_profile
        from sparsify_tui.store import Workspace

        ws = Workspace()
        project = ws.get_project(args.target)
        if args.method == "approximated" and args.structure == "unstructured":
            loss_settings(project, job_args, model_path=ws.model_path(project["id"]))
            prof = load_loss_profile(ws, project["id"], "approximated")
        else:
            # bad arguments and inputs are refused by run_here before a job record exists (jobs.registry.JOB_CHECKS)
            summary = run_here(ws, project["id"], "loss_profile", job_args, progress=_stderr_progress(args.json))
            prof = load_loss_profile(ws, project["id"], summary["record_id"])
    print_warnings(prof.warnings)
    if args.json:
        print_json(prof.to_dict())
        for warning in prof.warnings:  # stdout stays pure JSON (the warnings are in it too)
            print(f"sparsify-tui: warning: {warning}", file=sys.stderr)
    else:
        print(_summary_text(prof))
    return 0



def register(sub) -> None:
    from sparsify_tui.commands.output import add_memory_option

    group = profile_group(sub)
    p = group.add_parser(
        "loss",
        help="loss profile: per-layer pruning (and INT8) sensitivity",
        description="Per-layer sensitivity to pruning at each sparsity level. Methods: approximated (from the "
        "architecture, no run), magnitude (mean |w| removed, SparseML's definition), one-shot (prune one layer, "
        "run N batches, compare outputs with the dense model: KL divergence of softmax for class outputs, "
        "normalized MSE otherwise).",
    )
    p.add_argument("target", metavar="PROJECT_OR_MODEL", help="a project id/name, or a .onnx path (no workspace)")
    p.add_argument("--name", default=None, help="profile name (default: baseline)")
    p.add_argument("--method", choices=("approximated", "magnitude", "one-shot"), default="magnitude")
    p.add_argument("--levels", default=None, help="comma-separated sparsities in [0,1), e.g. 0.2,0.4,0.9 (channel: "
                                                  "fractions of channels, default 0,0.1,...,0.9)")
    p.add_argument("--structure", choices=("unstructured", "channel"), default="unstructured",
                   help="rows: layers (default) or channel groups (levels = fraction of a group's channels removed; "
                        "magnitude = group L2 norm removed, one-shot = output change with those channels removed)")
    p.add_argument("--data", default=None, metavar="FILE.npz", help="sample data (.npz keys = input names, or .npy)")
    p.add_argument("--batches", type=int, default=None, help="batches per measurement for one-shot (default 2)")
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default: the project's, else 1)")
    add_runtime_options(p)
    p.add_argument("--int8", action="store_true", help="also measure per-layer INT8 sensitivity")
    p.add_argument("--metric", default=None, metavar="M", help="one-shot metric: kl | nmse (default: auto)")
    p.add_argument("--dim", action="append", metavar="NAME=VALUE", help="value of a symbolic input dim (repeatable)")
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    add_memory_option(p)
    p.set_defaults(handler=cmd_profile_loss)
