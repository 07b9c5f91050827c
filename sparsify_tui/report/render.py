"""Render a :class:`~sparsify_tui.report.model.Report` as Markdown, self-contained HTML, or JSON.

Both text formats come from one list of blocks (:func:`blocks`: headings, paragraphs, tables, charts), so they
always hold the same numbers. A chart is an inline SVG bar chart in HTML (:mod:`sparsify_tui.report.svg`) and a
table with a text bar column in Markdown. The HTML is one file: inline CSS, inline SVG, no script, no link, no
image file, no URL.

Number formats: ms with 3 decimals, shares as % with 1 decimal, speedups and ratios as ``2.50×``, counts with an
SI suffix (``1.23 M``), sizes in MB (``6.76 MB``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html import escape
from typing import Any, Optional

from sparsify_tui.benchmark.summary import accuracy_table
from sparsify_tui.formatting import format_bytes, format_count, format_ratio, plural, safe_text
from sparsify_tui.optimization.fidelity import applied_fidelity
from sparsify_tui.report.model import ESTIMATE_FIELDS, Report
from sparsify_tui.report.svg import bar_chart

FORMATS = ("md", "html", "json")
SUFFIXES = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".json": "json"}


# --------------------------------------------------------------------------------------------- blocks
@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Para:
    text: str


@dataclass
class Table:
    headers: list
    rows: list
    right: set = field(default_factory=set)  # column indexes aligned right (numbers)


@dataclass
class Chart:
    title: str
    labels: list
    values: list
    unit: str
    text: list  # the value as printed, one per bar
    reference: Optional[float] = None


def ms(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.3f}"


def pct(v: Any) -> str:
    return "n/a" if v is None else f"{float(v) * 100:.1f}%"


def times(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.2f}×"


def num(v: Any, spec: str = ".4g") -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return format(v, spec)
    return str(v)


def _target(t: dict) -> str:
    parts = [t.get("hostname") or "", t.get("cpu_model") or ""]
    isets = ", ".join(t.get("instruction_sets") or [])
    text = " · ".join(p for p in parts if p) or "unknown machine"
    return f"{text} ({isets})" if isets else text


def blocks(report: Report, top: int = 10) -> list:
    """The report as a list of :class:`Heading`, :class:`Para`, :class:`Table` and :class:`Chart` blocks: the
    model and machine, then one section per kind of record."""
    out: list = [Heading(1, report.title),
                 Para(f"Generated {report.generated} by sparsify-tui {report.version}. Times are ms per batch, "
                      "throughput items/s. Measured numbers come from the runtime (engine, version, precision) and the "
                      "machine named with each profile or benchmark; \"est.\" marks estimates.")]
    p, m = report.project, report.model
    if p.get("description"):
        out.append(Para(p["description"]))
    out.append(Heading(2, "Model"))
    out.append(Table(["", ""], [
        ["File", m.get("file") or "?"], ["sha256", m.get("sha256") or "?"],
        ["Size", format_bytes(m.get("size_bytes"), none="?")],
        ["Params", format_count(m.get("params"), none="?")], ["MACs", format_count(m.get("macs"), none="?")],
        ["FLOPs", format_count(m.get("flops"), none="?")], ["Opset", num(m.get("opset"))],
        ["Nodes", f"{m.get('nodes', '?')} ({m.get('prunable_layers', '?')} prunable layers)"],
    ]))
    mc = report.machine
    out.append(Heading(2, "Machine"))
    out.append(Para("Where this report was written. Each profile and benchmark below names the machine it was "
                    "measured on."))
    out.append(Table(["", ""], [
        ["Host", mc.get("hostname") or "?"], ["CPU", mc.get("cpu_model") or "?"],
        ["Instruction sets", ", ".join(mc.get("instruction_sets") or []) or "?"],
        ["Cores", f"{mc.get('available_cores', '?')} available ({mc.get('physical_cores') or '?'} physical)"],
        ["Runtimes", ", ".join(f"{k} {v}" for k, v in (mc.get("runtimes") or {}).items())
         or (f"onnxruntime {mc['ort_version']}" if mc.get("ort_version") else "?")],
    ]))
    for section in (_perf_blocks, _loss_blocks, _optimization_blocks, _benchmark_blocks):
        out += section(report)
    return out


def _perf_blocks(report: Report) -> list:
    """The perf profiles: a table of all, a latency chart, and per profile its op types and slowest nodes."""
    out: list = []
    out.append(Heading(2, "Performance profiles"))
    if not report.perf:
        out.append(Para("No measured perf profile."))
    else:
        out.append(Table(
            ["Profile", "Batch", "Cores", "Median ms", "p90 ms", "items/s", "INT8 ms", "INT8 speedup (interleaved)",
             "Measured on"],
            [[e.name, e.batch_size, e.core_count, ms(e.latency_ms.get("median")), ms(e.latency_ms.get("p90")),
              f"{e.items_per_second:.1f}", ms(e.int8_median_ms),
              f"failed: {e.int8_error}" if e.int8_error else times(None) if e.int8_speedup is None else
              format_ratio(e.int8_speedup, e.int8_round_ratios),
              _target(e.target)]
             for e in report.perf], right={1, 2, 3, 4, 5, 6, 7}))
        out.append(Chart("Measured median latency per profile", [e.name for e in report.perf],
                         [e.latency_ms.get("median") or 0.0 for e in report.perf], "ms",
                         [ms(e.latency_ms.get("median")) + " ms" for e in report.perf]))
        for e in report.perf:
            out.append(Heading(3, f"Perf profile {e.name}: batch {e.batch_size}, {plural(e.core_count, 'core')}"))
            lat = e.latency_ms
            extra = f" Imported from {e.imported.get('from')}." if e.imported else ""
            out.append(Para(f"Measured median {ms(lat.get('median'))} ms/batch (p90 {ms(lat.get('p90'))}, min "
                            f"{ms(lat.get('min'))}), {e.items_per_second:.1f} items/s, on {_target(e.target)}, "
                            f"{e.target.get('runtime') or 'onnxruntime ' + (e.target.get('ort_version') or '?')}. "
                            f"Per-node times come from a separate profiled pass, each node's median over its "
                            f"{e.profiled_runs or 'profiled'} runs, scaled to the median (the profiler's own overhead "
                            f"taken out); they add up to {ms(e.node_total_ms)} ms. The INT8 speedup is FP32 / INT8 "
                            f"timed interleaved, its spread over the rounds in brackets.{extra}"))
            out += _warnings(e.warnings)
            ops = [g for g in e.op_types if g.time_ms > 0]
            out.append(Chart(f"{e.name}: time per op type (ms per batch; {len(e.op_types) - len(ops)} op types "
                             "with no time of their own not shown)", [g.id for g in ops], [g.time_ms for g in ops],
                             "ms", [f"{ms(g.time_ms)} ms ({pct(g.share)})" + (f", INT8 {ms(g.int8_time_ms)} ms"
                                                                            if g.int8_time_ms is not None else "")
                                    for g in ops]))
            out.append(Para(f"The {len(e.top)} slowest nodes (ms per batch, measured):"))
            out.append(Table(["Node id", "Op type", "ms", "% of total", "INT8 ms"],
                             [[n.id, n.op_type, ms(n.time_ms), pct(n.share), ms(n.int8_time_ms)] for n in e.top],
                             right={2, 3, 4}))
    return out


def _loss_blocks(report: Report) -> list:
    """The loss profiles: per profile the most and least sensitive layers at its level."""
    out: list = []
    out.append(Heading(2, "Loss profiles"))
    if not report.loss:
        out.append(Para("No measured loss profile."))
    for e in report.loss:
        out.append(Heading(3, f"Loss profile {e.name}: {e.method}, sensitivity at sparsity {e.level:g}"))
        out.append(Para(f"Metric: {e.metric_description}. {e.layers} layers; average sensitivity (0.95 − 0) "
                        f"{num(e.average_sensitivity)}; est. recovery (heuristic) "
                        f"{'n/a' if e.est_recovery is None else f'{e.est_recovery * 100:.1f}%'}."))
        out.append(Chart(f"{e.name}: most sensitive layers at {e.level:g}", [r.id for r in e.most],
                         [r.value for r in e.most], "", [num(r.value) for r in e.most]))
        for title, rows in (("Most sensitive", e.most), ("Least sensitive", e.least)):
            if rows:
                out.append(Para(f"{title}:"))
                out.append(Table(["Rank", "Node id", "Weight", "Op type", "Params", "Sensitivity"],
                                 [[r.rank, r.id, r.weight_name, r.op_type, format_count(r.params), num(r.value)]
                                  for r in rows], right={0, 4, 5}))
    return out


def _optimization_blocks(report: Report) -> list:
    """The optimizations: settings, estimates, what apply measured and the benchmarks of each."""
    out: list = []
    out.append(Heading(2, "Optimizations"))
    if not report.optimizations:
        out.append(Para("No optimization."))
    for e in report.optimizations:
        out.append(Heading(3, f"Optimization {e.name} ({e.structure})"))
        pruned = e.rows_summary or f"{e.pruned_layers} of {e.layers} layers pruned"
        out.append(Para(f"Built from perf profile {e.perf_profile} and loss profile {e.loss_profile}; {pruned}."))
        out += _warnings(e.warnings)
        if e.search_metric:
            out.append(Para(f"Searched within an accuracy budget; metric: {e.search_metric}. Predicted output change: "
                            f"{e.predicted}."))
        out.append(Table(["Setting", "Value"], [[k, num(v)] for k, v in e.setting_rows]))
        est = e.estimates
        if e.unreliable:
            out.append(Para(f"Unreliable: {e.unreliable}."))
        out.append(Table(["Estimate", "Value"], [
            [label, (ms(est.get(k)) + " ms") if k.endswith("_ms") and est.get(k) is not None else
             times(est.get(k)) if k.endswith(("speedup", "reduction", "compression")) else
             f"{est[k] * 100:.1f}%" if k == "est_recovery" else num(est.get(k), ".3f")]
            for k, label in ESTIMATE_FIELDS if est.get(k) is not None]))  # not estimated by the structure: left out
        a = e.applied
        if a:
            d = a.get("output_diff") or {}
            fid = applied_fidelity(d)
            speed = next((f"; measured {times(b['speedup'])} ({b['benchmark']}, batch {b['batch_size']}, "
                          f"{b['core_count']} cores)" for b in e.benchmarks if b.get("speedup")), "")
            out.append(Para(f"Applied{' (stale: the settings changed since)' if a.get('stale') else ''}: file "
                            f"{format_bytes(a.get('file_size_bytes'), none='?')} (baseline "
                            f"{format_bytes(a.get('baseline_size_bytes'), none='?')}); output vs baseline: "
                            f"{fid.text if fid else 'not measured'}, max |diff| {num(d.get('max_abs'), '.3g')}"
                            f"{speed}."))
            if fid is not None and fid.too_far:
                out.append(Para(f"Warning: {fid.flag}."))
        else:
            out.append(Para("Not applied."))
        if e.benchmarks:
            out.append(Table(["Benchmark", "Batch", "Cores", "Median ms", "items/s", "Speedup (measured)"],
                             [[b["benchmark"], b["batch_size"], b["core_count"], ms(b["median_ms"]),
                               f"{b['items_per_second']:.1f}", times(b["speedup"])] for b in e.benchmarks],
                             right={1, 2, 3, 4, 5}))
    return out


def _benchmark_blocks(report: Report) -> list:
    """The benchmarks: per benchmark its rows and its measured speedups."""
    out: list = []
    out.append(Heading(2, "Benchmarks"))
    if not report.benchmarks:
        out.append(Para("No benchmark."))
    for e in report.benchmarks:
        out.append(Heading(3, f"Benchmark {e.name}"))
        sysinfo = e.system or {}
        runtimes = f"runtimes {', '.join(e.runtimes)}" if e.runtimes else e.engine
        out.append(Para(f"{e.created}; {e.warmup} warm-up and {e.iterations} timed runs per model, interleaved; "
                        f"{runtimes}; on {_target(sysinfo)}. Every speedup is against the "
                        f"{e.reference or 'baseline'}."))
        out += _warnings(e.warnings)
        noisy = any(r.noise for r in e.rows)
        out.append(Table(["Model", "Batch", "Cores", "Median ms", "p90 ms", "items/s", "Speedup"]
                         + (["Noise"] if noisy else []),
                         [[r.model, r.batch_size, r.core_count, ms(r.median_ms), ms(r.p90_ms),
                           f"{r.items_per_second:.1f}", times(r.speedup)] + ([f"! {r.noise}" if r.noise else ""]
                                                                             if noisy else [])
                          for r in e.rows], right={1, 2, 3, 4, 5, 6}))
        if noisy:
            out += _warnings(["the rows marked ! are noisy (their runs disagree: the machine was busy), so their "
                              "speedups may be off; measure again on a quiet machine"])
        acc = accuracy_table(e.accuracy)
        if acc is not None:  # accuracy beside speed: one column per model, the metric named
            out.append(Para(acc.title + ("" if acc.title.endswith((":", ".")) else ".")))
            out.append(Table(acc.headers, acc.rows, right=set(range(1, len(acc.headers)))))
        out.append(Chart(f"{e.name}: measured speedup vs the {e.reference or 'baseline'}",
                         [f"{r.model} · b{r.batch_size} · {r.core_count}c" for r in e.rows],
                         [r.speedup or 0.0 for r in e.rows], "x", [times(r.speedup) for r in e.rows], reference=1.0))
    return out


def _warnings(warnings: list) -> list:
    """One paragraph per warning, marked as one (the TUI shows the same ones)."""
    return [Para(f"Warning: {w}") for w in warnings or []]


# --------------------------------------------------------------------------------------------- markdown
_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]|"})


def _md_text(v: Any, block: bool = False) -> str:
    """Text as Markdown shows it, never as markup: control characters shown (:func:`safe_text`), ``& < >`` as
    entities (no raw HTML such as ``<script>`` or ``<img>``), ``\\ ` * _ [ ] |`` escaped (no link, image, code
    span, emphasis or table cell break), on one line; with ``block`` (a heading's or paragraph's text) a block
    marker at its start (``#``, ``-``, ``+``, ``=``, ``1.``) is escaped too. Every string of a block goes through
    it: names come from models and imported files."""
    text = " ".join(safe_text(v).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").split("\n"))
    text = text.translate(_MD_SPECIAL)
    marker = re.match(r"\s*(?:[#+=-]|\d{1,9}(?=[.)](?:\s|$)))", text) if block else None
    if marker:
        cut = marker.end() if text[marker.end() - 1].isdigit() else marker.end() - 1
        text = text[:cut] + "\\" + text[cut:]
    return text


def _md_cell(v: Any) -> str:
    return _md_text(v)


def _md_table(headers: list, rows: list, right: set) -> list:
    lines = ["| " + " | ".join(_md_cell(h) for h in headers) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return lines


def render_markdown(report: Report, top: int = 10) -> str:
    """GitHub-flavoured Markdown: tables, and each chart as a table with a text bar column."""
    lines: list = []
    for b in blocks(report, top):
        if isinstance(b, Heading):
            lines += ["#" * b.level + " " + _md_text(b.text, block=True), ""]
        elif isinstance(b, Para):
            lines += [_md_text(b.text, block=True), ""]
        elif isinstance(b, Table):
            lines += _md_table(b.headers, b.rows, b.right) + [""]
        elif isinstance(b, Chart) and b.labels:
            vmax = max(b.values) or 1.0
            bars = ["█" * max(1 if v > 0 else 0, round(20 * v / vmax)) for v in b.values]
            lines += [f"*{_md_text(b.title)}*", ""]
            lines += _md_table(["", "Value", ""], [[lab, t, bar] for lab, t, bar in zip(b.labels, b.text, bars)],
                               {1}) + [""]
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------------------- html
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1100px;
       padding: 0 1em; color: #1f1f1f; line-height: 1.4; }
h1 { border-bottom: 2px solid #3b6ea8; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .1em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: 13px; }
th, td { border: 1px solid #d0d0d0; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f3f7; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td { max-width: 420px; overflow-wrap: break-word; }  /* a long node id breaks, never a word that fits */
svg.chart { display: block; margin: .5em 0 1em; max-width: 100%; height: auto; }
p { margin: .4em 0 .8em; }
"""


def _h(v: Any) -> str:
    """Text as HTML shows it: escaped, control characters shown (:func:`safe_text`)."""
    return escape(safe_text(v))


def _html_table(b: Table) -> str:
    head = "".join(f'<th class="num">{_h(h)}</th>' if i in b.right else f"<th>{_h(h)}</th>"
                   for i, h in enumerate(b.headers))
    rows = "".join("<tr>" + "".join(f'<td class="num">{_h(c)}</td>' if i in b.right else
                                    f"<td>{_h(c)}</td>" for i, c in enumerate(r)) + "</tr>" for r in b.rows)
    thead = f"<thead><tr>{head}</tr></thead>" if any(str(h) for h in b.headers) else ""
    return f"<table>{thead}<tbody>{rows}</tbody></table>"


def render_html(report: Report, top: int = 10) -> str:
    """One self-contained HTML file: inline CSS, inline SVG charts (:func:`sparsify_tui.report.svg.bar_chart`)."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_h(report.title)}</title><style>{CSS}</style></head><body>"]
    for b in blocks(report, top):
        if isinstance(b, Heading):
            parts.append(f"<h{b.level}>{_h(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            parts.append(f"<p>{_h(b.text)}</p>")
        elif isinstance(b, Table):
            parts.append(_html_table(b))
        elif isinstance(b, Chart) and b.labels:
            parts.append(bar_chart([safe_text(x) for x in b.labels], b.values, unit=b.unit, title=safe_text(b.title),
                                   reference=b.reference, texts=[safe_text(x) for x in b.text]))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render_json(report: Report) -> str:
    """The report's data (:meth:`Report.to_dict`) as indented JSON."""
    return json.dumps(report.to_dict(), indent=1) + "\n"  # ASCII: every control character as a \\u escape


def render(report: Report, fmt: str, top: int = 10) -> str:
    """``fmt`` "md", "html" or "json". Raises ``ValueError`` for another format."""
    if fmt == "md":
        return render_markdown(report, top)
    if fmt == "html":
        return render_html(report, top)
    if fmt == "json":
        return render_json(report)
    raise ValueError(f"unknown report format {fmt!r}: use md, html or json")
