"""The one entry point of loss profiles (:func:`profile_loss`): the method (approximated, magnitude, one-shot;
:mod:`sparsify_tui.profiling.loss`, :mod:`sparsify_tui.profiling.loss_oneshot`) and the structure (per layer, or per
channel group: :mod:`sparsify_tui.profiling.loss_channel`), with the one check of their arguments
(:func:`check_loss_arguments`) that the job settings use too."""

from __future__ import annotations

import time
from typing import Optional

from sparsify_tui.engine.run import REFERENCE, RunSpec
from sparsify_tui.errors import SparsifyError
from sparsify_tui.profiling.loss import (
    APPROX_LEVELS, METHODS, ONE_SHOT_LEVELS, LossProfile, _check_levels, approximated_profile, magnitude_profile,
)
from sparsify_tui.profiling.loss_channel import channel_profile
from sparsify_tui.profiling.loss_oneshot import one_shot_profile

STRUCTURES = ("unstructured", "channel")
"""What a loss profile's rows are: layers, or channel groups."""
METRICS = (None, "auto", "kl", "nmse")


def check_loss_arguments(method: str, metric: Optional[str] = None, structure: str = "unstructured",
                         int8: bool = False, flags: Optional[dict] = None) -> None:
    """Refuse a loss profile's arguments that do not go together: an unknown method, metric or structure; INT8
    sensitivity of channel groups (it is measured per layer); an approximated channel profile. ``flags``: how the
    caller names the arguments (``method``, ``metric``, ``structure``, ``int8``; default the CLI's). Raises
    ``SparsifyError`` (one line)."""
    f = {"method": "--method", "metric": "--metric", "structure": "--structure", "int8": "--int8", **(flags or {})}
    if method not in METHODS:
        raise SparsifyError(f"unknown loss {f['method']} {method!r}: use one of {', '.join(METHODS)}")
    from sparsify_tui.settings import is_user_metric

    if is_user_metric(metric):
        raise SparsifyError(f"{f['metric']} {metric}: a metric of your own scores whole models (optimize's searches, "
                            "apply, benchmark); a loss profile ranks each layer by how far the outputs move: use kl, "
                            "nmse or auto")
    if metric not in METRICS:
        raise SparsifyError(f"unknown {f['metric']} {metric!r}: use kl, nmse or auto")
    if structure not in STRUCTURES:
        raise SparsifyError(f"{f['structure']} {structure!r} is not allowed: {f['structure']} must be unstructured "
                            "or channel")
    if structure == "channel" and int8:
        raise SparsifyError(f"INT8 sensitivity is measured per layer: drop {f['int8']} or use {f['structure']} "
                            "unstructured")
    if structure == "channel" and method == "approximated":
        raise SparsifyError(f"channel loss profiles are magnitude or one-shot: use {f['method']} magnitude or "
                            "one-shot")


def profile_loss(
    model_path,
    run: RunSpec = REFERENCE,
    *,
    method: str = "magnitude",
    levels=None,
    data=None,
    batches: int = 2,
    dims=None,
    int8: bool = False,
    metric: Optional[str] = None,
    name: str = "baseline",
    progress=None,
    cancel=None,
    structure: str = "unstructured",
) -> LossProfile:
    """Loss profile of the model at ``model_path`` with ``method`` (module docstring).

    ``structure="channel"``: rows are channel groups and levels fractions of channels removed
    (:func:`sparsify_tui.profiling.loss_channel.channel_profile`; magnitude or one-shot, no INT8).

    ``run``: the runtime (engine, precision) of the one-shot sessions, the batch size (items per batch) and the cores
    (:class:`~sparsify_tui.engine.run.RunSpec`; default onnxruntime fp32, batch 1, every core); ``data``: an
    ``.npz``/``.npy`` sample-data path (one-shot only; synthetic data otherwise), split in batches of the run's batch
    size; ``batches``: how many batches are run per measurement; ``dims``: values of symbolic input dims. The
    profile's ``settings`` record the run spec. Raises ``ModelError``, ``DimensionError``, ``SampleDataError`` (one line)
    and ``JobCanceled`` when ``cancel`` is triggered. The model file is never modified.
    """
    check_loss_arguments(method, metric, structure, int8)
    from sparsify_tui.engine import get_engine

    engine, batch_size, core_count = run.runtime(), run.batch_size, run.core_count
    recorded = {"batch_size": batch_size, "dims": dict(dims or {}), "engine": run.engine, "precision": run.precision,
                "engine_version": engine.version}
    if structure == "channel":
        prof = channel_profile(model_path, method=method, levels=levels, data=data, batches=batches,
                               batch_size=batch_size, dims=dims, metric=metric, name=name, core_count=core_count,
                               engine=engine, progress=progress, cancel=cancel)
        prof.settings.update(recorded)
        return prof
    if method == "magnitude":
        prof = magnitude_profile(model_path, levels=levels, int8=int8, name=name, progress=progress, cancel=cancel)
    elif method == "approximated":
        from sparsify_tui.analysis.nodes import analyze_model

        t0 = time.perf_counter()
        prof = approximated_profile(
            analyze_model(str(model_path), batch_size=batch_size, dims=dims or {}, include_system=False,
                          engine=get_engine()), name=name,
            levels=APPROX_LEVELS if levels is None else levels,
        )
        prof.seconds = time.perf_counter() - t0
    else:
        prof = one_shot_profile(
            model_path, levels=ONE_SHOT_LEVELS if levels is None else _check_levels(levels), data=data,
            batches=batches, batch_size=batch_size, dims=dims, int8=int8, metric=metric, name=name,
            core_count=core_count, engine=engine, progress=progress, cancel=cancel,
        )
    prof.settings.update(recorded)
    return prof
