"""Fast one-shot pruning sensitivity: each layer pruned alone, outputs compared with the dense model.

How it stays fast (measured in ``benchmarks/loss_profile.py``):

1. **No session per measurement.** Pruned weights are fed at run time as *overridable initializers*
   (the layer's weight is listed as a graph input while its initializer stays, IR ≥ 4), so a session
   serves every level of every layer it covers.
2. **No re-run of the part above the pruned layer.** One dense session records the activations that
   feed the pruned part of the graph (and the dense outputs, the reference of every measurement). For a
   group of layers the session holds only the nodes downstream of those layers (the union of their
   descendants); the activations entering that part are fed from the dense pass. The first layer's
   group is (nearly) the whole network, a last layer's group a few nodes.
3. **Groups chosen by cost.** Layers (in graph order) are split into contiguous groups by dynamic
   programming on a cost model calibrated on this machine by the dense session: session creation ≈
   (its creation time) × (share of nodes), run ≈ (its run time) × (share of FLOPs) + a per-run overhead.
   One group = one session for the whole profile (``strategy="single"``); one layer per group =
   ``strategy="layer"``; ``"auto"`` (default) takes the cheapest split. Only one session is alive at a time.
4. **No weight copies.** The model's weights are taken out of the protobuf once
   (:func:`sparsify_tui.engine.weights.strip_initializers`) and handed to every session in memory (the
   engine's ``open_session(..., external_initializers=...)``; onnxruntime:
   ``SessionOptions.add_external_initializers``), so building and opening a sub-model costs no
   serialization. A layer's levels are pruned in one reused buffer
   (:func:`~sparsify_tui.engine.pruning.magnitude_prune_levels`, no sort).
5. **Nothing run twice.** Level 0 (and any level that removes only weights that are already zero) equals
   the dense model: its value is 0 without a run. Sub-models reproduce the dense outputs to rounding
   (NMSE ≤ 2e-13, KL ≤ 6e-13 on ResNet-50), far below any measured sensitivity, so the dense pass is the
   reference and groups need no reference runs of their own.
6. **INT8 in the same sessions.** With ``int8=True`` each layer's data input gets a gated
   QuantizeLinear/DequantizeLinear branch (``x + gate·(QDQ(x) − x)``, gate an overridable scalar, 0 by
   default, so every other run is bit-identical to FP32); one more run per layer and batch sets the gate
   to 1 and feeds the INT8 quantize-dequantized weight.

The lower bound of this design is the FLOPs below each layer: on ResNet-50 the mean share is 0.50 of
the network, so the runs alone take about 0.45 of the bare inference time of layers x levels x batches
full-model runs (level 0 is free). Nothing is cached across profiles and the model file is never
written: weights live in this process only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from sparsify_tui.analysis.graph import has_subgraphs, outer_scope_reads
from sparsify_tui.analysis.layers import LayerRef, find_layers
from sparsify_tui.analysis.loading import load_model
from sparsify_tui.engine.pruning import magnitude_prune_levels, pruned_count
from sparsify_tui.engine.timing import canceled_as_job
from sparsify_tui.engine.weights import strip_initializers
from sparsify_tui.errors import ModelError, SparsifyError
from sparsify_tui.progress import maybe_check

ONE = np.array(1.0, dtype=np.float32)
RUN_OVERHEAD_S = 0.0003  # python + feed binding per run, order of magnitude on this class of machine
_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                     "Bernoulli", "Dropout"}


# -- metrics: one place, sparsify_tui.profiling.metrics (re-exported here for existing callers) ----------
from sparsify_tui.profiling.metrics import (  # noqa: E402,F401
    FLAT_SPAN, OutputMetric, auto_metric, flat_warning, is_probability, kl_divergence, nmse, output_span,
)
from sparsify_tui.profiling.metrics import softmax as _softmax  # noqa: E402,F401


# -- graph structure ---------------------------------------------------------------------------------------


class GraphIndex:
    """Producer/consumer index of the main graph; ``descendants(i)`` as a boolean mask over nodes."""

    def __init__(self, model):
        g = model.graph
        self.nodes = list(g.node)
        self.init_names = {t.name for t in g.initializer}
        self.input_names = [vi.name for vi in g.input if vi.name not in self.init_names]
        self.output_names = [vi.name for vi in g.output]
        self.node_inputs = [(set(n.input) | outer_scope_reads(n)) - {""} for n in self.nodes]
        self.consumers: dict = {}
        for i, ins in enumerate(self.node_inputs):
            for name in ins:
                self.consumers.setdefault(name, []).append(i)
        # tensors computed from initializers only (e.g. Identity of a shared bias): kept inside every
        # sub-model so onnxruntime still sees constants (fed as inputs they would block fusions/pre-packing)
        self.const_producer: dict = {}
        for i, n in enumerate(self.nodes):
            ins = self.node_inputs[i]
            if (n.op_type not in _NONDETERMINISTIC and not has_subgraphs(n)
                    and all(x in self.init_names or x in self.const_producer for x in ins)):
                for o in n.output:
                    self.const_producer[o] = i

    def descendants(self, start: int) -> np.ndarray:
        mask = np.zeros(len(self.nodes), dtype=bool)
        stack = [start]
        mask[start] = True
        while stack:
            i = stack.pop()
            for out in self.nodes[i].output:
                for c in self.consumers.get(out, ()):
                    if not mask[c]:
                        mask[c] = True
                        stack.append(c)
        return mask

    def with_constants(self, mask: np.ndarray) -> np.ndarray:
        """``mask`` plus the constant-only nodes producing tensors it uses (transitively)."""
        mask = mask.copy()
        while True:
            add = {self.const_producer[n] for n in self.frontier(mask) if n in self.const_producer}
            if not add:
                return mask
            mask[list(add)] = True

    def frontier(self, mask: np.ndarray) -> list:
        """Non-initializer tensors used by the masked nodes and produced outside them (graph inputs included)."""
        produced, used = set(), set()
        for i in np.flatnonzero(mask):
            produced.update(self.nodes[i].output)
            used.update(self.node_inputs[i])
        return sorted(used - produced - self.init_names)


def node_costs(model_path, model, batch_size, dims, sample: Optional[dict] = None, engine=None) -> np.ndarray:
    """FLOPs per main-graph node from :func:`sparsify_tui.analysis.nodes.analyze_model` (with ``engine``'s shape
    inference; min 1 per node);
    all ones when the analysis fails or cannot align with the graph (the cost model only picks groups).
    Dims missing from ``dims`` are taken from the shapes of the ``sample`` feed."""
    n = len(model.graph.node)
    all_dims = {}
    for name, arr in (sample or {}).items():
        all_dims.update({f"{name}:{ax}": int(v) for ax, v in enumerate(np.shape(arr))})
    all_dims.update(dims or {})
    try:
        from sparsify_tui.analysis.nodes import analyze_model

        a = analyze_model(str(model_path), batch_size=batch_size, dims=all_dims, include_system=False, engine=engine)
        main = [x for x in a.nodes if not x.graph]
        if len(main) == n:
            return np.maximum(np.array([float(x.flops or 0) for x in main]), 1.0)
    except Exception:  # noqa: BLE001 - the cost model is an optimization only
        pass
    return np.ones(n)


def plan_groups(masks: list, costs: np.ndarray, runs_per_layer: int,
                t_create: float, t_run: float) -> list:
    """Split layers ``0..L-1`` (graph order) into contiguous groups minimizing the modeled time.

    ``masks[l]``: descendants mask of layer l. Cost of a group = ``t_create · nodes share + (runs_per_layer ·
    size) · (t_run · FLOPs share + RUN_OVERHEAD_S)``. Returns ``[(start, stop), ...]``.
    """
    L = len(masks)
    total_cost, total_nodes = float(costs.sum()), float(len(costs))
    best = [0.0] + [float("inf")] * L
    back = [0] * (L + 1)
    for i in range(L):
        union = np.zeros_like(masks[0])
        for j in range(i, L):
            union |= masks[j]
            share_n = union.sum() / total_nodes
            share_f = float(costs[union].sum()) / total_cost
            c = t_create * share_n + runs_per_layer * (j - i + 1) * (t_run * share_f + RUN_OVERHEAD_S)
            if best[i] + c < best[j + 1]:
                best[j + 1] = best[i] + c
                back[j + 1] = i
    groups, j = [], L
    while j > 0:
        groups.append((back[j], j))
        j = back[j]
    return groups[::-1]


def _value_info(name: str, arr: np.ndarray):
    import onnx

    elem = onnx.helper.np_dtype_to_tensor_dtype(arr.dtype)
    return onnx.helper.make_tensor_value_info(name, elem, list(arr.shape))


def open_session(engine, model, arrays: dict, core_count: Optional[int]):
    """``engine`` session on ``model`` (a ModelProto whose placeholders were made by
    :func:`~sparsify_tui.engine.weights.strip_initializers`), with the placeholders' data supplied from
    ``arrays`` in memory."""
    ext = {t.name: arrays[t.name] for t in model.graph.initializer if t.name in arrays}
    return engine.open_session(model.SerializeToString(), core_count, external_initializers=ext)


def gate_name(layer_index: int) -> str:
    """Overridable scalar input that switches layer ``layer_index``'s simulated INT8 input on (1) or off (0)."""
    return f"__loss_int8_gate_{layer_index}"


def activation_qparams(rmin: float, rmax: float) -> tuple:
    """uint8 asymmetric (scale, zero point) for a MinMax range, as ``quantize_static`` computes them for
    activations: the range is widened to include 0; scale = (rmax − rmin)/255, zp = round(−rmin/scale)."""
    rmin, rmax = min(0.0, float(rmin)), max(0.0, float(rmax))
    scale = (rmax - rmin) / 255.0 or 1.0
    zp = int(np.clip(round(-rmin / scale), 0, 255))
    return np.float32(scale), np.uint8(zp)


def build_group_model(model, gi: GraphIndex, mask: np.ndarray, weights: list, sample: dict,
                      int8_inputs: Optional[dict] = None):
    """Sub-model (``onnx.ModelProto``): the masked nodes, their frontier tensors as inputs (typed from ``sample``),
    ``weights`` as overridable initializers, and the graph outputs they produce.

    ``int8_inputs``: ``{node index: (layer index, scale, zero point[, data input index])}`` (data input 0
    unless given): that node's data input x becomes
    ``x + gate·(DequantizeLinear(QuantizeLinear(x)) − x)`` with ``gate`` an overridable scalar (default 0,
    which leaves x exactly unchanged; 1 simulates the INT8 activation of that layer only)."""
    import onnx
    from onnx import helper, numpy_helper

    from sparsify_tui.analysis.loading import lower_ir_version

    nodes = []
    extra_inits, extra_inputs = [], []
    for i in np.flatnonzero(mask):
        node = gi.nodes[i]
        if int8_inputs and int(i) in int8_inputs:
            k, scale, zp, *rest = int8_inputs[int(i)]
            xi = rest[0] if rest else 0
            x = node.input[xi]
            p = f"__loss_int8_{k}"
            extra_inits += [numpy_helper.from_array(np.array(scale, np.float32), p + "_scale"),
                            numpy_helper.from_array(np.array(zp, np.uint8), p + "_zp"),
                            numpy_helper.from_array(np.array(0.0, np.float32), gate_name(k))]
            extra_inputs.append(helper.make_tensor_value_info(gate_name(k), onnx.TensorProto.FLOAT, []))
            nodes += [
                helper.make_node("QuantizeLinear", [x, p + "_scale", p + "_zp"], [p + "_q"], name=p + "_Q"),
                helper.make_node("DequantizeLinear", [p + "_q", p + "_scale", p + "_zp"], [p + "_dq"], name=p + "_DQ"),
                helper.make_node("Sub", [p + "_dq", x], [p + "_d"], name=p + "_Sub"),
                helper.make_node("Mul", [p + "_d", gate_name(k)], [p + "_g"], name=p + "_Mul"),
                helper.make_node("Add", [x, p + "_g"], [p + "_x"], name=p + "_Add"),
            ]
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.input[xi] = p + "_x"
            nodes.append(copy)
        else:
            nodes.append(node)
    produced, used = set(), set()
    for i in np.flatnonzero(mask):
        produced.update(gi.nodes[i].output)
        used.update(gi.node_inputs[i])
    inits = [t for t in model.graph.initializer if t.name in used]
    by_name = {t.name: t for t in inits}
    inputs = [_value_info(n, sample[n]) for n in gi.frontier(mask)]
    for w in weights:
        t = by_name[w]
        inputs.append(onnx.helper.make_tensor_value_info(w, t.data_type, list(t.dims)))
    inputs += extra_inputs
    outs = [vi for vi in model.graph.output if vi.name in produced]
    graph = onnx.helper.make_graph(nodes, "loss_group", inputs, outs, initializer=inits + extra_inits)
    opsets = list(model.opset_import)
    if int8_inputs:
        opsets = [o for o in opsets if o.domain not in ("", "ai.onnx")]
        base = max([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] or [13])
        opsets.append(helper.make_opsetid("", max(13, base)))
    sub = onnx.helper.make_model(graph, opset_imports=opsets)
    sub.ir_version = model.ir_version
    lower_ir_version(sub, at_least=4)  # overridable initializers need IR >= 4
    return sub


@dataclass
class DenseReference:
    """The dense pass of a one-shot profile: ``cache`` (per batch: the graph inputs and the activations the
    planned groups read), ``dense_outs`` (per batch: the float outputs, the metric's reference), ``metric``
    (:class:`OutputMetric`), ``groups`` (``[(start, stop)]`` of units, from the ``plan`` callback) and their
    ``group_masks`` (nodes each group's sub-model holds), ``ranges`` (min/max of ``layer_inputs`` over the
    batches), ``t_create`` / ``t_run`` (session creation and one warm run of the full model, seconds: the cost
    model's calibration), ``setup_s`` (wall time of the pass)."""

    cache: list
    dense_outs: list
    metric: "OutputMetric"
    groups: list
    group_masks: list
    ranges: dict
    t_create: float
    t_run: float
    setup_s: float


def dense_reference(engine, model, gi: GraphIndex, arrays: dict, masks: list, batches_list: list,
                    core_count: Optional[int], cancel, metric: Optional[str], plan, layer_inputs=()) -> DenseReference:
    """One dense session over ``batches_list``: the reference outputs, the activations the units' sub-models read,
    and the calibration of the cost model. ``masks[u]``: nodes downstream of unit ``u`` (graph order of units);
    ``plan(t_create, t_run)`` returns the planned ``[(start, stop)]`` groups of units. Batch 0 fetches every
    activation a group may need (a group's frontier is within the union of its units' frontiers); once the groups
    are planned, the others are dropped and later batches fetch only what the groups read, so peak memory stays
    near one batch's worth. Shared by the per-layer and the per-channel-group one-shot profiles."""
    import onnx

    t0 = time.perf_counter()
    layer_inputs = set(layer_inputs)
    candidates = set().union(*(gi.frontier(gi.with_constants(m)) for m in masks))
    out_names = list(gi.output_names)

    def fetch_list(names) -> list:
        return out_names + sorted((set(names) | layer_inputs) - set(gi.input_names) - set(out_names))

    dense_model = onnx.ModelProto()
    dense_model.CopyFrom(model)
    for n in fetch_list(candidates)[len(out_names):]:
        dense_model.graph.output.append(onnx.ValueInfoProto(name=n))
    ts = time.perf_counter()
    sess = open_session(engine, dense_model, arrays, core_count)
    t_create = time.perf_counter() - ts
    del dense_model
    cache = []
    ranges: dict = {}  # layer input -> (min, max) over the batches, for the simulated INT8 activation

    def dense_run(run, feed, fetch) -> None:
        maybe_check(cancel)
        vals = dict(zip(fetch, run(feed)))
        for n in layer_inputs:
            v = vals[n] if n in vals else feed[n]
            lo, hi = float(np.min(v)), float(np.max(v))
            old = ranges.get(n, (lo, hi))
            ranges[n] = (min(lo, old[0]), max(hi, old[1]))
        c = dict(feed)
        c.update(vals)
        cache.append(c)

    first_fetch = fetch_list(candidates)
    with canceled_as_job(cancel):
        dense_run(sess.runner(first_fetch, cancel), batches_list[0], first_fetch)
        run_outputs = sess.runner(out_names, cancel)
        ts = time.perf_counter()  # warm run of the plain outputs: the run-time calibration
        run_outputs(batches_list[0])
        t_run = time.perf_counter() - ts
        del run_outputs
    om = OutputMetric(out_names, [cache[0][n] for n in out_names], metric)
    groups = plan(t_create, t_run)
    group_masks = []
    for a, b in groups:
        m = np.zeros(len(gi.nodes), dtype=bool)
        for k in range(a, b):
            m |= masks[k]
        group_masks.append(gi.with_constants(m))
    keep = set(gi.input_names).union(*(gi.frontier(m) for m in group_masks))
    keep_fetch = fetch_list(keep)
    run_keep = sess.runner(keep_fetch, cancel)
    with canceled_as_job(cancel):
        for feed in batches_list[1:]:
            dense_run(run_keep, feed, keep_fetch)
    del run_keep
    sess.close()
    del sess
    dense_outs = [{n: c[n] for n in om.names} for c in cache]
    cache = [{k: v for k, v in c.items() if k in keep} for c in cache]  # only the activations groups read
    return DenseReference(cache, dense_outs, om, groups, group_masks, ranges, t_create, t_run,
                          time.perf_counter() - t0)


def stripped_weights(model, names) -> tuple:
    """``(arrays, {name: array})``: the initializers taken out of ``model`` (:func:`strip_initializers`) and the
    arrays of ``names`` among them (or among the initializers left in the proto)."""
    from onnx import numpy_helper

    arrays = strip_initializers(model)
    return arrays, {name: arrays[name] if name in arrays else numpy_helper.to_array(
        next(t for t in model.graph.initializer if t.name == name)) for name in names}


def _int8_gates(refs, gi: GraphIndex, ranges: dict) -> dict:
    """``{node index: (layer index, scale, zero point, data input)}``: the simulated INT8 activation of every
    layer, from its input's min/max over the dense pass."""
    out = {}
    for k, r in enumerate(refs):
        scale, zp = activation_qparams(*ranges[gi.nodes[r.node_index].input[r.data_input]])
        out[r.node_index] = (k, scale, zp, r.data_input)
    return out


def group_sessions(engine, model, gi: GraphIndex, arrays: dict, core_count: Optional[int], cancel,
                   ref: DenseReference, costs: np.ndarray, *, count_key: str, slots, measure, int8_nodes=None):
    """Measure the planned groups of ``ref``, one live session at a time: for each group ``(a, b)`` a session over
    its sub-model (:func:`build_group_model` with the weights ``slots(a, b)`` as inputs, and ``int8_nodes(a, b)``
    when given), then ``measure(a, b, outs, run, gfeeds)`` with the session's output names, its runner and the
    group's feeds (per batch, its frontier from the dense pass's cache). Returns ``(stats, seconds)``: the groups'
    stats (units as ``count_key``, shares of the nodes and FLOPs by ``costs``, ``create_s``, ``measure_s``) and
    the seconds spent creating their sessions. Shared by the
    per-layer and the per-channel-group one-shot profiles; raises ``JobCanceled``."""
    stats: list = []
    t_sessions = 0.0
    with canceled_as_job(cancel):  # a terminated run raises JobCanceled
        for (a, b), m in zip(ref.groups, ref.group_masks):
            maybe_check(cancel)
            ts = time.perf_counter()
            names = slots(a, b)
            front = gi.frontier(m)
            sub = build_group_model(model, gi, m, names, ref.cache[0], int8_nodes(a, b) if int8_nodes else None)
            sess = open_session(engine, sub, arrays, core_count)
            del sub
            create_s = time.perf_counter() - ts
            t_sessions += create_s
            outs = list(sess.output_names)
            run = sess.runner(outs, cancel)
            gfeeds = [{k: c[k] for k in front} for c in ref.cache]
            tm = time.perf_counter()
            measure(a, b, outs, run, gfeeds)
            stats.append({count_key: b - a, "nodes_share": round(float(m.mean()), 4),
                          "flops_share": round(float(costs[m].sum() / costs.sum()), 4),
                          "create_s": round(create_s, 4), "measure_s": round(time.perf_counter() - tm, 3)})
            del run
            sess.close()  # one live session at a time
            del sess
    return stats, t_sessions


# -- the profile -------------------------------------------------------------------------------------------


def sample_batches(model_path, data, batches: int, batch_size: int, dims) -> list:
    """``batches`` feed dicts: from ``data`` (``.npz``/``.npy``, via ``analysis.inputs.load_sample_data``,
    at most ``batches`` of them) or synthetic (seeds 0..batches-1). Raises ``SampleDataError``/``DimensionError``."""
    from sparsify_tui.analysis.inputs import input_specs, load_sample_data, synthetic_inputs

    specs = input_specs(str(model_path), batch_size=batch_size, dims=dims or {})
    if data:
        return load_sample_data(data, specs, batch_size, max_batches=max(1, int(batches)))
    return [synthetic_inputs(specs, seed=i) for i in range(max(1, int(batches)))]


def one_shot_profile(
    model_path,
    *,
    levels,
    data=None,
    batches: int = 2,
    batch_size: int = 1,
    dims=None,
    int8: bool = False,
    metric: Optional[str] = None,
    name: str = "one-shot",
    core_count: Optional[int] = None,
    strategy: str = "auto",
    feeds: Optional[list] = None,
    engine=None,
    progress=None,
    cancel=None,
):
    """One-shot loss profile (module docstring). ``feeds``: ready batches (overrides ``data``/synthetic).

    ``strategy``: "auto" | "single" | "layer" (see module docstring); ``engine``: the runtime that runs
    the sessions (default onnxruntime). Returns a ``LossProfile`` whose ``extras`` record the groups,
    sessions and runs. Raises ``ModelError``, ``SampleDataError``, ``DimensionError``, ``JobCanceled``.
    """
    from sparsify_tui.engine import get_engine
    from sparsify_tui.profiling.loss import LossProfile, _layer_entry
    t0 = time.perf_counter()
    step = progress or (lambda s, f: None)
    engine = get_engine(engine)
    model = load_model(model_path, load_external_data=True)
    from sparsify_tui.analysis.inputs import sample_data_warnings
    from sparsify_tui.analysis.loading import nonfinite_weights, weight_warnings

    warnings = weight_warnings(nonfinite_weights(model), Path(model_path).name)
    refs: list[LayerRef] = find_layers(model)
    if not refs:
        raise ModelError(f"{Path(model_path).name} has no prunable layers (Conv/Gemm/MatMul with a weight initializer)")
    if strategy not in ("auto", "single", "layer"):
        raise SparsifyError(f"unknown one-shot strategy {strategy!r}: use auto, single or layer")
    batches_list = feeds if feeds is not None else sample_batches(model_path, data, batches, batch_size, dims)
    if feeds is None and data:
        warnings += sample_data_warnings(batches_list)
    nb = len(batches_list)
    step("dense pass", 0.0)

    # 1. weights out of the proto (sub-models then cost microseconds to build and serialize)
    gi = GraphIndex(model)
    arrays, weights = stripped_weights(model, [r.weight_name for r in refs])
    masks = [gi.descendants(r.node_index) for r in refs]

    # 2. one dense session: the dense outputs (the metric's reference), the activations the groups read and
    #    the cost-model calibration (dense_reference); 3. the groups, planned by the cost model
    layer_inputs = set(gi.nodes[r.node_index].input[r.data_input] for r in refs) if int8 else set()
    levels = list(levels)
    run_levels = [s for s in levels if s > 1e-9]
    runs_per_layer = (len(run_levels) + (1 if int8 else 0)) * nb
    costs = node_costs(model_path, model, batch_size, dims, batches_list[0], engine)

    def plan(t_create: float, t_run: float) -> list:
        if strategy == "single":
            return [(0, len(refs))]
        if strategy == "layer":
            return [(i, i + 1) for i in range(len(refs))]
        return plan_groups(masks, costs, runs_per_layer, t_create, t_run)

    dense = dense_reference(engine, model, gi, arrays, masks, batches_list, core_count, cancel, metric, plan,
                            layer_inputs)
    om, groups = dense.metric, dense.groups
    dense_outs, t_create, t_run, ranges = dense.dense_outs, dense.t_create, dense.t_run, dense.ranges
    flat = om.flat_outputs(dense_outs)
    int8_nodes = _int8_gates(refs, gi, ranges) if int8 else {}

    t_setup = time.perf_counter() - t0
    # 4. groups: one session each, one run per (layer, level, batch); the reference is the dense pass
    meter = _LayerMeter(refs=refs, weights=weights, levels=levels, om=om, dense_outs=dense_outs, int8=int8,
                        cancel=cancel, progress=step, total_runs=sum((b - a) * runs_per_layer for a, b in groups))
    group_stats, t_sessions = group_sessions(
        engine, model, gi, arrays, core_count, cancel, dense, costs, count_key="layers",
        slots=lambda a, b: [refs[k].weight_name for k in range(a, b)],
        int8_nodes=(lambda a, b: {r.node_index: int8_nodes[r.node_index] for r in refs[a:b]}) if int8 else None,
        measure=meter.measure)
    sens, int8_vals, zeros, total_runs = meter.sens, meter.int8_vals, meter.zeros, meter.total_runs
    n_sessions = len(group_stats)
    step("one-shot", 1.0)

    layers = [
        _layer_entry(model, r, i == 0, sens[r.weight_name], zeros[r.weight_name], int8_vals.get(r.weight_name))
        for i, r in enumerate(refs)
    ]
    return LossProfile.of_model(
        model, layers, model_path=model_path, started=t0,
        name=name,
        method="one-shot",
        settings={
            "levels": levels,
            "batches": nb,
            "data": str(data) if data else None,
            "int8": bool(int8),
            "metric": metric or "auto",
            "strategy": strategy,
        },
        metric=om.label,
        levels=levels,
        warnings=warnings + ([flat_warning(flat)] if flat else []),
        extras={
            "sessions": n_sessions + 1,
            "groups": [[refs[a].node_id, refs[b - 1].node_id, b - a] for a, b in groups],
            "runs": total_runs,
            "output_metrics": dict(om.kinds),
            **({"flat_outputs": {k: float(v) for k, v in flat.items()}} if flat else {}),
            "seconds_group_sessions": round(t_sessions, 3),
            "seconds_setup": round(t_setup, 3),
            "calibration": {"create_s": round(t_create, 4), "run_s": round(t_run, 5)},
            "group_stats": group_stats,
        },
    )


class _LayerMeter:
    """Measures the layers of one planned session of :func:`one_shot_profile`: each layer's weight pruned by
    magnitude at every level (and, with ``int8``, its simulated INT8 weight and activation), scored against the
    dense outputs. Fills ``sens`` (weight name -> {level key: value}), ``int8_vals`` and ``zeros`` (the weight's
    existing zeros); counts the runs ``done`` for progress."""

    def __init__(self, *, refs, weights, levels, om, dense_outs, int8, cancel, progress, total_runs):
        self.refs, self.weights, self.levels, self.om, self.dense_outs = refs, weights, levels, om, dense_outs
        self.int8, self.cancel, self.progress, self.total_runs = int8, cancel, progress, total_runs
        self.done = 0
        self.sens: dict = {}
        self.int8_vals: dict = {}
        self.zeros: dict = {}

    def measure(self, a: int, b: int, outs, run, gfeeds) -> None:
        for k in range(a, b):
            self._layer(k, outs, run, gfeeds)

    def _score(self, gfeeds, outs, run, feed, check: bool = True) -> float:
        """Mean metric over the batches with ``feed`` set on each (and the runs counted)."""
        acc = []
        for f, d in zip(gfeeds, self.dense_outs):
            if check:
                maybe_check(self.cancel)
            f.update(feed)
            acc.append(self.om.value(d, dict(zip(outs, run(f)))))
            self.done += 1
        return float(np.mean(acc))

    def _layer(self, k: int, outs, run, gfeeds) -> None:
        from sparsify_tui.profiling.loss import int8_weight_qdq, level_key

        ref = self.refs[k]
        levels, nb = self.levels, len(gfeeds)
        w = self.weights[ref.weight_name]
        n = w.size
        z = int(n - np.count_nonzero(w))
        self.zeros[ref.weight_name] = z
        vals = {}
        todo = sorted(s for s in levels if s > 1e-9 and pruned_count(n, s) > z)
        for s in levels:
            if s not in todo:
                vals[level_key(s)] = 0.0  # nothing but existing zeros removed: equals dense
                if s > 1e-9:
                    self.done += nb
        for s, wp in zip(todo, magnitude_prune_levels(w, todo, reuse=True)):
            vals[level_key(s)] = self._score(gfeeds, outs, run, {ref.weight_name: wp})
            self.progress(f"one-shot {ref.node_id}", self.done / self.total_runs)
        vals = {level_key(s): vals[level_key(s)] for s in levels}  # in the user's level order
        if self.int8:
            wq = int8_weight_qdq(w, ref.channel_axis)
            self.int8_vals[ref.weight_name] = self._score(gfeeds, outs, run, {ref.weight_name: wq, gate_name(k): ONE},
                                                         check=False)
        for f in gfeeds:
            f.pop(ref.weight_name, None)
            f.pop(gate_name(k), None)
        self.sens[ref.weight_name] = vals
