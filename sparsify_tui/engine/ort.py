"""The onnxruntime engine: CPUExecutionProvider sessions configured as deployed (docs/design.md, Measuring).

Sessions: ``graph_optimization_level = ORT_ENABLE_ALL``, ``intra_op_num_threads = core count``,
``inter_op_num_threads = 1``, sequential execution, warnings off. A cancel sets ``RunOptions.terminate``
on every runner built with the token (registered through :meth:`CancelToken.on_cancel`), which makes a
running ``session.run`` return with an error within milliseconds.

Profiled pass: a session with ``enable_profiling`` that also saves its optimized graph
(``optimized_model_filepath``); the profiler writes one ``<node>_kernel_time`` event per executed kernel
(:func:`parse_trace`). onnxruntime imports only when a session, a profile or a quantization is asked for,
so ``import sparsify_tui.engine`` stays cheap.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from sparsify_tui.engine.base import Engine, KernelTimes, ModelSource, ProfiledPass, QuantizationResult, Session
from sparsify_tui.errors import ModelError
from sparsify_tui.progress import CancelToken, ProgressFn


def _ort():
    import onnxruntime

    return onnxruntime


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return (lines[0] if lines else type(err).__name__)[:300]


def session_options(core_count: Optional[int] = None, *, profiling: bool = False,
                    profile_prefix: Optional[str] = None, optimized_model_path: Optional[Union[str, Path]] = None):
    """``onnxruntime.SessionOptions`` per the module docstring. ``core_count`` None means every core this
    process may use."""
    from sparsify_tui.settings import available_cores

    ort = _ort()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = int(core_count or available_cores())
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 4  # fatal only: a failed run's error comes back as its exception (one line), not a log line too
    if profiling:
        so.enable_profiling = True
        if profile_prefix:
            so.profile_file_prefix = str(profile_prefix)
    if optimized_model_path is not None:
        so.optimized_model_filepath = str(optimized_model_path)
    return so


class OrtSession(Session):
    """An ``onnxruntime.InferenceSession`` (``native``) behind the engine :class:`Session` interface."""

    def __init__(self, native, keep_alive: Sequence = ()):
        self.native = native
        self.input_names = [i.name for i in native.get_inputs()]
        self.output_names = [o.name for o in native.get_outputs()]
        self._keep_alive = list(keep_alive)  # OrtValues of external initializers, alive as long as the session

    def runner(self, outputs: Optional[Sequence[str]] = None, cancel: Optional[CancelToken] = None):
        names = list(outputs) if outputs is not None else list(self.output_names)
        ro = None
        if cancel is not None:
            ro = _ort().RunOptions()
            cancel.on_cancel(functools.partial(setattr, ro, "terminate", True))

        # positional arguments bound as defaults: as cheap as calling session.run directly (a partial with
        # a keyword copies a dict per call, ~0.5 µs)
        def run(feed, _run=self.native.run, _names=names, _ro=ro):
            return _run(_names, feed, _ro)
        return run

    def close(self) -> None:
        self.native = None
        self._keep_alive = []


def _load_error(model: ModelSource, err: BaseException) -> ModelError:
    name = Path(model).name if isinstance(model, (str, Path)) else "the model"
    return ModelError(f"onnxruntime cannot load {name} ({_first_line(err)}): check that the model runs in onnxruntime")


class OnnxRuntimeEngine(Engine):
    """onnxruntime on the CPU execution provider (module docstring)."""

    name = "onnxruntime"
    display_name = "onnxruntime"
    description = "onnxruntime CPUExecutionProvider, ORT_ENABLE_ALL, intra_op=cores, inter_op=1"
    quantization_method = ("onnxruntime.quantization quantize_static: QDQ, per-channel, MinMax, QInt8 weights, "
                           "QUInt8 activations, after quant_pre_process")

    @property
    def version(self) -> str:
        return _ort().__version__

    def providers(self) -> list[str]:
        return list(_ort().get_available_providers())

    def precision_problem(self, precision: str) -> Optional[str]:
        if precision == "fp32":
            return None
        return f"onnxruntime's CPU provider runs fp32 sessions only, not {precision}: use --precision fp32"

    def settings(self, core_count: int) -> dict:
        return {
            "provider": "CPUExecutionProvider",
            "graph_optimization_level": "ORT_ENABLE_ALL",
            "intra_op_num_threads": int(core_count),
            "inter_op_num_threads": 1,
            "execution_mode": "ORT_SEQUENTIAL",
            "precision": self.precision,
        }

    def open_session(self, model: ModelSource, core_count: Optional[int] = None, *,
                     external_initializers: Optional[dict] = None) -> OrtSession:
        so = session_options(core_count)
        values = []
        if external_initializers:
            import numpy as np

            names = list(external_initializers)
            values = [_ort().OrtValue.ortvalue_from_numpy(np.ascontiguousarray(external_initializers[n]))
                      for n in names]
            so.add_external_initializers(names, values)
        src = str(model) if isinstance(model, Path) else model
        try:
            native = _ort().InferenceSession(src, sess_options=so, providers=["CPUExecutionProvider"])
        except Exception as err:
            raise _load_error(model, err) from err
        return OrtSession(native, values)

    def profile(self, model_path: Union[str, Path], feeds: Sequence[Mapping[str, Any]], core_count: int, *,
                runs: int, workdir: Path, tag: str = "model", cancel: Optional[CancelToken] = None,
                on_run: Optional[Callable[[int, int], None]] = None) -> ProfiledPass:
        """See :meth:`Engine.profile`. The optimized graph is all attribution needs, not its weights: they
        are written as external data to ``<workdir>/<tag>_weights.bin``, a symlink to ``/dev/null``
        (saves ~0.15 s CPU on ResNet-50 against writing and re-reading 100 MB; a real temp file where
        symlinks are unavailable)."""
        import onnx

        from sparsify_tui.analysis.graph import graph_nodes
        from sparsify_tui.engine.timing import time_runs

        workdir = Path(workdir)
        opt_path = workdir / f"{tag}_optimized.onnx"
        seconds = {"session_s": 0.0, "runs_s": 0.0, "end_profiling_s": 0.0, "parse_s": 0.0}
        so = session_options(core_count, profiling=True, profile_prefix=str(workdir / f"{tag}_trace"),
                             optimized_model_path=str(opt_path))
        weights = f"{tag}_weights.bin"
        try:
            os.symlink(os.devnull, workdir / weights)
        except OSError:
            pass
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name", weights)
        so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "64")
        t0 = time.perf_counter()
        try:
            native = _ort().InferenceSession(str(model_path), sess_options=so, providers=["CPUExecutionProvider"])
        except Exception as err:
            raise _load_error(model_path, err) from err
        seconds["session_s"] = time.perf_counter() - t0
        session = OrtSession(native)
        try:
            t0 = time.perf_counter()
            time_runs(session, feeds, warmup=1, iterations=runs, cancel=cancel, on_run=on_run)
            seconds["runs_s"] = time.perf_counter() - t0
        finally:
            t0 = time.perf_counter()
            trace = native.end_profiling()
            session.close()
            del native
            seconds["end_profiling_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        kernels = parse_trace(trace, skip_runs=1)
        try:
            os.unlink(trace)
        except OSError:
            pass
        opt_model = onnx.load(str(opt_path), load_external_data=False)
        nodes, inits = graph_nodes(opt_model, with_initializers=True)
        del opt_model
        seconds["parse_s"] = time.perf_counter() - t0
        return ProfiledPass(kernels=kernels, nodes=nodes, initializers=inits, seconds=seconds)

    def quantize_int8(self, model_path, out_path, calibration, *, per_channel: bool = True,
                      excluded_nodes: Sequence[str] = (), progress: Optional[ProgressFn] = None,
                      cancel: Optional[CancelToken] = None, calibration_method: str = "minmax",
                      reuse_dir=None) -> QuantizationResult:
        from sparsify_tui.engine.ort_quant import quantize_int8

        return quantize_int8(model_path, out_path, calibration, per_channel=per_channel,
                             excluded_nodes=excluded_nodes, progress=progress, cancel=cancel,
                             calibration_method=calibration_method, reuse_dir=reuse_dir, activation_type="QUInt8")

    def deployment_code(self, model_path: str, core_count: Optional[int] = None) -> str:
        """The session options sparsify-tui measured with (:func:`session_options`), as a script."""
        threads = str(int(core_count)) if core_count else "len(os.sched_getaffinity(0))  # every core this process may use"
        return f'''"""Run {Path(model_path).name} as sparsify-tui measured it: onnxruntime {self.version}, CPU, {self.precision}."""
import os

import numpy as np
import onnxruntime as ort

so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.intra_op_num_threads = {threads}
so.inter_op_num_threads = 1
so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
session = ort.InferenceSession({str(model_path)!r}, sess_options=so, providers=["CPUExecutionProvider"])


def infer(feed: dict) -> list:
    """``feed``: {{input name: np.ndarray}} -> the outputs, in the model's output order."""
    return session.run(None, feed)


if __name__ == "__main__":
    feed = {{i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
            for i in session.get_inputs()}}
    print([o.shape for o in infer(feed)])
'''

    def quantize_dynamic_int8(self, model_path, out_path, *, cancel: Optional[CancelToken] = None
                              ) -> QuantizationResult:
        from sparsify_tui.engine.ort_quant import quantize_dynamic_int8

        return quantize_dynamic_int8(model_path, out_path, cancel=cancel)

    def int8_graph(self, model_path, reuse_dir) -> Path:
        from sparsify_tui.engine.ort_quant import int8_graph

        return int8_graph(model_path, reuse_dir)

    def infer_shapes(self, model) -> Any:
        """onnxruntime's ``SymbolicShapeInference`` (contrib ops, more data-dependent shapes); needs sympy,
        which sparsify-tui does not install: without it this raises ImportError and callers skip it."""
        import contextlib
        import io

        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return SymbolicShapeInference.infer_shapes(model, int_max=2**31 - 1, auto_merge=True,
                                                       guess_output_rank=False)


# --------------------------------------------------------------------------- trace parsing
def parse_trace(trace: Union[str, Path, list, dict], skip_runs: int = 0) -> KernelTimes:
    """Parse an onnxruntime profiling JSON (a list of Chrome-trace events, or ``{"traceEvents": [...]}``).

    Node events are ``{"cat": "Node", "name": "<node>_kernel_time", "ts": µs, "dur": µs,
    "args": {"op_name": ...}}``; runs are the ``{"cat": "Session", "name": "model_run"}`` events.
    The first ``skip_runs`` runs (warm-up) are ignored. Times are converted to ms per run. Control-flow
    kernels (If/Loop/Scan) enclose the kernels of their subgraphs: nested events are subtracted from the
    enclosing one, so nothing is counted twice.
    """
    from sparsify_tui.analysis.graph import UniqueKeys  # (imports onnx: not when the package is imported)

    if isinstance(trace, (str, Path)):
        with open(trace, "r", encoding="utf-8") as fh:
            trace = json.load(fh)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    runs = sorted((int(e["ts"]), int(e["ts"]) + int(e.get("dur", 0))) for e in events
                  if e.get("cat") == "Session" and e.get("name") == "model_run")
    kernels = sorted((e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")),
                     key=lambda e: (int(e["ts"]), -int(e.get("dur", 0))))
    out = KernelTimes()
    marked = bool(runs)
    if not runs:  # no run markers: treat the whole trace as one run
        runs = [(min((int(e["ts"]) for e in kernels), default=0), 1 << 62)]
    counted = runs[skip_runs:]
    if not counted:
        return out
    totals: dict = defaultdict(float)
    per_run: list = []  # {key: ms} of each counted run
    ri = 0
    for run_start, run_end in counted:
        in_run = [e for e in kernels if run_start <= int(e["ts"]) <= run_end]
        # exclusive time: subtract events nested inside an enclosing one (control-flow subgraphs)
        excl = [float(e.get("dur", 0)) for e in in_run]
        stack: list = []  # (end µs, index) of enclosing events
        for i, e in enumerate(in_run):
            ts, end = int(e["ts"]), int(e["ts"]) + int(e.get("dur", 0))
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack and end <= stack[-1][0]:
                excl[stack[-1][1]] -= float(e.get("dur", 0))
            stack.append((end, i))
        unique_key = UniqueKeys()
        this_run: dict = defaultdict(float)
        for e, us in zip(in_run, excl):
            key = unique_key(str(e["name"])[: -len("_kernel_time")])
            if key not in out.op_type:
                out.op_type[key] = (e.get("args") or {}).get("op_name", "")
                out.order.append(key)
            totals[key] += max(us, 0.0) / 1000.0
            this_run[key] += max(us, 0.0) / 1000.0
        per_run.append(this_run)
        ri += 1
    out.runs = ri
    out.ms = {k: totals[k] / ri for k in out.order}
    out.median_ms = {k: statistics.median([r.get(k, 0.0) for r in per_run]) for k in out.order}
    out.per_run = [dict(r) for r in per_run]
    out.run_ms = sum((b - a) for a, b in counted) / 1000.0 / ri
    out.runs_ms = [(b - a) / 1000.0 for a, b in counted] if marked else []
    return out
