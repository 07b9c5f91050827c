"""One-shot apply: write the optimized ``.onnx`` of an optimization.

Steps of :func:`apply_optimization`:

1. Load the model (external data included).
2. Prune every configured layer with :func:`sparsify_tui.engine.pruning.magnitude_prune`: exactly
   ``round(sparsity * n)`` of the smallest-|w| weights are set to zero. The weight is found by name as
   an initializer or a ``Constant`` node output; when a layer's weight is computed from an initializer
   through ``Transpose``/``Reshape``/``Identity``/``Cast``/``Squeeze``/``Unsqueeze``/``Flatten``, the
   source initializer is pruned (those ops only move values, so the zero count carries over).
3. When quantizing: INT8 with the engine's ``quantize_int8`` (the one INT8 path; onnxruntime:
   ``quant_pre_process``, static QDQ, per-channel, MinMax on the calibration batches), with the
   excluded layers' nodes left in FP32. Rounding to INT8 could turn a small surviving weight into 0;
   such weights are set to the nearest non-zero INT8 step (±1) so the written file keeps exactly the
   configured sparsity.
4. ``ir_version`` is lowered to 10 when the opsets allow (:func:`sparsify_tui.engine.weights.lower_ir_version`).
5. Measure: the sparsity of every layer read back from the written file, and the output difference
   against the baseline model on the calibration inputs (:func:`output_difference`).

Pruning alone gives no speedup on onnxruntime (no sparse kernels); the gain is a smaller compressed
file and, with INT8, the measured INT8 speedup. See the benchmark section for measured times.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy as np

from sparsify_tui.analysis.graph import node_id as _node_id
from sparsify_tui.engine.weights import (  # noqa: F401 (EXTERNAL_DATA_BYTES, find_weight_source: public here too)
    EXTERNAL_DATA_BYTES, PASS_THROUGH_OPS, all_initializers, all_nodes, file_size, find_weight_source, get_array,
    lower_ir_version, producers, set_array,
)
from sparsify_tui.engine.weights import has_external_data as _has_external_data
from sparsify_tui.engine.weights import load as _load
from sparsify_tui.engine.weights import save as _save
from sparsify_tui.engine.run import REFERENCE, RunSpec
from sparsify_tui.errors import ModelError, SparsifyError
from sparsify_tui.progress import CancelToken, ProgressFn, maybe_check
from sparsify_tui.tempfiles import temp_dir

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization, Settings


@dataclass
class LayerApplied:
    """One pruned layer, as measured in the written file.

    ``weight_name``: the layer's weight (as configured); ``source_name``: the tensor actually pruned
    (an initializer or Constant output; differs when the weight goes through Transpose/Reshape);
    ``num_weights``; ``configured_sparsity``; ``pruned_weights`` = round(configured · n) (what the
    pruning zeroed); ``zero_weights``: zeros counted in the written file; ``measured_sparsity`` =
    zero_weights / num_weights (None when the weight could not be located in the written file).
    """

    weight_name: str
    source_name: str
    num_weights: int
    configured_sparsity: float
    pruned_weights: int
    zero_weights: Optional[int] = None
    measured_sparsity: Optional[float] = None
    quantized: bool = False


@dataclass
class ApplyResult:
    """Outcome of :func:`apply_optimization`.

    ``out_path``: written model; ``file_size_bytes`` (+ its external data file, if any);
    ``quantized``: INT8 QDQ written; ``excluded``: node ids kept FP32; ``layers``: per-layer
    :class:`LayerApplied`; ``output_diff``: see :func:`output_difference`; ``seconds``: wall time (s);
    ``quantization``: :class:`QuantizationResult.to_dict` or None; ``warnings``: non-fatal problems.
    """

    out_path: Path
    quantized: bool
    excluded: list
    layers: list
    output_diff: dict
    seconds: float
    file_size_bytes: int
    baseline_size_bytes: int
    ir_version: int
    quantization: Optional[dict] = None
    warnings: list = field(default_factory=list)
    structure: str = "unstructured"
    structure_result: Optional[dict] = None
    """A model-level structure's report (channel: :meth:`sparsify_tui.engine.thinning.ThinResult.to_dict`)."""

    @property
    def sparsities(self) -> dict:
        """``{weight_name: measured sparsity}`` read back from the written file."""
        return {l.weight_name: l.measured_sparsity for l in self.layers}

    def to_dict(self) -> dict:
        return {
            "path": str(self.out_path),
            "quantized": self.quantized,
            "excluded": list(self.excluded),
            "file_size_bytes": self.file_size_bytes,
            "baseline_size_bytes": self.baseline_size_bytes,
            "ir_version": self.ir_version,
            "seconds": self.seconds,
            "output_diff": dict(self.output_diff),
            "layers": [asdict(l) for l in self.layers],
            "quantization": self.quantization,
            "warnings": list(self.warnings),
            "structure": self.structure,
            "structure_result": self.structure_result,
        }


# ----------------------------------------------------------------------------------- measuring back


def _dq_int8_source(model, name: str):
    """If tensor ``name`` is produced by DequantizeLinear of a constant, that constant's (kind, name)."""
    prod = producers(model)
    node = prod.get(name)
    if node is not None and node.op_type == "DequantizeLinear":
        try:
            return find_weight_source(model, node.input[0])
        except ModelError:
            return None
    return None


def locate_weight(model, weight_name: str, node_id: Optional[str] = None):
    """Find a layer's weight values in a (possibly pre-processed and quantized) written model.

    Returns ``(kind, tensor_name, quantized: bool)`` or None. Tries the weight by name, its
    ``_quantized`` INT8 twin, then the layer node's weight input (by ``node_id``) through
    DequantizeLinear / pass-through ops.
    """
    inits = {t.name for t in all_initializers(model)}
    prod = producers(model)
    nodes = all_nodes(model)
    consumers_w = [n for n in nodes if weight_name in n.input]
    # quantized: W -> QuantizeLinear? no: ORT stores W_quantized (int8) -> DequantizeLinear -> consumer
    if weight_name + "_quantized" in inits:
        return "initializer", weight_name + "_quantized", True
    for n in consumers_w:
        if n.op_type != "QuantizeLinear":
            try:
                kind, src = find_weight_source(model, weight_name)
                return kind, src, False
            except ModelError:
                break
    if weight_name in inits or (weight_name in prod and prod[weight_name].op_type == "Constant"):
        kind, src = find_weight_source(model, weight_name)
        return kind, src, False
    if node_id:
        for n in nodes:
            if _node_id(n) == node_id and len(n.input) > 1:
                w = n.input[1]
                q = _dq_int8_source(model, w)
                if q is not None:
                    return q[0], q[1], True
                try:
                    kind, src = find_weight_source(model, w)
                    return kind, src, False
                except ModelError:
                    return None
    return None


def _consumer_node_ids(model, weight_name: str) -> list[str]:
    """Node ids (name or first output) of the nodes consuming ``weight_name`` (through pass-through ops)."""
    nodes = all_nodes(model)
    names = {weight_name}
    frontier = [weight_name]
    out = []
    while frontier:
        t = frontier.pop()
        for n in nodes:
            if t in n.input:
                if n.op_type in PASS_THROUGH_OPS:
                    for o in n.output:
                        if o not in names:
                            names.add(o)
                            frontier.append(o)
                else:
                    out.append(_node_id(n))
    return out


def measure_sparsities(model_path: Union[str, Path], layers: dict[str, Optional[str]]) -> dict[str, tuple]:
    """Zero counts read back from a written model: ``{weight_name: (zeros, size)}`` or ``(None, None)``
    when not found. ``layers``: ``{weight_name: node_id or None}``."""
    model = _load(model_path)
    out = {}
    for w, node_id in layers.items():
        loc = locate_weight(model, w, node_id)
        if loc is None:
            out[w] = (None, None)
            continue
        arr = get_array(model, loc[0], loc[1])
        out[w] = (int(arr.size - np.count_nonzero(arr)), int(arr.size))
    return out


# --------------------------------------------------------------------------------- output difference


def output_difference(baseline_path, model_path, feeds: Sequence[dict], *, cancel: Optional[CancelToken] = None,
                      engine: Any = None, labels: Optional[Sequence[np.ndarray]] = None,
                      metric: Optional[str] = None, metric_asked_by: str = "--metric") -> dict:
    """Compare the outputs of ``model_path`` against ``baseline_path`` on ``feeds`` (list of feed dicts): the
    raw differences of :func:`sparsify_tui.engine.outputs.compare_outputs` (``max_abs``, ``nmse``, ``max_rel``,
    ``top1_agreement``, ``samples``, ``outputs``) plus the metrics of :mod:`sparsify_tui.profiling.metrics`:
    ``kl`` (over the class output ``[batch, classes>1]``, else None), ``accuracy`` / ``accuracy_baseline``
    (top-1 against ``labels``, one int array per feed; else None), ``metric_name`` (``metric`` or the default
    chosen from the outputs) with ``metric_reason``, and ``metric_value`` (its budgeted quantity: absolute
    top-1 drop, or the nmse/kl/max_abs value). The baseline runs on the reference runtime (onnxruntime fp32), the model
    on ``engine`` (the runtime it targets), so a lower precision counts in the difference. One session is alive at a
    time (:func:`sparsify_tui.engine.outputs.run_outputs`).
    """
    from sparsify_tui.engine import get_engine
    from sparsify_tui.engine.outputs import compare_outputs, run_outputs
    from sparsify_tui.profiling.metrics import choose_metric, evaluate

    base = run_outputs(baseline_path, feeds, cancel=cancel, engine=get_engine(REFERENCE.engine, REFERENCE.precision))
    new = run_outputs(model_path, feeds, cancel=cancel, engine=engine)
    choice = choose_metric(base[0], metric, labelled=labels is not None, asked_by=metric_asked_by)
    ev = evaluate(base, new, choice, labels)
    diff = compare_outputs(base, new, len(feeds))
    diff.update({"kl": ev.kl, "accuracy": ev.accuracy, "accuracy_baseline": ev.accuracy_reference,
                 "metric_name": choice.name, "metric_reason": choice.reason, "metric_value": ev.drop})
    if choice.user is not None:  # a metric of the user's own: its value on both models, and which file ran
        diff.update({"user_metric": choice.user_metric, "score": ev.score, "score_baseline": ev.score_reference})
    if ev.top1_agreement is not None:
        diff["top1_agreement"] = ev.top1_agreement
    return diff


# ------------------------------------------------------------------------------------------- apply

def _fix_int8_zeros(qmodel, pruned: dict, sources: dict) -> int:
    """Set INT8 weights that rounded to 0 but were non-zero after pruning to ±1; returns how many."""
    fixed = 0
    for w, arr in pruned.items():
        loc = locate_weight(qmodel, w, sources[w][2])
        if loc is None or not loc[2]:
            continue
        q = get_array(qmodel, loc[0], loc[1])
        if q.shape != arr.shape or q.dtype not in (np.int8, np.uint8):
            continue
        if q.dtype == np.uint8:  # asymmetric weights have a zero point; leave them
            continue
        bad = (q == 0) & (arr != 0)
        n = int(bad.sum())
        if n:
            q = q.copy()
            q[bad] = np.sign(arr[bad]).astype(np.int8)
            set_array(qmodel, loc[0], loc[1], q)
            fixed += n
    return fixed


def apply_optimization(
    model_path: Union[str, Path],
    sparsities: dict,
    run: RunSpec = REFERENCE,
    *,
    quantize: bool = False,
    structure: str = "unstructured",
    excluded: Sequence[str] = (),
    out_path: Union[str, Path],
    calibration: Optional[Sequence[dict]] = None,
    dims: Optional[dict] = None,
    data: Optional[Union[str, Path]] = None,
    calibration_samples: Optional[int] = None,
    measure_outputs: bool = True,
    calibration_method: str = "minmax",
    labels_key: Optional[str] = None,
    metric: Optional[str] = None,
    metric_asked_by: str = "--metric",
    settings: Optional["Settings"] = None,
    reconstruct: Optional[bool] = None,
    progress: Optional[ProgressFn] = None,
    cancel: Optional[CancelToken] = None,
) -> ApplyResult:
    """Prune (and optionally INT8-quantize) ``model_path`` and write ``out_path``; see the module doc.

    A ``model_level`` structure (channel) rewrites the whole model instead of each weight:
    :func:`apply_model_level` (``settings``: the record's settings; the run's batch size: of the check inputs
    and the MACs it reports).

    Args:
        sparsities: ``{weight_name: sparsity in [0, 1]}``; 0 leaves a layer dense.
        quantize: write a static INT8 QDQ model; ``excluded``: node ids kept FP32.
        structure: the optimization's pruning structure
            (:data:`sparsify_tui.optimization.structures.STRUCTURES`), whose ``prune_weight`` prunes each weight.
        run: the runtime the optimization targets (:class:`~sparsify_tui.engine.run.RunSpec`): its engine quantizes
            (with its own INT8 activation type) and runs the held-out check, in its precision; its batch size is the
            check inputs' (default onnxruntime fp32, batch 1).
        calibration: feed dicts for INT8 calibration (then also the items scored); default the first
            ``calibration_samples`` items of ``data`` (16 for INT8; a model-level structure: half the items, at
            most 64), or synthetic items (:func:`sparsify_tui.analysis.labels.split_items`).
        measure_outputs: compute ``output_diff`` on the held-out items: every item of ``data`` not used for
            calibration (with its labels when the file has them), else other synthetic items
            (:func:`score_items`: ``output_diff.items`` names them, ``output_diff.held_out`` says they are).
        reconstruct: a model-level structure refits its consumers on the calibration items (None: with ``data``).
        calibration_method: INT8 calibration ("minmax", "entropy", "percentile"), as the INT8 search used.
        labels_key / metric: labels in ``data`` (:mod:`sparsify_tui.analysis.labels`; default key ``labels``
            when present) for the accuracy in ``output_diff``, and the metric it states (default from the outputs);
            ``metric_asked_by`` starts its reason (:func:`sparsify_tui.profiling.metrics.choose_metric`).

    Returns: :class:`ApplyResult`. Raises ``ModelError`` (unknown weight, quantization failure),
    ``DimensionError``/``SampleDataError`` (calibration inputs), ``JobCanceled``, ``ValueError``
    (sparsity outside [0, 1]).
    """
    from sparsify_tui.optimization.structures import get_structure

    engine = run.runtime()
    kind = get_structure(structure)
    if kind.model_level:
        return apply_model_level(model_path, sparsities, run, structure=structure, quantize=quantize,
                                 excluded=excluded, out_path=out_path, calibration=calibration, dims=dims,
                                 data=data, calibration_samples=calibration_samples,
                                 measure_outputs=measure_outputs, settings=settings,
                                 labels_key=labels_key, metric=metric, metric_asked_by=metric_asked_by,
                                 reconstruct=reconstruct, calibration_method=calibration_method,
                                 progress=progress, cancel=cancel)
    t0 = time.perf_counter()
    prog = progress or (lambda s, f: None)
    src = Path(model_path)
    out = Path(out_path)
    if not src.is_file():
        raise ModelError(f"model {src} does not exist: check the project's model path")
    for w, s in sparsities.items():
        if not 0.0 <= float(s) <= 1.0:
            raise SparsifyError(f"sparsity {s} of {w} is outside [0, 1]: fix the optimization's layer sparsity")
    split = _weight_level_split(src, calibration, data=data, labels_key=labels_key, dims=dims,
                                calibration_samples=calibration_samples, metric=metric)
    prog("loading", 0.0)
    external = _writes_external(src)
    model = _load(src)
    maybe_check(cancel)

    prog("pruning", 0.1)
    sources, pruned, layers, warnings = _prune_weights(model, sparsities, kind.prune_weight, cancel)
    lower_ir_version(model)

    with temp_dir("apply") as tmp:
        if quantize:
            pruned_path = Path(tmp) / "pruned.onnx"
            _save(model, pruned_path, external)
            del model
            prog("quantizing", 0.3)
            qtmp = Path(tmp) / "int8.onnx"
            qres = _quantize_file(engine, src, pruned_path, qtmp, split.calibration, excluded, prog, cancel,
                                  "pruned", calibration_method)
            warnings.extend(qres.warnings)
            ir = _write_int8(qtmp, out, pruned, sources, external, warnings)
            quant_info = qres.to_dict()
            quant_info["out_path"] = str(out)
        else:
            ir = model.ir_version
            _save(model, out, external)
            del model
            quant_info = None
    maybe_check(cancel)

    prog("measuring sparsity", 0.75)
    _measure_written(out, layers, sources, quantize)
    diff = _held_out_diff(measure_outputs, prog, src, out, split, engine=engine, metric=metric,
                          metric_asked_by=metric_asked_by, cancel=cancel)
    prog("done", 1.0)
    return ApplyResult(
        out_path=out, quantized=bool(quantize), excluded=list(excluded), layers=layers, output_diff=diff,
        seconds=time.perf_counter() - t0, file_size_bytes=file_size(out), baseline_size_bytes=file_size(src),
        ir_version=int(ir), quantization=quant_info, warnings=warnings,
    )


def _writes_external(src: Path) -> bool:
    """Whether the written model keeps its weights in an external-data file (as the source, or a large one)."""
    return _has_external_data(src) or src.stat().st_size >= EXTERNAL_DATA_BYTES


def _weight_level_split(src: Path, calibration, *, data, labels_key, dims, calibration_samples, metric=None):
    """The items of a per-weight apply: calibrate on the first items of ``data`` (or synthetic ones), score every
    other one (held out); given ``calibration`` feeds, those do both (labels then cannot be given)."""
    from sparsify_tui.analysis.labels import ItemSplit, split_items

    if calibration is None:
        return split_items(src, data=data, labels_key=labels_key, dims=dims,
                           calibration_items=calibration_samples or 16, metric=metric)
    if labels_key:
        from sparsify_tui.errors import SampleDataError

        raise SampleDataError(f"--labels {labels_key} needs --data FILE.npz holding the inputs and the labels")
    return ItemSplit(list(calibration), list(calibration), None, None, "given", 1, None, None)


def _prune_weights(model, sparsities: dict, prune_weight, cancel) -> tuple:
    """Prune every weight of ``sparsities`` in ``model`` with the structure's ``prune_weight`` (a weight shared by
    several layers once). Returns ``(sources, pruned, layers, warnings)``: weight name -> (kind, source name,
    first consumer node id), weight name -> its pruned array, the :class:`LayerApplied` rows, warnings."""
    from sparsify_tui.engine.pruning import pruned_count

    sources: dict[str, tuple] = {}
    pruned: dict[str, np.ndarray] = {}
    layers: list[LayerApplied] = []
    done_sources: dict[str, str] = {}
    warnings: list = []
    for w, s in sparsities.items():
        maybe_check(cancel)
        kind, name = find_weight_source(model, w)
        node_ids = _consumer_node_ids(model, w)
        sources[w] = (kind, name, node_ids[0] if node_ids else None)
        if name in done_sources:
            warnings.append(f"{w} shares its weights with {done_sources[name]}; pruned once")
        arr = get_array(model, kind, name)
        if not np.issubdtype(arr.dtype, np.floating):
            raise ModelError(f"weight {w} is {arr.dtype}, not float: apply the optimization to the FP32 model")
        new = prune_weight(arr, float(s))
        if float(s) > 0:
            set_array(model, kind, name, new)
        done_sources[name] = w
        pruned[w] = new
        layers.append(LayerApplied(w, name, int(arr.size), float(s), pruned_count(arr.size, float(s))))
    return sources, pruned, layers, warnings


def _write_int8(qtmp: Path, out: Path, pruned: dict, sources: dict, external: bool, warnings: list) -> int:
    """Write the quantized ``qtmp`` to ``out`` with the pruned zeros kept exact (:func:`_fix_int8_zeros`) and the IR
    lowered; returns the IR version written."""
    qmodel = _load(qtmp)
    fixed = _fix_int8_zeros(qmodel, pruned, sources)
    if fixed:
        warnings.append(f"{fixed} surviving weights rounded to INT8 zero were set to ±1 step to keep the sparsity exact")
    ir = lower_ir_version(qmodel)
    _save(qmodel, out, external)
    return ir


def _measure_written(out: Path, layers: list, sources: dict, quantize: bool) -> None:
    """Fill each layer's zeros and measured sparsity from the written file (and whether it was quantized)."""
    measured = measure_sparsities(out, {l.weight_name: sources[l.weight_name][2] for l in layers})
    for l in layers:
        z, n = measured[l.weight_name]
        if z is not None:
            l.zero_weights = z
            l.measured_sparsity = z / n if n else 0.0
    if quantize:
        qm = _load(out)
        for l in layers:
            loc = locate_weight(qm, l.weight_name, sources[l.weight_name][2])
            l.quantized = bool(loc and loc[2])
        del qm


def _held_out_diff(measure_outputs: bool, prog, src: Path, out: Path, split, **score) -> dict:
    """:func:`score_items` of the written file on the held-out items, or ``{}`` when outputs are not measured."""
    if not measure_outputs:
        return {}
    prog("scoring held-out items", 0.85)
    return score_items(src, out, split, **score)


def _quantize_file(engine, src: Path, in_path: Path, out: Path, calibration, excluded, prog, cancel, what: str,
                   calibration_method: str = "minmax"):
    """INT8 (the engine's ``quantize_int8``: static QDQ, per-channel, ``calibration_method``; or, with
    ``calibration_method`` "dynamic", its ``quantize_dynamic_int8``: activation ranges taken at run time) of
    ``in_path`` into ``out``, the progress bar's 30-70 %; returns the quantization result. A failure is one line
    naming ``what`` was quantized (e.g. "pruned")."""
    def qprog(step, frac):
        prog(f"quantizing: {step}", 0.3 + 0.4 * frac)

    qkw = {"calibration_method": calibration_method} if calibration_method != "minmax" else {}
    try:
        if calibration_method == "dynamic":
            return engine.quantize_dynamic_int8(in_path, out, cancel=cancel)
        return engine.quantize_int8(in_path, out, list(calibration), per_channel=True,
                                    excluded_nodes=list(excluded), progress=qprog, cancel=cancel, **qkw)
    except ModelError as err:
        reason = str(err).split(" failed: ", 1)[-1]
        raise ModelError(f"INT8 quantization of the {what} {src.name} failed ({reason}): turn quantization "
                         "off for this optimization or exclude the failing layers") from err


def apply_model_level(model_path, sparsities: dict, run: RunSpec = REFERENCE, *, structure: str,
                      quantize: bool = False, excluded: Sequence[str] = (), out_path, calibration=None,
                      dims: Optional[dict] = None, data=None, calibration_samples: Optional[int] = None,
                      measure_outputs: bool = True, settings: Optional["Settings"] = None,
                      labels_key: Optional[str] = None,
                      metric: Optional[str] = None, metric_asked_by: str = "--metric",
                      reconstruct: Optional[bool] = None, calibration_method: str = "minmax",
                      progress: Optional[ProgressFn] = None, cancel: Optional[CancelToken] = None) -> ApplyResult:
    """Apply a ``model_level`` structure: its ``apply_model`` writes the pruned FP32 model (channel: thinned, exact
    and checked, then reconstructed on the calibration items; ``sparsities`` are the per-group ratios), **then** INT8
    when ``quantize`` (the same ``quantize_int8`` as every apply), then the output difference of the written file
    against the baseline on the **held-out** items.

    Items (:func:`sparsify_tui.analysis.labels.split_items`): with ``data``, the first ``calibration_samples``
    items (default half, at most 64) calibrate (reconstruction, INT8) and every other item is scored, with its
    labels when the file has them; without, synthetic calibration items and other synthetic items to score.
    ``reconstruct``: refit the consumers on the calibration items; None (default) = only with real ``data``
    (reconstruction on synthetic inputs made every real model measured worse, docs/optimize.md "Reconstruction").
    ``calibration``: explicit calibration feeds (then the held-out items are synthetic). ``ApplyResult.layers`` is
    empty; ``structure_result`` holds the structure's report. Raises as :func:`apply_optimization`."""
    from sparsify_tui.analysis.labels import split_items
    from sparsify_tui.engine import get_engine
    from sparsify_tui.optimization.structures import get_structure

    engine, batch_size = run.runtime(), run.batch_size
    kind = get_structure(structure)
    t0 = time.perf_counter()
    prog = progress or (lambda s, f: None)
    src, out = Path(model_path), Path(out_path)
    if not src.is_file():
        raise ModelError(f"model {src} does not exist: check the project's model path")
    out.parent.mkdir(parents=True, exist_ok=True)
    prog("calibration inputs", 0.0)
    split = split_items(src, data=None if calibration is not None else data, labels_key=labels_key, dims=dims,
                        batch_size=batch_size, calibration_items=calibration_samples, metric=metric)
    if calibration is not None:
        split.calibration = list(calibration)
    asked = reconstruct
    if reconstruct is None:
        reconstruct = split.source != "synthetic"
    warnings: list = []
    with temp_dir("apply") as tmp:
        pruned_path = Path(tmp) / "pruned.onnx" if quantize else out

        def sprog(step, frac):
            prog(f"{structure}: {step}", 0.02 + 0.5 * frac)

        # the rewrite (channel importance, reconstruction's activations) is computed on the reference runtime: the
        # model written does not depend on where it will run; the target's engine quantizes and scores it below
        report = kind.apply_model(src, pruned_path, sparsities, settings=settings, batch_size=batch_size,
                                  dims=dims, feeds=split.calibration[:4], calibration=split.calibration,
                                  reconstruct=reconstruct, real_data=split.source != "synthetic",
                                  engine=get_engine(REFERENCE.engine, REFERENCE.precision),
                                  progress=sprog, cancel=cancel)
        if isinstance(report, dict) and "reconstruction" in report:
            if report["reconstruction"] is not None:
                report["reconstruction"]["enabled"] = True
            else:
                report["reconstruction"] = {"enabled": False, "reason": (
                    "--no-reconstruct" if asked is False else
                    "no sample data: reconstruction on synthetic inputs made every real model worse; give --data "
                    "FILE.npz")}
        maybe_check(cancel)
        quant_info = None
        if quantize:
            prog("quantizing", 0.55)
            qres = _quantize_file(engine, src, pruned_path, out, split.calibration, excluded, prog, cancel,
                                  f"{structure}-pruned", calibration_method)
            warnings.extend(qres.warnings)
            quant_info = qres.to_dict()
            quant_info["out_path"] = str(out)
            qm = _load(out)  # as every apply writes it: IR lowered when the opsets allow
            ir = lower_ir_version(qm)
            _save(qm, out, _writes_external(src))
            del qm
        else:
            import onnx

            ir = int(onnx.load(str(out), load_external_data=False).ir_version)
    diff = _held_out_diff(measure_outputs, prog, src, out, split, engine=engine, metric=metric,
                          metric_asked_by=metric_asked_by, cancel=cancel)
    prog("done", 1.0)
    return ApplyResult(out_path=out, quantized=bool(quantize), excluded=list(excluded) if quantize else [],
                       layers=[], output_diff=diff, seconds=time.perf_counter() - t0,
                       file_size_bytes=file_size(out), baseline_size_bytes=file_size(src), ir_version=ir,
                       quantization=quant_info, warnings=warnings, structure=structure, structure_result=report)


def score_items(baseline_path, model_path, split, *, engine: Any = None, metric: Optional[str] = None,
                metric_asked_by: str = "--metric", cancel: Optional[CancelToken] = None) -> dict:
    """:func:`output_difference` of ``model_path`` against ``baseline_path`` on the held-out items of ``split``
    (:class:`~sparsify_tui.analysis.labels.ItemSplit`; their labels when the data has them), plus ``items``
    (:meth:`~sparsify_tui.analysis.labels.ItemSplit.describe`: the data, and which items calibrated and which were
    scored) and ``held_out`` (True when the scored items are not calibration items)."""
    diff = output_difference(baseline_path, model_path, list(split.held_out), cancel=cancel, engine=engine,
                             labels=split.held_out_labels, metric=metric, metric_asked_by=metric_asked_by)
    diff["items"] = split.describe()
    diff["held_out"] = split.held_out_items is not None
    return diff


# ------------------------------------------------------------------------------ records (plain data)


def quantization_settings(opt: "Optimization") -> tuple[bool, list]:
    """``(quantize, excluded node ids)`` of an optimization."""
    q = opt.quantization
    return bool(q.enabled), [str(x) for x in (q.excluded or [])]


def calibration_settings(opt: "Optimization") -> dict:
    """What apply calibrates and measures with for an optimization: ``calibration_method`` (default
    "minmax"), and from its INT8 search (when any) ``data``, ``labels_key``, ``metric`` and
    ``calibration_samples`` (and ``metric_asked_by``), so the applied model is the configuration the search
    measured; from its budget search (when any, over the INT8 search's) the same, with ``calibration_samples`` its
    calibration items (what the reconstruction fit and INT8 calibrated on)."""
    q = opt.quantization
    out = {"calibration_method": q.calibration_method or "minmax"}
    search = q.search
    if search is not None:
        out.update({"data": search.data, "labels_key": search.labels_key, "metric": search.metric,
                    "metric_asked_by": "the INT8 search's metric",
                    "calibration_samples": int(search.calibration_size or 16)})
    budget = opt.search
    if budget is not None and budget.data:  # the budget search's data and split: it fit and scored the model
        out.update({"data": budget.data, "labels_key": budget.labels_key, "metric": budget.metric,
                    "metric_asked_by": "the budget search's metric",
                    "calibration_samples": int(budget.calibration_items)})
    return out


def optimization_fingerprint(opt: "Optimization") -> str:
    """A hash of what apply writes for ``opt`` (layer sparsities + quantization): an applied file
    whose fingerprint differs from the record's current one is stale."""
    from sparsify_tui.optimization.core import layer_sparsities

    quant, excluded = quantization_settings(opt)
    fields = {"s": {k: round(float(v), 6) for k, v in sorted(layer_sparsities(opt).items())},
              "q": quant, "x": sorted(excluded)}
    structure = opt.settings.structure
    if structure != "unstructured":  # unstructured files applied before structures existed stay valid
        fields["structure"] = structure
        for key in ("round_to", "importance"):  # how a model-level structure picks what it removes
            if hasattr(opt.settings, key):
                fields[key] = getattr(opt.settings, key)
        if getattr(opt.settings, "data_sha256", None):  # the data it chooses channels and reconstructs on
            fields["data"] = opt.settings.data_sha256
    method = opt.quantization.calibration_method
    if quant and method and method != "minmax":  # files applied before calibration methods existed stay valid
        fields["calibration"] = method
    payload = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def export_model(src: Union[str, Path], dst: Union[str, Path]) -> Path:
    """Copy a written model to ``dst`` (creating folders). A model with external data is re-saved so
    its data file is ``<dst>.data`` next to it. Written through temp files renamed into place
    (:func:`sparsify_tui.tempfiles.atomic_output`): never through a symlink, never half a file. Returns ``dst``."""
    from sparsify_tui.tempfiles import atomic_output, check_output_target

    src, dst = Path(src), Path(dst)
    if dst.suffix == "" or (dst.is_dir() and not dst.is_symlink()):
        dst = dst / src.name if dst.is_dir() and not dst.is_symlink() else dst.with_suffix(".onnx")
    dst = Path(os.path.abspath(dst))
    check_output_target(dst)
    if src.resolve() == dst:
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        if _has_external_data(src):
            data = dst.with_name(dst.name + ".data")
            with atomic_output([dst, data]) as (tmp, _tmp_data):
                _save(_load(src), tmp, True)
        else:
            with atomic_output([dst]) as (tmp,):
                shutil.copyfile(src, tmp)
    except OSError as err:
        raise SparsifyError(f"cannot write {dst}: {err.strerror}; choose a writable path") from err
    return dst
