#!/usr/bin/env python3
"""Loss-profile speed (issue 4, item 5). Prints figures and ratios side by side.

(a) weight-magnitude profile of BERT-base (110 M params), goal <= 3 s;
(b) one-shot on ResNet-50 (every prunable layer x 10 levels x 2 batches of 1) against the naive way
    (a new session per measurement, on a model copy with the pruned weight), goal >= 10x faster;
(c) one-shot against the limit: the bare inference time of the same runs (layers x levels x batches
    runs of the unmodified model in one plain session), goal <= 1.3x.
(d) ``--channel``: the channel one-shot (``profile loss --structure channel``: each group's removed channels =
    its consumers' input weights zeroed, on the same engine) against the per-layer one-shot, seconds per
    measured run, alternated in rounds on each model of ``--channel-models`` (issue 13: "as fast per
    measurement as the unstructured one-shot"), with one bare full-model run's time beside them.

On a shared 2-core machine the speed changes from minute to minute, so the naive way and the bare
speed are sampled *inside* the one-shot run: whenever the profile moves to the next layer, the
benchmark times one naive measurement (pruned model copy, new session, both batches, metric) and one
bare run, and excludes that time from the one-shot's. Naive = median seconds per measurement x
measurements; bare = median seconds per run x runs. The three figures of a row come from the same
minutes, so the ratios are plain ratios. ``--naive-sample N`` also times N naive measurements back to
back after each round, as a cross-check.

Usage (from the repo root):
    /work/venv/bin/python benchmarks/loss_profile.py [--models DIR] [--rounds 2] [--strategies auto,single]
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
from sparsify_tui.analysis.layers import find_layers  # noqa: E402
from sparsify_tui.analysis.loading import load_model as load_model_proto  # noqa: E402
from sparsify_tui.profiling.loss_oneshot import OutputMetric, one_shot_profile, sample_batches  # noqa: E402
from sparsify_tui.engine.pruning import magnitude_prune  # noqa: E402
from sparsify_tui.engine.ort import session_options  # noqa: E402


def make_session(model, cores: int):
    """A plain onnxruntime session with the engine's options (the naive baselines run sessions directly)."""
    import onnxruntime as ort

    src = str(model) if isinstance(model, Path) else model
    return ort.InferenceSession(src, sess_options=session_options(cores), providers=["CPUExecutionProvider"])


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


class NaiveProbe:
    """The naive way, one measurement at a time: prune one weight in the in-memory model, serialize,
    create a new session, run every batch, compute the metric against the dense outputs, restore the
    weight. ``measure()`` times one such measurement; (layer, level) pairs go round the layers with
    levels drawn at random (seed 0), so a sample covers the whole model."""

    def __init__(self, path: Path, feeds: list, cores=None):
        self.model = load_model_proto(path)
        self.layers = find_layers(self.model)
        self.cores, self.feeds = cores, feeds
        dense_sess = make_session(str(path), cores)
        self.names = [o.name for o in dense_sess.get_outputs()]
        self.dense = [dict(zip(self.names, dense_sess.run(self.names, f))) for f in feeds]
        del dense_sess
        self.om = OutputMetric(self.names, [self.dense[0][n] for n in self.names], None)
        self.inits = {t.name: i for i, t in enumerate(self.model.graph.initializer)}
        self.rng = np.random.default_rng(0)
        self.samples: list = []
        self.spent = 0.0

    def measure(self) -> None:
        from onnx import numpy_helper

        time.sleep(0.02)  # as in BareProbe (not counted)
        self.spent += 0.02
        layer = self.layers[len(self.samples) % len(self.layers)]
        level = ONE_SHOT_LEVELS[self.rng.integers(len(ONE_SHOT_LEVELS))]
        t0 = time.perf_counter()
        t = self.model.graph.initializer[self.inits[layer.weight_name]]
        orig = numpy_helper.to_array(t).copy()
        t.CopyFrom(numpy_helper.from_array(magnitude_prune(orig, level), layer.weight_name))
        sess = make_session(self.model.SerializeToString(), self.cores)
        for f, d in zip(self.feeds, self.dense):
            self.om.value(d, dict(zip(self.names, sess.run(self.names, f))))
        del sess
        t.CopyFrom(numpy_helper.from_array(orig, layer.weight_name))
        dt = time.perf_counter() - t0
        self.samples.append(dt)
        self.spent += dt

    def per_measurement(self) -> float:
        return statistics.median(self.samples)


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


def bench_channel(models: Path, names: list, rounds: int, cores=None) -> int:
    """(d): per-layer and channel one-shot profiles alternated in ``rounds``; seconds per measured run."""
    from sparsify_tui.profiling.loss_channel import channel_profile

    print("(d) channel one-shot vs per-layer one-shot, 2 batches of 1, synthetic data, seconds per measured run "
          "(model runs the profile made; level 0 and repeated rounded levels are not run)")
    for name in names:
        path = next((p for p in (models / f"{name}.onnx", Path(__file__).resolve().parents[2] / "shared" / "models"
                                 / f"{name}.onnx") if p.is_file()), None)
        if path is None:
            print(f"  {name}: missing, skipped")
            continue
        feeds = sample_batches(path, None, 2, 1, {})
        per = {"layer": [], "channel": []}
        bare = []
        for r in range(rounds):
            order = ["layer", "channel"] if r % 2 == 0 else ["channel", "layer"]
            for kind in order:
                t = time.perf_counter()
                if kind == "layer":
                    prof = one_shot_profile(path, levels=list(ONE_SHOT_LEVELS), feeds=feeds, core_count=cores)
                else:
                    prof = channel_profile(path, method="one-shot", feeds=feeds, metric="nmse", core_count=cores)
                dt = time.perf_counter() - t
                per[kind].append((dt, prof.extras["runs"], prof.extras["sessions"]))
            bare.append(bare_runs(path, feeds, 20, cores) / 20)
        for kind in ("layer", "channel"):
            secs = [d / n for d, n, _ in per[kind]]
            print(f"  {name} {kind:8s}: {statistics.median(d for d, _, _ in per[kind]):6.1f} s for "
                  f"{per[kind][0][1]} runs, {per[kind][0][2]} sessions; {statistics.median(secs) * 1000:6.2f} ms per "
                  f"run (rounds: {', '.join(f'{x * 1000:.2f}' for x in secs)})")
        ratio = statistics.median(c[0] / c[1] / (lay[0] / lay[1]) for c, lay in zip(per["channel"], per["layer"]))
        print(f"  {name}: channel / per-layer seconds per run {ratio:.2f}x (<= 1 is as fast); bare full-model run "
              f"{statistics.median(bare) * 1000:.2f} ms", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="/work/built-models")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--naive-sample", type=int, default=0, help="also time N naive measurements back to back")
    ap.add_argument("--strategies", default="auto,single", help="one-shot strategies to time (auto,single,layer)")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: a,b")
    ap.add_argument("--cores", type=int, default=None, help="intra-op threads for every session (default: all)")
    ap.add_argument("--full-bare", action="store_true", help="also time all the bare runs back to back")
    ap.add_argument("--channel", action="store_true", help="(d) channel one-shot vs per-layer one-shot, then exit")
    ap.add_argument("--channel-models", default="resnet50,mobilenet_v2")
    args = ap.parse_args()
    if args.channel:
        return bench_channel(Path(args.models), args.channel_models.split(","), args.rounds, args.cores)
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
    print(f"  {n_layers} layers x {len(ONE_SHOT_LEVELS)} levels = {measurements} measurements, {n_runs} runs")
    rows = []
    for r in range(args.rounds):
        row = {}
        for s in strategies:
            bare = BareProbe(resnet, feeds, args.cores)
            naive = NaiveProbe(resnet, feeds, args.cores)
            last = [None]

            def progress(step, frac, bare=bare, naive=naive, last=last):
                # once per layer, spread over the measuring part of the profile
                if step != last[0] and step not in ("dense pass", "one-shot"):
                    last[0] = step
                    naive.measure()
                    bare.probe()

            t = time.perf_counter()
            prof = one_shot_profile(resnet, levels=list(ONE_SHOT_LEVELS), feeds=feeds, strategy=s,
                                    core_count=args.cores, progress=progress)
            row[s] = time.perf_counter() - t - bare.spent - naive.spent
            row[f"{s}_bare"] = bare.per_run() * n_runs
            row[f"{s}_naive"] = naive.per_measurement() * measurements
            row[f"{s}_samples"] = len(naive.samples)
            row[f"{s}_sessions"] = prof.extras["sessions"]
            e = prof.extras
            parts = (f"setup {e['seconds_setup']:.1f} s, session creation {e['seconds_group_sessions']:.1f} s, "
                     f"measuring {sum(g['measure_s'] for g in e['group_stats']) - bare.spent - naive.spent:.1f} s "
                     f"(probes excluded)")
            del bare, naive
            print(f"  round {r + 1}, {s}: one-shot {row[s]:.1f} s ({row[f'{s}_sessions']} sessions); in the same "
                  f"window naive {row[f'{s}_naive']:.1f} s ({row[f'{s}_samples']} measurements timed, "
                  f"{row[f'{s}_naive'] / measurements:.3f} s each), bare {row[f'{s}_bare']:.1f} s; "
                  f"naive/one-shot {row[f'{s}_naive'] / row[s]:.1f}x, one-shot/bare {row[s] / row[f'{s}_bare']:.2f}x"
                  f"\n    one-shot parts: {parts}",
                  flush=True)
        if args.full_bare:
            row["bare_full"] = bare_runs(resnet, feeds, n_runs, args.cores)
            print(f"  round {r + 1}: bare, all {n_runs} runs timed back to back: {row['bare_full']:.1f} s")
        if args.naive_sample:
            naive = NaiveProbe(resnet, feeds, args.cores)
            for _ in range(args.naive_sample):
                naive.measure()
            row["naive_alone"] = naive.per_measurement() * measurements
            print(f"  round {r + 1}: naive alone, {args.naive_sample} measurements back to back: "
                  f"{row['naive_alone']:.1f} s extrapolated")
        rows.append(row)
    print()
    print("  naive and bare are sampled inside each one-shot run (one naive measurement and one bare run")
    print("  per layer step, excluded from the one-shot time), so each ratio compares the same minutes.")
    print(f"  {'strategy':10s} {'seconds':>8s} {'naive':>8s} {'bare':>8s} {'naive/this':>11s} {'this/bare':>10s}"
          "   goals: >= 10x, <= 1.3x")
    for s in strategies:
        med = {k: statistics.median(row[k] for row in rows) for k in (s, f"{s}_naive", f"{s}_bare")}
        vs_naive = statistics.median(row[f"{s}_naive"] / row[s] for row in rows)
        vs_bare = statistics.median(row[s] / row[f"{s}_bare"] for row in rows)
        print(f"  {s:10s} {med[s]:8.1f} {med[f'{s}_naive']:8.1f} {med[f'{s}_bare']:8.1f} {vs_naive:10.1f}x "
              f"{vs_bare:9.2f}x   {'OK' if vs_naive >= 10 else 'MISSED'} / {'OK' if vs_bare <= 1.3 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
