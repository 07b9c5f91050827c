"""The channel time model and the greedy allocation on small hand-made models (pure functions, no runtime)."""

from __future__ import annotations

import pytest

from sparsify_tui.analysis.channels import NodeChannels, node_fraction, shares_kept
from sparsify_tui.optimization.channel_model import (
    ChannelTimeModel, GroupInput, TimedNode, allocate_channels, measure,
)
from sparsify_tui.optimization.config import GRID_LEVELS
from sparsify_tui.profiling.channel_calibration import fit_node, monotone_points, node_time


def test_node_fraction_rules():
    layer = NodeChannels("l", "Conv", "layer", {"a": 1.0}, {"b": 0.5}, macs=100)
    kf = {"a": 0.5, "b": 0.25}
    assert shares_kept({"b": 0.5}, kf) == pytest.approx(1 - 0.5 * 0.75)
    assert node_fraction(layer, kf) == pytest.approx(0.5 * (1 - 0.5 * 0.75))
    dw = NodeChannels("d", "Conv", "depthwise", {"a": 1.0}, {"a": 1.0})
    assert node_fraction(dw, kf) == 0.5  # its channels once, not squared
    other = NodeChannels("r", "Relu", "other", {}, {})
    assert node_fraction(other, kf) == 1.0


def model3() -> ChannelTimeModel:
    """x -> L1 (out a, 64) -> L2 (in a, out b, 64) -> L3 (in b, fixed out): L2's time depends on both groups."""
    nodes = [
        TimedNode(NodeChannels("L1", "Conv", "layer", {}, {"a": 1.0}, macs=100, params=10), 1.0),
        TimedNode(NodeChannels("L2", "Conv", "layer", {"a": 1.0}, {"b": 1.0}, macs=400, params=40), 4.0),
        TimedNode(NodeChannels("L3", "Conv", "layer", {"b": 1.0}, {}, macs=100, params=10), 1.0),
    ]
    return ChannelTimeModel(kind="per-node", nodes=nodes, groups={"a": 64, "b": 64}, round_to=8,
                            macs_total=600, params_total=60, baseline_ms=6.0)


def test_time_model_is_bilinear_in_the_two_groups():
    tm = model3()
    assert tm.latency({}) == pytest.approx(6.0)
    kf = tm.kept_fraction({"a": 0.5, "b": 0.5})
    assert kf == {"a": 0.5, "b": 0.5}
    assert tm.total(kf) == pytest.approx(0.5 + 4 * 0.25 + 0.5)
    assert tm.macs(kf) == pytest.approx(600 - 50 - 300 - 50)
    assert measure(tm, "speedup", kf, 128) == pytest.approx(6.0 / 2.0)


def rows(loss_a, loss_b):
    return [GroupInput("a", 64, True, 0.0, [loss_a * s for s in GRID_LEVELS], [s for s in GRID_LEVELS]),
            GroupInput("b", 64, True, 0.0, [loss_b * s for s in GRID_LEVELS], [s for s in GRID_LEVELS])]


def test_allocation_reaches_the_target_on_the_cheaper_group_first():
    tm = model3()
    res = allocate_channels(tm, rows(10.0, 1.0), target="speedup", value=1.3, balance=1.0, cap=0.7)
    assert res.achieved >= 1.3 - 1e-9 and not res.warnings
    assert res.ratios["b"] > res.ratios["a"]  # b hurts 10x less for the same time
    for g, r in res.ratios.items():
        assert r <= 0.7 + 1e-9 and round((1 - r) * 64) % 8 == 0
    # MACs target and the all-channels target
    m = allocate_channels(tm, rows(1.0, 1.0), target="macs", value=2.0, balance=0.5, cap=0.7)
    assert m.achieved >= 2.0 - 1e-9
    s = allocate_channels(tm, rows(1.0, 1.0), target="sparsity", value=0.25, balance=0.5, cap=0.7)
    assert s.achieved >= 0.25 - 1e-9
    # unreachable: every group at its cap, with a warning naming the most
    hard = allocate_channels(tm, rows(1.0, 1.0), target="speedup", value=20.0, balance=0.5, cap=0.7)
    assert hard.warnings and "not reachable" in hard.warnings[0]
    assert hard.ratios == {"a": pytest.approx(1 - 24 / 64), "b": pytest.approx(1 - 24 / 64)}


def test_fixed_groups_keep_their_ratio():
    tm = model3()
    r = rows(1.0, 1.0)
    r[0] = GroupInput("a", 64, False, 0.5, r[0].loss, r[0].gain)  # an override
    res = allocate_channels(tm, r, target="speedup", value=1.5, balance=0.5, cap=0.7)
    assert res.ratios["a"] == 0.5
    uni = allocate_channels(tm, r, target="uniform", value=0.25, balance=0.5, cap=0.7)
    assert uni.ratios == {"a": 0.5, "b": 0.25}


def test_head_groups_round_to_whole_heads():
    """A 12-head group under a 16-channel CPU block: rounded to 16 it could never shrink; it rounds to whole heads
    (group_round_to), and its batched attention MatMul scales once with the kept heads."""
    nodes = [TimedNode(NodeChannels("q", "MatMul", "layer", {}, {"h": 1.0}, macs=600), 6.0),
             TimedNode(NodeChannels("scores", "MatMul", "batched", {"h": 1.0}, {"h": 1.0}, macs=100), 1.0),
             TimedNode(NodeChannels("o", "MatMul", "layer", {"h": 1.0}, {}, macs=600), 6.0)]
    rows_h = [GroupInput("h", 12, True, 0.0, list(GRID_LEVELS), list(GRID_LEVELS))]
    tm = ChannelTimeModel(kind="macs", nodes=nodes, groups={"h": 12}, round_to=16, macs_total=1300)
    assert allocate_channels(tm, rows_h, target="uniform", value=0.3, balance=0.5, cap=0.7).ratios == {"h": 0.0}
    tm = ChannelTimeModel.from_dict({**tm.to_dict(), "group_round_to": {"h": 1}})
    assert tm.to_dict()["group_round_to"] == {"h": 1}
    res = allocate_channels(tm, rows_h, target="uniform", value=0.3, balance=0.5, cap=0.7)
    assert res.ratios == {"h": pytest.approx(1 - 8 / 12)}
    assert tm.macs(tm.kept_fraction(res.ratios)) == pytest.approx(1300 * 8 / 12)


def test_calibration_fit_helpers():
    t0, c0, c1 = fit_node([1.0, 0.5, 0.25], [4.0, 2.4, 1.6])
    assert t0 == 4.0 and c0 == pytest.approx(0.2) and c1 == pytest.approx(0.8)
    c = {"t0": t0, "c0": c0, "c1": c1, "pts": monotone_points([1.0, 0.5, 0.25], [4.0, 2.4, 1.6])}
    assert node_time(c, 0.5) == pytest.approx(2.4) and node_time(c, 0.75) == pytest.approx(3.2)
    assert node_time(c, 0.0) == pytest.approx(1.6 - 3.2 * 0.25)  # below the points: along the fitted line
    assert fit_node([1.0, 1.0, 1.0], [2.0, 2.2, 1.8]) == (2.0, pytest.approx(1.0), 0.0)  # work never changes


def test_noisy_points_are_made_monotone_by_pooling():
    # a thinned pass that ran slower than the dense one is noise: pooled to the mean, never the max
    assert monotone_points([1.0, 0.5, 0.25], [4.0, 4.6, 1.6]) == [[0.25, 1.6], [0.5, pytest.approx(4.3)],
                                                                  [1.0, pytest.approx(4.3)]]
    assert monotone_points([1.0, 0.5, 0.5], [4.0, 2.0, 3.0]) == [[0.5, 2.5], [1.0, 4.0]]


def test_allocation_does_not_stall_where_only_moves_together_gain():
    # one layer between groups a and b whose measured time is flat down to 40 % of its work: thinning either
    # group alone (at most 50 %) gains nothing, both together do; the caps allow 1.76x
    nodes = [TimedNode(NodeChannels("L", "Conv", "layer", {"a": 1.0}, {"b": 1.0}, macs=400, params=40), 4.0,
                       pts=[[0.14, 1.0], [0.4, 4.0], [1.0, 4.0]])]
    tm = ChannelTimeModel(kind="calibrated", nodes=nodes, groups={"a": 64, "b": 64}, round_to=8, macs_total=400,
                          params_total=40, baseline_ms=4.0)
    res = allocate_channels(tm, rows(1.0, 1.0), target="speedup", value=1.5, balance=0.5, cap=0.5)
    assert not res.warnings and res.achieved >= 1.5 - 1e-9 and res.reachable > 1.7
    assert tm.speedup(tm.kept_fraction(res.ratios)) == pytest.approx(res.achieved)


def test_calibration_warns_when_other_processes_competed_for_the_cpus():
    from sparsify_tui.profiling.channel_calibration import busy_warning

    assert busy_warning([0.1, 2.1], cores=2, cpus=2) is None  # only our two threads
    assert busy_warning([0.2, 1.4], cores=1, cpus=4) is None  # room to spare
    w = busy_warning([3.0, 5.2], cores=2, cpus=2)
    assert w and "load about 3.2" in w and "profile channel-calibration" in w


def test_allocation_lands_on_the_target_with_rows_that_follow_the_whole_model():
    # layout conversions follow the model's MACs fraction: every move changes them, also for groups that share no
    # layer with the one moved (their pending moves must be measured again when taken); random chains of layers
    import numpy as np

    rng = np.random.default_rng(0)
    for trial in range(40):
        n = 6
        groups = {f"g{i}": int(rng.choice([16, 32, 64])) for i in range(n)}
        nodes, macs = [], 0
        for i in range(n + 1):
            ins = {f"g{i - 1}": 1.0} if i > 0 else {}
            outs = {f"g{i}": 1.0} if i < n else {}
            m = int(rng.integers(50, 500))
            macs += m
            nodes.append(TimedNode(NodeChannels(f"L{i}", "Conv", "layer", ins, outs, macs=m, params=m // 10),
                                   float(rng.uniform(0.5, 4.0))))
        xs = np.sort(rng.uniform(0.05, 0.95, 3))
        ys = np.sort(rng.uniform(0.2, 4.0, 4))
        special = [{"id": "[layout conversion]", "t0": float(ys[-1]), "c0": 0.0, "c1": 1.0,
                    "pts": [[float(x), float(y)] for x, y in zip(list(xs) + [1.0], ys)]}]
        tm = ChannelTimeModel(kind="calibrated", nodes=nodes, groups=groups, round_to=8, macs_total=macs,
                              params_total=macs // 10, baseline_ms=10.0, special=special)
        rs = [GroupInput(g, c, True, 0.0, [float(rng.uniform(0.5, 2)) * s for s in GRID_LEVELS],
                         [s for s in GRID_LEVELS]) for g, c in groups.items()]
        for x in (1.2, 1.5, 2.0):
            res = allocate_channels(tm, rs, target="speedup", value=x, balance=0.5, cap=0.7)
            if res.warnings:
                continue
            assert res.achieved == pytest.approx(tm.speedup(tm.kept_fraction(res.ratios)))
            assert res.achieved >= x - 1e-9, (trial, x, res.achieved)  # the target holds
