"""The budget search on a text recognizer, judged by CER (issue 31's goal), from an image folder in two commands.

    python benchmarks/ocr_cer_budget.py WORK_DIR [--items 240] [--fresh 200] [--max-drop 0.01] [--quantize]

What a user of PP-OCRv4's recognizer (``ch_PP-OCRv4_rec_infer.onnx``, 1x3x48x320) does, with the CLI only:

1. text-line images and their transcripts (:mod:`text_lines`: a folder of PNGs and ``labels.csv``), two sets
   rendered with different seeds: ``lines/`` (calibration and held-out items of the search) and ``fresh/``
   (lines the search never saw);
2. ``sparsify-tui create`` a project of the model (``--dim x:2=48 x:3=320``);
3. ``sparsify-tui data images lines -o lines.npz --project P --pad --bgr --mean 0.5 --std 0.5 --labels
   lines/labels.csv --text-labels`` (PaddleOCR's ``resize_norm_img``: BGR, height 48, width by the ratio up to 320,
   ``(x/255 - 0.5)/0.5``, padded right), and the same for ``fresh/``;
4. ``sparsify-tui optimize P --structure channel --max-drop D --data lines.npz --metric
   examples/metrics/ctc_text.py:cer`` (the budget search, CER against the labels, ``CTC_DICTIONARY`` = the model);
5. ``sparsify-tui benchmark P -O NAME --data fresh.npz --metric ...:cer``: speed and CER of the original and the
   chosen model on the fresh lines.

Steps 4 and 5 time models: they run under ``flock /tmp/bench.lock`` (one engineer times at a time). Prints the
search's head and trials, the benchmark's tables and a one-line verdict: CER of FP32 and of the chosen model on the
held-out and on the fresh lines, the budget, and the measured speedup. Quote the CPU's instruction sets with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPARSIFY_TUI_SHARED_MODELS", ROOT.parent / "shared" / "models"))
MODEL = SHARED / "ch_PP-OCRv4_rec_infer.onnx"
METRIC = ROOT / "examples" / "metrics" / "ctc_text.py"
CLI = [sys.executable, "-m", "sparsify_tui"]


def run(args: list, *, timed: bool = False, capture: bool = True) -> str:
    cmd = (["flock", "/tmp/bench.lock"] if timed else []) + [str(a) for a in args]
    print("$ " + " ".join(str(a) for a in args), file=sys.stderr, flush=True)
    res = subprocess.run(cmd, stdout=subprocess.PIPE if capture else None, text=True)
    if res.returncode:
        raise SystemExit(f"failed ({res.returncode}): {' '.join(map(str, args))}")
    return res.stdout or ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--items", type=int, default=240)
    ap.add_argument("--fresh", type=int, default=200)
    ap.add_argument("--max-drop", default="0.01")
    ap.add_argument("--quantize", action="store_true")
    ap.add_argument("--name", default="ocr-cer")
    a = ap.parse_args(argv)
    if not MODEL.is_file():
        raise SystemExit(f"{MODEL} is missing: set SPARSIFY_TUI_SHARED_MODELS")
    work = a.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("SPARSIFY_TUI_HOME", str(work / "home"))
    os.environ["CTC_DICTIONARY"] = str(MODEL)
    os.chdir(work)
    for folder, n, seed in (("lines", a.items, 11), ("fresh", a.fresh, 12)):
        if not (work / folder / "labels.csv").is_file():
            run([sys.executable, ROOT / "benchmarks" / "text_lines.py", folder, "--items", n, "--seed", seed])
    projects = json.loads(run(CLI + ["list", "--json"]) or "[]")
    if not any(p.get("name") == a.name for p in projects):
        run(CLI + ["create", MODEL, "--name", a.name, "--link", "--dim", "x:2=48", "x:3=320"])
    prep = ["--project", a.name, "--pad", "--bgr", "--mean", "0.5", "--std", "0.5", "--text-labels"]
    for folder in ("lines", "fresh"):
        if not (work / f"{folder}.npz").is_file():
            print(run(CLI + ["data", "images", folder, "-o", f"{folder}.npz", "--labels", f"{folder}/labels.csv"]
                      + prep).strip())
    opt = f"cer-{a.max_drop}" + ("-int8" if a.quantize else "")
    search = CLI + ["optimize", a.name, "--name", opt, "--structure", "channel", "--max-drop", a.max_drop,
                    "--data", "lines.npz", "--metric", f"{METRIC}:cer"] + (["--quantize"] if a.quantize else [])
    text = run(search, timed=True)
    print(text.split("\n  performance")[0])
    summary = json.loads(run(CLI + ["optimization", "show", a.name, opt, "--json"]))
    s = summary.get("search") or {}
    chosen = next((t for t in s.get("trials") or [] if t.get("index") == s.get("chosen")), None)
    bench = run(CLI + ["benchmark", a.name, "-O", opt, "--data", "fresh.npz", "--metric", f"{METRIC}:cer",
                       "--name", f"fresh {opt}", "--json"], timed=True)
    b = json.loads(bench)
    acc = (b.get("accuracy") or {}).get("models") or {}
    run(CLI + ["benchmark", a.name, "-O", opt, "--data", "fresh.npz", "--metric", f"{METRIC}:cer",
               "--name", f"fresh {opt} (text)"], timed=True, capture=False)
    base, mine = list(acc.values())[:2] if len(acc) >= 2 else ({}, {})
    speed = [r for r in b.get("runs") or [] if r.get("model") != (b.get("runs") or [{}])[0].get("model")]
    print(f"\nverdict: budget {a.max_drop} of CER; held out ({s.get('held_out_items')} lines): FP32 CER "
          f"{s.get('score_fp32', float('nan')):.4f}, chosen "
          + (f"{chosen['score']:.4f} ({chosen.get('speedup') or 0:.2f}x in the search)" if chosen else "none (FP32 kept)")
          + f"; fresh ({b.get('accuracy', {}).get('items')} lines): FP32 CER {base.get('score', float('nan')):.4f}, "
          f"chosen {mine.get('score', float('nan')):.4f}"
          + (f", benchmark speedup {speed[0].get('speedup'):.2f}x" if speed else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
