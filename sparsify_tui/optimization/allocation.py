"""Distribute a target average sparsity over the prunable layers.

Algorithm (a Lagrangian relaxation solved by bisection):

1. Each layer ``i`` has ``n_i`` weights, a loss curve ``L_i(s)`` (loss sensitivity above dense, made
   non-decreasing) and a gain curve ``G_i(s)`` (time saved at sparsity s: ``t_i(0) - t_i(s)`` from the
   perf profile's estimated pruned times, or FLOPs-proportional for the FLOPS profile). Both are
   normalised by their sum over layers at 0.99, so each totals 1 for the whole model.
2. Cost of layer ``i`` at ``s``: ``c_i(s) = balance * L_i(s) - (1 - balance) * G_i(s)``. The perf term
   *rewards* time saved: layers that save much time for little loss are the cheapest to prune, so they are
   pruned first (the original Sparsify had this sign inverted).
3. Fixed layers: overrides (kept as the user set them), excluded layers (first layer, depthwise/grouped
   convs) and filtered ones (time saved at the cap below ``min_perf_gain`` of the model time) at 0.
   Free layers choose ``s`` from ``{0} U [min_sparsity, cap_i]`` in steps of 0.005, where ``cap_i`` is
   ``max_sparsity`` lowered to the last level with recoverability ``>= min_recovery``.
4. For a multiplier ``lam`` every free layer takes ``s_i(lam) = argmin_s c_i(s) - lam * (n_i/N) * s``.
   The params-weighted average ``sum n_i s_i / N`` (over *all* prunable layers, dense ones included) is
   non-decreasing in ``lam``; bisection finds the ``lam`` where it crosses the target.
5. At the crossing, the layers that jump are moved one at a time (largest gain per weight first) and the
   last one takes the fractional value that lands on the target (0 or ``min_sparsity`` if the fraction
   would fall into the forbidden gap). Any error left by that gap is spread over the pruned free layers:
   lowered proportionally toward ``min_sparsity`` (overshoot) or raised toward their caps (undershoot).
   The result is within 0.005 of the target whenever the caps, filters, exclusions and overrides allow
   the target at all; otherwise every free layer is at its cap and a warning gives the reachable average.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from sparsify_tui.optimization.layer_curves import GRID_LEVELS
from sparsify_tui.optimization.record import LayerRow, Settings

STEP = 0.005


@dataclass
class Allocation:
    """Result of :func:`allocate`.

    ``sparsities``: weight name -> sparsity (0..1) for every layer; ``reasons``: weight name -> why a layer
    is dense or fixed ("override", "first layer", "depthwise/grouped conv", "filter: min perf gain",
    "filter: min recovery", "dense: below min sparsity") or None; ``avg_sparsity``: params-weighted average over
    all prunable layers; ``max_reachable``: the highest average the constraints allow; ``warnings``.
    """

    sparsities: Dict[str, float]
    reasons: Dict[str, Optional[str]]
    avg_sparsity: float
    max_reachable: float
    multiplier: float = 0.0
    warnings: List[str] = field(default_factory=list)


def _norm(curves: np.ndarray) -> np.ndarray:
    total = float(curves[:, -1].sum())
    return curves / total if total > 0 else np.zeros_like(curves)


def recoverability(loss_curves: np.ndarray) -> np.ndarray:
    """Per layer and level: ``1 - L_i(s) / max_j L_j(0.99)``, in [0, 1] (1 = this layer shows no loss)."""
    top = float(loss_curves[:, -1].max()) if loss_curves.size else 0.0
    if top <= 0:
        return np.ones_like(loss_curves)
    return np.clip(1.0 - loss_curves / top, 0.0, 1.0)


def _fixed_and_free(layers: List[LayerRow], settings: Settings, overrides: Dict[str, float], rec: np.ndarray,
                    gain: np.ndarray):
    """Step 3: fix the overridden, excluded and filtered layers, and cap the free ones.

    Returns ``(s_out, reasons, free, caps)``: the fixed sparsities and every layer's reason by weight name, the
    indices of the free layers, and each free layer's cap (index -> sparsity)."""
    grid = np.asarray(GRID_LEVELS)
    time0 = sum(l.time_curve[0] for l in layers) or 1.0
    s_out: Dict[str, float] = {}
    reasons: Dict[str, Optional[str]] = {}
    free: List[int] = []
    caps: Dict[int, float] = {}
    for i, l in enumerate(layers):
        w = l.weight_name
        if w in overrides:
            s_out[w] = float(min(0.99, max(0.0, overrides[w])))
            reasons[w] = "override"
            continue
        if l.excluded:
            s_out[w], reasons[w] = 0.0, l.excluded
            continue
        cap = settings.max_sparsity
        if settings.min_recovery > 0:
            fine = np.arange(0.0, settings.max_sparsity + 1e-9, STEP)
            r_fine = np.interp(fine, grid, rec[i])
            okf = fine[r_fine >= settings.min_recovery - 1e-12]
            cap = float(okf.max()) if len(okf) else 0.0
        if cap < settings.min_sparsity - 1e-9:
            s_out[w], reasons[w] = 0.0, "filter: min recovery"
            continue
        saved = float(np.interp(cap, grid, gain[i]))
        if settings.min_perf_gain > 0 and saved / time0 < settings.min_perf_gain:
            s_out[w], reasons[w] = 0.0, "filter: min perf gain"
            continue
        free.append(i)
        caps[i] = cap
        reasons[w] = None
    return s_out, reasons, free, caps


class _FreeLayers:
    """Steps 2 and 4 over the free layers: each layer's candidate sparsities ``S`` (0 and [min_sparsity, cap] in
    STEP steps, padded with the cap), their costs ``C``, and the choice ``pick(lam)`` at a multiplier."""

    def __init__(self, free: List[int], caps: Dict[int, float], n: np.ndarray, N: float, loss: np.ndarray,
                 gain: np.ndarray, settings: Settings):
        grid = np.asarray(GRID_LEVELS)
        lossn, gainn = _norm(loss), _norm(gain)
        self.free, self.n = free, n[free]
        self.caps = np.array([caps[i] for i in free])
        options = []
        for i in free:
            lo = settings.min_sparsity if settings.min_sparsity > 0 else STEP
            vals = np.arange(lo, caps[i] + 1e-9, STEP)
            vals = np.unique(np.concatenate([[0.0], vals, [caps[i]]]))
            options.append(vals)
        width = max(len(v) for v in options)
        S = np.zeros((len(free), width))
        for r, vals in enumerate(options):
            S[r, : len(vals)] = vals
            S[r, len(vals):] = vals[-1]
        C = np.empty_like(S)
        b = settings.balance
        for r, i in enumerate(free):
            C[r] = b * np.interp(S[r], grid, lossn[i]) - (1.0 - b) * np.interp(S[r], grid, gainn[i])
        self.S, self.C, self.w = S, C, n[free] / N
        # tiny tie-breaker: among equal costs prefer pruning layers with more time saved per weight
        tb = np.array([float(np.interp(0.9, grid, gain[i])) / max(n[i], 1.0) for i in free])
        self.tb = 1e-9 * tb / (tb.max() if tb.max() > 0 else 1.0)

    def pick(self, lam: float) -> np.ndarray:
        obj = self.C - (lam * self.w + self.tb)[:, None] * self.S
        return self.S[np.arange(len(self.free)), obj.argmin(axis=1)]

    def total(self, sv: np.ndarray) -> float:
        return float((self.n * sv).sum())

    def bisect(self, target_sum: float):
        """Step 4: the multipliers ``(lo, hi)`` bracketing the crossing of ``target_sum``, ``hi - lo`` tiny."""
        lo, hi = -1.0, 1.0
        while self.total(self.pick(lo)) > target_sum and lo > -1e12:
            lo *= 4
        while self.total(self.pick(hi)) < target_sum and hi < 1e12:
            hi *= 4
        for _ in range(200):
            mid = (lo + hi) / 2
            if self.total(self.pick(mid)) < target_sum:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-12 * max(1.0, abs(hi)):
                break
        return lo, hi

    def land_on_target(self, lo: float, hi: float, target_sum: float, min_sparsity: float) -> np.ndarray:
        """Step 5: from ``pick(lo)``, move the layers that jump between ``lo`` and ``hi`` one at a time (largest
        gain per weight first); the last takes the fraction that lands on ``target_sum``, outside the gap."""
        s_lo, s_hi = self.pick(lo), self.pick(hi)
        chosen = s_lo.copy()
        diff = [r for r in range(len(self.free)) if s_hi[r] != s_lo[r]]
        diff.sort(key=lambda r: -self.tb[r])
        need = target_sum - self.total(chosen)
        for r in diff:
            step_w = self.n[r] * (s_hi[r] - s_lo[r])
            if step_w <= need + 1e-9:
                chosen[r] = s_hi[r]
                need -= step_w
                continue
            part = s_lo[r] + need / self.n[r]
            if 0 < part < min_sparsity:
                up = self.n[r] * min_sparsity - need
                part = min_sparsity if up < need else 0.0
            chosen[r] = part
            break
        return chosen

    def spread_gap_error(self, chosen: np.ndarray, target_sum: float, N: float, min_sparsity: float) -> np.ndarray:
        """The min-sparsity gap (0 or >= min) can leave an error: spread it over the pruned free layers, lowering
        them toward min_sparsity (overshoot) or raising them toward their caps (undershoot)."""
        err = self.total(chosen) - target_sum
        pruned = chosen > 0
        if err > 1e-6 * N:
            room = float((self.n * np.where(pruned, chosen - min_sparsity, 0.0)).sum())
            if room > 0:
                theta = min(1.0, err / room)
                chosen = np.where(pruned, chosen - theta * (chosen - min_sparsity), chosen)
        elif err < -1e-6 * N:
            room = float((self.n * np.where(pruned, self.caps - chosen, 0.0)).sum())
            if room > 0:
                theta = min(1.0, -err / room)
                chosen = np.where(pruned, chosen + theta * (self.caps - chosen), chosen)
        return chosen


def allocate(layers: List[LayerRow], settings: Settings, overrides: Optional[Dict[str, float]] = None) -> Allocation:
    """Per-layer sparsities for ``layers`` (rows with their curves, from a structure's ``build_layers``) under
    ``settings``.

    ``overrides``: weight name -> sparsity fixed by the user (kept as is, still capped to [0, 0.99]).
    See the module docstring for the algorithm. Pure and deterministic.
    """
    settings.validate()
    grid = np.asarray(GRID_LEVELS)
    n = np.array([max(0, int(l.params)) for l in layers], dtype=np.float64)
    N = float(n.sum()) or 1.0
    loss = np.array([l.loss_curve for l in layers], dtype=np.float64).reshape(len(layers), len(grid))
    gain = np.array([l.gain_curve for l in layers], dtype=np.float64).reshape(len(layers), len(grid))
    s_out, reasons, free, caps = _fixed_and_free(layers, settings, dict(overrides or {}), recoverability(loss), gain)

    fixed_sum = sum(n[i] * s_out[l.weight_name] for i, l in enumerate(layers) if l.weight_name in s_out)
    target_sum = settings.sparsity * N - fixed_sum
    max_sum = sum(n[i] * caps[i] for i in free)
    max_reachable = (fixed_sum + max_sum) / N
    warnings: List[str] = []
    lam_final = 0.0

    if free:
        fl = _FreeLayers(free, caps, n, N, loss, gain, settings)
        if target_sum <= 0:
            chosen = np.zeros(len(free))
        elif target_sum >= max_sum - 1e-9:
            chosen = fl.caps.copy()
            if target_sum > max_sum + 1e-9:
                warnings.append(
                    f"target {settings.sparsity:.2f} is not reachable with these caps, exclusions, filters and "
                    f"overrides: the most is {max_reachable:.3f}; every free layer is at its cap")
        else:
            lo, hi = fl.bisect(target_sum)
            lam_final = hi
            chosen = fl.land_on_target(lo, hi, target_sum, settings.min_sparsity)
            chosen = fl.spread_gap_error(chosen, target_sum, N, settings.min_sparsity)
        for r, i in enumerate(free):
            name = layers[i].weight_name
            s_out[name] = round(float(chosen[r]), 4)
            if chosen[r] == 0 and reasons[name] is None:
                reasons[name] = "dense: below min sparsity"
    elif target_sum > 1e-9:
        warnings.append(f"no layer is free to prune: every layer is excluded, filtered or overridden "
                        f"(average {max_reachable:.3f})")

    avg = sum(n[i] * s_out[l.weight_name] for i, l in enumerate(layers)) / N
    return Allocation(sparsities=s_out, reasons=reasons, avg_sparsity=float(avg),
                      max_reachable=float(max_reachable), multiplier=float(lam_final), warnings=warnings)
