"""Sample sets from an image folder, and what a sample set holds: ``sparsify-tui data images`` and ``data show``.

:func:`build_image_set` turns a folder of images into the ``.npz`` every measuring command takes (``--data``): one
array of preprocessed items under the model's input name, the labels under ``labels`` and, for class labels, the
class names under ``class_names`` (a fixed-width unicode array, ``class_names[label]``; ``np.load`` reads it
without pickle). :func:`summarize` reads one back: arrays, shapes, dtypes, value ranges, the label histogram and
class names; :func:`summary_line` words it in one line (the CLI and the TUI's data-file fields show the same line);
:func:`fit_problem` says whether it fits a model's inputs (:func:`sparsify_tui.analysis.run_inputs.check_run_inputs`,
the check every job runs before it starts).

**Labels** (``labels``):

* ``"folders"``: one subfolder per class, as ImageNet and torchvision's ``ImageFolder`` lay them out. The class
  index is the position of the folder's name in the sorted list of subfolders (``ImageFolder``'s rule, so the
  indices match a model trained on it); images are found at any depth inside a class folder.
* a CSV file: rows ``file,label`` (a header row ``file,label`` is skipped; ``file`` relative to the image folder or
  absolute). Labels that are all whole numbers are class indices as they are; names become indices into their sorted
  list, stored as ``class_names``. ``text_labels``: each label is a text (a text recognizer's transcript), stored as
  its Unicode code points, ``int32 [items, longest]`` padded with -1, for a metric of one's own
  (``--metric FILE.py:FUNCTION``).
* ``"none"``: no labels (metrics compare with the FP32 model).
* None: ``"folders"`` when the folder's images are in subfolders, ``"none"`` when they are at its top level.

**Preprocessing** (:class:`ImageRecipe`), per image, in this order: decode with Pillow, convert to RGB (``L`` for a
1-channel input); geometry: ``pad`` (height H, width ``ceil(H·w/h)`` capped at W, right-padded: PaddleOCR's text
recognizer rule, ``resize_norm_img``), else ``resize_shorter`` N (the shorter side to N, aspect kept) then
``center_crop`` H×W, else ``center_crop`` alone, else a plain resize to H×W (``size``), else none (every image must
then have one size); bilinear resampling. Then the channel order (``bgr``), ``x · scale`` (default 1/255), then
``(x − mean) / std`` per channel of the stored order, the padding (zeros, after normalization), and the layout
(``nchw`` or ``nhwc``). An integer input dtype (uint8 images) stores the pixel values 0..255 as they are.

Items are shuffled (``seed``) before ``limit`` is taken, so the first items (the calibration items of apply and
the searches: :func:`sparsify_tui.analysis.labels.split_items`) are not all of the first class.

Errors are one line (``SampleDataError``): no images, a file Pillow cannot read, mixed sizes without a size, a class
folder with fewer than 2 images (one to calibrate, one to score), a CSV naming a missing file, Pillow missing. The
``.npz`` is written to a temp file and renamed (:func:`sparsify_tui.tempfiles.atomic_output`): a failure leaves
nothing behind.
"""

from __future__ import annotations

import csv
import math
import os
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from sparsify_tui.analysis.inputs import CLASS_NAMES_KEY, DEFAULT_LABELS_KEY
from sparsify_tui.errors import SampleDataError
from sparsify_tui.formatting import plural
from sparsify_tui.progress import CancelToken, ProgressFn, maybe_check

PILLOW_MISSING = ("reading images needs Pillow, an optional extra: pip install 'sparsify-tui[data]' "
                  "(or pip install pillow)")
"""The one-line error when Pillow is not installed."""
LAYOUTS = ("nchw", "nhwc")
DEFAULT_INPUT_NAME = "input"
"""The array name of the items without ``--project`` or ``--input-name``."""
#: labels smaller than this many classes get a full histogram in :func:`summary_line`; more are summarized
HISTOGRAM_SHOWN = 6
#: the value ranges of :func:`summarize` are read only from files up to this size (bytes); larger: headers only
RANGE_BYTES = 1 << 28


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise SampleDataError(PILLOW_MISSING) from None
    return Image


def image_extensions() -> frozenset:
    """The file extensions Pillow can open (lower case, with the dot)."""
    Image = _pil()
    Image.init()
    return frozenset(ext.lower() for ext in Image.registered_extensions())


# ------------------------------------------------------------------------------------------ preprocessing


@dataclass
class ImageRecipe:
    """How one image becomes one item (module docstring for the order). ``size`` ``(H, W)`` in pixels (None:
    the images' own size, which must then be one size); ``resize_shorter`` (pixels); ``center_crop``; ``pad``;
    ``mean`` / ``std`` (one value, or one per channel of the stored order; None: 0 and 1); ``scale``; ``layout``
    (``"nchw"`` or ``"nhwc"``); ``bgr``; ``channels`` (3, or 1 for grayscale); ``dtype`` (numpy dtype name)."""

    size: Optional[Tuple[int, int]] = None
    resize_shorter: Optional[int] = None
    center_crop: bool = False
    pad: bool = False
    mean: Optional[Tuple[float, ...]] = None
    std: Optional[Tuple[float, ...]] = None
    scale: float = 1.0 / 255.0
    layout: str = "nchw"
    bgr: bool = False
    channels: int = 3
    dtype: str = "float32"

    @property
    def integer(self) -> bool:
        """The items are stored as whole pixel values (an integer input dtype)."""
        return np.dtype(self.dtype).kind in "iu"

    def check(self) -> None:
        """Refuse settings that contradict each other (one line, ``SampleDataError``)."""
        if self.layout not in LAYOUTS:
            raise SampleDataError(f"--layout {self.layout!r} is not allowed: use nchw or nhwc")
        if self.channels not in (1, 3):
            raise SampleDataError(f"the input has {self.channels} channels: images give 1 (grayscale) or 3 (RGB)")
        if self.size is not None and (len(self.size) != 2 or min(self.size) < 1):
            raise SampleDataError(f"--size {self.size} is not allowed: give H,W in pixels, e.g. --size 224,224")
        if self.resize_shorter is not None and self.resize_shorter < 1:
            raise SampleDataError(f"--resize-shorter {self.resize_shorter} is not allowed: give a size in pixels, "
                                  "e.g. 256")
        if self.pad and (self.center_crop or self.resize_shorter):
            raise SampleDataError("--pad resizes to the height and pads the width: drop --resize-shorter and "
                                  "--center-crop")
        if (self.pad or self.center_crop) and self.size is None:
            what = "--pad" if self.pad else "--center-crop"
            raise SampleDataError(f"{what} needs --size H,W (or --project P, whose input gives it)")
        if self.resize_shorter and self.size is not None and not self.center_crop:
            raise SampleDataError("--resize-shorter with --size needs --center-crop (resize, then crop H,W from the "
                                  "middle), or drop --resize-shorter to resize straight to H,W")
        if not math.isfinite(self.scale) or self.scale <= 0:
            raise SampleDataError(f"--scale {self.scale} is not allowed: give a positive factor, e.g. 1/255")
        for flag, vals in (("--mean", self.mean), ("--std", self.std)):
            if vals is None:
                continue
            if len(vals) not in (1, self.channels):
                raise SampleDataError(f"{flag} has {len(vals)} values: give 1 or {self.channels} (one per channel)")
            if not all(math.isfinite(v) for v in vals):
                raise SampleDataError(f"{flag} {','.join(map(str, vals))} is not allowed: give finite numbers")
        if self.std is not None and any(v == 0 for v in self.std):
            raise SampleDataError("--std has a 0: the items would be divided by zero")
        if self.integer and (self.mean is not None or self.std is not None or self.scale != 1.0 / 255.0):
            raise SampleDataError(f"the input is {self.dtype}: its items are the pixel values 0..255, so --mean, "
                                  "--std and --scale do not apply; drop them")

    def describe(self) -> str:
        """The recipe in words, e.g. "resize 224x224, x/255, mean 0.485,0.456,0.406, std ..., RGB, NCHW float32"."""
        parts = []
        if self.pad:
            parts.append(f"height {self.size[0]}, width by the ratio up to {self.size[1]}, padded right")
        elif self.resize_shorter:
            parts.append(f"shorter side {self.resize_shorter}")
        if self.center_crop:
            parts.append(f"center crop {self.size[0]}x{self.size[1]}")
        elif not self.pad and self.size is not None:
            parts.append(f"resize {self.size[0]}x{self.size[1]}")
        if not self.integer:
            parts.append(f"x*{self.scale:.6g}")
            if self.mean is not None:
                parts.append("mean " + ",".join(f"{v:g}" for v in self.mean))
            if self.std is not None:
                parts.append("std " + ",".join(f"{v:g}" for v in self.std))
        parts.append("gray" if self.channels == 1 else ("BGR" if self.bgr else "RGB"))
        parts.append(f"{self.layout.upper()} {self.dtype}")
        return ", ".join(parts)

    def apply(self, img, name: str = "image") -> np.ndarray:
        """One item from a Pillow image: ``[C, H, W]`` (nchw) or ``[H, W, C]`` (nhwc), :attr:`dtype`. Raises
        ``SampleDataError`` when the image is smaller than the crop (``name`` in the message)."""
        Image = _pil()
        img = img.convert("L" if self.channels == 1 else "RGB")
        bilinear = Image.Resampling.BILINEAR
        width = None  # the resized width under pad
        if self.pad:
            h, w = self.size
            width = max(1, min(w, int(math.ceil(h * img.width / max(1, img.height)))))
            img = img.resize((width, h), bilinear)
        else:
            if self.resize_shorter:
                s = self.resize_shorter / min(img.width, img.height)
                img = img.resize((max(1, round(img.width * s)), max(1, round(img.height * s))), bilinear)
            if self.center_crop:
                h, w = self.size
                if img.width < w or img.height < h:
                    raise SampleDataError(f"{name} is {img.width}x{img.height} (after any resize), smaller than the "
                                          f"crop {w}x{h}: give --resize-shorter {max(h, w)} or a smaller --size")
                left, top = (img.width - w) // 2, (img.height - h) // 2
                img = img.crop((left, top, left + w, top + h))
            elif self.size is not None and not self.resize_shorter:
                h, w = self.size
                if (img.height, img.width) != (h, w):
                    img = img.resize((w, h), bilinear)
        x = np.asarray(img)
        if x.ndim == 2:
            x = x[:, :, None]
        if self.bgr and x.shape[-1] == 3:
            x = x[:, :, ::-1]
        if self.integer:
            x = x.astype(self.dtype)
        else:
            x = x.astype(np.float32) * np.float32(self.scale)
            if self.mean is not None:
                x = x - np.asarray(self.mean, np.float32)
            if self.std is not None:
                x = x / np.asarray(self.std, np.float32)
            x = x.astype(self.dtype)
        if width is not None and width < self.size[1]:
            full = np.zeros((self.size[0], self.size[1], x.shape[-1]), x.dtype)
            full[:, :width] = x
            x = full
        return np.ascontiguousarray(x.transpose(2, 0, 1) if self.layout == "nchw" else x)


def parse_scale(text: Union[str, float, None]) -> float:
    """``"1/255"``, ``"0.5"`` or a number as a float (None: 1/255). Raises ``SampleDataError``."""
    if text is None:
        return 1.0 / 255.0
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text).strip()
    try:
        if "/" in s:
            a, b = s.split("/", 1)
            return float(a) / float(b)
        return float(s)
    except (ValueError, ZeroDivisionError):
        raise SampleDataError(f"--scale {text!r} is not a number: give e.g. 1/255 or 0.0039") from None


def parse_floats(text: Optional[str], flag: str) -> Optional[Tuple[float, ...]]:
    """``"0.485,0.456,0.406"`` as a tuple of floats (None stays None). Raises ``SampleDataError``."""
    if text in (None, ""):
        return None
    try:
        return tuple(float(v) for v in str(text).replace(" ", "").split(",") if v != "")
    except ValueError:
        raise SampleDataError(f"{flag} {text!r} is not a list of numbers: give e.g. {flag} 0.485,0.456,0.406") from None


def parse_size(text: Optional[str]) -> Optional[Tuple[int, int]]:
    """``"224,224"`` (or ``224x224``, or one number for a square) as ``(H, W)``. Raises ``SampleDataError``."""
    if text in (None, ""):
        return None
    parts = str(text).lower().replace("x", ",").replace(" ", "").split(",")
    try:
        vals = [int(p) for p in parts if p != ""]
    except ValueError:
        vals = []
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2 or min(vals) < 1:
        raise SampleDataError(f"--size {text!r} is not H,W: give the height and width in pixels, e.g. --size 224,224")
    return vals[0], vals[1]


# ------------------------------------------------------------------------------------------ the model's input


@dataclass
class ModelImageInput:
    """What a model's image input asks of a sample set: ``name``, ``size`` ``(H, W)`` (None when a dim is
    symbolic and unset), ``layout``, ``channels``, ``dtype``."""

    name: str
    size: Optional[Tuple[int, int]]
    layout: str
    channels: int
    dtype: str


def model_image_input(model_path: Union[str, os.PathLike], dims: Optional[dict] = None) -> ModelImageInput:
    """The image input of a model (its one rank-4 input; channels 1 or 3 at axis 1 give NCHW, at axis 3 NHWC),
    its spatial size resolved with ``dims`` (the project's ``--dim`` values; a dim left symbolic gives
    ``size`` None). Raises ``SampleDataError`` when the model has no rank-4 input, or several, or none with 1 or 3
    channels; ``ModelError`` when it cannot be loaded."""
    from sparsify_tui.analysis.inputs import input_specs
    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.analysis.shapes import graph_inputs
    from sparsify_tui.errors import DimensionError

    model = load_model(model_path, load_external_data=False)
    rank4 = [vi for vi in graph_inputs(model) if len(vi.type.tensor_type.shape.dim) == 4]
    if len(rank4) != 1:
        names = ", ".join(vi.name for vi in graph_inputs(model)) or "none"
        raise SampleDataError(f"the model's inputs ({names}) hold {'no' if not rank4 else 'several'} image input(s) "
                              "of rank 4: data images makes one image input; give --input-name and --size yourself")
    vi = rank4[0]
    raw = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
    try:
        spec = next(s for s in input_specs(model, 1, dims or {}) if s.name == vi.name)
        shape: List[Optional[int]] = list(spec.shape)
        dtype = np.dtype(spec.dtype).name
    except DimensionError:
        shape = raw
        import onnx

        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)).name
    if shape[1] in (1, 3):
        layout, channels, hw = "nchw", int(shape[1]), (shape[2], shape[3])
    elif shape[3] in (1, 3):
        layout, channels, hw = "nhwc", int(shape[3]), (shape[1], shape[2])
    else:
        raise SampleDataError(f"input '{vi.name}' has shape {shape}: neither axis 1 nor axis 3 holds 1 or 3 "
                              "channels, so it is not an image input data images can fill")
    size = (int(hw[0]), int(hw[1])) if all(isinstance(v, int) and v > 0 for v in hw) else None
    return ModelImageInput(vi.name, size, layout, channels, dtype)


# ------------------------------------------------------------------------------------------ finding the images


@dataclass
class Listing:
    """The images of a folder and their labels, before reading any: ``files``, ``labels`` (one per file: an int
    class index, a text, or None), ``kind`` (``"folders"``, ``"csv"``, ``"text"`` or None: no labels),
    ``class_names`` (index order; empty without names), ``skipped`` (files that are not images)."""

    files: List[Path]
    labels: List[Any]
    kind: Optional[str]
    class_names: List[str] = field(default_factory=list)
    skipped: int = 0


def _walk(folder: Path, exts: frozenset) -> Tuple[List[Path], int]:
    """Image files under ``folder`` at any depth (sorted, hidden files and folders left out) and the count of other
    files."""
    found, other = [], 0
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            if f.startswith("."):
                continue
            if os.path.splitext(f)[1].lower() in exts:
                found.append(Path(root) / f)
            else:
                other += 1
    return found, other


def list_images(folder: Union[str, os.PathLike], labels: Optional[str] = None, *,
                text_labels: bool = False) -> Listing:
    """The images of ``folder`` and their labels (module docstring, **Labels**). Raises ``SampleDataError``: the
    folder is missing, holds no images, a class folder has no image or one, the CSV is unreadable, malformed or
    names a missing file; ``text_labels`` without a CSV."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise SampleDataError(f"{folder} is not a folder: give the folder of your images")
    exts = image_extensions()
    if text_labels and (labels in (None, "folders", "none")):
        raise SampleDataError("--text-labels reads the texts from a CSV: give --labels FILE.csv (rows file,text)")
    if labels not in (None, "folders", "none"):
        return _csv_listing(root, Path(labels).expanduser(), exts, text_labels)
    top = sorted(p for p in root.iterdir() if not p.name.startswith("."))
    top_images = [p for p in top if p.is_file() and p.suffix.lower() in exts]
    subdirs = [p for p in top if p.is_dir()]
    if labels is None:
        with_images = [d for d in subdirs if _walk(d, exts)[0]]
        if with_images and top_images:
            raise SampleDataError(f"{folder} holds images both at its top level ({top_images[0].name}...) and in "
                                  f"subfolders ({with_images[0].name}/...): give --labels folders (one subfolder per "
                                  "class) or --labels none (every image, no labels)")
        labels = "folders" if with_images else "none"
    if labels == "none":
        files, other = _walk(root, exts)
        if not files:
            raise SampleDataError(f"no images in {folder} (none of {other} file(s) is an image Pillow reads): give "
                                  "the folder of your .jpg/.png files")
        return Listing(files, [None] * len(files), None, [], other)
    if not subdirs:
        raise SampleDataError(f"--labels folders: {folder} has no subfolders; put each class's images in a subfolder "
                              "named after the class, or give --labels FILE.csv")
    files, labs, names, skipped = [], [], [], sum(1 for p in top if p.is_file())
    for idx, d in enumerate(subdirs):
        found, other = _walk(d, exts)
        skipped += other
        if len(found) < 2:
            raise SampleDataError(f"class folder {d.name}/ holds {plural(len(found), 'image')}: a class needs at "
                                  "least 2 (items calibrate and others are scored); add images or remove the folder")
        names.append(d.name)
        files += found
        labs += [idx] * len(found)
    return Listing(files, labs, "folders", names, skipped)


def _csv_rows(path: Path) -> List[List[str]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            return [row for row in csv.reader(fh) if any(c.strip() for c in row)]
    except FileNotFoundError:
        raise SampleDataError(f"--labels {path}: no such file: give a CSV of file,label rows, or folders") from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise SampleDataError(f"--labels {path} cannot be read ({err}): save it as UTF-8 CSV rows file,label") from None


def _csv_listing(root: Path, path: Path, exts: frozenset, text_labels: bool) -> Listing:
    rows = _csv_rows(path)
    if rows and rows[0] and rows[0][0].strip().lower() in ("file", "filename", "path", "image", "name") and \
            len(rows[0]) > 1 and rows[0][1].strip().lower() in ("label", "class", "text", "labels", "target"):
        rows = rows[1:]
    if not rows:
        raise SampleDataError(f"--labels {path} has no rows: give one row file,label per image")
    files, raw = [], []
    for n, row in enumerate(rows, 1):
        if len(row) < 2 or not row[0].strip():
            raise SampleDataError(f"--labels {path.name} row {n} is {','.join(row)!r}, not file,label: give two "
                                  "columns (quote a label that holds commas)")
        f = Path(row[0].strip()).expanduser()
        f = f if f.is_absolute() else root / f
        if not f.is_file():
            raise SampleDataError(f"--labels {path.name} row {n} names {row[0].strip()}, which is not in {root}: fix "
                                  "the row or add the file")
        if f.suffix.lower() not in exts:
            raise SampleDataError(f"--labels {path.name} row {n} names {f.name}, which is not an image Pillow reads")
        label = ",".join(row[1:]) if text_labels else row[1].strip()
        if not text_labels and label == "":
            raise SampleDataError(f"--labels {path.name} row {n} has an empty label: give a class name or index")
        files.append(f)
        raw.append(label)
    if text_labels:
        return Listing(files, raw, "text")
    if all(r.lstrip("-").isdigit() for r in raw):
        ints = [int(r) for r in raw]
        if min(ints) < 0:
            raise SampleDataError(f"--labels {path.name} has class index {min(ints)}: class indices start at 0")
        return Listing(files, ints, "csv")
    names = sorted(set(raw))
    index = {c: i for i, c in enumerate(names)}
    return Listing(files, [index[r] for r in raw], "csv", names)


# ------------------------------------------------------------------------------------------ building the set


@dataclass
class BuiltSet:
    """What :func:`build_image_set` wrote: ``path``, ``input_name``, ``items``, ``shape`` (of the whole array) and
    ``dtype``, ``value_min`` / ``value_max``, ``labels`` (the label kind, None without), ``classes`` (class names;
    empty without), ``skipped`` (non-image files), ``recipe`` (in words), ``source`` (the folder), ``seconds``."""

    path: str
    input_name: str
    items: int
    shape: List[int]
    dtype: str
    value_min: float
    value_max: float
    labels: Optional[str]
    classes: List[str]
    skipped: int
    recipe: str
    source: str
    seconds: float

    def summary_line(self) -> str:
        """One line: "wrote set.npz: 200 items of imgs/, x float32 [200, 3, 224, 224] in [-2.12, 2.64]; labels: 10
        classes from folders; 3.1 s"."""
        lab = {"folders": f"{plural(len(self.classes), 'class', 'classes')} from folders",
               "csv": (f"{plural(len(self.classes), 'class', 'classes')} from the CSV" if self.classes
                       else "class indices from the CSV"),
               "text": "texts from the CSV (code points, padded with -1)"}.get(self.labels or "", "none")
        skipped = f"; skipped {plural(self.skipped, 'non-image file')}" if self.skipped else ""
        return (f"wrote {Path(self.path).name}: {plural(self.items, 'item')} of {self.source}, {self.input_name} "
                f"{self.dtype} {self.shape} in [{self.value_min:.4g}, {self.value_max:.4g}]; labels: {lab}{skipped}; "
                f"{self.seconds:.1f} s")

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


def _label_arrays(listing: Listing, order: Sequence[int]) -> Dict[str, np.ndarray]:
    """The ``labels`` (and ``class_names``) arrays of the items in ``order``."""
    if listing.kind is None:
        return {}
    labs = [listing.labels[i] for i in order]
    if listing.kind == "text":
        longest = max((len(t) for t in labs), default=0)
        arr = np.full((len(labs), max(1, longest)), -1, np.int32)
        for r, t in enumerate(labs):
            arr[r, :len(t)] = [ord(c) for c in t]
        return {DEFAULT_LABELS_KEY: arr}
    out = {DEFAULT_LABELS_KEY: np.asarray(labs, np.int64)}
    if listing.class_names:
        out[CLASS_NAMES_KEY] = np.asarray(listing.class_names, dtype=f"<U{max(1, max(map(len, listing.class_names)))}")
    return out


def _open(Image, path: Path):
    try:
        img = Image.open(path)
        img.load()
        return img
    except Exception as err:  # noqa: BLE001 - UnidentifiedImageError, OSError (truncated), DecompressionBombError...
        why = str(err).splitlines()[0][:100] if str(err) else type(err).__name__
        raise SampleDataError(f"{path} cannot be read as an image ({why}): remove it or replace it") from None


def _image_size(Image, path: Path) -> Tuple[int, int]:
    """``(width, height)`` from the header (no decode). Raises ``SampleDataError`` for a file Pillow cannot open."""
    try:
        with Image.open(path) as img:
            return img.size
    except Exception as err:  # noqa: BLE001
        why = str(err).splitlines()[0][:100] if str(err) else type(err).__name__
        raise SampleDataError(f"{path} cannot be read as an image ({why}): remove it or replace it") from None


def _check_one_size(sizes: Dict[Tuple[int, int], Path], recipe: ImageRecipe) -> None:
    if recipe.size is None and not recipe.resize_shorter and len(sizes) > 1:
        (a, pa), (b, pb) = list(sizes.items())[:2]
        raise SampleDataError(f"the images have {len(sizes)} different sizes ({a[0]}x{a[1]} in {pa.name}, {b[0]}x{b[1]} "
                              f"in {pb.name}): give --size H,W (or --project P) to resize them to one")


def _npy_header(shape: Tuple[int, ...], dtype: np.dtype) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_2_0(buf, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                               "fortran_order": False, "shape": tuple(int(d) for d in shape)})
    return buf.getvalue()


def build_image_set(folder: Union[str, os.PathLike], out_path: Union[str, os.PathLike], recipe: ImageRecipe, *,
                    input_name: str = DEFAULT_INPUT_NAME, labels: Optional[str] = None, text_labels: bool = False,
                    limit: Optional[int] = None, seed: int = 0, progress: Optional[ProgressFn] = None,
                    cancel: Optional[CancelToken] = None) -> BuiltSet:
    """Write ``out_path`` (``.npz``): the images of ``folder`` preprocessed by ``recipe`` under ``input_name``
    (``[items, ...]``), their labels under ``labels`` and the class names under ``class_names`` (module docstring).
    Items are shuffled with ``seed``, then the first ``limit`` kept. The arrays are streamed into the file one
    item at a time (memory: one image), into a temp file renamed at the end.

    Returns :class:`BuiltSet`. Raises ``SampleDataError`` (module docstring), ``SparsifyError`` (the output cannot
    be written), ``JobCanceled``."""
    from sparsify_tui.tempfiles import atomic_output

    t0 = time.perf_counter()
    prog = progress or (lambda step, frac: None)
    recipe.check()
    if not input_name or input_name in (DEFAULT_LABELS_KEY, CLASS_NAMES_KEY):
        raise SampleDataError(f"--input-name {input_name!r} is not allowed: give the model input's name")
    if limit is not None and int(limit) < 1:
        raise SampleDataError(f"--limit {limit} is not allowed: give 1 or more items")
    out = Path(out_path)
    if out.suffix.lower() != ".npz":
        raise SampleDataError(f"-o {out_path}: the sample set is an .npz file; name it e.g. {out.with_suffix('.npz').name}")
    Image = _pil()
    listing = list_images(folder, labels, text_labels=text_labels)
    order = list(np.random.default_rng(int(seed)).permutation(len(listing.files)))
    if limit is not None:
        order = order[: int(limit)]
    files = [listing.files[i] for i in order]
    sizes: Dict[Tuple[int, int], Path] = {}
    for k, f in enumerate(files):
        maybe_check(cancel)
        sizes.setdefault(_image_size(Image, f), f)
        if k % 64 == 0:
            prog(f"checking {plural(len(files), 'image')}", 0.1 * k / len(files))
    _check_one_size(sizes, recipe)
    first = recipe.apply(_open(Image, files[0]), str(files[0]))
    shape = (len(files),) + first.shape
    need = int(np.prod(shape, dtype=np.int64)) * first.dtype.itemsize
    lab_arrays = _label_arrays(listing, order)
    lo, hi = math.inf, -math.inf
    with atomic_output([out]) as (tmp,):
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            with zf.open(f"{input_name}.npy", "w", force_zip64=need > (1 << 31)) as fh:
                fh.write(_npy_header(shape, first.dtype))
                for k, f in enumerate(files):
                    maybe_check(cancel)
                    x = first if k == 0 else recipe.apply(_open(Image, f), str(f))
                    if x.shape != first.shape:
                        raise SampleDataError(f"{f.name} gives an item of shape {list(x.shape)} and {files[0].name} "
                                              f"{list(first.shape)}: give --size H,W (with --center-crop after "
                                              "--resize-shorter) so every image gives one shape")
                    if x.size:
                        lo, hi = min(lo, float(x.min())), max(hi, float(x.max()))
                    fh.write(x.tobytes())
                    if k % 16 == 0 or k == len(files) - 1:
                        prog(f"reading images ({k + 1}/{len(files)})", 0.1 + 0.88 * (k + 1) / len(files))
            for key, arr in lab_arrays.items():
                with zf.open(f"{key}.npy", "w") as fh:
                    np.lib.format.write_array(fh, arr, allow_pickle=False)
    prog("done", 1.0)
    return BuiltSet(path=str(out), input_name=input_name, items=len(files), shape=list(shape),
                    dtype=first.dtype.name, value_min=lo, value_max=hi, labels=listing.kind,
                    classes=list(listing.class_names), skipped=listing.skipped, recipe=recipe.describe(),
                    source=str(folder), seconds=round(time.perf_counter() - t0, 2))


# ------------------------------------------------------------------------------------------ reading a set back


@dataclass
class ArrayInfo:
    """One array of a sample set: ``name``, ``shape``, ``dtype`` (name), ``min`` / ``max`` (None: not numeric, or
    not read: the file is larger than :data:`RANGE_BYTES`), ``nonfinite`` (NaN/Inf count, None when not read)."""

    name: str
    shape: List[int]
    dtype: str
    min: Optional[float] = None
    max: Optional[float] = None
    nonfinite: Optional[int] = None


@dataclass
class SetSummary:
    """What a sample set holds (:func:`summarize`): ``path``, ``size_bytes``, ``items`` (leading dim of the first
    input array), ``arrays`` (:class:`ArrayInfo`, file order), ``labels`` (its :class:`ArrayInfo` or None),
    ``label_kind`` (``"classes"``: one index per item; ``"sequences"``: int rows padded with -1, e.g. texts as code
    points; ``"other"``), ``histogram`` (class index -> items, for class labels), ``sequence_lengths`` ``(min,
    max)`` for sequences, ``class_names`` (index order; empty without), ``ranges_read``."""

    path: str
    size_bytes: int
    items: int
    arrays: List[ArrayInfo]
    labels: Optional[ArrayInfo] = None
    label_kind: Optional[str] = None
    histogram: Dict[int, int] = field(default_factory=dict)
    sequence_lengths: Optional[Tuple[int, int]] = None
    class_names: List[str] = field(default_factory=list)
    ranges_read: bool = True

    @property
    def inputs(self) -> List[ArrayInfo]:
        """The arrays that are not labels or class names (the model inputs)."""
        return [a for a in self.arrays if a.name not in (DEFAULT_LABELS_KEY, CLASS_NAMES_KEY)]

    def class_name(self, index: int) -> str:
        return self.class_names[index] if 0 <= index < len(self.class_names) else str(index)

    def label_text(self) -> str:
        """The labels in words: "10 classes (cat 21, dog 20, ...)", "texts: 200 sequences of 3-41", or "none"."""
        if self.labels is None:
            return "none"
        if self.label_kind == "classes":
            counts = sorted(self.histogram.items(), key=lambda kv: (-kv[1], kv[0]))
            shown = ", ".join(f"{self.class_name(c)} {n}" for c, n in counts[:HISTOGRAM_SHOWN])
            more = ", ..." if len(counts) > HISTOGRAM_SHOWN else ""
            n = max(len(self.class_names), len(self.histogram))
            return f"{plural(n, 'class', 'classes')} ({shown}{more})"
        if self.label_kind == "sequences":
            a, b = self.sequence_lengths or (0, 0)
            return f"{self.labels.dtype} sequences of {a}-{b} (padded with -1: e.g. texts as code points)"
        return f"{self.labels.dtype} {self.labels.shape}"

    def line(self) -> str:
        """One line (the CLI's summary and the TUI's data-file fields): "set.npz: 200 items; x float32
        [200, 3, 224, 224] in [-2.1, 2.6]; labels: 10 classes (cat 21, ...)"."""
        parts = []
        for a in self.inputs:
            rng = f" in [{a.min:.4g}, {a.max:.4g}]" if a.min is not None else ""
            bad = f" ({a.nonfinite} NaN/Inf!)" if a.nonfinite else ""
            parts.append(f"{a.name} {a.dtype} {a.shape}{rng}{bad}")
        return (f"{Path(self.path).name}: {plural(self.items, 'item')}; " + "; ".join(parts)
                + f"; labels: {self.label_text()}")

    def to_dict(self) -> dict:
        from dataclasses import asdict

        d = asdict(self)
        d["histogram"] = {str(k): v for k, v in self.histogram.items()}
        return d


def _dtype_name(dt: np.dtype) -> str:
    """``float32``, ``int64``; ``str<=12`` for a fixed-width unicode array (up to 12 characters each)."""
    return f"str<={dt.itemsize // 4}" if dt.kind == "U" else dt.name


def summarize(path: Union[str, os.PathLike], *, ranges: bool = True) -> SetSummary:
    """Read what the sample set at ``path`` (``.npz`` or ``.npy``) holds: headers first (the one-line checks of
    :func:`sparsify_tui.analysis.inputs.inspect_sample_data`: damaged, pickled, truncated files), then the labels
    and class names, and with ``ranges`` (and a file up to :data:`RANGE_BYTES`) every numeric array's min, max and
    NaN/Inf count. Raises ``SampleDataError``."""
    from sparsify_tui.analysis.inputs import inspect_sample_data

    p = Path(path)
    headers = inspect_sample_data(p)
    size = p.stat().st_size
    read = ranges and size <= RANGE_BYTES
    arrays = [ArrayInfo(name if name is not None else "(.npy)", list(shape), _dtype_name(dt))
              for name, (shape, dt) in headers.items()]
    out = SetSummary(str(p), size, 0, arrays, ranges_read=read)
    need = [a.name for a in arrays if a.name in (DEFAULT_LABELS_KEY, CLASS_NAMES_KEY)] + \
        ([a.name for a in arrays] if read else [])
    loaded: Dict[str, np.ndarray] = {}
    if need:
        try:
            data = np.load(p, allow_pickle=False)
            if isinstance(data, np.ndarray):
                loaded = {"(.npy)": data}
            else:
                with data:
                    loaded = {k: data[k] for k in dict.fromkeys(need) if k in data.files}
        except Exception as err:  # noqa: BLE001 - a damaged member past a sound header
            raise SampleDataError(f"sample data {p.name} cannot be read ({str(err).splitlines()[0][:100]}): save it "
                                  "again with numpy.savez") from None
    for a in arrays:
        arr = loaded.get(a.name)
        if arr is None or arr.dtype.kind not in "biuf" or not arr.size:
            continue
        if arr.dtype.kind == "f":
            fin = np.isfinite(arr)
            a.nonfinite = int(arr.size - np.count_nonzero(fin))
            vals = arr[fin] if a.nonfinite else arr
            if vals.size:
                a.min, a.max = float(vals.min()), float(vals.max())
        else:
            a.min, a.max = float(arr.min()), float(arr.max())
    inputs = out.inputs
    out.items = int(inputs[0].shape[0]) if inputs and inputs[0].shape else 0
    lab = next((a for a in arrays if a.name == DEFAULT_LABELS_KEY), None)
    if lab is not None:
        out.labels = lab
        arr = loaded[DEFAULT_LABELS_KEY]
        if arr.dtype.kind in "iu" and (arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 1)) and \
                (not arr.size or arr.min() >= 0):
            out.label_kind = "classes"
            vals, counts = np.unique(arr.reshape(-1), return_counts=True)
            out.histogram = {int(v): int(c) for v, c in zip(vals, counts)}
        elif arr.dtype.kind in "iu" and arr.ndim == 2:
            out.label_kind = "sequences"
            lengths = (arr >= 0).sum(axis=1) if arr.size else np.zeros(1, int)
            out.sequence_lengths = (int(lengths.min()), int(lengths.max()))
        else:
            out.label_kind = "other"
    names = loaded.get(CLASS_NAMES_KEY)
    if names is not None:
        out.class_names = [str(v) for v in np.asarray(names).reshape(-1)]
    return out


def summary_line(path: Union[str, os.PathLike, None]) -> str:
    """The one-line summary of a sample data file for a data-file field (empty path: ""; a problem: the problem's
    one line). Never raises a ``SparsifyError``."""
    from sparsify_tui.errors import SparsifyError

    text = str(path or "").strip()
    if not text:
        return ""
    p = Path(text).expanduser()
    if not p.is_file():
        return f"{text}: no such file"
    try:
        return summarize(p).line()
    except SparsifyError as err:
        return str(err)


def fit_problem(path: Union[str, os.PathLike], model_path: Union[str, os.PathLike], *, dims: Optional[dict] = None,
                batch_size: int = 1, labels_key: Optional[str] = None, metric: Optional[str] = None) -> Optional[str]:
    """None when the sample set fits the model (its inputs, shapes and dtypes; its labels against the class output,
    or any labels for a metric of one's own), else the one-line reason: the check every measuring job runs before
    it starts (:func:`sparsify_tui.analysis.run_inputs.check_run_inputs`)."""
    from sparsify_tui.analysis.run_inputs import check_run_inputs
    from sparsify_tui.errors import SparsifyError

    try:
        check_run_inputs(model_path, batch_size, dims or {}, str(path), labels_key=labels_key, metric=metric,
                         scores_outputs=True)
    except SparsifyError as err:
        return str(err)
    return None


__all__ = ["PILLOW_MISSING", "LAYOUTS", "DEFAULT_INPUT_NAME", "ImageRecipe", "parse_scale", "parse_floats",
           "parse_size", "ModelImageInput", "model_image_input", "Listing", "list_images", "BuiltSet",
           "build_image_set", "ArrayInfo", "SetSummary", "summarize", "summary_line", "fit_problem",
           "image_extensions"]
