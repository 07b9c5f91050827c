"""The interface of a pruning structure (:class:`PruningStructure`); the registry and the record loading are in
:mod:`sparsify_tui.optimization.structures` (the package), which lists the hooks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, NamedTuple, Optional, Tuple

from sparsify_tui.optimization.layer_curves import excluded_reason
from sparsify_tui.optimization.record import Estimates, GroupTime, LayerEstimate, LayerRow, Optimization, Settings

if TYPE_CHECKING:
    import numpy as np

    from sparsify_tui.analysis.nodes import ModelAnalysis
    from sparsify_tui.optimization.allocation import Allocation
    from sparsify_tui.optimization.modifiers import Modifier
    from sparsify_tui.profiling.loss import LossProfile
    from sparsify_tui.profiling.perf import PerfProfile


class GroupRun(NamedTuple):
    """A model a benchmark timed, for :meth:`PruningStructure.measured_groups`: ``path`` (``.onnx``), the ``run``
    it was timed on (:class:`~sparsify_tui.engine.run.RunSpec`: runtime, batch size, cores), and its ``median_ms``
    there (ms per batch)."""

    path: str
    run: Any
    median_ms: float


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
    has_measured_groups: ClassVar[bool] = False
    """True when a benchmark records per-row measured times (:meth:`measured_groups`)."""
    calibrated_perf: ClassVar[bool] = False
    """True when the structure reads a channel calibration stored with the perf profile: without a profile named,
    the newest calibrated one is taken (:func:`sparsify_tui.services.profiles.resolve_perf_profile`)."""

    @abstractmethod
    def build_layers(self, analysis: "ModelAnalysis", perf: Optional["PerfProfile"], loss: Optional["LossProfile"],
                     settings: Settings, extras: Optional[Dict[str, Any]] = None) -> List[LayerRow]:
        """Rows for the prunable layers of ``analysis`` (:func:`~sparsify_tui.analysis.nodes.prunable_layers`),
        graph order, with their curves on :data:`~sparsify_tui.optimization.layer_curves.GRID_LEVELS` from the typed
        profiles (``perf`` None = the FLOPS profile) and their default exclusions (:meth:`excluded_reason`).
        ``extras``: what :meth:`analysis_extras` read from the model file (``{}`` when the structure reads
        nothing more)."""

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
    def analysis_extras(self, model_path: Any, analysis: "ModelAnalysis", *, batch_size: int = 1,
                        dims: Optional[Dict[str, int]] = None,
                        perf_extras: Optional[Dict[str, Any]] = None,
                        settings: Optional[Settings] = None) -> Dict[str, Any]:
        """The ``extras`` :meth:`build_layers` and :meth:`summary_extras` get, read from the model at ``model_path``
        (``perf_extras``: what is stored with the chosen perf profile besides the profile itself; ``settings``:
        the optimization's settings as created). Default: none."""
        return {}

    def summary_extras(self, analysis: "ModelAnalysis", perf: Optional["PerfProfile"], loss: Optional["LossProfile"],
                       settings: Settings, extras: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
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

    def settings_rows(self, settings: Settings) -> List[Tuple[str, Any]]:
        """``(label, value)`` of the settings this structure uses, in the words a report shows them (a setting it
        ignores is left out). Default: the target average sparsity and the allocation's filters and caps."""
        s = settings
        return [("target average sparsity", s.sparsity), ("balance (0 time saved, 1 loss)", s.balance),
                ("min sparsity of a pruned layer", s.min_sparsity), ("min perf gain", s.min_perf_gain),
                ("min recovery", s.min_recovery), ("max sparsity per layer", s.max_sparsity),
                ("first layer dense", s.dense_first_layer), ("depthwise and grouped convs dense", s.dense_grouped)]

    def rows_summary(self, rec: Optimization) -> str:
        """What was pruned, in the structure's rows: default ``"12 of 54 layers pruned"``."""
        return f"{sum(1 for l in rec.layers if (l.sparsity or 0) > 0)} of {len(rec.layers)} layers pruned"

    def check_override(self, layer: LayerRow, value: float) -> None:
        """Raise :class:`ProjectError` (one line) when row ``layer`` cannot take the override ``value``.
        Default: every row takes any value in 0..0.99 (checked by the caller)."""

    def apply_model(self, model_path: Any, out_path: Any, sparsities: Dict[str, float], *,
                    settings: Optional[Settings] = None, batch_size: int = 1,
                    dims: Optional[Dict[str, int]] = None, feeds: Any = None, calibration: Any = None,
                    reconstruct: bool = True, real_data: bool = True, engine: Any = None,
                    progress: Any = None, cancel: Any = None) -> Dict[str, Any]:
        """Write the pruned FP32 model of a ``model_level`` structure to ``out_path`` and return its report (a
        JSON-able dict, recorded in the apply result). ``sparsities``: row key -> value (the record's
        :func:`~sparsify_tui.optimization.core.layer_sparsities`); ``settings``: the record's settings;
        ``feeds``: check inputs; ``calibration``: the calibration items (``real_data``: the user's, not synthetic),
        on which the structure may refit what it changed when ``reconstruct``. Per-weight structures leave it alone
        (apply uses :meth:`prune_weight`)."""
        raise NotImplementedError(f"{self.name} pruning is applied weight by weight (prune_weight)")

    def excluded_reason(self, settings: Settings, index: int, layer: LayerRow) -> Optional[str]:
        """Why row ``index`` stays dense by default (None: free to prune). Default: the first layer and
        depthwise/grouped convs, as ``settings`` ask (:func:`sparsify_tui.optimization.layer_curves.excluded_reason`)."""
        return excluded_reason(settings, index, layer.op_type, layer.group)

    def measured_reference(self, rec: Optimization) -> Tuple[Optional[int], Optional[int]]:
        """``(batch size, core count)`` the record's estimate is for, which a benchmark's figures are recorded
        at when it timed them (None: the benchmark's first). Default: none."""
        return None, None

    def measured_groups(self, rec: Optimization, applied: GroupRun, baseline: GroupRun, *,
                        dims: Optional[Dict[str, int]] = None, data: Any = None,
                        cancel: Any = None) -> Optional[Dict[str, GroupTime]]:
        """Measured ms per batch of each row's nodes in the applied model and the baseline (row key ->
        :class:`~sparsify_tui.optimization.record.GroupTime`), recorded on ``measured.groups`` when a benchmark
        timed both (only asked when :attr:`has_measured_groups`). Default: none."""
        return None
