"""Model inputs: what each one is, valid synthetic values, and user sample data.

Kinds (DESIGN.md "Inputs"):

* ``"float"``: float tensors; synthetic values are standard normal.
* ``"ids"``: integer tensors used as indices: by a ``Gather`` of a constant table (embeddings; the
  vocabulary size is that table's size along the gather axis), by a one-hot ``Equal`` against a constant
  range (magika), or by ``OneHot`` (its depth). The input is followed through ``Cast``/``Reshape``/
  ``Unsqueeze``/``Squeeze``/``Expand``/``Flatten``/``Identity``. Synthetic values are uniform in
  ``[0, vocab_size)``. ``--dim NAME=V`` with the input's name overrides the vocabulary size.
* ``"mask"``: inputs whose name contains ``mask``; synthetic values are ones.
* ``"scalar"``: rank-0 inputs (silero's ``sr``). Their value changes what the model computes, so it must
  come from the user (``--dim sr=16000``) or sample data; otherwise :class:`DimensionError` asks for it.
* ``"int"``: any other integer/bool tensor; synthetic values are zeros (a valid index everywhere), or
  uniform in ``[0, V)`` when the user gives ``--dim NAME=V``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np
import onnx

from sparsify_tui.errors import DimensionError, SampleDataError

_PASS_OPS = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Expand", "Flatten", "Identity", "Transpose"}


@dataclass
class InputSpec:
    """One model input, resolved for a batch size.

    ``shape``: concrete shape, batch first (``()`` for a scalar). ``dtype``: numpy dtype the session wants.
    ``vocab_size``: exclusive upper bound of valid ids (``ids``/``int`` kinds) or None. ``kind``: see module
    docstring. ``value``: the user's value for a ``scalar`` input (None until given).
    """

    name: str
    shape: tuple
    dtype: np.dtype
    vocab_size: Optional[int] = None
    kind: str = "float"
    value: Optional[float] = None

    @property
    def batch_axis(self) -> Optional[int]:
        """0 for tensors (batch first), None for scalars."""
        return 0 if self.shape else None

    def to_dict(self) -> dict:
        """JSON-able dict."""
        return {"name": self.name, "shape": list(self.shape), "dtype": np.dtype(self.dtype).name,
                "vocab_size": self.vocab_size, "kind": self.kind, "value": self.value}


def _consumers(model: onnx.ModelProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    from sparsify_tui.analysis.loading import iter_graphs

    out: dict[str, list] = {}
    for _, graph in iter_graphs(model.graph):
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name:
                    out.setdefault(name, []).append((node, i))
    return out


def _constants(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    from sparsify_tui.analysis.loading import iter_graphs

    out = {}
    for _, graph in iter_graphs(model.graph):
        for t in graph.initializer:
            out[t.name] = t
        for node in graph.node:
            if node.op_type == "Constant" and node.output:
                for a in node.attribute:
                    if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                        out[node.output[0]] = a.t
    return out


def _producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    from sparsify_tui.analysis.loading import iter_graphs

    out = {}
    for _, graph in iter_graphs(model.graph):
        for node in graph.node:
            for o in node.output:
                out[o] = node
    return out


def _const_values(name: str, consts, producers, base_dir, depth: int = 0) -> Optional[np.ndarray]:
    """Values of a tensor that is a constant or a pass-through (Expand/Reshape/Cast...) of one; None otherwise."""
    from sparsify_tui.analysis.loading import tensor_array

    if name in consts:
        t = consts[name]
        if np.prod(t.dims, dtype=np.int64) > 1 << 20:
            return None
        return np.asarray(tensor_array(t, base_dir))
    node = producers.get(name)
    if node is None or depth > 6 or node.op_type not in _PASS_OPS or not node.input:
        return None
    return _const_values(node.input[0], consts, producers, base_dir, depth + 1)


def find_vocab_size(model: onnx.ModelProto, input_name: str, base_dir=None) -> Optional[int]:
    """Exclusive bound of valid values for an integer input, from the Gather/Equal/OneHot consuming it.

    Returns the gathered table's size along the gather axis (embeddings), ``max+1`` of the constant range a
    one-hot ``Equal`` compares against, or the ``OneHot`` depth; None when no such consumer is found.
    """
    consumers = _consumers(model)
    consts = _constants(model)
    producers = _producers(model)
    frontier, seen = [input_name], set()
    while frontier:
        name = frontier.pop()
        if name in seen:
            continue
        seen.add(name)
        for node, idx in consumers.get(name, []):
            op = node.op_type
            if op in _PASS_OPS and idx == 0:
                frontier.extend(node.output[:1])
            elif op == "Gather" and idx == 1 and node.input[0] in consts:
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                dims = list(consts[node.input[0]].dims)
                if dims:
                    return int(dims[axis])
            elif op == "Equal":
                other = node.input[1 - idx]
                vals = _const_values(other, consts, producers, base_dir)
                if vals is not None and vals.size and np.issubdtype(vals.dtype, np.integer) and vals.min() >= 0:
                    return int(vals.max()) + 1
            elif op == "OneHot" and idx == 0 and len(node.input) > 1:
                vals = _const_values(node.input[1], consts, producers, base_dir)
                if vals is not None and vals.size == 1:
                    return int(vals.reshape(-1)[0])
    return None


def input_specs(
    model_or_path: Union[str, os.PathLike, onnx.ModelProto], batch_size: int = 1, dims: Optional[dict] = None
) -> list[InputSpec]:
    """One :class:`InputSpec` per model input (initializers excluded), shapes resolved for ``batch_size``.

    Args:
        model_or_path: a ModelProto or an ``.onnx`` path (loaded without external data).
        batch_size: items per batch.
        dims: symbolic dim values (``shapes.resolve_dims``), and values of scalar inputs / vocab sizes of
            integer inputs by input name (``{"sr": 16000}``).

    Raises:
        DimensionError: a symbolic dim has no value. (Missing scalar values are reported by
            :func:`synthetic_inputs`, since sample data may provide them.)
        ModelError: the model cannot be loaded or an input has no shape.
    """
    from sparsify_tui.analysis.shapes import graph_inputs, input_shapes

    dims = dict(dims or {})
    base_dir = None
    if isinstance(model_or_path, onnx.ModelProto):
        model = model_or_path
    else:
        from sparsify_tui.analysis.loading import load_model

        model = load_model(model_or_path, load_external_data=False)
        base_dir = Path(model_or_path).parent
    shapes = input_shapes(model, batch_size, dims)
    specs = []
    for vi in graph_inputs(model):
        elem = vi.type.tensor_type.elem_type
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
        shape = tuple(int(d) for d in shapes[vi.name])
        user = dims.get(vi.name)
        lname = vi.name.lower()
        if len(shape) == 0:
            specs.append(InputSpec(vi.name, shape, dtype, None, "scalar", user))
        elif dtype.kind == "f":
            specs.append(InputSpec(vi.name, shape, dtype, None, "float"))
        elif "mask" in lname:
            specs.append(InputSpec(vi.name, shape, dtype, None, "mask"))
        else:
            vocab = user if user is not None else find_vocab_size(model, vi.name, base_dir)
            if dtype.kind == "b":
                vocab = 2
            kind = "ids" if vocab is not None and user is None and dtype.kind != "b" else "int"
            specs.append(InputSpec(vi.name, shape, dtype, vocab, kind))
    return specs


def synthetic_inputs(specs: list[InputSpec], seed: int = 0, values: Optional[dict] = None) -> dict[str, np.ndarray]:
    """Valid random inputs for one batch: ``{input name: array}`` with each spec's shape and dtype.

    float: standard normal; ids/int: uniform integers in ``[0, vocab_size)`` (zeros when the bound is
    unknown); mask: ones; scalar: ``values[name]`` or ``spec.value``.

    Raises:
        DimensionError: a scalar input has no value; the message names it and the ``--dim NAME=VALUE`` fix.
    """
    rng = np.random.default_rng(seed)
    values = dict(values or {})
    out: dict[str, np.ndarray] = {}
    missing = []
    for s in specs:
        if s.kind == "scalar":
            v = values.get(s.name, s.value)
            if v is None:
                missing.append(s)
                continue
            out[s.name] = np.array(v, dtype=s.dtype)
        elif s.kind == "float":
            out[s.name] = rng.standard_normal(s.shape, dtype=np.float32).astype(s.dtype, copy=False)
        elif s.kind == "mask":
            out[s.name] = np.ones(s.shape, dtype=s.dtype)
        else:
            high = values.get(s.name, s.vocab_size)
            if high is None or int(high) < 1:
                out[s.name] = np.zeros(s.shape, dtype=s.dtype)
            else:
                out[s.name] = rng.integers(0, int(high), size=s.shape).astype(s.dtype)
    if missing:
        names = ", ".join(f"'{s.name}' ({s.dtype.name} scalar)" for s in missing)
        from sparsify_tui.analysis.shapes import suggest_scalar

        hint = " ".join(f"--dim {s.name}={suggest_scalar(s.name)}" for s in missing)
        raise DimensionError(
            f"model input {names} needs a value the model depends on (e.g. a sample rate or a mode): "
            f"give it with {hint} (an example value: use the real one), or pass sample data"
        )
    return out


def load_sample_data(path: Union[str, os.PathLike], specs: list[InputSpec], batch_size: int,
                     ignore: tuple = ()) -> list[dict]:
    """Split user sample data into batches of ``batch_size`` items.

    ``.npz``: one array per input name; ``.npy``: one array for a model with one non-scalar input. Arrays
    are ``[items, ...]`` with the remaining dims equal to the spec shape without its batch axis; scalar
    inputs may be given as a 0-d array (used for every batch) and otherwise come from ``spec.value``.
    Leftover items (fewer than ``batch_size``) are dropped. Loaded with ``allow_pickle=False``. Keys in
    ``ignore`` (e.g. the labels array, :mod:`sparsify_tui.analysis.labels`) are not inputs and are skipped.

    Returns:
        A list of feeds ``{input name: array}``, one per batch.

    Raises:
        SampleDataError: unreadable file, unknown or missing input name, wrong shape or dtype, or fewer than
            ``batch_size`` items.
    """
    p = Path(path)
    if not p.is_file():
        raise SampleDataError(f"sample data {p} does not exist: give a .npz (one array per input) or .npy file")
    try:
        loaded = np.load(p, allow_pickle=False)
    except Exception as err:  # noqa: BLE001 - ValueError for pickles, OSError, zip errors
        raise SampleDataError(f"sample data {p} cannot be read as .npy/.npz ({str(err).splitlines()[0][:120]}): "
                              "save it with numpy.savez (no pickled objects)") from None
    by_name = {s.name: s for s in specs}
    tensors = [s for s in specs if s.kind != "scalar"]
    if isinstance(loaded, np.ndarray):
        if len(tensors) != 1:
            raise SampleDataError(
                f"{p.name} holds one array but the model has inputs {', '.join(by_name)}: "
                "save a .npz with one array per input name (numpy.savez(path, **arrays))")
        arrays = {tensors[0].name: loaded}
    else:
        with loaded:
            arrays = {k: loaded[k] for k in loaded.files if k not in ignore}
    unknown = [k for k in arrays if k not in by_name]
    if unknown:
        raise SampleDataError(f"sample data has array(s) {', '.join(unknown)} that are not model inputs "
                              f"({', '.join(by_name)}): rename them to the input names")
    fixed: dict[str, np.ndarray] = {}
    counts = {}
    for s in specs:
        if s.name not in arrays:
            if s.kind == "scalar" and s.value is not None:
                fixed[s.name] = np.array(s.value, dtype=s.dtype)
                continue
            raise SampleDataError(f"sample data has no array for input '{s.name}': add it "
                                  f"(shape [items{''.join(', ' + str(d) for d in s.shape[1:])}], {s.dtype.name})")
        a = arrays[s.name]
        a = _check_dtype(a, s)
        if s.kind == "scalar" or len(s.shape) == 0:
            if a.size != 1:
                raise SampleDataError(f"sample input '{s.name}' must be a single value (model input is a scalar), "
                                      f"got shape {list(a.shape)}: save it as a 0-d array")
            fixed[s.name] = a.reshape(())
            continue
        if a.ndim != len(s.shape) or tuple(a.shape[1:]) != tuple(s.shape[1:]):
            want = "[items, " + ", ".join(str(d) for d in s.shape[1:]) + "]"
            raise SampleDataError(f"sample input '{s.name}' has shape {list(a.shape)}, the model needs {want}: "
                                  "reshape the data or set --dim values matching it")
        counts[s.name] = a.shape[0]
        arrays[s.name] = a
    if counts and len(set(counts.values())) > 1:
        raise SampleDataError(f"sample inputs have different item counts {counts}: give the same number of items "
                              "for every input")
    items = min(counts.values()) if counts else 0
    if counts and items < batch_size:
        raise SampleDataError(f"sample data has {items} item(s), fewer than the batch size {batch_size}: "
                              "add items or lower the batch size")
    n_batches = items // batch_size if counts else 1
    batches = []
    for b in range(n_batches):
        feed = {name: arrays[name][b * batch_size:(b + 1) * batch_size] for name in counts}
        feed.update(fixed)
        batches.append(feed)
    return batches


def _check_dtype(a: np.ndarray, s: InputSpec) -> np.ndarray:
    if a.dtype == s.dtype:
        return a
    if a.dtype.kind == s.dtype.kind or (a.dtype.kind in "iu" and s.dtype.kind in "iu"):
        cast = a.astype(s.dtype)
        if a.dtype.kind in "iu" and not np.array_equal(cast.astype(a.dtype), a):
            raise SampleDataError(f"sample input '{s.name}' values do not fit {s.dtype.name}: save it as {s.dtype.name}")
        return cast
    raise SampleDataError(f"sample input '{s.name}' is {a.dtype.name}, the model needs {s.dtype.name}: "
                          f"save it as {s.dtype.name}")
