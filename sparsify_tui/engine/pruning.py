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


def magnitude_prune_levels(weight: np.ndarray, sparsities, reuse: bool = False) -> Iterator[np.ndarray]:
    """Yield :func:`magnitude_prune` ``(weight, s)`` for each ``s`` in ``sparsities``, in order, without a sort.

    The same weights are removed as with the stable :func:`magnitude_order` (ties at the threshold go in
    index order). One ``np.argpartition`` on every level's count k (and k − 1) replaces the O(n log n)
    sort, and the levels are nested, so each level only zeroes the indices ranked between the previous
    count and its own. When equal nonzero |w| straddle a level's count (``|w|`` ranked k equals the one
    ranked k − 1), that level is chosen exactly by mask instead: every |w| < t, then the first of the
    |w| == t in index order.

    ``reuse=True`` (sparsities non-decreasing, else ``ValueError``) yields one buffer zeroed further at
    each level: use each array before asking for the next. Otherwise each yielded array is a new copy.
    Raises ``ValueError`` for a sparsity outside [0, 1].
    """
    a = np.abs(np.asarray(weight)).reshape(-1)  # |w| is exact in the weight's own float type
    n = a.size
    counts = [pruned_count(n, s) for s in sparsities]
    if reuse and any(b < c for c, b in zip(counts, counts[1:])):
        raise ValueError("reuse=True needs non-decreasing sparsities")
    kth = sorted({j for k in counts if k > 0 for j in (k - 1, k) if j < n})
    idx = np.argpartition(a, kth) if kth else np.arange(n)
    buf = np.array(weight, copy=True)
    flat = buf.reshape(-1)
    zeroed = 0  # idx[:zeroed] are zero in buf
    for k in counts:
        if not reuse:
            buf = np.array(weight, copy=True)
            flat, zeroed = buf.reshape(-1), 0
        if k > zeroed:
            t = a[idx[k - 1]]
            if k < n and t != 0 and a[idx[k]] == t:  # ties straddle the count: exact choice by mask
                mask = a < t
                need = k - int(np.count_nonzero(mask))
                mask[np.flatnonzero(a == t)[:need]] = True
                np.putmask(flat, mask, 0)
            else:
                flat[idx[zeroed:k]] = 0
                zeroed = k
        yield buf
