"""Load ONNX models safely: one-line :class:`~sparsify_tui.errors.ModelError` for every bad input.

``load_model`` never raises a traceback for a user mistake. It checks, in order:

1. the path exists, is a regular file, and is not empty;
2. the file is not text (an ONNX model is a binary protobuf whose first byte is ``0x08``);
3. the protobuf parses (a truncated copy fails here) and has a graph and an opset;
4. every op domain is one onnxruntime can run (``""``, ``ai.onnx``, ``ai.onnx.ml``, ``com.microsoft`` ...),
   and every op of the default domains exists in onnx's schema registry;
5. every external-data location is safe (:func:`resolve_external_location`: relative, no ``..``, not a
   symbolic or hard link, a regular file resolving inside the model's folder), checked *before* any data
   file is opened, and long enough for its tensor;
6. every tensor holds as much data as its dims need (:func:`check_tensor_data`), so a short or missing
   initializer is one line here instead of a numpy reshape error later;
7. the IR version is one onnxruntime loads (lowered in memory when the model uses nothing newer).

External data is read only through :func:`open_external_data` (``O_NOFOLLOW``, and the opened file must
be the one that was checked), by :func:`tensor_array`, :func:`count_zeros` and the project copy, so no
path of the app reads a file outside the model's folder. The rules are those of onnx's loader
(``onnx/checker.cc`` ``resolve_external_data_location``) and onnxruntime's (``External data path escapes
model directory``), so a model accepted here also loads in both.

Models over 2 GB are stored with external data (protobuf cannot hold more than 2 GB), so the ``.onnx``
file itself is always small enough to parse. With ``load_external_data=False`` the weights stay on
disk; :func:`tensor_array` reads one tensor at a time (memory-mapped) for the analysis.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator, Optional, Union

import numpy as np
import onnx
from onnx import TensorProto

from sparsify_tui.analysis.graph import iter_graphs, outer_scope_reads, replace_nodes, subgraphs
from sparsify_tui.errors import ModelError
from sparsify_tui.formatting import plural

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
        more = f" (and {plural(len(unknown) - 1, 'more domain')})" if len(unknown) > 1 else ""
        raise ModelError(
            f"{name} uses op {', '.join(sorted(ops))} from unknown domain '{dom}'{more} that onnxruntime cannot run: "
            "re-export the model with standard ONNX ops (or register that custom-op library)"
        )
    if bad_ops:
        raise ModelError(
            f"{name} uses op(s) {', '.join(sorted(bad_ops))} that do not exist in the ONNX standard "
            f"(opset {opset.get('', opset.get('ai.onnx', '?'))}): re-export the model with standard ONNX ops"
        )


def _check_opsets(model: onnx.ModelProto, name: str) -> None:
    """Refuse an opset of the standard domain newer than this onnx knows (onnxruntime would refuse it too)."""
    newest = onnx.defs.onnx_opset_version()
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and int(o.version) > newest:
            raise ModelError(f"{name} imports opset {o.version}, newer than this onnx/onnxruntime knows (up to "
                             f"{newest}): re-export the model with opset {newest} or lower")


def _check_wiring(model: onnx.ModelProto, name: str) -> None:
    """Refuse a graph onnxruntime cannot load: a name that is not valid UTF-8, two nodes of one graph with the
    same name, a tensor a graph defines twice, a node input that nothing provides (no graph input, initializer,
    node output or outer-scope value), or a cycle. Nodes need not be sorted (onnxruntime sorts them), only acyclic.

    Scopes (what onnxruntime 1.2x loads, checked by building such models: tests/test_reliability_hostile_round3.py):
    a subgraph (If/Loop/Scan body) may read every name of its enclosing graphs. It may define again (shadow) a name
    of an enclosing graph, except one that graph has defined before the node runs: its inputs, initializers and the
    outputs of the nodes the node depends on (onnxruntime: "Graph must be in single static assignment (SSA) form").
    So an If whose branches name their outputs like the If's own outputs, at any nesting depth, is valid; so is a
    branch reusing the name of a node that runs after the If. (A node that neither feeds nor follows the If is
    accepted: onnxruntime's answer depends on its own node order.)"""

    def text(value, what: str) -> str:
        if not isinstance(value, str):
            raise ModelError(f"{name} has a {what} that is not valid UTF-8 ({bytes(value)[:40]!r}): the file is "
                             "damaged or was written by a broken exporter; re-export the model")
        return value

    def ancestors(graph: onnx.GraphProto, i: int, producer: dict) -> set:
        """Indices of the nodes of ``graph`` that node ``i`` depends on (its inputs and its subgraphs' outer reads)."""
        seen: set = set()
        todo = [i]
        while todo:
            node = graph.node[todo.pop()]
            for x in (*node.input, *outer_scope_reads(node)):
                j = producer.get(x)
                if j is not None and j not in seen:
                    seen.add(j)
                    todo.append(j)
        return seen

    def walk(graph: onnx.GraphProto, visible: frozenset, taken: frozenset) -> None:
        # visible: names of the enclosing graphs a node may read; taken: the ones it may not define again
        own = {text(vi.name, "graph input name") for vi in graph.input}
        own.update(text(t.name, "tensor name") for t in graph.initializer)
        own.update(text(t.values.name, "tensor name") for t in graph.sparse_initializer)
        producer: dict = {}
        names: dict = {}
        for i, node in enumerate(graph.node):
            text(node.op_type, "node type")
            text(node.domain, "node domain")
            if text(node.name, "node name"):
                if node.name in names:  # onnxruntime: "two nodes with same node name"
                    raise ModelError(f"{name} has two nodes named '{node.name}' (nodes {names[node.name]} and {i}, "
                                     f"{graph.node[names[node.name]].op_type} and {node.op_type}): onnxruntime "
                                     "refuses duplicate node names; re-export the model, or rename one (onnx.load, "
                                     "node.name = ..., onnx.save)")
                names[node.name] = i
            for o in node.output:
                if text(o, "tensor name"):
                    if o in producer or o in own or o in taken:  # onnxruntime: "Duplicate definition-site"
                        raise ModelError(f"{name} defines tensor '{o}' twice (node '{node.name or node.op_type}' "
                                         "and an earlier node, input or initializer): onnxruntime refuses it; "
                                         "re-export the model")
                    producer[o] = i
        defined = visible | own | set(producer)
        for node in graph.node:
            for inp in node.input:
                if text(inp, "tensor name") and inp not in defined:
                    raise ModelError(f"node '{node.name or node.op_type}' of {name} reads '{inp}', which no graph "
                                     "input, initializer or node provides: the model is incomplete; re-export it")
        # Kahn's algorithm on the node -> node edges of this graph: anything left over is on a cycle
        users: dict = {}
        needs = []
        for i, node in enumerate(graph.node):
            deps = {producer[x] for x in node.input if x in producer}  # a name defined here shadows an outer one
            needs.append(len(deps))
            for d in deps:
                users.setdefault(d, []).append(i)
        ready = [i for i, n in enumerate(needs) if n == 0]
        seen = 0
        while ready:
            i = ready.pop()
            seen += 1
            for u in users.get(i, []):
                needs[u] -= 1
                if needs[u] == 0:
                    ready.append(u)
        if seen != len(graph.node):
            stuck = next(graph.node[i] for i, n in enumerate(needs) if n > 0)
            raise ModelError(f"{name} has a cycle in its graph (through node '{stuck.name or stuck.op_type}'): "
                             "onnxruntime refuses cyclic graphs; re-export the model")
        for i, node in enumerate(graph.node):
            subs = subgraphs(node)
            if subs:
                before = {o for j in ancestors(graph, i, producer) for o in graph.node[j].output if o}
                for _label, sub in subs:
                    walk(sub, frozenset(defined), taken | own | before)

    walk(model.graph, frozenset(), frozenset())


def external_data_info(tensor: TensorProto, model_name: str = "the model") -> Optional[dict]:
    """The ``external_data`` entries of a tensor as a dict (``location``, ``offset``, ``length``), or None.

    Raises:
        ModelError: ``offset`` or ``length`` is not a whole number >= 0 (onnx's loader refuses those too).
    """
    if tensor.data_location != TensorProto.EXTERNAL:
        return None
    info = {e.key: e.value for e in tensor.external_data}
    out: dict = {"location": info.get("location", "")}
    for key in ("offset", "length"):
        raw = info.get(key)
        if raw in (None, ""):
            out[key] = 0 if key == "offset" else None
            continue
        try:
            value = int(raw)
        except (TypeError, ValueError):
            value = -1
        if value < 0:
            raise ModelError(
                f"tensor '{tensor.name}' of {model_name} has external data {key} {str(raw)[:40]!r}, not a whole "
                "number >= 0: re-export the model (onnx.save with save_as_external_data=True)"
            )
        out[key] = value
    return out


def resolve_external_location(base_dir: PathLike, location: str, tensor_name: str,
                              model_name: str = "the model") -> tuple[Path, os.stat_result]:
    """The checked path of an external-data ``location`` of tensor ``tensor_name``, and its ``lstat``.

    Refused, *before anything is opened* (only ``lstat``/``realpath`` look at the disk), like onnx's loader
    (``resolve_external_data_location``) and onnxruntime: an empty location; an absolute one; one containing
    ``..`` (as a path part, or anywhere once normalized: onnx's rule); a symbolic link; a location that
    resolves (``realpath``) outside ``base_dir`` (a symlinked folder on the way); a missing file; anything
    but a regular file; a file with several hard links (onnx's hardlink rule).

    Raises:
        ModelError: one line naming the tensor, the location and the fix.
    """
    where = f"external data '{location}' of tensor '{tensor_name}' in {model_name}"
    fix_inside = ("keep the data files inside the model's folder and re-save the model with a relative location "
                  "(onnx and onnxruntime refuse it too)")
    if not location or "\x00" in location:
        raise ModelError(f"tensor '{tensor_name}' of {model_name} has external data with an empty or invalid location: "
                         "re-export the model (onnx.save with save_as_external_data=True)")
    if os.path.isabs(location) or location.startswith("~"):
        raise ModelError(f"{where} is an absolute path, outside the model's folder: {fix_inside}")
    parts = location.replace("\\", "/").split("/")
    if ".." in parts or ".." in os.path.normpath(location):
        raise ModelError(f"{where} contains '..', which may point outside the model's folder: re-save the model with "
                         "its data files inside its folder and locations without '..' (e.g. location='model.onnx.data')")
    base = Path(os.path.abspath(base_dir))
    path = base / location
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise ModelError(f"external data file '{location}' of {model_name} (tensor '{tensor_name}') is missing from "
                         f"{base}: copy it next to the .onnx file") from None
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise ModelError(f"{where} cannot be checked ({reason}): {fix_inside}") from None
    if stat.S_ISLNK(st.st_mode):
        raise ModelError(f"{where} is a symbolic link: replace the link with a copy of the file in the model's folder "
                         "(onnx refuses linked data files)")
    real_base = os.path.realpath(base)
    real = os.path.realpath(path)
    if os.path.commonpath([real_base, real]) != real_base or real == real_base:
        raise ModelError(f"{where} resolves outside the model's folder (through a symbolic link): {fix_inside}")
    if not stat.S_ISREG(st.st_mode):
        raise ModelError(f"{where} is not a regular file: copy the data file next to the .onnx file")
    if st.st_nlink > 1:
        raise ModelError(f"{where} has {st.st_nlink} hard links: replace it with a plain copy (cp, not ln), "
                         "onnx refuses hard-linked data files")
    return Path(real), st


def open_external_data(base_dir: PathLike, location: str, tensor_name: str, model_name: str = "the model") -> int:
    """A read-only file descriptor of a checked external-data file (:func:`resolve_external_location`).

    Opened with ``O_NOFOLLOW``; the opened file must be the regular, singly-linked file that was checked
    (same device and inode), so a link swapped in between is refused rather than read. The caller closes it.

    Raises:
        ModelError: the location is refused, or the file changed between the check and the open.
    """
    real, st = resolve_external_location(base_dir, location, tensor_name, model_name)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except OSError as err:
        raise ModelError(f"external data '{location}' of tensor '{tensor_name}' in {model_name} cannot be opened "
                         f"({err.strerror}): check it is a readable file in the model's folder") from None
    got = os.fstat(fd)
    if (got.st_dev, got.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(got.st_mode) or got.st_nlink > 1:
        os.close(fd)
        raise ModelError(f"external data '{location}' of tensor '{tensor_name}' in {model_name} changed while it "
                         "was being opened: make sure nothing rewrites the model's folder, then retry")
    return fd


def check_external_locations(model: onnx.ModelProto, base_dir: PathLike, name: str = "the model") -> None:
    """Check every external-data location of ``model`` (main graph, subgraphs, tensor attributes) with
    :func:`resolve_external_location`, opening nothing. Raises ``ModelError`` for the first bad one."""
    seen: set = set()
    for tensor in all_tensors(model):
        info = external_data_info(tensor, name)
        if info is None or info["location"] in seen:
            continue
        resolve_external_location(base_dir, info["location"], tensor.name, name)
        seen.add(info["location"])


def all_tensors(model: onnx.ModelProto) -> Iterator[TensorProto]:
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
    return tensor_numel(tensor) * itemsize


def tensor_numel(tensor: TensorProto) -> int:
    """Elements of a tensor from its dims (a Python int: no overflow for absurd dims; 1 for a scalar)."""
    n = 1
    for d in tensor.dims:
        n *= int(d)
    return n


#: Typed data fields that hold two numbers per element (real and imaginary parts).
_COMPLEX_TYPES = {TensorProto.COMPLEX64, TensorProto.COMPLEX128}


def check_tensor_data(tensor: TensorProto, name: str = "the model") -> None:
    """Refuse a tensor whose stored data does not match its dims: negative dims, ``raw_data`` shorter or longer
    than dims x item size, a typed field (``float_data`` ...) with the wrong count, or no data at all for a
    non-empty tensor. External-data tensors are checked against their file by the loader instead.

    Raises:
        ModelError: one line naming the tensor, what its dims need, what it holds, and the fix.
    """
    if tensor.data_location == TensorProto.EXTERNAL:
        return
    dims = [int(d) for d in tensor.dims]
    fix = "re-export the model (the file is damaged or was written by a broken exporter)"
    if any(d < 0 for d in dims):
        raise ModelError(f"tensor '{tensor.name}' of {name} has negative dims {dims}: {fix}")
    numel = tensor_numel(tensor)
    try:
        onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
        known = tensor.data_type != TensorProto.UNDEFINED
    except Exception:  # noqa: BLE001 - KeyError/ValueError for a number onnx does not know
        known = False
    if not known:
        raise ModelError(f"tensor '{tensor.name}' of {name} has no valid data type ({tensor.data_type}): {fix}")
    if tensor.data_type == TensorProto.STRING:
        return
    if tensor.HasField("raw_data"):
        need = tensor_nbytes(tensor)
        have = len(tensor.raw_data)
        if need is not None and have != need:
            raise ModelError(f"tensor '{tensor.name}' of {name} holds {have} bytes of data but its dims {dims} need "
                             f"{need}: {fix}")
        return
    try:
        field = onnx.helper.tensor_dtype_to_field(tensor.data_type)
    except Exception:  # noqa: BLE001 - exotic dtype: onnx's own converter reports it
        return
    have = len(getattr(tensor, field))
    if tensor.data_type in _COMPLEX_TYPES:
        need = 2 * numel
    elif tensor.data_type in (TensorProto.INT4, TensorProto.UINT4) or "FLOAT4" in TensorProto.DataType.Name(
            tensor.data_type):
        need = (numel + 1) // 2
    else:
        need = numel
    if have != need:
        what = f"{have} values" if have else "no data"
        raise ModelError(f"tensor '{tensor.name}' of {name} holds {what} but its dims {dims} need {need} values: {fix}")


def _check_tensor_sizes(model: onnx.ModelProto, name: str) -> None:
    for tensor in all_tensors(model):
        check_tensor_data(tensor, name)


def _check_external_data(model: onnx.ModelProto, base_dir: Path, name: str) -> None:
    """Every external location is safe (:func:`check_external_locations`, nothing opened), then every tensor
    fits in its file: ``offset + length`` within the file and ``length`` equal to what the dims need."""
    check_external_locations(model, base_dir, name)
    sizes: dict[str, int] = {}
    for tensor in all_tensors(model):
        info = external_data_info(tensor, name)
        if info is None:
            continue
        loc = info["location"]
        if loc not in sizes:
            sizes[loc] = (Path(base_dir) / loc).stat().st_size
        need_dims = tensor_nbytes(tensor)
        if info["length"] is not None and need_dims is not None and info["length"] != need_dims:
            raise ModelError(
                f"tensor '{tensor.name}' of {name} declares {info['length']} bytes of external data in '{loc}' but "
                f"its dims {[int(d) for d in tensor.dims]} need {need_dims}: re-export the model"
            )
        need = info["length"] if info["length"] is not None else need_dims
        if need is not None and info["offset"] + need > sizes[loc]:
            raise ModelError(
                f"external data file '{loc}' of {name} is truncated ({sizes[loc]} bytes, tensor '{tensor.name}' "
                f"needs {info['offset'] + need}): re-copy it next to the .onnx file"
            )


#: IR version models are lowered to when they are newer than onnxruntime loads (raised to what their opsets need).
LOWERED_IR_VERSION = 8
#: IR version written models are lowered to when their opsets allow (onnxruntime 1.31 loads up to 13;
#: older runtimes and tools load 10).
WRITE_IR_VERSION = 10


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


def lower_ir_version(model: onnx.ModelProto, at_least: int = 0) -> int:
    """The IR version of a model about to be written: lowered to :data:`WRITE_IR_VERSION` when it is newer,
    raised to ``at_least`` (and to what its opsets need) when it is older (:func:`set_ir_version`, in place).
    Returns the new version."""
    return set_ir_version(model, max(int(at_least), min(int(model.ir_version), WRITE_IR_VERSION)))


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


def _field_number(message_type, name: str) -> int:
    return message_type.DESCRIPTOR.fields_by_name[name].number


def _load_mapped(p: Path) -> onnx.ModelProto:
    """Parse ``p`` leaving the ``raw_data`` of every in-file initializer of :data:`MAPPED_MIN_BYTES` or more in
    the file: each becomes an external-data reference into the ``.onnx`` file itself (``location`` = its
    name, ``offset``/``length`` = where its bytes are), read later with :func:`tensor_array` (memory-mapped).
    Only the structure is parsed into memory; the protobuf wire format is walked to find the bytes."""
    import mmap

    from sparsify_tui.analysis.protobuf import wire_fields

    graph_no = _field_number(onnx.ModelProto, "graph")
    init_no = _field_number(onnx.GraphProto, "initializer")
    raw_no = _field_number(onnx.TensorProto, "raw_data")
    with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        head, graph_range = [], None
        for number, wire, fstart, vstart, vend, _ in wire_fields(buf, 0, len(buf)):
            if number == graph_no and wire == 2:
                graph_range = (vstart, vend)
            else:
                head.append(buf[fstart:vend])
        model = onnx.ModelProto.FromString(b"".join(head))
        if graph_range is None:
            return model
        rest, tensors = [], []
        for number, wire, fstart, vstart, vend, _ in wire_fields(buf, *graph_range):
            if number != init_no or wire != 2:
                rest.append(buf[fstart:vend])
                continue
            parts, raw = [], None
            for tn, tw, tfs, tvs, tve, _ in wire_fields(buf, vstart, vend):
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
            short external data file, an IR version onnxruntime cannot load, no graph output, or wiring onnxruntime refuses
            (:func:`_check_wiring`).
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
    if not model.graph.output:  # onnxruntime: "At least one output should be requested" on every run
        raise ModelError(f"{name} has no graph output, so onnxruntime has nothing to compute: re-export the model "
                         "with its outputs (the exported function must return its result tensors)")
    if constants_as_initializers:
        constants_to_initializers(model)
    _check_opsets(model, name)
    _check_wiring(model, name)
    _check_domains(model, name)
    _check_external_data(model, p.parent, name)
    _check_tensor_sizes(model, name)
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

    External data is memory-mapped (``np.memmap`` at the tensor's offset) through the checked descriptor
    of :func:`open_external_data`, so reading a tensor of a 10 GB model costs only the pages touched; drop
    the array to release them. Raw data is viewed with ``np.frombuffer``. Typed fields (``float_data`` ...)
    go through ``onnx.numpy_helper``.

    Raises:
        ModelError: the external location is refused (outside the model's folder, a link...), the file is
            missing or too short, or the tensor's data does not match its dims.
    """
    info = external_data_info(tensor)
    if info is not None:
        if base_dir is None:
            raise ModelError(f"tensor '{tensor.name}' has external data but the model folder is unknown: load it by path")
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
        shape = tuple(int(d) for d in tensor.dims)
        count = tensor_numel(tensor)
        fd = open_external_data(base_dir, info["location"], tensor.name)
        with os.fdopen(fd, "rb") as fh:
            if count == 0:
                return np.zeros(shape, dtype)
            need = info["offset"] + count * dtype.itemsize
            size = os.fstat(fh.fileno()).st_size
            if need > size:
                raise ModelError(f"external data '{info['location']}' ends inside tensor '{tensor.name}' ({size} bytes, "
                                 f"needs {need}): re-copy it next to the .onnx file")
            try:
                return np.memmap(fh, dtype=dtype, mode="r", offset=info["offset"], shape=shape)
            except (OSError, ValueError) as err:
                raise ModelError(f"external data '{info['location']}' for tensor '{tensor.name}' cannot be read "
                                 f"({err}): re-copy it next to the .onnx file") from None
    check_tensor_data(tensor)
    if tensor.HasField("raw_data") and tensor.data_type in _RAW_VIEW_TYPES:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).newbyteorder("<")
        return np.frombuffer(tensor.raw_data, dtype=dtype).reshape(tuple(tensor.dims))
    return onnx.numpy_helper.to_array(tensor)


def count_zeros(tensor: TensorProto, base_dir: Optional[PathLike] = None, chunk_bytes: int = 1 << 25) -> int:
    """Number of elements exactly equal to zero in one tensor (``-0.0`` counts as zero).

    External data is streamed from its checked file (:func:`open_external_data`) in ``chunk_bytes`` pieces
    through one reusable buffer, so a multi-GB tensor costs ~32 MB of memory; raw data is viewed in place.

    Raises:
        ModelError: the external location is refused, or the file is missing or too short.
    """
    return weight_stats(tensor, base_dir, chunk_bytes)[0]


def weight_stats(tensor: TensorProto, base_dir: Optional[PathLike] = None,
                 chunk_bytes: int = 1 << 25) -> tuple[int, int]:
    """``(exact zeros, non-finite values)`` of one tensor in one pass (NaN/Inf only counted for float types;
    a model with NaN or Inf weights is probably a broken export). Streams external data like
    :func:`count_zeros`. Raises ``ModelError`` as :func:`count_zeros`."""
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
    info = external_data_info(tensor)
    count = tensor_numel(tensor)
    if info is None or base_dir is None:
        arr = tensor_array(tensor, base_dir)
        flat = arr.reshape(-1)
        return int(arr.size - _nonzero(flat)), _nonfinite(flat)
    itemsize = dtype.itemsize
    per_chunk = max(1, chunk_bytes // itemsize)
    buf = np.empty(min(per_chunk, max(1, count)), dtype=dtype)
    nonzero = nonfinite = 0
    fd = open_external_data(base_dir, info["location"], tensor.name)
    try:
        with os.fdopen(fd, "rb") as fh:
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
                nonfinite += _nonfinite(view)
                left -= n
    except OSError as err:
        raise ModelError(f"external data '{info['location']}' for tensor '{tensor.name}' cannot be read "
                         f"({err.strerror}): re-copy it next to the .onnx file") from None
    return int(count - nonzero), int(nonfinite)


def _nonfinite(flat: np.ndarray) -> int:
    """NaN and Inf values of a flat float array (0 for other dtypes)."""
    if flat.dtype.kind != "f" or not flat.size:
        return 0
    return int(flat.size - np.count_nonzero(np.isfinite(flat)))


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


#: Float element types whose values are checked for NaN/Inf.
_FLOAT_TENSOR_TYPES = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16}


def nonfinite_weights(model: onnx.ModelProto, base_dir: Optional[PathLike] = None) -> dict:
    """``{tensor name: NaN/Inf count}`` over the float initializers and Constant tensors of ``model`` (subgraphs
    included) that hold any. External data is streamed from ``base_dir`` (skipped when None); tensors whose
    data was stripped are skipped. Raises ``ModelError`` like :func:`weight_stats`."""
    out: dict = {}
    for t in all_tensors(model):
        if t.data_type not in _FLOAT_TENSOR_TYPES:
            continue
        external = t.data_location == TensorProto.EXTERNAL
        if external and base_dir is None:
            continue
        if not external and not t.HasField("raw_data") and not len(t.float_data) and not len(t.double_data) \
                and not len(t.int32_data):
            continue
        try:
            bad = weight_stats(t, base_dir)[1]
        except ModelError:
            if external:
                raise
            continue  # stripped or damaged in-memory tensor: load_model reports damage in one line
        if bad:
            out[t.name] = out.get(t.name, 0) + bad
    return out


def weight_warnings(counts: dict, model_name: str = "the model") -> list:
    """One warning line for NaN/Inf weights (``counts`` from :func:`nonfinite_weights`), or ``[]``."""
    if not counts:
        return []
    worst = sorted(counts.items(), key=lambda kv: -kv[1])
    shown = ", ".join(f"'{k}': {v:,}" for k, v in worst[:3]) + (" ..." if len(worst) > 3 else "")
    return [f"{len(counts)} weight tensor(s) of {model_name} hold {sum(counts.values()):,} NaN/Inf values ({shown}): "
            "the model is probably a broken export, so its numbers may be meaningless; check the export"]
