"""Weight and graph rewrites on ONNX models: find a layer's weight values, read and replace them, write
the model, and the in-memory weight hand-off of one-shot loss profiles.

Every runtime reads the same ONNX file, so these are shared by all engines. The IR-version rule itself
is :func:`sparsify_tui.analysis.loading.set_ir_version`; :func:`lower_ir_version` and
:func:`runnable_path` apply it to written and measured files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from sparsify_tui.analysis.graph import iter_graphs
from sparsify_tui.analysis.layers import WEIGHT_CHAIN_OPS
from sparsify_tui.errors import ModelError

if TYPE_CHECKING:
    import onnx

#: ops that only move/re-type weight values; a weight computed through them is pruned at its source.
PASS_THROUGH_OPS = tuple(sorted(WEIGHT_CHAIN_OPS - {"DequantizeLinear"}))
#: models at or above this size are written with external data (protobuf's 2 GB limit).
EXTERNAL_DATA_BYTES = 1_800_000_000
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
    """Lower a model about to be written to IR :data:`~sparsify_tui.analysis.loading.WRITE_IR_VERSION` when it
    is newer and its opsets allow (:func:`sparsify_tui.analysis.loading.lower_ir_version`); returns its IR
    version."""
    from sparsify_tui.analysis.loading import lower_ir_version as lower

    return lower(model)


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
    from sparsify_tui.analysis.loading import set_ir_version

    raw = onnx.load(str(path), load_external_data=False)
    set_ir_version(raw, ir_version, path.name)
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


def _varint_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(number: int, wire: int = 2) -> bytes:
    return _varint_bytes((number << 3) | wire)


def _without(message, skip: str):
    """A copy of ``message`` (a protobuf message) without its field ``skip`` (copied field by field, so the
    skipped field, e.g. a graph's initializers, is never duplicated in memory)."""
    out = type(message)()
    for fd, value in message.ListFields():
        if fd.name == skip:
            continue
        repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
        if repeated:
            getattr(out, fd.name).extend(value)
        elif fd.type == fd.TYPE_MESSAGE:
            getattr(out, fd.name).CopyFrom(value)
        else:
            setattr(out, fd.name, value)
    return out


def write_model(model, path: Union[str, Path], *, arrays: Optional[dict] = None, base_dir=None,
                external: bool = False, chunk_bytes: int = 1 << 24) -> int:
    """Write ``model`` to ``path`` streaming its initializers one at a time; returns the bytes written (model
    file plus ``<path>.data``).

    ``save`` serializes the whole model at once; this writes models whose weights are not (all) in the proto:
    initializers that are external-data references (data in ``base_dir``, including references into an
    ``.onnx`` file loaded with ``load_model(map_weights=True)``) are copied from their file in ``chunk_bytes``
    pieces, and placeholders listed in ``arrays`` (``{initializer name: numpy array}``, the array replacing
    the tensor's data, dims and type) are written from memory. Memory stays about one chunk above what the
    caller holds. With ``external`` (forced when the model would pass protobuf's 2 GB limit), every tensor of
    1 KiB or more goes to ``<path>.data`` (an old one is removed first); otherwise the file is self-contained.
    Raises ``ModelError`` when an external file is missing or short.
    """
    import onnx
    from onnx import TensorProto, helper

    from sparsify_tui.analysis.loading import external_data_info

    arrays = dict(arrays or {})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data_path = path.with_name(path.name + ".data")
    if data_path.exists():
        data_path.unlink()
    graph_no = onnx.ModelProto.DESCRIPTOR.fields_by_name["graph"].number
    init_no = onnx.GraphProto.DESCRIPTOR.fields_by_name["initializer"].number
    raw_no = TensorProto.DESCRIPTOR.fields_by_name["raw_data"].number
    head = _without(model, "graph").SerializeToString()
    body = _without(model.graph, "initializer").SerializeToString()

    # one plan per initializer: (header TensorProto without data, payload size, payload source)
    plans = []
    for t in model.graph.initializer:
        if t.name in arrays:
            arr = np.ascontiguousarray(arrays[t.name])
            if arr.dtype.byteorder == ">":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            h = TensorProto(name=t.name, data_type=helper.np_dtype_to_tensor_dtype(arr.dtype), dims=list(arr.shape))
            plans.append((h, arr.nbytes, ("array", arr)))
            continue
        info = external_data_info(t)
        if info is not None and info["location"] != IN_MEMORY:
            if base_dir is None:
                raise ModelError(f"tensor '{t.name}' has external data but the model folder is unknown")
            h = TensorProto()
            h.CopyFrom(t)
            del h.external_data[:]
            h.data_location = TensorProto.DEFAULT
            n = info["length"] if info["length"] is not None else None
            if n is None:
                from sparsify_tui.analysis.loading import tensor_nbytes

                n = tensor_nbytes(t)
            plans.append((h, int(n), ("file", Path(base_dir) / info["location"], info["offset"])))
            continue
        if info is not None:
            raise ModelError(f"tensor '{t.name}' is an in-memory placeholder without an array: pass it in arrays")
        plans.append((t, None, None))
    total = len(head) + len(body) + sum(len(h.SerializeToString()) + (p or 0) for h, p, _ in plans)
    external = external or total >= EXTERNAL_DATA_BYTES

    def copy_payload(src, n_bytes: int, out_fh) -> None:
        if src[0] == "array":
            out_fh.write(memoryview(src[1]).cast("B"))
            return
        _, file, offset = src
        left = n_bytes
        try:
            with open(file, "rb") as fh:
                fh.seek(offset)
                while left:
                    chunk = fh.read(min(chunk_bytes, left))
                    if not chunk:
                        raise ModelError(f"external data file {file.name} ends inside a tensor: re-copy it")
                    out_fh.write(chunk)
                    left -= len(chunk)
        except OSError as err:
            raise ModelError(f"external data file {file} cannot be read ({err.strerror})") from None

    encoded = []  # (tensor bytes before the payload, payload size, payload source) per initializer
    data_fh = open(data_path, "wb") if external else None
    try:
        offset = 0
        for h, n_payload, src in plans:
            if src is None:
                encoded.append((h.SerializeToString(), 0, None))
            elif external and n_payload >= 1024:
                pad = (-offset) % 4096  # page-aligned, as onnx's own writer does
                data_fh.write(b"\0" * pad)
                offset += pad
                copy_payload(src, n_payload, data_fh)
                h.data_location = TensorProto.EXTERNAL
                for key, value in (("location", data_path.name), ("offset", str(offset)),
                                   ("length", str(n_payload))):
                    entry = h.external_data.add()
                    entry.key, entry.value = key, value
                offset += n_payload
                encoded.append((h.SerializeToString(), 0, None))
            else:
                encoded.append((h.SerializeToString() + _key(raw_no) + _varint_bytes(n_payload), n_payload, src))
    finally:
        if data_fh is not None:
            data_fh.close()
    graph_len = len(body) + sum(len(_key(init_no)) + len(_varint_bytes(len(b) + n)) + len(b) + n
                                for b, n, _ in encoded)
    with open(path, "wb") as fh:
        fh.write(head)
        fh.write(_key(graph_no) + _varint_bytes(graph_len))
        fh.write(body)
        for b, n, src in encoded:
            fh.write(_key(init_no) + _varint_bytes(len(b) + n))
            fh.write(b)
            if src is not None:
                copy_payload(src, n, fh)
    return file_size(path)


def placeholder_tensor(t: onnx.TensorProto, name: str, arr: np.ndarray) -> None:
    """Make ``t`` a data-less tensor named ``name`` with the type and dims of ``arr`` (its data handed over
    separately, as :func:`write_model` expects)."""
    import onnx

    t.Clear()
    t.name = name
    t.data_type = onnx.helper.np_dtype_to_tensor_dtype(arr.dtype)
    t.dims.extend(arr.shape)
    t.data_location = onnx.TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", IN_MEMORY
