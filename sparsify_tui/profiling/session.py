"""onnxruntime sessions configured as deployed (DESIGN.md, Measuring).

CPUExecutionProvider, ``graph_optimization_level = ORT_ENABLE_ALL``, ``intra_op_num_threads = core
count``, ``inter_op_num_threads = 1``, sequential execution. Keep one live session at a time while
timing: an idle session's spinning threads steal cores from the one being measured.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

import onnxruntime as ort


def available_cores() -> int:
    """Cores this process may use (its CPU affinity), falling back to ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def session_options(
    core_count: Optional[int] = None,
    *,
    profiling: bool = False,
    profile_prefix: Optional[str] = None,
    optimized_model_path: Optional[Union[str, Path]] = None,
    graph_optimization: "ort.GraphOptimizationLevel" = ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
) -> ort.SessionOptions:
    """SessionOptions per DESIGN.md. ``core_count`` None means every core this process may use."""
    so = ort.SessionOptions()
    so.graph_optimization_level = graph_optimization
    so.intra_op_num_threads = int(core_count or available_cores())
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    if profiling:
        so.enable_profiling = True
        if profile_prefix:
            so.profile_file_prefix = str(profile_prefix)
    if optimized_model_path is not None:
        so.optimized_model_filepath = str(optimized_model_path)
    return so


def make_session(
    model: Union[str, Path, bytes],
    core_count: Optional[int] = None,
    *,
    external_initializers: Optional[dict] = None,
    **kwargs,
) -> ort.InferenceSession:
    """An ``InferenceSession`` on CPUExecutionProvider with :func:`session_options` (kwargs pass through).

    ``model`` is a path (external data is resolved relative to it) or serialized model bytes.
    ``external_initializers``: ``{name: numpy array}`` handed to onnxruntime in memory
    (``SessionOptions.add_external_initializers``, no copy, no protobuf round trip) for initializers the
    model holds as data-less placeholders (see ``profiling.loss_oneshot.strip_initializers``). The arrays
    are kept alive on the session (``session._external_initializers``) for its lifetime.
    """
    so = session_options(core_count, **kwargs)
    values = []
    if external_initializers:
        import numpy as np

        names = list(external_initializers)
        values = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(external_initializers[n])) for n in names]
        so.add_external_initializers(names, values)
    src = str(model) if isinstance(model, Path) else model
    sess = ort.InferenceSession(src, sess_options=so, providers=["CPUExecutionProvider"])
    if values:
        sess._external_initializers = values
    return sess
