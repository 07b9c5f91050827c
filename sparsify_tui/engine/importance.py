"""Output-aware channel importance: which channels of a group to remove, judged on calibration data.

:func:`~sparsify_tui.analysis.channels.channel_importance` ranks channels by their weights alone (group L2 norm).
A channel with large weights may carry little signal, and the weights say nothing about what the next layer does
with it. The two rankings here run the **original** model on calibration items and look at the *consumers* of each
group (the layers reading its channels), where removing a channel takes effect:

* ``"activation"``: for channel ``c``, ``Σ_consumers ‖W[:, c]‖₂ · mean|x_c|``: the consumer's weights on that input
  channel (every output and kernel tap) times the channel's mean absolute activation at the consumer's input, over
  every position and item (the "activation-weighted" criterion of issue 23; the product bounds the channel's
  contribution to the consumer output, as in Molchanov et al., "Importance Estimation for Neural Network
  Pruning", CVPR 2019, first-order term without gradients).
* ``"thinet"``: the greedy channel selection of Luo et al., "ThiNet: A Filter Level Pruning Method for Deep Neural
  Network Compression" (ICCV 2017, section 3.2): on sampled outputs ``y_s = Σ_c v_s,c`` of the consumers (a random
  output channel at a random position per sample, ``v_s,c`` the part input channel ``c`` contributes), channels are
  removed one at a time, each time the one whose removal adds least to ``Σ_s (Σ_{c removed} v_s,c)²`` (each
  consumer's samples weighted by ``1/Σ_s y_s²``, so every consumer counts by its relative error). The removal
  order is the ranking: removed first = least important. Done exactly on the Gram matrix ``Q = VᵀV`` of the
  contributions (``C × C`` per group).

Both return ``{group id: float64[channels]}`` (higher = keep), as
:func:`~sparsify_tui.analysis.channels.channel_importance` does, so :func:`~sparsify_tui.analysis.channels.
choose_removed` and rounding work the same. Channels no consumer reads keep their group-L2 order below them.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import onnx

from sparsify_tui.analysis.graph import node_id
from sparsify_tui.errors import SparsifyError
from sparsify_tui.progress import CancelToken, ProgressFn, maybe_check

#: the importance methods that need calibration data (the others, ``l2`` and ``bn_scale``, read weights only)
DATA_METHODS = ("activation", "thinet")
#: ThiNet samples per consumer and item
THINET_SAMPLES = 64


def data_importance(model_path, model: onnx.ModelProto, groups, feeds: Sequence[dict], method: str, *,
                    base_dir=None, samples_per_item: int = THINET_SAMPLES, seed: int = 0, engine: Any = None,
                    core_count: Optional[int] = None, progress: Optional[ProgressFn] = None,
                    cancel: Optional[CancelToken] = None) -> dict:
    """``{group id: float64[channels]}`` (higher = keep) for every prunable group by ``method`` (module docstring).

    Args:
        model_path: the ``.onnx`` file the groups were found on (run on ``feeds``, one session).
        model: that model (structure; weights read from ``base_dir`` when not in the proto).
        groups: :class:`~sparsify_tui.analysis.channels.ChannelGroups` of ``model``.
        feeds: calibration batches, at least one.
        method: ``"activation"`` or ``"thinet"``.

    Raises ``SparsifyError`` (unknown method, no feeds), ``ModelError``, ``JobCanceled``."""
    from sparsify_tui.analysis.channels import channel_importance
    from sparsify_tui.engine import get_engine
    from sparsify_tui.engine.reconstruction import _Runner
    from sparsify_tui.engine.timing import canceled_as_job

    if method not in DATA_METHODS:
        raise SparsifyError(f"unknown data importance {method!r}: use {' or '.join(DATA_METHODS)}")
    if not feeds:
        raise SparsifyError(f"--importance {method} needs calibration data: give --data FILE.npz")
    engine = get_engine(engine)
    prog = progress or (lambda s, f: None)
    rng = np.random.default_rng(seed)
    l2 = channel_importance(model, groups, "l2", base_dir=base_dir)
    from sparsify_tui.analysis.loading import load_model

    full = load_model(model_path)  # weights in memory: the consumers' weights and the run
    runner = _Runner(full, [], engine, core_count, cancel)
    prunable = [g for g in groups.groups if g.prunable]
    users = _consumer_users(model, groups, prunable, runner, samples_per_item)
    if not users:
        return l2
    fetch = sorted({c.data_input for _, c, _ in users} | {getattr(c, "target_tensor", runner.nodes[i].output[0])
                                                          for i, c, _ in users})
    sess = _fetch_session(runner, fetch, engine, core_count)
    stats = _DataStats(users, prunable, method)
    try:
        run = sess.runner(fetch, cancel)
        with canceled_as_job(cancel):
            for b, feed in enumerate(feeds):
                maybe_check(cancel)
                vals = dict(zip(fetch, run({k: v for k, v in feed.items() if k in runner.graph_inputs})))
                for idx, c, parts in users:
                    target = getattr(c, "target_tensor", runner.nodes[idx].output[0])
                    stats.add(idx, c, parts, vals[c.data_input], vals[target], rng)
                prog(f"importance {method}", (b + 1) / len(feeds))
        del run
    finally:
        sess.close()
    scores_act, blocks = stats.scores()
    return _data_ranks(prunable, l2, scores_act, blocks, method)


def _consumer_users(model, groups, prunable, runner, samples_per_item: int) -> list:
    """The consumers whose inputs rank channels: ``[(node index, consumer object, [(group index, positions,
    channels)])]``, one per ungrouped Conv/Gemm/MatMul consumer edit that reads a prunable group."""
    from sparsify_tui.engine.reconstruction import _CONSUMERS

    # element -> (group index, channel index) for prunable groups
    n_el = len(groups.element_root)
    el_group = np.full(n_el, -1, np.int64)
    el_chan = np.full(n_el, -1, np.int64)
    root_to = {}
    for gi, g in enumerate(prunable):
        for c, r in enumerate(g.classes):
            root_to[int(r)] = (gi, c)
    for e in range(n_el):
        hit = root_to.get(int(groups.element_root[e]))
        if hit is not None:
            el_group[e], el_chan[e] = hit
    ids = {node_id(n, i): i for i, n in enumerate(runner.nodes)}
    users = []
    for e in groups.consumer_edits():
        src = model.graph.node[e.node]
        idx = ids.get(node_id(src, e.node))
        kind = _CONSUMERS.get(src.op_type)
        if idx is None or kind is None:
            continue
        gidx = el_group[e.emap]
        parts = [(int(g), np.flatnonzero(gidx == g), el_chan[e.emap][gidx == g]) for g in np.unique(gidx) if g >= 0]
        if not parts:
            continue
        c = kind(runner, idx, None, samples_per_item)
        if c.reason is not None or c.groups != 1:
            continue  # a grouped consumer's inputs are ranked by the other consumers (or L2)
        users.append((idx, c, parts))
    return users


def _fetch_session(runner, fetch: list, engine, core_count: Optional[int]):
    """One session of the runner's model with the tensors ``fetch`` added as outputs."""
    from sparsify_tui.analysis.loading import set_ir_version

    m = onnx.ModelProto()
    m.CopyFrom(runner.model)
    outs = {o.name for o in m.graph.output}
    for n in fetch:
        if n not in outs:
            m.graph.output.append(onnx.ValueInfoProto(name=n))
    set_ir_version(m, max(4, min(int(m.ir_version), 10)))
    ext = {t.name: runner.arrays[t.name] for t in m.graph.initializer if t.name in runner.arrays}
    return engine.open_session(m.SerializeToString(), core_count, external_initializers=ext)


class _DataStats:
    """What the consumers' inputs say over the calibration batches: per consumer the mean absolute input per
    position (activation) and, for ThiNet, the Gram matrix of its contributions in each group's channel space and
    its energy."""

    def __init__(self, users: list, prunable: list, method: str):
        self.users, self.prunable, self.method = users, prunable, method
        self.weights = {}
        for idx, c, _parts in users:
            W0, _b = c.current()  # [1, k, o]
            self.weights[idx] = W0[0].astype(np.float32)
        self.act_sum = {idx: None for idx, _, _ in users}
        self.act_n = {idx: 0 for idx, _, _ in users}
        self.gram = {(idx, g): np.zeros((prunable[g].channels,) * 2) for idx, _, parts in users for g, _, _ in parts} \
            if method == "thinet" else {}
        self.energy = {idx: 0.0 for idx, _, _ in users}

    def add(self, idx: int, c, parts: list, data, target, rng) -> None:
        """Accumulate consumer ``idx`` on one batch (its input ``data`` and output ``target``)."""
        X, _Y = c.rows(data, target, rng)  # [rows, 1, k]
        X = X[:, 0, :]
        pos = _positions(c)
        Xp = X.reshape(len(X), pos, -1)  # [rows, positions, taps]
        s = np.abs(Xp).sum(axis=(0, 2))
        self.act_sum[idx] = s if self.act_sum[idx] is None else self.act_sum[idx] + s
        self.act_n[idx] += Xp.shape[0] * Xp.shape[2]
        if self.method == "thinet":
            w = self.weights[idx]
            W = w.reshape(pos, -1, w.shape[-1])  # [positions, taps, o]
            o = rng.integers(0, W.shape[-1], len(Xp))
            v = np.einsum("rpt,ptr->rp", Xp, W[:, :, o])  # contribution of each input position
            self.energy[idx] += float(np.square(v.sum(axis=1), dtype=np.float64).sum())
            for g, p_idx, chans in parts:
                Vg = np.zeros((len(v), self.prunable[g].channels), np.float64)
                np.add.at(Vg.T, chans, v[:, p_idx].T)  # a Flatten's block of positions adds up
                self.gram[(idx, g)] += Vg.T @ Vg

    def scores(self) -> tuple:
        """``(activation scores per group, ThiNet blocks per group)``: Σ over consumers of weight norm × mean
        absolute input per channel, and Σ over consumers of Q / energy (an empty list where no consumer reads)."""
        scores_act = [np.zeros(g.channels) for g in self.prunable]
        blocks: list = [[] for _ in self.prunable]
        for idx, c, parts in self.users:
            pos = _positions(c)
            W = self.weights[idx].reshape(pos, -1, self.weights[idx].shape[-1])
            wnorm = np.sqrt(np.einsum("pto,pto->p", W, W, dtype=np.float64))
            mean_abs = self.act_sum[idx] / max(self.act_n[idx], 1)
            for g, p_idx, chans in parts:
                np.add.at(scores_act[g], chans, wnorm[p_idx] * mean_abs[p_idx])
                if self.method == "thinet":
                    Q = self.gram.pop((idx, g)) / max(self.energy[idx], 1e-30)
                    blocks[g] = Q if isinstance(blocks[g], list) else blocks[g] + Q
        return scores_act, blocks


def _data_ranks(prunable: list, l2: dict, scores_act: list, blocks: list, method: str) -> dict:
    """``{group id: scores}`` from the data statistics; channels no consumer reads (score 0) rank below every read
    one, in their L2 order; a group no consumer reads keeps its L2 scores."""
    out = {}
    for gi, g in enumerate(prunable):
        base = l2[g.id]
        order_l2 = np.argsort(np.argsort(base, kind="stable"), kind="stable").astype(np.float64) / max(len(base), 1)
        if method == "activation":
            s = scores_act[gi]
            read = s > 0
        else:
            if isinstance(blocks[gi], list):
                out[g.id] = base
                continue
            s = thinet_order(blocks[gi])
            read = np.ones(g.channels, bool)
        if not read.any():
            out[g.id] = base
            continue
        out[g.id] = np.where(read, 1.0 + s / max(float(s.max()), 1e-30), order_l2 * 0.5)
    return out


def _positions(c) -> int:
    """Input positions (channels for Conv/ConvTranspose; features for Gemm/MatMul) of consumer ``c``'s rows."""
    node = c.node
    if node.op_type == "Conv":
        return c.w_shape[1]
    if node.op_type == "ConvTranspose":
        return c.w_shape[0]
    return c.k


def thinet_order(Q: np.ndarray) -> np.ndarray:
    """ThiNet's greedy removal on the Gram matrix ``Q = VᵀV`` (``[C, C]``) of the contributions ``V``
    (``[samples, C]``): returns a score per channel, the step at which it would be removed (0 = first; higher =
    keep). Each step removes the channel ``c`` minimizing ``‖r + V[:, c]‖²`` with ``r`` the summed contributions of
    the channels removed so far, i.e. ``2·(Q·1_S)_c + Q_cc``."""
    C = len(Q)
    s = np.zeros(C)
    removed = np.zeros(C, bool)
    score = np.zeros(C)
    diag = np.diag(Q).copy()
    for step in range(C):
        cost = 2 * s + diag
        cost[removed] = np.inf
        c = int(np.argmin(cost))
        removed[c] = True
        score[c] = step
        s += Q[:, c]
    return score


__all__ = ["DATA_METHODS", "THINET_SAMPLES", "data_importance", "thinet_order"]
