"""Symbolic input dimensions and shape inference.

A model input dim is *symbolic* when it has a ``dim_param`` (``"batch"``, ``"?"``,
``"p2o.DynamicDimension.1"``), a ``dim_value <= 0`` (``-1`` in PaddleOCR exports, ``0`` in some
exporters), or neither. Rules used by :func:`resolve_dims`:

* axis 0 of an input, when symbolic, is the batch and gets ``batch_size`` (so does every other dim
  with the same ``dim_param`` name, e.g. ``state: [2, batch, 128]``). When axis 0 is fixed, the first
  symbolic axis is the batch if it is anonymous (recurrent state ``[layers, ?, hidden]``, as in silero_vad).
  The batch size always wins: a ``dims`` entry naming a batch dim never pins it (it is ignored here, and
  refused where the user types it, :func:`check_user_dims`). A model whose inputs fix their batch (no
  batch dim at all) runs only that batch: another ``batch_size`` is refused (:func:`fixed_batch`);
* any other symbolic dim is looked up in ``dims`` by its ``"input:axis"`` key first, then by its
  ``dim_param`` name (``"?"`` and empty names are anonymous: only the ``"input:axis"`` key works);
* a dim with no value raises :class:`DimensionError` naming every missing dim, with ``--dim`` suggestions.
  Nothing is ever silently set to 1.

Shapes of every tensor then come from ``onnx.shape_inference.infer_shapes(data_prop=True)`` on a
weight-free copy of the model with the input dims fixed, then constant folding, and finally an extra
inference pass supplied by the caller when onnx leaves tensors unknown (an engine's, for example
onnxruntime's ``SymbolicShapeInference`` through ``sparsify_tui.engine``: subgraphs, contrib ops).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

import onnx
from onnx import TensorProto

from sparsify_tui.analysis.graph import has_subgraphs, iter_graphs, node_id, replace_nodes
from sparsify_tui.errors import DimensionError, ModelError

_ANONYMOUS = {"", "?", "-1", "None", "none", "unk"}


@dataclass(frozen=True)
class SymbolicDim:
    """One input dim without a fixed value.

    ``input_name`` and ``axis`` locate it; ``name`` is its ``dim_param`` ("" when it has none).
    """

    input_name: str
    axis: int
    name: str
    batch: bool = field(default=False, compare=False)

    @property
    def key(self) -> str:
        """The ``"input:axis"`` address accepted by ``--dim`` (always unambiguous)."""
        return f"{self.input_name}:{self.axis}"

    @property
    def is_batch(self) -> bool:
        """True when the dim is resolved from the batch size: axis 0, a dim sharing axis 0's name, or the
        anonymous first symbolic axis of an input whose axis 0 is fixed (recurrent state)."""
        return self.axis == 0 or self.batch

    @property
    def named(self) -> bool:
        """True when the dim has a usable ``dim_param`` name (not ``?``/empty)."""
        return self.name not in _ANONYMOUS


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The real inputs of the main graph (IR < 4 models also list initializers as inputs: those are dropped)."""
    inits = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def _dim_value(dim) -> Optional[int]:
    if dim.HasField("dim_value") and dim.dim_value > 0:
        return int(dim.dim_value)
    return None


def _dim_name(dim) -> str:
    return dim.dim_param if dim.HasField("dim_param") else ""


def _check_has_shape(vi: onnx.ValueInfoProto) -> None:
    t = vi.type
    if not vi.HasField("type") or t.WhichOneof("value") is None:
        raise ModelError(
            f"model input '{vi.name}' has no type (neither element type nor shape), so it cannot be fed: "
            "re-export the model with typed inputs (e.g. torch.onnx.export with example inputs)"
        )
    if t.HasField("tensor_type") and t.tensor_type.elem_type == TensorProto.UNDEFINED:
        raise ModelError(
            f"model input '{vi.name}' has no element type, so it cannot be fed: re-export the model with typed inputs"
        )
    if t.HasField("tensor_type"):
        if not t.tensor_type.HasField("shape"):
            raise ModelError(
                f"model input '{vi.name}' has no shape (not even its rank), so its size cannot be resolved: "
                "re-export the model with input shapes (e.g. torch.onnx.export with input_names/dynamic_axes)"
            )
        for axis, dim in enumerate(t.tensor_type.shape.dim):
            # -1 is the exporters' usual mark of a free size (onnxruntime reads it so): symbolic, like a dim_param
            if dim.HasField("dim_value") and dim.dim_value == 0:
                raise ModelError(
                    f"model input '{vi.name}' has size 0 on axis {axis}: every batch of it is an empty tensor, so "
                    "there is nothing to run or measure: re-export the model with the real size there (or a name, "
                    "e.g. 'batch', for a free size)")
            if dim.HasField("dim_value") and dim.dim_value < -1:
                raise ModelError(
                    f"model input '{vi.name}' has size {dim.dim_value} on axis {axis}, which is not a size (ONNX "
                    "sizes are 0 or more; -1 or a name mark a free size): re-export the model with the real size "
                    "there, or a name such as 'batch'")
    elif t.HasField("sequence_type") or t.HasField("map_type") or t.HasField("optional_type"):
        raise ModelError(
            f"model input '{vi.name}' is a sequence/map/optional, which sparsify-tui cannot feed: "
            "re-export the model with tensor inputs"
        )


def symbolic_dims(model: onnx.ModelProto) -> list[SymbolicDim]:
    """Every input dim without a fixed value (``dim_param``, ``dim_value <= 0`` or missing), in input order.

    Raises:
        ModelError: an input has no shape at all (its rank is unknown), or is not a tensor.
    """
    out = []
    for vi in graph_inputs(model):
        _check_has_shape(vi)
        for axis, dim in enumerate(vi.type.tensor_type.shape.dim):
            if _dim_value(dim) is None:
                out.append(SymbolicDim(vi.name, axis, _dim_name(dim)))
    batch_names = {sd.name for sd in out if sd.axis == 0 and sd.named}
    first: dict[str, SymbolicDim] = {}
    for sd in out:
        first.setdefault(sd.input_name, sd)
    state_batch = {sd.key for sd in first.values() if sd.axis > 0 and not sd.named}
    return [SymbolicDim(sd.input_name, sd.axis, sd.name,
                        sd.axis == 0 or (sd.named and sd.name in batch_names) or sd.key in state_batch) for sd in out]


def user_dims(model: onnx.ModelProto) -> list[SymbolicDim]:
    """The symbolic dims the user must give (not resolved from the batch size), one per name: what a setup
    dialog asks for. Named dims appear once (address them by ``name``), anonymous ones by ``key``."""
    seen, out = set(), []
    for sd in symbolic_dims(model):
        if sd.is_batch:
            continue
        addr = sd.name if sd.named else sd.key
        if addr not in seen:
            seen.add(addr)
            out.append(sd)
    return out


def scalar_inputs(model: onnx.ModelProto) -> list[str]:
    """Names of rank-0 model inputs (like silero's ``sr``): their value must come from the user
    (``--dim sr=16000``) or sample data."""
    out = []
    for vi in graph_inputs(model):
        tt = vi.type.tensor_type
        if tt.HasField("shape") and len(tt.shape.dim) == 0:
            out.append(vi.name)
    return out


def parse_dim_args(args: Optional[Iterable[str]]) -> dict[str, int]:
    """Parse ``--dim`` values: ``["x:2=48", "seq=128", "sr=16000"]`` -> ``{"x:2": 48, "seq": 128, "sr": 16000}``
    (:func:`sparsify_tui.settings.dims`; names are checked against the model by :func:`resolve_dims`).

    Raises:
        DimensionError: an item is not ``NAME=INT`` (or the value is negative).
    """
    from sparsify_tui import settings
    from sparsify_tui.errors import SparsifyError

    try:
        return settings.dims(list(args or []))
    except SparsifyError as err:
        raise DimensionError(str(err)) from None


def dim_keys(model: onnx.ModelProto) -> list[str]:
    """Every name ``--dim`` accepts for this model: each symbolic dim by name (when named) and by
    ``INPUT:AXIS``, each scalar input, and each integer input (its vocabulary size). Raises ``ModelError``
    for an input without a shape."""
    keys: list[str] = []
    for sd in symbolic_dims(model):
        for k in ((sd.name,) if sd.named else ()) + (sd.key,):
            if k not in keys:
                keys.append(k)
    for vi in graph_inputs(model):
        elem = vi.type.tensor_type.elem_type
        if vi.name not in keys and elem not in _FLOAT_ELEM_TYPES:
            keys.append(vi.name)
    return keys


_FLOAT_ELEM_TYPES = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}


def suggest_dim(rank: int, sd: SymbolicDim) -> int:
    """An example value for a symbolic dim, shown as a suggestion (never used silently): 224 for the spatial
    axes of a rank-4 input (and the last axis of a rank-3 one), 128 for sequence-like names and otherwise."""
    lname = sd.name.lower()
    if rank == 4 and sd.axis in (2, 3):
        return 224
    if any(k in lname for k in ("seq", "len", "token", "sentence")):
        return 128
    if rank == 3 and sd.axis == 2:
        return 224
    return 128


def suggest_scalar(name: str) -> int:
    """An example value for a scalar input: 16000 for a sample rate (``sr``, ``sample_rate``), else 1."""
    return 16000 if name.lower() in ("sr", "sample_rate", "sampling_rate") else 1


@dataclass
class DimPrompt:
    """One value the user must give before the model can run: a symbolic dim or a scalar input.

    ``key``: how to address it (``--dim KEY=VALUE``: the dim name, else ``input:axis``, or the scalar
    input's name); ``label``: shown next to the field; ``suggestion``: an example value.
    """

    key: str
    label: str
    suggestion: int


def dim_prompts(model: onnx.ModelProto) -> list[DimPrompt]:
    """What a setup dialog asks for: every :func:`user_dims` entry, then every :func:`scalar_inputs` one, each
    with a suggestion (:func:`suggest_dim`, :func:`suggest_scalar`). Raises ``ModelError`` for an input
    without a shape."""
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in graph_inputs(model)}
    out = []
    for sd in user_dims(model):
        key = sd.name if sd.named else sd.key
        label = f"{sd.name} ({sd.key})" if sd.named else sd.key
        out.append(DimPrompt(key, label, suggest_dim(ranks.get(sd.input_name, 0), sd)))
    for name in scalar_inputs(model):
        out.append(DimPrompt(name, f"{name} (scalar input value)", suggest_scalar(name)))
    return out


def resolve_dims(
    model: onnx.ModelProto, batch_size: int = 1, dims: Optional[dict[str, int]] = None
) -> dict[tuple[str, int], int]:
    """Values for every symbolic input dim, keyed by ``(input_name, axis)``.

    Args:
        model: the model (only its graph inputs are read).
        batch_size: items per batch, used for axis 0 of each input whose axis 0 is symbolic, and for
            every other dim sharing that dim's ``dim_param`` name (the batch dims: ``dims`` never sets them).
        dims: user values by ``"input:axis"`` key or by ``dim_param`` name (see module docstring).

    Returns:
        ``{(input, axis): value}`` for each symbolic dim.

    Raises:
        DimensionError: some dims have no value (the message lists all of them with ``--dim`` suggestions),
            or the model fixes its batch (:func:`fixed_batch`) and ``batch_size`` is neither 1 nor that batch.
        ModelError: an input has no shape.
    """
    from sparsify_tui import settings
    from sparsify_tui.errors import SparsifyError

    if batch_size is None or int(batch_size) < 1:
        raise DimensionError(f"batch size must be at least 1 (got {batch_size}): pass --batch-size 1 or more")
    batch_size = int(batch_size)
    try:
        dims = settings.dims(dims or {}, dim_keys(model))
    except SparsifyError as err:
        raise DimensionError(str(err)) from None
    sym = symbolic_dims(model)
    shapes = {vi.name: list(vi.type.tensor_type.shape.dim) for vi in graph_inputs(model)}
    resolved: dict[tuple[str, int], int] = {}
    missing: list[SymbolicDim] = []
    fixed = fixed_batch(model)
    if fixed is not None and batch_size not in (1, fixed):
        raise DimensionError(f"the model fixes its batch at {fixed} ({_fixed_batch_text(model)}), so it cannot be "
                             f"fed batches of {batch_size}: pass --batch-size {fixed}, or re-export the model with "
                             "a dynamic batch axis")
    for sd in sym:
        if sd.is_batch:
            value = batch_size  # never a dims entry: the batch axis is what --batch-size asks for
        elif sd.key in dims:
            value = dims[sd.key]
        elif sd.named and sd.name in dims:
            value = dims[sd.name]
        else:
            missing.append(sd)
            continue
        if int(value) < 1:
            raise DimensionError(f"dim {sd.key} ({sd.name or 'unnamed'}) must be at least 1 (got {value}): "
                                 "pass a positive --dim value")
        resolved[(sd.input_name, sd.axis)] = int(value)
    if missing:
        parts, hints, seen = [], [], set()
        for sd in missing:
            label = f"{sd.key}" + (f" ('{sd.name}')" if sd.name else "")
            parts.append(label)
            addr = sd.name if sd.named else sd.key
            if addr in seen:
                continue
            seen.add(addr)
            hints.append(f"--dim {addr}={suggest_dim(len(shapes[sd.input_name]), sd)}")
        raise DimensionError(
            f"model input dims without a value: {', '.join(parts)}: give each with {' '.join(hints)} "
            "(values are examples; use your real input size)"
        )
    return resolved


def fixed_batch(model: onnx.ModelProto) -> Optional[int]:
    """The batch a model with no batch dim runs (every input's axis 0 fixed): axis 0 of its first tensor
    input, or None when some input has a batch dim (then ``batch_size`` sets it) or every input is a scalar.
    So the items in one batch fed at ``batch_size`` are ``fixed_batch(model) or batch_size``: what ms per item
    and items/s divide by. Raises ``ModelError`` for an input without a shape."""
    if any(sd.is_batch for sd in symbolic_dims(model)):
        return None
    for vi in graph_inputs(model):
        dims = vi.type.tensor_type.shape.dim
        if len(dims):
            return _dim_value(dims[0])
    return None


def _fixed_batch_text(model: onnx.ModelProto) -> str:
    vi = next(vi for vi in graph_inputs(model) if len(vi.type.tensor_type.shape.dim))
    return f"input {vi.name!r} is {[_dim_value(d) for d in vi.type.tensor_type.shape.dim]}"


def batch_dim_addresses(model: onnx.ModelProto) -> dict[str, SymbolicDim]:
    """Every ``--dim`` name or ``INPUT:AXIS`` key that addresses a batch dim (``{address: the dim}``): what
    the batch size sets. Raises ``ModelError`` for an input without a shape."""
    sym = symbolic_dims(model)
    other_names = {sd.name for sd in sym if sd.named and not sd.is_batch}
    out: dict[str, SymbolicDim] = {}
    for sd in sym:
        if sd.is_batch:
            out[sd.key] = sd
            if sd.named and sd.name not in other_names:
                out.setdefault(sd.name, sd)
    return out


def check_user_dims(model: onnx.ModelProto, dims: Optional[dict[str, int]], flag: str = "--dim") -> None:
    """Refuse dims the user typed that name a batch dim (``--dim batch=1`` from the habit of other ONNX
    tools): the batch axis is set by the batch size, and a dim must never pin it.

    Raises:
        DimensionError: one line naming the dim, the input axis it addresses and the fix.
    """
    batch = batch_dim_addresses(model)
    for key, value in (dims or {}).items():
        if key in batch:
            sd = batch[key]
            raise DimensionError(f"{flag} {key}={value} names the batch axis ({sd.key}), which the batch size "
                                 f"sets: drop it and pass --batch-size {value} instead")


def input_shapes(
    model: onnx.ModelProto, batch_size: int = 1, dims: Optional[dict[str, int]] = None
) -> dict[str, list[int]]:
    """Concrete shape of every model input (``{name: [d0, d1, ...]}``) after :func:`resolve_dims`.

    Raises:
        DimensionError, ModelError: as :func:`resolve_dims`.
    """
    resolved = resolve_dims(model, batch_size, dims)
    out = {}
    for vi in graph_inputs(model):
        shape = []
        for axis, dim in enumerate(vi.type.tensor_type.shape.dim):
            v = _dim_value(dim)
            shape.append(v if v is not None else resolved[(vi.name, axis)])
        out[vi.name] = shape
    check_input_memory(model, out)
    return out


def input_batch_bytes(model: onnx.ModelProto, shapes: dict[str, list[int]]) -> dict[str, int]:
    """Bytes one batch of each input takes (``{input name: bytes}``; string inputs count 0)."""
    import numpy as np

    out = {}
    for vi in graph_inputs(model):
        try:
            itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)).itemsize
        except Exception:  # noqa: BLE001 - exotic element type
            itemsize = 1
        if vi.type.tensor_type.elem_type == TensorProto.STRING:
            itemsize = 0
        n = 1
        for d in shapes.get(vi.name, []):
            n *= int(d)
        out[vi.name] = n * itemsize
    return out


def check_input_memory(model: onnx.ModelProto, shapes: dict[str, list[int]],
                       available: Optional[int] = None, batches: int = 1) -> None:
    """Refuse input shapes whose ``batches`` batches (kept in memory together, e.g. one-shot's ``--batches``)
    would not fit in the memory this process can still use (:func:`sparsify_tui.analysis.system.available_memory_bytes`,
    or ``available``), *before* anything is allocated. The message names the biggest input and what to lower:
    ``--batch-size``, ``--dim NAME``, the model's own fixed dim (re-export), or ``--batches``.

    Raises:
        DimensionError: one line with the bytes needed, the bytes available and the fix.
    """
    from sparsify_tui.analysis.system import available_memory_bytes
    from sparsify_tui.formatting import format_bytes

    per_input = input_batch_bytes(model, shapes)
    total = sum(per_input.values())
    batches = max(1, int(batches))
    if available is None:
        if total * batches < 1 << 28:  # under 256 MiB: not worth reading /proc
            return
        available = available_memory_bytes()
    if available is None or total * batches <= available:
        return
    name = max(per_input, key=per_input.get)
    shape = shapes[name]
    if total <= available:
        fix = f"lower --batches (now {batches})"
    elif not shape:
        fix = "re-export the model with smaller inputs"
    else:
        axis = max(range(len(shape)), key=lambda a: shape[a])
        sd = {(d.input_name, d.axis): d for d in symbolic_dims(model)}.get((name, axis))
        if sd is None:
            fix = (f"the model fixes dim {axis} of input '{name}' at {shape[axis]}: re-export it with a smaller or a "
                   "symbolic dim")
        elif sd.is_batch:
            fix = f"lower --batch-size (now {shape[axis]})"
        else:
            fix = f"lower --dim {sd.name if sd.named else sd.key} (now {shape[axis]})"
    many = f" x {batches} batches" if batches > 1 else ""
    raise DimensionError(
        f"model input '{name}' {shape} needs {format_bytes(per_input[name])} per batch (all inputs "
        f"{format_bytes(total)}{many}), more than the {format_bytes(available)} of memory available: {fix}"
    )


_KEEP_DATA_MAX_ELEMENTS = 4096


def _light_tensor(t: TensorProto) -> TensorProto:
    """A copy of an initializer for shape inference: small or integer tensors keep their data (shape values
    for data propagation); big float weights keep only dtype and dims (as stub external data)."""
    numel = 1
    for d in t.dims:
        numel *= int(d)
    is_int = t.data_type in (TensorProto.INT64, TensorProto.INT32)
    if t.data_location != TensorProto.EXTERNAL and (numel <= _KEEP_DATA_MAX_ELEMENTS or (is_int and numel <= 1 << 16)):
        return t
    stub = TensorProto(name=t.name, data_type=t.data_type, dims=list(t.dims))
    stub.data_location = TensorProto.EXTERNAL
    stub.external_data.add(key="location", value="__stub__")
    return stub


def skeleton_model(model: onnx.ModelProto, shapes: dict[str, list[int]]) -> onnx.ModelProto:
    """A copy of ``model`` without big weight data and with the given concrete input shapes."""
    light = onnx.ModelProto()
    # never copy the weights: build field by field
    for attr in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        setattr(light, attr, getattr(model, attr))
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    g = light.graph
    g.name = model.graph.name
    g.node.extend(model.graph.node)  # subgraph weights are usually small Constant nodes
    g.initializer.extend(_light_tensor(t) for t in model.graph.initializer)
    g.sparse_initializer.extend(model.graph.sparse_initializer)
    for vi in model.graph.output:
        new = g.output.add()
        new.CopyFrom(vi)
        tt = new.type.tensor_type
        # stored output shapes with symbolic/-1 dims would mask what inference finds: let it recompute them
        if new.type.HasField("tensor_type") and tt.HasField("shape") and any(_dim_value(d) is None for d in tt.shape.dim):
            tt.ClearField("shape")
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        new = g.input.add()
        new.CopyFrom(vi)
        if vi.name in inits or vi.name not in shapes:
            continue
        dims = new.type.tensor_type.shape.dim
        for axis, value in enumerate(shapes[vi.name]):
            dims[axis].Clear()
            dims[axis].dim_value = int(value)
    # drop stale value_info: it may carry symbolic dims that conflict with the fixed ones
    return light


def _shape_of(vi: onnx.ValueInfoProto) -> Optional[list[int]]:
    t = vi.type
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    out = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            out.append(int(d.dim_value))
        else:
            return None
    return out


def _collect(model: onnx.ModelProto) -> dict[str, Optional[list[int]]]:
    shapes: dict[str, Optional[list[int]]] = {}
    for _, graph in iter_graphs(model.graph):
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            s = _shape_of(vi)
            if s is not None or vi.name not in shapes:
                shapes[vi.name] = s
        for t in graph.initializer:
            shapes[t.name] = [int(d) for d in t.dims]
        for node in graph.node:
            if node.op_type == "Constant" and node.output:
                for a in node.attribute:
                    if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                        shapes[node.output[0]] = [int(d) for d in a.t.dims]
    return shapes


def _unknown_outputs(model: onnx.ModelProto, shapes: dict) -> int:
    n = 0
    for _, graph in iter_graphs(model.graph):
        for node in graph.node:
            for o in node.output:
                if o and shapes.get(o) is None:
                    n += 1
    return n


def infer_shapes(
    model: onnx.ModelProto, batch_size: int = 1, dims: Optional[dict[str, int]] = None
) -> dict[str, Optional[list[int]]]:
    """Concrete shapes of every tensor in the model (main graph and subgraphs) for the given input dims.

    Returns:
        ``{tensor_name: [d0, d1, ...] or None}``; None when no concrete shape could be inferred (for
        example a data-dependent NonZero output).

    Raises:
        DimensionError: a symbolic input dim has no value (see :func:`resolve_dims`).
        ModelError: an input has no shape, or shape inference finds the given dims inconsistent.
    """
    return infer_shapes_ex(model, batch_size, dims)[0]


def infer_shapes_ex(
    model: onnx.ModelProto, batch_size: int = 1, dims: Optional[dict[str, int]] = None,
    extra_inference: Optional[Callable[[onnx.ModelProto], dict]] = None,
) -> tuple[dict[str, Optional[list[int]]], dict[str, str]]:
    """:func:`infer_shapes` plus the branch each ``If`` takes when its condition is known statically.

    Passes: onnx ``infer_shapes(data_prop=True)`` on a weight-free copy with fixed input dims; then, while
    tensors stay unknown, fold constant subexpressions (``onnx.reference``), treat scalar inputs given in
    ``dims`` (``sr=16000``) as constants, inline ``If`` nodes whose condition became constant, and infer
    again; finally ``extra_inference(light model) -> {tensor: shape}`` when given (an engine's
    ``infer_shapes``; its failures are ignored).

    Returns:
        ``(shapes, taken)`` where ``taken`` maps an If node id (name or first output) to the branch
        attribute (``"then_branch"``/``"else_branch"``) that runs.
    """
    dims = dict(dims or {})
    shapes_in = input_shapes(model, batch_size, dims)
    light = skeleton_model(model, shapes_in)
    shapes = _run_onnx_inference(light, shapes_in, strict=True)
    taken: dict[str, str] = {}
    known_inputs = {}
    for vi in graph_inputs(model):
        tt = vi.type.tensor_type
        if vi.name in dims and tt.HasField("shape") and len(tt.shape.dim) == 0:
            import numpy as np

            known_inputs[vi.name] = np.array(dims[vi.name], dtype=onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
    for _ in range(6):
        if not _unknown_outputs(model, shapes):
            break
        if not _fold_constants(light, shapes, known_inputs, taken):
            break
        try:
            shapes = _merge(_run_onnx_inference(light, shapes_in), shapes)
        except ModelError:
            break
    if extra_inference is not None and _unknown_outputs(model, shapes):
        try:
            shapes = _merge(shapes, _collect_shapes(extra_inference(light)))
        except Exception:  # noqa: BLE001 - optional fallback
            pass
    return shapes, taken


def check_shapes(model: onnx.ModelProto, batch_size: Optional[int] = 1, dims: Optional[dict[str, int]] = None) -> None:
    """onnx's strict shape check of ``model`` at these input shapes (the first pass of :func:`infer_shapes_ex`,
    on a weight-free copy), or with ``batch_size=None`` at the shapes the model declares (symbolic dims left
    symbolic: what onnxruntime checks when it loads the model). Raises ``ModelError`` for a model (or dims)
    onnxruntime would refuse to load."""
    shapes_in = input_shapes(model, batch_size, dims) if batch_size is not None else {}
    _run_onnx_inference(skeleton_model(model, shapes_in), shapes_in or "as declared", strict=True)


def _run_onnx_inference(light: onnx.ModelProto, shapes_in: dict, strict: bool = False) -> dict:
    """onnx shape inference with data propagation. ``strict``: a shape error of a standard op (a Gemm whose
    weight does not fit, a Conv weight of the wrong rank, a Reshape to a negative size, a dim too small for a
    kernel) is a ``ModelError`` instead of an unknown shape: onnxruntime runs the same checks when it loads
    the model, so such a model (or such dims) could never be profiled."""
    from google.protobuf.message import DecodeError

    try:
        inferred = onnx.shape_inference.infer_shapes(light, check_type=False, strict_mode=strict, data_prop=True)
    except DecodeError:
        # the check passed (C++), but the model it returns, with shapes added in its subgraphs, is nested deeper
        # than protobuf's Python parser goes (100 levels: an If nested 32 deep, which onnxruntime loads and runs)
        return {}
    except Exception as err:  # noqa: BLE001 - InferenceError for inconsistent dims
        msg = " ".join(str(err).split())
        msg = msg.replace("[ShapeInferenceError] Inference error(s): ", "")[:240]
        raise ModelError(
            f"shape check failed with input shapes {shapes_in} ({msg}): onnxruntime would refuse it too; check "
            "--batch-size and --dim values, or re-export the model"
        ) from None
    return _collect(inferred)


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        if out.get(k) is None and v is not None:
            out[k] = v
    return out


def _collect_shapes(found) -> dict[str, Optional[list[int]]]:
    """Shapes from an extra inference pass: a ``{name: shape}`` dict, or an inferred ``ModelProto``."""
    if isinstance(found, onnx.ModelProto):
        return _collect(found)
    return dict(found or {})


_NO_FOLD = {"If", "Loop", "Scan", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
            "Multinomial", "Bernoulli", "Dropout"}
_FOLD_MAX_ELEMENTS = 1 << 16


def _fold_constants(light: onnx.ModelProto, shapes: dict, known_inputs: Optional[dict] = None,
                    taken: Optional[dict] = None) -> int:
    """Replace nodes whose inputs are all small constants (or ``Shape`` of a tensor with a known shape) by
    ``Constant`` nodes with their values, evaluated by ``onnx.reference.ReferenceEvaluator``, in the main
    graph and subgraphs. Torch exports compute ``Pad`` pads and ``Reshape`` targets this way, which onnx's
    data propagation does not follow. Returns how many nodes were folded.
    """
    import numpy as np
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    known: dict = dict(known_inputs or {})
    taken = {} if taken is None else taken
    folded = 0
    for _, graph in iter_graphs(light.graph):
        for t in graph.initializer:
            if t.data_location != TensorProto.EXTERNAL:
                try:
                    known[t.name] = numpy_helper.to_array(t)
                except Exception:  # noqa: BLE001
                    pass
        new_nodes = []
        changed = False
        for node in graph.node:
            branch = _static_branch(node, known)
            if branch is not None:
                attr_name, sub = branch
                taken[node_id(node)] = attr_name
                graph.initializer.extend(sub.initializer)
                new_nodes.extend(sub.node)
                for src, dst in zip(sub.output, node.output):
                    if dst:
                        new_nodes.append(onnx.helper.make_node("Identity", [src.name], [dst]))
                folded += 1
                changed = True
                continue
            value = _try_fold(node, known, shapes, ReferenceEvaluator, np)
            if value is None:
                new_nodes.append(node)
                continue
            for name, arr in zip(node.output, value):
                known[name] = arr
                new_nodes.append(onnx.helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr, name)))
            folded += 1
            changed = True
        if changed:
            replace_nodes(graph, new_nodes)
    return folded


def _static_branch(node, known) -> Optional[tuple[str, onnx.GraphProto]]:
    """``(attribute name, branch graph)`` of an ``If`` whose condition is a known constant, else None."""
    if node.op_type != "If" or not node.input or node.input[0] not in known:
        return None
    cond = known[node.input[0]]
    try:
        value = bool(cond.reshape(-1)[0])
    except Exception:  # noqa: BLE001
        return None
    want = "then_branch" if value else "else_branch"
    for a in node.attribute:
        if a.name == want and a.type == onnx.AttributeProto.GRAPH:
            return want, a.g
    return None


def _try_fold(node, known, shapes, evaluator, np):
    if node.op_type in _NO_FOLD or node.domain not in ("", "ai.onnx"):
        return None
    if has_subgraphs(node):
        return None
    if node.op_type == "Constant":
        for a in node.attribute:
            if a.name == "value" and a.type == onnx.AttributeProto.TENSOR and node.output:
                from onnx import numpy_helper

                known[node.output[0]] = numpy_helper.to_array(a.t)
        return None
    if node.op_type == "Shape":
        s = shapes.get(node.input[0]) if node.input else None
        if s is None:
            return None
        attrs = {a.name: a.i for a in node.attribute}
        start, end = attrs.get("start", 0), attrs.get("end", len(s))
        return [np.array(s[start:end], dtype=np.int64)]
    ins = [i for i in node.input if i]
    if not ins or any(i not in known for i in ins):
        return None
    if sum(int(np.size(known[i])) for i in ins) > _FOLD_MAX_ELEMENTS:
        return None
    try:
        feeds = {i: known[i] for i in ins}
        out = evaluator(node).run(None, feeds)
    except Exception:  # noqa: BLE001 - an op the reference cannot run: leave it
        return None
    if any(o is None or int(np.size(o)) > _FOLD_MAX_ELEMENTS for o in out):
        return None
    return [np.asarray(o) for o in out]
