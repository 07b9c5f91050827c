"""The optimization record as typed data: settings, per-layer rows, quantization, epochs, model summary,
estimates, and the record that holds them.

Every class maps to the JSON stored in the project's ``optimizations`` table and printed by
``sparsify-tui optimize --json``: attribute names are the JSON keys, ``to_dict()`` writes them in the order
they have always had, and ``from_dict()`` reads them back. Reading is forgiving so that older records
migrate forward: a missing key takes the field's default, and a key this version does not model (the
store's ``id`` / ``created`` / ``modified``, or a key of a newer version) is kept in ``extra`` and written back
after the known keys, unchanged (except in
``settings``, whose unknown keys are dropped, as before). So
``Optimization.from_dict(d).to_dict() == d`` for every record this version writes, and for older records
it adds only the newer keys (``settings.structure``, ``model.nodes_total_ms``) with their defaults.

Units are in the names or the docstrings: ``*_ms`` milliseconds per batch, ``*_epoch(s)`` training epochs
(floats), sparsities are fractions 0..1, ``params`` weight elements, ``flops`` per batch.

Structure-specific fields: a pruning structure (:mod:`sparsify_tui.optimization.structures`) may subclass
:class:`Settings`, :class:`LayerRow` and :class:`Estimates` with fields of its own;
:func:`sparsify_tui.optimization.structures.load_optimization` reads the record's settings, rows and estimates
with the classes of the structure named in its settings. This module imports no structure.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Dict, Generic, List, Optional, TypeVar

from sparsify_tui.errors import ProjectError
from sparsify_tui.records import JsonRecord

FLOPS = "flops"
"""``perf_profile`` of an optimization built without a measured perf profile (time proportional to FLOPs)."""
APPROXIMATED = "approximated"
"""``loss_profile`` of an optimization built on the Approximated loss profile."""
UNSTRUCTURED = "unstructured"
"""The default pruning structure: individual weights by magnitude."""
DEFAULT_INIT_SPARSITY = 0.05
"""GMP initial sparsity of the recipe (the sparsity at the first pruning update)."""

S = TypeVar("S", bound="Settings")
TrialT = TypeVar("TrialT", bound="TrialMeasures")


@dataclass
class Settings(JsonRecord):
    """Pruning settings of an optimization (all editable except ``structure``; stored under ``settings``).

    ``sparsity``: target params-weighted average sparsity over all prunable layers (0..1).
    ``balance``: 0 = rank by time saved only, 1 = by loss sensitivity only.
    ``min_sparsity``: a layer gets 0 or at least this. ``min_perf_gain``: a layer whose time saved at
    the cap is below this fraction of the model's time stays dense. ``min_recovery``: a layer's sparsity
    is capped where its recoverability drops below this (0..1). ``max_sparsity``: per-layer cap.
    ``dense_first_layer`` / ``dense_grouped``: keep the first layer / depthwise and grouped convs dense.
    ``structure``: what is pruned, a key of :data:`sparsify_tui.optimization.structures.STRUCTURES`
    (``"unstructured"``: individual weights); chosen when the optimization is built. A structure with settings
    of its own subclasses this class (its ``settings_type``).
    """

    sparsity: float = 0.85
    balance: float = 0.5
    min_sparsity: float = 0.4
    min_perf_gain: float = 0.0
    min_recovery: float = 0.0
    max_sparsity: float = 0.95
    dense_first_layer: bool = True
    dense_grouped: bool = True
    structure: str = UNSTRUCTURED

    def validate(self: S) -> S:
        """Raise ``ValueError`` (one line) on out-of-range values; returns self. (Whether ``structure`` is
        registered is checked by :func:`sparsify_tui.optimization.structures.validate`.)"""
        for key in ("sparsity", "balance", "min_sparsity", "min_recovery", "max_sparsity", "min_perf_gain"):
            v = float(getattr(self, key))
            if not (0.0 <= v <= 1.0) or math.isnan(v):
                raise ValueError(f"{key} must be between 0 and 1, got {v}")
            setattr(self, key, v)
        if self.max_sparsity > 0.99:
            raise ValueError("max_sparsity must be at most 0.99")
        if self.min_sparsity > self.max_sparsity:
            raise ValueError("min_sparsity must not exceed max_sparsity")
        return self

    def with_changes(self: S, **changes: Any) -> S:
        """A validated copy (of the same class) with ``changes`` (field names; None values are skipped, others
        converted to the field's type). Raises :class:`ProjectError` for an unknown name or an out-of-range
        value."""
        names = [f.name for f in fields(self)]
        out = type(self)(**{k: copy.deepcopy(getattr(self, k)) for k in names})
        for k, v in changes.items():
            if v is None:
                continue
            if k not in names:
                raise ProjectError(f"unknown optimization setting {k!r}: use one of {', '.join(names)}")
            cur = getattr(out, k)
            setattr(out, k, v if cur is None else type(cur)(v))  # an optional field (None) takes the value as given
        try:
            return out.validate()
        except ValueError as err:
            raise ProjectError(f"{err}: fix the optimization setting") from None


@dataclass
class LayerRow(JsonRecord):
    """One prunable layer of an optimization (a Conv/Gemm/MatMul with an initializer weight), graph order.

    Inputs built from the profiles (:meth:`PruningStructure.build_layers`): ``weight_name`` (ONNX initializer),
    ``node_id``, ``op_type``, ``params`` (weight elements), ``weight_shape``, ``flops`` (per batch), ``group``
    (Conv group attribute), ``baseline_ms`` (measured layer ms per batch; None with the FLOPS profile),
    ``time_curve`` (time at each of :data:`~sparsify_tui.optimization.layer_curves.GRID_LEVELS`: ms per batch, or
    with the FLOPS profile relative units, the layer's share of the model FLOPs), ``loss_curve`` (loss
    sensitivity above dense at each level, non-decreasing, in the loss profile's metric), ``gain_curve``
    (time saved at each level used for ranking, same units as ``time_curve``), ``int8_sensitivity`` (loss
    profile), ``int8_time_ms`` (measured in the INT8 model), ``excluded`` (why the layer stays dense by
    default: "first layer", "depthwise/grouped conv", or None).

    Results of the last evaluation: ``sparsity`` (0..1), ``override`` (fixed by the user), ``reason`` (why it
    is dense or fixed, see :class:`~sparsify_tui.optimization.allocation.Allocation`), and
    :class:`LayerEstimate`'s fields.
    """

    weight_name: str = ""
    node_id: str = ""
    op_type: Optional[str] = None
    params: int = 0
    weight_shape: Optional[List[int]] = None
    flops: float = 0.0
    group: int = 1
    baseline_ms: Optional[float] = None
    time_curve: List[float] = field(default_factory=list)
    loss_curve: List[float] = field(default_factory=list)
    int8_sensitivity: Optional[float] = None
    int8_time_ms: Optional[float] = None
    excluded: Optional[str] = None
    gain_curve: List[float] = field(default_factory=list)
    sparsity: float = 0.0
    override: bool = False
    reason: Optional[str] = None
    est_ms: Optional[float] = None
    est_speedup: Optional[float] = None
    recoverability: Optional[float] = None
    loss_sensitivity: Optional[float] = None
    perf_sensitivity: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class LayerEstimate(JsonRecord):
    """Per-layer display values at the layer's sparsity: ``est_ms`` (time on the structure's target runtime,
    units of ``time_curve``), ``est_speedup`` (dense time / ``est_ms``), ``recoverability`` (0..1),
    ``loss_sensitivity`` / ``perf_sensitivity`` (the layer's share of the model's loss / time saved at 0.9)."""

    est_ms: float
    est_speedup: float
    recoverability: float
    loss_sensitivity: float
    perf_sensitivity: float

    def apply_to(self, layer: LayerRow) -> None:
        """Copy these values onto ``layer``."""
        for f in fields(self):
            setattr(layer, f.name, getattr(self, f.name))


@dataclass
class Int8Group(JsonRecord):
    """One unit the accuracy-controlled INT8 search reverts to FP32: a prunable layer (``node_id``,
    ``weight_name``) with the quantizable nodes between it and the layers above it (``nodes``, node ids,
    the layer included), so that reverting it keeps the layer's weight **and** its input activation FP32; or
    the ``tail`` (nodes downstream of the last layers, ``node_id`` None). ``sensitivity``: measured INT8
    sensitivity (one-shot metric when only this group is INT8, see ``Int8Search.ranking_metric``); ``rank``:
    1 = most sensitive; ``reverted_in``: index of the first trial that reverted it (None: never)."""

    node_id: Optional[str] = None
    weight_name: Optional[str] = None
    nodes: List[str] = field(default_factory=list)
    sensitivity: Optional[float] = None
    rank: int = 0
    reverted_in: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class TrialMeasures(JsonRecord):
    """What an accuracy-budgeted search measured of one candidate (the fields :class:`Int8Trial` and
    :class:`BudgetTrial` share, written in the middle of their keys: ``_base_at``): ``metric_value`` (the budgeted
    quantity, in the search's ``metric``'s units), ``within_budget``, the other measures on the search's items
    (``score``: a user metric's own value, None for the others; ``nmse``, ``max_abs``, ``kl``, ``top1_agreement``
    0..1, ``accuracy`` 0..1 with labels), ``median_ms`` /
    ``p90_ms`` (ms per batch, the search's interleaved timing; None when not timed), ``round_ms`` (its median in
    each timing round), ``speedup`` (FP32 median / ``median_ms``, same rounds)."""

    metric_value: float = 0.0
    within_budget: bool = False
    score: Optional[float] = field(default=None, metadata={"omit_none": True})
    nmse: Optional[float] = None
    max_abs: Optional[float] = None
    kl: Optional[float] = None
    top1_agreement: Optional[float] = None
    accuracy: Optional[float] = None
    median_ms: Optional[float] = None
    p90_ms: Optional[float] = None
    round_ms: List[float] = field(default_factory=list)
    speedup: Optional[float] = None


@dataclass
class SearchBudget(JsonRecord):
    """The accuracy budget of a search (the fields :class:`Int8Search` and :class:`BudgetSearch` share, written
    among their keys: ``_base_at``): ``max_drop`` in ``metric``'s units (``budget_units``: absolute drop for top1,
    the value itself for nmse/kl/max_abs), ``metric_reason`` (why that metric,
    :func:`~sparsify_tui.profiling.metrics.choose_metric`), ``labelled`` (top-1 against labels), ``data``
    (the sample file; None = synthetic). A metric of the user's own (``metric`` = ``/path/FILE.py:FUNCTION``):
    ``user_metric`` (``{"name", "path", "sha256", "higher_is_better"}``) and ``score_fp32`` (its value on the FP32
    model, the same items); both left out for the built-in metrics."""

    max_drop: float = 0.01
    metric: str = "top1"
    metric_reason: str = ""
    budget_units: str = ""
    labelled: bool = False
    data: Optional[str] = None
    user_metric: Optional[Dict[str, Any]] = field(default=None, metadata={"omit_none": True})
    score_fp32: Optional[float] = field(default=None, metadata={"omit_none": True})

    @property
    def metric_label(self) -> str:
        """The metric's short name: a user metric's function name (``cer``), else ``metric``."""
        return str(self.user_metric.get("name")) if self.user_metric else self.metric


@dataclass
class SearchOutcome(JsonRecord, Generic[TrialT]):
    """What an accuracy-budgeted search found (the fields :class:`Int8Search` and :class:`BudgetSearch` share,
    written in the middle of their keys: ``_base_at``): ``trials`` (in the order tried), ``chosen`` (index of the
    trial the search chose; None when none is), ``status`` (the verdict in words), ``fp32_ms`` (FP32 median of the
    same timing rounds), ``fp32_round_ms`` (its median in each round), ``accuracy_fp32`` (with labels)."""

    trials: List[TrialT] = field(default_factory=list)
    chosen: Optional[int] = None
    status: str = ""
    fp32_ms: Optional[float] = None
    fp32_round_ms: List[float] = field(default_factory=list)
    accuracy_fp32: Optional[float] = None

    @property
    def chosen_trial(self) -> Optional[TrialT]:
        """The trial the search chose (the one the optimization uses), or None (none chosen: FP32 kept)."""
        return next((t for t in self.trials if t.index == self.chosen), None) if self.chosen is not None else None


@dataclass
class Int8Trial(TrialMeasures):
    """One quantized candidate of the search: ``index`` (order tried), ``groups`` (how many of the ranked
    groups are FP32: the top ``groups``), ``excluded_count`` (nodes kept FP32), :class:`TrialMeasures`
    (``metric_value`` in ``Int8Search.metric``'s units; ``median_ms`` None when not timed), ``quantize_s`` /
    ``eval_s`` (wall seconds), ``note`` (why it was tried)."""

    _base_at: ClassVar[Dict[type, str]] = {TrialMeasures: "quantize_s"}

    index: int = 0
    groups: int = 0
    excluded_count: int = 0
    quantize_s: float = 0.0
    eval_s: float = 0.0
    note: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Int8Search(SearchOutcome[Int8Trial], SearchBudget):
    """The accuracy-controlled INT8 search that chose ``QuantizationSettings.excluded``
    (:mod:`sparsify_tui.optimization.int8_search`).

    Budget: ``max_drop`` in ``metric``'s units (``budget_units``: absolute drop for top1, the value itself for
    nmse/kl/max_abs), ``metric_reason`` (why that metric), ``labelled`` (top-1 against labels). Data:
    ``data`` (sample file, None = synthetic), ``labels_key``, ``eval_items`` (items the metric is measured on),
    ``calibration_method`` and ``calibration_size`` (batches of 1 item). Ranking: ``ranking_source`` (which
    measurement ranked the groups), ``ranking_metric`` (its unit), ``groups`` (:class:`Int8Group`, rank order).
    Outcome: ``trials`` (:class:`Int8Trial`, in the order tried), ``chosen`` (index of the fastest trial within
    budget and faster than FP32; None when none is), ``status`` ("full INT8 within budget", "within budget",
    "FP32 fastest within budget", "over budget"),
    ``fp32_ms`` (FP32 median of the same timing rounds), ``fp32_round_ms`` (its median in each round),
    ``accuracy_fp32`` (with labels), ``timing`` (rounds,
    warm-up, iterations, cores), ``seconds`` (wall time of the whole search), ``warnings``."""

    _nested: ClassVar[Dict[str, Any]] = {"groups": [Int8Group], "trials": [Int8Trial]}
    _base_at: ClassVar[Dict[type, str]] = {SearchBudget: "labels_key", SearchOutcome: "timing"}

    labels_key: Optional[str] = None
    eval_items: int = 0
    calibration_method: str = "minmax"
    calibration_size: int = 0
    ranking_source: str = ""
    ranking_metric: str = ""
    groups: List[Int8Group] = field(default_factory=list)
    timing: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    warnings: List[str] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def full_int8(self) -> Optional[Int8Trial]:
        """The trial with nothing reverted (the search's first), or None."""
        return next((t for t in self.trials if t.groups == 0), None)


@dataclass
class BudgetTrial(TrialMeasures):
    """One candidate of the budget search (:mod:`sparsify_tui.optimization.budget_search`): ``index`` (order
    tried), ``target`` (the estimated-speedup target the channel allocation was asked for; 1.0 = the model
    unthinned), ``quantized`` (INT8 after thinning), ``source`` (an INT8 trial: index of the thinned trial it
    quantizes, None for the unthinned model), ``fp32_groups`` / ``excluded_count`` (INT8 groups and nodes kept
    FP32; 0 without INT8), ``est_speedup`` (the allocation's estimated FP32 speedup on onnxruntime),
    ``groups_thinned``, ``kept_channels`` / ``channels`` (prunable channels), ``macs_reduction`` (dense MACs /
    the written file's, per batch), ``importance`` (what chose the channels, e.g. "thinet"), ``metric_value`` (the budgeted quantity on the held-out items, in
    ``BudgetSearch.metric``'s units), ``within_budget``, the other held-out measures (``nmse``, ``max_abs``,
    ``kl``, ``top1_agreement`` 0..1, ``accuracy`` 0..1 with labels), ``median_ms`` / ``p90_ms`` (ms per batch,
    the search's interleaved timing), ``round_ms`` (its median in each timing round), ``speedup`` (FP32 median / ``median_ms``, same rounds), ``reconstruction``
    (``items``, ``consumers``, ``seconds``, ``peak_mb``, ``rel_error_before`` / ``rel_error_after``: the consumers'
    mean), ``seconds`` (wall time to build and score it), ``note`` (why it was tried), ``int8_search`` (an INT8
    trial: the INT8 search that chose its exclusions; the chosen trial's moves to the optimization's
    ``quantization.search``), ``engine`` / ``precision`` (the runtime it was scored and timed on: :attr:`runtime`),
    ``int8_mode`` ("dynamic": dynamic INT8 of the MatMul/Gemm weights, run-time activation scales; None: static
    QDQ), ``model_of`` (the index of the trial whose model file this one runs on another runtime)."""

    index: int = 0
    target: float = 1.0
    quantized: bool = False
    source: Optional[int] = None
    fp32_groups: int = 0
    excluded_count: int = 0
    est_speedup: Optional[float] = None
    groups_thinned: int = 0
    kept_channels: int = 0
    channels: int = 0
    macs_reduction: Optional[float] = None
    importance: Optional[str] = None
    reconstruction: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    note: str = ""
    int8_search: Optional[Int8Search] = field(default=None, metadata={"omit_none": True})
    engine: Optional[str] = field(default=None, metadata={"omit_none": True})
    precision: Optional[str] = field(default=None, metadata={"omit_none": True})
    int8_mode: Optional[str] = field(default=None, metadata={"omit_none": True})
    model_of: Optional[int] = field(default=None, metadata={"omit_none": True})
    extra: Dict[str, Any] = field(default_factory=dict)

    _nested: ClassVar[Dict[str, Any]] = {"int8_search": Int8Search}
    _base_at: ClassVar[Dict[type, str]] = {TrialMeasures: "reconstruction"}

    @property
    def runtime(self) -> tuple:
        """``(engine, precision)`` the trial ran on (``engine``/``precision``; onnxruntime fp32 when unset, as in
        searches stored before the runtime was searched too)."""
        return (self.engine or "onnxruntime", self.precision or "fp32")

    @property
    def runtime_text(self) -> str:
        """The runtime the trial ran on, in words: "onnxruntime fp32", "OpenVINO bf16" (the trial tables' column)."""
        from sparsify_tui.engine.run import display_name

        return f"{display_name(self.runtime[0])} {self.runtime[1]}"

    @property
    def label(self) -> str:
        """"2.25× target", "2.25× target + INT8 (3 groups FP32)", "INT8 only (3 groups FP32)", "dynamic INT8 only",
        with the runtime when it is not onnxruntime fp32: "2.25× target · OpenVINO fp32", "unthinned · OpenVINO
        bf16"."""
        from sparsify_tui.engine.run import display_name

        thin = f"{self.target:.2f}× target" if self.target > 1.0 else ""
        if not self.quantized:
            text = thin or "unthinned"
        else:
            q = "dynamic INT8" if self.int8_mode == "dynamic" else f"INT8 ({self.fp32_groups} group(s) FP32)"
            text = f"{thin} + {q}" if thin else f"{q} only"
        if self.runtime != ("onnxruntime", "fp32"):
            text += f" · {display_name(self.runtime[0])} {self.runtime[1]}"
        return text


@dataclass
class BudgetSearch(SearchOutcome[BudgetTrial], SearchBudget):
    """The search for the fastest model within an accuracy budget that chose an optimization's channel target
    (and INT8 exclusions): :mod:`sparsify_tui.optimization.budget_search`.

    Budget: ``max_drop`` in ``metric``'s units (``budget_units``), ``metric_reason``, ``labelled``. Data: ``data``
    (the ``.npz``), ``data_sha256``, ``labels_key``; ``calibration_items`` items fit the reconstruction (and
    calibrate INT8) and ``held_out_items`` other items score every trial, named in ``items`` and ``held_out``
    (item ranges of the file, e.g. ``"0-63"`` and ``"64-191"``: the two never overlap). ``quantize``: INT8 was
    tried on the best thinned candidates. Outcome: ``trials`` (:class:`BudgetTrial`, in the order tried),
    ``chosen`` (index of the fastest measured trial within budget that beats FP32 in every timing round; None: FP32
    is kept), ``status`` ("within budget", "FP32 fastest within budget", "only FP32 within budget"),
    ``fp32_ms`` (FP32 median, same timing rounds), ``fp32_round_ms`` (its median in each round), ``accuracy_fp32`` (with labels, held-out items),
    ``reachable_speedup`` (the allocation's highest estimated speedup at the caps), ``timing`` (rounds, warm-up,
    iterations, cores, phases), ``seconds`` (wall time), ``warnings``, ``runtimes`` (the runtimes screened on the
    unthinned model: ``[{"engine", "precision", "label", "median_ms", "speedup", "metric_value", "kept", "note"}]``,
    the reference first; None in searches of onnxruntime fp32 alone)."""

    _nested: ClassVar[Dict[str, Any]] = {"trials": [BudgetTrial]}
    _base_at: ClassVar[Dict[type, str]] = {SearchBudget: "data_sha256", SearchOutcome: "reachable_speedup"}

    structure: str = "channel"
    data_sha256: Optional[str] = None
    labels_key: Optional[str] = None
    calibration_items: int = 0
    held_out_items: int = 0
    items: str = ""
    held_out: str = ""
    quantize: bool = False
    reachable_speedup: Optional[float] = None
    timing: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    warnings: List[str] = field(default_factory=list)
    runtimes: Optional[List[Dict[str, Any]]] = field(default=None, metadata={"omit_none": True})
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class QuantizationSettings(JsonRecord):
    """The INT8 quantization modifier: ``enabled``, ``bits`` (8), ``excluded`` (node ids kept FP32), and the
    QAT epochs ``start_epoch``, ``disable_quantization_observer_epoch``, ``freeze_bn_stats_epoch``.
    ``calibration_method`` ("minmax", "entropy", "percentile") is what apply calibrates with; ``search`` is the
    accuracy-controlled INT8 search that chose ``excluded`` (None when the exclusions come from the loss
    profile's outliers or the user). Both are written only when set, so older records read and write back
    unchanged."""

    _nested: ClassVar[Dict[str, Any]] = {"search": Int8Search}

    enabled: bool = False
    bits: int = 8
    excluded: List[str] = field(default_factory=list)
    start_epoch: Optional[float] = None
    disable_quantization_observer_epoch: Optional[float] = None
    freeze_bn_stats_epoch: Optional[float] = None
    calibration_method: Optional[str] = field(default=None, metadata={"omit_none": True})
    search: Optional[Int8Search] = field(default=None, metadata={"omit_none": True})
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Epochs(JsonRecord):
    """The epoch plan of the recipe (all in epochs): ``stabilization_epochs`` (= ``pruning_start_epoch``),
    ``pruning_epochs``, ``fine_tune_epochs``, ``pruning_start_epoch``, ``pruning_end_epoch``, ``total_epochs``,
    ``update_frequency`` (epochs between GMP updates) and ``init_sparsity`` (GMP sparsity at the first update,
    0..1). Built by :func:`sparsify_tui.optimization.schedule.default_epochs`."""

    stabilization_epochs: float = 0.0
    pruning_epochs: float = 0.0
    fine_tune_epochs: float = 0.0
    pruning_start_epoch: float = 0.0
    pruning_end_epoch: float = 0.0
    total_epochs: float = 0.0
    update_frequency: float = 1.0
    init_sparsity: float = DEFAULT_INIT_SPARSITY
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class NodeTime(JsonRecord):
    """Measured ms per batch of one perf-profile row with an INT8 time: ``id`` (node id), ``time_ms`` (FP32),
    ``int8_time_ms``."""

    id: Optional[str] = None
    time_ms: Optional[float] = None
    int8_time_ms: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelSummary(JsonRecord):
    """What the estimates need of the model and its perf profile, so re-evaluation needs no profile:
    ``file`` (the project's model file name), ``baseline_ms`` (measured FP32 median ms per batch; None with
    the FLOPS profile), ``int8_ms`` (measured INT8 ms per batch: the FP32 median over the perf profile's interleaved
    INT8 ratio, :attr:`~sparsify_tui.profiling.perf.PerfProfile.int8_ms`; None when not measured),
    ``int8_round_ratios`` (that ratio in each interleaved round, its spread; absent when not recorded),
    ``nodes_total_ms`` (sum of the profiled per-node times, to scale per-node savings to the median; None with the
    FLOPS profile), ``totals`` (the analysis totals: ``params``, ``flops``, ``macs``...), ``perf_nodes`` (rows with
    an INT8 time), ``noise`` (why the perf profile's measurement is noisy, one line each:
    :attr:`~sparsify_tui.profiling.perf.PerfProfile.noise`; absent when it is not)."""

    _nested: ClassVar[Dict[str, Any]] = {"perf_nodes": [NodeTime]}

    file: str = ""
    baseline_ms: Optional[float] = None
    int8_ms: Optional[float] = None
    nodes_total_ms: Optional[float] = None
    totals: Dict[str, Any] = field(default_factory=dict)
    perf_nodes: List[NodeTime] = field(default_factory=list)
    int8_round_ratios: Optional[List[float]] = field(default=None, metadata={"omit_none": True})
    noise: Optional[List[str]] = field(default=None, metadata={"omit_none": True})
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Estimates(JsonRecord):
    """Model-level estimates of an optimization (formulas in :mod:`sparsify_tui.optimization.estimates`).
    Times are ms per batch and None with the FLOPS profile, whose times are relative (speedups only)."""

    label: str = "estimates"
    sparse_runtime: str = ""
    """The runtime of ``sparse_ms`` / ``sparse_speedup`` (a sparse-kernel CPU runtime, estimated)."""
    ort_note: str = ""
    """What onnxruntime gets from this optimization."""
    time_units: str = "ms"
    """Either "ms" or "relative (FLOPS profile)"."""
    baseline_ms: Optional[float] = None
    """Measured FP32 median."""
    sparse_ms: Optional[float] = None
    """Estimated on the sparse-kernel runtime (times the INT8 factor when quantizing)."""
    sparse_speedup: Optional[float] = None
    """``baseline / sparse`` (also with the FLOPS profile)."""
    ort_ms: Optional[float] = None
    """Estimated on onnxruntime: the baseline, times the INT8 factor when quantizing."""
    ort_speedup: Optional[float] = None
    int8_factor: Optional[float] = None
    """Measured INT8 time / FP32 time with the excluded layers kept FP32 (<1 is faster); None if not measured."""
    int8_measured: bool = False
    int8_source: Optional[str] = field(default=None, metadata={"omit_none": True})
    """Where ``int8_factor`` comes from when it is not the perf profile's (model INT8 time, FP32 layers giving
    back their per-node saving; None): the INT8 search's interleaved timing of this exact configuration."""
    flops: Optional[float] = None
    """Per batch, dense."""
    flops_pruned: Optional[float] = None
    flops_reduction: Optional[float] = None
    """``flops / flops_pruned``."""
    params: Optional[float] = None
    """Weight elements of the model."""
    params_nonzero: Optional[float] = None
    params_compression: Optional[float] = None
    """``params / params_nonzero``."""
    size_mb_fp32: Optional[float] = None
    """Megabytes of the dense FP32 weights."""
    est_size_mb: Optional[float] = None
    """Megabytes of the nonzero weights (1 byte each with INT8, else 4)."""
    avg_sparsity: Optional[float] = None
    """Params-weighted over the prunable layers (0..1)."""
    est_recovery: Optional[float] = None
    """Heuristic 0..1 from the loss profile, to compare configurations (not an accuracy)."""
    max_reachable: Optional[float] = None
    """The highest average sparsity the caps, exclusions, filters and overrides allow."""
    noise: Optional[List[str]] = field(default=None, metadata={"omit_none": True})
    """Why the measurements these estimates come from are noisy (the perf profile's noisy timing, the channel
    calibration taken on a busy machine), one line each naming its source; None when they are not
    (:meth:`Optimization.noise_sources`). Shown as "estimated from a noisy profile: rerun it"
    (:func:`sparsify_tui.optimization.estimates.noise_flag`)."""
    extra: Dict[str, Any] = field(default_factory=dict)


def _sparse(**kw: Any) -> Any:
    """A field written only when set or read (``omit_none``): records apply and benchmarks wrote before a key
    existed, and test fixtures with part of the keys, write back as they were."""
    return field(default=None, metadata={"omit_none": True}, **kw)


@dataclass
class AppliedModel(JsonRecord):
    """What apply wrote for an optimization (stored under ``applied``; :func:`sparsify_tui.services.apply.
    apply_record` makes it): ``path`` (the optimized ``.onnx``), ``exported_to`` (a copy the user asked for, or
    None), ``fingerprint`` (:func:`~sparsify_tui.optimization.apply.optimization_fingerprint` of the record it
    was applied from: a different current fingerprint means the file is stale), ``quantized``, ``excluded``
    (node ids kept FP32), ``sparsity`` (weight name -> measured sparsity 0..1), ``layers_exact`` (every layer
    pruned to its exact count; for a model-level structure the exactness check's verdict), ``output_diff``
    (the applied model's outputs against the baseline: ``nmse``, ``max_abs``, ``top1_agreement``, ``accuracy``
    with labels, ``metric_name`` / ``metric_value``, ``samples``), ``file_size_bytes`` /
    ``baseline_size_bytes``, ``ir_version``, ``seconds`` (wall time), ``warnings``, ``applied_at`` (UTC ISO).

    A model-level structure adds its report (:func:`sparsify_tui.services.apply.structure_report`): ``structure``,
    ``groups`` (``{id, channels, kept, kept_indices}`` per group), ``macs_before`` / ``macs_after`` /
    ``macs_reduction`` (per batch, counted on each file), ``params_before`` / ``params_after``,
    ``exactness_max_rel_diff``, ``round_to``, ``thinned_output_diff`` (the thinned FP32 model against the
    baseline, before reconstruction), ``thinning`` (``seconds``, ``peak_memory_bytes``, ``checks``), ``importance``
    and ``reconstruction`` (``items``, ``ridge``, ``seconds``, ``peak_mb``, ``consumers``: ``{node,
    rel_error_before, rel_error_after, ...}`` per refit layer; None when apply did not reconstruct).
    ``calibration_data``: the data apply calibrated and scored on (``path``, ``from``, the ``calibration`` and
    ``held_out`` item ranges). Every field is written only when set, so what was stored writes back unchanged.
    """

    path: Optional[str] = _sparse()
    exported_to: Optional[str] = _sparse()
    fingerprint: Optional[str] = _sparse()
    quantized: Optional[bool] = _sparse()
    excluded: Optional[List[str]] = _sparse()
    sparsity: Optional[Dict[str, float]] = _sparse()
    layers_exact: Optional[bool] = _sparse()
    output_diff: Optional[Dict[str, Any]] = _sparse()
    file_size_bytes: Optional[int] = _sparse()
    baseline_size_bytes: Optional[int] = _sparse()
    ir_version: Optional[int] = _sparse()
    seconds: Optional[float] = _sparse()
    warnings: Optional[List[str]] = _sparse()
    applied_at: Optional[str] = _sparse()
    structure: Optional[str] = _sparse()
    groups: Optional[List[Dict[str, Any]]] = _sparse()
    macs_before: Optional[float] = _sparse()
    macs_after: Optional[float] = _sparse()
    macs_reduction: Optional[float] = _sparse()
    params_before: Optional[float] = _sparse()
    params_after: Optional[float] = _sparse()
    exactness_max_rel_diff: Optional[float] = _sparse()
    round_to: Optional[int] = _sparse()
    thinned_output_diff: Optional[Dict[str, Any]] = _sparse()
    thinning: Optional[Dict[str, Any]] = _sparse()
    importance: Optional[str] = _sparse()
    reconstruction: Optional[Dict[str, Any]] = _sparse()
    calibration_data: Optional[Dict[str, Any]] = _sparse()
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def diff(self) -> Dict[str, Any]:
        """``output_diff``, ``{}`` when not recorded."""
        return self.output_diff or {}


@dataclass
class MeasuredRun(JsonRecord):
    """One benchmark row of an optimization: ``batch_size``, ``core_count``, ``speedup`` (baseline median /
    this model's, same rounds), ``median_ms`` (ms per batch)."""

    batch_size: Optional[int] = None
    core_count: Optional[int] = None
    speedup: Optional[float] = None
    median_ms: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class GroupTime(JsonRecord):
    """Measured ms per batch of one channel group's nodes: ``ms`` in the thinned model, ``baseline_ms`` in the
    baseline (one profiled pass of each, scaled to the benchmark's medians)."""

    ms: Optional[float] = None
    baseline_ms: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Measured(JsonRecord):
    """What a benchmark measured of an optimization's applied model (stored under ``measured``;
    :func:`sparsify_tui.services.measured.record_measured` makes it): ``benchmark`` / ``benchmark_name`` (the
    benchmark record), the reference ``batch_size`` / ``core_count`` (those of the estimate, else the smallest
    batch on the most cores), ``speedup`` and ``median_ms`` there, ``baseline_ms`` (the baseline's median, same
    rounds), ``estimated_speedup`` / ``estimated_ms`` (the record's onnxruntime estimate when it was
    benchmarked), ``fingerprint`` (of the file measured), ``stale`` (the optimization changed since), ``runs``
    (:class:`MeasuredRun` per batch size and core count), ``measured_at`` (UTC ISO) and, for a structure with
    per-group measured times (:meth:`~sparsify_tui.optimization.structures.PruningStructure.measured_groups`),
    ``groups`` (group id -> :class:`GroupTime`); ``noise``: why the benchmark's runs at the reference are noisy
    (:meth:`sparsify_tui.benchmark.runner.BenchmarkRun.noise`, "baseline: p90 3.0× median"), absent when they agree."""

    _nested: ClassVar[Dict[str, Any]] = {"runs": [MeasuredRun]}

    benchmark: Optional[str] = _sparse()
    benchmark_name: Optional[str] = _sparse()
    batch_size: Optional[int] = _sparse()
    core_count: Optional[int] = _sparse()
    speedup: Optional[float] = _sparse()
    median_ms: Optional[float] = _sparse()
    baseline_ms: Optional[float] = _sparse()
    estimated_speedup: Optional[float] = _sparse()
    estimated_ms: Optional[float] = _sparse()
    fingerprint: Optional[str] = _sparse()
    stale: Optional[bool] = _sparse()
    runs: Optional[List[MeasuredRun]] = _sparse()
    measured_at: Optional[str] = _sparse()
    groups: Optional[Dict[str, GroupTime]] = _sparse()
    noise: Optional[List[str]] = _sparse()
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Optional[Dict[str, Any]]) -> "Measured":
        out = super().from_dict(d)
        if isinstance(out.groups, dict):
            out.groups = {k: GroupTime.from_dict(v) if isinstance(v, dict) else v for k, v in out.groups.items()}
        return out


@dataclass
class TargetRuntime(JsonRecord):
    """The runtime an optimization targets (stored under ``runtime``): ``engine`` and session ``precision``
    (:class:`sparsify_tui.engine.run.RunSpec`'s). Its estimates are measured there (the perf profile's runtime),
    apply quantizes with that engine's INT8 activation type, and a benchmark measures it there by default."""

    engine: str = "onnxruntime"
    precision: str = "fp32"
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Optimization(JsonRecord):
    """An optimization: everything needed to re-evaluate and export it without the profiles.

    ``perf_profile`` / ``loss_profile``: record ids of the profiles it was built from, or :data:`FLOPS` /
    :data:`APPROXIMATED`, with their display names; ``overrides``: weight name -> sparsity fixed by the user;
    ``applied``: what apply wrote (:class:`AppliedModel`, None until applied); ``measured``: what a benchmark
    measured of it (:class:`Measured`, None until benchmarked); both written after the store's keys, where the
    store put them. ``lr_modifiers``: learning-rate modifiers in the shapes of
    :func:`sparsify_tui.optimization.schedule.validate_lr_modifier` (the TUI's editor and the schedule
    functions work on that shape); ``training``: the project's training settings (``epochs``, ``init_lr``,
    ``final_lr``...); ``estimates`` None until evaluated; ``copied_from``: id of the optimization this one
    was copied from; ``search``: the budget search that chose its target (:class:`BudgetSearch`, None when the
    user set it); ``runtime``: the runtime it targets (:class:`TargetRuntime`; None: onnxruntime fp32, what every
    optimization targeted before the runtime was a choice, :attr:`target_runtime`); ``extra``: stored keys this class does not model (``id``, ``created``, ``modified``,
    ``applied``), written back unchanged.
    """

    _nested: ClassVar[Dict[str, Any]] = {
        "settings": Settings, "layers": [LayerRow], "quantization": QuantizationSettings, "epochs": Epochs,
        "model": ModelSummary, "estimates": Estimates, "applied": AppliedModel, "measured": Measured,
        "search": BudgetSearch, "runtime": TargetRuntime,
    }

    name: str = ""
    perf_profile: str = FLOPS
    perf_profile_name: str = "FLOPS"
    loss_profile: str = APPROXIMATED
    loss_profile_name: str = "Approximated"
    settings: Settings = field(default_factory=Settings)
    overrides: Dict[str, float] = field(default_factory=dict)
    layers: List[LayerRow] = field(default_factory=list)
    quantization: QuantizationSettings = field(default_factory=QuantizationSettings)
    epochs: Epochs = field(default_factory=Epochs)
    lr_modifiers: List[Dict[str, Any]] = field(default_factory=list)
    training: Dict[str, Any] = field(default_factory=dict)
    model: ModelSummary = field(default_factory=ModelSummary)
    copied_from: Optional[str] = None
    estimates: Optional[Estimates] = field(default=None, metadata={"omit_none": True})
    warnings: List[str] = field(default_factory=list)
    search: Optional[BudgetSearch] = field(default=None, metadata={"omit_none": True})
    runtime: Optional[TargetRuntime] = field(default=None, metadata={"omit_none": True})
    applied: Optional[AppliedModel] = field(default=None, metadata={"omit_none": True, "tail": True})
    measured: Optional[Measured] = field(default=None, metadata={"omit_none": True, "tail": True})
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> Optional[str]:
        """The store's record id (None before the record is stored)."""
        return self.extra.get("id")

    @property
    def created(self) -> Optional[str]:
        """When the store first saved the record (ISO), or None."""
        return self.extra.get("created")

    @property
    def target_runtime(self) -> tuple:
        """``(engine, precision)`` this optimization targets (:attr:`runtime`; onnxruntime fp32 when unset)."""
        rt = self.runtime or TargetRuntime()
        return (rt.engine, rt.precision)

    @property
    def flops_profile(self) -> bool:
        """True when built without a measured perf profile (relative time units)."""
        return self.perf_profile == FLOPS

    def noise_sources(self) -> List[str]:
        """Why the measurements the estimates come from are noisy, one line each naming its source: the perf
        profile's noise warnings (``model.noise``: noisy timing, a noisy profiled pass) and the channel time model's
        calibration warnings (a busy machine: its speedups are then off). [] when neither is noisy."""
        calibration = ((self.model.extra.get("channel_time_model") or {}).get("calibration") or {})
        return ([f"perf profile {self.perf_profile_name}: {w}" for w in self.model.noise or []]
                + [f"channel calibration: {w}" for w in calibration.get("warnings") or []])

    def all_warnings(self) -> List[str]:
        """Every warning about this optimization, in the words ``optimization show`` prints them: why the
        measurements its estimates come from are noisy (:meth:`noise_sources`), the record's own, and the INT8
        search's and apply's; the TUI card and the report list the same."""
        out = self.noise_sources()
        out += list(self.warnings or [])
        if self.quantization.search is not None:
            out += [f"INT8 search: {w}" for w in self.quantization.search.warnings or []]
        if self.applied is not None:
            out += [f"apply: {w}" for w in self.applied.warnings or []]
        return out

    def layer(self, ref: str) -> Optional[LayerRow]:
        """The row whose weight name (else node id) is ``ref``, or None."""
        by_weight = next((l for l in self.layers if l.weight_name == ref), None)
        return by_weight or next((l for l in self.layers if l.node_id == ref), None)


__all__ = ["FLOPS", "APPROXIMATED", "UNSTRUCTURED", "DEFAULT_INIT_SPARSITY", "JsonRecord", "Settings", "LayerRow",
           "LayerEstimate", "TrialMeasures", "SearchBudget", "SearchOutcome", "Int8Group", "Int8Trial", "Int8Search", "BudgetTrial", "BudgetSearch", "QuantizationSettings", "Epochs", "NodeTime", "ModelSummary", "Estimates",
           "AppliedModel", "MeasuredRun", "GroupTime", "Measured", "Optimization"]
