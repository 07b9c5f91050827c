"""CLI: ``sparsify-tui profile export`` and ``profile import`` (perf profiles as self-contained JSON bound to the
model's sha256, and per-node overlays for Model Explorer). The work is :mod:`sparsify_tui.services.exchange`'s."""

from __future__ import annotations

import sys

from sparsify_tui.commands import profile_group


def register(sub) -> None:
    prof = profile_group(sub)
    e = prof.add_parser(
        "export",
        help="write a perf profile as self-contained JSON, or as Model Explorer node data",
        description="Write perf profile NAME of PROJECT as one JSON file: the model's sha256, the machine it was "
                    "measured on, the settings and every node (--format json, the default; stdout without -o), or "
                    "as node-data files that Google's Model Explorer overlays on the graph (--format "
                    "model-explorer -o nodes.json: per-node ms in nodes.json, and nodes.share.json, "
                    "nodes.int8_ratio.json, nodes.sensitivity.json next to it).",
    )
    e.add_argument("project", metavar="PROJECT", help="project id or name")
    e.add_argument("name", metavar="NAME", help="perf profile id or name")
    e.add_argument("-o", "--output", metavar="FILE.json", default=None, help="output file")
    e.add_argument("--format", choices=("json", "model-explorer"), default="json", help="json (default) or "
                   "model-explorer")
    e.add_argument("--loss", metavar="NAME", default=None,
                   help="model-explorer: loss profile of the sensitivity overlay (default: the newest, else "
                        "Approximated)")
    e.add_argument("--level", type=float, default=0.9, help="model-explorer: sparsity of the sensitivity (0.9)")
    e.add_argument("--json", action="store_true", help="model-explorer: print what was written as JSON")
    e.set_defaults(handler=cmd_export)

    i = prof.add_parser(
        "import",
        help="add a perf profile exported elsewhere to a project of the same model",
        description="Add the perf profile in FILE.json (written by `profile export`, e.g. on another server) to "
                    "PROJECT. The project's model must have the same sha256; anything else is refused and "
                    "nothing is stored. Compare it with `sparsify-tui compare PROJECT A B`.",
    )
    i.add_argument("project", metavar="PROJECT", help="project id or name")
    i.add_argument("file", metavar="FILE.json", help="the exported profile")
    i.add_argument("--name", default=None, help="name in this project (default: its own, or 'NAME (host)' when taken)")
    i.add_argument("--json", action="store_true", help="print the stored record as JSON")
    i.set_defaults(handler=cmd_import)


def cmd_export(args) -> int:
    import json

    from sparsify_tui import settings
    from sparsify_tui.cli import print_json
    from sparsify_tui.errors import SparsifyError
    from sparsify_tui.services import exchange
    from sparsify_tui.store import Workspace

    ws = Workspace()
    if args.format == "model-explorer":
        if not args.output:
            raise SparsifyError("--format model-explorer needs -o FILE.json (several files are written next to it)")
        res = exchange.export_model_explorer(ws, args.project, args.name, args.output, loss=args.loss,
                                             level=args.level)
        if args.json:
            print_json(res)
            return 0
        for metric, path in res["files"].items():
            print(f"wrote {path} ({metric})", file=sys.stderr)
        for metric, why in res["skipped"].items():
            print(f"skipped {metric}: {why}", file=sys.stderr)
        if res["not_on_graph"]:
            print(f"not on the graph: {', '.join(res['not_on_graph'])}", file=sys.stderr)
        print("open it with:", file=sys.stderr)
        print(res["command"])
        return 0
    if args.loss is not None or args.json:
        raise SparsifyError("--loss and --json go with --format model-explorer")
    if args.output:
        settings.output_path(args.output, "-o", workspace=ws.root)
    doc = exchange.export_perf_profile(ws, args.project, args.name)
    text = json.dumps(doc, indent=1)
    if args.output:
        path = exchange.write_text_atomic(args.output, text + "\n")
        print(f"wrote perf profile {doc['profile']['name']!r} ({len(doc['nodes'])} rows) to {path}", file=sys.stderr)
    else:
        sys.stdout.write(text + "\n")
    return 0


def cmd_import(args) -> int:
    from sparsify_tui.cli import print_json
    from sparsify_tui.services import exchange
    from sparsify_tui.store import Workspace

    ws = Workspace()
    rec = exchange.import_perf_profile(ws, args.project, args.file, name=args.name)
    if args.json:
        print_json(rec)
    else:
        host = (rec.get("imported") or {}).get("hostname")
        print(f"imported perf profile {rec['name']!r} ({rec['id']}){f' measured on {host}' if host else ''}: compare "
              f"it with `sparsify-tui compare {args.project} A {rec['name']!r}`")
    return 0
