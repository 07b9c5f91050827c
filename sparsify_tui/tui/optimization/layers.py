"""The Layers pane of an unstructured optimization: the per-layer editor table (weight name and node id, sparsity,
recoverability, estimated speedup, estimated and baseline ms, loss and perf sensitivity), and what the section
shows of such a record: its header, the estimate cards (sparse-kernel runtime and onnxruntime, labelled as
estimates), its line in the list. `enter` edits the row's sparsity, `+`/`-` step it by 0.05, `x` releases the
override, `i` shows the layer's full record (the section's keys)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List

from rich.markup import escape

from sparsify_tui.formatting import format_count, format_fixed, plural
from sparsify_tui.tui.optimization.pane import StructurePane, warnings_text
from sparsify_tui.tui.widgets.tables import Column

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import LayerRow, Optimization


def _count(x: Any) -> str:
    return format_count(x, sep="", none="n/a")


LAYER_COLUMNS = [
    Column("layer", "Layer (weight)", filter=True, pin=True),
    Column("sparsity", "Sparsity", numeric=True, fmt=lambda v: f"{v:.3f}"),
    Column("recoverability", "Recov.", numeric=True, fmt=lambda v: format_fixed(v)),
    Column("speedup", "Speedup*", numeric=True, fmt=lambda v: format_fixed(v) + "×" if v else ""),
    Column("est_ms", "Est. ms*", numeric=True, fmt=lambda v: format_fixed(v, ".4g")),
    Column("base_ms", "Base ms", numeric=True, fmt=lambda v: format_fixed(v, ".4g")),
    Column("loss", "Loss sens", numeric=True, fmt=lambda v: format_fixed(v, ".3f")),
    Column("perf", "Perf sens", numeric=True, fmt=lambda v: format_fixed(v, ".3f")),
    Column("op", "Op", filter=True),
    Column("node", "Node id", filter=True),
    Column("note", "Note", filter=True),
]


class LayersPane(StructurePane):
    """Unstructured pruning: one row per prunable layer (module docstring)."""

    STRUCTURE = "unstructured"
    CREATE_CHOICES = [("unstructured: weights (sparsity)", "unstructured", "0.85")]
    TAB_ID = "tab-layers"
    TITLE = "Layers (l)"
    FOCUS = "#layer-table"
    TABLE_ID = "layer-table"
    COLUMNS = LAYER_COLUMNS
    HINT = "enter edit · +/- 0.05 · x auto · i record · * estimates"

    @classmethod
    def rows(cls, rec: Optimization) -> List[Dict[str, Any]]:
        return [{
            "_key": l.weight_name, "index": i, "layer": l.weight_name, "node": l.node_id or "", "op": l.op_type,
            "sparsity": float(l.sparsity or 0.0), "recoverability": l.recoverability, "speedup": l.est_speedup,
            "est_ms": l.est_ms, "base_ms": (l.time_curve or [None])[0], "loss": l.loss_sensitivity,
            "perf": l.perf_sensitivity, "note": "override" if l.override else (l.reason or ""),
        } for i, l in enumerate(rec.layers)]

    @classmethod
    def header_detail(cls, rec: Optimization) -> str:
        est = rec.estimates
        return (f"sparsity {(est.avg_sparsity if est else 0) or 0:.3f}/{rec.settings.sparsity:.2f} · "
                f"est. {format_fixed(est.sparse_speedup if est else None)}× sparse CPU, "
                f"{format_fixed(est.ort_speedup if est else None)}× ORT")

    @classmethod
    def estimate_texts(cls, rec: Optimization) -> Dict[str, str]:
        from sparsify_tui.optimization.estimates import recovery_text  # (imports numpy: not at start-up)
        from sparsify_tui.optimization.record import Estimates

        est, q = rec.estimates or Estimates(), rec.quantization
        pruned = sum(1 for l in rec.layers if l.sparsity)
        excluded = set(q.excluded or [])
        fp32 = sum(1 for l in rec.layers if l.node_id in excluded)  # an INT8 search also keeps nodes between layers
        fp32_text = f"{plural(fp32, 'layer')} FP32" + (f" ({len(excluded)} nodes)" if len(excluded) != fp32 else "")
        summary = (f"Pruned layers {pruned} of {len(rec.layers)}, overrides {len(rec.overrides or {})}\n"
                   f"Avg sparsity {est.avg_sparsity or 0:.3f} (params-weighted; target {rec.settings.sparsity:.2f})\n"
                   f"Est. recovery {escape(recovery_text(est.est_recovery, rec.loss_profile))}\n"
                   f"Quantization {'INT8, ' + fp32_text if q.enabled else 'off'}"
                   + warnings_text(rec))
        units = "ms" if est.baseline_ms is not None else "relative"
        perf = (f"[b]Estimates[/b] ({escape(est.time_units or '')})\n"
                f"Baseline {format_fixed(est.baseline_ms, '.3f')} ms/batch (measured)\n"
                f"Sparse-kernel CPU runtime: {format_fixed(est.sparse_ms, '.3f')} {units if est.sparse_ms else ''} "
                f"· {format_fixed(est.sparse_speedup)}× (est.)\n"
                f"onnxruntime: {format_fixed(est.ort_ms, '.3f')} · {format_fixed(est.ort_speedup)}× (est.; "
                f"no gain from sparsity, INT8 {'measured' if est.int8_measured else 'not measured'})")
        flops = (f"FLOPs baseline {_count(est.flops)}\nFLOPs pruned {_count(est.flops_pruned)}\n"
                 f"Reduction {format_fixed(est.flops_reduction)}× (est.)")
        params = (f"Params {_count(est.params)}, nonzero after pruning {_count(est.params_nonzero)}\n"
                  f"Compression {format_fixed(est.params_compression)}× (est.)\n"
                  f"Size {format_fixed(est.size_mb_fp32, '.2f')} MB FP32 → ~{format_fixed(est.est_size_mb, '.2f')} MB "
                  f"nonzero weights{' INT8' if q.enabled else ''}")
        return {"summary": summary, "performance": perf, "flops": flops, "params": params}

    @classmethod
    def list_text(cls, rec: Optimization) -> str:
        avg = (rec.estimates.avg_sparsity if rec.estimates else 0) or 0
        return f"  {avg:.2f} sp{' · INT8' if rec.quantization.enabled else ''}"

    @classmethod
    def layer_record(cls, rec: Optimization, layer: LayerRow) -> list:
        units = "ms" if rec.estimates is not None and rec.estimates.baseline_ms is not None else "relative"
        curve = layer.time_curve or [None]
        return [
            ("Weight", layer.weight_name), ("Node id", layer.node_id), ("Op type", layer.op_type),
            ("Weight shape", layer.weight_shape), ("Params", layer.params), ("FLOPs", layer.flops),
            ("Sparsity", layer.sparsity), ("Override", layer.override),
            ("Why (dense or capped)", layer.reason or layer.excluded),
            ("Recoverability (0-1)", layer.recoverability),
            (f"Base time ({units}, measured, scaled to the median)", curve[0]),
            (f"Est. time at its sparsity ({units}, sparse-kernel runtime)", layer.est_ms),
            ("Est. speedup (sparse-kernel runtime)", layer.est_speedup),
            ("Loss sensitivity (share of the model's at 0.9)", layer.loss_sensitivity),
            ("Perf sensitivity (share of the time saved at 0.9)", layer.perf_sensitivity),
            ("INT8 sensitivity", layer.int8_sensitivity), ("INT8 time (ms, measured)", layer.int8_time_ms),
        ]


__all__ = ["LayersPane", "LAYER_COLUMNS"]
