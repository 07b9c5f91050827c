"""The Groups pane of a channel optimization: one row per channel group (channels, kept, ratio, sensitivity, est.
ms, est. speedup, measured ms once benchmarked), edited with the section's keys like the Layers pane; and what the
section shows of such a record: its header (structure and target), the estimate cards (onnxruntime estimate next
to the benchmark's measurement, the time model named, the apply result), its line in the list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from rich.markup import escape

from sparsify_tui.formatting import format_count, format_fixed, plural
from sparsify_tui.optimization.fidelity import applied_fidelity, predicted_change
from sparsify_tui.tui.optimization.pane import StructurePane, warnings_text
from sparsify_tui.tui.widgets.tables import Column

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization

TARGET_TEXT = {
    "uniform": "uniform ratio {sparsity:.2f} per group",
    "sparsity": "{sparsity:.2f} of all channels, allocated",
    "speedup": "{target_speedup:.2f}× faster (est.)",
    "macs": "{macs_reduction:.2f}× fewer MACs",
}
TARGET_FIELD = {"uniform": "sparsity", "sparsity": "sparsity", "speedup": "target_speedup",
                "macs": "macs_reduction"}
"""The setting the Target input edits for each channel target."""


def target_text(settings: Any) -> str:
    """What a channel optimization's settings ask for, e.g. "1.50× faster (est.)"."""
    st = settings.to_dict()
    fmt = TARGET_TEXT.get(st.get("target") or "uniform", "{target}")
    try:
        return fmt.format(**{"sparsity": 0.0, "target_speedup": 1.0, "macs_reduction": 1.0, **st})
    except (KeyError, ValueError):
        return str(st.get("target"))


def measured_text(rec: Optimization) -> str:
    """"measured 1.62× (benchmark 'b1', batch 1, 2 cores)", or how to get a measurement."""
    m = rec.measured
    if m is None:
        return "not measured yet (Benchmarks, n)"
    stale = " [stale: changed since]" if m.stale else ""
    return (f"measured {format_fixed(m.speedup)}× ({escape(str(m.benchmark_name))}, batch "
            f"{m.batch_size}, {plural(m.core_count, 'core')}){stale}")


def applied_text(rec: Optimization) -> str:
    """The apply result of a channel optimization (deterministic fields only)."""
    a = rec.applied
    if a is None or a.structure != "channel":
        return "Not applied yet: Benchmarks (5), a applies and exports it."
    d = a.diff
    groups = a.groups or []
    thinned = sum(1 for g in groups if g.get("kept", 0) < g.get("channels", 0))
    kept = sum(g.get("kept", 0) for g in groups)
    chans = sum(g.get("channels", 0) for g in groups)
    fid = applied_fidelity(d)
    return (f"[b]Applied[/b] {'INT8 after thinning' if a.quantized else 'FP32'}: {thinned} groups thinned, "
            f"{kept}/{chans} channels kept\n"
            f"MACs {format_count(a.macs_before, sep=' ')} → {format_count(a.macs_after, sep=' ')} "
            f"({format_fixed(a.macs_reduction)}× fewer), exactness {format_fixed(a.exactness_max_rel_diff, '.1e')}\n"
            f"Output vs baseline: {escape(fid.text) if fid else 'not measured'}, max |Δ| "
            f"{format_fixed(d.get('max_abs'), '.3g')}"
            + (f"\n[b red]{escape(fid.flag)}[/]" if fid and fid.too_far else "")
            + f"\nSize {format_fixed((a.file_size_bytes or 0) / 1e6, '.2f')} MB "
              f"(baseline {format_fixed((a.baseline_size_bytes or 0) / 1e6, '.2f')} MB)")


def accuracy_beside_speed(rec: "Optimization") -> str:
    """The applied model's held-out accuracy or agreement next to its measured speed (one line), or "" before apply
    (:mod:`sparsify_tui.optimization.fidelity`)."""
    fid = applied_fidelity(rec.applied.diff if rec.applied is not None else None)
    if fid is None:
        return ""
    flag = " [b red]too far from the original[/]" if fid.too_far else ""
    return f"Applied model: {escape(fid.text)}{flag}"


def loss_label(structure: str) -> str:
    """", channel" for a channel loss profile (its rows are groups), else ""."""
    return ", channel" if structure == "channel" else ""


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


class GroupsPane(StructurePane):
    """Channel pruning: one row per channel group (module docstring)."""

    STRUCTURE = "channel"
    CREATE_CHOICES = [("channel: same ratio R per group", "channel:uniform", "0.3"),
                      ("channel: est. speedup X on ORT", "channel:speedup", "1.5"),
                      ("channel: X times fewer MACs", "channel:macs", "2.0"),
                      ("channel: R of all channels, allocated", "channel:sparsity", "0.3")]
    TAB_ID = "tab-groups"
    TITLE = "Groups (l)"
    FOCUS = "#group-table"
    TABLE_ID = "group-table"
    COLUMNS = GROUP_COLUMNS
    HINT = "enter edit ratio · +/- 0.05 · x auto · * estimates (onnxruntime)"
    ROW_NOUN = "group"
    HEADER_KIND = "channel · "

    @classmethod
    def rows(cls, rec: Optimization) -> List[Dict[str, Any]]:
        measured = (rec.measured.groups if rec.measured is not None else None) or {}
        timed = rec.estimates is not None and rec.estimates.baseline_ms is not None  # ms only from a measured profile
        rows = []
        for i, l in enumerate(rec.layers):
            prunable = l.prunable
            meas = measured.get(l.weight_name)
            rows.append({
                "_key": l.weight_name, "index": i, "layer": l.weight_name, "channels": l.channels,
                "kept": l.kept, "kept_of": f"{l.kept}/{l.channels}",
                "sparsity": float(l.sparsity or 0.0), "sens": l.est_loss,
                "est_ms": l.est_ms if (timed and prunable) else None, "speedup": l.est_speedup if prunable else None,
                "measured": meas.ms if meas is not None else None,
                "note": "override" if l.override else (l.reason or ""),
            })
        return rows

    @classmethod
    def header_detail(cls, rec: Optimization) -> str:
        est = rec.estimates
        return (f"target {target_text(rec.settings)} · est. {format_fixed(est.ort_speedup if est else None)}× ORT · "
                f"{measured_text(rec)}")

    @classmethod
    def estimate_texts(cls, rec: Optimization) -> Dict[str, str]:
        from sparsify_tui.optimization.structures.channel import ChannelEstimates

        est, st, q, m = rec.estimates or ChannelEstimates(), rec.settings, rec.quantization, rec.measured
        summary = (f"Target {target_text(st)} (achieved {format_fixed(est.achieved, '.3f')}), cap "
                   f"{st.max_sparsity:.2f}, round to {st.round_to}\n"
                   f"Channels kept {est.kept_channels}/{est.channels} in "
                   f"{est.groups_thinned} thinned groups\n"
                   f"Predicted output change: {escape(predicted_change(rec))}\n"
                   f"Quantization {'INT8 after thinning' if q.enabled else 'off'}\n" + applied_text(rec)
                   + warnings_text(rec))
        units = "ms" if est.baseline_ms is not None else "relative"
        meas = (f"Measured {format_fixed(m.speedup)}× ({format_fixed(m.median_ms, '.3f')} ms vs "
                f"{format_fixed(m.baseline_ms, '.3f')} ms){' [stale]' if m.stale else ''}"
                if m is not None else "Measured: not benchmarked yet")
        ms = (f" ({format_fixed(est.ort_ms_fp32, '.3f')} of {format_fixed(est.baseline_ms, '.3f')}"
              " ms)" if est.baseline_ms is not None else "")
        beside = accuracy_beside_speed(rec)
        perf = (f"[b]onnxruntime, thinned dense model[/b] ({units})\n"
                f"Estimated {format_fixed(est.ort_speedup_fp32)}× FP32{ms}"
                + ((f", {format_fixed(est.ort_speedup)}× with INT8" if est.int8_measured else
                    ", with INT8: not estimated (no measured INT8 time)") if q.enabled else "") + "\n"
                f"{meas}\n" + (f"{beside}\n" if beside else "") +
                f"[dim]{escape(str(est.time_model_note or ''))}[/]")
        flops = (f"MACs {format_count(est.macs, sep=' ')} → "
                 f"{format_count(est.macs_pruned, sep=' ')}\n"
                 f"Reduction {format_fixed(est.macs_reduction)}× (est.; apply counts the file)")
        params = (f"Params {format_count(est.params, sep=' ')} → {format_count(est.params_nonzero, sep=' ')}"
                  f" (dense)\nSize {format_fixed(est.size_mb_fp32, '.2f')} MB → "
                  f"~{format_fixed(est.est_size_mb, '.2f')} MB{' INT8' if q.enabled else ''}")
        return {"summary": summary, "performance": perf, "flops": flops, "params": params}

    @classmethod
    def list_text(cls, rec: Optimization) -> str:
        """The est. speedup (and measured)."""
        est, m = rec.estimates, rec.measured
        return (f"  ch {format_fixed(est.ort_speedup if est else None)}×"
                + (f" m {format_fixed(m.speedup)}×" if m is not None else "")
                + (" · INT8" if rec.quantization.enabled else ""))

    @classmethod
    def target(cls, rec: Optimization) -> Tuple[str, str]:
        field = TARGET_FIELD.get(rec.settings.target or "uniform")
        return field, ("Target" if field != "sparsity" else "Ratio")

    @classmethod
    def chart_title(cls, rec: Optimization) -> str:
        return f"Channels removed per group ({len(rec.layers)} groups)"

    @classmethod
    def create_args(cls, ws, project_id: str, values: Dict[str, Any]) -> Tuple[Optional[dict], float, Optional[str]]:
        """The target and its value; a per-layer loss profile (or Approximated) chosen for a channel optimization
        becomes None: the newest channel loss profile or, without one, the group-norm magnitude."""
        from sparsify_tui.services.profiles import loss_profile_structure

        target = values.get("target") or "uniform"
        field = TARGET_FIELD[target]
        settings = {"structure": "channel", "target": target}
        sparsity = 0.3
        if field == "sparsity":
            sparsity = float(values["sparsity"])
        else:
            settings[field] = float(values["sparsity"])
        loss = values.get("loss")
        if loss and loss_profile_structure(ws, project_id, loss) != "channel":
            loss = None
        return settings, sparsity, loss


__all__ = ["GroupsPane", "GROUP_COLUMNS", "TARGET_FIELD", "target_text", "measured_text", "applied_text",
           "accuracy_beside_speed", "loss_label"]
