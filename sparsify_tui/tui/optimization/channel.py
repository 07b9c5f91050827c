"""The Groups pane of a channel optimization: one row per channel group (channels, kept, ratio, sensitivity, est.
ms, est. speedup, measured ms once benchmarked), edited with the section's keys like the Layers pane; and such a
record's line in the section's list and its Target input. The header and the estimate cards:
:mod:`sparsify_tui.text.optimization`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from sparsify_tui.formatting import format_fixed
from sparsify_tui.tui.optimization.layers import override_mark
from sparsify_tui.tui.optimization.pane import StructurePane
from sparsify_tui.tui.widgets.tables import Column

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization

TARGET_FIELD = {"uniform": "sparsity", "sparsity": "sparsity", "speedup": "target_speedup",
                "macs": "macs_reduction"}
"""The setting the Target input edits for each channel target."""


def loss_label(structure: str) -> str:
    """", channel" for a channel loss profile (its rows are groups), else ""."""
    return ", channel" if structure == "channel" else ""


def _num(spec: str, suffix: str = ""):
    def fmt(v: Any) -> str:
        return "" if v is None else format(v, spec) + suffix
    return fmt


GROUP_COLUMNS = [
    Column("name", "Group (node id)", filter=True, pin=True),
    Column("kept_of", "Kept"),
    Column("sparsity", "Ratio", numeric=True, fmt=_num(".2f"), mark=override_mark),
    Column("sens", "Sens", numeric=True, fmt=_num(".3g")),
    Column("est_ms", "Est ms*", numeric=True, fmt=_num(".3f")),
    Column("speedup", "Est×*", numeric=True, fmt=_num(".2f")),
    Column("measured", "Meas ms", numeric=True, fmt=_num(".3f")),
    Column("weight", "Weight", filter=True),
    Column("note", "Note", filter=True),
]
"""The Groups table: a group named by its first producer's node id (its weight, the group id of the recipe, in the
last columns and the record); the ratio marked ``*`` when it is an override."""


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
    HINT = "enter edit ratio · +/- 0.05 · x auto · ratio* override · est.*: estimates on its runtime"
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
                "_key": l.weight_name, "index": i, "layer": l.weight_name, "name": l.node_id or l.weight_name,
                "weight": l.weight_name, "override": bool(l.override), "channels": l.channels,
                "kept": l.kept, "kept_of": f"{l.kept}/{l.channels}",
                "sparsity": float(l.sparsity or 0.0), "sens": l.est_loss,
                "est_ms": l.est_ms if (timed and prunable) else None, "speedup": l.est_speedup if prunable else None,
                "measured": meas.ms if meas is not None else None,
                "note": "override" if l.override else (l.reason or ""),
            })
        return rows

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
        value = float(values["sparsity"])  # the dialog's one value field: a ratio, a speedup or a MACs reduction
        sparsity = value if field == "sparsity" else 0.3
        if field != "sparsity":
            settings[field] = value
        loss = values.get("loss")
        if loss and loss_profile_structure(ws, project_id, loss) != "channel":
            loss = None
        return settings, sparsity, loss


__all__ = ["GroupsPane", "GROUP_COLUMNS", "TARGET_FIELD", "loss_label"]
