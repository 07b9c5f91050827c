#!/usr/bin/env python3
"""Loss-profile speed (issue 4, item 5). Prints figures and ratios side by side.

(a) weight-magnitude profile of BERT-base (110 M params), goal <= 3 s;
(b) one-shot on ResNet-50 (every prunable layer x 10 levels x 2 batches of 1) against the naive way
    (a new session per measurement, on a model copy with the pruned weight), goal >= 10x faster;
(c) one-shot against the limit: the bare inference time of the same runs (layers x levels x batches
    runs of the unmodified model in one plain session), goal <= 1.3x.

On a shared 2-core machine the load changes from minute to minute, so the bare speed is sampled
*during* each method: one plain run per layer interleaved with the one-shot profile (and one per
naive measurement), median x run count (``--full-bare`` also times all runs back to back). The naive
way is timed on ``--naive-sample`` measurements spread over the layers and levels, then extrapolated
(stated in the output); its ratio is load-normalized by the bare speed of its own window.

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


class BareProbe:
    """Times single plain-session runs of the unmodified model while another method runs, so every
    method is compared with the bare speed of the *same* minutes on a shared machine."""

    def __init__(self, path: Path, feeds: list, cores=None):
        self.sess = make_session(str(path), cores)
        self.names = [o.name for o in self.sess.get_outputs()]
        self.feeds = feeds
        self.samples: list = []
        self.spent = 0.0
        self.sess.run(self.names, feeds[0])

    def probe(self) -> None:
        time.sleep(0.02)  # let the other session's spinning worker threads go idle first (not counted)
        self.spent += 0.02
        t = time.perf_counter()
        self.sess.run(self.names, self.feeds[len(self.samples) % len(self.feeds)])
        dt = time.perf_counter() - t
        self.samples.append(dt)
        self.spent += dt

    def per_run(self) -> float:
        return statistics.median(self.samples)


def naive_subset(path: Path, feeds: list, n_sample: int, cores=None, probe: "BareProbe" = None) -> tuple:
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
    spent = 0.0
    for layer, level in picks:
        if probe is not None:
            probe.probe()
        t0 = time.perf_counter()
        t = model.graph.initializer[inits[layer.weight_name]]
        orig = numpy_helper.to_array(t).copy()
        t.CopyFrom(numpy_helper.from_array(magnitude_prune(orig, level), layer.weight_name))
        sess = make_session(model.SerializeToString(), cores)
        for f, d in zip(feeds, dense):
            om.value(d, dict(zip(names, sess.run(names, f))))
        del sess
        t.CopyFrom(numpy_helper.from_array(orig, layer.weight_name))
        spent += time.perf_counter() - t0
    return spent / len(picks), len(picks)


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
    ap.add_argument("--full-bare", action="store_true", help="also time all the bare runs back to back")
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
            probe = BareProbe(resnet, feeds, args.cores)
            last = [None]

            def progress(step, frac, probe=probe, last=last):
                if step != last[0]:  # one bare run per layer, spread over the whole profile
                    last[0] = step
                    probe.probe()

            t = time.perf_counter()
            prof = one_shot_profile(resnet, levels=list(ONE_SHOT_LEVELS), feeds=feeds, strategy=s,
                                    core_count=args.cores, progress=progress)
            row[s] = time.perf_counter() - t - probe.spent
            row[f"{s}_bare"] = probe.per_run() * n_runs
            row[f"{s}_sessions"] = prof.extras["sessions"]
            row[f"{s}_groups"] = len(prof.extras["groups"])
            del probe
        if args.full_bare:
            row["bare_full"] = bare_runs(resnet, feeds, n_runs, args.cores)
        probe = BareProbe(resnet, feeds, args.cores)
        per, k = naive_subset(resnet, feeds, args.naive_sample, args.cores, probe)
        row["naive"] = per * measurements
        row["naive_bare"] = probe.per_run() * n_runs
        row["naive_timed"] = k
        del probe
        rows.append(row)
        print(f"  round {r + 1}: " + "; ".join(
            f"{s} {row[s]:.1f} s ({row[f'{s}_sessions']} sessions, {row[f'{s}_groups']} groups; bare same window "
            f"{row[f'{s}_bare']:.1f} s)" for s in strategies)
            + f"; naive {row['naive']:.1f} s (from {k} of {measurements} measurements, {per:.3f} s each; bare same "
              f"window {row['naive_bare']:.1f} s)"
            + (f"; bare, all {n_runs} runs timed: {row['bare_full']:.1f} s" if args.full_bare else ""))
    print()
    print("  bare = the same runs (layers x levels x batches) in one plain session, timed by single runs")
    print("  interleaved with each method (median x run count), so every ratio compares the same minutes.")
    print("  naive/this is load-normalized: (naive / its bare) / (this / its bare).")
    print(f"  {'strategy':10s} {'seconds':>8s} {'naive/this':>11s} {'this/bare':>10s}   goals: >= 10x, <= 1.3x")
    for s in strategies:
        sec = statistics.median(row[s] for row in rows)
        vs_naive = statistics.median((row["naive"] / row["naive_bare"]) / (row[s] / row[f"{s}_bare"]) for row in rows)
        vs_bare = statistics.median(row[s] / row[f"{s}_bare"] for row in rows)
        print(f"  {s:10s} {sec:8.1f} {vs_naive:10.1f}x {vs_bare:9.2f}x   "
              f"{'OK' if vs_naive >= 10 else 'MISSED'} / {'OK' if vs_bare <= 1.3 else 'MISSED'}")
    print(f"  {'naive':10s} {statistics.median(r['naive'] for r in rows):8.1f}  (extrapolated)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
