"""Weight and graph rewrites on ONNX models: find a layer's weight values, read and replace them, write
the model, and the in-memory weight hand-off of one-shot loss profiles.

Every runtime reads the same ONNX file, so these are shared by all engines. The IR-version rule itself
is :func:`sparsify_tui.analysis.loading.set_ir_version`; :func:`lower_ir_version` and
:func:`runnable_path` apply it to written and measured files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Union

import numpy as np

from sparsify_tui.analysis.graph import iter_graphs
from sparsify_tui.analysis.layers import WEIGHT_CHAIN_OPS
from sparsify_tui.errors import ModelError

#: ops that only move/re-type weight values; a weight computed through them is pruned at its source.
PASS_THROUGH_OPS = tuple(sorted(WEIGHT_CHAIN_OPS - {"DequantizeLinear"}))
#: models at or above this size are written with external data (protobuf's 2 GB limit).
EXTERNAL_DATA_BYTES = 1_800_000_000
#: IR version written models are lowered to when their opsets allow (onnxruntime 1.31 loads up to 13;
#: older runtimes and tools load 10).
WRITE_IR_VERSION = 10
#: external-data location of stripped initializers (:func:`strip_initializers`; never a file)
IN_MEMORY = "__sparsify_tui_in_memory__"
_DATA_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data")


def all_nodes(model) -> list:
    """Every node of the main graph and all subgraphs (:func:`~sparsify_tui.analysis.graph.iter_graphs` order)."""
    return [n for _, g in iter_graphs(model.graph) for n in g.node]


def all_initializers(model) -> list:
    """Every initializer of the main graph and all subgraphs."""
    return [t for _, g in iter_graphs(model.graph) for t in g.initializer]


def producers(model) -> dict:
    """``{tensor name: producing node}`` over the main graph and all subgraphs (names are unique model-wide)."""
    return {o: n for n in all_nodes(model) for o in n.output}


def _constant_value_attr(node):
    for a in node.attribute:
        if a.name == "value":
            return a
    return None


def find_weight_source(model, weight_name: str) -> tuple[str, str]:
    """Where the values of ``weight_name`` live (main graph or a subgraph): ``(kind, tensor_name)`` with
    kind ``"initializer"`` or ``"constant"``; follows :data:`PASS_THROUGH_OPS` back from a computed
    weight. Raises ``ModelError`` when the weight is not a constant tensor of the model."""
    inits = {t.name for t in all_initializers(model)}
    prod = producers(model)
    name = weight_name
    for _ in range(16):
        if name in inits:
            return "initializer", name
        node = prod.get(name)
        if node is None:
            break
        if node.op_type == "Constant" and _constant_value_attr(node) is not None:
            return "constant", name
        if node.op_type in PASS_THROUGH_OPS and node.input:
            name = node.input[0]
            continue
        break
    raise ModelError(f"weight {weight_name} is not an initializer of the model: check the optimization was made for this model")


def get_array(model, kind: str, name: str) -> np.ndarray:
    """The values of initializer or Constant output ``name`` (``kind`` from :func:`find_weight_source`).
    Raises ``KeyError`` when absent."""
    from onnx import numpy_helper

    if kind == "initializer":
        for t in all_initializers(model):
            if t.name == name:
                return numpy_helper.to_array(t)
    else:
        node = producers(model)[name]
        return numpy_helper.to_array(_constant_value_attr(node).t)
    raise KeyError(name)


def set_array(model, kind: str, name: str, arr: np.ndarray) -> None:
    """Replace the values of initializer or Constant output ``name`` with ``arr`` (in place; any shape
    and dtype). Raises ``KeyError`` when absent."""
    from onnx import numpy_helper

    tensor = numpy_helper.from_array(arr, name)
    if kind == "initializer":
        for t in all_initializers(model):
            if t.name == name:
                t.CopyFrom(tensor)
                return
    else:
        node = producers(model)[name]
        _constant_value_attr(node).t.CopyFrom(tensor)
        return
    raise KeyError(name)


def lower_ir_version(model) -> int:
    """Lower a model about to be written to IR :data:`WRITE_IR_VERSION` when it is newer and its opsets
    allow (:func:`sparsify_tui.analysis.loading.set_ir_version`); returns its IR version."""
    from sparsify_tui.analysis.loading import set_ir_version

    if model.ir_version > WRITE_IR_VERSION:
        set_ir_version(model, WRITE_IR_VERSION)
    return int(model.ir_version)


def load(path: Union[str, Path]):
    """The model at ``path`` with its weights (:func:`sparsify_tui.analysis.loading.load_model`)."""
    from sparsify_tui.analysis.loading import load_model

    return load_model(path)


def save(model, path: Path, external: bool) -> None:
    """Write ``model`` to ``path`` (folders created); with ``external`` every tensor of 1 KiB or more goes
    to ``<path>.data`` next to it (an old one is removed first)."""
    import onnx

    path.parent.mkdir(parents=True, exist_ok=True)
    data = path.with_name(path.name + ".data")
    if data.exists():
        data.unlink()
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=data.name, size_threshold=1024)
    else:
        onnx.save_model(model, str(path))


def has_external_data(path: Path) -> bool:
    """True when the main graph of the model at ``path`` keeps initializers in external data."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)


def file_size(path: Union[str, Path]) -> int:
    """Bytes of the model file plus its ``<file>.data`` external data file when present."""
    p = Path(path)
    data = p.with_name(p.name + ".data")
    return p.stat().st_size + (data.stat().st_size if data.exists() else 0)


def runnable_path(path: Path, ir_version: int, tmp: Path) -> str:
    """``path`` itself when its stored IR version is ``ir_version`` (what ``load_model`` made of it),
    else a copy in ``tmp`` with that IR version (``ir_lowered.onnx``, external data copied next to it):
    a model newer than the runtime loads is measured at the version :func:`load_model` lowered it to."""
    import onnx

    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
        # field 1 (ir_version, varint) is first in files written by onnx
        raw_ir = head[1] if len(head) > 1 and head[0] == 0x08 else None
    except OSError:
        raw_ir = None
    if raw_ir is None or raw_ir == ir_version:
        return str(path)
    raw = onnx.load(str(path), load_external_data=False)
    raw.ir_version = ir_version
    out = tmp / "ir_lowered.onnx"
    has_external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in raw.graph.initializer)
    if has_external:
        onnx.load_external_data_for_model(raw, str(path.parent))
        onnx.save(raw, str(out), save_as_external_data=True, location="ir_lowered.onnx.data")
    else:
        onnx.save(raw, str(out))
    return str(out)


def strip_initializers(model, min_bytes: int = 1024) -> dict:
    """Move the data of every numeric initializer of ≥ ``min_bytes`` out of ``model`` (in place).

    Returns ``{name: numpy array}``. Each such ``TensorProto`` keeps its name, type and dims but becomes a
    data-less placeholder (``data_location = EXTERNAL``, location :data:`IN_MEMORY`), so a sub-model
    serializes in microseconds instead of copying every weight; an engine's ``open_session(...,
    external_initializers=arrays)`` hands the arrays to the runtime in memory. Graph-level parameter
    counts (dims) are unaffected.
    """
    import onnx
    from onnx import numpy_helper

    arrays = {}
    for t in model.graph.initializer:
        if t.data_type == onnx.TensorProto.STRING or t.data_location == onnx.TensorProto.EXTERNAL:
            continue
        arr = numpy_helper.to_array(t)
        if arr.nbytes < min_bytes:
            continue
        arrays[t.name] = arr
        for f in _DATA_FIELDS:
            t.ClearField(f)
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        for key, value in (("location", IN_MEMORY), ("offset", "0"), ("length", str(arr.nbytes))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
    return arrays
