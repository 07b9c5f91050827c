"""The Layers pane of an unstructured optimization: the per-layer editor table (node id, sparsity with ``*`` on an
override,
recoverability, estimated speedup, estimated and baseline ms, loss and perf sensitivity), and such a record's line
in the section's list. `enter` edits the row's sparsity, `+`/`-` step it by 0.05, `x` releases the
override, `i` shows the layer's full record (the section's keys).
The header and the estimate cards: :mod:`sparsify_tui.text.optimization`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List

from sparsify_tui.formatting import format_fixed
from sparsify_tui.tui.optimization.pane import StructurePane
from sparsify_tui.tui.widgets.tables import Column

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import LayerRow, Optimization


def override_mark(row: dict) -> str:
    """``*`` after a value the user fixed (an override), a space otherwise (the numbers stay aligned): the mark sat
    in the 10th column, off screen at 120 columns."""
    return "*" if row.get("override") else " "


LAYER_COLUMNS = [
    Column("name", "Node id", filter=True, pin=True),
    Column("sparsity", "Sparsity", numeric=True, fmt=lambda v: f"{v:.3f}", mark=override_mark),
    Column("recoverability", "Recov.", numeric=True, fmt=lambda v: format_fixed(v)),
    Column("speedup", "Speedup*", numeric=True, fmt=lambda v: format_fixed(v) + "×" if v else ""),
    Column("est_ms", "Est. ms*", numeric=True, fmt=lambda v: format_fixed(v, ".4g")),
    Column("base_ms", "Base ms", numeric=True, fmt=lambda v: format_fixed(v, ".4g")),
    Column("loss", "Loss sens", numeric=True, fmt=lambda v: format_fixed(v, ".3f")),
    Column("perf", "Perf sens", numeric=True, fmt=lambda v: format_fixed(v, ".3f")),
    Column("op", "Op", filter=True),
    Column("weight", "Weight", filter=True),
    Column("note", "Note", filter=True),
]
"""The Layers table: a layer named by its node id, as in Performance and Loss (its weight, the recipe's name, in the
last columns and in its record, `i`); its sparsity marked ``*`` when it is an override."""


class LayersPane(StructurePane):
    """Unstructured pruning: one row per prunable layer (module docstring)."""

    STRUCTURE = "unstructured"
    CREATE_CHOICES = [("unstructured: weights (sparsity)", "unstructured", "0.85")]
    TAB_ID = "tab-layers"
    TITLE = "Layers (l)"
    FOCUS = "#layer-table"
    TABLE_ID = "layer-table"
    COLUMNS = LAYER_COLUMNS
    HINT = "enter edit · +/- 0.05 · x auto · i record · sparsity* override · est.*: estimates"

    @classmethod
    def rows(cls, rec: Optimization) -> List[Dict[str, Any]]:
        return [{
            "_key": l.weight_name, "index": i, "layer": l.weight_name, "name": l.node_id or l.weight_name,
            "weight": l.weight_name, "override": bool(l.override), "op": l.op_type,
            "sparsity": float(l.sparsity or 0.0), "recoverability": l.recoverability, "speedup": l.est_speedup,
            "est_ms": l.est_ms, "base_ms": (l.time_curve or [None])[0], "loss": l.loss_sensitivity,
            "perf": l.perf_sensitivity, "note": "override" if l.override else (l.reason or ""),
        } for i, l in enumerate(rec.layers)]

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
