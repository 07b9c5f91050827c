"""The shipped example metrics (``examples/metrics/``, issue 31): run on fixed arrays with known answers, and through
sparsify-tui's own loader (``--metric FILE.py:FUNCTION``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from conftest import shared_model

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "metrics"


def _module(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ctc_scores(paths, classes):
    """One-hot CTC scores ``[items, steps, classes]`` from class-index paths (one list per item, equal lengths)."""
    out = np.zeros((len(paths), len(paths[0]), classes), np.float32)
    for i, path in enumerate(paths):
        out[i, np.arange(len(path)), path] = 1.0
    return out


def _codes(texts):
    longest = max(len(t) for t in texts)
    arr = np.full((len(texts), longest), -1, np.int32)
    for r, t in enumerate(texts):
        arr[r, :len(t)] = [ord(c) for c in t]
    return arr


@pytest.fixture
def ctc(tmp_path, monkeypatch):
    (tmp_path / "keys.txt").write_text("a\nb\nc\n", encoding="utf-8")
    mod = _module("ctc_text")
    monkeypatch.setattr(mod, "DICTIONARY", str(tmp_path / "keys.txt"))
    return mod


def test_ctc_decode_merges_repeats_and_drops_the_blank(ctc):
    assert ctc.characters() == ["<blank>", "a", "b", "c", " "]  # blank first, a space appended (PaddleOCR)
    # a a _ a b b _ -> "aab"; c _ _ c c _ space a -> "cc a"
    scores = _ctc_scores([[1, 1, 0, 1, 2, 2, 0, 0], [3, 0, 0, 3, 3, 0, 4, 1]], 5)
    assert ctc.decode(scores) == ["aab", "cc a"]
    assert ctc.edit_distance("kitten", "sitting") == 3 and ctc.edit_distance("", "ab") == 2


def test_ctc_cer_and_text_accuracy_known_values(ctc):
    ok = [1, 0, 2, 2]            # "ab"
    one_off = [1, 0, 3, 0]       # "ac" against "abc": one edit (b missing)
    outputs = [_ctc_scores([ok, one_off], 5)]
    labels = _codes(["ab", "abc"])
    assert ctc.cer(outputs, outputs, labels) == pytest.approx(1 / 5)  # 1 edit over 5 true characters
    assert ctc.text_accuracy(outputs, outputs, labels) == pytest.approx(0.5)
    assert ctc.cer.higher_is_better is False and ctc.text_accuracy.higher_is_better is True
    # without labels the reference's own text is the truth: the same outputs score perfectly
    assert ctc.cer(outputs, outputs, None) == 0.0
    changed = [_ctc_scores([ok, [1, 0, 2, 0]], 5)]  # the second item now reads "ab" where FP32 read "ac"
    assert ctc.cer(changed, outputs, None) == pytest.approx(1 / 4)
    spaced = [_ctc_scores([[4, 1, 0, 2, 4, 0]], 5)]  # " ab " reads as "ab": spaces are ignored (PaddleOCR)
    assert ctc.text_accuracy(spaced, spaced, _codes(["ab"])) == 1.0


def test_ctc_dictionary_from_the_recognizer_metadata():
    mod = _module("ctc_text")
    chars = mod.characters(str(shared_model("ch_PP-OCRv4_rec_infer.onnx")))
    assert len(chars) == 6625 and chars[0] == "<blank>" and chars[-1] == " "  # 6623 lines + blank + space
    assert "a" in chars and "7" in chars


def test_box_recall_known_values():
    box = _module("box_recall")
    # item 0: two true boxes, one found (IoU 1), one missed (IoU 1/7 < 0.5); a low-score box does not count
    # item 1: one true box (the second row is padding), found by a box of IoU 0.81
    outputs = [np.array([[[0, 0, 10, 10, 0.9], [20, 20, 30, 30, 0.2], [30, 30, 40, 40, 0.8]],
                         [[1, 1, 10, 10, 0.7], [0, 0, 0, 0, 0.0], [0, 0, 0, 0, 0.0]]], np.float32)]
    labels = np.array([[[0, 0, 10, 10], [20, 20, 30, 30]],
                       [[0, 0, 10, 10], [-1, -1, -1, -1]]], np.float32)
    assert box.iou(np.array([[1, 1, 10, 10]]), np.array([[0, 0, 10, 10]]))[0, 0] == pytest.approx(0.81)
    assert box.box_recall(outputs, outputs, labels) == pytest.approx(2 / 3)
    assert box.box_recall.higher_is_better is True
    # without labels the reference's counted boxes are the truth: 3 of them; the model below keeps 2
    moved = [outputs[0].copy()]
    moved[0][0, 2, :4] = [60, 60, 70, 70]
    assert box.box_recall(moved, outputs, None) == pytest.approx(2 / 3)
    assert box.box_recall(outputs, outputs, None) == 1.0


def test_the_examples_load_as_user_metrics(ctc, tmp_path):
    """Through sparsify-tui's loader and metric machinery: the worsening of CER (a rise) is the budgeted quantity."""
    from sparsify_tui import settings
    from sparsify_tui.profiling.metrics import choose_metric, evaluate

    spec = settings.metric(f"{EXAMPLES / 'ctc_text.py'}:cer")
    ref = [{"y": _ctc_scores([[1, 0, 2, 2]], 5)}, {"y": _ctc_scores([[1, 0, 3, 0]], 5)}]
    new = [{"y": _ctc_scores([[1, 0, 2, 2]], 5)}, {"y": _ctc_scores([[1, 0, 1, 0]], 5)}]
    choice = choose_metric(ref[0], spec, labelled=True)
    choice.user.fn.__globals__["DICTIONARY"] = ctc.DICTIONARY  # the loaded copy reads the same test dictionary
    labels = [_codes(["ab"]), _codes(["ac"])]
    ev = evaluate(ref, new, choice, labels)
    assert choice.label == "cer" and not choice.user.higher_is_better
    assert ev.score_reference == pytest.approx(0.0) and ev.score == pytest.approx(1 / 4)
    assert ev.drop == pytest.approx(0.25)
