"""Magnitude pruning of one weight tensor, exact to the weight count.

Used by the one-shot loss profile, the weight-magnitude profile and one-shot apply, so that every
place that says "pruned to sparsity s" removes exactly the same weights.
"""

from __future__ import annotations

import numpy as np


def pruned_count(num_weights: int, sparsity: float) -> int:
    """Number of weights zeroed at ``sparsity``: ``round(sparsity * num_weights)``, clipped to [0, n].

    Raises ``ValueError`` for a sparsity outside [0, 1].
    """
    if not 0.0 <= float(sparsity) <= 1.0:
        raise ValueError(f"sparsity must be in [0, 1], got {sparsity}")
    return int(min(num_weights, max(0, round(float(sparsity) * num_weights))))


def magnitude_order(weight: np.ndarray) -> np.ndarray:
    """Flat indices of ``weight`` sorted by ascending ``|w|`` (stable, so ties keep index order).

    Shape: ``(weight.size,)``, dtype int64. Compute it once per layer and reuse it for every level.
    """
    return np.argsort(np.abs(weight, dtype=np.float64).ravel(), kind="stable")


def magnitude_prune(weight: np.ndarray, sparsity: float, order: np.ndarray | None = None) -> np.ndarray:
    """A copy of ``weight`` (any shape, float dtype) with the ``pruned_count(w.size, sparsity)`` smallest-|w|
    entries set to zero. Existing zeros count among the smallest, so an already sparse layer is not
    pruned further than needed.

    ``order`` is an optional precomputed :func:`magnitude_order` of the same weight.
    Raises ``ValueError`` for a sparsity outside [0, 1].
    """
    k = pruned_count(weight.size, sparsity)
    out = np.array(weight, copy=True)
    if k:
        idx = magnitude_order(weight) if order is None else order
        out.reshape(-1)[idx[:k]] = 0
    return out
