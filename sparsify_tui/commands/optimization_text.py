"""The text and JSON of an optimization the CLI prints (``optimize``, ``optimization show``, the INT8 search):
one renderer per result, in its structure's layout."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparsify_tui.formatting import plural
from sparsify_tui.text import cli_lines
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
        return f"{t.target:>5.2f}x  {q:<15}  {t.kept_channels:>5}/{t.channels:<5}  "

    return "\n".join(_search_lines(budget_search_facts(s), s, "trial  target  INT8 (FP32 grp)  kept ch     metric      "
                                   "within  median ms  speedup  note", columns))


def _search_lines(facts: list, s, head: str, columns) -> list:
    """A search's text for the CLI: its head (:mod:`sparsify_tui.text.searches`), then a row a trial (``*`` marks
    the chosen one): index, ``columns(trial)`` (the search's own columns), metric, within budget, median ms,
    speedup vs FP32, note."""
    from sparsify_tui.formatting import format_fixed as _fmt

    lines = cli_lines(facts) + ["  " + head]
    for t in s.trials:
        mark = "*" if t.index == s.chosen else " "
        lines.append(f"{mark} {t.index:>4}  {columns(t)}{t.metric_value:<10.4g}  "
                     f"{'yes' if t.within_budget else 'no ':<6}  {_fmt(t.median_ms, '.3f'):>9}  "
                     f"{_fmt(t.speedup):>6}x  {t.note}")
    lines.append("  (* = chosen: the fastest trial within budget)")
    return lines


def render_text(opt: "Optimization", project_name: str) -> str:
    """Human-readable summary of a stored, evaluated optimization for the CLI (its structure's layout)."""
    if opt.settings.structure == "channel":
        return render_channel_text(opt, project_name)
    return _render_unstructured(opt, project_name)


def _fp32_count(opt: "Optimization") -> str:
    """"N layers" kept FP32, plus the node count when it differs (an INT8 search also keeps the nodes between
    layers FP32)."""
    excluded = set(opt.quantization.excluded or [])
    layers = sum(1 for l in opt.layers if l.node_id in excluded)
    return f"{layers} layers" + (f" ({len(excluded)} nodes)" if len(excluded) != layers else "")


def _render_unstructured(opt: "Optimization", project_name: str) -> str:
    """Human-readable summary of a stored, evaluated optimization (an
    :class:`~sparsify_tui.optimization.record.Optimization`) for the CLI."""
    from sparsify_tui.formatting import format_fixed as _fmt, shell_arg
    from sparsify_tui.optimization.estimates import recovery_text

    est, st, ep, q = opt.estimates, opt.settings, opt.epochs, opt.quantization
    lines = [
        f"optimization {opt.name!r} ({opt.id}) of project {project_name!r}",
        f"  profiles: perf {opt.perf_profile_name}, loss {opt.loss_profile_name}",
        f"  target sparsity {st.sparsity:.2f}, achieved {est.avg_sparsity:.3f} (params-weighted), "
        f"balance {st.balance:.2f}",
        f"  quantization: {'INT8' if q.enabled else 'off'}"
        + (f", {_fp32_count(opt)} kept FP32" if q.enabled else ""),
        f"  epochs: stabilize to {ep.pruning_start_epoch}, prune to {ep.pruning_end_epoch}, "
        f"fine-tune to {ep.total_epochs}, update every {ep.update_frequency}",
        "  estimates:",
        f"    {est.sparse_runtime}: {_fmt(est.sparse_ms)} ms/batch, speedup {_fmt(est.sparse_speedup)}x (est.)",
        f"    onnxruntime: {_fmt(est.ort_ms)} ms/batch, speedup {_fmt(est.ort_speedup)}x "
        f"(no gain from sparsity; INT8 {'measured' if est.int8_measured else 'not measured'}"
        + (f": {est.int8_source}" if est.int8_source else "") + ")",
        f"    FLOPs reduction {_fmt(est.flops_reduction)}x, params compression "
        f"{_fmt(est.params_compression)}x, est. recovery {recovery_text(est.est_recovery, opt.loss_profile)}",
        *applied_lines(opt),
        "  layers (weight name, sparsity, note):",
    ]
    for l in opt.layers:
        note = "override" if l.override else (l.reason or "")
        lines.append(f"    {l.weight_name[:48]:<48} {l.sparsity:.3f}  {note}")
    for w in opt.all_warnings():  # the TUI's card and the report list the same
        lines.append(f"  warning: {w}")
    lines.append(f"next: sparsify-tui export {shell_arg(project_name)} {shell_arg(opt.name)} --code pytorch-plain")
    return "\n".join(lines)


def render_channel_text(opt: "Optimization", project_name: str) -> str:
    """Text summary of a channel optimization: target, estimates (onnxruntime, time model named, measured when
    benchmarked) and one line per group (channels, kept, ratio, est. ms, est. loss, note)."""
    from sparsify_tui.formatting import format_fixed as _fmt, shell_arg
    from sparsify_tui.optimization.fidelity import predicted_change

    est, st, q = opt.estimates, opt.settings, opt.quantization
    target = {"uniform": f"uniform ratio {st.sparsity:.2f} per group",
              "sparsity": f"{st.sparsity:.2f} of all prunable channels (allocated)",
              "speedup": f"{st.target_speedup:.2f}x estimated speedup", "macs": f"{st.macs_reduction:.2f}x fewer MACs",
              }.get(st.target, st.target)
    if not q.enabled:
        int8 = ""
    elif est.int8_measured:
        int8 = f"; with INT8: {_fmt(est.ort_speedup)}x (est.)"
    else:  # no measured INT8 time (the FLOPS profile, or a profile without INT8): the gain is not known
        int8 = "; with INT8: not estimated (no measured INT8 time; benchmark the applied model)"
    lines = [
        f"optimization {opt.name!r} ({opt.id}) of project {project_name!r}: CHANNEL pruning",
        f"  profiles: perf {opt.perf_profile_name}, loss {opt.loss_profile_name}",
        f"  target: {target}; achieved {_fmt(est.achieved, '.3f')}; balance {st.balance:.2f}, cap {st.max_sparsity:.2f}"
        f" per group, round_to {st.round_to}",
        f"  channels kept: {est.kept_channels} of {est.channels} prunable ({est.groups_thinned} groups thinned)",
        f"  quantization: {'INT8 after thinning' if q.enabled else 'off'}",
        "  estimates (onnxruntime, thinned dense model):",
        f"    FP32: {_fmt(est.ort_ms_fp32, '.3f')} ms/batch (baseline {_fmt(est.baseline_ms, '.3f')}), "
        f"speedup {_fmt(est.ort_speedup_fp32)}x (est.)" + int8,
        f"    time model: {est.time_model_note}",
        f"    MACs {_fmt(est.macs, '.4g')} -> {_fmt(est.macs_pruned, '.4g')} ({_fmt(est.macs_reduction)}x fewer), "
        f"params {_fmt(est.params, '.4g')} -> {_fmt(est.params_nonzero, '.4g')}",
        f"  predicted output change: {predicted_change(opt)}",
    ]
    lines += applied_lines(opt)
    timed = est.baseline_ms is not None  # group ms only from a measured perf profile (FLOPS: relative units)
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


def applied_lines(opt: "Optimization") -> list:
    """The applied model's held-out accuracy or agreement next to its measured speedup, and the too-far flag
    (:mod:`sparsify_tui.optimization.fidelity`): lines of ``optimization show``, any structure."""
    from sparsify_tui.formatting import format_fixed as _fmt
    from sparsify_tui.optimization.fidelity import applied_fidelity

    fid = applied_fidelity(opt.applied.diff if opt.applied is not None else None)
    m = opt.measured
    if m is not None and m.speedup is not None:
        stale = " (stale: the optimization changed since)" if m.stale else ""
        speed = (f"measured {_fmt(m.speedup)}x ({m.benchmark_name!r}, batch {m.batch_size}, "
                 f"{plural(m.core_count, 'core')}), estimated {_fmt(m.estimated_speedup)}x{stale}")
    else:
        speed = "speed not measured yet (sparsify-tui benchmark)"
    if fid is None:
        return ["  applied: not yet (sparsify-tui apply, with --data to score held-out items)",
                f"  {speed}"]
    lines = [f"  applied: {fid.text}; {speed}"]
    if fid.too_far:
        lines.append(f"  warning: {fid.flag}")
    return lines
