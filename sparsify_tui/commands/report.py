"""CLI: ``sparsify-tui report PROJECT [-o FILE] [--format md|html|json]`` (:mod:`sparsify_tui.services.report`)."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="write a project report (Markdown, self-contained HTML, or JSON)",
        description="One file to attach to a ticket: the model, the machine, each perf profile's latency and "
                    "top layers, each loss profile's most and least sensitive layers, each optimization's "
                    "settings, estimates and measured results, and the benchmarks. HTML is one self-contained "
                    "file (inline CSS and SVG charts, no network); Markdown has the charts as tables. Without -o "
                    "the report goes to stdout.",
    )
    p.add_argument("project", metavar="PROJECT", help="project id or name")
    p.add_argument("-o", "--output", metavar="FILE", default=None, help="output file (.md, .html or .json)")
    p.add_argument("--format", choices=("md", "html", "json"), default=None,
                   help="report format (default: from the -o suffix, else md)")
    p.add_argument("--top", type=int, default=10, help="slowest nodes listed per perf profile (default 10)")
    p.add_argument("--level", type=float, default=0.9, help="sparsity of the loss sensitivities (default 0.9)")
    p.set_defaults(handler=cmd_report)


def cmd_report(args) -> int:
    from sparsify_tui.errors import SparsifyError
    from sparsify_tui.services import report
    from sparsify_tui.store import Workspace

    if args.top < 1:
        raise SparsifyError(f"--top must be 1 or more, got {args.top}")
    if not 0.0 <= args.level < 1.0:
        raise SparsifyError(f"--level must be in [0, 1), got {args.level}")
    ws = Workspace()
    if args.output is None:
        fmt = report.format_for(None, args.format)
        sys.stdout.write(report.render_report(ws, args.project, fmt, top=args.top, level=args.level))
        return 0
    res = report.write_report(ws, args.project, args.output, args.format, top=args.top, level=args.level)
    from sparsify_tui.formatting import format_bytes

    print(f"wrote {res['format']} report ({format_bytes(res['bytes'])}) to {res['path']}", file=sys.stderr)
    return 0
