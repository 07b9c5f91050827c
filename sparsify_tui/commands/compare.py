"""CLI: ``sparsify-tui compare`` (two perf profiles per node, two loss profiles per layer, or optimizations side by
side). The comparing is done by :mod:`sparsify_tui.services.comparisons` and the core; this module parses and prints.
"""

from __future__ import annotations

import sys

from sparsify_tui.text import cli_lines
from sparsify_tui.text.comparison import comparison_facts


def register(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="compare two perf profiles per node, two loss profiles per layer, or optimizations side by side",
        description="Compare two perf profiles of a project per node (A ms, B ms, B/A, share of each total; rows "
                    "matched by node id, unmatched rows listed, never dropped), or two loss profiles per layer "
                    "(--loss: sensitivity at a level and rank change), or two or more optimizations "
                    "(--optimizations A,B: settings, per-layer sparsity, estimates, measured results). A perf "
                    "profile may be suffixed :int8 for the times of its measured INT8 model, so "
                    "`compare P baseline baseline:int8` is FP32 vs INT8.",
    )
    p.add_argument("project", metavar="PROJECT", help="project id or name")
    p.add_argument("a", metavar="A", nargs="?", help="profile id or name (perf: NAME[:int8])")
    p.add_argument("b", metavar="B", nargs="?", help="profile id or name (perf: NAME[:int8])")
    p.add_argument("--project-b", metavar="PROJECT", default=None,
                   help="B is a profile of this project (the same model, or a model with the same node names)")
    p.add_argument("--loss", action="store_true", help="A and B are loss profiles")
    p.add_argument("--level", type=float, default=0.9, help="loss: sparsity level of the sensitivity (default 0.9)")
    p.add_argument("--int8", action="store_true", help="loss: compare the INT8 sensitivity instead")
    p.add_argument("--optimizations", metavar="A,B[,C]", default=None,
                   help="compare these optimizations (ids or names, comma-separated) instead of profiles")
    p.add_argument("--top", type=int, default=30,
                   help="rows printed by most time (perf) or sensitivity (loss); 0 = all (default 30; --json has all)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON on stdout")
    p.set_defaults(handler=cmd_compare)


def cmd_compare(args) -> int:
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.errors import RecordNotFound, SparsifyError
    from sparsify_tui.services import comparisons as svc
    from sparsify_tui.store import Workspace

    if args.top < 0:
        raise SparsifyError(f"--top must be 0 (all) or more, got {args.top}")
    ws = Workspace()
    if args.optimizations is not None:
        if args.a or args.b or args.loss:
            raise SparsifyError("give either two profiles (A B) or --optimizations A,B, not both")
        result = svc.compare_optimizations(ws, args.project, args.optimizations.split(","))
        text = format_optimizations
    else:
        if not (args.a and args.b):
            raise SparsifyError("compare needs two profiles: sparsify-tui compare PROJECT A B "
                                "(or --optimizations A,B)")
        if args.loss:
            result = svc.compare_loss_profiles(ws, args.project, args.a, args.b, project_b=args.project_b,
                                               level=args.level, int8=args.int8)
            text = format_loss
        else:
            try:
                result = svc.compare_perf_profiles(ws, args.project, args.a, args.b, project_b=args.project_b)
            except RecordNotFound as err:
                loss = svc.loss_profile_names(ws, args.project) | (
                    svc.loss_profile_names(ws, args.project_b) if args.project_b else set())
                if {args.a, args.b} & loss:
                    raise RecordNotFound(f"{err} ({', '.join(sorted({args.a, args.b} & loss))} is a loss profile: "
                                         "add --loss)") from None
                raise
            text = format_perf
    if args.json:
        print_json(result.to_dict())
    else:
        sys.stdout.write(text(result, top=args.top) + "\n")
    return 0


# -------------------------------------------------------------------------------------------------- text
def _f(v, spec: str = ".3f", none: str = "-") -> str:
    return none if v is None else format(v, spec)


def _x(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _pct(v) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def _table(rows: list, right: set) -> list:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]


def _short(text: str, n: int = 56) -> str:
    return text if len(text) <= n else text[: n // 2 - 1] + "…" + text[-(n - n // 2):]


def format_perf(cmp, top: int = 30) -> str:
    """Text of a :class:`~sparsify_tui.profiling.perf_compare.PerfComparison`: both sides, the top rows, node groups,
    every unmatched row, fusion groups, totals."""
    lines = cli_lines(comparison_facts(cmp)) + [""]
    rows = cmp.top_rows(top)
    head = ("node id", "op", "A ms", "B ms", "B/A", "A %", "B %", "")
    body = [(_short(r.id), r.op_type, _f(r.a_ms), _f(r.b_ms), _x(r.ratio), _pct(r.a_share), _pct(r.b_share),
             "" if r.matched else r.status) for r in rows]
    lines.append(f"per node (ms per batch, profiled pass scaled to each median; top {len(rows)} of {len(cmp.rows)} "
                 "by time):")
    lines += _table([head] + body, {2, 3, 4, 5, 6})
    lines += ["", "per op type:"]
    lines += _table([("group", "nodes", "A ms", "B ms", "B/A", "A %", "B %")] +
                    [(g.name, g.nodes, _f(g.a_ms), _f(g.b_ms), _x(g.ratio), _pct(g.a_share), _pct(g.b_share))
                     for g in cmp.groups], {1, 2, 3, 4, 5, 6})
    un = [r for r in cmp.rows if not r.matched]
    u = cmp.unmatched
    lines += ["", f"unmatched rows: {u['rows']} (A {_f(u['a_ms'])} ms, B {_f(u['b_ms'])} ms)"]
    if un:
        lines += _table([("node id", "op", "A ms", "B ms", "status")] +
                        [(_short(r.id), r.op_type, _f(r.a_ms), _f(r.b_ms), r.status) for r in un], {2, 3})
    if cmp.fusion_groups:
        lines += ["", "fusion groups (nodes sharing a kernel on either side):"]
        lines += _table([("#", "nodes", "A ms", "B ms", "B/A")] +
                        [(i, _short(", ".join(g.ids), 70), _f(g.a_ms), _f(g.b_ms), _x(g.ratio))
                         for i, g in enumerate(cmp.fusion_groups)], {0, 2, 3, 4})
    lines += [f"note: {n}" for n in cmp.notes]
    return "\n".join(lines)


def format_loss(cmp, top: int = 30) -> str:
    """Text of a :class:`~sparsify_tui.profiling.perf_compare.LossComparison`."""
    what = "INT8 sensitivity" if cmp.int8 else f"sensitivity at sparsity {cmp.level:g}"
    lines = [f"A: {cmp.a.label} ({cmp.a.method}; {cmp.a.metric_description})",
             f"B: {cmp.b.label} ({cmp.b.method}; {cmp.b.metric_description})", ""]
    rows = sorted(cmp.rows, key=lambda r: r.a_rank if r.a_rank is not None else 10 ** 9)
    shown = rows[:top] if top else rows
    lines.append(f"per layer, {what} (rank 1 = most sensitive; change > 0: more sensitive in B; "
                 f"top {len(shown)} of {len(rows)} by A):")
    lines += _table([("node id", "weight", "A", "B", "B/A", "A rank", "B rank", "change", "")] +
                    [(_short(r.id, 40), _short(r.weight_name, 32), _f(r.a_value, ".4g"), _f(r.b_value, ".4g"),
                      _x(r.ratio), _f(r.a_rank, "d"), _f(r.b_rank, "d"),
                      "-" if r.rank_change is None else f"{r.rank_change:+d}", "" if r.matched else r.status)
                     for r in shown], {2, 3, 4, 5, 6, 7})
    lines += ["", f"rank correlation (Spearman, matched layers): {_f(cmp.rank_correlation, '.3f')}"]
    lines += [f"note: {n}" for n in cmp.notes]
    return "\n".join(lines)


def _val(v, unit: str = "") -> str:
    from sparsify_tui.formatting import format_value

    return format_value(v, unit)


def format_optimizations(cmp, top: int = 30) -> str:
    """Text of an :class:`~sparsify_tui.optimization.comparison.OptimizationComparison` (``*`` marks rows that
    differ)."""
    names = cmp.names
    lines = ["optimizations: " + " | ".join(names), ""]

    def block(title, rows):
        out = [title]
        out += _table([("", "") + tuple(names)] +
                      [("*" if r.differs else "", r.label) + tuple(_val(v, r.unit) for v in r.values) for r in rows],
                      set(range(2, 2 + len(names))))
        return out + [""]

    lines += block("settings (* differs):", cmp.settings)
    lines += block("estimates (est. = estimated):", cmp.estimates)
    layers = [r for r in cmp.layers if r.differs] or cmp.layers
    shown = layers[:top] if top else layers
    title = "layers that differ" if any(r.differs for r in cmp.layers) else "layers (all equal)"
    lines.append(f"{title}, sparsity (* override) and the structure's own fields ({len(shown)} of {len(layers)}):")
    lines += _table([("weight", "op") + tuple(names) + ("",)] +
                    [(_short(r.weight_name, 48), r.op_type or "") +
                     tuple("-" if s is None else f"{s:.3f}" + ("*" if o else "") for s, o in zip(r.sparsity, r.overridden))
                     + ("  ".join(f"{k}: {' / '.join(_val(v) for v in vals)}" for k, vals in r.extra.items()),)
                     for r in shown], set(range(2, 2 + len(names))))
    lines += ["", "measured:"]
    from sparsify_tui.text import cli_lines
    from sparsify_tui.text.comparison import measured_facts

    for name, m in zip(names, cmp.measured):
        lines += [f"  {name}:"] + cli_lines(measured_facts(m), "    ")
    lines += [f"note: {n}" for n in cmp.notes]
    return "\n".join(lines)
