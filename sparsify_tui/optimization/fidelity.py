"""How far an optimized model is from the original, in one rule that every card, ``optimization show`` and the report
use ("accuracy beside speed", docs/design.md).

* **Measured** (:func:`applied_fidelity`): an applied model's output difference (``applied.output_diff``, scored by
  apply on the data it was given: held-out items when it calibrated on others) as one line: accuracy against the
  labels with FP32's beside it, top-1 agreement with FP32, NMSE.
* **Too far** (:func:`too_far`): top-1 agreement with FP32 below :data:`AGREEMENT_FLOOR` (0.9), or, when the model
  has no class output, NMSE above :data:`NMSE_CEILING` (0.1). Such a model needs fine-tuning, not deployment: the
  cards say :data:`TOO_FAR`. The thresholds are the issue's (#23, deliverable 6): at 0.9 agreement one item in ten
  already gets another class than the original's; an NMSE of 0.1 is an error energy of 10 % of the output's. A
  model scored by a metric of the user's own (``--metric FILE.py:FUNCTION``) is judged by that metric and its
  budget, not by these proxies: its line leads with the metric's value beside FP32's.
* **Predicted** (:func:`predicted_change`): before apply, what the optimization expects: the budget search's held-out
  metric of the chosen trial when a search made it, else the estimate summed from the loss curves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional

from sparsify_tui.formatting import plural

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization

#: top-1 agreement with FP32 below this is too far from the original
AGREEMENT_FLOOR = 0.9
#: without a class output: NMSE above this is too far from the original
NMSE_CEILING = 0.1
TOO_FAR = "too far from the original to use without fine-tuning: export the training code (`e`)"


@dataclass
class Fidelity:
    """An applied model against the original: ``text`` (one line: accuracy with FP32's, agreement, NMSE, items),
    ``too_far`` (:func:`too_far`) and ``why`` (the figure against its threshold, e.g. "top-1 agreement 61.0% <
    90%")."""

    text: str
    too_far: bool
    why: str = ""

    @property
    def flag(self) -> str:
        """:data:`TOO_FAR` with the figure, or "" when the model is close enough."""
        return f"{TOO_FAR} ({self.why})" if self.too_far else ""


def too_far(top1_agreement: Optional[float], nmse: Optional[float]) -> tuple:
    """``(too far, why)``: top-1 agreement below :data:`AGREEMENT_FLOOR` when there is one (a class output), else
    NMSE above :data:`NMSE_CEILING`; ``(False, "")`` when neither is known."""
    if top1_agreement is not None:
        a = float(top1_agreement)
        return (a < AGREEMENT_FLOOR, f"top-1 agreement {a:.1%} < {AGREEMENT_FLOOR:.0%}" if a < AGREEMENT_FLOOR else "")
    if nmse is not None:
        n = float(nmse)
        return (n > NMSE_CEILING, f"NMSE {n:.3g} > {NMSE_CEILING:g}" if n > NMSE_CEILING else "")
    return False, ""


def _items(diff: Mapping[str, Any]) -> str:
    held = diff.get("held_out")
    if isinstance(held, Mapping):
        held = held.get("items") or held.get("count")
    elif held is True:  # apply's score_items: the scored items are held out, counted in ``items``
        items = diff.get("items")
        held = items.get("held_out_count") if isinstance(items, Mapping) else None
    if isinstance(held, bool):
        held = None
    if held:
        return plural(held, "held-out item") if isinstance(held, int) else f"held-out items {held}"
    n = diff.get("samples")
    return plural(n, "batch", "batches") if n else ""


def applied_fidelity(diff: Optional[Mapping[str, Any]]) -> Optional[Fidelity]:
    """The :class:`Fidelity` of an applied model from its ``output_diff`` (``accuracy``/``accuracy_baseline`` with
    labels, ``top1_agreement``, ``nmse``, ``samples``, ``held_out`` when apply names them); None when ``diff`` is
    empty."""
    if not diff:
        return None
    parts = []
    user = diff.get("user_metric")
    if user and diff.get("score") is not None:
        base = diff.get("score_baseline")
        parts.append(f"{user.get('name')} {float(diff['score']):.4g}"
                     + (f" (FP32 {float(base):.4g})" if base is not None else ""))
    if diff.get("accuracy") is not None:
        base = diff.get("accuracy_baseline")
        parts.append(f"accuracy {float(diff['accuracy']):.1%}" + (f" (FP32 {float(base):.1%})" if base is not None
                                                                   else ""))
    if diff.get("top1_agreement") is not None:
        parts.append(f"top-1 agreement {float(diff['top1_agreement']):.1%}")
    if diff.get("nmse") is not None:
        parts.append(f"NMSE {float(diff['nmse']):.3g}")
    where = _items(diff)
    text = ", ".join(parts) + (f" on {where}" if where else "")
    far, why = too_far(diff.get("top1_agreement"), diff.get("nmse")) if not user else (False, "")
    return Fidelity(text=text, too_far=far, why=why)


def predicted_change(rec: "Optimization") -> str:
    """One line: what the optimization expects its outputs to change, before it is applied (module docstring)."""
    s = rec.search
    t = s.chosen_trial if s is not None else None
    if t is not None:
        if s.user_metric and t.score is not None:
            parts = [f"{s.metric_label} {t.score:.4g}" + (f" (FP32 {s.score_fp32:.4g})" if s.score_fp32 is not None
                                                          else "")
                     + f", worsening {t.metric_value:.4g} (budget {s.max_drop:g})"]
        else:
            parts = [f"{s.metric} {t.metric_value:.4g} (budget {s.max_drop:g})"]
        if t.accuracy is not None:
            parts.append(f"accuracy {t.accuracy:.1%}" + (f" (FP32 {s.accuracy_fp32:.1%})"
                                                         if s.accuracy_fp32 is not None else ""))
        if t.top1_agreement is not None and s.metric != "top1":
            parts.append(f"top-1 agreement {t.top1_agreement:.1%}")
        far, why = too_far(t.top1_agreement, t.nmse) if not s.user_metric else (False, "")
        return (f"measured by the budget search on {s.held_out_items} held-out items: " + ", ".join(parts)
                + (f"; {TOO_FAR} ({why})" if far else ""))
    if s is not None:
        return "the budget search kept FP32: no change"
    est = rec.estimates
    value = getattr(est, "est_output_change", None)
    if value is None:
        return "not estimated"
    profile = getattr(est, "loss_metric", "") or "?"  # the channel estimate stores the loss profile's name there
    unit = ("relative sensitivity, unitless" if profile == "Approximated" else
            f"in the metric of loss profile {profile!r}")
    return (f"est. {value:.4g} ({unit}: its sensitivities summed over the thinned groups, a ranking score, not a "
            "measured change): apply with --data measures it")


__all__ = ["AGREEMENT_FLOOR", "NMSE_CEILING", "TOO_FAR", "Fidelity", "too_far", "applied_fidelity",
           "predicted_change"]
