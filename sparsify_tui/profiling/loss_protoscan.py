"""Read an ONNX file's graph structure and weights without parsing (copying) every weight.

``onnx.load`` copies every ``raw_data`` field into Python bytes (1.2 s for BERT-base's 438 MB). The
weight-magnitude profile only needs the nodes, the initializers' names/dims/types, and then each weight
once. :func:`scan_model` memory-maps the file, walks the protobuf wire format of ``ModelProto.graph``
(field numbers from onnx.proto3), parses the nodes with protobuf, and records where each initializer's
``raw_data`` lies, so :meth:`ScannedModel.array` is a zero-copy ``np.frombuffer`` view.

Anything unusual (no raw_data, external data, a parse problem) makes the caller fall back to the
normal loader; this module never decides that a file is invalid.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Optional

import numpy as np

from sparsify_tui.analysis.layers import PRUNABLE_OPS
from sparsify_tui.analysis.protobuf import read_varint, wire_fields

# ModelProto.graph = 7; GraphProto: node = 1, initializer = 5; TensorProto: dims = 1, data_type = 2,
# name = 8, raw_data = 9, data_location = 14 (1 = EXTERNAL); other data fields: 4,5,6,7,10,11.
_TYPED_DATA_FIELDS = {4, 5, 6, 7, 10, 11}


def _fields(buf, start: int, end: int):
    """``(field number, wire type, a, b)`` over ``buf[start:end]``: ``a`` the varint value and ``b`` None for wire
    type 0, else the value's span ``[a, b)`` (:func:`sparsify_tui.analysis.protobuf.wire_fields`)."""
    for f in wire_fields(buf, start, end):
        yield (f.number, f.wire, f.value, None) if f.wire == 0 else (f.number, f.wire, f.value_start, f.end)


class ScannedModel:
    """``model``: a ModelProto holding the graph's nodes and data-less initializers (name, dims, type);
    ``array(name)``: the initializer's values as a read-only view of the mapped file."""

    def __init__(self, path: Path):
        import onnx

        self.path = Path(path)
        self._fh = open(self.path, "rb")
        self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        buf = self._mm
        self.raw: dict = {}
        node_chunks = []
        model = onnx.ModelProto()
        graph_span = None
        for field, wt, a, b in _fields(buf, 0, len(buf)):
            if field == 7 and wt == 2:
                graph_span = (a, b)
            elif field == 1 and wt == 0:
                model.ir_version = a
            elif field == 8 and wt == 2:
                model.opset_import.add().ParseFromString(bytes(buf[a:b]))
        if graph_span is None:
            raise ValueError("no graph")
        inits = []
        for field, wt, a, b in _fields(buf, *graph_span):
            if field == 1 and wt == 2:
                node_chunks.append(bytes(buf[a:b]))
            elif field == 5 and wt == 2:
                inits.append(self._tensor_header(buf, a, b))
        graph = model.graph
        for chunk in node_chunks:
            graph.node.add().ParseFromString(chunk)
        for name, dims, dtype, span in inits:
            t = graph.initializer.add()
            t.name, t.data_type = name, dtype
            t.dims.extend(dims)
            self.raw[name] = (dims, dtype, span)
        self.model = model

    @staticmethod
    def _tensor_header(buf, start: int, end: int):
        name, dims, dtype, span = "", [], 0, None
        for field, wt, a, b in _fields(buf, start, end):
            if field == 8 and wt == 2:
                name = bytes(buf[a:b]).decode("utf-8")
            elif field == 1 and wt == 0:
                dims.append(a)
            elif field == 1 and wt == 2:  # packed dims
                p = a
                while p < b:
                    v, p = read_varint(buf, p)
                    dims.append(v)
            elif field == 2 and wt == 0:
                dtype = a
            elif field == 9 and wt == 2:
                span = (a, b)
            elif field == 14 and wt == 0 and a == 1:
                raise ValueError("external data")
            elif field in _TYPED_DATA_FIELDS and (b is None or b > a):
                raise ValueError("typed data fields")
        return name, dims, dtype, span

    def array(self, name: str) -> np.ndarray:
        """Zero-copy values of initializer ``name`` (little-endian raw_data)."""
        import onnx

        dims, dtype, span = self.raw[name]
        np_dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype)).newbyteorder("<")
        if span is None:
            return np.zeros(dims, np_dtype)
        a, b = span
        return np.frombuffer(self._mm, dtype=np_dtype, count=(b - a) // np_dtype.itemsize, offset=a).reshape(dims)

    def close(self) -> None:
        try:
            self._mm.close()
        except BufferError:  # views still alive: the map is released when they are
            pass
        self._fh.close()


def scan_model(path) -> Optional[ScannedModel]:
    """A :class:`ScannedModel`, or None when the file needs the normal loader (external data, typed
    data fields, Constant-node weights, or anything the scanner does not understand)."""
    try:
        sm = ScannedModel(Path(path))
    except Exception:  # noqa: BLE001 - the normal loader reports real problems with a proper message
        return None
    consts = {o for n in sm.model.graph.node if n.op_type == "Constant" for o in n.output}
    weight_from_const = any(n.op_type in PRUNABLE_OPS and len(n.input) > 1 and n.input[1] in consts
                            for n in sm.model.graph.node)
    if weight_from_const or not sm.model.opset_import or not _sizes_match(sm):
        sm.close()
        return None
    return sm


def _sizes_match(sm: ScannedModel) -> bool:
    """True when every initializer's raw_data is exactly dims x item size (else the normal loader reports
    the damaged tensor in one line)."""
    import onnx

    for dims, dtype, span in sm.raw.values():
        try:
            itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype)).itemsize
        except Exception:  # noqa: BLE001 - exotic dtype
            return False
        numel = 1
        for d in dims:
            numel *= int(d)
        have = 0 if span is None else span[1] - span[0]
        if have != numel * itemsize:
            return False
    return True
