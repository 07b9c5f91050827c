"""Benchmarks: measured ms/batch of the baseline and optimized models across batch sizes and core counts.

How a number is measured (docs/design.md, Measuring):

* every (model, batch size, core count) combination runs **in this process**, with **one live
  session at a time** (opened by the engine, :mod:`sparsify_tui.engine`; onnxruntime: CPU EP,
  ``ORT_ENABLE_ALL``, ``intra_op_num_threads = cores``, ``inter_op_num_threads = 1``);
* for one (batch, cores) pair the models are measured **interleaved in rounds** (``rounds``, default 3):
  each round creates each model's session in turn (alternating the order every round), warms it up,
  times its share of the iterations and deletes it. Drift of a shared machine (another process
  starting, a frequency change) then hits every model alike instead of faking a speedup; on a busy
  2-core VM back-to-back blocks of the *same* model differed by up to ±20%;
* inputs are built once before timing (user sample data, or synthetic data with valid values) and
  timed by the one timing loop (:func:`sparsify_tui.engine.timing.time_runs`: only the bound run call
  between two ``time.perf_counter_ns()`` reads), so the loop adds nothing measurable (see
  ``benchmarks/benchmark_overhead.py``);
* ``warmup`` untimed runs per session, then ``iterations`` timed runs in all (split over the rounds);
* **across runtimes**: every model runs on every runtime asked for (engine and precision,
  :class:`sparsify_tui.engine.run.RunSpec`), all interleaved in the same rounds, still one live session at a
  time. The **reference** is the baseline model on onnxruntime fp32 (:data:`sparsify_tui.engine.run.REFERENCE`,
  the deployment the user has today): it is always measured, and every speedup is against it. A run on another
  runtime is labelled ``"<model> · <engine> <precision>"`` (:func:`entry_label`).

Statistics per combination (all in milliseconds per batch unless named otherwise):
``median``, ``mean``, ``p90``, ``p99`` (linear interpolation, :class:`sparsify_tui.engine.timing.LatencyStats`),
``min``, ``max``, ``std``; ``ms_per_item = median / batch_size``; ``items_per_second = 1000 * batch_size /
median``; ``speedup = reference median / model median`` at the same batch size and core count (the reference is
the baseline, the first model or the one labelled ``"baseline"``, on onnxruntime fp32).

**Noise** (:meth:`BenchmarkRun.noise`): a combination is flagged when its p90 exceeds
:data:`NOISE_P90_RATIO` × its median, or when the medians of its rounds spread more than
:data:`NOISE_ROUND_SPREAD` ((max − min) / min): the machine was busy, and the speedup may be wrong; rerun.
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np

from sparsify_tui.engine.run import REFERENCE_ENGINE, REFERENCE_PRECISION, display_name, runtime_label
from sparsify_tui.engine.timing import LatencyStats, round_shares
from sparsify_tui.errors import SparsifyError
from sparsify_tui.progress import CancelToken, ProgressFn

#: a run is noisy when its p90 exceeds this multiple of its median ...
NOISE_P90_RATIO = 2.0
#: ... or when the medians of its interleaved rounds spread more than this fraction of the smallest
NOISE_ROUND_SPREAD = 0.20


@dataclass
class ModelSpec:
    """One model in a benchmark: ``label`` ("baseline" or the optimization name), its path, the
    optimization record id and name (None for the baseline)."""

    label: str
    path: str
    optimization: Optional[str] = None
    optimization_name: Optional[str] = None


@dataclass
class BenchmarkRun:
    """Measured timings of one (model, batch size, core count) combination.

    ``optimization``: the optimization name (None for the baseline); ``optimization_id``: its record id.
    ``iterations_ms``: every timed run in ms per batch, in run order. Statistics in ms per batch.
    ``speedup``: the reference's median (the baseline on onnxruntime fp32) / this median at the same batch size and
    core count (1.0 for the reference). ``engine``, ``precision``: the runtime measured; ``model`` is then the
    model's label, with the runtime added off the reference runtime (:func:`entry_label`).
    ``batch_size``: items per batch actually fed (what ms per item and items/s divide by); ``input_shapes``: the
    shape of each input fed (``{input name: [d0, d1, ...]}``; empty in runs stored before it was recorded).
    """

    model: str
    optimization: Optional[str]
    batch_size: int
    core_count: int
    iterations_ms: list[float]
    median_ms: float
    mean_ms: float
    p90_ms: float
    p99_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    speedup: float = 1.0
    optimization_id: Optional[str] = None
    input_shapes: dict = field(default_factory=dict)
    engine: str = REFERENCE_ENGINE
    precision: str = REFERENCE_PRECISION

    @property
    def runtime(self) -> tuple:
        """``(engine, precision)`` this run measured."""
        return (self.engine, self.precision)

    @property
    def ms_per_item(self) -> float:
        """Median ms per batch divided by the batch size."""
        return self.median_ms / self.batch_size

    @property
    def items_per_second(self) -> float:
        """``1000 * batch_size / median_ms``."""
        return 1000.0 * self.batch_size / self.median_ms if self.median_ms > 0 else float("inf")

    @classmethod
    def from_times(cls, model: str, optimization: Optional[str], batch_size: int, core_count: int,
                   times_ms: Sequence[float]) -> "BenchmarkRun":
        """Statistics of ``times_ms`` (ms per batch, one per timed run; at least one, else ``ValueError``)."""
        st = LatencyStats.from_times(times_ms)
        return cls(
            model=model, optimization=optimization, batch_size=int(batch_size), core_count=int(core_count),
            iterations_ms=[float(x) for x in times_ms],
            median_ms=st.median, mean_ms=st.mean, p90_ms=st.p90, p99_ms=st.p99,
            min_ms=st.min, max_ms=st.max, std_ms=st.std,
        )

    def round_medians(self, rounds: int) -> list[float]:
        """Median ms per batch of each interleaved round (the runs are stored round after round)."""
        out, start = [], 0
        for n in round_shares(len(self.iterations_ms), rounds):
            part = self.iterations_ms[start:start + n]
            start += n
            if part:
                out.append(float(np.median(part)))
        return out

    def noise(self, rounds: int) -> list[str]:
        """Why this run's numbers are noisy (module docstring), one short phrase each; [] when they agree."""
        out = []
        if self.median_ms > 0 and self.p90_ms > NOISE_P90_RATIO * self.median_ms:
            out.append(f"p90 {self.p90_ms / self.median_ms:.1f}× median")
        meds = self.round_medians(rounds)
        if len(meds) > 1 and min(meds) > 0 and (max(meds) - min(meds)) / min(meds) > NOISE_ROUND_SPREAD:
            out.append(f"rounds ±{(max(meds) - min(meds)) / min(meds) * 100:.0f}%")
        return out

    def to_dict(self) -> dict:
        """One entry of ``results`` in the ``benchmark --json`` shape (plus extras)."""
        return {
            "model": self.model,
            "optimization": self.optimization,
            "optimization_id": self.optimization_id,
            "batch_size": self.batch_size,
            "core_count": self.core_count,
            "latency_ms": {"median": self.median_ms, "mean": self.mean_ms, "p90": self.p90_ms, "p99": self.p99_ms,
                           "min": self.min_ms, "max": self.max_ms, "std": self.std_ms},
            "ms_per_item": self.ms_per_item,
            "items_per_second": self.items_per_second,
            "speedup": self.speedup,
            "iterations_ms": self.iterations_ms,
            "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
            "engine": self.engine,
            "precision": self.precision,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "BenchmarkRun":
        lat = d["latency_ms"]
        it = list(d.get("iterations_ms") or [])
        return cls(
            model=d["model"], optimization=d.get("optimization"), batch_size=int(d["batch_size"]),
            core_count=int(d["core_count"]), iterations_ms=it,
            median_ms=float(lat["median"]), mean_ms=float(lat["mean"]), p90_ms=float(lat["p90"]),
            p99_ms=float(lat["p99"]), min_ms=float(lat.get("min", min(it) if it else lat["median"])),
            max_ms=float(lat.get("max", max(it) if it else lat["median"])), std_ms=float(lat.get("std", 0.0)),
            speedup=float(d.get("speedup", 1.0)), optimization_id=d.get("optimization_id"),
            input_shapes={k: [int(x) for x in v] for k, v in (d.get("input_shapes") or {}).items()},
            engine=d.get("engine") or REFERENCE_ENGINE, precision=d.get("precision") or REFERENCE_PRECISION,
        )


@dataclass
class BenchmarkResult:
    """A whole benchmark: settings and one :class:`BenchmarkRun` per (model, batch, cores)."""

    models: list[ModelSpec]
    batch_sizes: list[int]
    core_counts: list[int]
    warmup: int
    iterations: int
    dims: dict = field(default_factory=dict)
    runs: list[BenchmarkRun] = field(default_factory=list)
    name: str = "benchmark"
    id: Optional[str] = None
    created: str = ""
    seconds: float = 0.0
    data: Optional[str] = None
    ort_version: str = ""
    system: dict = field(default_factory=dict)
    #: how the sessions were configured (the reference engine's description)
    engine: str = "onnxruntime CPUExecutionProvider, ORT_ENABLE_ALL, intra_op=cores, inter_op=1"
    #: the runtimes measured, the reference first: ``[{"engine", "precision", "version", "label", "settings"}]``
    #: (empty in benchmarks stored before runtimes were a choice: onnxruntime fp32 only)
    runtimes: list = field(default_factory=list)
    #: interleaved rounds the timed runs were split into
    rounds: int = 3
    #: accuracy of every model against the baseline's outputs (:func:`measure_accuracy`), or None
    accuracy: Optional[dict] = None
    #: one line per entry left out (a runtime that cannot load a model)
    warnings: list = field(default_factory=list)

    @property
    def baseline_label(self) -> str:
        labels = [m.label for m in self.models]
        return "baseline" if "baseline" in labels else labels[0]

    def run(self, model: str, batch_size: int, core_count: int) -> Optional[BenchmarkRun]:
        """The run labelled ``model`` (:func:`entry_label`) at that batch size and core count, or None."""
        for r in self.runs:
            if r.model == model and r.batch_size == batch_size and r.core_count == core_count:
                return r
        return None

    def compute_speedups(self) -> None:
        """Set every run's ``speedup = reference median / run median`` at the same batch size and cores (the
        reference: the baseline on onnxruntime fp32)."""
        base = self.baseline_label
        for r in self.runs:
            b = self.run(base, r.batch_size, r.core_count)
            r.speedup = (b.median_ms / r.median_ms) if (b is not None and r.median_ms > 0) else float("nan")

    @property
    def reference_label(self) -> str:
        """What every speedup is against: ``"baseline on onnxruntime 1.32.0 · fp32"``."""
        ref = self.runtimes[0]["label"] if self.runtimes else runtime_label(REFERENCE_ENGINE, self.ort_version)
        return f"{self.baseline_label} on {ref}"

    def to_dict(self) -> dict:
        """The ``sparsify-tui benchmark --json`` shape: ``{"benchmark": {...}, "results": [...]}``."""
        return {
            "benchmark": {
                "id": self.id,
                "name": self.name,
                "created": self.created,
                "models": [{"label": m.label, "optimization": m.optimization_name, "optimization_id": m.optimization,
                            "path": m.path} for m in self.models],
                "baseline": self.baseline_label,
                "batch_sizes": list(self.batch_sizes),
                "core_counts": list(self.core_counts),
                "warmup": self.warmup,
                "iterations": self.iterations,
                "dims": dict(self.dims),
                "data": self.data,
                "seconds": self.seconds,
                "ort_version": self.ort_version,
                "system": dict(self.system),
                "engine": self.engine,
                **({"runtimes": [dict(r) for r in self.runtimes]} if self.runtimes else {}),
                "rounds": self.rounds,
            },
            "results": [{**r.to_dict(), "noise": r.noise(self.rounds)} for r in self.runs],
            **({"accuracy": self.accuracy} if self.accuracy is not None else {}),
            **({"warnings": list(self.warnings)} if self.warnings else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "BenchmarkResult":
        b = d["benchmark"]
        res = cls(
            models=[ModelSpec(m["label"], m.get("path", ""), m.get("optimization_id", m.get("optimization")),
                              m.get("optimization")) for m in b.get("models", [])],
            batch_sizes=[int(x) for x in b.get("batch_sizes", [])],
            core_counts=[int(x) for x in b.get("core_counts", [])],
            warmup=int(b.get("warmup", 0)), iterations=int(b.get("iterations", 0)),
            dims=dict(b.get("dims") or {}), name=b.get("name", "benchmark"), id=b.get("id"),
            created=b.get("created", ""), seconds=float(b.get("seconds", 0.0)), data=b.get("data"),
            ort_version=b.get("ort_version", ""), system=dict(b.get("system") or {}),
            **({"engine": b["engine"]} if b.get("engine") else {}), rounds=int(b.get("rounds", 3)),
            runtimes=[dict(r) for r in b.get("runtimes") or []],
        )
        res.runs = [BenchmarkRun.from_dict(r) for r in d.get("results", [])]
        res.accuracy = d.get("accuracy")
        res.warnings = list(d.get("warnings") or [])
        return res


# --------------------------------------------------------------------------------------------- inputs


def build_feeds(model_path: Union[str, Path], batch_size: int, dims: Optional[dict] = None,
                data: Optional[Union[str, Path]] = None, max_batches: int = 4,
                labels_key: Optional[str] = None) -> list[dict[str, np.ndarray]]:
    """Input feeds for one batch size, built before timing: up to ``max_batches`` batches of the user's
    sample data (``.npz``/``.npy``; its labels array ``labels_key``, default ``labels``, skipped), else one batch
    of synthetic data with valid values (``sparsify_tui.analysis.inputs``). Raises
    ``DimensionError``/``SampleDataError``."""
    from sparsify_tui.analysis.inputs import input_specs, load_sample_data, synthetic_inputs

    specs = input_specs(str(model_path), batch_size=batch_size, dims=dims or {})
    if data:
        batches = load_sample_data(str(data), specs, batch_size, ignore=(labels_key,) if labels_key else ())
        return [{k: np.ascontiguousarray(v) for k, v in b.items()} for b in batches[:max_batches]]
    return [{k: np.ascontiguousarray(v) for k, v in synthetic_inputs(specs, seed=0).items()}]


def _normalize_models(models) -> list[ModelSpec]:
    out = []
    for m in models:
        if isinstance(m, ModelSpec):
            out.append(m)
        elif isinstance(m, dict):
            out.append(ModelSpec(m["label"], str(m["path"]), m.get("optimization"), m.get("optimization_name")))
        else:
            label, path, *rest = m
            out.append(ModelSpec(str(label), str(path), rest[0] if rest else None, rest[1] if len(rest) > 1 else None))
    if not out:
        raise SparsifyError("no models to benchmark: give the baseline and at least one model")
    labels = [m.label for m in out]
    if len(set(labels)) != len(labels):
        raise SparsifyError(f"duplicate model labels {labels}: give every model a distinct name")
    for m in out:
        if not Path(m.path).is_file():
            from sparsify_tui.errors import ModelError

            raise ModelError(f"model file {m.path} does not exist: apply the optimization again")
    return out


def entry_label(label: str, engine: str = REFERENCE_ENGINE, precision: str = REFERENCE_PRECISION) -> str:
    """The label of a model's runs on one runtime: the model's own label on the reference runtime (onnxruntime fp32),
    else ``"<label> · <engine> <precision>"`` (``"int8 · OpenVINO fp32"``)."""
    if (engine, precision) == (REFERENCE_ENGINE, REFERENCE_PRECISION):
        return label
    return f"{label} · {display_name(engine)} {precision}"


def measure_accuracy(specs: Sequence[ModelSpec], *, data=None, labels_key: Optional[str] = None,
                     dims: Optional[dict] = None, metric: Optional[str] = None, max_batches: int = 64,
                     engines: Sequence[Any] = (), cancel: Optional[CancelToken] = None) -> dict:
    """Accuracy of every model on every runtime against the reference (``specs[0]`` on onnxruntime fp32) on the
    same items, with the metrics of :mod:`sparsify_tui.profiling.metrics`: batches of 1 item from ``data`` (with its
    labels, up to ``max_batches``) or 16 seeded synthetic batches. ``engines``: the runtimes (engines bound to a
    precision) measured, the reference's included or not. One session at a time, outside any timed loop.

    Returns ``{"metric", "reason", "labelled", "items", "data", "models": {entry label: Evaluation dict}}``
    (:func:`entry_label`; and ``user_metric`` for a metric of the user's own); each model's ``drop`` is the metric's
    budgeted quantity (absolute top-1 drop, the nmse/kl/max_abs value, or a user metric's worsening, with its
    ``score``), and ``accuracy`` / ``accuracy_reference`` are top-1 against the labels. Raises ``SampleDataError``,
    ``MetricError``."""
    from sparsify_tui.analysis.labels import sample_set
    from sparsify_tui.engine import get_engine
    from sparsify_tui.engine.outputs import run_outputs
    from sparsify_tui.profiling.metrics import choose_metric, evaluate

    ss = sample_set(specs[0].path, data=data, labels_key=labels_key, dims=dims, max_batches=max_batches,
                    metric=metric)
    reference = get_engine(REFERENCE_ENGINE, REFERENCE_PRECISION)
    runtimes = [reference] + [e for e in engines if (e.name, e.precision) != (reference.name, reference.precision)]

    def outputs(path, engine):
        return run_outputs(path, ss.feeds, cancel=cancel, engine=engine)

    ref = outputs(specs[0].path, reference)
    choice = choose_metric(ref[0], metric, labelled=ss.labels is not None)
    if ss.labels is not None and choice.class_output is not None:
        ss.check_classes(int(np.shape(ref[0][choice.class_output])[-1]))
    models = {}
    for engine in runtimes:
        for spec in specs:
            if cancel is not None:
                cancel.check()
            label = entry_label(spec.label, engine.name, engine.precision)
            out = ref if label == specs[0].label else outputs(spec.path, engine)
            models[label] = evaluate(ref, out, choice, ss.labels).to_dict()
    return {"metric": choice.name, "label": choice.label, "reason": choice.reason, "labelled": choice.labelled,
            "items": ss.items, "data": ss.source, "models": models,
            **({"user_metric": choice.user_metric} if choice.user is not None else {})}


def _runtimes(runtimes) -> list:
    """The engines (bound to a precision) of ``runtimes`` (``(engine, precision)`` pairs), the reference (onnxruntime
    fp32) first and always; duplicates dropped. Raises ``SparsifyError`` (one line) for an engine that is not
    installed or a precision this CPU lacks."""
    from sparsify_tui.engine import get_engine

    out, seen = [], set()
    for engine, precision in [(REFERENCE_ENGINE, REFERENCE_PRECISION), *[tuple(r) for r in runtimes or ()]]:
        if (engine, precision) not in seen:
            seen.add((engine, precision))
            out.append(get_engine(engine, precision))
    return out


def _loadable(entries: list, progress: Optional[ProgressFn]) -> tuple:
    """``(entries, warnings)``: the (spec, engine) entries whose runtime loads the model, and one line for each it
    cannot (the other runtimes are still measured; the reference must load)."""
    from sparsify_tui.errors import ModelError

    keep, warnings = [], []
    for spec, engine in entries:
        if (engine.name, engine.precision) == (REFERENCE_ENGINE, REFERENCE_PRECISION):
            keep.append((spec, engine))
            continue
        try:
            engine.open_session(spec.path, 1).close()
            keep.append((spec, engine))
        except ModelError as err:
            warnings.append(f"{entry_label(spec.label, engine.name, engine.precision)} not measured: {err}")
    return keep, warnings


def run_benchmark(
    models,
    *,
    batch_sizes: Sequence[int],
    core_counts: Sequence[int],
    runtimes: Sequence[tuple] = (),
    warmup: int = 5,
    iterations: int = 30,
    dims: Optional[dict] = None,
    data: Optional[Union[str, Path]] = None,
    name: str = "benchmark",
    rounds: int = 3,
    accuracy: bool = True,
    labels_key: Optional[str] = None,
    metric: Optional[str] = None,
    progress: Optional[ProgressFn] = None,
    cancel: Optional[CancelToken] = None,
) -> BenchmarkResult:
    """Measure every (model, runtime, batch size, core count) combination; see the module docstring.

    ``models``: list of ``(label, path)`` / ``(label, path, optimization_id)`` tuples or
    :class:`ModelSpec`; the first (or the one labelled "baseline") is the baseline for speedups.
    ``runtimes``: ``(engine, precision)`` pairs measured besides the reference (onnxruntime fp32, always measured).
    ``batch_sizes``/``core_counts``: positive ints. ``dims``: symbolic dims other than batch
    (``{"x:2": 48}`` or ``{"seq": 128}``). ``data``: optional ``.npz``/``.npy`` sample data path.
    ``rounds``: how many interleaved rounds the iterations are split into (at most ``iterations``).
    ``accuracy``: also measure every model's outputs against the reference's (:func:`measure_accuracy`, with
    ``labels_key`` and ``metric``) when there is more than one entry. A runtime that cannot load a model leaves
    that entry out with one line in ``warnings``.
    Raises ``SparsifyError`` subclasses for bad input (a runtime not installed, a precision this CPU lacks),
    ``JobCanceled`` on cancel.
    """
    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.analysis.shapes import fixed_batch
    from sparsify_tui.engine.timing import interleaved_times

    specs = _normalize_models(models)
    batch_sizes = [int(b) for b in batch_sizes]
    core_counts = [int(c) for c in core_counts]
    if not batch_sizes or min(batch_sizes) < 1:
        raise SparsifyError(f"batch sizes {batch_sizes} invalid: give positive integers, e.g. --batch-sizes 1,8")
    if not core_counts or min(core_counts) < 1:
        raise SparsifyError(f"core counts {core_counts} invalid: give positive integers, e.g. --cores 1,2")
    if int(iterations) < 1 or int(warmup) < 0:
        raise SparsifyError("iterations must be >= 1 and warmup >= 0")
    engines = _runtimes(runtimes)
    reference = engines[0]
    result = BenchmarkResult(
        models=specs, batch_sizes=batch_sizes, core_counts=core_counts, warmup=int(warmup),
        iterations=int(iterations), dims=dict(dims or {}), name=name, data=str(data) if data else None,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), ort_version=reference.version,
        system=reference.system_info().to_dict(), engine=reference.description,
        runtimes=[{"engine": e.name, "precision": e.precision, "version": e.version, "label": e.label,
                   "settings": e.settings(max(core_counts))} for e in engines],
    )
    entries, result.warnings = _loadable([(spec, e) for e in engines for spec in specs], progress)
    labels = [entry_label(spec.label, e.name, e.precision) for spec, e in entries]
    rounds = result.rounds = len(round_shares(int(iterations), rounds))
    total = len(entries) * len(batch_sizes) * len(core_counts) * rounds
    done = 0
    t_start = time.perf_counter()
    # a model that fixes its batch runs that batch whatever bs says (resolve_dims refuses any other bs > 1)
    fixed = {spec.label: fixed_batch(load_model(spec.path, load_external_data=False)) for spec in specs}
    for bs in batch_sizes:
        feeds_by_model: dict[str, list] = {}
        for cores in core_counts:

            def feeds_of(i: int, _bs=bs, _feeds=feeds_by_model) -> list:
                spec = entries[i][0]
                if spec.label not in _feeds:
                    _feeds[spec.label] = build_feeds(spec.path, _bs, dims, data, labels_key=labels_key)
                return _feeds[spec.label]

            def before(step: int, steps: int, r: int, i: int, _bs=bs, _cores=cores, _done=done) -> None:
                if progress is not None:
                    progress(f"{labels[i]} batch {_bs} cores {_cores} (round {r + 1}/{rounds})",
                             (_done + step) / total)

            per_entry = interleaved_times([e for _, e in entries], [spec.path for spec, _ in entries], feeds_of,
                                          cores, rounds=rounds, warmup=warmup, iterations=int(iterations),
                                          cancel=cancel, before_session=before)
            done += len(entries) * rounds
            for i, ((spec, engine), times) in enumerate(zip(entries, per_entry)):
                run = BenchmarkRun.from_times(labels[i], spec.optimization_name or spec.optimization,
                                              fixed[spec.label] or bs, cores, times)
                run.optimization_id = spec.optimization
                run.engine, run.precision = engine.name, engine.precision
                run.input_shapes = {k: list(np.shape(v)) for k, v in feeds_of(i)[0].items()}
                result.runs.append(run)
    result.compute_speedups()
    if accuracy and len(entries) > 1:
        if progress is not None:
            progress("accuracy of every model against the reference", 0.99)
        result.accuracy = measure_accuracy(specs, data=data, labels_key=labels_key, dims=dims, metric=metric,
                                           engines=engines, cancel=cancel)
        kept = set(labels)
        result.accuracy["models"] = {k: v for k, v in result.accuracy["models"].items() if k in kept}
    result.seconds = time.perf_counter() - t_start
    if progress is not None:
        progress("done", 1.0)
    return result
