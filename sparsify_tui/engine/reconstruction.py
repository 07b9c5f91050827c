"""Least-squares reconstruction of a channel-thinned model on calibration data.

Thinning (:mod:`sparsify_tui.engine.thinning`) removes channels exactly: the thinned model computes what the
original computes with the removed channels' inputs zeroed. On a trained network that output is far from the
original (PP-OCR cls at a 1.3x target: 50% top-1, chance). **Reconstruction** refits, for every *consumer* of a
thinned channel group (a layer whose input channels were removed), its weights and bias so that its output on
calibration data matches the **original** model's output of that layer:

    min_W,b  Σ_rows ‖ X_thin·Wᵀ + b − Y_orig ‖² + λ‖W‖²      (ridge least squares, one problem per output channel)

where ``X_thin`` are the consumer's input rows computed by the *thinned* model (with every consumer before it
already refit, in topological order, so the error left upstream is absorbed downstream) and ``Y_orig`` the
original layer's output on the same items (the kept output channels when the layer's own outputs were thinned).
This is the layer-wise reconstruction of He et al., "Channel Pruning for Accelerating Very Deep Neural
Networks" (ICCV 2017, eq. 1 with the channel selection fixed), of Luo et al., "ThiNet: A Filter Level Pruning
Method for Deep Neural Network Compression" (ICCV 2017, the least-squares step of section 3.3), and of the
layer-wise "mask tuning" of Kwon et al., "A Fast Post-Training Pruning Framework for Transformers" (NeurIPS
2022), with the inputs taken from the pruned network as in Kwon et al.

How (all numpy and onnxruntime):

* **Normal equations, streamed** (:class:`NormalEquations`). Each problem is solved from ``G = X̃ᵀX̃`` and
  ``C = X̃ᵀY`` (``X̃ = [X, 1]``), summed over the calibration batches (each batch of rows one float32 product; the
  sums float64 up to :data:`FLOAT64_COLUMNS` unknowns, float32 above): the rows themselves are never all in memory.
  ``λ = ridge · mean(diag(XᵀX))`` (scale-free); the bias column is not penalized. Output channels share ``G``, so
  one solve gives them all. A layer's rows per item are capped (``max_rows_per_item``, drawn at random with a fixed
  seed; He et al. sample 10 positions per image) so a 112x112 feature map costs no more than a 7x7 one.
* **Ridge** ``"auto"`` (default): per consumer, the candidate of :data:`RIDGES` whose fit on the even calibration
  batches has the least error on the odd ones; a refit whose held-out error is not below the thinned layer's is not
  applied (e.g. an SE block's layer: one row per item, more unknowns than items).
* **Consumer kinds** (:data:`_CONSUMERS`): ``Conv`` of any kernel, stride, padding (``pads`` or ``auto_pad``),
  dilation and spatial rank, via im2col (:func:`conv_windows`: a strided window view, no copy until the sampled rows
  are gathered); **grouped and depthwise** ``Conv`` per group (block-diagonal ``G``: each group's outputs are refit
  from that group's inputs only; a depthwise filter is refit on its own channel, which includes the bias
  compensation of the removed channels' mean contribution); ``ConvTranspose`` as the equivalent stride-1 Conv on
  the zero-upsampled input with the flipped, transposed kernel; ``Gemm`` (``transA``/``transB``, ``alpha``,
  ``beta``, the weight as A or B) and ``MatMul`` (``x·W`` or ``W·x``, any leading axes; the bias of a following
  ``Add`` of a constant vector is refit with it). A consumer with more than ``max_columns`` unknowns per output gets
  **bias compensation** only (the mean residual folded into its bias: no solve), and one that cannot be written
  (a float16 weight) is left as thinned, with the reason.
* **Segments, not whole-model runs** (:class:`_Runner`). Both models are run once over the calibration items, in
  segments: before each consumer, the nodes its input (thinned model) or its target (original model) depends on
  and that have not run yet form a sub-model (weights memory-mapped from the model files and handed to onnxruntime
  in memory), run on 8 items at a time when the model batches them (checked on two items, :func:`_chunks`), whose
  outputs are cached; a cached tensor is dropped once no node left to run reads it, and kept in float16 (scaled by a
  power of two) once the cache holds :data:`COMPACT_ABOVE_BYTES`. So each node runs once per model and item.
  Measured: ResNet-50 at R = 0.3 on 64 items, 39-48 s and +570-790 MB on a shared 2-core AVX-512 EPYC (docs/optimize.md).

:func:`reconstruct` is the core call; :func:`sparsify_tui.engine.channel_prune.thin_and_reconstruct` thins then
reconstructs (what apply runs);
:func:`consumer_specs` lists the consumers of a thinning (:mod:`sparsify_tui.analysis.channels` groups and removed
elements); :class:`DenseRefit` refits single layers of the original model (the channel loss profile after
reconstruction).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np
import onnx
from onnx import numpy_helper

from sparsify_tui.analysis.graph import node_id, outer_scope_reads
from sparsify_tui.engine.memory import PeakRSS
from sparsify_tui.engine.weights import placeholder_tensor
from sparsify_tui.errors import SparsifyError
from sparsify_tui.progress import CancelToken, ProgressFn, maybe_check

#: default ridge: λ = RIDGE · mean(diag(XᵀX)) (measured, docs/optimize.md "Reconstruction")
RIDGE = "auto"
#: the ridges ``ridge="auto"`` chooses from per consumer (fit on the even calibration items, validated on the odd)
RIDGES = (1e-3, 1e-2, 1e-1)
#: rows of a consumer's least-squares problem taken per calibration item at most (random positions, fixed seed)
MAX_ROWS_PER_ITEM = 512
#: consumers whose normal equations would have more columns than this get bias compensation only (memory: the
#: float64 Gram matrix is columns² · 8 bytes, 8192 columns = 512 MB)
MAX_COLUMNS = 6144
LS_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
#: normal equations with more columns than this are summed and solved in float32 (:class:`NormalEquations`)
FLOAT64_COLUMNS = 512
#: the activation cache keeps new tensors in float16 once it holds this much (:class:`_Half`)
COMPACT_ABOVE_BYTES = 256 << 20
#: calibration items run together in one onnxruntime call when the model takes a batch of them (:func:`_chunks`)
CHUNK_ITEMS = 8


# ------------------------------------------------------------------------------------------ results


@dataclass
class ConsumerFit:
    """One consumer of a thinned group, refit (or not).

    ``node``: its node id; ``op_type``; ``method``: ``"least_squares"``, ``"bias"`` (bias compensation only) or
    ``"none"`` (left as thinned: ``reason``); ``rows``: least-squares rows accumulated over the calibration items;
    ``columns``: unknowns per output channel (inputs·kernel, +1 for the bias); ``rel_error_before`` /
    ``rel_error_after``: ``Σ‖Y_orig − ŷ‖² / Σ‖Y_orig‖²`` on those rows with the thinned weights and with the refit
    ones, ŷ computed from the thinned model's own (upstream-refit) inputs; ``rel_error_validation``: the same
    error of a fit on the even items measured on the odd ones (what to expect on new items); ``ridge``: the relative ridge used; ``seconds``: accumulate + solve."""

    node: str
    op_type: str
    method: str
    rows: int = 0
    columns: int = 0
    rel_error_before: Optional[float] = None
    rel_error_after: Optional[float] = None
    reason: Optional[str] = None
    seconds: float = 0.0
    ridge: Optional[float] = None
    rel_error_validation: Optional[float] = None

    def to_dict(self) -> dict:
        return {"node": self.node, "op_type": self.op_type, "method": self.method, "rows": self.rows,
                "columns": self.columns, "rel_error_before": self.rel_error_before,
                "rel_error_after": self.rel_error_after, "rel_error_validation": self.rel_error_validation,
                "ridge": self.ridge, "reason": self.reason, "seconds": round(self.seconds, 4)}


@dataclass
class ReconstructionResult:
    """Outcome of :func:`reconstruct` (the ``reconstruction`` block of ``apply --json``).

    ``items``: calibration items (feed batches × batch size); ``ridge``: the relative ridge λ/mean(diag XᵀX), or
    ``"auto"`` (each consumer's own in :attr:`ConsumerFit.ridge`);
    ``seconds``: wall time (runs, accumulation, solves, writing); ``peak_mb``: peak resident memory the call added
    (MB, sampled every 2 ms); ``consumers``: one :class:`ConsumerFit` per consumer, topological order;
    ``out_path``: the written model."""

    items: int
    ridge: Union[float, str]
    seconds: float
    peak_mb: float
    consumers: list = field(default_factory=list)
    out_path: str = ""
    max_rows_per_item: int = MAX_ROWS_PER_ITEM

    def to_dict(self) -> dict:
        return {"items": self.items, "ridge": self.ridge, "seconds": round(self.seconds, 3),
                "peak_mb": round(self.peak_mb, 1), "max_rows_per_item": self.max_rows_per_item,
                "consumers": [c.to_dict() for c in self.consumers]}


@dataclass
class ConsumerSpec:
    """A layer to refit: ``node`` (node id, the same in the original and the thinned model) and ``out_kept``: the
    original output-channel indices the thinned layer still computes (None: all of them)."""

    node: str
    out_kept: Optional[np.ndarray] = None


def consumer_specs(model: onnx.ModelProto, groups, dead: np.ndarray, *, downstream: bool = False) -> list:
    """The layers to refit after a thinning, as :class:`ConsumerSpec` in graph order: every node with a
    ``consumer`` weight edit at a removed position (``groups``: :class:`~sparsify_tui.analysis.channels.
    ChannelGroups` of ``model``, ``dead``: :meth:`~sparsify_tui.analysis.channels.ChannelGroups.removed_elements`),
    with its kept output channels from its own ``producer`` (or ``depthwise``) edit. With ``downstream``, also every
    other Conv/ConvTranspose/Gemm/MatMul with a constant weight that runs after the first consumer (their inputs
    carry the error left upstream; depthwise convs among them are refit per channel)."""
    nodes = model.graph.node
    consumers = {e.node for e in groups.edits
                 if e.kind == "weight" and e.role == "consumer" and dead[e.emap].any()}
    if downstream and consumers:
        from sparsify_tui.analysis.layers import WEIGHT_CHAIN_OPS

        inits = {t.name for t in model.graph.initializer}
        producer = {o: n for n in nodes for o in n.output}

        def constant(name: str) -> bool:
            while name not in inits:
                p = producer.get(name)
                if p is None or p.op_type not in WEIGHT_CHAIN_OPS | {"Constant"}:
                    return False
                if p.op_type == "Constant":
                    return True
                name = p.input[0]
            return True

        for i in range(min(consumers) + 1, len(nodes)):
            n = nodes[i]
            if n.op_type in LS_OPS and len(n.input) >= 2 and (
                    constant(n.input[1]) or (n.op_type in ("Gemm", "MatMul") and constant(n.input[0]))):
                consumers.add(i)
    out = []
    for i in sorted(consumers):
        kept = None
        for e in groups.edits:
            if e.node == i and e.kind == "weight" and e.role in ("producer", "depthwise") and dead[e.emap].any():
                kept = np.flatnonzero(~dead[e.emap])
                break
        out.append(ConsumerSpec(node_id(nodes[i], i), kept))
    return out


# ------------------------------------------------------------------------------------------ im2col


def _pads_for(auto_pad: str, in_sizes, kernel, strides, dilations) -> list:
    """Explicit ``[begin..., end...]`` pads of ONNX ``auto_pad`` (SAME_UPPER puts the odd pixel at the end)."""
    begin, end = [], []
    for n, k, s, d in zip(in_sizes, kernel, strides, dilations):
        if auto_pad == "VALID":
            begin.append(0)
            end.append(0)
            continue
        out = -(-n // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        small, big = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else big)
        end.append(big if auto_pad == "SAME_UPPER" else small)
    return begin + end


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            v = onnx.helper.get_attribute_value(a)
            return v.decode() if isinstance(v, bytes) else v
    return default


def _pad(x: np.ndarray, begin: Sequence[int], end: Sequence[int]) -> np.ndarray:
    """Pad the spatial axes (2..) of ``x`` with zeros; negative amounts crop."""
    crop = tuple([slice(None), slice(None)] + [slice(max(0, -b), (x.shape[2 + i] - max(0, -e)))
                                              for i, (b, e) in enumerate(zip(begin, end))])
    x = x[crop]
    width = [(0, 0), (0, 0)] + [(max(0, b), max(0, e)) for b, e in zip(begin, end)]
    return np.pad(x, width) if any(w != (0, 0) for w in width) else x


def conv_windows(x: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
                 pads: Sequence[int]) -> np.ndarray:
    """im2col as a view: ``x`` ``[N, C, *spatial]`` → ``[N, *out_spatial, C, *kernel]``, the input window of every
    output position of a Conv with these ``kernel``/``strides``/``dilations``/``pads`` (ONNX ``[begin..., end...]``;
    the output size is ``floor((n + pads − d·(k−1) − 1)/s) + 1``). Row ``(n, p)`` flattened over ``C·kernel`` is the
    vector a Conv weight ``W[o]`` (``[C, *kernel]``, flattened) is dotted with."""
    r = len(kernel)
    xp = _pad(x, pads[:r], pads[r:])
    span = [d * (k - 1) + 1 for k, d in zip(kernel, dilations)]
    win = np.lib.stride_tricks.sliding_window_view(xp, span, axis=tuple(range(2, 2 + r)))
    # win: [N, C, *positions, *span] -> stride the positions, dilate the window
    sl = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides) + \
        tuple(slice(None, None, d) for d in dilations)
    win = win[sl]
    order = (0,) + tuple(range(2, 2 + r)) + (1,) + tuple(range(2 + r, 2 + 2 * r))
    return win.transpose(order)


# ------------------------------------------------------------------------------------------ normal equations


class NormalEquations:
    """Streamed ridge least squares for ``groups`` independent blocks: block ``g`` fits ``Y_g ≈ X_g·W_gᵀ (+ b_g)``
    with ``X_g`` ``[rows, k]`` and ``Y_g`` ``[rows, o]``. Accumulates, for each of two folds (items alternate
    between them, for :meth:`choose_ridge`), ``G_g = X̃ᵀX̃`` (``X̃ = [X, 1]`` with ``intercept``), ``C_g = X̃ᵀY`` and
    ``Σy²`` per output column. Rows are buffered until a fold holds ``max(k, 4096)`` of them, so each product is one
    large float32 matrix multiplication added once into the sums; the sums are float64 for blocks of up to
    :data:`FLOAT64_COLUMNS` columns and float32 above (half the memory and twice the LAPACK speed; the ridge bounds
    the condition number, so float32 keeps about 1e-3 of the solution at ridge 1e-4 and better above)."""

    def __init__(self, groups: int, k: int, o: int, intercept: bool) -> None:
        self.k, self.o, self.intercept = k, o, intercept
        kk = k + (1 if intercept else 0)
        self.dtype = np.float64 if kk <= FLOAT64_COLUMNS else np.float32
        self.G = [np.zeros((groups, kk, kk), self.dtype) for _ in range(2)]
        self.C = [np.zeros((groups, kk, o), self.dtype) for _ in range(2)]
        self.yy = [np.zeros((groups, o)) for _ in range(2)]
        self.rows_in = [0, 0]
        self._buf: list = [[], []]
        self._buffered = [0, 0]
        self._flush_at = max(kk, 4096)

    @property
    def rows(self) -> int:
        return self.rows_in[0] + self.rows_in[1] + self._buffered[0] + self._buffered[1]

    def add(self, X: np.ndarray, Y: np.ndarray, fold: int = 0) -> None:
        """Add rows of one item (or batch) to ``fold`` (0 or 1): ``X`` ``[rows, groups, k]``, ``Y``
        ``[rows, groups, o]`` (float32)."""
        self._buf[fold].append((X, Y))
        self._buffered[fold] += len(X)
        if self._buffered[fold] >= self._flush_at:
            self._flush(fold)

    def _flush(self, fold: int) -> None:
        if not self._buf[fold]:
            return
        X = np.concatenate([x for x, _ in self._buf[fold]]) if len(self._buf[fold]) > 1 else self._buf[fold][0][0]
        Y = np.concatenate([y for _, y in self._buf[fold]]) if len(self._buf[fold]) > 1 else self._buf[fold][0][1]
        self._buf[fold] = []
        self._buffered[fold] = 0
        if self.intercept:
            X = np.concatenate([X, np.ones(X.shape[:2] + (1,), X.dtype)], axis=2)
        Xg = np.ascontiguousarray(X.transpose(1, 0, 2))
        Yg = np.ascontiguousarray(Y.transpose(1, 0, 2))
        self.G[fold] += np.matmul(Xg.transpose(0, 2, 1), Xg)  # float32 product, summed in the sums' dtype
        self.C[fold] += np.matmul(Xg.transpose(0, 2, 1), Yg)
        self.yy[fold] += np.einsum("grk,grk->gk", Yg, Yg, dtype=np.float64)
        self.rows_in[fold] += X.shape[0]

    def _ready(self) -> None:
        self._flush(0)
        self._flush(1)

    def _folds(self, part: Optional[int]) -> list:
        return [0, 1] if part is None else [part]

    def solve(self, ridge: float, part: Optional[int] = None) -> np.ndarray:
        """``W̃`` ``[groups, k(+1), o]`` minimizing ``‖X̃W̃ − Y‖² + λ‖W‖²`` with ``λ = ridge · mean(diag(XᵀX))`` per
        block (the intercept row unpenalized), on every row (``part`` None) or on fold ``part`` only, in the sums'
        precision (LAPACK ``gesv``)."""
        self._ready()
        k = self.k
        parts = self._folds(part)
        dt = self.dtype
        A = self.G[parts[0]].copy()
        C = self.C[parts[0]]
        if len(parts) > 1:
            A += self.G[parts[1]]
            C = C + self.C[parts[1]]
        ii = np.arange(k)
        scale = A[:, ii, ii].astype(np.float64).mean(axis=1) if k else np.zeros(len(A))
        lam = np.where(scale > 0, ridge * scale, ridge)
        A[:, ii, ii] += lam[:, None].astype(dt)
        if self.intercept:
            A[:, k, k] += (1e-7 * np.maximum(scale, 1.0)).astype(dt)
        try:
            W = np.linalg.solve(A, C)
        except np.linalg.LinAlgError:  # a singular block (an input that is always 0, no ridge on the intercept)
            W = np.stack([np.linalg.lstsq(A[g], C[g], rcond=None)[0] for g in range(len(A))])
        return W.astype(np.float64)

    def rel_error(self, Wt: np.ndarray, part: Optional[int] = None) -> float:
        """``Σ‖X̃W̃ − Y‖² / Σ‖Y‖²`` over the rows of ``part`` (None: all), every block, from the accumulated
        statistics (``Wt`` as :meth:`solve` returns)."""
        self._ready()
        den = sum(float(self.yy[f].sum()) for f in self._folds(part))
        return sum(self._sq_error(Wt, f) for f in self._folds(part)) / max(den, 1e-30)

    def _sq_error(self, Wt: np.ndarray, f: int) -> float:
        G, C, yy = self.G[f], self.C[f], self.yy[f]
        W = Wt.astype(self.dtype)
        num = float(np.einsum("gko,gko->", W, np.matmul(G, W), dtype=np.float64)
                    - 2 * np.einsum("gko,gko->", W, C, dtype=np.float64) + yy.sum())
        return max(num, 0.0)

    def cv_error(self, ridge: float) -> float:
        """Held-out relative error of :meth:`solve` at ``ridge``: fitted on fold 0 (the even items), measured on
        fold 1 (the odd items), ``error / Σ‖Y‖²`` over fold 1. ``inf`` when a fold is empty. (One direction only:
        the solves are most of reconstruction's time on wide layers.)"""
        self._ready()
        if not self.rows_in[0] or not self.rows_in[1]:
            return float("inf")
        return self._sq_error(self.solve(ridge, 0), 1) / max(float(self.yy[1].sum()), 1e-30)

    def choose_ridge(self, candidates: Sequence[float]) -> tuple:
        """``(ridge, cv error)`` of the candidate with the least :meth:`cv_error` (the larger ridge on a tie)."""
        best = None
        for r in sorted(candidates, reverse=True):
            e = self.cv_error(r)
            if best is None or e < best[1] * (1 - 1e-9):
                best = (float(r), e)
        return best


# ------------------------------------------------------------------------------------------ consumers


class _Consumer:
    """How one consumer's least-squares rows come from its input and target, and how its refit is written.

    Subclasses set ``groups``, ``k`` (inputs per group), ``o`` (outputs per group), ``intercept``; implement
    ``rows(x, y, rng)`` → ``(X [rows, groups, k], Y [rows, groups, o])``, ``current()`` → ``[groups, k, o]`` and
    the bias ``[groups, o]`` (or None), and ``write(Wt)`` (``Wt``: ``[groups, k(+1), o]``)."""

    groups = 1
    intercept = True

    def __init__(self, runner: "_Runner", index: int, out_kept: Optional[np.ndarray], max_rows: int) -> None:
        self.runner, self.index = runner, index
        self.node = runner.nodes[index]
        self.out_kept = out_kept
        self.max_rows = self.per_item = max_rows
        self.reason: Optional[str] = None

    @property
    def data_input(self) -> str:
        return self.node.input[0]

    def pick(self, n_rows: int, rng: np.random.Generator) -> Optional[np.ndarray]:
        if n_rows <= self.max_rows:
            return None
        return np.sort(rng.choice(n_rows, self.max_rows, replace=False))

    def target(self, y: np.ndarray, axis: int) -> np.ndarray:
        return y if self.out_kept is None else np.take(y, self.out_kept, axis=axis)


class _ConvConsumer(_Consumer):
    """``Conv``: ``Y[n, o, p] = Σ_c,k X_win[n, p, c, k] · W[o, c, k] + b[o]``, per group of ``group``."""

    def __init__(self, runner, index, out_kept, max_rows) -> None:
        super().__init__(runner, index, out_kept, max_rows)
        node = self.node
        self.w_name = node.input[1]
        W = runner.value(self.w_name)
        self.w_shape = W.shape
        self.groups = int(_attr(node, "group", 1))
        cout = W.shape[0]
        self.k = int(np.prod(W.shape[1:]))
        self.o = cout // self.groups
        self.kernel = list(W.shape[2:])
        r = len(self.kernel)
        self.strides = list(_attr(node, "strides", [1] * r))
        self.dilations = list(_attr(node, "dilations", [1] * r))
        self.pads = list(_attr(node, "pads", [0] * (2 * r)))
        self.auto_pad = _attr(node, "auto_pad", "NOTSET")
        self.b_name = node.input[2] if len(node.input) > 2 and node.input[2] else None

    def windows(self, x: np.ndarray) -> np.ndarray:
        pads = self.pads
        if self.auto_pad not in ("NOTSET", ""):
            pads = _pads_for(self.auto_pad, x.shape[2:], self.kernel, self.strides, self.dilations)
        return conv_windows(x, self.kernel, self.strides, self.dilations, pads)

    def rows(self, x, y, rng):
        win = self.windows(x)  # [N, *P, C, *k], a view
        lead = win.shape[:1 + len(self.kernel)]
        n_pos = int(np.prod(lead))
        y = self.target(y, 1)
        yr = np.moveaxis(y, 1, -1).reshape(-1, y.shape[1])
        if yr.shape[0] != n_pos:
            raise SparsifyError(f"Conv '{node_id(self.node)}': {n_pos} windows for {yr.shape[0]} outputs")
        idx = self.pick(n_pos, rng)
        if idx is not None:  # gather only the sampled windows (the full im2col is never materialized)
            win, yr = win[np.unravel_index(idx, lead)], yr[idx]
        X = np.ascontiguousarray(win, dtype=np.float32).reshape(len(yr), self.groups, self.k)
        return X, np.ascontiguousarray(yr, dtype=np.float32).reshape(len(yr), self.groups, self.o)

    def current(self):
        W = self.runner.value(self.w_name).reshape(self.groups, self.o, self.k).transpose(0, 2, 1)
        b = self.runner.value(self.b_name).reshape(self.groups, self.o) if self.b_name else None
        return W.astype(np.float64), b

    def write(self, Wt):
        W = Wt[:, :self.k, :].transpose(0, 2, 1).reshape(self.w_shape).astype(np.float32)
        self.runner.set_input(self.index, 1, W, "weight")
        if self.intercept:
            self.runner.set_input(self.index, 2, Wt[:, self.k, :].reshape(-1).astype(np.float32), "bias")


class _ConvTransposeConsumer(_ConvConsumer):
    """``ConvTranspose`` (group 1): the stride-1 ``Conv`` of the input upsampled by ``strides`` (zeros between
    pixels), padded by ``d·(k−1) − pad`` (+ ``output_padding`` at the end), with the kernel
    ``W'[o, c, k] = W[c, o, flip(k)]`` and dilation ``d``: the same output, so the same im2col least squares."""

    def __init__(self, runner, index, out_kept, max_rows) -> None:
        _Consumer.__init__(self, runner, index, out_kept, max_rows)
        node = self.node
        self.w_name = node.input[1]
        W = runner.value(self.w_name)  # [Cin, Cout/g, *k]
        self.w_shape = W.shape
        self.groups = 1
        if int(_attr(node, "group", 1)) != 1:
            self.reason = "grouped ConvTranspose"
        self.kernel = list(W.shape[2:])
        r = len(self.kernel)
        self.k = W.shape[0] * int(np.prod(self.kernel))
        self.o = W.shape[1]
        self.t_strides = list(_attr(node, "strides", [1] * r))
        self.dilations = list(_attr(node, "dilations", [1] * r))
        self.strides = [1] * r
        pads = list(_attr(node, "pads", [0] * (2 * r)))
        outpad = list(_attr(node, "output_padding", [0] * r))
        if _attr(node, "auto_pad", "NOTSET") not in ("NOTSET", "") or _attr(node, "output_shape") is not None:
            self.reason = "ConvTranspose with auto_pad or output_shape"
        span = [d * (k - 1) for k, d in zip(self.kernel, self.dilations)]
        self.pads = [s - p for s, p in zip(span, pads[:r])] + [s - p + op for s, p, op in zip(span, pads[r:], outpad)]
        self.auto_pad = "NOTSET"
        self.b_name = node.input[2] if len(node.input) > 2 and node.input[2] else None

    def windows(self, x):
        s = self.t_strides
        if any(v > 1 for v in s):
            up = np.zeros(x.shape[:2] + tuple((n - 1) * v + 1 for n, v in zip(x.shape[2:], s)), x.dtype)
            up[(slice(None), slice(None)) + tuple(slice(None, None, v) for v in s)] = x
            x = up
        return conv_windows(x, self.kernel, self.strides, self.dilations, self.pads)

    def _flip(self, W):
        r = len(self.kernel)
        return W[(slice(None), slice(None)) + (slice(None, None, -1),) * r]

    def current(self):
        W = self._flip(self.runner.value(self.w_name)).transpose((1, 0) + tuple(range(2, 2 + len(self.kernel))))
        b = self.runner.value(self.b_name).reshape(1, self.o) if self.b_name else None
        return W.reshape(1, self.o, self.k).transpose(0, 2, 1).astype(np.float64), b

    def write(self, Wt):
        r = len(self.kernel)
        Wp = Wt[0, :self.k, :].T.reshape((self.o, self.w_shape[0]) + tuple(self.kernel))  # [o, c, *k]
        W = self._flip(Wp.transpose((1, 0) + tuple(range(2, 2 + r)))).astype(np.float32)
        self.runner.set_input(self.index, 1, np.ascontiguousarray(W), "weight")
        if self.intercept:
            self.runner.set_input(self.index, 2, Wt[0, self.k, :].astype(np.float32), "bias")


class _MatrixConsumer(_Consumer):
    """Gemm/MatMul: the constant operand is the weight (``wi``: its input slot), the other one the data (``di``)."""

    def __init__(self, runner, index, out_kept, max_rows) -> None:
        super().__init__(runner, index, out_kept, max_rows)
        self.wi = 1 if runner.is_const(self.node.input[1]) else 0
        self.di = 1 - self.wi
        self.w_name = self.node.input[self.wi]
        self.w_shape = runner.value(self.w_name).shape

    @property
    def data_input(self) -> str:
        return self.node.input[self.di]


class _GemmConsumer(_MatrixConsumer):
    """``Gemm``: ``Y = α·op(A)·op(B) + β·C``. With the weight as B: rows are the rows of op(A), ``W̃ = α·op(B)``
    and the intercept ``β·C`` (C of shape ``[N]`` or ``[1, N]``, added when absent); as A: the transposed
    problem ``Yᵀ = α·op(B)ᵀ·op(A)ᵀ`` (C of shape ``[M, 1]``)."""

    def __init__(self, runner, index, out_kept, max_rows) -> None:
        super().__init__(runner, index, out_kept, max_rows)
        node = self.node
        W = runner.value(self.w_name)
        self.alpha = float(_attr(node, "alpha", 1.0))
        self.beta = float(_attr(node, "beta", 1.0))
        self.ta, self.tb = int(_attr(node, "transA", 0)), int(_attr(node, "transB", 0))
        opw = self._op_w(W)  # [K, N] in the Y = X·opw orientation
        self.k, self.o = opw.shape
        self.c_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
        if self.beta == 0.0:
            self.intercept = False
        elif self.c_name is not None:
            cs = runner.value(self.c_name).shape
            ok = (1, self.o) if self.wi == 1 else (self.o, 1)
            if tuple(cs) not in ((self.o,), ok) or (self.wi == 0 and tuple(cs) == (self.o,) and self.o != 1):
                self.intercept = False  # a C broadcast another way stays as it is (subtracted from the target)

    def _op_w(self, W):
        if self.wi == 1:
            return W.T if self.tb else W  # op(B): [K, N]
        return (W.T if self.ta else W).T  # op(A)ᵀ: [K, M]

    def _from_op_w(self, opw):
        if self.wi == 1:
            return opw.T if self.tb else opw
        return opw.T.T if self.ta else opw.T

    def rows(self, x, y, rng):
        if self.wi == 1:
            X = x.T if self.ta else x  # [M, K]
            Y = self.target(y, 1)
        else:
            X = (x.T if self.tb else x).T  # op(B)ᵀ: [N, K]
            Y = self.target(y, 0).T  # [N, M_kept]
        if self.c_name is not None and not self.intercept and self.beta != 0.0:
            Y = Y - self.beta * self._fixed_c(Y.shape)
        idx = self.pick(len(X), rng)
        if idx is not None:
            X, Y = X[idx], Y[idx]
        return (np.ascontiguousarray(X, np.float32)[:, None, :], np.ascontiguousarray(Y, np.float32)[:, None, :])

    def _fixed_c(self, shape):
        c = self.runner.value(self.c_name)
        return np.broadcast_to(c if self.wi == 1 else c.T, shape)

    def current(self):
        opw = self.alpha * self._op_w(self.runner.value(self.w_name)).astype(np.float64)
        b = None
        if self.intercept and self.c_name is not None:
            b = self.beta * self.runner.value(self.c_name).reshape(1, self.o)
        return opw[None], b

    def write(self, Wt):
        opw = Wt[0, :self.k, :] / self.alpha
        self.runner.set_input(self.index, self.wi, np.ascontiguousarray(self._from_op_w(opw).astype(np.float32)),
                              "weight")
        if self.intercept:
            c = Wt[0, self.k, :] / self.beta
            shape = self.runner.value(self.c_name).shape if self.c_name else ((self.o,) if self.wi == 1 else (self.o, 1))
            self.runner.set_input(self.index, 2, c.reshape(shape).astype(np.float32), "bias")


class _MatMulConsumer(_MatrixConsumer):
    """``MatMul`` with a 2-D constant weight: ``x·W`` (rows: every leading position of x) or ``W·x`` (the
    transposed problem, rows: the last axis of x and the leading axes). The bias of the only reader, an ``Add`` of
    a constant vector ``[N]`` (``x·W``), is refit with it: the target is then the original ``Add``'s output."""

    def __init__(self, runner, index, out_kept, max_rows) -> None:
        super().__init__(runner, index, out_kept, max_rows)
        node = self.node
        W = runner.value(self.w_name)
        if W.ndim != 2:
            self.reason = "MatMul with a batched weight"
        self.k, self.o = (W.shape[0], W.shape[1]) if self.wi == 1 else (W.shape[1], W.shape[0])
        self.add_index = None
        self.intercept = False
        if self.wi == 1:
            readers = runner.readers.get(node.output[0], [])
            if len(readers) == 1 and node.output[0] not in runner.graph_outputs:
                a = runner.nodes[readers[0]]
                other = [x for x in a.input if x != node.output[0]]
                if a.op_type == "Add" and len(other) == 1 and runner.is_init(other[0]) and \
                        runner.value(other[0]).shape in ((self.o,), (1, self.o)):
                    self.add_index, self.add_slot = readers[0], list(a.input).index(other[0])
                    self.intercept = True

    @property
    def target_tensor(self) -> str:
        return self.runner.nodes[self.add_index].output[0] if self.add_index is not None else self.node.output[0]

    def rows(self, x, y, rng):
        if self.wi == 1:
            X = x.reshape(-1, x.shape[-1])
            y = self.target(y, y.ndim - 1)
            Y = y.reshape(-1, y.shape[-1])
        else:
            X = np.swapaxes(x, -1, -2).reshape(-1, x.shape[-2])
            y = self.target(y, y.ndim - 2)
            Y = np.swapaxes(y, -1, -2).reshape(-1, y.shape[-2])
        idx = self.pick(len(X), rng)
        if idx is not None:
            X, Y = X[idx], Y[idx]
        return (np.ascontiguousarray(X, np.float32)[:, None, :], np.ascontiguousarray(Y, np.float32)[:, None, :])

    def current(self):
        W = self.runner.value(self.w_name).astype(np.float64)
        W = W if self.wi == 1 else W.T
        b = None
        if self.add_index is not None:
            b = self.runner.value(self.runner.nodes[self.add_index].input[self.add_slot]).reshape(1, self.o)
        return W[None], b

    def write(self, Wt):
        W = Wt[0, :self.k, :]
        self.runner.set_input(self.index, self.wi, np.ascontiguousarray((W if self.wi == 1 else W.T).astype(np.float32)),
                              "weight")
        if self.add_index is not None:
            shape = self.runner.value(self.runner.nodes[self.add_index].input[self.add_slot]).shape
            self.runner.set_input(self.add_index, self.add_slot, Wt[0, self.k, :].reshape(shape).astype(np.float32),
                                  "bias")


_CONSUMERS = {"Conv": _ConvConsumer, "ConvTranspose": _ConvTransposeConsumer, "Gemm": _GemmConsumer,
              "MatMul": _MatMulConsumer}


# ------------------------------------------------------------------------------------------ the segment runner


def _trim_heap() -> None:
    """Give the heap's free pages back to the system (glibc ``malloc_trim``; nothing elsewhere): each segment's
    session frees its buffers on close, and without this the freed memory stays counted in the resident size."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes

            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


_LIBC = None


class _Half:
    """A float32 tensor stored as float16 times ``2^-e`` (``e`` puts its largest magnitude ``m`` near 2^14)."""

    __slots__ = ("data", "factor", "shape", "dtype")

    def __init__(self, v: np.ndarray, m: float) -> None:
        e = 0 if 2.0 ** -6 <= m < 2.0 ** 15 else min(120, max(-120, 14 - int(math.floor(math.log2(m)))))
        self.factor = float(2.0 ** -e)
        self.data = (v * np.float32(2.0 ** e) if e else v).astype(np.float16)
        self.shape, self.dtype = v.shape, np.dtype(np.float32)

    def restore(self) -> np.ndarray:
        x = self.data.astype(np.float32)
        return x * np.float32(self.factor) if self.factor != 1.0 else x

    @property
    def nbytes(self) -> int:
        return self.data.nbytes


class _Runner:
    """Runs one model's main graph over ``feeds`` in segments (module docstring), keeping per batch only the
    tensors a node left to run still reads (and the graph outputs). Weights live in ``arrays`` (handed to
    each sub-model's session in memory); :meth:`set_input` replaces one before its node runs."""

    def __init__(self, model: onnx.ModelProto, feeds: Sequence[dict], engine, core_count: Optional[int],
                 cancel: Optional[CancelToken], compact: bool = True, base_dir=None) -> None:
        from sparsify_tui.analysis.loading import external_data_info, tensor_array
        from sparsify_tui.engine.weights import strip_initializers

        self.model = model
        self.engine, self.core_count, self.cancel = engine, core_count, cancel
        g = model.graph
        self.nodes = list(g.node)
        # weights of a model loaded with map_weights stay memory-mapped from its file (no copy in memory);
        # small constants (shapes, slices) stay in the proto
        self.arrays = {}
        for t in g.initializer:
            if external_data_info(t) is not None:
                arr = tensor_array(t, base_dir)
                placeholder_tensor(t, t.name, arr)
                self.arrays[t.name] = arr
        self.arrays.update(strip_initializers(model))
        self.inits = {t.name: t for t in g.initializer}
        self.graph_inputs = [vi.name for vi in g.input if vi.name not in self.inits]
        self.graph_outputs = {vi.name for vi in g.output}
        self.node_inputs = [(set(n.input) | outer_scope_reads(n)) - {""} for n in self.nodes]
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.output if o}
        self.readers: dict = {}
        for i, ins in enumerate(self.node_inputs):
            for x in ins:
                self.readers.setdefault(x, []).append(i)
        self.done = np.zeros(len(self.nodes), dtype=bool)
        self.cache = [{k: v for k, v in f.items() if k in self.graph_inputs} for f in feeds]
        self.bytes = 0  # cached activations (graph inputs excluded)
        self.sessions = 0
        self.compact = compact
        self.half: set = set()

    # -- constants
    def is_init(self, name: str) -> bool:
        return name in self.inits

    def is_const(self, name: str) -> bool:
        if name in self.inits:
            return True
        p = self.producer.get(name)
        return p is not None and all(self.is_const(x) for x in self.node_inputs[p]) and \
            self.nodes[p].op_type not in ("RandomNormal", "RandomUniform")

    def value(self, name: str) -> np.ndarray:
        """The value of constant ``name`` (an initializer, or computed from initializers by a weight chain)."""
        if name in self.arrays:
            return self.arrays[name]
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        from sparsify_tui.analysis.channels import constant_view

        # a weight chain (Transpose, Reshape... of initializers): evaluated on a model of just that chain
        nodes, inits, stack = [], {}, [name]
        while stack:
            x = stack.pop()
            if x in self.inits:
                inits[x] = numpy_helper.from_array(np.ascontiguousarray(self.value(x)), x)
                continue
            p = self.producer.get(x)
            if p is None:
                raise KeyError(x)
            nodes.append(self.nodes[p])
            stack.extend(i for i in self.nodes[p].input if i)
        graph = onnx.helper.make_graph(nodes[::-1], "chain", [], [], initializer=list(inits.values()))
        return np.asarray(constant_view(onnx.helper.make_model(graph), name))

    def set_input(self, index: int, slot: int, arr: np.ndarray, what: str) -> None:
        """Make input ``slot`` of node ``index`` (not run yet) the constant ``arr``: in place when it is an
        initializer only that node reads with the same shape, else as a new initializer."""
        node = self.nodes[index]
        name = node.input[slot] if slot < len(node.input) else ""
        if name and name in self.inits and len(self.readers.get(name, [])) == 1 and name not in self.graph_outputs \
                and tuple(self.inits[name].dims) == arr.shape and \
                self.inits[name].data_type == onnx.helper.np_dtype_to_tensor_dtype(arr.dtype):
            self._store(self.inits[name], name, arr)
            return
        base = f"{node_id(node, index)}_{what}_reconstructed"
        new, k = base, 1
        taken = set(self.inits) | set(self.producer)
        while new in taken:
            k += 1
            new = f"{base}_{k}"
        t = self.model.graph.initializer.add()
        self._store(t, new, arr)
        self.inits[new] = t
        while len(node.input) <= slot:
            node.input.append("")
        if name:
            self.readers[name].remove(index)
        node.input[slot] = new
        self.node_inputs[index] = (self.node_inputs[index] - {name}) | {new}
        self.readers[new] = [index]

    def _store(self, t: onnx.TensorProto, name: str, arr: np.ndarray) -> None:
        if arr.nbytes >= 1024:  # as strip_initializers: handed to the runtime in memory
            placeholder_tensor(t, name, arr)
            self.arrays[name] = arr
        else:
            t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(arr), name))
            self.arrays.pop(name, None)

    # -- running
    def advance(self, targets: Sequence[str]) -> None:
        """Run the nodes ``targets`` depend on that have not run yet (one sub-model over every batch); cache their
        outputs still needed."""
        seg = set()
        stack = [self.producer[t] for t in targets if t in self.producer and not self.done[self.producer[t]]]
        while stack:
            i = stack.pop()
            if i in seg or self.done[i]:
                continue
            seg.add(i)
            for x in self.node_inputs[i]:
                p = self.producer.get(x)
                if p is not None and not self.done[p] and p not in seg:
                    stack.append(p)
        if not seg:
            return
        order = sorted(seg)
        produced = {o for i in order for o in self.nodes[i].output if o}
        used = set().union(*(self.node_inputs[i] for i in order))
        inputs = sorted(used - produced - set(self.inits))
        self.done[order] = True
        wanted = set(targets) | self.graph_outputs
        outputs = sorted(o for o in produced if o in wanted or any(not self.done[r] for r in self.readers.get(o, ())))
        if outputs:
            self._run(order, inputs, outputs, used)
        self._evict()

    def _run(self, order, inputs, outputs, used) -> None:
        from sparsify_tui.analysis.loading import set_ir_version
        from sparsify_tui.engine.timing import canceled_as_job

        vis = []
        for n in inputs:
            vals = [c[n] for c in self.cache]
            a = vals[0]
            dims = [d if all(v.shape[j] == d for v in vals) else f"d{j}" for j, d in enumerate(a.shape)]
            dt = np.dtype(np.float32) if n in self.half else a.dtype
            vis.append(onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(dt), dims))
        inits = [self.inits[x] for x in sorted(used) if x in self.inits]
        graph = onnx.helper.make_graph([self.nodes[i] for i in order], "segment", vis,
                                       [onnx.ValueInfoProto(name=o) for o in outputs], initializer=inits)
        sub = onnx.helper.make_model(graph, opset_imports=list(self.model.opset_import))
        set_ir_version(sub, max(4, min(int(self.model.ir_version), 10)))
        ext = {t.name: self.arrays[t.name] for t in inits if t.name in self.arrays}
        sess = self.engine.open_session(sub.SerializeToString(), self.core_count, external_initializers=ext)
        self.sessions += 1
        try:
            run = sess.runner(outputs, self.cancel)
            with canceled_as_job(self.cancel):
                for c in self.cache:
                    maybe_check(self.cancel)
                    vals = run({n: (c[n].restore() if isinstance(c[n], _Half) else c[n]) for n in inputs})
                    for name, v in zip(outputs, vals):
                        c[name] = self._compact(name, v)
                        self.bytes += c[name].nbytes
            del run
        finally:
            sess.close()
            _trim_heap()

    def _compact(self, name: str, v: np.ndarray):
        """Once the cache holds :data:`COMPACT_ABOVE_BYTES`, new float32 activations are kept as :class:`_Half`
        (float16, scaled by a power of two when needed so the largest
        value sits near 2^14): half the memory, a rounding of 2^-11 relative to each value down to 2^-24 of the
        tensor's largest (far below any error reconstruction leaves), whatever the tensor's scale."""
        if self.compact and self.bytes > COMPACT_ABOVE_BYTES and v.dtype == np.float32 and v.size >= 1024:
            m = float(np.max(np.abs(v)))
            if np.isfinite(m) and m > 0:
                self.half.add(name)
                return _Half(v, m)
        return v

    def get(self, batch: int, name: str) -> np.ndarray:
        """Cached tensor ``name`` of batch ``batch``, as the model computed it (float32 when it was compacted)."""
        v = self.cache[batch][name]
        return v.restore() if isinstance(v, _Half) else v

    def _evict(self) -> None:
        keep_always = self.graph_outputs
        for c in self.cache:
            for name in list(c):
                if name in keep_always:
                    continue
                if not any(not self.done[r] for r in self.readers.get(name, ())):
                    if name not in self.graph_inputs:
                        self.bytes -= c[name].nbytes
                    del c[name]


# ------------------------------------------------------------------------------------------ reconstruct


def reconstruct(original_path: Union[str, os.PathLike], thinned_path: Union[str, os.PathLike],
                out_path: Union[str, os.PathLike], feeds: Sequence[dict], consumers: Sequence[ConsumerSpec], *,
                ridge: Union[float, str] = RIDGE, max_rows_per_item: int = MAX_ROWS_PER_ITEM, max_columns: int = MAX_COLUMNS,
                seed: int = 0, engine: Any = None, core_count: Optional[int] = None,
                progress: Optional[ProgressFn] = None, cancel: Optional[CancelToken] = None) -> ReconstructionResult:
    """Refit every consumer of a thinning on calibration data (module docstring) and write the model.

    Args:
        original_path: the model before thinning (the targets: each consumer's original output).
        thinned_path: the thinned model (:func:`sparsify_tui.engine.thinning.thin_model`); node ids and tensor
            names as in the original.
        out_path: where to write the reconstructed model (not ``thinned_path``: its weights are read from that
            file, memory-mapped, while the new one is written).
        feeds: calibration batches (feed dicts of the graph inputs; other keys are ignored), at least one.
        consumers: the layers to refit (:func:`consumer_specs`), any order (they are refit in topological order).
        ridge: relative ridge (λ = ridge · mean(diag(XᵀX))), > 0, or ``"auto"`` (default): per consumer, the
            candidate of :data:`RIDGES` whose fit on the even items has the least error on the odd items.
        max_rows_per_item: least-squares rows per consumer per batch at most (positions drawn with ``seed``).
        max_columns: consumers with more unknowns per output channel (per group) get bias compensation only.

    Returns:
        :class:`ReconstructionResult`.

    Raises:
        SparsifyError: no feeds, a bad ridge, a consumer id not in the thinned model (one line); ``ModelError``
        when onnxruntime cannot run a segment; ``JobCanceled``.
    """
    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.engine import get_engine
    from sparsify_tui.engine.weights import write_model

    if not feeds:
        raise SparsifyError("reconstruction needs calibration items: give --data FILE.npz with at least one item")
    if Path(out_path).resolve() == Path(thinned_path).resolve():
        raise SparsifyError("reconstruction reads the thinned model while it writes: give another out_path")
    if ridge != "auto":
        try:
            ridge = float(ridge)
        except (TypeError, ValueError):
            ridge = -1.0
        if not ridge > 0:
            raise SparsifyError(f"ridge must be a number > 0 or auto (got {ridge}): a relative ridge such as 0.01")
    engine = get_engine(engine)
    prog = progress or (lambda s, f: None)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    fits: list = []
    with PeakRSS() as mem:
        batches, counts = _chunks(original_path, feeds, engine, core_count, cancel)
        orig = _Runner(load_model(original_path, map_weights=True), batches, engine, core_count, cancel,
                       base_dir=Path(original_path).parent)
        thin = _Runner(load_model(thinned_path, map_weights=True), batches, engine, core_count, cancel,
                       base_dir=Path(thinned_path).parent)
        by_id = {node_id(n, i): i for i, n in enumerate(thin.nodes)}
        orig_ids = {node_id(n, i): i for i, n in enumerate(orig.nodes)}
        plan = []
        for spec in consumers:
            if spec.node not in by_id or spec.node not in orig_ids:
                raise SparsifyError(f"consumer {spec.node!r} is not a node of both models: pass the node ids of "
                                    "the thinned model's consumers (consumer_specs)")
            plan.append((by_id[spec.node], spec))
        plan.sort(key=lambda p: p[0])
        items = int(sum(counts))
        for step, (idx, spec) in enumerate(plan):
            maybe_check(cancel)
            prog(f"reconstructing {spec.node}", step / max(1, len(plan)))
            fits.append(_fit_one(orig, thin, idx, spec, counts, ridge=ridge, max_rows=max_rows_per_item,
                                 max_columns=max_columns, rng=rng, cancel=cancel))
        prog("writing", 0.98)
        model = thin.model
        # placeholders keep their arrays: write_model streams them from memory
        used = set().union(*thin.node_inputs) | {vi.name for vi in model.graph.input}
        kept_inits = []
        for t in model.graph.initializer:  # the replaced weights (no longer read) are dropped
            if t.name in used or t.name in thin.graph_outputs:
                kept_inits.append(onnx.TensorProto())
                kept_inits[-1].CopyFrom(t)
        del model.graph.initializer[:]
        model.graph.initializer.extend(kept_inits)
        arrays = {t.name: thin.arrays[t.name] for t in kept_inits if t.name in thin.arrays}
        del orig
        write_model(model, Path(out_path), arrays=arrays)
    prog("done", 1.0)
    return ReconstructionResult(items=int(items), ridge=ridge, seconds=time.perf_counter() - t0,
                                peak_mb=mem.added / 1e6, consumers=fits, out_path=str(out_path),
                                max_rows_per_item=int(max_rows_per_item))


def _chunks(model_path, feeds: Sequence[dict], engine, core_count, cancel, size: int = CHUNK_ITEMS):
    """``(batches, items per batch)``: ``feeds`` merged ``size`` at a time along axis 0 when the model computes a
    stacked batch item by item (checked: two feeds run apart and together give the same outputs), so each segment
    runs once per chunk (onnxruntime's per-run overhead and layout changes dominate per-item runs); else the feeds
    as given. Feed keys that are not model inputs are dropped."""
    with engine.open_session(str(model_path), core_count) as sess:
        names = list(sess.input_names)
        feeds = [{k: v for k, v in f.items() if k in names} for f in feeds]
        counts = [int(next((v.shape[0] for v in f.values() if getattr(v, "ndim", 0) > 0), 1)) for f in feeds]

        def alike(a: dict, b: dict) -> bool:
            return set(a) == set(b) == set(names) and all(
                isinstance(a[k], np.ndarray) and a[k].ndim > 0 and a[k].shape[1:] == b[k].shape[1:] and
                a[k].dtype == b[k].dtype for k in a)

        if size <= 1 or len(feeds) < 2 or not all(alike(feeds[0], f) for f in feeds[1:]):
            return list(feeds), counts
        run = sess.runner(None, cancel)
        try:
            apart = [run(feeds[0]), run(feeds[1])]
            together = run({k: np.concatenate([feeds[0][k], feeds[1][k]]) for k in names})
        except Exception:  # noqa: BLE001 - a model with a fixed batch size: run the feeds one by one
            return list(feeds), counts
        for a, b, t in zip(apart[0], apart[1], together):
            ref = np.concatenate([a, b]) if np.ndim(a) else None
            if ref is None or ref.shape != np.shape(t) or not np.allclose(ref, t, rtol=1e-3, atol=1e-5 * (
                    float(np.max(np.abs(ref))) if ref.size else 1.0)):
                return list(feeds), counts
    size = max(1, min(size, len(feeds) // 4))  # at least 4 batches: the ridge is chosen on even/odd batches
    batches, sizes = [], []
    for i in range(0, len(feeds), size):
        part = feeds[i:i + size]
        batches.append({k: np.concatenate([f[k] for f in part]) for k in names})
        sizes.append(sum(counts[i:i + size]))
    return batches, sizes


def _fit_one(orig: _Runner, thin: _Runner, idx: int, spec: ConsumerSpec, counts: Sequence[int], *, ridge,
             max_rows: int, max_columns: int, rng: np.random.Generator, cancel) -> ConsumerFit:
    """Accumulate and solve one consumer (``idx`` in the thinned model) and write its refit into ``thin``. Items
    alternate between two folds; ``ridge="auto"`` takes the candidate of :data:`RIDGES` whose fit on fold 0 has the
    least error on fold 1. The refit is kept only when that validation error is below the thinned layer's on fold 1
    (else the layer stays as thinned: a refit that does not generalize, e.g. 32 rows for 641 unknowns, would only
    add error)."""
    t = time.perf_counter()
    node = thin.nodes[idx]
    fit = ConsumerFit(spec.node, node.op_type, "none")
    kind = _CONSUMERS.get(node.op_type)
    if kind is None:
        fit.reason = f"{node.op_type} is not a Conv, ConvTranspose, Gemm or MatMul"
        return fit
    c = kind(thin, idx, spec.out_kept, max_rows)
    w_arr = thin.value(c.w_name)
    if c.reason is None and w_arr.dtype != np.float32:
        c.reason = f"its weight is {w_arr.dtype}, not float32"
    if c.reason is not None:
        fit.reason = c.reason
        return fit
    target = getattr(c, "target_tensor", node.output[0])
    orig.advance([target])
    thin.advance([c.data_input])
    W0, b0 = c.current()
    b0 = np.zeros((c.groups, c.o)) if b0 is None else np.asarray(b0, np.float64).reshape(c.groups, c.o)
    fit.columns = c.k + (1 if c.intercept else 0)
    if c.k > max_columns:
        _bias_only(fit, c, orig, thin, target, W0, b0, max_columns, counts, rng, cancel)
        fit.seconds = time.perf_counter() - t
        return fit
    ne = NormalEquations(c.groups, c.k, c.o, c.intercept)
    for b in range(len(thin.cache)):
        maybe_check(cancel)
        c.max_rows = c.per_item * counts[b]
        X, Y = c.rows(thin.get(b, c.data_input), orig.get(b, target), rng)
        ne.add(X, Y, b % 2)
    fit.rows = int(ne.rows)
    Wt0 = np.concatenate([W0, b0[:, None, :]], axis=1) if c.intercept else W0
    fit.rel_error_before = ne.rel_error(Wt0)
    if ridge == "auto":
        chosen, cv = ne.choose_ridge(RIDGES)
    else:
        chosen, cv = float(ridge), ne.cv_error(float(ridge))
    fit.ridge, fit.rel_error_validation = chosen, (None if math.isinf(cv) else cv)
    held = None if math.isinf(cv) else ne.rel_error(Wt0, part=1)
    if held is not None and not cv < held:
        fit.reason = (f"the refit does not generalize (validation error {cv:.3g} against {held:.3g} as thinned, "
                      f"{ne.rows} rows for {fit.columns} unknowns): left as thinned")
        fit.rel_error_after = fit.rel_error_before
        fit.seconds = time.perf_counter() - t
        return fit
    Wt = ne.solve(chosen)
    fit.method = "least_squares"
    fit.rel_error_after = ne.rel_error(Wt)
    c.write(Wt)
    fit.seconds = time.perf_counter() - t
    return fit


def _bias_only(fit: ConsumerFit, c: "_Consumer", orig: "_Runner", thin: "_Runner", target: str, W0, b0,
               max_columns: int, counts: Sequence[int], rng, cancel) -> None:
    """Bias compensation for a consumer too wide for the normal equations: the residual ``R = Y − X·W − b`` of the
    thinned layer is accumulated (its sum and sum of squares per output), and its mean folded into the bias."""
    if not c.intercept:
        fit.reason = f"{c.k} unknowns per output (over {max_columns}) and no bias to compensate: left as thinned"
        return
    s = np.zeros((c.groups, c.o))
    sq = np.zeros((c.groups, c.o))
    yy = 0.0
    n = 0
    Wf = W0.astype(np.float32)
    for b in range(len(thin.cache)):
        maybe_check(cancel)
        c.max_rows = c.per_item * counts[b]
        X, Y = c.rows(thin.get(b, c.data_input), orig.get(b, target), rng)
        R = Y.astype(np.float64) - np.matmul(X.transpose(1, 0, 2), Wf).transpose(1, 0, 2) - b0[None]
        s += R.sum(axis=0)
        sq += np.einsum("rgo,rgo->go", R, R)
        yy += float(np.einsum("rgo,rgo->", Y, Y, dtype=np.float64))
        n += len(R)
    fit.rows = n
    delta = s / max(n, 1)
    fit.rel_error_before = float(sq.sum()) / max(yy, 1e-30)
    fit.rel_error_after = float((sq - n * delta * delta).sum()) / max(yy, 1e-30)
    c.write(np.concatenate([W0, (b0 + delta)[:, None, :]], axis=1))
    fit.method = "bias"
    fit.reason = f"{c.k} unknowns per output (over {max_columns}): bias compensation only"


# ------------------------------------------------------------------------------------------ dense refits


class DenseRefit:
    """Reconstruction of single layers of the **original** model, for a sensitivity measured after reconstruction
    (:mod:`sparsify_tui.profiling.loss_channel`): when only some input positions (channels) of a consumer are
    removed and its upstream is the original, its inputs are the original ones with those positions zeroed and its
    target is its own original output ``Y = X̃·W̃``. So ``C = X̃ᵀY = G·W̃`` and the refit of any kept set ``K`` is

        ``W̃_K = (G_KK + λ)⁻¹ · G_K,: · W̃``

    from the Gram matrix ``G = X̃ᵀX̃`` of the original inputs alone, accumulated once (:meth:`accumulate`, one run
    of the model over the calibration items) and solved per kept set (:meth:`refit`). λ is the ridge times the mean
    of ``diag G`` over all the layer's inputs (:func:`reconstruct` takes it over the kept ones). Consumers are Conv (group 1),
    ConvTranspose, Gemm and MatMul (with its bias Add), as :func:`reconstruct` refits them."""

    def __init__(self, model: onnx.ModelProto, node_indices: Sequence[int], *, engine=None, core_count=None,
                 cancel=None, max_rows_per_item: int = 128, base_dir=None) -> None:
        from sparsify_tui.engine import get_engine

        self.engine = get_engine(engine)
        self.core_count, self.cancel = core_count, cancel
        self.runner = _Runner(model, [], self.engine, core_count, cancel, base_dir=base_dir)
        self.consumers: dict = {}
        for i in node_indices:
            kind = _CONSUMERS.get(self.runner.nodes[i].op_type)
            if kind is None:
                continue
            c = kind(self.runner, i, None, max_rows_per_item)
            if c.reason is None and c.groups == 1 and c.k <= MAX_COLUMNS and \
                    self.runner.value(c.w_name).dtype == np.float32:
                self.consumers[i] = c
        self.G: dict = {}
        self.W: dict = {}
        self.chol: dict = {}
        self.GW: dict = {}

    def accumulate(self, feeds: Sequence[dict], seed: int = 0) -> None:
        """One run of the model over ``feeds`` (one session), summing every consumer's ``G`` (float64 up to
        :data:`FLOAT64_COLUMNS` columns, else float32)."""
        from sparsify_tui.analysis.loading import set_ir_version
        from sparsify_tui.engine.timing import canceled_as_job

        rng = np.random.default_rng(seed)
        r = self.runner
        fetch = sorted({c.data_input for c in self.consumers.values()}
                       | {getattr(c, "target_tensor", r.nodes[i].output[0]) for i, c in self.consumers.items()})
        m = onnx.ModelProto()
        m.CopyFrom(r.model)
        outs = {o.name for o in m.graph.output}
        m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in fetch if n not in outs)
        set_ir_version(m, max(4, min(int(m.ir_version), 10)))
        ext = {t.name: r.arrays[t.name] for t in m.graph.initializer if t.name in r.arrays}
        ne = {i: NormalEquations(1, c.k, c.o, c.intercept) for i, c in self.consumers.items()}
        with self.engine.open_session(m.SerializeToString(), self.core_count, external_initializers=ext) as sess:
            run = sess.runner(fetch, self.cancel)
            with canceled_as_job(self.cancel):
                for feed in feeds:
                    maybe_check(self.cancel)
                    vals = dict(zip(fetch, run({k: v for k, v in feed.items() if k in r.graph_inputs})))
                    for i, c in self.consumers.items():
                        X, Y = c.rows(vals[c.data_input], vals[getattr(c, "target_tensor", r.nodes[i].output[0])],
                                      rng)
                        ne[i].add(X, Y[:, :, :1])  # only G is used: one output column is enough to stream rows
            del run
        _trim_heap()
        for i, n in ne.items():
            n._ready()
            self.G[i] = n.G[0][0] + n.G[1][0]
            W0, b0 = self.consumers[i].current()
            c = self.consumers[i]
            self.W[i] = np.concatenate([W0[0], np.asarray(b0, np.float64).reshape(1, c.o) if b0 is not None
                                        else np.zeros((1, c.o))]) if c.intercept else W0[0]

    def positions(self, index: int) -> int:
        """Input positions (channels, or features for Gemm/MatMul) of consumer ``index``: a removed position takes
        ``columns // positions`` columns of its rows."""
        c = self.consumers[index]
        return c.w_shape[1] if c.node.op_type == "Conv" else c.w_shape[0] if c.node.op_type == "ConvTranspose" else c.k

    def _penalized(self, index: int, ridge: float) -> np.ndarray:
        """``A = G + λ`` (float64; λ = ``ridge`` · the mean of ``diag G`` over the layer's inputs, the intercept
        unpenalized)."""
        c = self.consumers[index]
        A = self.G[index].astype(np.float64)
        k = c.k
        scale = float(np.mean(np.diag(A)[:k])) if k else 0.0
        ii = np.arange(k)
        A[ii, ii] += ridge * scale if scale > 0 else ridge
        if c.intercept:
            A[k, k] += 1e-9 * max(scale, 1.0)
        return A

    def order(self, index: int, rank: np.ndarray, ridge: float) -> None:
        """Prepare consumer ``index`` for kept sets that shrink in one order: ``rank`` per input position (the step
        at which it is removed; ``inf`` = never). Columns are permuted so that every such kept set is a leading
        block (the intercept first, then positions by decreasing rank), ``A = G + λ`` is factored once
        (``A = L·Lᵀ``, Cholesky) and ``L⁻¹`` kept: the leading block of ``L`` is the Cholesky factor of the leading
        block of ``A`` and the inverse of a triangular block is the block of the inverse, so each kept set then costs
        two products (``x = L_n⁻ᵀ·L_n⁻¹·b``), not a factorization."""
        c = self.consumers[index]
        per = c.k // self.positions(index)
        col_rank = np.repeat(np.asarray(rank, np.float64), per)
        perm = np.argsort(-col_rank, kind="stable")
        if c.intercept:
            perm = np.concatenate([[c.k], perm])
        A = self._penalized(index, ridge)[np.ix_(perm, perm)]
        if len(A) > FLOAT64_COLUMNS:  # as NormalEquations: the ridge bounds the condition number
            A = A.astype(np.float32)
        try:
            L = np.linalg.cholesky(A)
        except np.linalg.LinAlgError:
            self.chol.pop(index, None)
            return
        self.chol[index] = (ridge, perm, np.linalg.inv(L))

    def refit(self, index: int, kept_positions: np.ndarray, ridge: float) -> tuple:
        """``(weight, bias)``: consumer ``index``'s weight in the node's own layout, refit on its kept input positions
        (bool per position) and zero at the removed ones, and ``((node index, input slot), bias array)`` of its bias
        (the node's own, or the constant of its bias Add) or None without an intercept. A kept set that is a leading
        block of the order given to :meth:`order` costs two matrix products; any other one a solve."""
        c = self.consumers[index]
        per = c.k // self.positions(index)
        cols = np.repeat(np.asarray(kept_positions, bool), per)
        if c.intercept:
            cols = np.concatenate([cols, [True]])
        if index not in self.GW:
            self.GW[index] = self.G[index].astype(np.float64) @ self.W[index]
        Wt = np.zeros_like(self.W[index])
        n = int(cols.sum())
        ch = self.chol.get(index)
        if ch is not None and ch[0] == ridge and cols[ch[1][:n]].all():
            _r, perm, Linv = ch
            Ln = Linv[:n, :n]
            Wt[perm[:n]] = (Ln.T @ (Ln @ self.GW[index][perm[:n]].astype(Ln.dtype))).astype(np.float64)
        else:
            K = np.flatnonzero(cols)
            Wt[K] = _solve(self._penalized(index, ridge)[np.ix_(K, K)], self.GW[index][K])
        r = self.runner
        node = r.nodes[index]
        c.write(Wt[None])
        weight = r.value(node.input[getattr(c, "wi", 1)])
        if not c.intercept:
            return weight, None
        at = (c.add_index, c.add_slot) if getattr(c, "add_index", None) is not None else (index, 2)
        return weight, (at, r.value(r.nodes[at[0]].input[at[1]]))

    def release(self, index: int) -> None:
        """Drop consumer ``index``'s matrices (its group is measured)."""
        for d in (self.G, self.chol, self.GW):
            d.pop(index, None)


def _solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``A⁻¹·b`` (float32 above :data:`FLOAT64_COLUMNS` rows, as :meth:`NormalEquations.solve`), least squares when
    ``A`` is singular."""
    dt = np.float64 if len(A) <= FLOAT64_COLUMNS else np.float32
    try:
        return np.linalg.solve(A.astype(dt), b.astype(dt)).astype(np.float64)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(A, b, rcond=None)[0]


__all__ = ["RIDGE", "MAX_ROWS_PER_ITEM", "MAX_COLUMNS", "ConsumerFit", "ConsumerSpec", "ReconstructionResult",
           "NormalEquations", "conv_windows", "consumer_specs", "reconstruct"]
