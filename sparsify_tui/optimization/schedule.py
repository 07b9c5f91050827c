"""Training schedules of an optimization: epochs, the GMP cubic sparsity schedule, learning-rate modifiers.

Pure functions on plain data (no torch, no textual). The same formulas are written into the recipe
(SparseML semantics) and into the generated plain-PyTorch / Keras / TensorFlow code.

GMP cubic schedule (Zhu & Gupta 2017, "To prune, or not to prune", and SparseML's ``inter_func: cubic``):
the sparsity is updated every ``update_frequency`` epochs, at ``t = t0 + k*dt`` for ``k = 0..n``
(``n*dt = end - start``), to::

    s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (n*dt)) ** 3

so ``s = s_i`` at the first update (``t = start_epoch``) and ``s = s_f`` from ``end_epoch`` on. Before
``start_epoch`` the layer is dense.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

LR_TYPES = ("set", "step", "multistep", "exponential")
"""Learning-rate modifier types: SetLearningRateModifier, LearningRateModifier with StepLR, MultiStepLR,
ExponentialLR (SparseML ``lr_class`` names)."""

LR_CLASS = {"step": "StepLR", "multistep": "MultiStepLR", "exponential": "ExponentialLR"}


def default_epochs(training_epochs: float) -> Dict[str, float]:
    """Epoch plan from the project's training epochs ``E`` (the original Sparsify defaults).

    Returns ``{"stabilization_epochs": 1, "pruning_epochs": E/3, "fine_tune_epochs": E/4,
    "pruning_start_epoch", "pruning_end_epoch", "total_epochs", "update_frequency"}`` (epochs, floats
    rounded to 0.1). Pruning starts after 1 stabilization epoch, ends ``E/3`` epochs later, then
    ``E/4`` epochs of fine-tuning. ``update_frequency`` (epochs between GMP mask updates) is
    ``pruning_epochs/20`` clipped to [0.1, 1.0].
    """
    e = max(1.0, float(training_epochs or 1))
    prune = round(max(1.0, e / 3.0), 1)
    fine = round(max(1.0, e / 4.0), 1)
    start = 1.0
    end = round(start + prune, 1)
    return {
        "stabilization_epochs": start,
        "pruning_epochs": prune,
        "fine_tune_epochs": fine,
        "pruning_start_epoch": start,
        "pruning_end_epoch": end,
        "total_epochs": round(end + fine, 1),
        "update_frequency": round(min(1.0, max(0.1, prune / 20.0)), 2),
    }


def gmp_sparsity(epoch: float, init_sparsity: float, final_sparsity: float, start_epoch: float,
                 end_epoch: float, update_frequency: float) -> float:
    """GMP cubic sparsity in effect at ``epoch`` (float epochs), updated in steps of ``update_frequency``.

    0.0 before ``start_epoch``; ``init_sparsity`` at ``start_epoch``; ``final_sparsity`` at and after
    ``end_epoch``; in between ``s_f + (s_i - s_f)(1 - (t - t0)/(n*dt))**3`` with ``t`` the last update
    time ``t0 + floor((epoch - t0)/dt)*dt``.
    """
    if epoch < start_epoch:
        return 0.0
    span = float(end_epoch) - float(start_epoch)
    if span <= 0 or epoch >= end_epoch:
        return float(final_sparsity)
    dt = float(update_frequency) if update_frequency and update_frequency > 0 else span
    t = start_epoch + math.floor((epoch - start_epoch) / dt + 1e-9) * dt
    frac = min(1.0, max(0.0, (t - start_epoch) / span))
    return float(final_sparsity + (init_sparsity - final_sparsity) * (1.0 - frac) ** 3)


def default_lr_modifiers(training: Dict[str, Any], epochs: Dict[str, float]) -> List[Dict[str, Any]]:
    """Default LR modifiers: set ``init_lr`` at epoch 0 (held through pruning), then an exponential decay
    to ``final_lr`` over the fine-tuning epochs (``gamma = (final/init) ** (1/floor(fine_tune_epochs))``)."""
    init_lr = float(training.get("init_lr") or 0.01)
    final_lr = float(training.get("final_lr") or init_lr * 0.01)
    start = epochs["pruning_end_epoch"]
    end = epochs["total_epochs"]
    mods: List[Dict[str, Any]] = [{"type": "set", "start_epoch": 0.0, "learning_rate": init_lr}]
    if end > start and final_lr != init_lr:
        gamma = (final_lr / init_lr) ** (1.0 / max(1.0, math.floor(end - start)))  # whole-epoch steps
        mods.append({"type": "exponential", "start_epoch": start, "end_epoch": end, "init_lr": init_lr,
                     "gamma": round(gamma, 6)})
    return mods


def validate_lr_modifier(mod: Dict[str, Any]) -> Dict[str, Any]:
    """Check and normalize one LR modifier dict; raises ``ValueError`` with a one-line message.

    Shapes: ``{"type": "set", "start_epoch", "learning_rate"}``;
    ``{"type": "step", "start_epoch", "end_epoch", "init_lr", "step_size" (epochs), "gamma"}``;
    ``{"type": "multistep", "start_epoch", "end_epoch", "init_lr", "milestones" (absolute epochs), "gamma"}``;
    ``{"type": "exponential", "start_epoch", "end_epoch", "init_lr", "gamma"}`` (per epoch).
    ``end_epoch`` -1 means "until the end of training".
    """
    t = mod.get("type")
    if t not in LR_TYPES:
        raise ValueError(f"unknown LR modifier type {t!r}: use one of {', '.join(LR_TYPES)}")
    out: Dict[str, Any] = {"type": t, "start_epoch": float(mod.get("start_epoch", 0.0))}
    if t == "set":
        out["learning_rate"] = float(mod["learning_rate"])
        if out["learning_rate"] <= 0:
            raise ValueError("learning_rate must be > 0")
        return out
    out["end_epoch"] = float(mod.get("end_epoch", -1.0))
    out["init_lr"] = float(mod["init_lr"])
    out["gamma"] = float(mod.get("gamma", 0.1))
    if out["init_lr"] <= 0 or out["gamma"] <= 0:
        raise ValueError("init_lr and gamma must be > 0")
    if t == "step":
        out["step_size"] = float(mod.get("step_size", 1.0))
        if out["step_size"] <= 0:
            raise ValueError("step_size must be > 0")
    if t == "multistep":
        out["milestones"] = sorted(float(m) for m in mod.get("milestones", []))
    return out


def lr_at(epoch: float, modifiers: List[Dict[str, Any]], default_lr: Optional[float] = None) -> Optional[float]:
    """Learning rate at ``epoch`` under ``modifiers`` (applied in start order; the last active wins).

    Within a scheduled modifier the LR changes at whole epochs counted from its ``start_epoch``
    (PyTorch schedulers stepped once per epoch): step ``init*gamma**floor((e-start)/step_size)``,
    multistep ``init*gamma**(number of milestones <= e)``, exponential ``init*gamma**floor(e-start)``.
    After a scheduled modifier's ``end_epoch`` the LR stays at its last value.
    """
    lr = default_lr
    for mod in sorted(modifiers, key=lambda m: float(m.get("start_epoch", 0.0))):
        start = float(mod.get("start_epoch", 0.0))
        if epoch < start:
            continue
        t = mod["type"]
        if t == "set":
            lr = float(mod["learning_rate"])
            continue
        end = float(mod.get("end_epoch", -1.0))
        e = epoch if end < 0 or epoch < end else end
        init, gamma = float(mod["init_lr"]), float(mod["gamma"])
        if t == "step":
            lr = init * gamma ** math.floor((e - start) / float(mod["step_size"]) + 1e-9)
        elif t == "multistep":
            lr = init * gamma ** sum(1 for m in mod.get("milestones", []) if float(m) <= e)
        else:
            lr = init * gamma ** math.floor(e - start + 1e-9)
    return lr


def format_lr_modifiers(modifiers: List[Dict[str, Any]]) -> str:
    """One line per LR modifier, the text form the TUI edits (see :func:`parse_lr_modifiers`)."""
    lines = []
    for m in modifiers:
        if m["type"] == "set":
            lines.append(f"set {m.get('start_epoch', 0):g} lr={m['learning_rate']:g}")
            continue
        end = float(m.get("end_epoch", -1))
        rng = f"{m.get('start_epoch', 0):g}-{end:g}" if end >= 0 else f"{m.get('start_epoch', 0):g}-end"
        extra = ""
        if m["type"] == "step":
            extra = f" step={m['step_size']:g}"
        elif m["type"] == "multistep":
            extra = " milestones=" + ",".join(f"{x:g}" for x in m.get("milestones", []))
        lines.append(f"{m['type']} {rng} lr={m['init_lr']:g}{extra} gamma={m['gamma']:g}")
    return "\n".join(lines)


def parse_lr_modifiers(text: str) -> List[Dict[str, Any]]:
    """Parse the text form, one modifier per line (``#`` comments and blank lines ignored)::

        set 0 lr=0.01
        step 10-50 lr=0.01 step=5 gamma=0.5
        multistep 10-end lr=0.01 milestones=20,30 gamma=0.1
        exponential 34-59 lr=0.01 gamma=0.85

    Raises ``ValueError`` naming the bad line.
    """
    out = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        try:
            kind = {"exp": "exponential", "multi": "multistep", "multi-step": "multistep"}.get(parts[0], parts[0])
            kv = dict(p.split("=", 1) for p in parts[2:])
            if kind == "set":
                mod: Dict[str, Any] = {"type": "set", "start_epoch": float(parts[1]), "learning_rate": float(kv["lr"])}
            else:
                start, _, end = parts[1].partition("-")
                mod = {"type": kind, "start_epoch": float(start),
                       "end_epoch": -1.0 if end in ("", "end") else float(end),
                       "init_lr": float(kv["lr"]), "gamma": float(kv.get("gamma", 0.1))}
                if kind == "step":
                    mod["step_size"] = float(kv.get("step", kv.get("step_size", 1)))
                if kind == "multistep":
                    mod["milestones"] = [float(x) for x in kv.get("milestones", "").split(",") if x]
            out.append(validate_lr_modifier(mod))
        except (IndexError, KeyError, ValueError) as err:
            raise ValueError(f"line {no} {raw.strip()!r}: {err}; e.g. 'step 10-50 lr=0.01 step=5 gamma=0.5'") from None
    return out
