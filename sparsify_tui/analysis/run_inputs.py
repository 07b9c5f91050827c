"""What a measuring run is fed, checked before anything runs (:func:`check_run_inputs`): the model's inputs, their
shapes and memory (:mod:`sparsify_tui.analysis.inputs`, :mod:`sparsify_tui.analysis.shapes`) and the sample data
with its labels (:mod:`sparsify_tui.analysis.labels`). Every job checks its inputs here before its record exists."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from sparsify_tui.analysis.inputs import (
    CLASS_NAMES_KEY, InputSpec, check_sample_data, check_scalar_values, input_specs, inspect_sample_data,
)
from sparsify_tui.analysis.labels import check_label_rows, check_labels, check_outputs_fit, split_labels
from sparsify_tui.errors import SampleDataError


def check_run_inputs(model_path: Union[str, os.PathLike], batch_size: int = 1, dims: Optional[dict] = None,
                     data: Optional[Union[str, os.PathLike]] = None, batches: int = 1,
                     labels_key: Optional[str] = None, metric: Optional[str] = None,
                     scores_outputs: bool = False, user_dims: Optional[dict] = None,
                     data_batches: Optional[int] = None, finite: bool = False) -> list[InputSpec]:
    """Everything about a run's inputs that can be refused before anything runs, is allocated or is recorded:
    the model loads (``load_model`` without weights: external-data locations, tensor sizes, input types),
    every ``dims`` name exists in the model and every symbolic dim has a value >= 1, one batch fits in the
    memory available, onnx's strict shape check passes at these shapes (what onnxruntime checks when it
    loads the model: :func:`sparsify_tui.analysis.shapes.check_shapes`), and the sample data ``data`` (headers only, :func:`~sparsify_tui.analysis.inputs.check_sample_data`) matches the
    inputs, or else every scalar input has a value; ``batches`` synthetic batches kept together must fit in
    memory too. The labels array of ``data`` (``labels_key``, default ``labels`` when present,
    :mod:`sparsify_tui.analysis.labels`) is not an input: it is validated as labels (one row per item; class
    indices for a run that scores outputs with a built-in metric). ``scores_outputs``: the run
    scores the outputs (apply, benchmark, INT8 search), so the labels and ``metric`` (``--metric``, None for the
    default) are checked against the model's declared outputs too
    (:func:`sparsify_tui.analysis.labels.check_outputs_fit`: labels or top1/kl need a class-score output, labels
    below its class count). ``user_dims``: the dims the user typed for this run (a part of ``dims``): one
    naming a batch dim is refused (:func:`sparsify_tui.analysis.shapes.check_user_dims`). The sample data items the run
    reads (its first ``data_batches`` batches, or all) must fit the job's memory limit, and are read once now so a
    damaged stream is refused before a job is recorded; with ``finite`` (the data calibrates INT8) they must hold
    no NaN/Inf (:func:`~sparsify_tui.analysis.inputs.check_sample_data`). Returns the input specs.

    Raises:
        ModelError, DimensionError, SampleDataError: one line each.
    """
    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.analysis.shapes import check_shapes, check_user_dims

    model = load_model(model_path, load_external_data=False)
    check_user_dims(model, user_dims)
    specs = input_specs(model, batch_size=batch_size, dims=dims or {}, base_dir=Path(model_path).parent)
    check_shapes(model, batch_size, dims)
    if batches > 1 and not data:
        from sparsify_tui.analysis.shapes import check_input_memory, input_shapes

        check_input_memory(model, input_shapes(model, batch_size, dims), batches=batches)
    labels, key = None, None
    if data:
        raw, key = split_labels(data, labels_key) if not any(s.name == (labels_key or "labels") for s in specs) \
            else (None, None)
        batches_given = check_sample_data(data, specs, batch_size, ignore=(key,) if key else (),
                                          max_batches=data_batches, verify=True, finite=finite)
        if raw is not None:
            items = next((int(shape[0]) for name, (shape, _dt) in inspect_sample_data(data).items()
                          if name not in (key, CLASS_NAMES_KEY) and len(shape)), batches_given * batch_size)
            # labels matter to a run that scores outputs; any other run (perf, loss) only needs one row per item
            labels = check_labels(raw, items, key, metric=metric) if scores_outputs else \
                check_label_rows(raw, items, key)
    else:
        if labels_key:
            raise SampleDataError(f"--labels {labels_key} needs --data FILE.npz holding the inputs and the labels")
        check_scalar_values(specs, dims)
    if scores_outputs:
        check_outputs_fit(model, metric=metric, labels=labels, key=key)
    return specs
