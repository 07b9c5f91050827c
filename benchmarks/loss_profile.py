#!/usr/bin/env python3
"""Loss-profile speed (issue 4, item 5). Prints figures and ratios side by side.

(a) weight-magnitude profile of BERT-base (110 M params), goal <= 3 s;
(b) one-shot on ResNet-50 (every prunable layer x 10 levels x 2 batches of 1) against the naive way
    (a new session per measurement, on a model copy with the pruned weight), goal >= 10x faster;
(c) one-shot against the limit: the bare inference time of the same runs (layers x levels x batches
    runs of the unmodified model in one plain session), goal <= 1.3x.

The naive way is timed on ``--naive-sample`` measurements spread over the layers and levels, then
extrapolated to all of them (stated in the output). Rounds alternate the methods so that the shared
machine's noise hits them alike; ratios are computed within a round, the median is reported.

Usage (from the repo root):
    /work/venv/bin/python benchmarks/loss_profile.py [--models DIR] [--rounds 2] [--naive-sample 24]
Models: DIR/bert_base.onnx and DIR/resnet50.onnx, built by /work/shared/models/build_torch_models.py
(default DIR: /work/built-models).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sparsify_tui.profiling.loss import ONE_SHOT_LEVELS, profile_loss  # noqa: E402
from sparsify_tui.profiling.loss_layers import find_layers, load_model_proto  # noqa: E402
from sparsify_tui.profiling.loss_oneshot import OutputMetric, one_shot_profile, sample_batches  # noqa: E402
from sparsify_tui.profiling.pruning import magnitude_prune  # noqa: E402
from sparsify_tui.profiling.session import make_session  # noqa: E402


def bench_magnitude(path: Path, rounds: int) -> list:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        prof = profile_loss(path, method="magnitude")
        times.append(time.perf_counter() - t)
    print(f"  {len(prof.layers)} layers, {prof.prunable_params / 1e6:.1f} M prunable params, 100 levels")
    return times


def naive_subset(path: Path, feeds: list, n_sample: int, cores=None) -> tuple:
    """Seconds per measurement of the naive way: copy model, prune one weight, serialize, new session, run
    every batch, metric against dense outputs. Returns (seconds per measurement, measurements timed)."""
    from onnx import numpy_helper

    model = load_model_proto(path)
    layers = find_layers(model)
    dense_sess = make_session(str(path), cores)
    names = [o.name for o in dense_sess.get_outputs()]
    dense = [dict(zip(names, dense_sess.run(names, f))) for f in feeds]
    del dense_sess
    om = OutputMetric(names, [dense[0][n] for n in names], None)
    inits = {t.name: i for i, t in enumerate(model.graph.initializer)}
    rng = np.random.default_rng(0)
    picks = [(layers[i % len(layers)], ONE_SHOT_LEVELS[rng.integers(len(ONE_SHOT_LEVELS))])
             for i in np.linspace(0, len(layers) - 1, n_sample).astype(int)]
    t0 = time.perf_counter()
    for layer, level in picks:
        t = model.graph.initializer[inits[layer.weight_name]]
        orig = numpy_helper.to_array(t).copy()
        t.CopyFrom(numpy_helper.from_array(magnitude_prune(orig, level), layer.weight_name))
        sess = make_session(model.SerializeToString(), cores)
        for f, d in zip(feeds, dense):
            om.value(d, dict(zip(names, sess.run(names, f))))
        del sess
        t.CopyFrom(numpy_helper.from_array(orig, layer.weight_name))
    return (time.perf_counter() - t0) / len(picks), len(picks)


def bare_runs(path: Path, feeds: list, n_runs: int, cores=None) -> float:
    """Seconds of ``n_runs`` plain inference runs (cycling over the batches) in one plain session."""
    sess = make_session(str(path), cores)
    names = [o.name for o in sess.get_outputs()]
    for f in feeds:
        sess.run(names, f)
    t0 = time.perf_counter()
    for i in range(n_runs):
        sess.run(names, feeds[i % len(feeds)])
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="/work/built-models")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--naive-sample", type=int, default=24)
    ap.add_argument("--strategies", default="auto,single", help="one-shot strategies to time (auto,single,layer)")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: a,b")
    ap.add_argument("--cores", type=int, default=None, help="intra-op threads for every session (default: all)")
    args = ap.parse_args()
    models = Path(args.models)
    skip = set(args.skip.split(","))

    if "a" not in skip:
        bert = models / "bert_base.onnx"
        print(f"(a) magnitude profile of BERT-base ({bert})")
        if bert.is_file():
            times = bench_magnitude(bert, args.rounds + 1)
            print(f"  seconds per round: {', '.join(f'{t:.2f}' for t in times)}; median {statistics.median(times):.2f} s "
                  f"(goal <= 3 s) {'OK' if statistics.median(times) <= 3 else 'MISSED'}")
        else:
            print("  missing: build it with build_torch_models.py")

    if "b" in skip:
        return 0
    resnet = models / "resnet50.onnx"
    print(f"(b, c) one-shot on ResNet-50 ({resnet}), 10 levels x 2 batches of 1, synthetic data, "
          f"{args.cores or 'all'} intra-op threads")
    if not resnet.is_file():
        print("  missing: build it with build_torch_models.py")
        return 1
    feeds = sample_batches(resnet, None, 2, 1, {})
    n_layers = len(find_layers(load_model_proto(resnet, load_external_data=False)))
    measurements = n_layers * len(ONE_SHOT_LEVELS)
    n_runs = measurements * len(feeds)
    strategies = [s for s in args.strategies.split(",") if s]
    rows = []
    for r in range(args.rounds):
        row = {}
        for s in strategies:
            t = time.perf_counter()
            prof = one_shot_profile(resnet, levels=list(ONE_SHOT_LEVELS), feeds=feeds, strategy=s,
                                    core_count=args.cores)
            row[s] = time.perf_counter() - t
            row[f"{s}_sessions"] = prof.extras["sessions"]
            row[f"{s}_groups"] = len(prof.extras["groups"])
            row[f"{s}_sess_s"] = prof.extras["seconds_group_sessions"] + prof.extras["seconds_setup"]
        row["bare"] = bare_runs(resnet, feeds, n_runs, args.cores)
        per, k = naive_subset(resnet, feeds, args.naive_sample, args.cores)
        row["naive"] = per * measurements
        row["naive_timed"] = k
        rows.append(row)
        print(f"  round {r + 1}: " + ", ".join(
            f"{s} {row[s]:.1f} s ({row[f'{s}_sessions']} sessions, {row[f'{s}_groups']} groups, "
            f"{row[f'{s}_sess_s']:.1f} s outside group runs)" for s in strategies)
            + f"; bare {row['bare']:.1f} s ({n_runs} runs); naive {row['naive']:.1f} s "
              f"(extrapolated from {k} of {measurements} measurements, {per:.3f} s each)")
    print()
    print(f"  {'strategy':10s} {'seconds':>8s} {'naive/this':>11s} {'this/bare':>10s}   goals: >= 10x, <= 1.3x")
    for s in strategies:
        sec = statistics.median(row[s] for row in rows)
        vs_naive = statistics.median(row["naive"] / row[s] for row in rows)
        vs_bare = statistics.median(row[s] / row["bare"] for row in rows)
        print(f"  {s:10s} {sec:8.1f} {vs_naive:10.1f}x {vs_bare:9.2f}x   "
              f"{'OK' if vs_naive >= 10 else 'MISSED'} / {'OK' if vs_bare <= 1.3 else 'MISSED'}")
    print(f"  {'bare':10s} {statistics.median(r['bare'] for r in rows):8.1f}")
    print(f"  {'naive':10s} {statistics.median(r['naive'] for r in rows):8.1f}  (extrapolated)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
