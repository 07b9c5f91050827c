"""Output metrics: how far a changed model's outputs are from the FP32 reference, and how accurate they are.

The one place for every metric sparsify-tui reports: one-shot loss profiles (per-layer sensitivity),
one-shot apply (output difference), benchmarks (accuracy of baseline and optimized side by side) and the
accuracy-controlled INT8 search. Pure numpy; nothing here runs a model.

Metrics (``y`` = reference (FP32) output, ``ŷ`` = the changed model's output, over every item of the data):

* ``top1``: with labels, **accuracy** = fraction of items whose argmax over the last axis of the class
  output equals its label; without labels, **top-1 agreement** = fraction of items whose argmax equals the
  reference's. The budgeted quantity is the **absolute drop**: ``accuracy(FP32) − accuracy(model)`` with
  labels (0.01 = one percentage point; negative when the model is better), ``1 − agreement`` without.
* ``nmse``: normalized MSE ``Σ(y − ŷ)² / Σy²`` over all float outputs (``Σ(y − ŷ)²`` when ``y`` is all zeros).
  Relative by construction: 0.01 means an error energy of 1 % of the output's energy.
* ``kl``: KL(p ‖ q) in nats, mean over rows, p = softmax(y) and q = softmax(ŷ) over the last axis of the class
  output (the outputs themselves when they already are probabilities: rows in [0, 1] summing to 1).
* ``max_abs``: ``max |y − ŷ|`` over all float outputs, in the outputs' own units.

For ``nmse``, ``kl`` and ``max_abs`` the reference scores 0, so the budgeted quantity is the value itself.

* a metric of the user's own, ``FILE.py:FUNCTION`` (:mod:`sparsify_tui.profiling.user_metric`): its **score** is
  ``FUNCTION(outputs, reference, labels)`` on every item at once; the reference's own score is
  ``FUNCTION(reference, reference, labels)``; the budgeted quantity is the worsening of the score against it (a
  drop when the function's ``higher_is_better`` is True, its default; a rise otherwise).

The default (:func:`choose_metric`) comes from the model outputs: ``top1`` when the first float output is
class scores (``[batch, classes]`` with at least 2 classes), ``nmse`` otherwise (detectors, segmenters,
embeddings, regressors); :class:`MetricChoice` carries the reason, which the CLI always prints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from sparsify_tui.analysis.labels import labels_need_class_output, metric_needs_class_output
from sparsify_tui.engine.outputs import max_abs, nmse  # noqa: F401 (the one definition of each)
from sparsify_tui.errors import ModelError, SampleDataError, SparsifyError
from sparsify_tui.settings import METRICS, is_user_metric  # noqa: F401 (every metric a budget can be stated in)
#: what the budget (``max_drop``) of each metric means
BUDGET_UNITS = {
    "top1": "absolute drop of top-1 accuracy (with labels) or of top-1 agreement with FP32 (0.01 = 1 point)",
    "nmse": "normalized MSE vs FP32, relative (0.01 = 1% of the output energy)",
    "kl": "KL divergence of softmax outputs vs FP32, nats",
    "max_abs": "max |y - y_fp32|, in output units",
}
_FLOAT_TYPES = (np.float16, np.float32, np.float64)


# -- element metrics (one pair of arrays) -----------------------------------------------------------------


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis in float64 (max-subtracted, so no overflow). Same shape as ``x``."""
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def is_probability(y: np.ndarray) -> bool:
    """Rows (last axis) are in [0, 1] and sum to 1 (±1e-3): the output already is a distribution."""
    if y.size == 0:
        return False
    return bool(np.all(y >= 0) and np.all(y <= 1) and np.allclose(y.sum(axis=-1), 1.0, atol=1e-3))


def auto_metric(y: np.ndarray) -> str:
    """The per-output metric of one-shot loss profiles: ``"kl"`` for class outputs (2-D ``[batch, classes]``
    with ≥ 2 classes), ``"nmse"`` otherwise."""
    return "kl" if y.ndim == 2 and y.shape[-1] >= 2 else "nmse"


def is_class_output(y: np.ndarray) -> bool:
    """True for class scores: a float ``[batch, classes]`` array with at least 2 classes."""
    return isinstance(y, np.ndarray) and y.dtype.type in _FLOAT_TYPES and y.ndim == 2 and y.shape[-1] >= 2


def kl_divergence(dense: np.ndarray, pruned: np.ndarray, probs: bool) -> float:
    """Mean over rows of KL(p ‖ q) in nats, p from ``dense`` (the reference), q from ``pruned`` (softmax over
    the last axis unless ``probs``, when the rows are renormalized after clipping to ≥ 1e-12). ≥ 0.

    Example: ``kl_divergence([[0, 0]], [[log 3, 0]], False)`` = 0.5·ln(0.5/0.75) + 0.5·ln(0.5/0.25) ≈ 0.1438."""
    if probs:
        p = np.clip(np.asarray(dense, dtype=np.float64), 1e-12, None)
        q = np.clip(np.asarray(pruned, dtype=np.float64), 1e-12, None)
        p /= p.sum(axis=-1, keepdims=True)
        q /= q.sum(axis=-1, keepdims=True)
    else:
        p, q = softmax(dense), np.clip(softmax(pruned), 1e-300, None)
    kl = np.sum(p * (np.log(np.clip(p, 1e-300, None)) - np.log(q)), axis=-1)
    return float(max(0.0, np.mean(kl)))


def top1(scores: np.ndarray) -> np.ndarray:
    """Class index per item: argmax over the last axis of ``[items, classes]`` scores, shape ``(items,)``."""
    return np.asarray(scores).reshape(-1, np.asarray(scores).shape[-1]).argmax(axis=-1)


#: A class output is *near-flat* when, in every row, its logits span less than this (for a probability
#: output: its probabilities times the class count do): the softmax is then uniform to ~0.1 %, and KL
#: divergence stays near 0 whatever is pruned (an untrained model's logits can span 1e-9).
FLAT_SPAN = 1e-3


def output_span(y: np.ndarray, probs: bool) -> float:
    """The largest per-row span (max − min over the last axis) of a class output; for a probability output,
    times the class count (so both compare with :data:`FLAT_SPAN`)."""
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        return 0.0
    rows = y.reshape(-1, y.shape[-1]) if y.ndim else y.reshape(1, 1)
    span = float(np.max(rows.max(axis=-1) - rows.min(axis=-1)))
    return span * rows.shape[-1] if probs else span


def flat_warning(spans: dict) -> str:
    """The one-line warning for near-flat class outputs (``spans``: output name -> :func:`output_span`)."""
    names = ", ".join(sorted(spans))
    top = max(spans.values()) if spans else 0.0
    return (f"outputs nearly constant: the dense output {names} spans at most {top:.2g} per row, so its softmax is "
            f"uniform and KL divergence stays ~0 whatever is pruned; these sensitivities and the estimated "
            f"recovery mean nothing. Rerun with the nmse metric (--metric nmse), real sample data or trained weights")


class OutputMetric:
    """The per-output metric choice of one-shot loss profiles: ``kinds[name]`` in {"kl", "nmse"},
    ``probs[name]`` for KL outputs. ``choice`` None/"auto" picks :func:`auto_metric` per output.
    Raises ``ModelError`` when no output is float."""

    def __init__(self, names: list, dense: list, choice: Optional[str]):
        self.names, self.kinds, self.probs = [], {}, {}
        for name, y in zip(names, dense):
            if not isinstance(y, np.ndarray) or y.dtype.type not in _FLOAT_TYPES:
                continue
            kind = auto_metric(y) if choice in (None, "auto") else choice
            self.names.append(name)
            self.kinds[name] = kind
            self.probs[name] = kind == "kl" and is_probability(y)
        if not self.names:
            raise ModelError("the model has no float outputs to compare: one-shot sensitivity needs float outputs")

    @property
    def label(self) -> str:
        kinds = sorted(set(self.kinds.values()))
        return "+".join(kinds)

    def flat_outputs(self, dense: list) -> dict:
        """``{name: span}`` of the KL outputs that are near-flat (:data:`FLAT_SPAN`) in every batch of ``dense``
        (a list of ``{output name: array}``): their KL values carry no signal."""
        out = {}
        for name in self.names:
            if self.kinds[name] != "kl":
                continue
            span = max((output_span(d[name], self.probs[name]) for d in dense if name in d), default=0.0)
            if span < FLAT_SPAN:
                out[name] = span
        return out

    def value(self, dense: dict, pruned: dict) -> float:
        """Mean over the float outputs (outputs missing from ``pruned`` are unchanged → 0)."""
        vals = []
        for name in self.names:
            if name not in pruned:
                vals.append(0.0)
            elif self.kinds[name] == "kl":
                vals.append(kl_divergence(dense[name], pruned[name], self.probs[name]))
            else:
                vals.append(nmse(dense[name], pruned[name]))
        return float(np.mean(vals))


# -- model-level metrics (all items of a data set) --------------------------------------------------------


@dataclass
class MetricChoice:
    """The metric a comparison or a budget is stated in: ``name`` (one of :data:`METRICS`, or a user metric's
    ``/path/FILE.py:FUNCTION``), ``reason`` (one line, printed with every result), ``class_output`` (the output
    top-1/KL read, or None), ``labelled`` (accuracy against labels rather than agreement with FP32, or labels given
    to a user metric), ``user`` (the loaded :class:`~sparsify_tui.profiling.user_metric.UserMetric`, or None)."""

    name: str
    reason: str
    class_output: Optional[str] = None
    labelled: bool = False
    user: Any = field(default=None, repr=False, compare=False)
    _reference: Any = field(default=None, repr=False, compare=False)  # (reference, labels, stacked, lab, score)

    @property
    def budget_units(self) -> str:
        """What ``max_drop`` means for this metric."""
        return self.user.budget_units if self.user is not None else BUDGET_UNITS[self.name]

    @property
    def label(self) -> str:
        """Short display name: "top-1 accuracy", "top-1 agreement", "NMSE", "KL", "max |diff|", or a user metric's
        function name."""
        if self.user is not None:
            return self.user.label
        if self.name == "top1":
            return "top-1 accuracy" if self.labelled else "top-1 agreement"
        return {"nmse": "NMSE", "kl": "KL", "max_abs": "max |diff|"}[self.name]

    @property
    def user_metric(self) -> Optional[dict]:
        """A user metric's ``{"name", "path", "sha256", "higher_is_better"}`` (stored with every record it scored),
        else None."""
        return self.user.to_dict() if self.user is not None else None

    def to_dict(self) -> dict:
        d = {"name": self.name, "reason": self.reason, "class_output": self.class_output, "labelled": self.labelled}
        if self.user is not None:
            d["user_metric"] = self.user_metric
        return d

    def reference_score(self, reference: Sequence[Mapping[str, np.ndarray]], labels) -> tuple:
        """``(stacked reference outputs, stacked labels, the reference's own score)`` of a user metric, computed once
        per ``reference`` list (a search scores every trial against one)."""
        cached = self._reference
        if cached is not None and cached[0] is reference and cached[1] is labels:
            return cached[2], cached[3], cached[4]
        from sparsify_tui.profiling.user_metric import stack_items

        names = list(reference[0]) if reference else []
        stacked = [stack_items([r[n] for r in reference], n) for n in names]
        lab = None
        if labels is not None:
            lab = np.concatenate([np.asarray(x) for x in labels], axis=0) if len(labels) else None
        score = self.user(stacked, stacked, lab)
        self._reference = (reference, labels, stacked, lab, score)
        return stacked, lab, score


def _shape(y) -> str:
    return "[" + ", ".join(str(d) for d in np.shape(y)) + "]"


def choose_metric(outputs: Mapping[str, np.ndarray], requested: Optional[str] = None,
                  labelled: bool = False, asked_by: str = "--metric") -> MetricChoice:
    """The metric for a model whose outputs on one batch are ``outputs`` (``{name: array}``, graph order).

    ``requested``: one of :data:`METRICS`, or None/"auto" for the default: ``top1`` when the first float output
    is class scores (:func:`is_class_output`), else ``nmse``. ``labelled``: labels were given (top-1 is then an
    accuracy). ``asked_by``: who asked for ``requested``, the start of the reason ("--metric", or "the INT8
    search's metric" when apply re-measures a searched configuration). Raises ``SparsifyError`` for an unknown metric, ``SampleDataError`` when labels or top1/kl are
    asked of a model without a class output, ``ModelError`` when no output is float.
    """
    if is_user_metric(requested):
        from sparsify_tui.profiling.user_metric import load_user_metric

        um = load_user_metric(requested)
        with_labels = "with the data's labels" if labelled else "no labels: against FP32's outputs"
        return MetricChoice(um.spec, f"{asked_by} {um.file_name}:{um.function}: your metric, {um.direction}, "
                            f"{with_labels} (sha256 {um.sha256[:12]})", None, labelled, um)
    if requested not in (None, "auto") and requested not in METRICS:
        raise SparsifyError(f"unknown metric {requested!r}: use one of {', '.join(METRICS)}, or FILE.py:FUNCTION")
    floats = [(n, y) for n, y in outputs.items() if isinstance(y, np.ndarray) and y.dtype.type in _FLOAT_TYPES]
    if not floats:
        raise ModelError("the model has no float outputs to compare: accuracy metrics need float outputs")
    cls = next(((n, y) for n, y in floats if is_class_output(y)), None)
    first_name, first = floats[0]
    if labelled and cls is None:
        raise SampleDataError(labels_need_class_output(first_name, _shape(first)))
    if requested in ("top1", "kl") and cls is None:
        raise SampleDataError(metric_needs_class_output(requested, first_name, _shape(first)))
    if requested in (None, "auto"):
        if labelled:
            return MetricChoice("top1", f"labels given: top-1 accuracy of output '{cls[0]}' {_shape(cls[1])}",
                                cls[0], True)
        if is_class_output(first):
            return MetricChoice("top1", f"output '{first_name}' is class scores {_shape(first)}: "
                                "top-1 agreement with FP32 (no labels)", first_name, False)
        return MetricChoice("nmse", f"output '{first_name}' is {_shape(first)}, not class scores: "
                            "normalized MSE vs FP32", None, False)
    if requested == "top1":
        how = "accuracy against the labels" if labelled else "agreement with FP32 (no labels)"
        return MetricChoice("top1", f"{asked_by} top1: top-1 {how}, output '{cls[0]}'", cls[0], labelled)
    if requested == "kl":
        return MetricChoice("kl", f"{asked_by} kl: KL divergence of the softmax of output '{cls[0]}'", cls[0],
                            labelled)
    return MetricChoice(requested, f"{asked_by} {requested} over every float output", cls[0] if cls else None,
                        labelled)


@dataclass
class Evaluation:
    """A model's outputs against the reference on a data set (every field over all items).

    ``metric``: the budgeted metric's name; ``drop``: its budgeted quantity (module docstring: absolute
    top-1 drop, the value of nmse/kl/max_abs, or a user metric's worsening); ``nmse``, ``max_abs`` (all float
    outputs), ``kl`` (class output, None without one), ``top1_agreement`` (0..1, None without a class output),
    ``accuracy`` and ``accuracy_reference`` (0..1 against labels, None without labels), ``items``; ``score`` and
    ``score_reference``: a user metric's value on the outputs and on the reference (None for the others; in
    ``extra``, so other metrics' dicts keep their keys)."""

    metric: str
    drop: float
    nmse: float
    max_abs: float
    kl: Optional[float] = None
    top1_agreement: Optional[float] = None
    accuracy: Optional[float] = None
    accuracy_reference: Optional[float] = None
    items: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def score(self) -> Optional[float]:
        return self.extra.get("score")

    @property
    def score_reference(self) -> Optional[float]:
        return self.extra.get("score_reference")

    def within(self, max_drop: float) -> bool:
        """``drop ≤ max_drop`` (with a 1e-12 tolerance for rounding)."""
        return self.drop <= float(max_drop) + 1e-12

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        d.update(self.extra)
        return d


def _batch_items(batch: Mapping[str, np.ndarray]) -> int:
    """Items in one batch of outputs: the leading dim of its first non-scalar array (1 if none)."""
    for y in batch.values():
        if np.ndim(y):
            return int(np.shape(y)[0])
    return 1


def _items(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(a).reshape(-1, np.asarray(a).shape[-1]) for a in arrays], axis=0)


def evaluate(reference: Sequence[Mapping[str, np.ndarray]], outputs: Sequence[Mapping[str, np.ndarray]],
             choice: MetricChoice, labels: Optional[Sequence[np.ndarray]] = None) -> Evaluation:
    """Compare ``outputs`` (one ``{name: array}`` per batch) with ``reference`` (same batches, FP32).

    ``labels``: one int array ``(batch items,)`` per batch (:func:`sparsify_tui.analysis.labels.load_labels`),
    used for accuracies; for a user metric, any array per batch (first axis = items), given to the function stacked.
    Float outputs present in both with equal shapes are compared; others are skipped.
    Returns :class:`Evaluation`. Raises ``SparsifyError`` when the batch counts differ, ``MetricError`` from a user
    metric.
    """
    if len(reference) != len(outputs):
        raise SparsifyError(f"{len(outputs)} output batches against {len(reference)} reference batches")
    err = ref = 0.0
    mx = 0.0
    for r, o in zip(reference, outputs):
        for name, y in r.items():
            if name not in o or not isinstance(y, np.ndarray) or y.dtype.type not in _FLOAT_TYPES:
                continue
            yh = np.asarray(o[name])
            if yh.shape != y.shape:
                continue
            y64, d = y.astype(np.float64), yh.astype(np.float64) - y.astype(np.float64)
            err += float(np.sum(d * d))
            ref += float(np.sum(y64 * y64))
            if d.size:
                mx = max(mx, float(np.abs(d).max()))
    out = Evaluation(metric=choice.name, drop=0.0, nmse=(err / ref) if ref > 0 else err, max_abs=mx,
                     items=sum(_batch_items(r) for r in reference))
    c = choice.class_output
    if c is not None and all(c in r for r in reference) and all(c in o for o in outputs):
        ys = _items([r[c] for r in reference])
        yhs = _items([o[c] for o in outputs])
        out.items = int(len(ys))
        t_ref, t_new = top1(ys), top1(yhs)
        out.top1_agreement = float(np.mean(t_ref == t_new)) if len(ys) else None
        out.kl = kl_divergence(ys, yhs, is_probability(ys))
        if labels is not None and choice.user is None:
            lab = np.concatenate([np.asarray(x).reshape(-1) for x in labels]) if len(labels) else np.zeros(0)
            if len(lab) != len(ys):
                raise SampleDataError(f"{len(lab)} labels for {len(ys)} items: give one label per item")
            out.accuracy = float(np.mean(t_new == lab)) if len(lab) else None
            out.accuracy_reference = float(np.mean(t_ref == lab)) if len(lab) else None
    if choice.user is not None:
        ref_stacked, lab, ref_score = choice.reference_score(reference, labels)
        names = list(reference[0]) if reference else []
        from sparsify_tui.profiling.user_metric import stack_items

        if outputs is reference:
            score = ref_score
        else:
            missing = [n for n in names if any(n not in o for o in outputs)]
            if missing:
                raise ModelError(f"the scored model has no output '{missing[0]}' that the reference has: a metric of "
                                 "your own needs every output")
            score = choice.user([stack_items([o[n] for o in outputs], n) for n in names], ref_stacked, lab)
        out.extra.update({"score": score, "score_reference": ref_score})
        out.drop = choice.user.worsening(score, ref_score)
    elif choice.name == "top1":
        if choice.labelled and out.accuracy is not None:
            out.drop = float(out.accuracy_reference - out.accuracy)
        else:
            out.drop = 1.0 - float(out.top1_agreement if out.top1_agreement is not None else 0.0)
    elif choice.name == "kl":
        out.drop = float(out.kl or 0.0)
    elif choice.name == "max_abs":
        out.drop = out.max_abs
    else:
        out.drop = out.nmse
    return out


def reference_evaluation(reference: Sequence[Mapping[str, np.ndarray]], choice: MetricChoice,
                         labels: Optional[Sequence[np.ndarray]] = None) -> Evaluation:
    """The reference model scored against itself (drop 0), with its accuracy when ``labels`` are given."""
    return evaluate(reference, reference, choice, labels)


__all__ = ["METRICS", "BUDGET_UNITS", "softmax", "is_probability", "auto_metric", "is_class_output",
           "kl_divergence", "nmse", "max_abs", "top1", "OutputMetric", "MetricChoice", "choose_metric",
           "Evaluation", "evaluate", "reference_evaluation"]
