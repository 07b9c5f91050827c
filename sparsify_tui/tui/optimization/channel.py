"""What the Optimization section shows of a channel optimization: its header (structure and target), the estimate
texts (onnxruntime estimate next to the benchmark's measurement, the time model named, the apply result), and the
Groups table (channels, kept, ratio, sensitivity, est. ms, est. speedup, measured ms once benchmarked).

Plain functions of the stored record dict, so the section stays one call per view."""

from __future__ import annotations

from typing import Any, Optional

from rich.markup import escape

from sparsify_tui.formatting import format_count, format_fixed
from sparsify_tui.tui.widgets.tables import Column

TARGET_TEXT = {
    "uniform": "uniform ratio {sparsity:.2f} per group",
    "sparsity": "{sparsity:.2f} of all channels, allocated",
    "speedup": "{target_speedup:.2f}× faster (est.)",
    "macs": "{macs_reduction:.2f}× fewer MACs",
}
TARGET_FIELD = {"uniform": "sparsity", "sparsity": "sparsity", "speedup": "target_speedup",
                "macs": "macs_reduction"}
"""The setting the Target input edits for each channel target."""


def is_channel(rec: Optional[dict]) -> bool:
    return bool(rec) and (rec.get("settings") or {}).get("structure") == "channel"


def list_text(rec: dict) -> str:
    """The second line of a channel optimization in the list: est. speedup (and measured)."""
    est, m = rec.get("estimates") or {}, rec.get("measured") or {}
    return (f"  ch {format_fixed(est.get('ort_speedup'))}×" + (f" m {format_fixed(m.get('speedup'))}×" if m else "")
            + (" · INT8" if (rec.get("quantization") or {}).get("enabled") else ""))


def target_text(st: dict) -> str:
    fmt = TARGET_TEXT.get(st.get("target") or "uniform", "{target}")
    try:
        return fmt.format(**{"sparsity": 0.0, "target_speedup": 1.0, "macs_reduction": 1.0, **st})
    except (KeyError, ValueError):
        return str(st.get("target"))


def measured_text(rec: dict) -> str:
    """"measured 1.62× (benchmark 'b1', batch 1, 2 cores)", or how to get a measurement."""
    m = rec.get("measured") or {}
    if not m:
        return "measured: not yet (a Benchmarks run with this optimization records it)"
    stale = " [stale: changed since]" if m.get("stale") else ""
    return (f"measured {format_fixed(m.get('speedup'))}× ({escape(str(m.get('benchmark_name')))}, batch "
            f"{m.get('batch_size')}, {m.get('core_count')} cores){stale}")


def header_text(rec: dict) -> str:
    est, st = rec.get("estimates") or {}, rec.get("settings") or {}
    return (f"[b]{escape(rec['name'])}[/b] · channel · perf {escape(str(rec.get('perf_profile_name')))} · "
            f"loss {escape(str(rec.get('loss_profile_name')))}\n"
            f"target {target_text(st)} · est. {format_fixed(est.get('ort_speedup'))}× ORT · {measured_text(rec)}")


def applied_text(rec: dict) -> str:
    """The apply result of a channel optimization (deterministic fields only)."""
    a = rec.get("applied") or {}
    if a.get("structure") != "channel":
        return "Not applied yet: Benchmarks (5), a applies and exports it."
    d = a.get("output_diff") or {}
    groups = a.get("groups") or []
    thinned = sum(1 for g in groups if g.get("kept", 0) < g.get("channels", 0))
    kept = sum(g.get("kept", 0) for g in groups)
    chans = sum(g.get("channels", 0) for g in groups)
    top1 = d.get("top1_agreement")
    return (f"[b]Applied[/b] {'INT8 after thinning' if a.get('quantized') else 'FP32'}: {thinned} groups thinned, "
            f"{kept}/{chans} channels kept\n"
            f"MACs {format_count(a.get('macs_before'), sep=' ')} → {format_count(a.get('macs_after'), sep=' ')} "
            f"({format_fixed(a.get('macs_reduction'))}× fewer), exactness {format_fixed(a.get('exactness_max_rel_diff'), '.1e')}\n"
            f"Output vs baseline: NMSE {format_fixed(d.get('nmse'), '.4f')}, max |Δ| {format_fixed(d.get('max_abs'), '.3g')}"
            + (f", top-1 {top1:.0%}" if top1 is not None else "")
            + f"\nSize {format_fixed((a.get('file_size_bytes') or 0) / 1e6, '.2f')} MB "
              f"(baseline {format_fixed((a.get('baseline_size_bytes') or 0) / 1e6, '.2f')} MB)")


def estimate_texts(rec: dict) -> dict:
    """Texts of the Summary / Perf / FLOPs / Params estimate tabs of a channel optimization."""
    est, st = rec.get("estimates") or {}, rec.get("settings") or {}
    q = rec.get("quantization") or {}
    warn = "".join(f"\n[b yellow]warning:[/] {escape(w)}" for w in rec.get("warnings") or [])
    m = rec.get("measured") or {}
    summary = (f"Target {target_text(st)} (achieved {format_fixed(est.get('achieved'), '.3f')}), cap "
               f"{st.get('max_sparsity', 0):.2f}, round to {st.get('round_to')}\n"
               f"Channels kept {est.get('kept_channels')}/{est.get('channels')} in {est.get('groups_thinned')} "
               f"thinned groups; est. output change {format_fixed(est.get('est_output_change'), '.4g')} "
               f"({escape(str(est.get('loss_metric')))})\n"
               f"Quantization {'INT8 after thinning' if q.get('enabled') else 'off'}\n" + applied_text(rec) + warn)
    units = "ms" if est.get("baseline_ms") is not None else "relative"
    meas = (f"Measured {format_fixed(m.get('speedup'))}× ({format_fixed(m.get('median_ms'), '.3f')} ms vs "
            f"{format_fixed(m.get('baseline_ms'), '.3f')} ms){' [stale]' if m.get('stale') else ''}"
            if m else "Measured: not benchmarked yet")
    ms = (f" ({format_fixed(est.get('ort_ms_fp32'), '.3f')} of {format_fixed(est.get('baseline_ms'), '.3f')} ms)"
          if est.get("baseline_ms") is not None else "")
    perf = (f"[b]onnxruntime, thinned dense model[/b] ({units})\n"
            f"Estimated {format_fixed(est.get('ort_speedup_fp32'))}× FP32{ms}"
            + (f", {format_fixed(est.get('ort_speedup'))}× with INT8" if q.get("enabled") else "") + "\n"
            f"{meas}\n"
            f"[dim]{escape(str(est.get('time_model_note') or ''))}[/]")
    flops = (f"MACs {format_count(est.get('macs'), sep=' ')} → {format_count(est.get('macs_pruned'), sep=' ')}\n"
             f"Reduction {format_fixed(est.get('macs_reduction'))}× (est.; apply counts the file)")
    params = (f"Params {format_count(est.get('params'), sep=' ')} → {format_count(est.get('params_nonzero'), sep=' ')}"
              f" (dense)\nSize {format_fixed(est.get('size_mb_fp32'), '.2f')} MB → "
              f"~{format_fixed(est.get('est_size_mb'), '.2f')} MB{' INT8' if q.get('enabled') else ''}")
    return {"summary": summary, "performance": perf, "flops": flops, "params": params}


def loss_label(record: dict) -> str:
    """", channel" for a channel loss profile record (its rows are groups), else ""."""
    return ", channel" if (record.get("settings") or {}).get("structure") == "channel" else ""


def create_settings(ws, project_id: str, values: dict) -> tuple:
    """``(settings, sparsity, loss)`` for ``create_optimization`` from the create dialog's values of a channel
    optimization: the target and its value; a per-layer loss profile (or Approximated) chosen for it becomes None,
    the newest channel loss profile or, without one, the group-norm magnitude."""
    target = values.get("target") or "uniform"
    field = TARGET_FIELD[target]
    settings = {"structure": "channel", "target": target}
    sparsity = 0.3
    if field == "sparsity":
        sparsity = float(values["sparsity"])
    else:
        settings[field] = float(values["sparsity"])
    loss = values.get("loss")
    if loss:
        rec = next((r for r in ws.list_records(project_id, "loss_profiles") if r["id"] == loss), None)
        if rec is None or not loss_label(rec):
            loss = None
    return settings, sparsity, loss


def group_rows(rec: dict) -> list:
    """Rows of the Groups table: one per channel group."""
    measured = (rec.get("measured") or {}).get("groups") or {}
    timed = (rec.get("estimates") or {}).get("baseline_ms") is not None  # ms only from a measured perf profile
    rows = []
    for i, l in enumerate(rec.get("layers") or []):
        note = "override" if l.get("override") else (l.get("reason") or "")
        meas = measured.get(l["weight_name"]) or {}
        rows.append({
            "_key": l["weight_name"], "index": i, "layer": l["weight_name"], "channels": l.get("channels"),
            "kept": l.get("kept"), "kept_of": f"{l.get('kept')}/{l.get('channels')}", "sparsity": float(l.get("sparsity") or 0.0), "sens": l.get("est_loss"),
            "est_ms": l.get("est_ms") if (timed and l.get("prunable", True)) else None,
            "speedup": l.get("est_speedup") if l.get("prunable", True) else None, "measured": meas.get("ms"),
            "note": note,
        })
    return rows


def _num(spec: str, suffix: str = ""):
    def fmt(v: Any) -> str:
        return "" if v is None else format(v, spec) + suffix
    return fmt


GROUP_COLUMNS = [
    Column("layer", "Group", filter=True, pin=True),
    Column("kept_of", "Kept"),
    Column("sparsity", "Ratio", numeric=True, fmt=_num(".2f")),
    Column("sens", "Sens", numeric=True, fmt=_num(".3g")),
    Column("est_ms", "Est ms*", numeric=True, fmt=_num(".3f")),
    Column("speedup", "Est×*", numeric=True, fmt=_num(".2f")),
    Column("measured", "Meas ms", numeric=True, fmt=_num(".3f")),
    Column("note", "Note", filter=True),
]
