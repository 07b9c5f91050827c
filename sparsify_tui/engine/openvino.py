"""The OpenVINO engine: the ``openvino`` package's CPU plugin reading the same ``.onnx`` (docs/design.md, Measuring).

**Sessions.** ``Core.read_model`` on the ONNX file (or bytes), compiled for ``"CPU"`` with
``INFERENCE_NUM_THREADS`` = core count, ``NUM_STREAMS`` = 1, ``PERFORMANCE_HINT`` = ``LATENCY`` and always an
explicit ``INFERENCE_PRECISION_HINT`` (``f32`` for fp32, ``bf16`` for bf16): without it OpenVINO runs bf16 on a
CPU with BF16. After each compile the compiled model's own ``INFERENCE_PRECISION_HINT``, ``EXECUTION_DEVICES``,
threads, streams and hint are read back (:attr:`OpenVinoSession.compiled_settings`, and the engine's
``settings()["compiled"]``); a compile that runs another precision than the one asked for (OpenVINO falls back
to f32 silently where BF16 is missing) raises instead of measuring it.

**Shapes.** Static shapes are what the CPU plugin runs fast, so a model with symbolic dims is reshaped to the
shapes of the feed and compiled on the first run of each shape set (the warm-up of :func:`timing.time_runs
<sparsify_tui.engine.timing.time_runs>`; at most :data:`MAX_SHAPES` compiled per session); a model with static
shapes compiles when opened. The bound runner is ``InferRequest.start_async(feed, share_inputs=True)`` (no input
copy; a read-only array, which openvino will not share, is copied) and ``wait()``, then ``results`` (copies, so outputs survive the next run), plus one tuple of shapes
compared per call; ``benchmarks/openvino_engine.py`` times it against a bare ``infer`` loop.

**Cancel.** ``InferRequest.cancel()`` from the canceling thread stops a running request within milliseconds; the
``wait()`` then raises (``Infer Request was canceled``). Not the synchronous ``infer()``: with one thread
(``INFERENCE_NUM_THREADS`` 1) the plugin runs it in the calling thread and ignores the cancel (measured,
OpenVINO 2026.4: a 1.3 s run of the PP-OCRv4 detector ran to its end), while ``start_async`` + ``wait`` stopped
0.2 s in at 1 and 2 threads, and timed the same as ``infer`` (PP-OCR cls, 600 alternating runs each).

**Profiled pass** (:meth:`OpenVinoEngine.profile`). ``PERF_COUNT`` on, one warm-up run, then ``runs`` runs of
the one timing loop, the counters read after each (``InferRequest.get_profiling_info``, outside the timed
interval). The CPU plugin's counters are the **running
mean since compile, in whole µs** (``PerfCount::avg``: measured, a run slowed by another process moves every
later reading), so a single run's kernel time is known only to ± its run index µs: ``KernelTimes.ms`` is the mean
over the counted runs (the warm-up subtracted, exact to ~1 µs), and ``KernelTimes.median_ms`` the mean over the
runs no other process slowed (whole-run time at most :data:`SLOW_RUN` × the median run; the others' counter
increments subtracted): the robust per-kernel figure the median is for. Kernels are the executed nodes of the
runtime model (``compiled.get_runtime_model()``); each is a :class:`~sparsify_tui.engine.base.RuntimeNode` whose
``origins`` are its ``originalLayersNames`` (OpenVINO's ``/WithoutBiases`` suffix of a Conv split from its bias
removed), ``layout`` set for the Reorder / Transpose / Convert nodes the plugin inserts; attribution
(:mod:`sparsify_tui.profiling.attribution`) maps them back to ONNX nodes.

**INT8** (:meth:`OpenVinoEngine.quantize_int8`): the same ONNX QDQ model as onnxruntime's
(:mod:`sparsify_tui.engine.ort_quant`) with **QInt8 activations** (S8S8), the type OpenVINO's INT8 kernels run
fastest (onnxruntime keeps QUInt8): the artifact stays one ``.onnx`` file either runtime loads.

**Telemetry.** ``import openvino`` initializes the openvino-telemetry package and sends an "import" event to
Google Analytics unless the user opted out (``openvino/tools/ovc/__init__.py``; it also writes
``~/intel/openvino_ga_cid`` and ``~/intel/stats``). :func:`_ov` imports openvino with ``openvino_telemetry``
marked absent in ``sys.modules``, so openvino takes its own fallback for an uninstalled telemetry package
(``openvino.tools.ovc.telemetry_stub``, whose methods do nothing): nothing is sent or written, no user setting
is changed. Nothing is fetched: models are read from the given path or bytes.
"""

from __future__ import annotations

import functools
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from sparsify_tui.engine.base import (
    Engine, KernelTimes, ModelSource, ProfiledPass, QuantizationResult, RuntimeNode, Session)
from sparsify_tui.errors import ModelError, SparsifyError
from sparsify_tui.progress import CancelToken, ProgressFn

#: session precision -> OpenVINO ``INFERENCE_PRECISION_HINT``
PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16"}
#: compiled shape sets kept per session (each holds its own copy of the weights)
MAX_SHAPES = 4
#: a profiled run is "slowed" when its whole-run time exceeds this multiple of the median run (module docstring)
SLOW_RUN = 1.25
#: runtime-model layer types the plugin inserts to change layout or precision (the layout row)
LAYOUT_LAYERS = ("Reorder", "Transpose", "Convert")
#: the compiled model's properties recorded as what the plugin ran
COMPILED_PROPERTIES = ("INFERENCE_PRECISION_HINT", "EXECUTION_DEVICES", "INFERENCE_NUM_THREADS", "NUM_STREAMS",
                       "PERFORMANCE_HINT")
#: OpenVINO's ONNX frontend names the Convolution it splits from a Conv's bias ``<Conv name>/WithoutBiases``
_FRONTEND_SUFFIXES = ("/WithoutBiases",)
_NOT_INSTALLED = "OpenVINO is not installed: pip install 'sparsify-tui[openvino]' (or pip install openvino)"


def _ov():
    """The ``openvino`` module, imported with its telemetry off (module docstring)."""
    if "openvino" not in sys.modules:
        sys.modules.setdefault("openvino_telemetry", None)
    try:
        import openvino
    except ImportError as err:
        raise SparsifyError(f"{_NOT_INSTALLED} ({_reason(err)})") from err
    return openvino


@functools.lru_cache(maxsize=1)
def _core():
    """The process's one ``openvino.Core`` (every compile passes its own configuration)."""
    return _ov().Core()


@functools.lru_cache(maxsize=1)
def cpu_capabilities() -> tuple:
    """The CPU plugin's ``OPTIMIZATION_CAPABILITIES`` on this machine, e.g. ``("FP32", "INT8", "BIN",
    "EXPORT_IMPORT")``, with ``"BF16"`` where the CPU runs bf16 (AVX512_BF16 or AMX)."""
    return tuple(str(c) for c in _core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


def _reason(err: BaseException) -> str:
    """One line of OpenVINO's message: its summary (``Conversion is failed for: ...``) or its last line that is not
    a source location (``Exception from src/...``, ``Check '...' failed at ...``)."""
    lines = [ln.strip(" -") for ln in str(err).splitlines() if ln.strip(" -")]
    for ln in lines:
        if ln.startswith("Conversion is failed for"):
            return ln[:300]
    useful = [ln for ln in lines if not ln.startswith(("Exception from", "Check '", "FrontEnd API failed with",
                                                         "Summary:"))]
    return ((useful or lines or [type(err).__name__])[-1])[:300]


def _name(model: ModelSource) -> str:
    return Path(model).name if isinstance(model, (str, Path)) else "the model"


def _type_name(value) -> Any:
    """A compiled-model property as plain JSON: ``ov.Type`` -> ``"f32"``, enums -> their name, lists kept."""
    if isinstance(value, (list, tuple)):
        return [_type_name(v) for v in value]
    if isinstance(value, (str, int, float, bool)):
        return value
    to_string = getattr(value, "to_string", None)
    if callable(to_string):
        return to_string()
    return str(getattr(value, "name", value))


def _origin_name(name: str) -> str:
    for suffix in _FRONTEND_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _read(model: ModelSource, external_initializers: Optional[dict]):
    """``(ov.Model, arrays kept alive, defaults)``: ``model`` read by OpenVINO's ONNX frontend.

    With ``external_initializers`` (placeholders of :func:`sparsify_tui.engine.weights.strip_initializers`), the
    placeholders become graph inputs of the ONNX bytes read and those Parameters are then replaced by Constants
    sharing the arrays' memory (a copy of a read-only array). **Overridable initializers** (graph inputs that also
    have an initializer, IR >= 4: a value fed at run time replaces the default) have no OpenVINO form: OpenVINO
    folds them into constants. In a model given as bytes or with ``external_initializers`` they stay Parameters
    and ``defaults`` holds their values (``{name: array}``), which the runner feeds when the feed does not (the
    one-shot loss profile feeds a pruned weight or an INT8 gate into one session). Raises ``ModelError`` with
    OpenVINO's reason."""
    ov = _ov()
    core = _core()
    arrays: dict = {}
    defaults: dict = {}
    try:
        if external_initializers or isinstance(model, bytes):
            import numpy as np

            ext = external_initializers or {}
            src, defaults = _as_parameters(model, ext)
            m = core.read_model(src)
            for p in list(m.get_parameters()):
                name = p.output(0).get_any_name()
                if name not in ext or name in defaults:
                    continue
                arr = np.ascontiguousarray(ext[name])
                arrays[name] = arr
                # shared when the array is writeable (openvino's binding shares no read-only buffer), else copied
                const = ov.op.Constant(arr, shared_memory=bool(arr.flags.writeable))
                for target in p.output(0).get_target_inputs():
                    target.replace_source_output(const.output(0))
                m.remove_parameter(p)
            m.validate_nodes_and_infer_types()
        else:
            m = core.read_model(str(model))
    except SparsifyError:
        raise
    except Exception as err:
        raise ModelError(f"OpenVINO cannot read {_name(model)} ({_reason(err)}): check the model, or use "
                         "--engine onnxruntime") from err
    return m, arrays, defaults


def _as_parameters(model: ModelSource, ext: dict) -> tuple:
    """``(ONNX bytes, defaults)`` of ``model`` with the placeholder initializers named in ``ext`` and the overridable
    initializers turned into graph inputs (same type and dims; placeholders carry no data, so nothing is copied),
    and ``defaults``: the overridable ones' values (from ``ext`` for a placeholder). ``model`` itself (its bytes)
    when there is nothing to turn."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(str(model),
                                                                                    load_external_data=False)
    g = proto.graph
    listed = {i.name for i in g.input}
    overridable = {t.name for t in g.initializer if t.name in listed} if proto.ir_version >= 4 else set()
    turn = {t.name for t in g.initializer if t.name in ext} | overridable
    if not turn:
        return (model if isinstance(model, bytes) else proto.SerializeToString()), {}
    defaults = {t.name: (ext[t.name] if t.name in ext else numpy_helper.to_array(t))
                for t in g.initializer if t.name in overridable}
    moved = [t for t in g.initializer if t.name in turn]
    keep = [t for t in g.initializer if t.name not in turn]
    del g.initializer[:]
    g.initializer.extend(keep)
    for t in moved:
        if t.name not in listed:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return proto.SerializeToString(), defaults


class OpenVinoSession(Session):
    """An OpenVINO model behind the engine :class:`Session` interface, compiled per input-shape set (module
    docstring). ``compiled_settings``: what the plugin ran, read back from the last compiled model (None before the
    first compile)."""

    def __init__(self, engine: "OpenVinoEngine", model, core_count: Optional[int], name: str,
                 keep_alive: Optional[dict] = None, defaults: Optional[dict] = None, perf_count: bool = False):
        self._engine, self._model, self._name = engine, model, name
        self._config = engine.config(core_count, perf_count=perf_count)
        self._keep_alive = keep_alive or {}
        #: overridable initializers: fed when a feed does not name them (:func:`_read`)
        self._defaults = {k: v if v.flags.writeable else v.copy() for k, v in (defaults or {}).items()}
        self.input_names = [p.get_any_name() for p in model.inputs if p.get_any_name() not in self._defaults]
        self.output_names = [o.get_any_name() for o in model.outputs]
        self._compiled: dict = {}  # shape key -> (compiled model, infer request)
        self._dynamic = model.is_dynamic()
        self.compiled_settings: Optional[dict] = None
        if not self._dynamic:
            self._compile(None)

    def _compile(self, shapes: Optional[dict]):
        key = None if shapes is None else tuple(sorted((k, tuple(v)) for k, v in shapes.items()))
        hit = self._compiled.get(key)
        if hit is not None:
            return hit
        try:
            if shapes is not None:
                self._model.reshape({k: list(v) for k, v in shapes.items()})
            compiled = _core().compile_model(self._model, "CPU", self._config)
        except Exception as err:
            at = f" at input shapes {shapes}" if shapes else ""
            raise ModelError(f"OpenVINO cannot compile {self._name}{at} ({_reason(err)}): check the model and "
                             "its dims, or use --engine onnxruntime") from err
        self.compiled_settings = self._engine.check_compiled(compiled, int(self._config["INFERENCE_NUM_THREADS"]))
        request = compiled.create_infer_request()
        if len(self._compiled) >= MAX_SHAPES:
            self._compiled.pop(next(iter(self._compiled)))
        self._compiled[key] = (compiled, request)
        return compiled, request

    def compiled_for(self, feed: Mapping[str, Any]) -> tuple:
        """``(compiled model, infer request)`` for ``feed``'s input shapes (compiled now when new; a model with
        static shapes has one)."""
        if not self._dynamic:
            return self._compiled[None]
        import numpy as np

        names = self.input_names + list(self._defaults)
        return self._compile({k: np.shape(feed[k] if k in feed else self._defaults[k]) for k in names
                              if k in feed or k in self._defaults})

    def runner(self, outputs: Optional[Sequence[str]] = None, cancel: Optional[CancelToken] = None):
        names = list(outputs) if outputs is not None else list(self.output_names)
        missing = [n for n in names if n not in self.output_names]
        if missing:
            raise ModelError(f"{self._name} has no output {missing[0]!r}: use one of {', '.join(self.output_names)}")
        idx = tuple(self.output_names.index(n) for n in names)
        every = idx == tuple(range(len(self.output_names)))
        current: list = [None, None]  # feed shapes, the request compiled for them
        if cancel is not None:
            cancel.on_cancel(self._cancel_all)

        def run(feed, _cur=current, _compiled_for=self.compiled_for, _idx=idx, _every=every, _defaults=self._defaults):
            if _defaults:
                feed = {**_defaults, **feed}
            key = tuple([v.shape for v in feed.values()])
            if key != _cur[0]:
                _cur[1] = _compiled_for(feed)[1]
                _cur[0] = key
            request = _cur[1]
            try:
                request.start_async(feed, share_inputs=True)
            except ValueError:  # openvino shares no read-only array: copied instead
                request.start_async(feed, share_inputs=False)
            request.wait()
            values = request.results.to_tuple()  # copies
            return list(values) if _every else [values[i] for i in _idx]
        return run

    def _cancel_all(self) -> None:
        for _compiled, request in list(self._compiled.values()):
            try:
                request.cancel()
            except Exception:  # a request that is not running: nothing to stop
                pass

    def close(self) -> None:
        self._compiled = {}
        self._model = None
        self._keep_alive = {}


class OpenVinoEngine(Engine):
    """OpenVINO's CPU plugin (module docstring)."""

    name = "openvino"
    display_name = "OpenVINO"
    session_precisions = ("fp32", "bf16")
    description = ("OpenVINO CPU plugin, INFERENCE_NUM_THREADS=cores, NUM_STREAMS=1, PERFORMANCE_HINT=LATENCY, "
                   "explicit INFERENCE_PRECISION_HINT")
    quantization_method = ("onnxruntime.quantization quantize_static: QDQ, per-channel, MinMax, QInt8 weights, "
                           "QInt8 activations (S8S8, OpenVINO's fast INT8 path), after quant_pre_process")

    def __init__(self, precision: str = "fp32"):
        super().__init__(precision)
        #: core count -> what the plugin ran at the last compile (:meth:`check_compiled`)
        self._compiled_settings: dict = {}

    @classmethod
    def available(cls) -> Optional[str]:
        return _NOT_INSTALLED if importlib.util.find_spec("openvino") is None else None

    @property
    def version(self) -> str:
        """``"2026.4.1"`` (the build string, ``openvino.get_version()``, is in :meth:`settings`)."""
        return str(_ov().__version__).split("-")[0]

    def providers(self) -> list[str]:
        """OpenVINO's available devices (``Core.available_devices``); sessions use ``"CPU"``."""
        return [str(d) for d in _core().available_devices]

    def precision_problem(self, precision: str) -> Optional[str]:
        if precision == "fp32":
            return None
        if precision != "bf16":
            return f"OpenVINO runs fp32 or bf16 sessions, not {precision}: use --precision fp32"
        caps = cpu_capabilities()
        if "BF16" in caps:
            return None
        return (f"this CPU has no BF16 support (OpenVINO's CPU plugin offers {', '.join(caps) or 'nothing'}; bf16 "
                "needs AVX512_BF16 or AMX): use --precision fp32")

    def config(self, core_count: Optional[int], *, perf_count: bool = False) -> dict:
        """The ``compile_model`` configuration for ``core_count`` threads (None: every core this process may
        use)."""
        from sparsify_tui.settings import available_cores

        return {
            "INFERENCE_NUM_THREADS": int(core_count or available_cores()),
            "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": PRECISION_HINTS[self.precision],
            "PERF_COUNT": bool(perf_count),
        }

    def check_compiled(self, compiled, core_count: int) -> dict:
        """What ``compiled`` runs (:data:`COMPILED_PROPERTIES` read back), remembered for :meth:`settings`.
        Raises ``SparsifyError`` when its precision is not this engine's (OpenVINO falls back to f32 silently)."""
        ran = {p: _type_name(compiled.get_property(p)) for p in COMPILED_PROPERTIES}
        if ran["INFERENCE_PRECISION_HINT"] != PRECISION_HINTS[self.precision]:
            raise SparsifyError(f"OpenVINO compiled the model for {ran['INFERENCE_PRECISION_HINT']}, not "
                                f"{PRECISION_HINTS[self.precision]} ({self.precision}): this CPU cannot run "
                                f"{self.precision}; use --precision fp32")
        self._compiled_settings[int(core_count)] = ran
        return ran

    def settings(self, core_count: int) -> dict:
        """The configuration, the full build string and ``compiled``: what the plugin ran at the last compile with
        ``core_count`` threads in this process (a one-op probe model is compiled when none was)."""
        cores = int(core_count)
        conf = self.config(cores)
        del conf["PERF_COUNT"]
        ran = self._compiled_settings.get(cores)
        if ran is None:
            self.check_compiled(_core().compile_model(self._probe(), "CPU", self.config(cores)), cores)
            ran = self._compiled_settings[cores]
        return {"engine": self.name, "device": "CPU", **conf, "precision": self.precision,
                "openvino_build": str(_ov().get_version()), "compiled": dict(ran)}

    @staticmethod
    def _probe():
        ov = _ov()
        x = ov.opset13.parameter([1, 8], ov.Type.f32, name="x")
        return ov.Model([ov.opset13.relu(x)], [x], "probe")

    def open_session(self, model: ModelSource, core_count: Optional[int] = None, *,
                     external_initializers: Optional[dict] = None) -> OpenVinoSession:
        m, arrays, defaults = _read(model, external_initializers)
        return OpenVinoSession(self, m, core_count, _name(model), keep_alive=arrays, defaults=defaults)

    def profile(self, model_path: Union[str, Path], feeds: Sequence[Mapping[str, Any]], core_count: int, *,
                runs: int, workdir: Path, tag: str = "model", cancel: Optional[CancelToken] = None,
                on_run: Optional[Callable[[int, int], None]] = None) -> ProfiledPass:
        """See :meth:`Engine.profile` and the module docstring. Runs the feeds of ``feeds[0]``'s input shapes
        (one compiled model: the counters are its own). Writes nothing to ``workdir``."""
        import numpy as np

        from sparsify_tui.engine.timing import time_runs

        seconds = {"session_s": 0.0, "runs_s": 0.0, "end_profiling_s": 0.0, "parse_s": 0.0}
        t0 = time.perf_counter()
        m, _, _ = _read(model_path, None)
        session = OpenVinoSession(self, m, core_count, _name(model_path), perf_count=True)
        first = {k: np.shape(v) for k, v in feeds[0].items()}
        same = [f for f in feeds if {k: np.shape(v) for k, v in f.items()} == first]
        compiled, request = session.compiled_for(same[0])
        seconds["session_s"] = time.perf_counter() - t0
        executed_status = _ov().ProfilingInfo.Status.EXECUTED
        executed: list = []  # indices of the executed kernels in the profiling info
        names: list = []
        readings: list = []  # after the warm-up and each run: each executed kernel's real_time (running mean)

        def read_counters(done: int, total: int) -> None:
            info = request.get_profiling_info()
            if not executed:
                executed.extend(i for i, p in enumerate(info) if p.status == executed_status)
                names.extend(info[i].node_name for i in executed)
            readings.append([info[i].real_time for i in executed])
            if on_run is not None:
                on_run(done, total)

        t0 = time.perf_counter()
        try:
            times_ms = time_runs(session, same, warmup=1, iterations=max(1, int(runs)), cancel=cancel,
                                 on_run=read_counters)
            seconds["runs_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            runtime = _runtime_nodes(compiled, set(names))
        finally:
            session.close()
        rows = [runtime.get(n, ("", ())) for n in names]
        seconds["end_profiling_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        kernels, nodes = _kernel_times(names, rows, readings, times_ms)
        seconds["parse_s"] = time.perf_counter() - t0
        return ProfiledPass(kernels=kernels, nodes=nodes, initializers=set(), seconds=seconds)

    def quantize_int8(self, model_path, out_path, calibration, *, per_channel: bool = True,
                      excluded_nodes: Sequence[str] = (), progress: Optional[ProgressFn] = None,
                      cancel: Optional[CancelToken] = None, calibration_method: str = "minmax",
                      reuse_dir=None) -> QuantizationResult:
        """The QDQ model of :func:`sparsify_tui.engine.ort_quant.quantize_int8` with QInt8 activations (S8S8)."""
        from sparsify_tui.engine.ort_quant import quantize_int8

        return quantize_int8(model_path, out_path, calibration, per_channel=per_channel,
                             excluded_nodes=excluded_nodes, progress=progress, cancel=cancel,
                             calibration_method=calibration_method, reuse_dir=reuse_dir, activation_type="QInt8")

    def quantize_dynamic_int8(self, model_path, out_path, *, cancel: Optional[CancelToken] = None
                              ) -> QuantizationResult:
        """onnxruntime's dynamic INT8 file (:func:`sparsify_tui.engine.ort_quant.quantize_dynamic_int8`): OpenVINO
        reads its ``DynamicQuantizeLinear`` + ``MatMulInteger`` nodes and runs them (checked against onnxruntime on
        a MatMul stack, ``tests/test_openvino.py``)."""
        from sparsify_tui.engine.ort_quant import quantize_dynamic_int8

        return quantize_dynamic_int8(model_path, out_path, cancel=cancel)

    def int8_graph(self, model_path, reuse_dir) -> Path:
        from sparsify_tui.engine.ort_quant import int8_graph

        return int8_graph(model_path, reuse_dir)

    def deployment_code(self, model_path: str, core_count: Optional[int] = None) -> str:
        """The compile configuration sparsify-tui measured with (:meth:`config`), as a script that compiles the model
        for the input shapes of each feed, as the sessions do. Needs no openvino here (the version is named when
        installed)."""
        threads = str(int(core_count)) if core_count else "len(os.sched_getaffinity(0))  # every core this process may use"
        version = "" if self.available() else f" {self.version}"
        hint = PRECISION_HINTS[self.precision]
        return f'''"""Run {Path(model_path).name} as sparsify-tui measured it: OpenVINO{version}, CPU, {self.precision}."""
import os

import numpy as np
import openvino as ov

PATH = {str(model_path)!r}
CONFIG = {{
    "INFERENCE_PRECISION_HINT": "{hint}",  # always explicit: OpenVINO runs bf16 by default on a CPU with BF16
    "INFERENCE_NUM_THREADS": {threads},
    "NUM_STREAMS": 1,
    "PERFORMANCE_HINT": "LATENCY",
}}
core = ov.Core()
_requests = {{}}  # input shapes -> an infer request compiled for them (static shapes run fastest)


def infer(feed: dict) -> list:
    """``feed``: {{input name: np.ndarray}} -> the outputs, in the model's output order."""
    key = tuple(sorted((name, np.shape(value)) for name, value in feed.items()))
    request = _requests.get(key)
    if request is None:
        model = core.read_model(PATH)
        if model.is_dynamic():
            model.reshape({{name: list(np.shape(value)) for name, value in feed.items()}})
        request = _requests[key] = core.compile_model(model, "CPU", CONFIG).create_infer_request()
    return list(request.infer(feed).to_tuple())


if __name__ == "__main__":
    feed = {{i.get_any_name(): np.zeros([d.get_length() if d.is_static else 1 for d in i.get_partial_shape()],
                                        np.float32) for i in core.read_model(PATH).inputs}}
    print([o.shape for o in infer(feed)])
'''


def _runtime_nodes(compiled, names: set) -> dict:
    """``{runtime node name: (layer type, original node names)}`` of the runtime model's nodes named ``names``
    (rt_info ``layerType``, ``originalLayersNames``, the frontend's suffixes removed)."""
    out = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        name = op.get_friendly_name()
        if name not in names:
            continue
        rt = op.get_rt_info()
        layer = rt["layerType"].astype(str) if "layerType" in rt else ""
        origins = rt["originalLayersNames"].astype(str) if "originalLayersNames" in rt else ""
        out[name] = (layer, tuple(dict.fromkeys(_origin_name(o) for o in origins.split(",") if o)))
    return out


def _kernel_times(names: list, rows: list, readings: list, runs_ms: list) -> tuple:
    """``(KernelTimes, RuntimeNode list)`` from the cumulative-mean counters (module docstring).

    ``readings[n]``: each kernel's ``real_time`` (a ``timedelta``, the mean over the ``n + 1`` runs so far, whole µs)
    after run ``n`` (run 0 is the warm-up); ``runs_ms``: each counted run's whole-run time (ms, the timing loop's);
    ``rows``: each kernel's (layer type, original names)."""
    from sparsify_tui.analysis.graph import UniqueKeys  # (imports onnx: not when the package is imported)

    us = [[td.days * 86_400e6 + td.seconds * 1e6 + td.microseconds for td in reading] for reading in readings]
    # totals since compile after each run (µs): n runs x their running mean
    totals = [[v * (n + 1) for v in reading] for n, reading in enumerate(us)]
    counted = len(runs_ms)
    out = KernelTimes()
    keys = UniqueKeys()
    nodes = []
    runs_ms = [float(t) for t in runs_ms]
    median_run = statistics.median(runs_ms) if runs_ms else 0.0
    slow = [r for r, t in enumerate(runs_ms) if t > SLOW_RUN * median_run]
    kept = counted - len(slow)
    for k, (name, (layer, origins)) in enumerate(zip(names, rows)):
        key = keys(name)
        out.order.append(key)
        out.op_type[key] = layer
        nodes.append(RuntimeNode(id=key, name=name, op_type=layer, inputs=[], outputs=[], origins=origins,
                                 layout=layer in LAYOUT_LAYERS))
        total = max(totals[-1][k] - totals[0][k], 0.0)
        out.ms[key] = total / counted / 1000.0
        # the runs another process slowed: their counter increments (run r is reading r + 1) taken out
        slowed = sum(max(totals[r + 1][k] - totals[r][k], 0.0) for r in slow)
        out.median_ms[key] = max(total - slowed, 0.0) / kept / 1000.0 if kept else out.ms[key]
    out.runs = counted
    out.run_ms = sum(runs_ms) / counted if counted else 0.0
    out.runs_ms = runs_ms
    return out, nodes
