"""Labelled text-line images for a text recognizer (issue 31): a folder of PNGs and a CSV of their texts.

    python benchmarks/text_lines.py OUT_DIR [--items 240] [--seed 0] [--words 2-5]

Writes ``OUT_DIR/line_00000.png ...`` and ``OUT_DIR/labels.csv`` (rows ``file,text``): what a user of a text
recognizer has, a folder of cropped lines and their transcripts. ``sparsify-tui data images OUT_DIR --labels
OUT_DIR/labels.csv --text-labels ...`` turns them into a sample set. Each line: a few consecutive words of English
prose (the docstrings of Python's standard library, :func:`real_data.prose_words`), a random DejaVu face and size,
dark ink on light paper with a little noise (:func:`real_data.text_line`). Different ``--seed`` values give
different lines (use one seed for the calibration + held-out set and another for a fresh check set).

Needs Pillow (``pip install -e ".[bench]"``) and the DejaVu fonts.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_data import _noise, _paper, fonts, prose_words  # noqa: E402


def render(words: list, faces: list, rng: random.Random, lo: int, hi: int):
    """``(image, text)``: ``lo``-``hi`` consecutive words, a random face, size 20-36 px."""
    from PIL import Image, ImageDraw, ImageFont

    start = rng.randrange(len(words) - hi - 1)
    text = " ".join(words[start:start + rng.randint(lo, hi)])
    font = ImageFont.truetype(rng.choice(faces), rng.randint(20, 36))
    ink, paper = _paper(rng)
    left, top, right, bottom = font.getbbox(text)
    pad_x, pad_y = rng.randint(2, 10), rng.randint(2, 6)
    img = Image.new("RGB", (right - left + 2 * pad_x, bottom - top + 2 * pad_y), paper)
    ImageDraw.Draw(img).text((pad_x - left, pad_y - top), text, font=font, fill=ink)
    return _noise(img, rng, 4.0), text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--items", type=int, default=240)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--words", default="2-5", help="words per line, LO-HI")
    a = ap.parse_args(argv)
    lo, hi = (int(v) for v in a.words.split("-"))
    a.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(a.seed)
    words, faces = prose_words(), fonts()
    with open(a.out / "labels.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["file", "text"])
        for i in range(a.items):
            img, text = render(words, faces, rng, lo, hi)
            name = f"line_{i:05d}.png"
            img.save(a.out / name)
            w.writerow([name, text])
    print(f"wrote {a.items} lines and labels.csv to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
