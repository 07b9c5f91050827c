"""Run two models on the same inputs and compare their outputs: the one output-difference rule.

:func:`output_difference` is what one-shot apply reports against the baseline and what channel thinning
uses for its exactness check (:mod:`sparsify_tui.engine.thinning`). It runs models, so it lives in the
engine.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from sparsify_tui.progress import CancelToken, maybe_check


def run_outputs(model_path, feeds: Sequence[dict], *, cancel: Optional[CancelToken] = None,
                engine: Any = None) -> list[dict]:
    """The outputs of ``model_path`` on each feed dict of ``feeds``: one ``{output name: array}`` per feed, in
    the model's output order. Feed keys that are not model inputs (a labels array) are dropped. Runs on
    ``engine`` (default onnxruntime) with every core; the session is closed before returning."""
    from sparsify_tui.engine import get_engine
    from sparsify_tui.engine.timing import canceled_as_job

    engine = get_engine(engine)
    with engine.open_session(str(model_path)) as sess:
        names = list(sess.output_names)
        input_names = set(sess.input_names)
        run = sess.runner(names, cancel)
        res = []
        with canceled_as_job(cancel):
            for f in feeds:
                maybe_check(cancel)
                res.append(dict(zip(names, run({k: v for k, v in f.items() if k in input_names}))))
        del run
    return res


def nmse(reference: np.ndarray, other: np.ndarray) -> float:
    """Normalized MSE ``Σ(y − ŷ)² / Σy²`` with y = ``reference`` (``Σ(y − ŷ)²`` when y is all zeros), in
    float64. Example: y = [3, 4], ŷ = [3, 5] gives 1/25 = 0.04."""
    y = np.asarray(reference, dtype=np.float64)
    d = float(np.sum((np.asarray(other, dtype=np.float64) - y) ** 2))
    den = float(np.sum(y * y))
    return d / den if den > 0 else d


def max_abs(reference: np.ndarray, other: np.ndarray) -> float:
    """``max |y − ŷ|`` (0 for empty arrays). Example: y = [1, 2], ŷ = [1.5, 1] gives 1.0."""
    d = np.abs(np.asarray(reference, dtype=np.float64) - np.asarray(other, dtype=np.float64))
    return float(d.max()) if d.size else 0.0


def compare_outputs(base: Sequence[dict], new: Sequence[dict], samples: Optional[int] = None) -> dict:
    """Differences between two runs' outputs (:func:`run_outputs` of the baseline and of the other model).

    Returns ``{"max_abs": float, "nmse": float, "top1_agreement": float|None, "max_rel": float, "samples": int,
    "outputs": {name: {"max_abs", "nmse", "ref_max_abs"}}}`` where, over all batches,
    ``max_abs = max |y - y_base|`` and ``nmse`` is :func:`nmse` over all outputs (0 = identical),
    ``ref_max_abs = max |y_base|`` per output, ``max_rel`` = the largest ``max_abs / ref_max_abs`` over the
    outputs (0 when every baseline output is 0), and ``top1_agreement`` is the fraction of items whose argmax
    over the last axis agrees, for classifier-like first outputs of shape ``[batch, classes>1]`` (else None).
    Outputs that are not numeric or change shape are skipped."""
    names = list(base[0]) if base else []
    per: dict = {}
    every_ref, every_new = [], []
    agree = total = 0
    for name in names:
        pairs = [(np.asarray(b[name]), np.asarray(n[name])) for b, n in zip(base, new) if name in n]
        pairs = [(a, c) for a, c in pairs if np.issubdtype(a.dtype, np.number) and a.shape == c.shape]
        if not pairs:
            continue
        ys = np.concatenate([a.astype(np.float64).ravel() for a, _ in pairs])
        yh = np.concatenate([c.astype(np.float64).ravel() for _, c in pairs])
        per[name] = {"max_abs": max_abs(ys, yh), "nmse": nmse(ys, yh),
                     "ref_max_abs": float(np.abs(ys).max()) if ys.size else 0.0}
        every_ref.append(ys)
        every_new.append(yh)
        if name == names[0]:
            for a, c in pairs:
                if a.ndim == 2 and a.shape[1] > 1:
                    agree += int((a.argmax(axis=1) == c.argmax(axis=1)).sum())
                    total += a.shape[0]
    ref_all = np.concatenate(every_ref) if every_ref else np.zeros(0)
    new_all = np.concatenate(every_new) if every_new else np.zeros(0)
    max_rel = max((v["max_abs"] / v["ref_max_abs"] for v in per.values() if v["ref_max_abs"] > 0), default=0.0)
    return {
        "max_abs": max((v["max_abs"] for v in per.values()), default=0.0),
        "nmse": nmse(ref_all, new_all) if float(np.sum(ref_all * ref_all)) > 0 else 0.0,
        "top1_agreement": (agree / total) if total else None,
        "max_rel": max_rel,
        "samples": len(base) if samples is None else samples,
        "metric": "max |y - y_baseline|; nmse = sum((y - y_baseline)^2) / sum(y_baseline^2); top-1 agreement",
        "outputs": per,
    }


def output_difference(baseline_path, model_path, feeds: Sequence[dict], *, cancel: Optional[CancelToken] = None,
                      engine: Any = None) -> dict:
    """Run ``baseline_path`` then ``model_path`` on ``feeds`` (one session alive at a time,
    :func:`run_outputs`) and compare their outputs (:func:`compare_outputs`, which documents the fields)."""
    base = run_outputs(baseline_path, feeds, cancel=cancel, engine=engine)
    new = run_outputs(model_path, feeds, cancel=cancel, engine=engine)
    return compare_outputs(base, new, len(feeds))
