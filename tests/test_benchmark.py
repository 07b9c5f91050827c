"""Benchmark runner, job handlers and CLI: result shape, statistics and speedup arithmetic, apply-before-
benchmark, stored records. Iterations are tiny; no timing assertions (speed is in benchmarks/)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from sparsify_tui.benchmark.runner import BenchmarkResult, BenchmarkRun, ModelSpec, run_benchmark

from tests.test_apply import build_small_model
from sparsify_tui.services.projects import create_project

DEMO_DIMS = {"x:2": 48, "x:3": 192}


def test_statistics_of_known_times():
    r = BenchmarkRun.from_times("m", None, 4, 2, [4.0, 1.0, 3.0, 2.0, 10.0])
    assert r.median_ms == 3.0 and r.mean_ms == 4.0
    assert r.p90_ms == pytest.approx(np.percentile([1, 2, 3, 4, 10], 90))
    assert r.p99_ms == pytest.approx(np.percentile([1, 2, 3, 4, 10], 99))
    assert r.ms_per_item == 0.75
    assert r.items_per_second == pytest.approx(4 * 1000 / 3.0)
    assert r.iterations_ms == [4.0, 1.0, 3.0, 2.0, 10.0]


def test_speedup_is_baseline_median_over_model_median_at_same_batch_and_cores():
    res = BenchmarkResult(models=[ModelSpec("baseline", "a"), ModelSpec("opt", "b", "id1")],
                          batch_sizes=[1, 8], core_counts=[1, 2], warmup=0, iterations=3)
    medians = {}
    for b in (1, 8):
        for c in (1, 2):
            for m, base in (("baseline", 10.0), ("opt", 4.0)):
                med = base * b / c + (1 if m == "opt" and b == 8 else 0)
                medians[(m, b, c)] = med
                res.runs.append(BenchmarkRun.from_times(m, None, b, c, [med] * 3))
    res.compute_speedups()
    for r in res.runs:
        assert r.speedup == pytest.approx(medians[("baseline", r.batch_size, r.core_count)] / r.median_ms)
    assert all(r.speedup == 1.0 for r in res.runs if r.model == "baseline")
    # round trip through the stored JSON
    again = BenchmarkResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert [(r.model, r.batch_size, r.core_count, r.median_ms, r.speedup) for r in again.runs] == \
        [(r.model, r.batch_size, r.core_count, r.median_ms, r.speedup) for r in res.runs]


def check_shape(d: dict, models, batch_sizes, core_counts, iterations):
    assert {"benchmark", "results"} <= set(d) <= {"benchmark", "results", "accuracy"}
    if "accuracy" in d:  # issue 14: every model's outputs against the baseline's, next to the speed
        acc = d["accuracy"]
        assert acc["metric"] in ("top1", "nmse", "kl", "max_abs") and acc["reason"]
        assert set(acc["models"]) == {m if isinstance(m, str) else m[0] for m in models}
        assert acc["models"]["baseline"]["drop"] == 0
    b = d["benchmark"]
    assert b["batch_sizes"] == batch_sizes and b["core_counts"] == core_counts and b["iterations"] == iterations
    assert len(d["results"]) == len(models) * len(batch_sizes) * len(core_counts)
    seen = set()
    for r in d["results"]:
        for key in ("model", "optimization", "batch_size", "core_count", "latency_ms", "items_per_second", "speedup"):
            assert key in r
        assert {"median", "mean", "p90", "p99"} <= set(r["latency_ms"])
        lat = r["latency_ms"]
        assert 0 < lat["median"] <= lat["p90"] <= lat["p99"]
        assert len(r["iterations_ms"]) == iterations
        assert r["items_per_second"] == pytest.approx(1000 * r["batch_size"] / lat["median"])
        seen.add((r["model"], r["batch_size"], r["core_count"]))
    assert seen == {(m, b, c) for m in models for b in batch_sizes for c in core_counts}
    base = {(r["batch_size"], r["core_count"]): r["latency_ms"]["median"] for r in d["results"] if r["model"] == "baseline"}
    for r in d["results"]:
        assert r["speedup"] == pytest.approx(base[(r["batch_size"], r["core_count"])] / r["latency_ms"]["median"])


def test_run_benchmark_every_combination(tmp_path, demo_model):
    small = build_small_model(tmp_path / "small.onnx")
    calls = []
    res = run_benchmark([("baseline", str(demo_model)), ("copy", str(demo_model))], batch_sizes=[1, 2],
                        core_counts=[1, 2], warmup=1, iterations=3, dims=DEMO_DIMS,
                        progress=lambda s, f: calls.append(f))
    check_shape(res.to_dict(), ["baseline", "copy"], [1, 2], [1, 2], 3)
    assert calls[-1] == 1.0 and calls == sorted(calls)
    # no data: the outputs were compared on synthetic inputs, which is no accuracy (issue 29, deliverable 5)
    from sparsify_tui.benchmark.summary import accuracy_table, synthetic

    table = accuracy_table(res.accuracy)
    assert synthetic(res.accuracy) and table.title.startswith("No accuracy: no data")
    assert [r[0] for r in table.rows][:1] == ["agreement on synthetic inputs"]
    res2 = run_benchmark([("baseline", str(small))], batch_sizes=[3], core_counts=[1], warmup=0, iterations=2)
    assert res2.runs[0].speedup == 1.0 and res2.runs[0].batch_size == 3


def test_models_are_interleaved_in_rounds_so_drift_hits_them_alike(demo_model):
    """One (batch, cores) pair: sessions alternate baseline/opt, opt/baseline, ... and every model still gets
    exactly `iterations` timed runs."""
    steps = []
    res = run_benchmark([("baseline", str(demo_model)), ("opt", str(demo_model))], batch_sizes=[1], core_counts=[1],
                        warmup=0, iterations=7, rounds=3, dims=DEMO_DIMS,
                        progress=lambda step, fraction: steps.append(step))
    order = [s.split()[0] for s in steps if "round" in s]
    assert order == ["baseline", "opt", "opt", "baseline", "baseline", "opt"]
    assert [len(r.iterations_ms) for r in res.runs] == [7, 7]


def test_run_benchmark_cancel(demo_model):
    from sparsify_tui.errors import JobCanceled
    from sparsify_tui.progress import CancelToken

    tok = CancelToken()

    def progress(step, frac):
        if frac > 0:
            tok.cancel()

    with pytest.raises(JobCanceled):
        run_benchmark([("baseline", str(demo_model))], batch_sizes=[1, 2], core_counts=[1], warmup=0,
                      iterations=2, dims=DEMO_DIMS, progress=progress, cancel=tok)


def test_bad_settings_are_user_errors(demo_model, tmp_path):
    from sparsify_tui.errors import SparsifyError

    with pytest.raises(SparsifyError, match="batch"):
        run_benchmark([("baseline", str(demo_model))], batch_sizes=[0], core_counts=[1], dims=DEMO_DIMS)
    with pytest.raises(SparsifyError, match="does not exist"):
        run_benchmark([("baseline", str(tmp_path / "nope.onnx"))], batch_sizes=[1], core_counts=[1])


# ------------------------------------------------------------------------------------- project flow


def demo_project(ws, demo_model, quantize=False):
    """A project on the demo model and an optimization record pruning 4 layers (contract record shape)."""
    project = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)
    m = onnx.load(str(demo_model))
    convs = [n for n in m.graph.node if n.op_type == "Conv"]
    layers = [{"weight_name": n.input[1], "node_id": n.name, "sparsity": s, "override": False}
              for n, s in zip(convs[1:5], (0.5, 0.7, 0.85, 0.9))]
    opt = ws.add_record(project["id"], "optimizations", {
        "name": "opt one", "perf_profile": "flops", "loss_profile": "approximated", "layers": layers,
        "quantization": {"enabled": quantize, "excluded": [convs[2].name] if quantize else []}})
    return project, opt


def test_benchmark_job_applies_first_and_stores_record(workspace_home, demo_model):
    from sparsify_tui.services.benchmarks import load_benchmark
    from sparsify_tui.jobs import run_here
    from sparsify_tui.optimization.apply import optimization_fingerprint
    from sparsify_tui.services.apply import is_applied
    from sparsify_tui.services.optimizations import get_optimization
    from sparsify_tui.store import Workspace

    ws = Workspace()
    project, opt = demo_project(ws, demo_model)
    summary = run_here(ws, project["id"], "benchmark", {"name": "b1", "optimizations": ["opt one"],
                                                         "batch_sizes": [1, 2], "core_counts": [1],
                                                         "warmup": 0, "iterations": 2})
    opt = ws.get_record(project["id"], "optimizations", opt["id"])
    typed = get_optimization(ws, project["id"], opt["id"])
    assert is_applied(ws, project["id"], typed)
    applied = opt["applied"]
    assert applied["layers_exact"] and applied["fingerprint"] == optimization_fingerprint(typed)
    assert applied["path"].endswith("optimized/opt_one.onnx")
    rec = ws.get_record(project["id"], "benchmarks", summary["benchmark"])
    assert rec["name"] == "b1" and rec["args"]["optimizations"] == [opt["id"]]
    res = load_benchmark(ws, project["id"], "b1")
    check_shape(res.to_dict(), ["baseline", "opt one"], [1, 2], [1], 2)
    # a benchmark of an already applied optimization does not re-apply it
    before = applied["applied_at"]
    run_here(ws, project["id"], "benchmark", {"optimizations": [opt["id"]], "batch_sizes": [1], "core_counts": [1],
                                              "warmup": 0, "iterations": 1})
    assert ws.get_record(project["id"], "optimizations", opt["id"])["applied"]["applied_at"] == before
    assert len(ws.list_records(project["id"], "benchmarks")) == 2


def test_cli_apply_and_benchmark_json(workspace_home, demo_model, tmp_path, capsys):
    from sparsify_tui.cli import main
    from sparsify_tui.store import Workspace

    ws = Workspace()
    project, opt = demo_project(ws, demo_model, quantize=True)
    out = tmp_path / "export" / "out.onnx"
    out.parent.mkdir()  # -o never creates folders (issue 11): a missing one is refused
    assert main(["apply", "demo", "opt one", "-o", str(out), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    applied = d["applied"]
    assert applied["quantized"] and applied["exported_to"] == str(out) and out.is_file()
    assert applied["layers_exact"]
    import onnxruntime as ort

    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 3, 48, 192)).astype(np.float32)
    assert sess.run(None, {"x": x})[0].shape == (1, 2)
    # every Conv/MatMul is fed by DequantizeLinear weights except the excluded layer, which stays FP32
    q = onnx.load(str(out))
    prod = {o: n for n in q.graph.node for o in n.output}
    excluded = opt["quantization"]["excluded"]
    layers = [n for n in q.graph.node if n.op_type in ("Conv", "MatMul")]
    assert len(layers) > 10
    for n in layers:
        w = prod.get(n.input[1])
        assert (w is not None and w.op_type == "DequantizeLinear") == (n.name not in excluded), n.name

    assert main(["benchmark", "demo", "--optimization", "opt one", "--batch-sizes", "1,2", "--cores", "1",
                 "--warmup", "0", "--iterations", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    check_shape(d, ["baseline", "opt one"], [1, 2], [1], 2)
    for r in d["results"]:
        assert (r["optimization"], r["optimization_id"]) == \
            ((None, None) if r["model"] == "baseline" else ("opt one", opt["id"]))
    assert main(["benchmark", "demo", "--batch-sizes", "1", "--cores", "1", "--iterations", "1"]) == 0
    text = capsys.readouterr().out
    assert "baseline" in text and "speedup" in text


def test_cli_bad_batch_sizes_exit_2(workspace_home, capsys):
    from sparsify_tui.cli import main

    with pytest.raises(SystemExit) as e:
        main(["benchmark", "x", "--batch-sizes", "1,a"])
    assert e.value.code == 2
