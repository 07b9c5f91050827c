"""Pruning structures: what an optimization removes, and everything that depends on it.

A structure turns the analysis and the profiles into per-layer rows with their curves, allocates a
sparsity to each row, estimates the result, writes the recipe's pruning modifiers and the integration
code, and prunes a weight when the optimization is applied. The rest of an optimization (settings,
overrides, quantization, epochs and LR schedule, the record and its JSON, the services, the CLI) is shared.

``Settings.structure`` names the structure of an optimization; :data:`STRUCTURES` maps that name to the
one instance that implements it.

**Adding a structure** (channel pruning, say): write ``structures/channel.py`` with a
:class:`PruningStructure` subclass (with its own :class:`~sparsify_tui.optimization.record.LayerRow` /
:class:`~sparsify_tui.optimization.record.Estimates` subclasses when its rows or estimates carry more
fields, and with a :class:`~sparsify_tui.optimization.record.Settings` subclass for settings of its own),
and add one line to :data:`STRUCTURES`. ``tests/test_structure_registry.py`` does exactly that
with a toy structure, its own settings field and its own row field.
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

    @abstractmethod
    def prune_weight(self, weight: "np.ndarray", sparsity: float) -> "np.ndarray":
        """A pruned copy of ``weight`` (any shape, float) at ``sparsity`` (0..1): the transform apply uses."""

    def excluded_reason(self, settings: Settings, index: int, layer: LayerRow) -> Optional[str]:
        """Why row ``index`` stays dense by default (None: free to prune). Default: the first layer and
        depthwise/grouped convs, as ``settings`` ask (:func:`sparsify_tui.optimization.config.excluded_reason`)."""
        return excluded_reason(settings, index, layer.op_type, layer.group)


from sparsify_tui.optimization.structures.unstructured import UnstructuredPruning  # noqa: E402

STRUCTURES: Dict[str, PruningStructure] = {
    UnstructuredPruning.name: UnstructuredPruning(),
}
"""Structure name -> its implementation. One line per structure."""


def get_structure(name: str) -> PruningStructure:
    """The registered structure ``name``; :class:`ProjectError` (one line, with the choices) otherwise."""
    try:
        return STRUCTURES[name]
    except KeyError:
        raise ProjectError(f"unknown pruning structure {name!r}: use one of {', '.join(STRUCTURES)}") from None


__all__ = ["PruningStructure", "STRUCTURES", "get_structure", "UnstructuredPruning"]
