"""Loss Profiles section: Approximated and measured per-layer sensitivities (view, add, rerun, delete)."""

from sparsify_tui.tui.loss.dialogs import LossProfileDialog
from sparsify_tui.tui.loss.section import LossProfileView, LossSection

__all__ = ["LossProfileDialog", "LossProfileView", "LossSection"]
