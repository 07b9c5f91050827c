"""The engine seam: the one package that touches a runtime (onnxruntime) or rewrites a graph.

Profiling, benchmarks and apply obtain their runtime here, by name::

    from sparsify_tui.engine import get_engine
    engine = get_engine()                       # "onnxruntime", the default
    with engine.open_session(path, cores) as session:
        times_ms = time_runs(session, feeds, warmup=5, iterations=30)

Modules: :mod:`~sparsify_tui.engine.base` (the :class:`Engine` / :class:`Session` interface and its neutral
results), :mod:`~sparsify_tui.engine.timing` (the one timing loop and the latency statistics, p90
included), :mod:`~sparsify_tui.engine.ort` (onnxruntime: sessions, profiled pass, trace parsing),
:mod:`~sparsify_tui.engine.openvino` (OpenVINO's CPU plugin: sessions per precision, ``PERF_COUNT`` profiled
pass, S8S8 QDQ INT8), :mod:`~sparsify_tui.engine.ort_quant` (INT8 with ``onnxruntime.quantization``, the
activation type each engine asks for),
:mod:`~sparsify_tui.engine.weights` (weight get/set, writing models, in-memory weights) and
:mod:`~sparsify_tui.engine.pruning` (magnitude pruning).

**Adding a runtime**: write ``engine/<name>.py`` with an :class:`Engine` subclass and its :class:`Session`
(``engine/openvino.py`` is one), and add one line to :data:`ENGINES`. Nothing else changes: every core entry
point takes an ``engine`` name. Importing this package does not import a runtime.
"""

from __future__ import annotations

from typing import Optional, Union

from sparsify_tui.engine.base import (  # noqa: F401
    PRECISIONS, Engine, KernelTimes, ProfiledPass, QuantizationResult, RuntimeNode, Session)
from sparsify_tui.engine.openvino import OpenVinoEngine
from sparsify_tui.engine.ort import OnnxRuntimeEngine
from sparsify_tui.errors import SparsifyError

#: name -> Engine subclass. One line per runtime.
ENGINES: dict[str, type] = {
    "onnxruntime": OnnxRuntimeEngine,
    "openvino": OpenVinoEngine,
}
#: the engine used when none is named
DEFAULT_ENGINE = "onnxruntime"

_instances: dict[tuple, Engine] = {}


def get_engine(engine: Union[str, Engine, None] = None, precision: Optional[str] = None) -> Engine:
    """The engine registered as ``engine`` (default :data:`DEFAULT_ENGINE`) bound to ``precision`` (default
    ``"fp32"``; an :class:`Engine` instance is returned as is when no other precision is asked). One instance
    per (name, precision). Raises ``SparsifyError`` (one line) for an unknown name, a runtime that is not
    installed, or a precision the engine cannot run on this CPU."""
    if isinstance(engine, Engine):
        if precision is None or precision == engine.precision:
            return engine
        engine = engine.name
    name = engine or DEFAULT_ENGINE
    cls = ENGINES.get(name)
    if cls is None:
        raise SparsifyError(f"unknown engine {name!r}: use one of {', '.join(sorted(ENGINES))}")
    precision = precision or "fp32"
    if precision not in PRECISIONS:
        raise SparsifyError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    inst = _instances.get((name, precision))
    if inst is None or type(inst) is not cls:
        missing = cls.available()
        if missing:
            raise SparsifyError(missing)
        inst = cls(precision="fp32")
        if precision != "fp32":
            problem = inst.precision_problem(precision)
            if problem:
                raise SparsifyError(problem)
            inst = cls(precision=precision)
        _instances[(name, precision)] = inst
    return inst


def installed_engines() -> list[str]:
    """The registered engines whose runtime is installed here, :data:`DEFAULT_ENGINE` first."""
    return [n for n in sorted(ENGINES, key=lambda n: (n != DEFAULT_ENGINE, n)) if ENGINES[n].available() is None]


def runtime_versions() -> dict:
    """``{display name: version}`` of every installed engine, :data:`DEFAULT_ENGINE` first (a report's machine)."""
    return {ENGINES[n].display_name or n: get_engine(n).version for n in installed_engines()}


def system_info(engine: Union[str, Engine, None] = None):
    """This machine with the engine's version and providers: the one system description stored with
    perf profiles and benchmarks and shown by ``analyze`` (:class:`sparsify_tui.analysis.system.SystemInfo`)."""
    return get_engine(engine).system_info()
