"""Channel thinning: remove whole channels from an ONNX model, giving a smaller dense model.

The channel groups come from :mod:`sparsify_tui.analysis.channels`; this module rewrites the graph:

* :func:`apply_channel_edits` carries out every :class:`~sparsify_tui.analysis.channels.ChannelEdit` of the
  removed channels on a loaded model, in place: each constant member is sliced along its channel axis (in
  place when the node reads the initializer directly and alone; otherwise the node gets a sliced copy as a
  new initializer and the weight-chain nodes left unused are dropped), Slice bounds and Split sizes become
  the counts of kept channels, Reshape/Resize literal channel (or head) counts are rewritten (a Reshape
  reading a shape constant shared with other nodes gets its own copy), depthwise convs get their new
  ``group``. With ``mode="zero"`` it builds the **exactness reference** instead: the original
  model with the consumers' input weights zeroed at the removed channels (docs/design.md: "removing channel c
  equals zeroing the inputs of every consumer that reads c").
* :func:`thin_model` is the core call apply uses: plain data in (paths, ratios or kept indices,
  ``round_to``), a typed :class:`ThinResult` out: per group the kept channels, MACs before/after
  (independent counts: the node table of each file), the exactness figure, the output difference
  against the baseline, file sizes, seconds and peak memory.

The thinned model keeps the graph inputs and outputs (channels reaching an output are never removed),
passes ``onnx.checker`` with full shape inference, and loads in the engine (the exactness check runs it).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np
import onnx
from onnx import numpy_helper

from sparsify_tui.analysis.channels import (
    ChannelGroups, ConstantLookup, channel_importance, choose_removed, constant_view, default_round_to,
    groups_from_analysis, round_kept,
)
from sparsify_tui.analysis.graph import iter_graphs
from sparsify_tui.analysis.layers import WEIGHT_CHAIN_OPS
from sparsify_tui.engine.importance import DATA_METHODS, data_importance
from sparsify_tui.engine.reconstruction import consumer_specs
from sparsify_tui.engine.memory import PeakRSS
from sparsify_tui.engine.weights import file_size, lower_ir_version, placeholder_tensor, write_model
from sparsify_tui.errors import ModelError, SparsifyError
from sparsify_tui.progress import CancelToken, ProgressFn, maybe_check
from sparsify_tui.tempfiles import temp_dir

#: the exactness check passes when thinned and reference outputs agree to this (max |Δ| / max |y_ref|)
EXACTNESS_TOLERANCE = 1e-4


# ------------------------------------------------------------------------------------------ the rewrite


def _kept(dead: np.ndarray, emap: np.ndarray) -> np.ndarray:
    return ~dead[emap]


def _unique_name(taken: set, base: str) -> str:
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _uses(model: onnx.ModelProto) -> dict:
    """How many times each tensor name is read: node inputs in every graph, plus one for graph outputs."""
    uses: dict = {}
    for _path, g in iter_graphs(model.graph):
        for n in g.node:
            for x in n.input:
                if x:
                    uses[x] = uses.get(x, 0) + 1
    for o in model.graph.output:
        uses[o.name] = uses.get(o.name, 0) + 1
    return uses


def apply_channel_edits(model: onnx.ModelProto, groups: ChannelGroups, dead: np.ndarray, *,
                        mode: str = "thin", base_dir=None, arrays: Optional[dict] = None) -> int:
    """Carry out the edits of ``groups`` for the removed elements ``dead`` (bool per element, from
    :meth:`ChannelGroups.removed_elements`) on ``model`` (the model the groups were found on), in place.
    Returns how many tensors changed.

    Weights are read from the proto or, for external-data references (``load_model(map_weights=True)``),
    from ``base_dir``. With ``arrays`` (a dict), every rewritten weight becomes a data-less placeholder and
    its new values go to ``arrays[name]`` (write the model with
    :func:`sparsify_tui.engine.weights.write_model`); without it the new values go into the proto.

    ``mode="thin"`` removes the channels; ``mode="zero"`` only zeroes the consumers' input weights at them
    (the exactness reference; nothing else changes). Raises ``SparsifyError`` when a tensor would lose every
    channel (a Slice or Split part whose channels are all removed).
    """
    if mode not in ("thin", "zero"):
        raise ValueError(mode)
    nodes = model.graph.node
    inits = {t.name: t for t in model.graph.initializer}
    uses = _uses(model)
    graph_inputs = {i.name for i in model.graph.input}
    taken = set(inits) | {o for n in nodes for o in n.output} | graph_inputs
    orphans: set = set()
    changed = 0
    by_input: dict = {}
    for e in groups.edits:
        if e.kind == "weight" and (mode == "thin" or e.role == "consumer"):
            by_input.setdefault((e.node, e.input), []).append(e)
        if mode == "thin" and not _kept(dead, e.emap).any():
            raise SparsifyError(f"removing these channels would leave no channel in "
                                f"{nodes[e.node].op_type} '{nodes[e.node].name or nodes[e.node].output[0]}': "
                                "keep at least one channel of each part")
    lookup = ConstantLookup(model, base_dir)
    for (ni, k), edits in by_input.items():
        keeps = [_kept(dead, e.emap) for e in edits]
        if all(kp.all() for kp in keeps):
            continue
        name = nodes[ni].input[k]
        arr = np.asarray(constant_view(model, name, lookup))
        if mode == "thin":
            for e, kp in zip(edits, keeps):
                arr = np.compress(kp, arr, axis=e.axis)
        else:
            arr = np.array(arr, copy=True)
            for e, kp in zip(edits, keeps):
                view = np.moveaxis(arr, e.axis, 0)
                view[~kp] = 0
        in_place = name in inits and uses.get(name, 0) == 1 and name not in graph_inputs
        target = name if in_place else _unique_name(taken, f"{name}_thinned" if mode == "thin" else f"{name}_zeroed")
        t = inits[name] if in_place else model.graph.initializer.add()
        if arrays is not None:
            placeholder_tensor(t, target, arr)
            arrays[target] = arr
        else:
            t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(arr), target))
        if not in_place:
            inits[target] = t
            nodes[ni].input[k] = target
            orphans.add(name)
        changed += 1
    if mode == "thin":
        changed += _apply_structure_edits(model, groups, dead, inits, taken, orphans, base_dir)
        _drop_orphans(model, orphans)
        del model.graph.value_info[:]  # stale shapes; onnx infers them again
    return changed


def _opset(model: onnx.ModelProto) -> int:
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _set_attr(node: onnx.NodeProto, name: str, value) -> None:
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(onnx.helper.make_attribute(name, value))


def _apply_structure_edits(model, groups: ChannelGroups, dead, inits: dict, taken: set, orphans: set,
                           base_dir=None) -> int:
    """Slice bounds, Split sizes, literal channel counts and depthwise ``group`` attributes."""
    nodes = model.graph.node
    opset = _opset(model)
    lookup = ConstantLookup(model, base_dir)
    changed = 0
    copies: dict = {}  # (node index, input index) -> its own copy of a shared shape constant
    for e in groups.edits:
        kp = _kept(dead, e.emap)
        if kp.all():
            continue
        node = nodes[e.node]
        if e.kind == "conv_group":
            _set_attr(node, "group", int(kp.sum()))
        elif e.kind == "shape_literal" and "reader" in e.extra:  # a shared shape: the reader gets its own copy
            key = (e.extra["reader"], e.extra["input"])
            reader = nodes[key[0]]
            name = reader.input[key[1]]
            if key not in copies:
                new = _unique_name(taken, f"{name}_thinned")
                arr = np.array(constant_view(model, name, lookup), copy=True)
                t = model.graph.initializer.add()
                t.CopyFrom(numpy_helper.from_array(arr, new))
                copies[key] = inits[new] = t
                orphans.add(name)
                reader.input[key[1]] = new
            t = copies[key]
            arr = numpy_helper.to_array(t).copy()
            arr.reshape(-1)[e.extra["index"]] = int(kp.sum())
            t.CopyFrom(numpy_helper.from_array(arr, t.name))
        elif e.kind == "shape_literal":
            t = inits[e.extra["tensor"]]
            arr = np.array(constant_view(model, t.name, lookup), copy=True)
            arr.reshape(-1)[e.extra["index"]] = int(kp.sum())
            t.CopyFrom(numpy_helper.from_array(arr, t.name))
        elif e.kind == "slice":
            start, end, pos = e.extra["start"], e.extra["end"], e.extra["pos"]
            new_start = int(kp[:start].sum())
            new_end = new_start + int(kp[start:end].sum())
            if opset < 10:
                starts = list(onnx.helper.get_attribute_value(next(a for a in node.attribute if a.name == "starts")))
                ends = list(onnx.helper.get_attribute_value(next(a for a in node.attribute if a.name == "ends")))
                starts[pos], ends[pos] = new_start, new_end
                _set_attr(node, "starts", starts)
                _set_attr(node, "ends", ends)
            else:
                for k, value in ((1, new_start), (2, new_end)):
                    arr = np.array(constant_view(model, node.input[k], lookup), copy=True).reshape(-1)
                    arr[pos] = value
                    new = _unique_name(taken, f"{node.input[k]}_thinned")
                    model.graph.initializer.add().CopyFrom(numpy_helper.from_array(arr, new))
                    orphans.add(node.input[k])
                    node.input[k] = new
        elif e.kind == "split":
            sizes, off = [], 0
            for s in e.extra["sizes"]:
                sizes.append(int(kp[off:off + s].sum()))
                off += s
            if opset < 13:
                _set_attr(node, "split", sizes)
            else:
                new = _unique_name(taken, f"{node.output[0]}_split_sizes")
                model.graph.initializer.add().CopyFrom(numpy_helper.from_array(np.asarray(sizes, np.int64), new))
                if len(node.input) > 1:
                    orphans.add(node.input[1])
                    node.input[1] = new
                else:
                    node.input.append(new)
                for a in list(node.attribute):
                    if a.name == "num_outputs":
                        node.attribute.remove(a)
        else:
            continue
        changed += 1
    return changed


def _drop_orphans(model: onnx.ModelProto, orphans: set) -> None:
    """Remove the weight-chain nodes and initializers nothing reads any more (only those the rewrite left
    behind: ``orphans`` and the chains feeding them)."""
    graph = model.graph
    while orphans:
        uses = _uses(model)
        dead_names = {n for n in orphans if uses.get(n, 0) == 0}
        if not dead_names:
            break
        orphans = set()
        keep = []
        for node in graph.node:
            if node.op_type in WEIGHT_CHAIN_OPS | {"Constant"} and node.output and all(
                    o in dead_names or not o for o in node.output):
                orphans.update(x for x in node.input if x)
            else:
                keep.append(node)
        if len(keep) != len(graph.node):
            del graph.node[:]
            graph.node.extend(keep)
        inputs = {i.name for i in graph.input}
        kept_inits = [t for t in graph.initializer if not (t.name in dead_names and t.name not in inputs)]
        if len(kept_inits) != len(graph.initializer):
            del graph.initializer[:]
            graph.initializer.extend(kept_inits)


# ------------------------------------------------------------------------------------------ thin_model


@dataclass
class GroupThinned:
    """One channel group of a thinned model: ``channels`` before, ``kept`` after, ``kept_indices`` (the
    group's channel indices that stay, ascending), ``ratio`` asked (None with explicit indices)."""

    id: str
    channels: int
    kept: int
    kept_indices: list
    ratio: Optional[float] = None

    def to_dict(self) -> dict:
        return {"id": self.id, "channels": self.channels, "kept": self.kept, "kept_indices": list(self.kept_indices),
                "ratio": self.ratio}


@dataclass
class ThinResult:
    """Outcome of :func:`thin_model` (the ``apply --json`` fields of a channel optimization).

    * ``groups``: every prunable group thinned or left whole (:class:`GroupThinned`); ``skipped``: ids of
      groups that are not prunable;
    * ``macs_before``/``macs_after``: MACs per batch of ``batch_size`` items, each counted on its file's node
      table; ``params_before``/``params_after``: parameters (elements);
    * ``exactness_max_rel_diff``: max over outputs (and the probed tensors feeding them) of ``max |y_thin - y_ref|
      / max |y_ref|`` on the check inputs, ``y_ref`` from the original model with the consumers' input weights
      zeroed at the removed channels (None when the check was skipped); a bounded activation's output is measured
      against its range (:func:`exactness_figure`); passes at :data:`EXACTNESS_TOLERANCE`;
    * ``output_diff``: the thinned model against the baseline
      (:func:`sparsify_tui.engine.outputs.output_difference`: NMSE, max abs, top-1 agreement);
    * ``file_size_bytes_before``/``after`` (external data included);
    * ``thinning_seconds``: load + analysis + importance + rewrite + save (wall s), ``seconds``: each phase
      and the checks;
    * ``peak_memory_bytes``: peak resident memory the thinning added to the process (sampled every 2 ms
      from ``/proc/self/statm``; 0 where unavailable), to compare with the model's size.
    """

    model_path: str
    out_path: str
    round_to: int
    importance: str
    groups: list
    skipped: list
    macs_before: int
    macs_after: int
    params_before: int
    params_after: int
    exactness_max_rel_diff: Optional[float]
    output_diff: Optional[dict]
    file_size_bytes_before: int
    file_size_bytes_after: int
    thinning_seconds: float
    seconds: dict = field(default_factory=dict)
    peak_memory_bytes: int = 0
    batch_size: int = 1
    dims: dict = field(default_factory=dict)
    checks: dict = field(default_factory=dict)
    structure: str = "channel"
    consumers: list = field(default_factory=list, repr=False)
    """The layers whose input channels were removed (:class:`~sparsify_tui.engine.reconstruction.ConsumerSpec`,
    graph order): what :func:`~sparsify_tui.engine.reconstruction.reconstruct` refits. Not in :meth:`to_dict`."""
    downstream: list = field(default_factory=list, repr=False)
    """``consumers`` plus every later layer with a constant weight (``consumer_specs(downstream=True)``)."""

    @property
    def macs_reduction(self) -> float:
        """``macs_before / macs_after`` (how many times fewer MACs)."""
        return self.macs_before / self.macs_after if self.macs_after else float("inf")

    def to_dict(self) -> dict:
        return {
            "structure": self.structure,
            "model_path": self.model_path,
            "out_path": self.out_path,
            "round_to": self.round_to,
            "importance": self.importance,
            "batch_size": self.batch_size,
            "dims": dict(self.dims),
            "groups": [g.to_dict() for g in self.groups],
            "skipped_groups": list(self.skipped),
            "macs_before": self.macs_before,
            "macs_after": self.macs_after,
            "macs_reduction": self.macs_reduction,
            "params_before": self.params_before,
            "params_after": self.params_after,
            "exactness_max_rel_diff": self.exactness_max_rel_diff,
            "output_diff": self.output_diff,
            "file_size_bytes_before": self.file_size_bytes_before,
            "file_size_bytes_after": self.file_size_bytes_after,
            "thinning_seconds": self.thinning_seconds,
            "seconds": dict(self.seconds),
            "peak_memory_bytes": self.peak_memory_bytes,
            "checks": dict(self.checks),
        }


def _check_feeds(model_path, batch_size: int, dims: dict, samples: int) -> list:
    from sparsify_tui.analysis.inputs import input_specs, synthetic_inputs

    specs = input_specs(str(model_path), batch_size=batch_size, dims=dims)
    return [synthetic_inputs(specs, seed=i, values=dims) for i in range(samples)]


def resolve_removed(groups: ChannelGroups, importance: dict, *, ratio: Optional[float] = None,
                    ratios: Optional[dict] = None, kept: Optional[dict] = None, round_to: int):
    """``({group id: channel indices removed}, {group id: ratio asked or None})`` from a uniform ``ratio``
    (every prunable group), per-group ``ratios`` (override it; 0 leaves a group whole) and explicit ``kept``
    indices (override both; not rounded). Raises ``SparsifyError`` (one line) for an unknown group, a
    ratio > 0 or kept indices on a group that is not prunable, a ratio outside [0, 1), kept indices out of
    range or empty."""
    asked: dict = {}
    if ratio is not None:
        round_kept(1, ratio)  # validates the range
        asked.update({g.id: float(ratio) for g in groups.groups if g.prunable})
    for gid, r in (ratios or {}).items():
        g = groups.group(gid)
        round_kept(1, r)
        if float(r) > 0 and not g.prunable:
            raise SparsifyError(f"channel group {gid!r} is not prunable ({g.reason}): remove its override or set it to 0")
        asked[gid] = float(r)
    for gid in kept or {}:
        asked.pop(gid, None)
    removed = choose_removed(groups, importance, {k: v for k, v in asked.items() if v > 0}, round_to)
    for gid, idx in (kept or {}).items():
        g = groups.group(gid)
        if not g.prunable:
            raise SparsifyError(f"channel group {gid!r} is not prunable ({g.reason}): it keeps all its channels")
        keep = np.unique(np.asarray(list(idx), dtype=np.int64))
        if keep.size == 0 or keep.min() < 0 or keep.max() >= g.channels:
            raise SparsifyError(f"kept channels of group {gid!r} must be 1 to {g.channels} indices in "
                                f"0..{g.channels - 1}")
        removed[gid] = np.setdiff1d(np.arange(g.channels), keep)
    ratio_of = {gid: asked.get(gid) for gid in removed}
    return removed, ratio_of


def thin_model(model_path: Union[str, os.PathLike], out_path: Union[str, os.PathLike], *,
               ratio: Optional[float] = None, ratios: Optional[dict] = None, kept: Optional[dict] = None,
               round_to: Optional[int] = None, importance: str = "l2", batch_size: int = 1,
               dims: Optional[dict] = None, feeds: Optional[Sequence[dict]] = None, samples: int = 4,
               calibration: Optional[Sequence[dict]] = None,
               check: bool = True, engine: Any = None, progress: Optional[ProgressFn] = None,
               cancel: Optional[CancelToken] = None) -> ThinResult:
    """Write a channel-thinned copy of the model at ``model_path`` to ``out_path`` and measure it.

    Args:
        model_path: the ``.onnx`` file (external data is read from its folder; a thinned copy of a model with
            external data is written with external data, ``<out>.data``).
        out_path: where to write the thinned model.
        ratio: fraction of channels removed from every prunable group (0 <= R < 1).
        ratios: ``{group id: ratio}`` per group, over ``ratio`` (0 keeps a group whole).
        kept: ``{group id: channel indices to keep}``, over both (taken as given, not rounded).
        round_to: kept counts round to a multiple of this (:func:`sparsify_tui.analysis.channels.round_kept`);
            default :func:`sparsify_tui.analysis.channels.default_round_to` (16 on AVX-512, else 8: measured).
        importance: ``"l2"`` (group L2 norm, DepGraph) or ``"bn_scale"``
            (:func:`sparsify_tui.analysis.channels.channel_importance`), or on ``calibration`` data ``"activation"``
            or ``"thinet"`` (:func:`sparsify_tui.engine.importance.data_importance`): the least important channels go.
        calibration: feed dicts the data importances run the original model on.
        batch_size, dims: input sizes for shapes and MACs (MACs are per batch) and for the check inputs.
        feeds: check inputs (feed dicts); default ``samples`` seeded synthetic batches with valid values.
        check: run the exactness check and the output difference (two model runs each); False skips both.
        engine: the runtime the checks run on (default onnxruntime).

    Returns:
        :class:`ThinResult`.

    Raises:
        SparsifyError: bad ratios or group overrides (one line, see :func:`resolve_removed`), a model that
            cannot be loaded (``ModelError``), missing dims (``DimensionError``), a thinned model that fails
            ``onnx.checker`` or the exactness check (a bug: the message says so), ``JobCanceled``.
    """
    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.engine import get_engine

    src, out = Path(model_path), Path(out_path)
    dims = dict(dims or {})
    round_to = default_round_to() if round_to is None else int(round_to)
    engine = get_engine(engine)
    seconds: dict = {}

    def step(name: str, fraction: float) -> None:
        maybe_check(cancel)
        if progress is not None:
            progress(name, fraction)

    t_start = time.perf_counter()
    with PeakRSS() as mem:
        step("loading", 0.0)
        t = time.perf_counter()
        model = load_model(src, map_weights=True)  # structure only: weights are read from the file as needed
        external = _weights_elsewhere(model, src)
        seconds["load_s"] = time.perf_counter() - t
        step("channel groups", 0.1)
        t = time.perf_counter()
        analysis = analyze_model(model, batch_size=batch_size, dims=dims, count_zeros=False, include_system=False,
                                 engine=engine)
        groups = groups_from_analysis(model, analysis, base_dir=src.parent)
        seconds["analysis_s"] = time.perf_counter() - t
        t = time.perf_counter()
        if importance in DATA_METHODS:
            scores = data_importance(src, model, groups, list(calibration or []), importance, base_dir=src.parent,
                                     engine=engine, cancel=cancel)
        else:
            scores = channel_importance(model, groups, importance, base_dir=src.parent)
        removed, ratio_of = resolve_removed(groups, scores, ratio=ratio, ratios=ratios, kept=kept,
                                            round_to=round_to)
        dead = groups.removed_elements(removed)
        consumers = consumer_specs(model, groups, dead)
        downstream = consumer_specs(model, groups, dead, downstream=True)
        seconds["importance_s"] = time.perf_counter() - t
        step("thinning", 0.3)
        t = time.perf_counter()
        arrays: dict = {}
        apply_channel_edits(model, groups, dead, mode="thin", base_dir=src.parent, arrays=arrays)
        lower_ir_version(model)
        seconds["rewrite_s"] = time.perf_counter() - t
        step("saving", 0.4)
        t = time.perf_counter()
        write_model(model, out, arrays=arrays, base_dir=src.parent, external=external)
        seconds["save_s"] = time.perf_counter() - t
        del model, arrays
    thinning_seconds = time.perf_counter() - t_start

    result_groups = _thinned_groups(groups, removed, ratio_of)
    step("checking", 0.5)
    t = time.perf_counter()
    checks = _check_written(src, out)
    after = analyze_model(out, batch_size=batch_size, dims=dims, count_zeros=False, include_system=False,
                          engine=engine)
    seconds["check_s"] = time.perf_counter() - t
    _check_same_io(src, analysis, after)

    exactness = diff = None
    if check:
        step("exactness check", 0.6)
        t = time.perf_counter()
        feeds = _check_feeds(src, batch_size, dims, samples) if feeds is None else feeds
        exactness, diff = _exactness_check(src, out, groups, dead, feeds, external=external, analysis=analysis,
                                           checks=checks, engine=engine, step=step, cancel=cancel)
        seconds["exactness_s"] = time.perf_counter() - t
        if exactness > EXACTNESS_TOLERANCE:
            raise SparsifyError(
                f"thinned {src.name} differs from its reference by {exactness:.2e} (relative; tolerance "
                f"{EXACTNESS_TOLERANCE:g}): a bug in sparsify-tui's channel rules, please report it with the model")
    step("done", 1.0)
    return ThinResult(
        model_path=str(src), out_path=str(out), round_to=int(round_to), importance=importance,
        groups=result_groups, skipped=[g.id for g in groups.groups if not g.prunable],
        macs_before=int(analysis.totals["macs"]), macs_after=int(after.totals["macs"]),
        params_before=int(analysis.totals["params"]), params_after=int(after.totals["params"]),
        exactness_max_rel_diff=exactness, output_diff=diff,
        file_size_bytes_before=file_size(src), file_size_bytes_after=file_size(out),
        thinning_seconds=thinning_seconds, seconds=seconds, peak_memory_bytes=mem.added,
        batch_size=int(batch_size), dims=dims, checks=checks, consumers=consumers, downstream=downstream,
    )


def _weights_elsewhere(model, src: Path) -> bool:
    """Whether the source model keeps weights in files other than itself (external data)."""
    from sparsify_tui.analysis.loading import external_data_info

    return any((info := external_data_info(x)) is not None and info["location"] != src.name
               for x in model.graph.initializer)


def _thinned_groups(groups, removed: dict, ratio_of: dict) -> list:
    """The :class:`GroupThinned` rows of the prunable groups: channels, kept indices and the effective ratio."""
    out = []
    for g in groups.groups:
        if not g.prunable:
            continue
        gone = set(np.asarray(removed.get(g.id, []), dtype=np.int64).tolist())
        keep = [c for c in range(g.channels) if c not in gone]
        out.append(GroupThinned(g.id, g.channels, len(keep), keep, ratio_of.get(g.id, 0.0 if not gone else None)))
    return out


def _check_same_io(src: Path, analysis, after) -> None:
    """Raise when thinning changed the graph's input or output names (a bug)."""
    if [i["name"] for i in after.inputs] != [i["name"] for i in analysis.inputs] or \
            [o["name"] for o in after.outputs] != [o["name"] for o in analysis.outputs]:
        raise SparsifyError(f"thinning changed the graph inputs or outputs of {src.name} (a bug in sparsify-tui: "
                            "please report it with the model)")


def _exactness_check(src: Path, out: Path, groups, dead, feeds, *, external: bool, analysis, checks: dict, engine,
                     step, cancel) -> tuple:
    """``(exactness, output difference)``: the thinned model against the original with the same channels zeroed
    (every probed tensor: :func:`exactness_figure`; the tensors go to ``checks["exactness_tensors"]``), and the
    thinned model's outputs against the original's on ``feeds``."""
    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.engine.outputs import output_difference
    from sparsify_tui.engine.weights import runnable_path

    with temp_dir("thin") as tmp:
        tmp = Path(tmp)
        ref, ref_arrays = load_model(src, map_weights=True), {}
        probes = _probe_tensors(ref)
        bounded = {o: n.input[0] if n.op_type in UNIT_SLOPE_OPS else None
                   for n in ref.graph.node if n.op_type in BOUNDED_OPS for o in n.output}
        apply_channel_edits(ref, groups, dead, mode="zero", base_dir=src.parent, arrays=ref_arrays)
        lower_ir_version(ref)
        ref_path, probe_path = tmp / "reference.onnx", tmp / "thinned_probed.onnx"
        write_model(_with_outputs(ref, probes), ref_path, arrays=ref_arrays, base_dir=src.parent,
                    external=external)
        del ref, ref_arrays
        thin = load_model(out, map_weights=True)
        write_model(_with_outputs(thin, probes), probe_path, base_dir=out.parent, external=external)
        del thin
        exact = output_difference(ref_path, probe_path, feeds, cancel=cancel, engine=engine)
        exactness = exactness_figure(exact["outputs"], bounded)
        checks["exactness_tensors"] = sorted(exact["outputs"])
        step("output difference", 0.8)
        base = runnable_path(src, int(analysis.ir_version), tmp)
        diff = output_difference(base, out, feeds, cancel=cancel, engine=engine)
    return exactness, diff


BOUNDED_OPS = frozenset({"Sigmoid", "HardSigmoid", "Tanh", "Softmax", "LogSoftmax", "Softsign"})
"""Ops whose outputs lie in a range of width ~1: their error is measured against that range (below)."""
UNIT_SLOPE_OPS = frozenset({"Sigmoid", "Tanh", "Softmax", "Softsign"})
"""Bounded ops whose output moves by at most their input's change (max-norm slope: Softmax 1/2, Sigmoid 1/4, Tanh
and Softsign 1)."""


def exactness_figure(outputs: dict, bounded: Union[set, dict]) -> float:
    """``exactness_max_rel_diff`` from :func:`~sparsify_tui.engine.outputs.output_difference`'s per-tensor figures:
    the largest ``max |Δ| / scale``, where ``scale`` is ``max |y_ref|``, or at least 1 for a tensor a bounded
    activation (:data:`BOUNDED_OPS`) produced. onnxruntime computes Sigmoid/Tanh with an approximation whose
    absolute error is about 1e-7, so a saturated map (PP-OCRv4 det on random inputs: every value below 3e-7) would
    otherwise differ by 40 % "relative" from float rounding alone, while the logits feeding it agree to 3e-7; the
    probes compare those logits on their own scale.

    ``bounded``: the names of those tensors, or ``{name: the op's input or None}``; with an input (ops of
    :data:`UNIT_SLOPE_OPS`), the scale is at least the input's ``max |z_ref|`` too when that input is compared:
    the op moves by at most its input's change, and the input is held to the tolerance on its own scale. So large
    logits (PP-OCRv4 rec on random inputs: logits ~1100, where the float rounding of a reordered sum is 2e-6
    relative, moved its 6625-class Softmax by up to 1.6e-4) are not taken for a rule error."""
    inputs = bounded if isinstance(bounded, dict) else {}
    worst = 0.0
    for name, v in outputs.items():
        scale = v["ref_max_abs"]
        if name in bounded:
            scale = max(scale, 1.0)
            src = outputs.get(inputs.get(name))
            if src is not None:
                scale = max(scale, src["ref_max_abs"])
        if scale > 0:
            worst = max(worst, v["max_abs"] / scale)
    return float(worst)


def _probe_tensors(model: onnx.ModelProto, depth: int = 3) -> dict:
    """``{tensor name: elem type}`` of the tensors feeding the graph outputs, up to ``depth`` nodes back along
    each producer's activation inputs (constants excluded). The exactness check compares them too: a
    saturated output (a detector's probability map on random inputs, all 0) would agree trivially, while the
    logits before it do not. Tensors whose channels were thinned have another shape and are skipped by the
    comparison."""
    inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in list(inferred.graph.value_info)
             if vi.type.HasField("tensor_type")}
    producer = {o: n for n in model.graph.node for o in n.output}
    consts = {t.name for t in model.graph.initializer}
    outputs = {o.name for o in model.graph.output}
    found: dict = {}
    frontier = list(outputs)
    for _ in range(depth):
        nxt = []
        for name in frontier:
            node = producer.get(name)
            if node is None:
                continue
            for x in node.input:
                if x and x not in consts and x not in outputs and x in producer and x not in found and \
                        types.get(x) in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE):
                    found[x] = types[x]
                    nxt.append(x)
        frontier = nxt
    return found


def _with_outputs(model: onnx.ModelProto, probes: dict) -> onnx.ModelProto:
    """``model`` (changed in place) with the ``probes`` (``{name: elem type}``) added as graph outputs."""
    for name, elem in probes.items():
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, elem, None))
    return model


def _check_written(src: Path, out: Path) -> dict:
    """``onnx.checker`` with full shape inference on the written file. When the original model itself fails
    the full check (ops onnx cannot infer), the thinned one must pass the plain check and the failure of the
    full check is recorded instead. Raises ``SparsifyError`` when the thinned model is invalid."""
    try:
        onnx.checker.check_model(str(out), full_check=True)
        return {"onnx_checker": "passed (full check: strict shape inference)"}
    except Exception as err:  # noqa: BLE001 - ValidationError, InferenceError
        thin_err = str(err).splitlines()[0] if str(err) else type(err).__name__
    try:
        onnx.checker.check_model(str(src), full_check=True)
        original_ok = True
    except Exception:  # noqa: BLE001
        original_ok = False
    if original_ok:
        raise SparsifyError(f"the thinned model fails onnx.checker ({thin_err}): a bug in sparsify-tui's channel "
                            "rules, please report it with the model")
    try:
        onnx.checker.check_model(str(out))
    except Exception as err:  # noqa: BLE001
        plain_err = str(err).splitlines()[0] if str(err) else type(err).__name__
        try:
            onnx.checker.check_model(str(src))
        except Exception:  # noqa: BLE001 - the original is just as invalid: not ours to fix
            return {"onnx_checker": f"fails on the original model too ({plain_err})"}
        raise ModelError(f"the thinned model fails onnx.checker ({plain_err}): a bug in sparsify-tui's channel "
                         "rules, please report it with the model") from None
    return {"onnx_checker": f"passed (plain check; the full check fails on the original model too: {thin_err})"}
