"""Load ONNX models safely: one-line :class:`~sparsify_tui.errors.ModelError` for every bad input.

``load_model`` never raises a traceback for a user mistake. It checks, in order:

1. the path exists, is a regular file, and is not empty;
2. the file is not text (an ONNX model is a binary protobuf whose first byte is ``0x08``);
3. the protobuf parses (a truncated copy fails here) and has a graph and an opset;
4. every op domain is one onnxruntime can run (``""``, ``ai.onnx``, ``ai.onnx.ml``, ``com.microsoft`` ...),
   and every op of the default domains exists in onnx's schema registry;
5. every external-data file exists next to the model and is long enough;
6. the IR version is one onnxruntime loads (lowered in memory when the model uses nothing newer).

Models over 2 GB are stored with external data (protobuf cannot hold more than 2 GB), so the ``.onnx``
file itself is always small enough to parse. With ``load_external_data=False`` the weights stay on
disk; :func:`tensor_array` reads one tensor at a time (memory-mapped) for the analysis.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Optional, Union

import numpy as np
import onnx
from onnx import TensorProto

from sparsify_tui.analysis.graph import iter_graphs, replace_nodes
from sparsify_tui.errors import ModelError

#: Op domains onnxruntime's CPU provider can run (onnx standard, ML, Microsoft contrib ops, training preview).
KNOWN_DOMAINS = frozenset(
    {
        "",
        "ai.onnx",
        "ai.onnx.ml",
        "ai.onnx.preview.training",
        "ai.onnx.training",
        "com.microsoft",
        "com.microsoft.nchwc",
        "com.microsoft.experimental",
        "com.microsoft.mlfeaturizers",
        "com.ms.internal.nhwc",
        "org.pytorch.aten",
    }
)
#: Domains whose ops we can check one by one against onnx's schema registry.
_SCHEMA_DOMAINS = {"": "", "ai.onnx": "", "ai.onnx.ml": "ai.onnx.ml"}
#: Highest IR version onnxruntime 1.31 loads (onnx 1.23 writes 14 by default).
ORT_MAX_IR_VERSION = 13

PathLike = Union[str, os.PathLike]


def _looks_like_text(head: bytes) -> bool:
    """True when the first bytes are printable text (an ONNX protobuf starts with the binary tag 0x08)."""
    if not head:
        return False
    if head[:1] == b"\x08":
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        # a cut multi-byte char at the end of the sample is fine
        try:
            text = head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return False
    printable = sum(ch.isprintable() or ch in "\r\n\t" for ch in text)
    return printable >= 0.95 * max(1, len(text))


def _check_domains(model: onnx.ModelProto, name: str) -> None:
    local_functions = {(f.domain, f.name) for f in model.functions}
    function_domains = {f.domain for f in model.functions}
    unknown: dict[str, set[str]] = {}
    bad_ops: set[str] = set()
    opset = {o.domain: o.version for o in model.opset_import}
    for _, graph in iter_graphs(model.graph):
        for node in graph.node:
            dom = node.domain
            if (dom, node.op_type) in local_functions:
                continue
            if dom not in KNOWN_DOMAINS and dom not in function_domains:
                unknown.setdefault(dom, set()).add(node.op_type)
            elif dom in _SCHEMA_DOMAINS:
                sdom = _SCHEMA_DOMAINS[dom]
                if not onnx.defs.has(node.op_type, sdom):
                    bad_ops.add(node.op_type)
    if unknown:
        dom, ops = sorted(unknown.items())[0]
        more = f" (and {len(unknown) - 1} more domain(s))" if len(unknown) > 1 else ""
        raise ModelError(
            f"{name} uses op {', '.join(sorted(ops))} from unknown domain '{dom}'{more} that onnxruntime cannot run: "
            "re-export the model with standard ONNX ops (or register that custom-op library)"
        )
    if bad_ops:
        raise ModelError(
            f"{name} uses op(s) {', '.join(sorted(bad_ops))} that do not exist in the ONNX standard "
            f"(opset {opset.get('', opset.get('ai.onnx', '?'))}): re-export the model with standard ONNX ops"
        )


def external_data_info(tensor: TensorProto) -> Optional[dict]:
    """The ``external_data`` entries of a tensor as a dict (``location``, ``offset``, ``length``), or None."""
    if tensor.data_location != TensorProto.EXTERNAL:
        return None
    info = {e.key: e.value for e in tensor.external_data}
    return {
        "location": info.get("location", ""),
        "offset": int(info.get("offset", 0) or 0),
        "length": int(info["length"]) if info.get("length") else None,
    }


def _all_tensors(model: onnx.ModelProto) -> Iterator[TensorProto]:
    for _, graph in iter_graphs(model.graph):
        yield from graph.initializer
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    yield attr.t


def tensor_nbytes(tensor: TensorProto) -> Optional[int]:
    """Bytes of a tensor's data when it has a fixed-size dtype, else None (strings)."""
    if tensor.data_type in (TensorProto.STRING, TensorProto.UNDEFINED):
        return None
    try:
        itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    except Exception:  # noqa: BLE001 - exotic dtypes (float8/int4): skip the size check
        return None
    if tensor.data_type in (TensorProto.INT4, TensorProto.UINT4):
        return None
    return int(np.prod(tensor.dims, dtype=np.int64)) * itemsize


def _check_external_data(model: onnx.ModelProto, base_dir: Path, name: str) -> None:
    sizes: dict[str, int] = {}
    for tensor in _all_tensors(model):
        info = external_data_info(tensor)
        if info is None:
            continue
        loc = info["location"]
        file = (base_dir / loc) if loc else None
        if file is None or loc not in sizes and not file.is_file():
            raise ModelError(
                f"external data file '{loc}' of {name} (tensor '{tensor.name}') is missing from {base_dir}: "
                "copy it next to the .onnx file"
            )
        if loc not in sizes:
            sizes[loc] = file.stat().st_size
        need = info["length"] if info["length"] is not None else tensor_nbytes(tensor)
        if need is not None and info["offset"] + need > sizes[loc]:
            raise ModelError(
                f"external data file '{loc}' of {name} is truncated ({sizes[loc]} bytes, tensor '{tensor.name}' "
                f"needs {info['offset'] + need}): re-copy it next to the .onnx file"
            )


#: IR version models are lowered to when they are newer than onnxruntime loads (raised to what their opsets need).
LOWERED_IR_VERSION = 8


def min_ir_version(model: onnx.ModelProto) -> int:
    """The lowest IR version that supports every opset the model imports
    (``onnx.helper.find_min_ir_version_for``, unknown domains ignored); the model's own IR version when
    onnx cannot tell."""
    try:
        return int(onnx.helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True))
    except Exception:  # noqa: BLE001 - an opset newer than this onnx knows
        return int(model.ir_version)


def set_ir_version(model: onnx.ModelProto, ir_version: int, name: str = "the model") -> int:
    """The one IR-version rule: set ``model.ir_version`` (in place) to ``ir_version``, capped at what
    onnxruntime loads (:data:`ORT_MAX_IR_VERSION`) and raised to what the opsets need
    (:func:`min_ir_version`), so the written file is both loadable and valid. Returns the new version.

    Every op of an opset exists at that opset's minimum IR version, so lowering never changes what the
    graph computes. Raises ``ModelError`` (naming ``name``) when the opsets need a newer IR version than
    onnxruntime loads.
    """
    needed = min_ir_version(model)
    if needed > ORT_MAX_IR_VERSION:
        raise ModelError(
            f"{name} has IR version {model.ir_version} and opsets that need IR {needed}, newer than onnxruntime "
            f"loads (IR <= {ORT_MAX_IR_VERSION}): re-export with an older opset or upgrade onnxruntime"
        )
    model.ir_version = max(needed, min(int(ir_version), ORT_MAX_IR_VERSION))
    return model.ir_version


def is_weight_constant(node: onnx.NodeProto) -> bool:
    """True for a ``Constant`` node holding a tensor (``value`` attribute) with one output: the nodes
    :func:`constants_to_initializers` turns into initializers (so the node table never lists them)."""
    return (node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1
            and any(a.name == "value" and a.type == onnx.AttributeProto.TENSOR for a in node.attribute))


def constants_to_initializers(model: onnx.ModelProto) -> int:
    """Turn every ``Constant`` node holding a tensor (``value`` attribute) into an initializer of the same
    name, in the main graph and in subgraphs, in place. Returns how many were converted.

    PaddlePaddle exports (the PP-OCR models) and some torch exports (silero's ``If`` branches) store their
    weights as Constant nodes. As initializers they are prunable layers with a weight name a recipe can
    list, and one-shot apply rewrites them like any other weight. The graph computes the same values.
    Models with IR < 4 (initializers must also be graph inputs there) are left unchanged.
    """
    if model.ir_version < 4:
        return 0
    converted = 0
    # deepest subgraphs first: rewriting a graph's node list copies its nodes (and their subgraphs)
    for _, graph in reversed(list(iter_graphs(model.graph))):
        keep = []
        for node in graph.node:
            if not is_weight_constant(node):
                keep.append(node)
                continue
            value = next(a.t for a in node.attribute if a.name == "value")
            t = graph.initializer.add()
            t.CopyFrom(value)
            t.name = node.output[0]
            converted += 1
        if len(keep) != len(graph.node):
            replace_nodes(graph, keep)
    return converted


#: in-file initializers with at least this many bytes of ``raw_data`` are left in the file by ``map_weights``
MAPPED_MIN_BYTES = 1024


def _varint(buf, pos: int) -> tuple:
    """Decode a protobuf varint at ``pos``: ``(value, next position)``."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf, start: int, end: int) -> Iterator[tuple]:
    """The fields of the protobuf message encoded in ``buf[start:end]``: ``(field number, wire type, start of
    the field's encoding, start of its value, end)``; a length-delimited value spans ``[value start, end)``."""
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(buf, pos)
            yield number, wire, field_start, pos, pos
        elif wire == 1:
            pos += 8
            yield number, wire, field_start, pos - 8, pos
        elif wire == 2:
            n, pos = _varint(buf, pos)
            yield number, wire, field_start, pos, pos + n
            pos += n
        elif wire == 5:
            pos += 4
            yield number, wire, field_start, pos - 4, pos
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _field_number(message_type, name: str) -> int:
    return message_type.DESCRIPTOR.fields_by_name[name].number


def _load_mapped(p: Path) -> onnx.ModelProto:
    """Parse ``p`` leaving the ``raw_data`` of every in-file initializer of :data:`MAPPED_MIN_BYTES` or more in
    the file: each becomes an external-data reference into the ``.onnx`` file itself (``location`` = its
    name, ``offset``/``length`` = where its bytes are), read later with :func:`tensor_array` (memory-mapped).
    Only the structure is parsed into memory; the protobuf wire format is walked to find the bytes."""
    import mmap

    graph_no = _field_number(onnx.ModelProto, "graph")
    init_no = _field_number(onnx.GraphProto, "initializer")
    raw_no = _field_number(onnx.TensorProto, "raw_data")
    with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        head, graph_range = [], None
        for number, wire, fstart, vstart, vend in _fields(buf, 0, len(buf)):
            if number == graph_no and wire == 2:
                graph_range = (vstart, vend)
            else:
                head.append(buf[fstart:vend])
        model = onnx.ModelProto.FromString(b"".join(head))
        if graph_range is None:
            return model
        rest, tensors = [], []
        for number, wire, fstart, vstart, vend in _fields(buf, *graph_range):
            if number != init_no or wire != 2:
                rest.append(buf[fstart:vend])
                continue
            parts, raw = [], None
            for tn, tw, tfs, tvs, tve in _fields(buf, vstart, vend):
                if tn == raw_no and tw == 2 and tve - tvs >= MAPPED_MIN_BYTES:
                    raw = (tvs, tve - tvs)
                else:
                    parts.append(buf[tfs:tve])
            t = onnx.TensorProto.FromString(b"".join(parts))
            if raw is not None:
                t.data_location = onnx.TensorProto.EXTERNAL
                for key, value in (("location", p.name), ("offset", str(raw[0])), ("length", str(raw[1]))):
                    entry = t.external_data.add()
                    entry.key, entry.value = key, value
            tensors.append(t)
        graph = onnx.GraphProto.FromString(b"".join(rest))
        graph.initializer.extend(tensors)
        model.graph.CopyFrom(graph)
    return model


def load_model(
    path: PathLike, *, load_external_data: bool = True, constants_as_initializers: bool = True,
    map_weights: bool = False,
) -> onnx.ModelProto:
    """Load and validate an ONNX model file.

    Args:
        path: the ``.onnx`` file. External data is looked up relative to its folder.
        load_external_data: read external tensors into the proto. Pass False for models over 2 GB or
            when only the structure is needed; use :func:`tensor_array` to read one tensor at a time.
        constants_as_initializers: convert weight-holding ``Constant`` nodes to initializers (see
            :func:`constants_to_initializers`), so every weight has an initializer name.
        map_weights: parse only the structure: in-file initializers of 1 KiB or more stay in the file as
            external-data references into the ``.onnx`` itself, and external data stays in its files; read
            them with :func:`tensor_array` (memory-mapped). The model in memory is then a few hundred KB
            whatever the weights weigh (channel thinning streams weights from the file this way).

    Returns:
        The ``onnx.ModelProto`` (IR version lowered in memory when it is newer than onnxruntime loads
        and nothing in the model needs it).

    Raises:
        ModelError: one line naming the problem and the fix, for a missing path, a directory, an empty
            file, a text file, a truncated or non-ONNX file, an op from an unknown domain, a missing or
            short external data file, or an IR version onnxruntime cannot load.
    """
    p = Path(path)
    name = p.name or str(p)
    if not p.exists():
        raise ModelError(f"{p} does not exist: check the path of the .onnx file")
    if p.is_dir():
        raise ModelError(f"{p} is a directory, not an ONNX model: give the path of the .onnx file inside it")
    if not p.is_file():
        raise ModelError(f"{p} is not a regular file: give the path of an .onnx file")
    size = p.stat().st_size
    if size == 0:
        raise ModelError(f"{p} is empty (0 bytes): re-export or re-copy the model")
    try:
        with open(p, "rb") as fh:
            head = fh.read(4096)
    except OSError as err:
        raise ModelError(f"{p} cannot be read ({err.strerror}): check its permissions") from None
    if _looks_like_text(head):
        first = head.decode("utf-8", "replace").strip().splitlines()[0][:40] if head.strip() else ""
        raise ModelError(
            f"{p} is a text file (starts with {first!r}), not an ONNX model: give the binary .onnx file exported "
            "from your framework"
        )
    try:
        model = _load_mapped(p) if map_weights else onnx.load(str(p), load_external_data=False)
    except Exception as err:  # noqa: BLE001 - protobuf DecodeError, RuntimeError...
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ModelError(
            f"{p} is truncated or not an ONNX model ({size} bytes; protobuf parse failed: {reason}): "
            "re-export or re-copy the file"
        ) from None
    if not model.HasField("graph") or not model.opset_import or (not model.graph.node and not model.graph.output):
        raise ModelError(
            f"{p} is truncated or not an ONNX model ({size} bytes; no graph/opset after parsing): "
            "re-export or re-copy the file"
        )
    if constants_as_initializers:
        constants_to_initializers(model)
    _check_domains(model, name)
    _check_external_data(model, p.parent, name)
    if model.ir_version > ORT_MAX_IR_VERSION:
        set_ir_version(model, LOWERED_IR_VERSION, name)
    if load_external_data and not map_weights:
        try:
            onnx.load_external_data_for_model(model, str(p.parent))
        except Exception as err:  # noqa: BLE001
            raise ModelError(f"external data of {name} cannot be read ({err}): re-copy it next to the .onnx file") from None
    return model


def tensor_array(tensor: TensorProto, base_dir: Optional[PathLike] = None) -> np.ndarray:
    """The values of one tensor as a numpy array, without copying when possible.

    External data is memory-mapped (``np.memmap`` at the tensor's offset), so reading a tensor of a
    10 GB model costs only the pages touched; drop the array to release them. Raw data is viewed with
    ``np.frombuffer``. Typed fields (``float_data`` ...) go through ``onnx.numpy_helper``.

    Raises:
        ModelError: the external file is missing or too short.
    """
    info = external_data_info(tensor)
    if info is not None:
        if base_dir is None:
            raise ModelError(f"tensor '{tensor.name}' has external data but the model folder is unknown: load it by path")
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
        shape = tuple(int(d) for d in tensor.dims)
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0:
            return np.zeros(shape, dtype)
        file = Path(base_dir) / info["location"]
        try:
            return np.memmap(file, dtype=dtype, mode="r", offset=info["offset"], shape=shape)
        except (OSError, ValueError) as err:
            raise ModelError(f"external data '{info['location']}' for tensor '{tensor.name}' cannot be read ({err}): "
                             "re-copy it next to the .onnx file") from None
    if tensor.HasField("raw_data") and tensor.data_type in _RAW_VIEW_TYPES:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).newbyteorder("<")
        return np.frombuffer(tensor.raw_data, dtype=dtype).reshape(tuple(tensor.dims))
    return onnx.numpy_helper.to_array(tensor)


def count_zeros(tensor: TensorProto, base_dir: Optional[PathLike] = None, chunk_bytes: int = 1 << 25) -> int:
    """Number of elements exactly equal to zero in one tensor (``-0.0`` counts as zero).

    External data is streamed from its file in ``chunk_bytes`` pieces through one reusable buffer, so a
    multi-GB tensor costs ~32 MB of memory; raw data is viewed in place.

    Raises:
        ModelError: the external file is missing or too short.
    """
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
    info = external_data_info(tensor)
    count = int(np.prod([int(d) for d in tensor.dims], dtype=np.int64)) if len(tensor.dims) else 1
    if info is None or base_dir is None:
        arr = tensor_array(tensor, base_dir)
        return int(arr.size - _nonzero(arr.reshape(-1)))
    file = Path(base_dir) / info["location"]
    itemsize = dtype.itemsize
    per_chunk = max(1, chunk_bytes // itemsize)
    buf = np.empty(per_chunk, dtype=dtype)
    nonzero = 0
    try:
        with open(file, "rb") as fh:
            fh.seek(info["offset"])
            left = count
            while left:
                n = min(left, per_chunk)
                view = buf[:n]
                got = fh.readinto(memoryview(view).cast("B"))
                if got != n * itemsize:
                    raise ModelError(f"external data '{info['location']}' ends inside tensor '{tensor.name}': "
                                     "re-copy it next to the .onnx file")
                nonzero += _nonzero(view)
                left -= n
    except OSError as err:
        raise ModelError(f"external data '{info['location']}' for tensor '{tensor.name}' cannot be read "
                         f"({err.strerror}): re-copy it next to the .onnx file") from None
    return int(count - nonzero)


def _nonzero(flat: np.ndarray) -> int:
    if flat.dtype == np.float16 or (flat.dtype.kind == "V" and flat.dtype.itemsize == 2):  # float16 / bfloat16
        return int(np.count_nonzero(flat.view(np.uint16) & 0x7FFF))
    return int(np.count_nonzero(flat))


_RAW_VIEW_TYPES = {
    TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT8, TensorProto.UINT8,
    TensorProto.INT16, TensorProto.UINT16, TensorProto.INT32, TensorProto.UINT32, TensorProto.INT64,
    TensorProto.UINT64, TensorProto.BOOL,
}


def model_base_dir(path_or_model) -> Optional[Path]:
    """The folder external data is read from for a path (its parent), or None for an in-memory model."""
    if isinstance(path_or_model, (str, os.PathLike)):
        return Path(path_or_model).parent
    return None
