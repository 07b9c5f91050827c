"""The accuracy of a benchmark's models as one table, shown the same way by the CLI (``benchmark``), the TUI
(Benchmarks section) and the report: one column per model, one row per quantity, the metric named.

The numbers come from :func:`sparsify_tui.benchmark.runner.measure_accuracy` (stored with the result under
``accuracy``; a benchmark record keeps ``metric``, ``label`` and per model ``drop``, ``accuracy``,
``top1_agreement`` and ``nmse``): every model's outputs against the baseline's on the same items; top-1 accuracy
only with labels in the data, top-1 agreement only for a class-score output.

**Synthetic inputs are not data.** A benchmark without data compares the models on seeded random inputs: that says
whether the outputs moved, never how accurate a model is (a model that scores 100% on real data agreed 0% with
itself thinned on random inputs). Its table is headed :data:`NO_DATA` and its rows say "on synthetic inputs"; no
"top-1" word, and no column of the speed table, carries them (:func:`synthetic`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional


NO_DATA = "no accuracy: no data"
"""The head of a benchmark's accuracy measured without data (on synthetic inputs)."""


@dataclass
class AccuracyTable:
    """``title`` (the data, the items and the metric; :data:`NO_DATA` first without data), ``headers`` (``""`` then
    one model label per column) and ``rows`` (a quantity's label, then its value per model, as text)."""

    title: str
    headers: list
    rows: list


def synthetic(accuracy: Optional[dict]) -> bool:
    """The accuracy block was measured on synthetic inputs (the benchmark had no data), so it holds no accuracy."""
    data = (accuracy or {}).get("data")
    return not data or str(data).startswith("synthetic")


def _pct(v: Any) -> str:
    return "" if v is None else f"{float(v) * 100:.1f}%"


def _num(v: Any) -> str:
    return "" if v is None else f"{float(v):.4g}"


def accuracy_table(accuracy: Optional[dict]) -> Optional[AccuracyTable]:
    """The table of a result's (or record's) ``accuracy`` block, None when there is none (one model, or a
    benchmark made before accuracy was measured). Rows: top-1 accuracy against the labels (with labels), top-1
    agreement with the baseline (a class output), the output NMSE against the baseline, and the budgeted metric's
    drop when it is none of those (KL, max |diff|)."""
    if not accuracy or not accuracy.get("models"):
        return None
    models = accuracy["models"]
    labels = list(models)
    items, data = accuracy.get("items"), accuracy.get("data")
    rows = []

    def row(label: str, key: str, fmt) -> None:
        values = [models[m].get(key) for m in labels]
        if any(v is not None for v in values):
            rows.append([label] + [fmt(v) for v in values])

    user = accuracy.get("user_metric")
    named = (f"{user.get('name')} ({Path(str(user.get('path'))).name}, sha256 {str(user.get('sha256'))[:12]}, "
             f"{'higher' if user.get('higher_is_better', True) else 'lower'} is better)") if user else None
    if synthetic(accuracy):  # random inputs: no accuracy, whatever the metric
        where = f"{items} synthetic items" if items else "synthetic items"
        title = (f"{NO_DATA[:1].upper()}{NO_DATA[1:]} (benchmark with sample data to measure it). Outputs against "
                 f"the baseline's on {where}, random inputs that say nothing about accuracy"
                 + (f"; metric: {named}:" if named else ":"))
        if user:  # the user asked for it: their function of the outputs, said to be on synthetic inputs
            row(f"{user.get('name')} on synthetic inputs", "score", _num)
        row("agreement on synthetic inputs", "top1_agreement", _pct)
        row("output NMSE on synthetic inputs", "nmse", _num)
        return AccuracyTable(title, [""] + labels, rows)
    # a metric of the user's own is named with its file and hash
    metric = named or accuracy.get("label") or accuracy.get("metric") or "?"
    title = f"Accuracy vs the baseline's outputs on {items} items of {data}; metric: {metric}"
    if user:
        row(str(user.get("name")), "score", _num)
    row("top-1 accuracy", "accuracy", _pct)  # against the labels (the title says the data)
    row("top-1 agreement", "top1_agreement", _pct)
    row("output NMSE", "nmse", _num)
    name = accuracy.get("metric")
    if name in ("kl", "max_abs"):
        row({"kl": "KL divergence", "max_abs": "max |diff|"}[name], "drop", _num)
    return AccuracyTable(title, [""] + labels, rows)


def format_table(headers: list, rows: list, indent: str = "  ") -> str:
    """A plain-text table: the first column left-aligned, the others right-aligned, two spaces apart."""
    table = [list(map(str, headers))] + [list(map(str, r)) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return "\n".join(indent + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     .rstrip() for r in table)
