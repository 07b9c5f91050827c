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
  ``model_level`` structure is created (channel groups, say), the ``extras`` ``build_layers`` gets;
* :meth:`PruningStructure.summary_extras`: model-level data the structure keeps in the record
  (``rec.model.extra``) so re-evaluation needs no profile (a time model, say);
* :meth:`PruningStructure.allocate_record` / :meth:`PruningStructure.estimates_record`: allocation and row
  estimates that need the whole record, not only its rows (non-separable costs);
* :meth:`PruningStructure.check_override`: refuse an override a row cannot take (one line);
* ``model_level`` + :meth:`PruningStructure.apply_model`: a structure that rewrites the whole model when
  applied (channel thinning) instead of pruning weight by weight with :meth:`PruningStructure.prune_weight`;
* ``has_measured_groups`` + :meth:`PruningStructure.measured_groups` / :meth:`PruningStructure.measured_reference`:
  per-row measured times a benchmark records next to the estimates (channel groups).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from sparsify_tui.errors import ProjectError
from sparsify_tui.optimization.record import Estimates, LayerRow, Optimization, Settings
from sparsify_tui.optimization.structures.base import GroupRun, PruningStructure
from sparsify_tui.optimization.structures.channel import ChannelPruning
from sparsify_tui.optimization.structures.unstructured import UnstructuredPruning

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


def structure_of(rec: Optimization) -> PruningStructure:
    """The structure of ``rec`` (its ``settings.structure``); :class:`ProjectError` when not registered."""
    return get_structure(rec.settings.structure)


def validate(settings: Settings) -> Settings:
    """``settings.validate()`` (ranges; ``ValueError``, one line) and a registered ``structure``
    (:class:`ProjectError`, one line, with the choices); returns ``settings``."""
    get_structure(settings.structure)
    return settings.validate()


def load_optimization(d: Optional[Dict[str, Any]]) -> Optimization:
    """Read a stored optimization (:meth:`Optimization.from_dict`) with the settings, row and estimates classes
    of its structure. Raises :class:`ProjectError` (one line) when that structure is not registered."""
    rec = Optimization.from_dict(d)
    kind = structure_of(rec)
    if kind.settings_type is not Settings:
        rec.settings = kind.settings_type.from_dict((d or {}).get("settings"))
    if kind.layer_type is not LayerRow:
        rec.layers = [kind.layer_type.from_dict(row.to_dict()) for row in rec.layers]
    if rec.estimates is not None and kind.estimates_type is not Estimates:
        rec.estimates = kind.estimates_type.from_dict(rec.estimates.to_dict())
    return rec


__all__ = ["PruningStructure", "GroupRun", "STRUCTURES", "get_structure", "structure_of", "validate", "load_optimization",
           "UnstructuredPruning", "ChannelPruning"]
