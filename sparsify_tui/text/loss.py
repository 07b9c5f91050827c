"""A loss profile's summary (:class:`~sparsify_tui.profiling.loss.LossProfile`): ``sparsify-tui profile loss``
prints it above its per-layer table, the Loss Profiles screen shows it as the Model Summary."""

from __future__ import annotations

from sparsify_tui.formatting import format_count, plural
from sparsify_tui.text import Fact


def _settings(prof) -> list:
    """The measured settings: the level range, the one-shot batches and data, INT8."""
    s, levels = prof.settings or {}, prof.levels
    out = [f"{len(levels)} levels {levels[0]:g}–{levels[-1]:g}"] if levels else []
    if prof.method == "one-shot":
        out += [f"{s.get('batches', '?')}×batch {s.get('batch_size', 1)}", str(s.get("data") or "synthetic")]
    if s.get("int8"):
        out.append("INT8")
    return out


def summary_facts(prof) -> list:
    """The summary of a loss profile: name, method and settings; the metric; for a pruning profile the params
    (total, prunable, layers), the params reduction of the default optimization, the average sensitivity
    (value at 0.95 − value at 0) and the estimated recovery; for a channel profile the channel groups and what a
    level means; the time it took."""
    facts = [Fact("loss profile", " · ".join([prof.name, prof.method] + _settings(prof))),
             Fact("metric", prof.metric_description or "")]
    if (prof.settings or {}).get("structure") == "channel":
        facts.append(Fact("channel groups", f"{len(prof.layers)}, {prof.prunable_params:,} channels; a level is the "
                                            "fraction of a group's channels removed (rounded to "
                                            f"{prof.settings.get('round_to')})"))
    else:
        avg = prof.average_sensitivity()
        facts += [
            Fact("params", f"{format_count(prof.total_params)} (prunable {format_count(prof.prunable_params)}, "
                           f"{plural(len(prof.layers), 'layer')})"),
            Fact("est. params reduction", f"{prof.est_params_reduction() * 100:.1f}% at the default optimization "
                                          f"({prof.default_layer_sparsity():.2f} per layer, first/depthwise dense)"),
            Fact("avg. sensitivity", f"{'-' if avg is None else format(avg, '.4g')} (at 0.95 − baseline)"),
            Fact("est. recovery", prof.recovery_text()),
        ]
    if prof.seconds:
        facts.append(Fact("measured in", f"{prof.seconds:.1f} s"))
    return facts


__all__ = ["summary_facts"]
