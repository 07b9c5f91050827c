"""Model inputs: what each one is, valid synthetic values, and user sample data.

Kinds (docs/design.md "Inputs"):

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
from sparsify_tui.formatting import plural

#: the key labels are read from when ``--labels`` is not given (:mod:`sparsify_tui.analysis.labels`): a sample data
#: file's array of that name is not an input
DEFAULT_LABELS_KEY = "labels"
#: the key of the class names stored beside the labels (``sparsify-tui data images``: a fixed-width unicode array,
#: ``class_names[label]`` names class ``label``): not an input either
CLASS_NAMES_KEY = "class_names"

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
        from sparsify_tui.errors import ModelError

        t = consts[name]
        if np.prod(t.dims, dtype=np.int64) > 1 << 20:
            return None
        try:
            return np.asarray(tensor_array(t, base_dir))
        except ModelError:
            return None  # data stripped for shapes only (or damaged: load_model reports that in one line)
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
    model_or_path: Union[str, os.PathLike, onnx.ModelProto], batch_size: int = 1, dims: Optional[dict] = None,
    base_dir: Optional[Union[str, os.PathLike]] = None,
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
    if isinstance(model_or_path, onnx.ModelProto):
        model = model_or_path  # external constants are read from ``base_dir`` when given
    else:
        from sparsify_tui.analysis.loading import load_model

        model = load_model(model_or_path, load_external_data=False)
        base_dir = Path(model_or_path).parent
    shapes = input_shapes(model, batch_size, dims)
    specs = []
    for vi in graph_inputs(model):
        elem = vi.type.tensor_type.elem_type
        if elem == onnx.TensorProto.STRING:
            from sparsify_tui.errors import ModelError

            raise ModelError(f"model input '{vi.name}' takes strings, which sparsify-tui cannot generate or feed: "
                             "re-export the model with numeric inputs (e.g. tokenize outside the model)")
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
    check_scalar_values(specs, values)
    out: dict[str, np.ndarray] = {}
    for s in specs:
        if s.kind == "scalar":
            out[s.name] = np.array(values.get(s.name, s.value), dtype=s.dtype)
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
    return out


def check_scalar_values(specs: list[InputSpec], values: Optional[dict] = None) -> None:
    """Refuse synthetic inputs when a scalar input has no value (``values[name]`` or ``spec.value``), without
    allocating anything. Raises ``DimensionError`` naming it and the ``--dim NAME=VALUE`` fix."""
    values = dict(values or {})
    missing = [s for s in specs if s.kind == "scalar" and values.get(s.name, s.value) is None]
    if missing:
        names = ", ".join(f"'{s.name}' ({s.dtype.name} scalar)" for s in missing)
        from sparsify_tui.analysis.shapes import suggest_scalar

        hint = " ".join(f"--dim {s.name}={suggest_scalar(s.name)}" for s in missing)
        raise DimensionError(
            f"model input {names} needs a value the model depends on (e.g. a sample rate or a mode): "
            f"give it with {hint} (an example value: use the real one), or pass sample data"
        )


_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
MAX_ARRAYS = 256
"""Most arrays a sample data ``.npz`` may hold (one per model input, plus labels). Counted from the zip's directory
before any array is opened: a file of 100,000 members is refused at once, in one short line."""
_CHUNK = 1 << 24  # bytes read at a time while streaming an array (16 MiB)


def _describe_head(head: bytes) -> str:
    text = head.decode("utf-8", "replace").strip().splitlines()
    printable = text and all(ch.isprintable() for ch in text[0][:40])
    return f"it looks like text starting with {text[0][:40]!r}" if printable else "unknown binary format"


def _some(names, k: int = 5) -> str:
    """``a, b, c`` or ``a, b, c, d, e and 99,995 more``: a list of names that stays short."""
    names = [str(n) for n in names]
    head = ", ".join(names[:k])
    return head + (f" and {len(names) - k:,} more" if len(names) > k else "")


def _npy_header_full(fh, where: str, size: Optional[int] = None) -> tuple[tuple, bool, np.dtype]:
    """(shape, fortran order, dtype) from an open .npy stream positioned at its magic, left at the data; refuses
    object (pickled) arrays and, given the stream's ``size`` in bytes (a zip member's declared size), data shorter
    than the header declares (a cut file)."""
    from numpy.lib import format as npformat

    try:
        version = npformat.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(fh)
        else:
            shape, fortran, dtype = npformat.read_array_header_2_0(fh) if version == (2, 0) else \
                npformat._read_array_header(fh, version)  # noqa: SLF001 - 3.0 headers
    except Exception as err:  # noqa: BLE001 - ValueError, EOFError, zlib.error...
        raise SampleDataError(f"{where} has a damaged .npy header ({str(err).splitlines()[0][:80]}): "
                              "save it again with numpy.save/numpy.savez") from None
    if dtype.hasobject:
        raise SampleDataError(f"{where} holds Python objects (pickled data), which sparsify-tui never loads: save "
                              "plain numeric arrays with numpy.savez(path, input_name=array)")
    shape = tuple(int(d) for d in shape)
    if size is not None:
        need = fh.tell() + int(np.prod(shape, dtype=object)) * dtype.itemsize
        if size < need:
            raise SampleDataError(f"{where} is truncated ({size} bytes, its header needs {need}): save it again "
                                  "with numpy.save/numpy.savez")
    return shape, bool(fortran), dtype


def _npy_header(fh, where: str, size: Optional[int] = None) -> tuple[tuple, np.dtype]:
    """(shape, dtype) of :func:`_npy_header_full`."""
    shape, _fortran, dtype = _npy_header_full(fh, where, size)
    return shape, dtype


def _zip_entries(p: Path) -> Optional[int]:
    """The member count a zip file declares in its end-of-central-directory record (the zip64 one when the count is
    too large for 16 bits; else, for a count of 65,535 or more, what the directory's size allows), read from the
    file's last 64 KiB in constant time; None when no such record is found (``zipfile`` then says why)."""
    import struct

    try:
        with open(p, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - (1 << 16) - 22))
            tail = fh.read()
    except OSError:
        return None
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        return None
    _sig, _disk, _cd_disk, _here, total, cd_size, _cd_off, _comment = struct.unpack("<IHHHHIIH", tail[at:at + 22])
    if total != 0xFFFF:
        return total
    loc = tail.rfind(b"PK\x06\x06", 0, at)  # zip64 end of central directory record
    if loc >= 0 and len(tail) >= loc + 56:
        return struct.unpack("<Q", tail[loc + 32:loc + 40])[0]
    return max(total, cd_size // 46)  # 46 bytes: the smallest central directory entry


def _open_npz(p: Path):
    """The ``zipfile.ZipFile`` of a sample ``.npz`` and its ``.npy`` members, the member count checked against
    :data:`MAX_ARRAYS` first from the count the file declares (:func:`_zip_entries`: a file of 100,000 members is
    refused without parsing its directory), then from the directory itself."""
    import zipfile

    declared = _zip_entries(p)
    if declared is not None and declared > MAX_ARRAYS:
        raise SampleDataError(f"sample data {p.name} holds {declared:,} arrays, more than the {MAX_ARRAYS} a "
                              "sample data file may hold: save one array per model input (and the labels) with "
                              "numpy.savez(path, input_name=array)")
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as err:
        raise SampleDataError(f"sample data {p.name} is a damaged .npz ({err}): save it again with "
                              "numpy.savez") from None
    infos = zf.infolist()
    if len(infos) > MAX_ARRAYS:
        zf.close()
        raise SampleDataError(f"sample data {p.name} holds {len(infos):,} arrays, more than the {MAX_ARRAYS} a "
                              "sample data file may hold: save one array per model input (and the labels) with "
                              "numpy.savez(path, input_name=array)")
    for info in infos:
        if not info.filename.endswith(".npy"):
            zf.close()
            raise SampleDataError(f"sample data {p.name} holds {info.filename[:80]!r}, which is not a .npy array: "
                                  "save it with numpy.savez(path, input_name=array)")
    return zf


def _damaged(p: Path, name: Optional[str], err: BaseException) -> SampleDataError:
    where = f"array '{name}' of sample data {p.name}" if name else f"sample data {p.name}"
    reason = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
    return SampleDataError(f"{where} is damaged ({reason}): save it again with numpy.save/numpy.savez")


def _stream_errors():
    import zipfile
    import zlib

    return (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)


def _read_rows(fh, shape: tuple, dtype: np.dtype, items: Optional[int], where: str) -> np.ndarray:
    """The first ``items`` rows (all: None) of a C-order array whose data starts at ``fh``'s position, read in
    :data:`_CHUNK` pieces into one buffer (the rest of the stream is never read or inflated)."""
    n = shape[0] if shape and items is None else (min(int(items), shape[0]) if shape else 1)
    out_shape = (n, *shape[1:]) if shape else ()
    out = np.empty(out_shape, dtype)
    view = memoryview(out.reshape(-1).view(np.uint8)) if out.size else memoryview(b"")
    pos, total = 0, out.nbytes
    while pos < total:
        chunk = fh.read(min(_CHUNK, total - pos))
        if not chunk:
            raise SampleDataError(f"{where} is truncated (its data ends after {pos} of {total} bytes): save it "
                                  "again with numpy.save/numpy.savez")
        view[pos:pos + len(chunk)] = chunk
        pos += len(chunk)
    return out


def _array_items(p: Path, member: Optional[str], items: Optional[int], zf=None) -> np.ndarray:
    """The first ``items`` items (all: None) of one array of a sample data file: an ``.npy`` is memory-mapped and
    only those rows copied; an ``.npz`` member (``member``, with ``.npy``) is streamed and only its first rows read
    (so inflated): a 2 MB file that inflates to 2 GiB costs what the items used take. A Fortran-order array is read
    whole. Raises ``SampleDataError`` for a damaged stream."""
    label = member[:-4] if member else None
    where = f"array '{label}' of sample data {p.name}" if member else f"sample data {p.name}"
    try:
        if member is None:
            arr = np.load(p, mmap_mode="r", allow_pickle=False)
            return np.array(arr if items is None or arr.ndim == 0 else arr[:items])
        with zf.open(member) as fh:
            shape, fortran, dtype = _npy_header_full(fh, where, zf.getinfo(member).file_size)
            if fortran and len(shape) > 1:
                from numpy.lib import format as npformat

                fh.seek(0)
                arr = npformat.read_array(fh, allow_pickle=False)
                return np.ascontiguousarray(arr if items is None else arr[:items])
            return _read_rows(fh, shape, dtype, items, where)
    except SampleDataError:
        raise
    except _stream_errors() as err:
        raise _damaged(p, label, err) from None


VERIFY_WHOLE_BYTES = 1 << 28
"""An ``.npz`` array up to this size (256 MiB inflated) is checked to its end before a run (a damaged stream or wrong
CRC anywhere is refused); a larger one only as far as the run reads it (the rest is never read, by the check or the
run: a 2 MB file that inflates to 2 GiB costs a 2-iteration profile what its first batches take)."""


def _scan_items(p: Path, member: Optional[str], items: Optional[int], zf=None) -> int:
    """Stream one array of a sample data file without keeping it (constant memory): a damaged deflate stream, data
    cut short or a wrong CRC is found now, before a job is recorded. The stream is read to its end (CRC included)
    when it inflates to at most :data:`VERIFY_WHOLE_BYTES`, else through the first ``items`` items (all: None), what
    the run reads. Returns the NaN/Inf values among those first ``items`` items (float arrays; 0 otherwise)."""
    label = member[:-4] if member else None
    where = f"array '{label}' of sample data {p.name}" if member else f"sample data {p.name}"
    bad = 0
    try:
        if member is None:
            arr = np.load(p, mmap_mode="r", allow_pickle=False)
            part = arr if items is None or arr.ndim == 0 else arr[:items]
            if part.dtype.kind in "fc":
                for i in range(0, max(1, part.shape[0] if part.ndim else 1), 4096):
                    block = np.asarray(part[i:i + 4096] if part.ndim else part)
                    bad += int(block.size - np.count_nonzero(np.isfinite(block)))
            return bad
        with zf.open(member) as fh:
            shape, fortran, dtype = _npy_header_full(fh, where, zf.getinfo(member).file_size)
            total = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if fortran or not shape or items is None:
                counted = total
            else:
                counted = min(int(items), shape[0]) * int(np.prod(shape[1:], dtype=object)) * dtype.itemsize
            step = max(dtype.itemsize, (_CHUNK // dtype.itemsize) * dtype.itemsize)
            whole = total <= VERIFY_WHOLE_BYTES or counted == total
            if not whole:
                total = counted
            pos = 0
            while pos < total:
                chunk = fh.read(min(step, total - pos))
                if not chunk:
                    raise SampleDataError(f"{where} is truncated (its data ends after {pos} of {total} bytes): "
                                          "save it again with numpy.save/numpy.savez")
                if dtype.kind in "fc" and pos < counted:
                    usable = chunk[: min(len(chunk), counted - pos)]
                    vals = np.frombuffer(usable[: len(usable) - len(usable) % dtype.itemsize], dtype)
                    bad += int(vals.size - np.count_nonzero(np.isfinite(vals)))
                pos += len(chunk)
            if whole:
                fh.read()  # to the member's end: its CRC is checked there
    except SampleDataError:
        raise
    except _stream_errors() as err:
        raise _damaged(p, label, err) from None
    return bad


def inspect_sample_data(path: Union[str, os.PathLike]) -> Optional[dict]:
    """Names, shapes and dtypes of the arrays in a sample data file, read from the headers only (no data).

    Returns ``{array name: (shape, dtype)}`` for a ``.npz``, or ``{None: (shape, dtype)}`` for a ``.npy``.

    Raises:
        SampleDataError: the path is missing or not a file, the file is neither a .npy nor a .npz (a text
            file, say), it holds more than :data:`MAX_ARRAYS` arrays, a header is damaged, or an array holds
            Python objects (pickles are never loaded) or less data than its header declares.
    """
    p = Path(path)
    if not p.exists():
        raise SampleDataError(f"sample data {p} does not exist: give a .npz (one array per input) or .npy file")
    if not p.is_file():
        raise SampleDataError(f"sample data {p} is not a file: give a .npz (one array per input) or .npy file")
    try:
        with open(p, "rb") as fh:
            head = fh.read(64)
            if head.startswith(_NPY_MAGIC):
                fh.seek(0)
                return {None: _npy_header(fh, f"sample data {p.name}", os.fstat(fh.fileno()).st_size)}
        if head[:4] not in _ZIP_MAGICS:
            kind = "is empty" if not head else f"is not a .npy or .npz file ({_describe_head(head)})"
            raise SampleDataError(f"sample data {p} {kind}: save arrays with numpy.save (.npy, one input) or "
                                  "numpy.savez (.npz, one array per input name)")
        arrays: dict = {}
        with _open_npz(p) as zf:
            for info in zf.infolist():
                name = info.filename[:-4]
                try:
                    with zf.open(info) as mf:
                        arrays[name] = _npy_header(mf, f"array '{name}' of sample data {p.name}", info.file_size)
                except SampleDataError:
                    raise
                except _stream_errors() as err:
                    raise _damaged(p, name, err) from None
        if not arrays:
            raise SampleDataError(f"sample data {p.name} holds no arrays: save one per model input with "
                                  "numpy.savez(path, input_name=array)")
        return arrays
    except OSError as err:
        raise SampleDataError(f"sample data {p} cannot be read ({err.strerror}): check its permissions") from None


def _not_inputs(specs: list[InputSpec], ignore: tuple) -> set:
    """Keys of a sample data file that are not inputs: ``ignore`` plus the default labels key
    (:data:`DEFAULT_LABELS_KEY`) and the class names (:data:`CLASS_NAMES_KEY`) unless an input has that name, so
    one labelled ``.npz`` serves every command (perf and loss profiles, apply, benchmark, INT8 search)."""
    return set(ignore) | ({DEFAULT_LABELS_KEY, CLASS_NAMES_KEY} - {s.name for s in specs})


def check_sample_data(path: Union[str, os.PathLike], specs: list[InputSpec], batch_size: int,
                      ignore: tuple = (), *, max_batches: Optional[int] = None, verify: bool = False,
                      finite: bool = False) -> int:
    """Check a sample data file against the model inputs from its headers, so a bad file is refused before anything
    runs or is recorded. Returns the number of batches it gives. Keys in ``ignore`` and the default labels key (unless
    an input has that name) are not inputs and are skipped.

    The items a run reads (the first ``max_batches`` batches, or all) must fit in the job's memory limit
    (:func:`sparsify_tui.analysis.system.job_memory_limit`), counted from the declared sizes before anything is
    inflated. ``verify``: every input array is streamed once and dropped (:func:`_scan_items`, constant memory: to
    its end up to :data:`VERIFY_WHOLE_BYTES`, else as far as the run reads), so a damaged deflate stream or a wrong
    CRC is one line now, not a job in error later; ``finite`` (the
    data calibrates INT8): NaN/Inf values among the items used are refused, naming the input (INT8 calibration
    cannot scale them: onnxruntime's "scale issue").

    Raises:
        SampleDataError: as :func:`inspect_sample_data`, plus an unknown or missing input name, a wrong shape or
            dtype kind, different item counts, fewer items than ``batch_size``, items that need more memory than
            the limit, a damaged stream, or NaN/Inf calibration values.
    """
    p = Path(path)
    skip = _not_inputs(specs, ignore)
    headers = {k: v for k, v in inspect_sample_data(p).items() if k not in skip}
    by_name = {s.name: s for s in specs}
    tensors = [s for s in specs if s.kind != "scalar"]
    members = {k: (f"{k}.npy" if k is not None else None) for k in headers}
    if None in headers:
        if len(tensors) != 1:
            raise SampleDataError(
                f"{p.name} holds one array but the model has inputs {_some(by_name)}: "
                "save a .npz with one array per input name (numpy.savez(path, **arrays))")
        headers = {tensors[0].name: headers[None]}
        members = {tensors[0].name: None}
    unknown = [k for k in headers if k not in by_name]
    if unknown:
        raise SampleDataError(f"sample data has array(s) {_some(unknown)} that are not model inputs "
                              f"({_some(by_name)}): rename them to the input names")
    counts = {}
    for s in specs:
        if s.name not in headers:
            if s.kind == "scalar" and s.value is not None:
                continue
            raise SampleDataError(f"sample data has no array for input '{s.name}': add it "
                                  f"(shape [items{''.join(', ' + str(d) for d in s.shape[1:])}], {s.dtype.name})")
        shape, dtype = headers[s.name]
        _check_kind(dtype, s)
        if s.kind == "scalar" or len(s.shape) == 0:
            if int(np.prod(shape, dtype=object)) != 1:
                raise SampleDataError(f"sample input '{s.name}' must be a single value (model input is a scalar), "
                                      f"got shape {list(shape)}: save it as a 0-d array")
            continue
        if len(shape) != len(s.shape) or tuple(shape[1:]) != tuple(s.shape[1:]):
            want = "[items, " + ", ".join(str(d) for d in s.shape[1:]) + "]"
            raise SampleDataError(f"sample input '{s.name}' has shape {list(shape)}, the model needs {want}: "
                                  "reshape the data or set --dim values matching it")
        counts[s.name] = shape[0]
    if counts and len(set(counts.values())) > 1:
        raise SampleDataError(f"sample inputs have different item counts {counts}: give the same number of items "
                              "for every input")
    items = min(counts.values()) if counts else 0
    if counts and items < batch_size:
        raise SampleDataError(f"sample data has {plural(items, 'item')}, fewer than the batch size {batch_size}: "
                              "add items or lower the batch size")
    n_batches = items // batch_size if counts else 1
    used_batches = min(n_batches, int(max_batches)) if max_batches else n_batches
    used = {name: (used_batches * batch_size if name in counts else None) for name in headers}
    need = sum(int(np.prod((used[name], *shape[1:]) if used[name] is not None else shape, dtype=object)) * dt.itemsize
               for name, (shape, dt) in headers.items())
    if need > 1 << 26:
        from sparsify_tui.analysis.system import job_memory_limit
        from sparsify_tui.formatting import format_bytes

        limit, source = job_memory_limit()
        if limit is not None and need > limit:
            raise SampleDataError(f"sample data {p.name} needs {format_bytes(need)} in memory for the "
                                  f"{plural(used_batches, 'batch', 'batches')} used, more than the limit of "
                                  f"{format_bytes(limit)} ({source}): give fewer items, or raise the limit with "
                                  "--max-memory SIZE if the machine has the memory")
    if verify or finite:
        zf = _open_npz(p) if any(m is not None for m in members.values()) else None
        try:
            for name in headers:
                if members[name] is None and not finite:  # a .npy has no stream or CRC to check
                    continue
                bad = _scan_items(p, members[name], used[name], zf)
                if finite and bad:
                    total = int(np.prod((used[name], *headers[name][0][1:]) if used[name] is not None
                                        else headers[name][0], dtype=object))
                    raise SampleDataError(
                        f"sample input '{name}' has {bad:,} NaN/Inf values among the {total:,} used (sample data "
                        f"{p.name}): INT8 calibration needs finite values to set its scales; fix the data (e.g. "
                        "numpy.nan_to_num), or run without INT8")
        finally:
            if zf is not None:
                zf.close()
    return n_batches


def load_sample_data(path: Union[str, os.PathLike], specs: list[InputSpec], batch_size: int,
                     ignore: tuple = (), *, max_batches: Optional[int] = None) -> list[dict]:
    """Split user sample data into batches of ``batch_size`` items: the first ``max_batches`` batches (all: None).

    ``.npz``: one array per input name; ``.npy``: one array for a model with one non-scalar input. Arrays
    are ``[items, ...]`` with the remaining dims equal to the spec shape without its batch axis; scalar
    inputs may be given as a 0-d array (used for every batch) and otherwise come from ``spec.value``.
    Leftover items (fewer than ``batch_size``) are dropped. The file is checked from its headers first
    (:func:`check_sample_data`), then only the items of the batches used are read (:func:`_array_items`:
    a ``.npy`` memory-mapped, an ``.npz`` member streamed; never a pickle). Keys in ``ignore`` (the labels
    array under ``--labels KEY``, :mod:`sparsify_tui.analysis.labels`) and the default labels key ``labels``
    (unless an input has that name) are not inputs and are skipped.

    Returns:
        A list of feeds ``{input name: array}``, one per batch.

    Raises:
        SampleDataError: as :func:`check_sample_data`, a damaged or truncated file, or integer values that do
            not fit the input's dtype.
    """
    p = Path(path)
    n_batches = check_sample_data(p, specs, batch_size, ignore, max_batches=max_batches)
    if max_batches:
        n_batches = min(n_batches, int(max_batches))
    skip = _not_inputs(specs, ignore)
    tensors = [s for s in specs if s.kind != "scalar"]
    headers = {k: v for k, v in inspect_sample_data(p).items() if k not in skip}
    by_name = {s.name: s for s in specs}
    arrays: dict[str, np.ndarray] = {}
    if None in headers:
        arrays[tensors[0].name] = _array_items(p, None, n_batches * batch_size)
    else:
        with _open_npz(p) as zf:
            for name, (shape, _dt) in headers.items():
                s = by_name.get(name)
                rows = None if s is None or s.kind == "scalar" or len(s.shape) == 0 else n_batches * batch_size
                arrays[name] = _array_items(p, f"{name}.npy", rows, zf)
    fixed: dict[str, np.ndarray] = {}
    counts = {}
    for s in specs:
        if s.name not in arrays:
            fixed[s.name] = np.array(s.value, dtype=s.dtype)
            continue
        a = _check_dtype(arrays[s.name], s)
        if s.kind == "scalar" or len(s.shape) == 0:
            fixed[s.name] = a.reshape(())
            continue
        counts[s.name] = a.shape[0]
        arrays[s.name] = a
    batches = []
    for b in range(n_batches):
        feed = {name: arrays[name][b * batch_size:(b + 1) * batch_size] for name in counts}
        feed.update(fixed)
        batches.append(feed)
    return batches


def sample_data_warnings(batches: list[dict]) -> list[str]:
    """Warnings for NaN/Inf values in sample data (probably a broken export of the data): one per input."""
    bad: dict[str, list[int]] = {}
    for feed in batches:
        for name, a in feed.items():
            a = np.asarray(a)
            if a.dtype.kind == "f" and a.size:
                n = int(a.size - np.count_nonzero(np.isfinite(a)))
                tot = bad.setdefault(name, [0, 0])
                tot[0] += n
                tot[1] += int(a.size)
    return [f"sample data input '{name}' has {n:,} NaN/Inf values out of {size:,}: the measured numbers may be "
            "meaningless; check how the data was made" for name, (n, size) in bad.items() if n]


def _check_kind(dtype: np.dtype, s: InputSpec) -> None:
    """Refuse a sample array whose dtype kind cannot become the input's dtype (header-level check)."""
    if dtype == s.dtype or dtype.kind == s.dtype.kind or (dtype.kind in "iu" and s.dtype.kind in "iu"):
        return
    raise SampleDataError(f"sample input '{s.name}' is {dtype.name}, the model needs {s.dtype.name}: "
                          f"save it as {s.dtype.name}")


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
