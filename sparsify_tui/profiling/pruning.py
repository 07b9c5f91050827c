"""Magnitude pruning of one weight tensor, exact to the weight count.

Used by the one-shot loss profile, the weight-magnitude profile and one-shot apply, so that every
place that says "pruned to sparsity s" removes exactly the same weights.
"""

from __future__ import annotations

from typing import Iterator

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
    if order is None:
        return next(magnitude_prune_levels(weight, [sparsity]))
    k = pruned_count(weight.size, sparsity)
    out = np.array(weight, copy=True)
    if k:
        out.reshape(-1)[order[:k]] = 0
    return out


def magnitude_prune_levels(weight: np.ndarray, sparsities) -> "Iterator[np.ndarray]":
    """Yield :func:`magnitude_prune` ``(weight, s)`` for each ``s`` in ``sparsities``, in order, without a sort.

    The same weights are removed as with the stable :func:`magnitude_order` (ties at the threshold go in
    index order), but one ``np.partition`` on all the counts replaces the O(n log n) sort: for the
    level removing k weights, the threshold t is the k-th smallest |w|; every |w| < t is removed, then
    the first (in index order) of the |w| == t until k are removed. Each yielded array is a new copy.
    Raises ``ValueError`` for a sparsity outside [0, 1].
    """
    flat_w = np.asarray(weight)
    a = np.abs(flat_w).reshape(-1)  # |w| is exact in the weight's own float type, so the order is the same
    counts = [pruned_count(a.size, s) for s in sparsities]
    kth = sorted({k - 1 for k in counts if k > 0})
    part = np.partition(a, kth) if kth else a
    for k in counts:
        out = np.array(weight, copy=True)
        if k:
            t = part[k - 1]
            mask = a <= t
            extra = int(np.count_nonzero(mask)) - k  # ties at t beyond the count: keep the last ones
            if extra > 0:
                ties = np.flatnonzero(a == t)
                mask[ties[len(ties) - extra:]] = False
            np.putmask(out.reshape(-1), mask, 0)
        yield out
