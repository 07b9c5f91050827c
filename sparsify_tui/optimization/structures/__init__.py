"""Pruning structures: what an optimization removes, and everything that depends on it.

A structure turns the analysis and the profiles into per-layer rows with their curves, allocates a
sparsity to each row, estimates the result, writes the recipe's pruning modifiers and the integration
code, and prunes a weight when the optimization is applied. The rest of an optimization (settings,
overrides, quantization, epochs and LR schedule, the record and its JSON, the services, the CLI) is shared.

``Settings.structure`` names the structure of an optimization; :data:`STRUCTURES` maps that name to the
one instance that implements it.

**Adding a structure**: write ``structures/<name>.py`` with a :class:`PruningStructure` subclass (with its
own :class:`~sparsify_tui.optimization.record.LayerRow` / :class:`~sparsify_tui.optimization.record.Estimates`
subclasses when its rows or estimates carry more fields, and with a
:class:`~sparsify_tui.optimization.record.Settings` subclass for settings of its own), and add one line to
:data:`STRUCTURES`. ``tests/test_structure_registry.py`` does exactly that with a toy structure, its own
settings field and its own row field; :mod:`~sparsify_tui.optimization.structures.channel` is the real second
structure.

**Hooks with defaults** (a per-weight structure such as unstructured needs none of them):

* :meth:`PruningStructure.analysis_extras`: more inputs read from the model file when an optimization of a
  ``model_level`` structure is created (channel groups, say), merged into the analysis dict ``build_layers`` gets;
* :meth:`PruningStructure.summary_extras`: model-level data the structure keeps in the record
  (``rec.model.extra``) so re-evaluation needs no profile (a time model, say);
* :meth:`PruningStructure.allocate_record` / :meth:`PruningStructure.estimates_record`: allocation and row
  estimates that need the whole record, not only its rows (non-separable costs);
* :meth:`PruningStructure.check_override`: refuse an override a row cannot take (one line);
* ``model_level`` + :meth:`PruningStructure.apply_model`: a structure that rewrites the whole model when
  applied (channel thinning) instead of pruning weight by weight with :meth:`PruningStructure.prune_weight`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Optional

from sparsify_tui.errors import ProjectError
from sparsify_tui.optimization.config import excluded_reason
from sparsify_tui.optimization.record import Estimates, LayerEstimate, LayerRow, Optimization, Settings

if TYPE_CHECKING:
    import numpy as np

    from sparsify_tui.optimization.allocation import Allocation
    from sparsify_tui.optimization.recipe import Modifier
    from sparsify_tui.profiling.loss import LossProfile
    from sparsify_tui.profiling.perf import PerfProfile


class PruningStructure(ABC):
    """The interface of one kind of pruning. Implementations are stateless; one instance is registered.

    ``name``: the value of ``Settings.structure``; ``description``: one line for users;
    ``settings_type`` / ``layer_type`` / ``estimates_type``: the classes a record's settings, rows and
    estimates are made and read with (subclasses when the structure has fields of its own).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    settings_type: ClassVar[type] = Settings
    layer_type: ClassVar[type] = LayerRow
    estimates_type: ClassVar[type] = Estimates
    model_level: ClassVar[bool] = False
    """True when apply rewrites the whole model (:meth:`apply_model`) rather than each weight
    (:meth:`prune_weight`)."""
    loss_structure: ClassVar[str] = "unstructured"
    """The ``structure`` of the loss profiles whose rows this structure reads (per layer, or per channel group)."""

    @abstractmethod
    def build_layers(self, analysis: Dict[str, Any], perf: Optional["PerfProfile"], loss: Optional["LossProfile"],
                     settings: Settings) -> List[LayerRow]:
        """Rows for the prunable layers of ``analysis`` (the stored analysis dict), graph order, with their
        curves on :data:`~sparsify_tui.optimization.config.GRID_LEVELS` from the typed profiles (``perf`` None
        = the FLOPS profile) and their default exclusions (:meth:`excluded_reason`)."""

    @abstractmethod
    def allocate(self, layers: List[LayerRow], settings: Settings, overrides: Dict[str, float]) -> "Allocation":
        """Each row's sparsity (by weight name) for ``settings``, with ``overrides`` (weight name -> sparsity)
        kept as the user set them."""

    @abstractmethod
    def layer_estimates(self, layers: List[LayerRow], sparsities: Dict[str, float]) -> List[LayerEstimate]:
        """Per-row display values at ``sparsities`` (weight name -> sparsity), in the order of ``layers``."""

    @abstractmethod
    def model_estimates(self, rec: Optimization, sparsities: Dict[str, float]) -> Estimates:
        """Model-level estimates of ``rec`` at ``sparsities`` (``max_reachable`` is set by the caller)."""

    @abstractmethod
    def recipe_modifiers(self, rec: Optimization) -> List["Modifier"]:
        """The recipe's pruning modifiers for ``rec`` (between the LR and the quantization modifiers)."""

    @abstractmethod
    def integration_code(self, rec: Optimization, framework: str, recipe_path: str) -> str:
        """Training code (Python source) that applies ``rec`` in ``framework`` (a key of
        :data:`sparsify_tui.optimization.integration.FRAMEWORKS`)."""

    def prune_weight(self, weight: "np.ndarray", sparsity: float) -> "np.ndarray":
        """A pruned copy of ``weight`` (any shape, float) at ``sparsity`` (0..1): the transform apply uses for a
        per-weight structure. A ``model_level`` structure implements :meth:`apply_model` instead."""
        raise NotImplementedError(f"{self.name} pruning is applied to the whole model (apply_model)")

    # -- hooks with defaults (see the module docstring) --------------------------------------------------
    def analysis_extras(self, model_path: Any, analysis: Dict[str, Any], *, batch_size: int = 1,
                        dims: Optional[Dict[str, int]] = None,
                        perf_extras: Optional[Dict[str, Any]] = None,
                        settings: Optional[Settings] = None) -> Dict[str, Any]:
        """Keys added to the analysis dict before :meth:`build_layers`, read from the model at ``model_path``
        (``perf_extras``: what is stored with the chosen perf profile besides the profile itself; ``settings``:
        the optimization's settings as created). Default: none."""
        return {}

    def summary_extras(self, analysis: Dict[str, Any], perf: Optional["PerfProfile"], loss: Optional["LossProfile"],
                       settings: Settings) -> Dict[str, Any]:
        """Keys stored in the record's ``model.extra`` at creation (kept for re-evaluation). Default: none."""
        return {}

    def allocate_record(self, rec: Optimization, settings: Settings, overrides: Dict[str, float]) -> "Allocation":
        """:meth:`allocate` for a whole record (default: its rows only)."""
        return self.allocate(rec.layers, settings, overrides)

    def estimates_record(self, rec: Optimization, sparsities: Dict[str, float]) -> List[LayerEstimate]:
        """:meth:`layer_estimates` for a whole record (default: its rows only)."""
        return self.layer_estimates(rec.layers, sparsities)

    def recipe_summary(self, rec: Optimization) -> str:
        """The recipe header's line on what the optimization asked for and reached. Default: the target average
        sparsity and the one achieved (params-weighted), and the balance."""
        avg = rec.estimates.avg_sparsity if rec.estimates is not None else None
        return (f"target average sparsity {rec.settings.sparsity:.3f}, achieved {avg or 0:.4f} "
                f"(params-weighted over all prunable layers); balance {rec.settings.balance:.2f}")

    def check_override(self, layer: LayerRow, value: float) -> None:
        """Raise :class:`ProjectError` (one line) when row ``layer`` cannot take the override ``value``.
        Default: every row takes any value in 0..0.99 (checked by the caller)."""

    def apply_model(self, model_path: Any, out_path: Any, sparsities: Dict[str, float], *,
                    settings: Optional[Dict[str, Any]] = None, batch_size: int = 1,
                    dims: Optional[Dict[str, int]] = None, feeds: Any = None, engine: Any = None,
                    progress: Any = None, cancel: Any = None) -> Dict[str, Any]:
        """Write the pruned FP32 model of a ``model_level`` structure to ``out_path`` and return its report (a
        JSON-able dict, recorded in the apply result). ``sparsities``: row key -> value (the record's
        :func:`~sparsify_tui.optimization.core.layer_sparsities`); ``settings``: the record's settings dict;
        ``feeds``: check inputs. Per-weight structures leave it alone (apply uses :meth:`prune_weight`)."""
        raise NotImplementedError(f"{self.name} pruning is applied weight by weight (prune_weight)")

    def excluded_reason(self, settings: Settings, index: int, layer: LayerRow) -> Optional[str]:
        """Why row ``index`` stays dense by default (None: free to prune). Default: the first layer and
        depthwise/grouped convs, as ``settings`` ask (:func:`sparsify_tui.optimization.config.excluded_reason`)."""
        return excluded_reason(settings, index, layer.op_type, layer.group)


from sparsify_tui.optimization.structures.channel import ChannelPruning  # noqa: E402
from sparsify_tui.optimization.structures.unstructured import UnstructuredPruning  # noqa: E402

STRUCTURES: Dict[str, PruningStructure] = {
    UnstructuredPruning.name: UnstructuredPruning(),
    ChannelPruning.name: ChannelPruning(),
}
"""Structure name -> its implementation. One line per structure."""


def get_structure(name: str) -> PruningStructure:
    """The registered structure ``name``; :class:`ProjectError` (one line, with the choices) otherwise."""
    try:
        return STRUCTURES[name]
    except KeyError:
        raise ProjectError(f"unknown pruning structure {name!r}: use one of {', '.join(STRUCTURES)}") from None


__all__ = ["PruningStructure", "STRUCTURES", "get_structure", "UnstructuredPruning", "ChannelPruning"]
