"""The LR and Training panes of the Optimization section (every structure has them).

* **LR**: the learning-rate schedule chart and its modifiers as editable text (`ctrl+s`, a section key, applies).
* **Training**: the optimization's copy of the project's training settings and its epoch plan. When the
  project's settings changed since (section 6), it says so and `u` (a section key) takes them again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from sparsify_tui.tui.widgets.inputs import FieldError, SectionTextArea

from sparsify_tui.tui.optimization.pane import PaneContext, RecordPane, ScheduleEdited
from sparsify_tui.tui.widgets.charts import LineChart

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization

TRAINING_KEYS = ("optimizer", "epochs", "init_lr", "final_lr")


def training_stale(rec: Optimization, project_training: Optional[Dict[str, Any]]) -> bool:
    """The project's training settings differ from the copy the optimization keeps."""
    if not project_training:
        return False
    own = rec.training or {}
    return any(str(own.get(k)) != str(project_training.get(k)) for k in TRAINING_KEYS if k in project_training)


def training_text(rec: Optimization, project_training: Optional[Dict[str, Any]] = None) -> str:
    t, ep, q = rec.training or {}, rec.epochs, rec.quantization
    lines = [
        "[b]Training settings[/b] (this optimization's copy of the project's, section 6)",
        f"Optimizer {t.get('optimizer', '?')} · epochs {t.get('epochs', '?')} · LR {t.get('init_lr', '?')} → "
        f"{t.get('final_lr', '?')}",
    ]
    if training_stale(rec, project_training):
        p = project_training or {}
        lines.append(f"[b reverse] ! [/] [b]The project's settings changed since: {p.get('optimizer', '?')} · epochs "
                     f"{p.get('epochs', '?')} · LR {p.get('init_lr', '?')} → {p.get('final_lr', '?')}.[/b] "
                     "Press [b]u[/b] to take them (the epoch plan and LR schedule are rebuilt).")
    from rich.markup import escape

    from sparsify_tui.text.optimization import epochs_why

    lines += [
        "",
        f"[b]Recipe epochs[/b]: {escape(epochs_why(rec))}",
        f"Stabilization 0 → {ep.pruning_start_epoch} ({ep.stabilization_epochs} epochs)",
        f"Pruning {ep.pruning_start_epoch} → {ep.pruning_end_epoch} "
        f"({ep.pruning_epochs} epochs, GMP cubic, update every {ep.update_frequency}, "
        f"init sparsity {ep.init_sparsity})",
        f"Fine-tuning {ep.pruning_end_epoch} → {ep.total_epochs} ({ep.fine_tune_epochs} epochs)",
    ]
    if q.enabled:
        lines.append(f"INT8 QAT from {q.start_epoch} (observers off at {q.disable_quantization_observer_epoch})")
    lines.append(f"Total {ep.total_epochs} epochs")
    return "\n".join(lines)


def lr_series(rec: Optimization, points: int = 120) -> tuple[list[float], list[float]]:
    """The LR at ``points`` epochs from 0 to the total (for the chart)."""
    from sparsify_tui.optimization.schedule import lr_at

    total = float(rec.epochs.total_epochs or 1)
    xs = [total * i / (points - 1) for i in range(points)]
    init = (rec.training or {}).get("init_lr")
    ys = [lr_at(x, rec.lr_modifiers or [], init) or 0.0 for x in xs]
    return xs, ys


class LrPane(RecordPane):
    """The LR tab (module docstring)."""

    TAB_ID = "tab-lr"
    TITLE = "LR"
    FOCUS = "#lr-chart"

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield LineChart(title="Learning rate", x_label="epoch", y_label="LR", height=9, id="lr-chart")
            yield Static("modifiers (set/step/multistep/exponential): enter edits, ctrl+s applies, escape reverts",
                         classes="hint")
            yield SectionTextArea("", id="lr-text")
            yield FieldError(id="lr-error")

    def render_record(self, rec: Optimization, context: PaneContext) -> None:
        from sparsify_tui.optimization.schedule import format_lr_modifiers

        xs, ys = lr_series(rec)
        self.query_one("#lr-chart", LineChart).set_series({"lr": (xs, ys)})
        ta = self.query_one("#lr-text", SectionTextArea)
        if not ta.editing:
            ta.load_text(format_lr_modifiers(rec.lr_modifiers or []))

    def apply_text(self) -> Optional[str]:
        """Ask the section to store the edited modifiers; returns the parse error (one line, also shown under the
        text), or None."""
        from sparsify_tui.optimization.schedule import parse_lr_modifiers

        line = self.query_one("#lr-error", FieldError)
        try:
            mods = parse_lr_modifiers(self.query_one("#lr-text", SectionTextArea).text)
        except ValueError as err:
            line.say(f"learning-rate modifiers: {err} (escape puts the text back)")
            return line.text
        line.say(None)
        self.query_one("#lr-text", SectionTextArea).stop_edit()
        self.query_one("#lr-chart").focus()
        self.post_message(ScheduleEdited({"lr_modifiers": mods}))
        return None


class TrainingPane(RecordPane):
    """The Training tab (module docstring)."""

    TAB_ID = "tab-training"
    TITLE = "Training"
    FOCUS = "#training-scroll"

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="training-scroll"):
            yield Static("", id="training-text")

    def render_record(self, rec: Optimization, context: PaneContext) -> None:
        self.query_one("#training-text", Static).update(training_text(rec, context.project_training))


__all__ = ["LrPane", "TrainingPane", "training_stale", "training_text", "lr_series", "TRAINING_KEYS"]
