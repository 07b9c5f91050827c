"""``sparsify-tui analyze MODEL [--batch-size N] [--dim NAME=VALUE ...] [--channel-groups] [--json]``.

Prints the node table of a model (params, zero params, prunable flag, MACs, FLOPs per node) and totals,
as JSON (``{"model", "nodes", "totals", "system"}``) or as a short human summary. With ``--channel-groups``
it prints the model's channel groups instead (:mod:`sparsify_tui.analysis.channels`): JSON
``{"model", "channel_groups": [{"id", "members", "channels", "prunable", "reason", "macs", ...}],
"channel_summary"}`` or a table, with the share of Conv/Gemm/MatMul MACs in prunable groups.
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
    p.add_argument("--channel-groups", action="store_true",
                   help="list the channel groups (tensors whose channels are removed together by channel pruning), "
                   "which are prunable and why not, and the share of Conv/Gemm/MatMul MACs in prunable groups")
    p.add_argument("--json", action="store_true", help="print the full analysis as JSON")
    p.set_defaults(handler=run)


def run(args) -> int:
    """Handler: analyze and print. User errors raise SparsifyError (one line, exit 2)."""
    from sparsify_tui import settings
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.analysis.shapes import parse_dim_args
    from sparsify_tui.commands.output import print_json, print_warnings
    from sparsify_tui.engine import get_engine
    from sparsify_tui.formatting import format_count

    settings.batch_size(args.batch_size)
    dims = parse_dim_args(args.dim)
    if dims:
        from sparsify_tui.analysis.loading import load_model
        from sparsify_tui.analysis.shapes import check_user_dims

        check_user_dims(load_model(args.model, load_external_data=False), dims)
    if args.channel_groups:
        return _channel_groups(args, dims)
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


def _channel_groups(args, dims: dict) -> int:
    """``analyze --channel-groups``: the channel groups as JSON or a table."""
    from sparsify_tui.analysis.channels import analyze_channels
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.engine import get_engine
    from sparsify_tui.formatting import format_count

    _model, analysis, groups = analyze_channels(args.model, args.batch_size, dims, engine=get_engine())
    if args.json:
        model = analysis.to_dict()["model"]
        print_json({"model": model, **groups.to_dict()})
        return 0
    summary = groups.to_dict()["channel_summary"]
    lines = [
        f"model     {args.model}  (batch {analysis.batch_size}" + (f", dims {analysis.dims}" if analysis.dims else "") + ")",
        f"groups    {summary['groups']} channel groups, {summary['prunable_groups']} prunable "
        f"({summary['prunable_channels']} of {summary['channels']} channels)",
        f"MACs      {summary['prunable_macs_share'] * 100:.1f}% of Conv/Gemm/MatMul MACs are in prunable groups "
        f"({format_count(summary['prunable_macs'], sep='')} of {format_count(summary['matrix_macs'], sep='')} per batch)",
    ]
    if not groups.groups:
        lines.append("          no prunable layer in the main graph (layers inside If/Loop/Scan subgraphs are not pruned)")
    if summary["top_reasons"]:
        lines.append("not prunable, most frequent reasons:")
        lines += [f"  {r['groups']:4} {'group' if r['groups'] == 1 else 'groups'}  {r['reason']}" for r in summary["top_reasons"]]
    lines.append("")
    width = min(48, max([len(g.id) for g in groups.groups] + [5]))
    lines.append(f"{'group':{width}} {'channels':>8} {'MACs':>8} {'members':>7}  prunable")
    for g in groups.groups:
        gid = g.id if len(g.id) <= width else "…" + g.id[-(width - 1):]
        state = "yes" if g.prunable else f"no: {g.reason}"
        if g.unit == "head":
            state += f" (its channels are attention heads, {g.channel_size} outputs of {g.producers[0]} each)"
        lines.append(f"{gid:{width}} {g.channels:>8} {format_count(g.macs, sep=''):>8} {len(g.members):>7}  {state}")
    print("\n".join(lines))
    return 0
