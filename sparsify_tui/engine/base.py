"""The interface every engine (runtime) implements, and the neutral data it returns.

An engine turns an ONNX file into timed runs on this machine. sparsify-tui asks four things of it:

1. **sessions configured as deployed** (:meth:`Engine.open_session`; docs/design.md "Measuring": all
   graph optimizations on, intra-op threads = core count, inter-op threads = 1, one live session at
   a time) that run a feed dict through a bound callable (:meth:`Session.runner`), a cancel
   terminating an in-flight run;
2. **a profiled pass** (:meth:`Engine.profile`): per-kernel ms per run plus the graph the engine
   actually ran (after its fusions), as :class:`ProfiledPass`, which perf attribution maps back to the
   user's nodes;
3. **INT8 quantization** (:meth:`Engine.quantize_int8`): a static INT8 model the engine runs fast;
4. its **identity**: name, version, providers and session settings for the stored results.

A second runtime is one module with an :class:`Engine` subclass (and its :class:`Session`) plus one line
in :data:`sparsify_tui.engine.ENGINES`. The timing loop (:mod:`sparsify_tui.engine.timing`), pruning and
weight rewrites (:mod:`sparsify_tui.engine.weights`, :mod:`sparsify_tui.engine.pruning`) are shared.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from sparsify_tui.errors import ModelError
from sparsify_tui.progress import CancelToken, ProgressFn

#: ``run(feed) -> outputs``: one inference of a feed dict ``{input name: np.ndarray}``.
RunFn = Callable[[Mapping[str, Any]], list]
#: model source: a path (external data resolved next to it) or serialized model bytes
ModelSource = Union[str, Path, bytes]


class Session(ABC):
    """A model loaded by an engine, ready to run. Close it (or use it as a context manager), and drop its
    runners, before the next one is opened: an idle session's threads steal cores from the one being
    measured.

    ``input_names``/``output_names``: the model's graph inputs and outputs, in order;
    ``clock``: the engine's clock in ns, read around each timed run (``time.perf_counter_ns``).
    """

    input_names: list[str]
    output_names: list[str]
    clock: Callable[[], int] = time.perf_counter_ns

    @abstractmethod
    def runner(self, outputs: Optional[Sequence[str]] = None, cancel: Optional[CancelToken] = None) -> RunFn:
        """The hot call, bound once: ``run(feed)`` returns the ``outputs`` (default all, in
        :attr:`output_names` order) as numpy arrays. ``cancel`` terminates a running call within
        milliseconds; the call then raises (turn that into ``JobCanceled`` with
        :func:`sparsify_tui.engine.timing.canceled_as_job`). Build it outside timed loops."""

    def close(self) -> None:
        """Release the runtime's session (threads, memory). Runners built from it stop working."""

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class KernelTimes:
    """Per-kernel times of a profiled pass, averaged over the counted runs.

    ``ms``: kernel key -> ms per run (exclusive of nested kernels), the mean over the runs; ``median_ms``: the
    engine's robust figure of the same (onnxruntime: the median over the runs; OpenVINO, whose counters are running
    means: the mean over the runs no other process slowed), what is attributed when ``per_run`` is empty;
    ``op_type``: key -> op;
    ``order``: keys in first-execution order; ``runs``: number of runs averaged; ``run_ms``: mean
    whole-run duration (ms, includes framework overhead between kernels); ``runs_ms``: each counted
    run's duration (ms, in run order; empty when the trace has no run markers); ``per_run``: each counted run's
    kernel times (``{key: ms}``, in run order; a kernel absent from a run took 0 ms in it; empty when the engine
    cannot tell one run's times), what per-node medians over the runs are computed from
    (:func:`sparsify_tui.profiling.attribution.over_runs`: a kernel another process preempted in one run moves the
    mean, not the median).
    Keys are the names of the nodes in :attr:`ProfiledPass.nodes`; a name that occurs k>1 times within
    one run (e.g. unnamed nodes) gets keys ``name``, ``name#1``, ... in execution order.
    """

    ms: dict = field(default_factory=dict)
    median_ms: dict = field(default_factory=dict)
    op_type: dict = field(default_factory=dict)
    order: list = field(default_factory=list)
    runs: int = 0
    run_ms: float = 0.0
    runs_ms: list = field(default_factory=list)
    per_run: list = field(default_factory=list)

    @property
    def total_ms(self) -> float:
        return float(sum(self.ms.values()))


@dataclass
class RuntimeNode:
    """A node of the graph an engine ran that names the original ONNX nodes it computes, for a runtime that
    records them (OpenVINO: the runtime model's ``originalLayersNames``); the fields of
    :class:`sparsify_tui.analysis.graph.GraphNode` (not a subclass: that module imports onnx, this package does
    not) plus ``origins``: those names, as the runtime gives them (names it made up for nodes of its own match no
    original node and are ignored), and ``layout``: the node is one of the runtime's layout or precision
    conversions (OpenVINO Reorder, Transpose, Convert), which attribution puts on the layout row unless
    ``origins`` names an original node. :func:`sparsify_tui.profiling.attribution.attribute` matches these kernels
    to original nodes by those names instead of by graph matching."""

    id: str
    name: str
    op_type: str
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    flops: int = 0
    origins: tuple = ()
    layout: bool = False


@dataclass
class ProfiledPass:
    """What a profiled pass measured: ``kernels`` (:class:`KernelTimes`), ``nodes``: the graph the engine
    ran, as :class:`sparsify_tui.analysis.graph.GraphNode` (kernel keys are their names; :class:`RuntimeNode`
    when the engine names the original nodes of each), ``initializers``: its constant tensor names;
    ``seconds``: wall time of its phases (``session_s``, ``runs_s``, ``end_profiling_s``, ``parse_s``)."""

    kernels: KernelTimes
    nodes: list
    initializers: set
    seconds: dict = field(default_factory=dict)


@dataclass
class QuantizationResult:
    """Outcome of :meth:`Engine.quantize_int8`.

    ``out_path``: the INT8 model; ``seconds``: wall time of pre-processing + quantization (s);
    ``excluded_nodes``: node names left in FP32 as asked; ``error``: None on success (failures raise);
    ``warnings``: non-fatal problems (e.g. pre-processing skipped, so INT8 may be slow);
    ``preprocess_seconds``: wall time of the pre-processing step (s, 0 when reused);
    ``calibration_seconds``: wall time of calibration (s, 0 when the ranges were reused);
    ``calibration_method``: how activation ranges were calibrated ("minmax", "entropy", "percentile").
    """

    out_path: Path
    seconds: float
    excluded_nodes: list = field(default_factory=list)
    error: Optional[str] = None
    warnings: list = field(default_factory=list)
    preprocess_seconds: float = 0.0
    calibration_seconds: float = 0.0
    calibration_method: str = "minmax"

    def to_dict(self) -> dict:
        return {
            "out_path": str(self.out_path),
            "seconds": self.seconds,
            "preprocess_seconds": self.preprocess_seconds,
            "calibration_seconds": self.calibration_seconds,
            "calibration_method": self.calibration_method,
            "excluded_nodes": list(self.excluded_nodes),
            "error": self.error,
            "warnings": list(self.warnings),
        }


#: the float precisions a session can run at (INT8 is a property of the model file, a QDQ graph, not of a session)
PRECISIONS = ("fp32", "bf16")


class Engine(ABC):
    """A runtime sparsify-tui measures with (module docstring), bound to one session **precision**
    (:data:`PRECISIONS`). Instances are stateless apart from caches; :func:`sparsify_tui.engine.get_engine`
    hands out one per (name, precision)."""

    #: registry key ("onnxruntime", "openvino"): what ``--engine`` takes and records store
    name: str = ""
    #: the name shown to users ("onnxruntime", "OpenVINO")
    display_name: str = ""
    #: the :data:`PRECISIONS` this runtime has sessions for on some CPU (:meth:`precision_problem` says whether this
    #: CPU runs them)
    session_precisions: tuple = ("fp32",)
    #: one line: how sessions are configured (the ``engine`` field of a benchmark)
    description: str = ""
    #: one line: how :meth:`quantize_int8` quantizes (the ``method`` of a perf profile's INT8 part)
    quantization_method: str = ""

    def __init__(self, precision: str = "fp32"):
        #: the precision this instance's sessions run at (``"fp32"`` or ``"bf16"``)
        self.precision = precision

    @property
    @abstractmethod
    def version(self) -> str:
        """The runtime's version string."""

    @property
    def label(self) -> str:
        """How every record, summary and report names the runtime: ``"onnxruntime 1.32.0 · fp32"``,
        ``"OpenVINO 2026.4.1 · bf16"``."""
        return f"{self.display_name or self.name} {self.version} · {self.precision}"

    @classmethod
    def available(cls) -> Optional[str]:
        """None when the runtime is installed, else one line saying why not and how to get it (e.g. the
        optional extra to install). Must not import more than the runtime's package."""
        return None

    def precision_problem(self, precision: str) -> Optional[str]:
        """None when this engine runs sessions at ``precision`` on this CPU, else one line naming why not
        and the fix. Default: fp32 only."""
        if precision == "fp32":
            return None
        return f"{self.display_name or self.name} runs only fp32 sessions here, not {precision}: use --precision fp32"

    def precisions(self) -> list[str]:
        """The :data:`PRECISIONS` this engine runs on this CPU (fp32 always first)."""
        return [p for p in PRECISIONS if self.precision_problem(p) is None]

    def providers(self) -> list[str]:
        """Execution providers (devices/back-ends) the runtime offers on this machine."""
        return []

    def settings(self, core_count: int) -> dict:
        """How sessions are configured for ``core_count`` cores (stored with every perf profile)."""
        return {"engine": self.name, "threads": int(core_count), "precision": self.precision}

    def system_info(self):
        """This machine (:func:`sparsify_tui.analysis.system.machine_info`) with the runtime's version and
        providers."""
        from sparsify_tui.analysis.system import machine_info

        return machine_info(self.version, self.providers())

    @abstractmethod
    def open_session(self, model: ModelSource, core_count: Optional[int] = None, *,
                     external_initializers: Optional[dict] = None) -> Session:
        """A session on ``model`` configured as deployed with ``core_count`` threads (None: every core this
        process may use, :func:`sparsify_tui.settings.available_cores`).

        ``external_initializers``: ``{name: numpy array}`` supplying, in memory and without a copy, the
        data of initializers the model holds as data-less placeholders
        (:func:`sparsify_tui.engine.weights.strip_initializers`). Raises ``ModelError`` (one line) when
        the runtime cannot load the model."""

    @abstractmethod
    def profile(self, model_path: Union[str, Path], feeds: Sequence[Mapping[str, Any]], core_count: int, *,
                runs: int, workdir: Path, tag: str = "model", cancel: Optional[CancelToken] = None,
                on_run: Optional[Callable[[int, int], None]] = None) -> ProfiledPass:
        """A profiled pass: one warm-up run (ignored) then ``runs`` runs cycling ``feeds`` in a profiling
        session configured like :meth:`open_session`; per-kernel times and the graph the engine ran.
        Temporary files go to ``workdir`` (names start with ``tag``); ``on_run(done, total)`` after
        each run. Raises ``ModelError`` when the model cannot be loaded, ``JobCanceled`` on cancel."""

    @abstractmethod
    def quantize_int8(self, model_path: Union[str, Path], out_path: Union[str, Path],
                      calibration: Sequence[Mapping[str, Any]], *, per_channel: bool = True,
                      excluded_nodes: Sequence[str] = (), progress: Optional[ProgressFn] = None,
                      cancel: Optional[CancelToken] = None, calibration_method: str = "minmax",
                      reuse_dir: Optional[Union[str, Path]] = None) -> QuantizationResult:
        """Write a static INT8 model of ``model_path`` to ``out_path``, calibrated on the feed dicts
        ``calibration`` (at least one) with ``calibration_method`` ("minmax", "entropy", "percentile"),
        keeping ``excluded_nodes`` (original node names) in FP32. ``reuse_dir``: a folder, owned by the
        caller, where the engine may keep what it can reuse for the next quantization of the same model and
        calibration data (pre-processed model, calibrated ranges); None reuses nothing.
        Raises ``ModelError`` (one line with the runtime's reason), ``JobCanceled``."""

    def quantize_dynamic_int8(self, model_path: Union[str, Path], out_path: Union[str, Path], *,
                              cancel: Optional[CancelToken] = None) -> QuantizationResult:
        """Write the dynamic INT8 model of ``model_path`` (MatMul/Gemm weights per channel, activations quantized at
        run time) to ``out_path``: one ONNX file every engine that reads its ops runs (onnxruntime's:
        :func:`sparsify_tui.engine.ort_quant.quantize_dynamic_int8`). Raises ``ModelError`` (one line; by default:
        this engine has no dynamic INT8), ``JobCanceled``."""
        raise ModelError(f"{self.display_name or self.name} has no dynamic INT8: use static INT8")

    def deployment_code(self, model_path: str, core_count: Optional[int] = None) -> str:
        """A short, runnable Python snippet that loads ``model_path`` in this runtime configured as it was measured
        (precision, ``core_count`` threads; None: every core the process may use) and runs one feed: what
        ``sparsify-tui export`` writes beside the recipe. Default: none for this engine (a one-line comment)."""
        return f"# {self.display_name or self.name}: no deployment snippet\n"

    def int8_graph(self, model_path: Union[str, Path], reuse_dir: Union[str, Path]) -> Path:
        """The graph :meth:`quantize_int8` quantizes (after the engine's own pre-processing, kept in ``reuse_dir``
        for the next :meth:`quantize_int8` with the same ``reuse_dir``): the node names ``excluded_nodes`` refer
        to. Default: the model itself."""
        return Path(model_path)

    def infer_shapes(self, model) -> dict:
        """Extra shape inference for tensors onnx leaves unknown: ``{tensor name: shape}`` or an inferred
        ``ModelProto`` (used last by :func:`sparsify_tui.analysis.shapes.infer_shapes_ex`). Default: none."""
        return {}
