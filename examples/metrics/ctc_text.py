"""Text metrics of a CTC text recognizer, for ``--metric FILE.py:FUNCTION``: text accuracy and character error rate.

    --metric examples/metrics/ctc_text.py:cer            # character error rate (lower is better)
    --metric examples/metrics/ctc_text.py:text_accuracy  # exact-match rate of whole lines (higher is better)

sparsify-tui calls each as ``FUNCTION(outputs, reference, labels)`` and budgets its worsening against the FP32
model (``--max-drop 0.01`` with ``cer``: the CER may rise by at most 1 point).

* ``outputs[0]``: the recognizer's CTC output, ``[items, steps, classes]`` (probabilities or logits). It is decoded
  greedily, as PaddleOCR's ``CTCLabelDecode`` does: the best class per step, repeats merged, the blank (class 0)
  dropped; class ``i`` is the character ``characters()[i]``.
* ``labels``: the true texts as Unicode code points, ``int [items, longest]`` padded with -1, which
  ``sparsify-tui data images DIR --labels texts.csv --text-labels`` writes from a CSV of ``file,text`` rows. Without
  labels the FP32 model's own decoded texts are the truth: the metric then says how much the optimized model's text
  differs from the original's.

CER = the edit (Levenshtein) distance between the decoded and the true text, summed over the items, divided by the
total length of the true texts (corpus-level, as most OCR evaluations report it; an empty truth counts its predicted
characters as insertions). Text accuracy = the share of items decoded exactly. Spaces are left out of both texts
before comparing (``IGNORE_SPACE``, PaddleOCR's ``RecMetric`` default: a recognizer often reads the padding or the
margins as spaces).

**The character dictionary.** Class ``i`` means a character only through the model's dictionary, so the metric needs
it. ``DICTIONARY`` (below, or the environment variable ``CTC_DICTIONARY``; a relative path is relative to this file)
names either the recognizer's ``.onnx`` file, whose metadata ``character`` holds one character a line (PaddleOCR
models converted by paddle2onnx, e.g. RapidOCR's ``ch_PP-OCRv4_rec_infer.onnx``), or a text file with one character
a line (PaddleOCR's ``ppocr_keys_v1.txt``). As PaddleOCR does, index 0 is the CTC blank and a space is appended at
the end (``use_space_char``): ``["<blank>"] + lines + [" "]``. Copy this file and change ``DICTIONARY`` (or
``SPACE_CHAR``) for your model.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

#: the dictionary: a recognizer .onnx (metadata ``character``) or a text file, one character a line
DICTIONARY = os.environ.get("CTC_DICTIONARY", "ch_PP-OCRv4_rec_infer.onnx")
#: PaddleOCR's use_space_char: a space is the last class
SPACE_CHAR = True
#: the CTC blank's class index
BLANK = 0
#: compare the texts without their spaces (PaddleOCR's RecMetric ignore_space, default True)
IGNORE_SPACE = True

_CHARACTERS: dict = {}  # dictionary path -> its characters (loaded once per process)


def characters(dictionary=None) -> list:
    """The class -> character list of ``dictionary`` (default :data:`DICTIONARY`): ``[blank] + lines (+ " ")``."""
    path = Path(dictionary or DICTIONARY).expanduser()
    if not path.is_absolute():
        path = Path(__file__).resolve().parent / path
    key = str(path)
    if key not in _CHARACTERS:
        if not path.is_file():
            raise FileNotFoundError(f"no character dictionary at {path}: set CTC_DICTIONARY to the recognizer's .onnx "
                                    "or a one-character-a-line text file")
        if path.suffix.lower() == ".onnx":
            import onnx

            meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
            if "character" not in meta:
                raise ValueError(f"{path.name} has no 'character' metadata: give a dictionary text file instead")
            lines = meta["character"].splitlines()
        else:
            lines = path.read_text(encoding="utf-8").splitlines()
        _CHARACTERS[key] = ["<blank>"] + lines + ([" "] if SPACE_CHAR else [])
    return _CHARACTERS[key]


def decode(scores: np.ndarray, chars=None) -> list:
    """Greedy CTC decoding of ``[items, steps, classes]`` scores: one text per item (best class per step, repeats
    merged, the blank dropped). ``chars``: the class -> character list (default :func:`characters`)."""
    chars = characters() if chars is None else chars
    best = np.asarray(scores).argmax(axis=-1)
    texts = []
    for row in best.reshape(best.shape[0], -1):
        keep = np.ones(len(row), bool)
        keep[1:] = row[1:] != row[:-1]
        keep &= row != BLANK
        texts.append("".join(chars[i] if i < len(chars) else "" for i in row[keep]))
    return texts


def label_texts(labels: np.ndarray) -> list:
    """The texts of code-point labels, ``int [items, longest]`` padded with -1 (negative values are padding)."""
    rows = np.asarray(labels).reshape(len(labels), -1)
    return ["".join(chr(int(c)) for c in row if c >= 0) for row in rows]


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: the fewest insertions, deletions and substitutions turning ``a`` into ``b``."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _texts(outputs, reference, labels) -> tuple:
    """``(predicted texts, true texts)``: the outputs decoded, the labels' texts (else the reference decoded)."""
    predicted = decode(outputs[0])
    truth = label_texts(labels) if labels is not None else decode(reference[0])
    if len(truth) != len(predicted):
        raise ValueError(f"{len(truth)} labels for {len(predicted)} items")
    if IGNORE_SPACE:
        predicted, truth = [p.replace(" ", "") for p in predicted], [t.replace(" ", "") for t in truth]
    return predicted, truth


def cer(outputs, reference, labels) -> float:
    """Character error rate (module docstring): total edit distance / total true characters. 0 is perfect."""
    predicted, truth = _texts(outputs, reference, labels)
    errors = sum(edit_distance(p, t) for p, t in zip(predicted, truth))
    return errors / max(1, sum(len(t) for t in truth))


cer.higher_is_better = False


def text_accuracy(outputs, reference, labels) -> float:
    """Share of items whose decoded text equals the true text exactly (0..1)."""
    predicted, truth = _texts(outputs, reference, labels)
    return float(np.mean([p == t for p, t in zip(predicted, truth)])) if truth else 0.0


text_accuracy.higher_is_better = True
