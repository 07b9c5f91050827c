#!/usr/bin/env python3
"""Overhead of a perf profile against a bare onnxruntime loop (issue 3, item 5).

For each model (ResNet-50 and MobileNetV2, batch 1, all cores), each round runs side by side, in
alternating order:

* **profile**: ``profile_performance(model, int8=False)`` with the default warm-up (5) and iterations
  (30): its wall time (INT8 excluded; it includes input preparation, the analysis, two sessions, the
  profiled pass, trace parsing and attribution);
* **bare**: a plain onnxruntime loop doing the same work a profile has to do at minimum: a session,
  the same warm-up and timed runs, then a profiled session (``enable_profiling``) with the same profiled
  pass (1 + ``profiled_runs_for(iterations)`` runs), ``end_profiling``.

Printed per round: ``profile s / bare s`` (goal <= 1.3); ``(bare + overhead) / bare`` where overhead is the
profile's wall time outside session creation, runs and ``end_profiling`` (the work the bare loop does too:
much less sensitive to other load on a shared machine); and ``sum of per-node times / unprofiled median``
(how much of the measured latency the per-node rows account for; profiling adds a few µs per kernel).

Usage (from the repo root):
    /work/venv/bin/python benchmarks/perf_profile.py [--rounds 3] [--models DIR_OR_FILES...]
Models are looked up in $SPARSIFY_TUI_BUILT_MODELS, ../built-models and ../shared/models; absent ones
are skipped (build ResNet-50 with ../shared/models/build_torch_models.py OUT_DIR resnet50).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from sparsify_tui.engine.run import RunSpec
from sparsify_tui.profiling.perf import profile_performance, profiled_runs_for  # noqa: E402
from sparsify_tui.settings import available_cores  # noqa: E402
from sparsify_tui.engine.ort import session_options  # noqa: E402


def make_session(path: str, cores: int, **kw):
    """A plain onnxruntime session with the engine's options (no engine wrapper: the bare baseline)."""
    import onnxruntime as ort

    return ort.InferenceSession(path, sess_options=session_options(cores, **kw), providers=["CPUExecutionProvider"])

WARMUP, ITERATIONS = 5, 30


def find_model(name: str):
    dirs = [os.environ.get("SPARSIFY_TUI_BUILT_MODELS"), ROOT.parent / "built-models", ROOT.parent / "shared" / "models"]
    for d in dirs:
        if d and (Path(d) / name).is_file():
            return Path(d) / name
    return None


def bare_loop(path: Path, cores: int) -> float:
    """Wall seconds of the minimal equivalent: timed session + profiled pass, nothing else."""
    t0 = time.perf_counter()
    sess = make_session(str(path), cores)
    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    feed = {inp.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    for _ in range(WARMUP + ITERATIONS):
        t = time.perf_counter()
        sess.run(None, feed)
        _ = time.perf_counter() - t
    del sess
    with tempfile.TemporaryDirectory() as tmp:
        sess = make_session(str(path), cores, profiling=True, profile_prefix=f"{tmp}/bare")
        for _ in range(1 + profiled_runs_for(ITERATIONS)):
            sess.run(None, feed)
        sess.end_profiling()
        del sess
    return time.perf_counter() - t0


def profile_run(path: Path, cores: int):
    t0 = time.perf_counter()
    prof = profile_performance(path, RunSpec(core_count=cores), warmup=WARMUP, iterations=ITERATIONS, int8=False)
    wall = time.perf_counter() - t0
    return wall, prof


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", nargs="*", default=None, help="model files (default: resnet50 + mobilenet_v2)")
    a = ap.parse_args()
    models = [Path(m) for m in a.models] if a.models else [find_model("resnet50.onnx"), find_model("mobilenet_v2.onnx")]
    cores = available_cores()
    print(f"cores={cores} warmup={WARMUP} iterations={ITERATIONS} profiled runs={1 + profiled_runs_for(ITERATIONS)}")
    for name, path in zip(("resnet50", "mobilenet_v2") if not a.models else [m.stem for m in models], models):
        if path is None or not path.is_file():
            print(f"{name}: skipped (model not found)")
            continue
        # one untimed warm-up of each path (file cache, imports)
        bare_loop(path, cores)
        profile_run(path, cores)
        ratios, covers, robust = [], [], []
        for r in range(a.rounds):
            if r % 2 == 0:
                wall, prof = profile_run(path, cores)
                bare = bare_loop(path, cores)
            else:
                bare = bare_loop(path, cores)
                wall, prof = profile_run(path, cores)
            ratio = wall / bare
            ph = prof.profiled.phase_seconds or {}
            # the profile's own work besides what the bare loop also does (sessions, runs, end_profiling):
            # far less noisy on a shared machine than the wall-time ratio
            overhead = wall - ph.get("sessions_s", 0) - ph.get("runs_s", 0) - ph.get("end_profiling_s", 0)
            robust.append((bare + overhead) / bare)
            cover = prof.total_node_ms / prof.latency_ms.median
            ratios.append(ratio)
            covers.append(cover)
            print(f"{name} round {r + 1}: profile {wall:.2f} s, bare {bare:.2f} s, ratio {ratio:.3f}; "
                  f"median {prof.latency_ms.median:.2f} ms, sum of node times {prof.total_node_ms:.2f} ms, "
                  f"node sum / median {cover:.3f}")
            print(f"    overhead outside sessions/runs {overhead:.3f} s -> (bare + overhead) / bare {robust[-1]:.3f}; "
                  + ", ".join(f"{k} {v:.2f}" for k, v in ph.items()))
        print(f"{name}: profile/bare median {statistics.median(ratios):.3f} (goal <= 1.3), "
              f"(bare + overhead)/bare median {statistics.median(robust):.3f}; "
              f"node sum/median median {statistics.median(covers):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
