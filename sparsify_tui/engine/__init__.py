"""The engine seam: the one package that touches a runtime (onnxruntime) or rewrites a graph.

Profiling, benchmarks and apply obtain their runtime here, by name::

    from sparsify_tui.engine import get_engine
    engine = get_engine()                       # "onnxruntime", the default
    with engine.open_session(path, cores) as session:
        times_ms = time_runs(session, feeds, warmup=5, iterations=30)

Modules: :mod:`~sparsify_tui.engine.base` (the :class:`Engine` / :class:`Session` interface and its neutral
results), :mod:`~sparsify_tui.engine.timing` (the one timing loop and the latency statistics, p90
included), :mod:`~sparsify_tui.engine.ort` (onnxruntime: sessions, profiled pass, trace parsing),
:mod:`~sparsify_tui.engine.ort_quant` (INT8 with ``onnxruntime.quantization``),
:mod:`~sparsify_tui.engine.weights` (weight get/set, writing models, in-memory weights) and
:mod:`~sparsify_tui.engine.pruning` (magnitude pruning).

**Adding a runtime** (OpenVINO, say): write ``engine/openvino.py`` with an :class:`Engine` subclass and its
:class:`Session`, and add one line to :data:`ENGINES`. Nothing else changes: every core entry point takes
an ``engine`` name. Importing this package does not import a runtime.
"""

from __future__ import annotations

from typing import Union

from sparsify_tui.engine.base import Engine, KernelTimes, ProfiledPass, QuantizationResult, Session  # noqa: F401
from sparsify_tui.engine.ort import OnnxRuntimeEngine
from sparsify_tui.errors import SparsifyError

#: name -> Engine subclass. One line per runtime.
ENGINES: dict[str, type] = {
    "onnxruntime": OnnxRuntimeEngine,
}
#: the engine used when none is named
DEFAULT_ENGINE = "onnxruntime"

_instances: dict[str, Engine] = {}


def get_engine(engine: Union[str, Engine, None] = None) -> Engine:
    """The engine registered as ``engine`` (default :data:`DEFAULT_ENGINE`); an :class:`Engine` instance is
    returned as is. One instance per name. Raises ``SparsifyError`` for an unknown name."""
    if isinstance(engine, Engine):
        return engine
    name = engine or DEFAULT_ENGINE
    cls = ENGINES.get(name)
    if cls is None:
        raise SparsifyError(f"unknown engine {name!r}: use one of {', '.join(sorted(ENGINES))}")
    inst = _instances.get(name)
    if inst is None or type(inst) is not cls:
        inst = _instances[name] = cls()
    return inst


def system_info(engine: Union[str, Engine, None] = None):
    """This machine with the engine's version and providers: the one system description stored with
    perf profiles and benchmarks and shown by ``analyze`` (:class:`sparsify_tui.analysis.system.SystemInfo`)."""
    return get_engine(engine).system_info()
