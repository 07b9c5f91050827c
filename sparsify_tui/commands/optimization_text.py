"""The text and JSON of an optimization the CLI prints (``optimize``, ``optimization show``, the INT8 search):
one renderer per result, in its structure's layout."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparsify_tui.text import cli_lines
from sparsify_tui.text.optimization import CARDS, Hints, epochs_fact, estimate_facts, profiles_fact
from sparsify_tui.text.searches import budget_search_facts, int8_search_facts

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization


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
    lines = _search_lines(int8_search_facts(s), s, "trial  FP32 groups  FP32 nodes  metric      within  median ms  "
                          "speedup  note", lambda t: f"{t.groups:>11}  {t.excluded_count:>10}  ")
    rows = [r for r in layer_states(opt.quantization, opt.layers) if r["state"] == "FP32"]
    if rows and opt.quantization.enabled:
        lines.append(f"  layers kept FP32 ({len(rows)}):")
        for r in rows[:20]:
            lines.append(f"    {str(r['node_id'])[:40]:<40} INT8 sens. {_fmt(r['sensitivity'], '.3g', '-'):>9}  {r['why']}")
        if len(rows) > 20:
            lines.append(f"    ... {len(rows) - 20} more (--json lists them)")
    return "\n".join(lines)


def render_budget_text(opt: "Optimization") -> str:
    """The budget search of an optimization for the CLI: metric and why, budget, the split, every trial, the
    choice."""
    s = opt.search
    if s is None:
        return ""

    def columns(t) -> str:
        q = f"yes ({t.fp32_groups})" if t.quantized else "no"
        return f"{t.target:>5.2f}x  {t.runtime_text:<17}  {q:<15}  {t.kept_channels:>5}/{t.channels:<5}  "

    return "\n".join(_search_lines(budget_search_facts(s), s, "trial  target  runtime            INT8 (FP32 grp)  "
                                   "kept ch     metric      within  median ms  speedup  note", columns))


def _search_lines(facts: list, s, head: str, columns) -> list:
    """A search's text for the CLI: its head (:mod:`sparsify_tui.text.searches`), then a row a trial (``*`` marks
    the chosen one): index, ``columns(trial)`` (the search's own columns), metric, within budget, median ms,
    speedup vs FP32, note."""
    from sparsify_tui.formatting import format_fixed as _fmt

    top1 = s.metric == "top1"  # the value is a drop of top-1 accuracy, shown in points (as the head says it)
    lines = cli_lines(facts) + ["  " + head.replace("metric      ", f"{'drop (pts)' if top1 else s.metric:<12}")]
    for t in s.trials:
        mark = "*" if t.index == s.chosen else " "
        score = f"{s.metric_label} {t.score:.4g}; " if getattr(t, "score", None) is not None else ""
        value = f"{t.metric_value * 100:<10.1f}" if top1 else f"{t.metric_value:<10.4g}"
        lines.append(f"{mark} {t.index:>4}  {columns(t)}{value}  "
                     f"{'yes' if t.within_budget else 'no ':<6}  {_fmt(t.median_ms, '.3f'):>9}  "
                     f"{(_fmt(t.speedup) + 'x') if t.speedup is not None else 'n/a':>7}  {score}{t.note}")
    lines.append("  (* = chosen: the fastest trial within budget)")
    return lines


def render_text(opt: "Optimization", project_name: str) -> str:
    """Human-readable summary of a stored, evaluated optimization for the CLI (its structure's layout)."""
    if opt.settings.structure == "channel":
        return render_channel_text(opt, project_name)
    return _render_unstructured(opt, project_name)


HINTS = Hints(apply="sparsify-tui apply, with --data to score held-out items", benchmark="sparsify-tui benchmark")
"""Where a CLI user applies and benchmarks an optimization (:mod:`sparsify_tui.text.optimization`)."""


def summary_lines(opt: "Optimization") -> list:
    """The summary of an optimization (:mod:`sparsify_tui.text.optimization`): profiles, epochs, the Summary card's
    facts, then each estimate card under its title."""
    cards = estimate_facts(opt, HINTS)
    lines = cli_lines([profiles_fact(opt), epochs_fact(opt), *cards.pop("summary")], "  ")
    for key, facts in cards.items():
        title = CARDS[key] if CARDS[key][:2].isupper() else CARDS[key][:1].lower() + CARDS[key][1:]  # FLOPs stays
        lines += [f"  {title}:"] + cli_lines(facts, "    ")
    return lines


def _render_unstructured(opt: "Optimization", project_name: str) -> str:
    """Human-readable summary of a stored, evaluated optimization (an
    :class:`~sparsify_tui.optimization.record.Optimization`) for the CLI: the summary, one line per layer."""
    from sparsify_tui.formatting import shell_arg

    lines = [f"optimization {opt.name!r} ({opt.id}) of project {project_name!r}", *summary_lines(opt),
             "  layers (weight name, sparsity, note):"]
    for l in opt.layers:
        note = "override" if l.override else (l.reason or "")
        lines.append(f"    {l.weight_name[:48]:<48} {l.sparsity:.3f}  {note}")
    for w in opt.all_warnings():  # the TUI's card and the report list the same
        lines.append(f"  warning: {w}")
    lines.append(f"next: sparsify-tui export {shell_arg(project_name)} {shell_arg(opt.name)} --code pytorch-plain")
    return "\n".join(lines)


def render_channel_text(opt: "Optimization", project_name: str) -> str:
    """Text summary of a channel optimization: the summary, then one line per group (channels, kept, ratio, est.
    ms, est. loss, note)."""
    from sparsify_tui.formatting import format_fixed as _fmt, shell_arg

    lines = [f"optimization {opt.name!r} ({opt.id}) of project {project_name!r}: CHANNEL pruning",
             *summary_lines(opt)]
    timed = opt.estimates.baseline_ms is not None  # group ms only from a measured perf profile (FLOPS: relative)
    lines.append(f"  groups (id, channels -> kept, ratio, {'est. ms' if timed else 'est. speedup'}, est. loss, note):")
    for l in opt.layers:
        note = "override" if l.override else (l.reason or "")
        kept = l.kept if l.kept is not None else l.channels
        t = _fmt(l.est_ms, '.3f') if timed else _fmt(l.est_speedup) + "x"
        lines.append(f"    {l.weight_name[:40]:<40} {l.channels:>5} -> {kept:<5} {l.sparsity:.3f}  "
                     f"{t:>8}  {_fmt(l.est_loss, '.3g'):>8}  {note[:60]}")
    for w in opt.all_warnings():  # the TUI's card and the report list the same
        lines.append(f"  warning: {w}")
    lines.append(f"next: sparsify-tui apply {shell_arg(project_name)} {shell_arg(opt.name)} --json, then "
                 f"sparsify-tui benchmark {shell_arg(project_name)} -O {shell_arg(opt.name)}")
    return "\n".join(lines)
