"""``sparsify-tui analyze MODEL [--batch-size N] [--dim NAME=VALUE ...] [--json]``.

Prints the node table of a model (params, zero params, prunable flag, MACs, FLOPs per node) and totals,
as JSON (``{"model", "nodes", "totals", "system"}``) or as a short human summary.
"""

from __future__ import annotations


def register(sub) -> None:
    """Add the ``analyze`` subcommand."""
    p = sub.add_parser(
        "analyze",
        help="params, MACs and FLOPs of every node of an ONNX model",
        description="Analyze an ONNX model: shapes for the given batch size and dims, then per node the weight, "
        "params, zero params, prunable flag, MACs and FLOPs (FLOPs = 2 x MACs for Conv/Gemm/MatMul plus bias adds; "
        "1 per output element for elementwise ops).",
    )
    p.add_argument("model", metavar="MODEL", help="path of the .onnx file (external data is read from its folder)")
    p.add_argument("--batch-size", type=int, default=1, metavar="N", help="items per batch for shapes (default 1)")
    p.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="value of a symbolic input dim, by name (seq=128) or input:axis (x:2=48); also scalar inputs (sr=16000)",
    )
    p.add_argument("--no-zero-count", action="store_true",
                   help="skip reading the weights to count zeros (zero_params = 0): faster on very large models")
    p.add_argument("--top", type=int, default=10, metavar="K", help="nodes listed in the human summary (default 10)")
    p.add_argument("--json", action="store_true", help="print the full analysis as JSON")
    p.set_defaults(handler=run)


def run(args) -> int:
    """Handler: analyze and print. User errors raise SparsifyError (one line, exit 2)."""
    from sparsify_tui import settings
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.analysis.shapes import parse_dim_args
    from sparsify_tui.cli import print_json, print_warnings
    from sparsify_tui.engine import get_engine
    from sparsify_tui.formatting import format_count

    settings.batch_size(args.batch_size)
    dims = parse_dim_args(args.dim)
    analysis = analyze_model(args.model, batch_size=args.batch_size, dims=dims, count_zeros=not args.no_zero_count,
                             engine=get_engine())
    print_warnings(analysis.warnings)
    if args.json:
        print_json(analysis.to_dict())
        return 0
    t = analysis.totals

    def _fmt(n: float) -> str:
        return format_count(n, sep="")

    lines = [
        f"model     {analysis.path}  ({analysis.file_size_bytes / 1e6:.1f} MB, IR {analysis.ir_version}, "
        f"opset {analysis.opset}, {analysis.producer or 'unknown producer'})",
        "inputs    " + ", ".join(f"{i['name']}: {i['dtype']}{i['resolved_shape']}" for i in analysis.inputs),
        f"batch     {analysis.batch_size}" + (f"  dims {analysis.dims}" if analysis.dims else ""),
        f"nodes     {t['nodes']}   prunable layers {t['prunable_layers']}",
        f"params    {_fmt(t['params'])} ({t['params']:,})   prunable {_fmt(t['prunable_params'])}   "
        f"zeros {t['zero_params'] / t['params'] * 100 if t['params'] else 0:.1f}%",
        f"MACs      {_fmt(t['macs'])} ({t['macs']:,}) per batch",
        f"FLOPs     {_fmt(t['flops'])} ({t['flops']:,}) per batch",
        "",
    ]
    top = sorted((n for n in analysis.nodes if n.counted), key=lambda n: n.flops, reverse=True)[: max(0, args.top)]
    if top:
        total = t["flops"] or 1
        lines.append(f"{'node':40} {'op':14} {'params':>9} {'MACs':>9} {'FLOPs':>9} {'%':>6}")
        for n in top:
            nid = n.id if len(n.id) <= 40 else "…" + n.id[-39:]
            lines.append(f"{nid:40} {n.op_type:14} {_fmt(n.params):>9} {_fmt(n.macs):>9} {_fmt(n.flops):>9} "
                         f"{n.flops / total * 100:6.2f}")
    print("\n".join(lines))
    return 0
