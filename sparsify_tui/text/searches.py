"""The head of an INT8 search (:class:`~sparsify_tui.optimization.record.Int8Search`) and of a budget search
(:class:`~sparsify_tui.optimization.record.BudgetSearch`): the metric and why, the budget, the data, the result and
the chosen trial. ``sparsify-tui optimize --int8-search`` / ``--max-drop`` and ``optimization show`` print it above
the trials table; the Quant and Budget tabs of the Optimization section show it on their cards."""

from __future__ import annotations

from typing import Optional

from sparsify_tui.formatting import format_fixed, plural
from sparsify_tui.optimization.budget_search import FP32_FASTEST
from sparsify_tui.text import Fact


def metric_name(metric: Optional[str]) -> str:
    """What a search's ``metric_value`` is, as a column or axis names it: for ``top1`` the drop of top-1 accuracy from
    FP32 (the budget is a drop), else the metric itself ("nmse")."""
    return "top-1 drop" if metric == "top1" else str(metric or "metric")


def metric_text(metric: Optional[str], value: Optional[float]) -> str:
    """A search's ``metric_value`` in words and units: ``top1`` -> "top-1 drop 0.8 points" (a drop of 0.008 in
    accuracy; "top1 0" read as a top-1 of 0), else "nmse 0.0123" (4 significant digits)."""
    if value is None:
        return f"{metric_name(metric)} n/a"
    if metric == "top1":
        return f"top-1 drop {float(value) * 100:.1f} points"
    return f"{metric} {format_fixed(value, '.4g')}"


def _pct(v: Optional[float]) -> str:
    return "" if v is None else f"{float(v):.1%}"


def _fp32_accuracy(s) -> str:
    score = f", FP32 {s.metric_label} {s.score_fp32:.4g}" if s.user_metric and s.score_fp32 is not None else ""
    return (f", FP32 accuracy {_pct(s.accuracy_fp32)}" if s.accuracy_fp32 is not None else "") + score


def _measured(s, t) -> str:
    """A trial's budgeted figure: "cer 0.031 (FP32 0.025, worsening 0.006)" for a metric of the user's own, else
    the metric in words (:func:`metric_text`: "nmse 0.012", "top-1 drop 0.8 points")."""
    if s.user_metric and t.score is not None:
        base = f"FP32 {s.score_fp32:.4g}, " if s.score_fp32 is not None else ""
        return f"{s.metric_label} {t.score:.4g} ({base}worsening {format_fixed(t.metric_value, '.4g')})"
    return metric_text(s.metric, t.metric_value)


def _metric(s) -> Fact:
    """The metric and why: a metric of the user's own by its function name (the reason names the file, the
    direction and the sha256), a built-in one by its name."""
    return Fact("metric", f"{s.metric_label} ({s.metric_reason or ''})")


def _result(s, timing: str) -> Fact:
    """The status, trial count and search time, and FP32's ms per batch from the search's interleaved timing."""
    return Fact("result", f"{s.status}; {plural(len(s.trials), 'trial')} in {s.seconds:.1f} s; FP32 "
                          f"{format_fixed(s.fp32_ms, '.3f')} ms/batch ({timing}, {s.timing.get('rounds')} rounds)")


def int8_search_facts(s) -> list:
    """Metric, budget, data (items evaluated, calibration method and batches, FP32 accuracy), how the groups were
    ranked, the result, and the chosen trial (groups and nodes kept FP32, metric, measured speedup over FP32)."""
    chosen = s.chosen_trial
    if chosen is not None:
        what = _measured(s, chosen)
        choice = (f"trial {chosen.index}, {plural(chosen.groups, 'group')} FP32 ({chosen.excluded_count} nodes), "
                  f"{what}, measured {format_fixed(chosen.speedup)}× vs FP32")
    else:
        choice = "none: every layer stays FP32"
    return [
        _metric(s),
        Fact("budget", f"max drop {s.max_drop:g} = {s.budget_units or ''}"),
        Fact("data", f"{s.data or 'synthetic'}, {s.eval_items} items evaluated, calibration "
                     f"{s.calibration_method or 'minmax'} on {s.calibration_size} batches{_fp32_accuracy(s)}"),
        Fact("ranking", s.ranking_source or "not needed (full INT8 fits)"),
        _result(s, "short interleaved timing"),
        Fact("chosen", choice),
    ]


def budget_search_facts(s) -> list:
    """Metric, budget, data (file and sha256, the calibration and held-out items by name, FP32 accuracy on the
    held-out items), the result (and whether INT8 was tried, the reachable estimate), and the chosen trial
    (measured speedup over FP32, held-out metric and accuracy) or why FP32 is kept."""
    chosen = s.chosen_trial
    if chosen is not None:
        acc = f", accuracy {_pct(chosen.accuracy)}" if chosen.accuracy is not None else ""
        choice = (f"trial {chosen.index}, {chosen.label}: measured {format_fixed(chosen.speedup)}× vs FP32, "
                  f"{_measured(s, chosen)}{acc} (held out)")
    elif s.status == FP32_FASTEST:
        choice = ("FP32: no trial within budget beat it in every timing round (a busy machine makes the rounds "
                  "disagree: search again when it is quiet); nothing thinned, INT8 off")
    else:
        choice = "FP32 (no trial within budget): nothing thinned, INT8 off"
    result = _result(s, "interleaved timing")
    return [
        _metric(s),
        Fact("budget", f"max drop {s.max_drop:g} = {s.budget_units or ''}"),
        Fact("data", f"{s.data} (sha256 {str(s.data_sha256 or '')[:12]}): calibration items {s.items}, held-out "
                     f"items {s.held_out} ({s.held_out_items} scored){_fp32_accuracy(s)}"),
        Fact("result", f"{result.value}; INT8 {'tried' if s.quantize else 'not tried'}; reachable est. "
                       f"{format_fixed(s.reachable_speedup)}×"),
        Fact("chosen", choice),
    ]


__all__ = ["budget_search_facts", "int8_search_facts", "metric_name", "metric_text"]
