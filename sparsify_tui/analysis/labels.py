"""Labels stored with the sample data: ``--data FILE.npz --labels KEY`` (default key ``labels``).

A labelled ``.npz`` holds one array per model input plus one integer array of class indices under the labels
key, one per item (shape ``(items,)`` or ``(items, 1)``), in the same item order as the inputs. The labels
array is not a model input: :func:`split_labels` takes it out before the inputs are validated by
:func:`sparsify_tui.analysis.inputs.load_sample_data` (called with ``ignore=(key,)``).

Validation is as strict as for the inputs (one line that names the problem and the fix, ``SampleDataError``):
a missing key that was asked for, a non-integer dtype, a wrong shape, a count different from the inputs' item
count, negative values, or values at or above the number of classes of the model's class output.

A metric of the user's own (``--metric FILE.py:FUNCTION``, :mod:`sparsify_tui.profiling.user_metric`) reads the
labels itself: they may be any array ``np.load`` reads without pickle (texts as code points padded with -1, boxes,
masks...) whose first axis is the items; only that count is checked (the functions here take ``metric=``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np

from sparsify_tui.analysis.inputs import DEFAULT_LABELS_KEY  # noqa: F401 - where labels are read from by default
from sparsify_tui.errors import SampleDataError
from sparsify_tui.formatting import plural
from sparsify_tui.settings import is_user_metric

#: calibration items taken from the sample data by default (at most half of them; the rest are held out)
DEFAULT_CALIBRATION_ITEMS = 64


def _keys(path: Union[str, os.PathLike]) -> dict:
    """``{key: (shape, dtype)}`` of an ``.npz`` from its headers (an ``.npy`` has no keys: empty dict), with
    the one-line checks of :func:`sparsify_tui.analysis.inputs.inspect_sample_data`. Raises ``SampleDataError``."""
    from sparsify_tui.analysis.inputs import inspect_sample_data

    headers = inspect_sample_data(path)
    return {} if None in headers else headers


def _read(path: Union[str, os.PathLike], key: str) -> np.ndarray:
    """The array ``key`` of an ``.npz`` whose headers :func:`_keys` checked."""
    with np.load(path, allow_pickle=False) as loaded:
        return loaded[key]


def split_labels(path: Union[str, os.PathLike], key: Optional[str] = None) -> tuple[Optional[np.ndarray], Optional[str]]:
    """``(labels, key)`` of the sample data at ``path``: the raw array under ``key`` (default
    :data:`DEFAULT_LABELS_KEY`), or ``(None, None)`` when the default key is absent (no labels: metrics
    compare with FP32). Raises ``SampleDataError`` when an explicitly given ``key`` is absent (the message lists
    the keys) or when labels are asked of an ``.npy`` file."""
    arrays = _keys(path)
    want = key or DEFAULT_LABELS_KEY
    if want in arrays:
        return _read(path, want), want
    if key is None:
        return None, None
    if not arrays:
        raise SampleDataError(f"--labels {key}: {Path(path).name} is a single .npy array with no keys: save inputs "
                              f"and labels in one .npz (numpy.savez(path, x=inputs, {key}=labels))")
    raise SampleDataError(f"--labels {key}: {Path(path).name} has no array {key!r} (it has {', '.join(sorted(arrays))}): "
                          "give the key of the labels array")


def check_label_rows(labels: np.ndarray, items: int, key: str) -> np.ndarray:
    """Labels of any kind (a user metric's, or of a run that does not score outputs): one row per input item
    (first axis = items), returned as they are. Raises ``SampleDataError`` (one line)."""
    a = np.asarray(labels)
    if a.ndim == 0 or len(a) != items:
        n = "a single value" if a.ndim == 0 else plural(len(a), "item")
        raise SampleDataError(f"labels {key!r} have {n} and the inputs {items}: give one row of labels per "
                              "input item, in the same order (first axis = items)")
    return a


def check_labels(labels: np.ndarray, items: int, key: str, classes: Optional[int] = None,
                 metric: Optional[str] = None) -> np.ndarray:
    """Validated labels: an int64 array ``(items,)`` of class indices.

    ``labels``: the raw array (``(items,)`` or ``(items, 1)``, any integer dtype); ``items``: the number of items
    of the inputs; ``classes``: the class count of the model's class output (values must be below it), None to
    skip that check. ``metric``: a user metric (``FILE.py:FUNCTION``) takes any labels whose first axis is the
    items, returned as they are. Raises ``SampleDataError`` (one line)."""
    a = np.asarray(labels)
    if is_user_metric(metric):
        return check_label_rows(a, items, key)
    if a.dtype.kind not in "iu":
        raise SampleDataError(f"labels {key!r} are {a.dtype.name}: save them as integer class indices "
                              "(e.g. labels.astype(numpy.int64)), or score them with a metric of your own "
                              "(--metric FILE.py:FUNCTION)")
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise SampleDataError(f"labels {key!r} have shape {list(a.shape)}: give one class index per item, "
                              f"shape [items] (not one-hot), or score them with a metric of your own "
                              "(--metric FILE.py:FUNCTION)")
    if len(a) != items:
        raise SampleDataError(f"labels {key!r} have {plural(len(a), 'item')} and the inputs {items}: give one label per input "
                              "item, in the same order")
    if len(a) and int(a.min()) < 0:
        raise SampleDataError(f"labels {key!r} contain {int(a.min())}: class indices start at 0 (padded labels need "
                              "a metric of your own, --metric FILE.py:FUNCTION)")
    if len(a) and int(a.max()) > np.iinfo(np.int64).max:  # uint64 beyond int64 (2**64-1 is not -1)
        raise SampleDataError(f"labels {key!r} contain {int(a.max())} ({a.dtype.name}), far above any class count: "
                              "give class indices 0..classes-1")
    if classes is not None and len(a) and int(a.max()) >= classes:
        raise SampleDataError(f"labels {key!r} contain {int(a.max())} but the model's class output has {classes} "
                              f"classes (0..{classes - 1}): check the labels match this model")
    return a.astype(np.int64)


# -- the model's outputs, as declared in the graph (before anything runs) -------------------------------------

_FLOAT_ELEM_TYPES = (1, 10, 11, 16)  # onnx TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16


def _shape_text(dims: list) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def labels_need_class_output(name: str, shape: str) -> str:
    """The one-line error when labels are given to a model with no class-score output (``shape``: its text)."""
    return (f"labels were given but no model output is class scores ([batch, classes]; '{name}' is {shape}): "
            "drop the labels or use --metric nmse")


def metric_needs_class_output(metric: str, name: str, shape: str) -> str:
    """The one-line error when ``--metric top1|kl`` is asked of a model with no class-score output."""
    return (f"--metric {metric} needs a class-score output [batch, classes] and '{name}' is {shape}: "
            "use --metric nmse or max_abs")


def declared_outputs(model) -> list[tuple[str, Optional[list]]]:
    """``(name, dims)`` of each float graph output of ``model`` (an ``onnx.ModelProto``), in graph order; a dim is
    an int or None (symbolic or unknown), ``dims`` None when the rank is not declared."""
    out = []
    for vi in model.graph.output:
        t = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or t.elem_type not in _FLOAT_ELEM_TYPES:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim] if t.HasField("shape") else None
        out.append((vi.name, dims))
    return out


def check_outputs_fit(model, *, metric: Optional[str] = None, labels: Optional[np.ndarray] = None,
                      key: Optional[str] = None) -> None:
    """Refuse, from the graph's declared outputs alone, what :func:`sparsify_tui.profiling.metrics.choose_metric`
    would refuse after running the model: ``labels`` (validated, see :func:`check_labels`) or ``metric`` "top1"/"kl"
    when no float output can be class scores (rank 2 with a last dim unknown or >= 2), and labels at or above the
    class count when the first such output declares it. Undeclared shapes pass (checked when the model runs). A user
    metric (``FILE.py:FUNCTION``) reads any outputs and labels: nothing to refuse here.
    Raises ``SampleDataError`` (one line)."""
    if is_user_metric(metric):
        return
    outs = declared_outputs(model)
    if not outs or any(d is None for _, d in outs):
        return
    cls = next(((n, d) for n, d in outs if len(d) == 2 and (d[1] is None or d[1] >= 2)), None)
    first_name, first = outs[0]
    if cls is None:
        if labels is not None:
            raise SampleDataError(labels_need_class_output(first_name, _shape_text(first)))
        if metric in ("top1", "kl"):
            raise SampleDataError(metric_needs_class_output(metric, first_name, _shape_text(first)))
        return
    if labels is not None and cls[1][1] is not None:
        check_labels(labels, len(labels), key or DEFAULT_LABELS_KEY, classes=cls[1][1])


def batch_labels(labels: np.ndarray, batch_size: int, batches: int) -> list[np.ndarray]:
    """The labels of each of the first ``batches`` batches of ``batch_size`` consecutive items (the split of
    :func:`sparsify_tui.analysis.inputs.load_sample_data`, whose leftover items are dropped)."""
    return [labels[b * batch_size:(b + 1) * batch_size] for b in range(batches)]


@dataclass
class SampleSet:
    """Batches to measure a metric on: ``feeds`` (one ``{input name: array}`` per batch), ``labels`` (one int
    array per batch, or None), ``labels_key``, ``source`` (the data path, or "synthetic") and ``items``."""

    feeds: list
    labels: Optional[list]
    labels_key: Optional[str]
    source: str
    items: int

    def check_classes(self, classes: int) -> None:
        """Raise ``SampleDataError`` when a label is not below ``classes`` (the class output's size)."""
        if self.labels and self.labels[0].ndim == 1:
            check_labels(np.concatenate(self.labels), self.items, self.labels_key or DEFAULT_LABELS_KEY, classes)


def sample_set(model_path: Union[str, os.PathLike], *, data: Optional[Union[str, os.PathLike]] = None,
               labels_key: Optional[str] = None, dims: Optional[dict] = None, batch_size: int = 1,
               synthetic_batches: int = 16, max_batches: Optional[int] = None,
               metric: Optional[str] = None) -> SampleSet:
    """Batches of ``batch_size`` items from ``data`` (``.npz``/``.npy``; its labels array, see
    :func:`split_labels`, taken out and validated for ``metric``, :func:`check_labels`), at most ``max_batches``;
    without ``data``, ``synthetic_batches`` seeded synthetic batches with valid values and no labels. Raises
    ``SampleDataError`` (bad file, bad labels, ``labels_key`` without ``data``) and ``DimensionError``."""
    from sparsify_tui.analysis.inputs import input_specs, load_sample_data, synthetic_inputs

    specs = input_specs(str(model_path), batch_size=batch_size, dims=dims or {})
    if not data:
        if labels_key:
            raise SampleDataError(f"--labels {labels_key} needs --data FILE.npz holding the inputs and the labels")
        feeds = [synthetic_inputs(specs, seed=i) for i in range(max(1, int(synthetic_batches)))]
        return SampleSet(feeds, None, None, "synthetic", len(feeds) * batch_size)
    raw, key = split_labels(data, labels_key)
    feeds = load_sample_data(str(data), specs, batch_size, ignore=(key,) if key else ())
    n_items = _item_count(data, specs, key)
    if max_batches is not None:
        feeds = feeds[: max(1, int(max_batches))]
    labels = None
    if raw is not None:
        lab = check_labels(raw, n_items, key, metric=metric)
        labels = batch_labels(lab, batch_size, len(feeds))
    return SampleSet(feeds, labels, key, str(data), len(feeds) * batch_size)


def item_count(model_path: Union[str, os.PathLike], data: Union[str, os.PathLike], *, labels_key: Optional[str] = None,
               dims: Optional[dict] = None) -> int:
    """Items in the sample data ``data`` for the model's inputs, read from the file's headers (no array is loaded).
    Raises ``SampleDataError`` / ``DimensionError`` as :func:`sample_set`."""
    from sparsify_tui.analysis.inputs import input_specs

    specs = input_specs(str(model_path), batch_size=1, dims=dims or {})
    return _item_count(data, specs, labels_key or DEFAULT_LABELS_KEY)


#: synthetic held-out items start at this seed (calibration items use seeds 0, 1, ...: never the same items)
HELD_OUT_SEED = 10_000


@dataclass
class ItemSplit:
    """Calibration items and held-out items of one sample set, never the same items (docs/design.md, Reconstruction):
    ``calibration`` / ``held_out`` (feed dicts, one per batch), ``held_out_labels`` (one int array per held-out
    batch, or None), ``labels_key``, ``source`` (the data path, or "synthetic"), ``batch_size`` and the item ranges
    ``calibration_items`` / ``held_out_items`` (``[first, last]`` item indices in the data file, inclusive; for
    synthetic data the seeds)."""

    calibration: list
    held_out: list
    held_out_labels: Optional[list]
    labels_key: Optional[str]
    source: str
    batch_size: int
    calibration_items: Optional[list]
    held_out_items: Optional[list]

    def describe(self) -> dict:
        """``{"source", "calibration": [first, last] | None, "held_out": [first, last] | None, "calibration_count",
        "held_out_count"}``: what ``output_diff.items`` names (counts in items)."""
        return {"source": self.source, "calibration": self.calibration_items, "held_out": self.held_out_items,
                "calibration_count": len(self.calibration) * self.batch_size,
                "held_out_count": len(self.held_out) * self.batch_size}


def split_items(model_path: Union[str, os.PathLike], *, data: Optional[Union[str, os.PathLike]] = None,
                labels_key: Optional[str] = None, dims: Optional[dict] = None, batch_size: int = 1,
                calibration_items: Optional[int] = None, synthetic_items: int = 16,
                metric: Optional[str] = None) -> ItemSplit:
    """Split the sample data into calibration items and held-out items (:class:`ItemSplit`).

    With ``data``: the first ``calibration_items`` items calibrate (default half the items, at most
    :data:`DEFAULT_CALIBRATION_ITEMS`) and **every other item** is held out (scored). A file too small to hold
    both (one batch) calibrates and scores the same items: ``held_out_items`` is then None. Without data: the
    calibration items are synthetic (seeds ``0..n-1``) and the held-out items other synthetic items (seeds from
    :data:`HELD_OUT_SEED`), ``synthetic_items`` of each. ``metric``: what the labels are checked for
    (:func:`check_labels`). Raises ``SampleDataError`` / ``DimensionError`` as :func:`sample_set` does, and for a
    calibration count below 1."""
    from sparsify_tui.analysis.inputs import input_specs, synthetic_inputs

    if calibration_items is not None and int(calibration_items) < 1:
        raise SampleDataError(f"--calibration-size {calibration_items}: calibrate on at least 1 item")
    if not data:
        ss = sample_set(model_path, labels_key=labels_key, dims=dims, batch_size=batch_size,
                        synthetic_batches=int(calibration_items or synthetic_items))
        specs = input_specs(str(model_path), batch_size=batch_size, dims=dims or {})
        held = [synthetic_inputs(specs, seed=HELD_OUT_SEED + i) for i in range(int(synthetic_items))]
        return ItemSplit(ss.feeds, held, None, None, "synthetic", batch_size, [0, len(ss.feeds) * batch_size - 1],
                         [HELD_OUT_SEED, HELD_OUT_SEED + len(held) * batch_size - 1])
    ss = sample_set(model_path, data=data, labels_key=labels_key, dims=dims, batch_size=batch_size, metric=metric)
    n = len(ss.feeds)
    want = DEFAULT_CALIBRATION_ITEMS if calibration_items is None else int(calibration_items)
    if calibration_items is None:
        want = min(want, max(1, (n * batch_size) // 2))
    n_cal = max(1, min(n, -(-want // batch_size)))
    if n_cal >= n:  # nothing left to hold out: score the calibration items themselves, and say so
        return ItemSplit(ss.feeds, ss.feeds, ss.labels, ss.labels_key, ss.source, batch_size,
                         [0, n * batch_size - 1], None)
    return ItemSplit(ss.feeds[:n_cal], ss.feeds[n_cal:], ss.labels[n_cal:] if ss.labels else None, ss.labels_key,
                     ss.source, batch_size, [0, n_cal * batch_size - 1], [n_cal * batch_size, n * batch_size - 1])


def _item_count(data, specs, key: Optional[str]) -> int:
    """Items of the inputs in ``data`` (the leading dim of the first non-scalar input array)."""
    from sparsify_tui.analysis.inputs import inspect_sample_data

    headers = inspect_sample_data(data)
    if None in headers:  # .npy: one array
        return int(headers[None][0][0])
    for s in specs:
        if s.kind != "scalar" and s.name in headers and len(headers[s.name][0]):
            return int(headers[s.name][0][0])
    return 0


__all__ = ["DEFAULT_LABELS_KEY", "DEFAULT_CALIBRATION_ITEMS", "HELD_OUT_SEED", "ItemSplit", "split_items",
           "SampleSet", "sample_set", "item_count", "split_labels", "check_labels", "check_label_rows", "batch_labels",
           "declared_outputs", "check_outputs_fit", "labels_need_class_output", "metric_needs_class_output"]
