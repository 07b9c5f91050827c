import numpy as np
import pytest

from sparsify_tui.engine.pruning import magnitude_order, magnitude_prune, magnitude_prune_levels, pruned_count


@pytest.mark.parametrize("sparsity", [0.0, 0.2, 0.5, 0.85, 0.975, 1.0])
def test_magnitude_prune_is_exact_to_the_weight_count(sparsity):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(16, 8, 3, 3)).astype(np.float32)
    out = magnitude_prune(w, sparsity)
    assert out.shape == w.shape and out.dtype == w.dtype
    assert int((out == 0).sum()) == round(sparsity * w.size)
    # The kept weights are the largest ones and are unchanged.
    kept = out != 0
    if kept.any() and (~kept).any():
        assert np.abs(w[kept]).min() >= np.abs(w[~kept]).max()
    np.testing.assert_array_equal(out[kept], w[kept])
    # The input is not modified.
    assert (w == 0).sum() == 0


def test_existing_zeros_count_toward_sparsity_and_order_is_reusable():
    w = np.array([0.0, 3.0, -0.5, 0.0, 2.0, -4.0], dtype=np.float32)
    order = magnitude_order(w)
    out = magnitude_prune(w, 0.5, order)
    np.testing.assert_array_equal(out, [0.0, 3.0, 0.0, 0.0, 2.0, -4.0])
    assert pruned_count(6, 0.5) == 3


def test_sparsity_out_of_range_is_rejected():
    with pytest.raises(ValueError):
        magnitude_prune(np.ones(4, np.float32), 1.5)


def test_levels_without_a_sort_remove_the_same_weights_as_the_stable_order():
    # Ties at the threshold (many equal |w|, both signs, existing zeros) must go in index order exactly
    # as with the stable argsort, or one-shot and apply would disagree on which weights a level removes.
    rng = np.random.default_rng(3)
    w = rng.integers(-4, 5, size=(12, 5, 3, 3)).astype(np.float32) / 4
    levels = [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99, 1.0]
    order = magnitude_order(w)
    for s, got in zip(levels, magnitude_prune_levels(w, levels)):
        np.testing.assert_array_equal(got, magnitude_prune(w, s, order))
        assert int((got == 0).sum()) >= pruned_count(w.size, s)
    assert np.array_equal(magnitude_prune(w, 0.5), magnitude_prune(w, 0.5, order))
    # one reused buffer, zeroed further level by level, gives the same arrays
    for s, got in zip(levels, magnitude_prune_levels(w, levels, reuse=True)):
        np.testing.assert_array_equal(got, magnitude_prune(w, s, order))
    with pytest.raises(ValueError):
        list(magnitude_prune_levels(w, [0.5, 0.2], reuse=True))


@pytest.mark.parametrize("seed", range(4))
def test_levels_match_the_stable_order_on_continuous_weights(seed):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(64, 32, 3, 3)).astype(np.float32)
    w[rng.random(w.shape) < 0.3] = 0  # an already sparse layer: ties at zero
    levels = [0.1, 0.2, 0.3, 0.5, 0.9, 0.99]
    order = magnitude_order(w)
    for s, got in zip(levels, magnitude_prune_levels(w, levels, reuse=True)):
        np.testing.assert_array_equal(got, magnitude_prune(w, s, order))
