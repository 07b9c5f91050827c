"""Run two models on the same inputs and compare their outputs: the one output-difference rule.

:func:`output_difference` is what one-shot apply reports against the baseline and what channel thinning
uses for its exactness check (:mod:`sparsify_tui.engine.thinning`). It runs models, so it lives in the
engine.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from sparsify_tui.progress import CancelToken, maybe_check


def output_difference(baseline_path, model_path, feeds: Sequence[dict], *, cancel: Optional[CancelToken] = None,
                      engine: Any = None) -> dict:
    """Compare the outputs of ``model_path`` against ``baseline_path`` on ``feeds`` (list of feed dicts).

    Returns ``{"max_abs": float, "nmse": float, "top1_agreement": float|None, "max_rel": float, "samples": int,
    "outputs": {name: {"max_abs", "nmse", "ref_max_abs"}}}`` where, over all batches,
    ``max_abs = max |y - y_base|`` and ``nmse = sum (y - y_base)^2 / sum y_base^2`` (normalized MSE;
    0 = identical), ``ref_max_abs = max |y_base|`` per output, ``max_rel`` = the largest
    ``max_abs / ref_max_abs`` over the outputs (0 when every baseline output is 0), and ``top1_agreement`` is
    the fraction of items whose argmax over the last axis agrees, for classifier-like first outputs of shape
    ``[batch, classes>1]`` (else None). Both models run on ``engine`` (default onnxruntime) with every core;
    one session is alive at a time.
    """
    from sparsify_tui.engine import get_engine
    from sparsify_tui.engine.timing import canceled_as_job

    engine = get_engine(engine)

    def run_all(path):
        with engine.open_session(str(path)) as sess:
            names = list(sess.output_names)
            input_names = set(sess.input_names)
            run = sess.runner(names, cancel)
            res = []
            with canceled_as_job(cancel):
                for f in feeds:
                    maybe_check(cancel)
                    res.append(run({k: v for k, v in f.items() if k in input_names}))
            del run
        return names, res

    names, base = run_all(baseline_path)
    names2, new = run_all(model_path)
    per = {}
    tot_err = tot_ref = 0.0
    max_abs = 0.0
    agree = total = 0
    for bi, (b_outs, n_outs) in enumerate(zip(base, new)):
        for oi, name in enumerate(names):
            a = np.asarray(b_outs[oi])
            c = np.asarray(n_outs[names2.index(name)] if name in names2 else n_outs[oi])
            if not np.issubdtype(a.dtype, np.number) or a.shape != c.shape:
                continue
            a64, c64 = a.astype(np.float64), c.astype(np.float64)
            d = np.abs(a64 - c64)
            m = float(d.max()) if d.size else 0.0
            err, ref = float((d ** 2).sum()), float((a64 ** 2).sum())
            p = per.setdefault(name, {"max_abs": 0.0, "ref_max_abs": 0.0, "_err": 0.0, "_ref": 0.0})
            p["max_abs"] = max(p["max_abs"], m)
            p["ref_max_abs"] = max(p["ref_max_abs"], float(np.abs(a64).max()) if a64.size else 0.0)
            p["_err"] += err
            p["_ref"] += ref
            max_abs = max(max_abs, m)
            tot_err += err
            tot_ref += ref
            if oi == 0 and a.ndim == 2 and a.shape[1] > 1:
                agree += int((a.argmax(axis=1) == c.argmax(axis=1)).sum())
                total += a.shape[0]
    outputs = {k: {"max_abs": v["max_abs"], "nmse": (v["_err"] / v["_ref"]) if v["_ref"] > 0 else 0.0,
                   "ref_max_abs": v["ref_max_abs"]}
               for k, v in per.items()}
    max_rel = max((v["max_abs"] / v["ref_max_abs"] for v in outputs.values() if v["ref_max_abs"] > 0), default=0.0)
    return {
        "max_abs": max_abs,
        "nmse": (tot_err / tot_ref) if tot_ref > 0 else 0.0,
        "top1_agreement": (agree / total) if total else None,
        "max_rel": max_rel,
        "samples": len(feeds),
        "metric": "max |y - y_baseline|; nmse = sum((y - y_baseline)^2) / sum(y_baseline^2); top-1 agreement",
        "outputs": outputs,
    }
