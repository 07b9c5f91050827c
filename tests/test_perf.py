"""Performance profiles: attribution of fused kernels, JSON shape, sample data errors, INT8, cancel, jobs.

Models are tiny and built here (ir_version 8); runs use few iterations. No timing assertions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import shared_model
from sparsify_tui.engine.run import RunSpec
from sparsify_tui.cli import main
from sparsify_tui.engine.ort import parse_trace
from sparsify_tui.errors import JobCanceled, ModelError
from sparsify_tui.profiling import attribution as attr
from sparsify_tui.profiling import perf_estimate as est
from sparsify_tui.profiling.perf import LatencySummary, PerfProfile, profile_performance
from sparsify_tui.progress import CancelToken
from sparsify_tui.services.projects import create_project

LAYER_OPS = ("Conv", "Gemm", "MatMul")


def _f32(rng, *shape, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def build_resnet_like(path, blocks=3, channels=16, hw=24):
    """Conv+Relu stem, then `blocks` residual blocks Conv -> BatchNormalization -> Add(skip) -> Relu, then
    GlobalAveragePool -> Flatten -> Gemm. onnxruntime folds the BNs, fuses Add+Relu into the Convs and
    renames them (``bn1_nchwc``): every Conv must still get time."""
    rng = np.random.default_rng(0)
    C = channels
    inits = [numpy_helper.from_array(_f32(rng, C, 3, 3, 3), "w0")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], name="conv0", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"], name="relu0")]
    prev = "r0"
    for i in range(1, blocks + 1):
        inits += [numpy_helper.from_array(_f32(rng, C, C, 3, 3), f"w{i}"),
                  numpy_helper.from_array((rng.random(C) + 0.5).astype(np.float32), f"g{i}"),
                  numpy_helper.from_array(_f32(rng, C), f"b{i}"),
                  numpy_helper.from_array(_f32(rng, C), f"m{i}"),
                  numpy_helper.from_array((rng.random(C) + 0.5).astype(np.float32), f"v{i}")]
        nodes += [helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]),
                  helper.make_node("BatchNormalization", [f"c{i}", f"g{i}", f"b{i}", f"m{i}", f"v{i}"], [f"bn{i}"],
                                   name=f"bn{i}"),
                  helper.make_node("Add", [f"bn{i}", prev], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("Relu", [f"a{i}"], [f"y{i}"], name=f"relu{i}")]
        prev = f"y{i}"
    inits += [numpy_helper.from_array(_f32(rng, C, 10), "fcw"), numpy_helper.from_array(np.zeros(10, np.float32), "fcb")]
    nodes += [helper.make_node("GlobalAveragePool", [prev], ["gap"], name="gap"),
              helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
              helper.make_node("Gemm", ["flat", "fcw", "fcb"], ["out"], name="fc")]
    g = helper.make_graph(nodes, "resnet_like", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, hw, hw])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def build_matmul_model(path):
    """x[N,32] -> MatMul(W) -> Add(b) -> Relu -> MatMul(W2): a MatMul+Add that onnxruntime turns into Gemm."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(_f32(rng, 32, 64), "W"), numpy_helper.from_array(_f32(rng, 64), "b"),
             numpy_helper.from_array(_f32(rng, 64, 8), "W2")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm1"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="bias1"),
             helper.make_node("Relu", ["hb"], ["hr"], name="act1"),
             helper.make_node("MatMul", ["hr", "W2"], ["y"], name="mm2")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


@pytest.fixture(scope="module")
def resnet_like(tmp_path_factory):
    return build_resnet_like(tmp_path_factory.mktemp("perf") / "resnet_like.onnx")


@pytest.fixture(scope="module")
def resnet_profile(resnet_like):
    """One profile with INT8, shared by the tests that only read it."""
    return profile_performance(resnet_like, RunSpec(batch_size=2, core_count=1), warmup=1, iterations=3, int8=True)


def _rows(prof):
    return {n.id: n for n in prof.nodes}


# --------------------------------------------------------------------------------------- attribution
def test_every_conv_of_fused_chains_gets_time_and_totals_add_up(resnet_profile):
    rows = _rows(resnet_profile)
    convs = [f"conv{i}" for i in range(4)]
    for c in convs:
        assert rows[c].time_ms > 0, c
    # onnxruntime really renamed the fused convs (otherwise this test proves nothing)
    assert any(k != c for c in convs for k in rows[c].kernels)
    # BN, Add and Relu were fused: no time of their own, attributed to the conv they were fused into
    for i in range(1, 4):
        for nid in (f"bn{i}", f"add{i}", f"relu{i}"):
            assert rows[nid].time_ms == 0
            assert rows[nid].fused_into == f"conv{i}", (nid, rows[nid].fused_into)
    total = sum(n.time_ms for n in resnet_profile.nodes)
    assert total == pytest.approx(resnet_profile.profiled.kernel_total_ms, rel=1e-9)
    assert sum(n.share for n in resnet_profile.nodes) == pytest.approx(1.0)
    # layout conversion has its own row, never dropped
    assert any(n.id == attr.LAYOUT_ROW for n in resnet_profile.nodes) or all(
        "nchwc" not in k for n in resnet_profile.nodes for k in n.kernels)


def test_int8_profile_measured_and_mapped_back(resnet_profile):
    i8 = resnet_profile.int8
    assert i8.enabled and not i8.error, i8
    assert i8.median > 0 and i8.speedup > 0
    rows = _rows(resnet_profile)
    for c in ("conv0", "conv1", "conv2", "conv3", "fc"):
        assert rows[c].int8_time_ms > 0, c  # QLinearConv/QGemm kernels map back to the original nodes
    int8_total = sum(n.int8_time_ms or 0 for n in resnet_profile.nodes)
    assert int8_total == pytest.approx(i8.profiled.kernel_total_ms, rel=1e-9)
    # the ratio estimates use comes from one interleaved timing of FP32 and INT8 (not two blocks minutes apart)
    inter = i8.interleaved
    assert inter.fp32_ms > 0 and inter.int8_ms > 0 and inter.rounds == 3
    assert i8.speedup_interleaved == pytest.approx(inter.fp32_ms / inter.int8_ms)


def test_matmul_add_fused_to_gemm_keeps_time_on_matmul(tmp_path):
    prof = profile_performance(build_matmul_model(tmp_path / "mlp.onnx"), warmup=1, iterations=3, int8=False)
    rows = _rows(prof)
    assert rows["mm1"].time_ms > 0 and rows["mm2"].time_ms > 0
    assert rows["bias1"].time_ms == 0 and rows["bias1"].fused_into == "mm1"


def test_parse_trace_skips_warmup_and_subtracts_nested_kernels():
    ev = []
    for r, t0 in enumerate((0, 1000, 2000)):
        ev.append({"cat": "Session", "name": "model_run", "ts": t0, "dur": 900})
        ev.append({"cat": "Node", "name": "conv_kernel_time", "ts": t0 + 10, "dur": 100 * (r + 1), "args": {"op_name": "Conv"}})
        ev.append({"cat": "Node", "name": "if0_kernel_time", "ts": t0 + 200, "dur": 500, "args": {"op_name": "If"}})
        ev.append({"cat": "Node", "name": "inner_kernel_time", "ts": t0 + 250, "dur": 300, "args": {"op_name": "MatMul"}})
    kt = parse_trace(ev, skip_runs=1)
    assert kt.runs == 2
    assert kt.ms["conv"] == pytest.approx((0.2 + 0.3) / 2)
    assert kt.ms["if0"] == pytest.approx(0.2)  # 500 µs minus the nested 300 µs
    assert kt.ms["inner"] == pytest.approx(0.3)
    assert kt.total_ms == pytest.approx(sum(kt.ms.values()))


# --------------------------------------------------------------------------------------- CLI JSON
def test_cli_json_shape_on_a_model_path(resnet_like, capsys):
    rc = main(["profile", "perf", str(resnet_like), "--batch-size", "2", "--cores", "1", "--warmup", "1",
               "--iterations", "3", "--no-int8", "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    d = json.loads(out)  # stdout is pure JSON (progress went to stderr)
    p = d["profile"]
    for key in ("name", "batch_size", "core_count", "instruction_sets", "latency_ms", "items_per_second", "int8"):
        assert key in p
    assert set(p["latency_ms"]) == {"median", "p90", "mean", "min"}
    assert p["items_per_second"] == pytest.approx(1000 * 2 / p["latency_ms"]["median"])
    assert p["latency_ms"]["min"] <= p["latency_ms"]["median"] <= p["latency_ms"]["p90"]
    assert sum(n["share"] for n in d["nodes"]) == pytest.approx(1.0, abs=1e-6)
    ids = {n["id"] for n in d["nodes"]}
    model = onnx.load(str(resnet_like))
    for node in model.graph.node:
        if node.op_type in LAYER_OPS:
            assert node.name in ids
    for n in d["nodes"]:
        for key in ("id", "op_type", "weight_name", "time_ms", "share", "flops", "gflops_per_s", "est_pruned_ms",
                    "int8_time_ms"):
            assert key in n
        assert list(n["est_pruned_ms"]) == list(est.LEVEL_KEYS)
    assert p["int8"] == {"enabled": False}
    pe = p["pruned_estimate"]
    assert "onnxruntime" in pe["note"] and pe["runtime"] and pe["onnxruntime_speedup"] == 1.0
    assert PerfProfile.from_dict(d).to_dict() == d  # round trip


STORED_PROFILES = json.loads((Path(__file__).parent / "data" / "perf_profile_main.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("doc", STORED_PROFILES["stored"], ids=lambda d: d["profile"]["name"])
def test_every_stored_perf_profile_round_trips(doc):
    """A stored profile (INT8 measured, INT8 off, INT8 failed) reads and writes back with the same keys, order
    and values: the bytes on disk and of ``profile perf --json`` do not change when it is read."""
    dumps = lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False)  # noqa: E731
    prof = PerfProfile.from_dict(doc)
    assert dumps(prof.to_dict()) == dumps(doc)
    assert dumps(PerfProfile.from_dict(json.loads(dumps(prof.to_dict()))).to_dict()) == dumps(doc)


def test_cli_sample_data_errors_exit_2_before_running(resnet_like, tmp_path, capsys):
    bad_shape = tmp_path / "bad_shape.npz"
    np.savez(bad_shape, x=np.zeros((4, 3, 10, 10), np.float32))
    bad_name = tmp_path / "bad_name.npz"
    np.savez(bad_name, images=np.zeros((4, 3, 24, 24), np.float32))
    bad_dtype = tmp_path / "bad_dtype.npy"
    np.save(bad_dtype, np.array([["a"] * 24] * 3))
    for f in (bad_shape, bad_name, bad_dtype):
        rc = main(["profile", "perf", str(resnet_like), "--iterations", "2", "--no-int8", "--data", str(f), "--json"])
        cap = capsys.readouterr()
        assert rc == 2, f
        err = [line for line in cap.err.splitlines() if "error" in line]
        assert len(err) == 1 and "timing" not in cap.err, cap.err  # one line, and no run was started
        assert cap.out == ""


def test_sample_data_is_used_when_valid(resnet_like, tmp_path):
    good = tmp_path / "good.npz"
    np.savez(good, x=np.random.default_rng(0).standard_normal((4, 3, 24, 24)).astype(np.float32))
    prof = profile_performance(resnet_like, RunSpec(batch_size=2), warmup=0, iterations=2, data=good, int8=False)
    assert prof.inputs.source == "sample data" and prof.inputs.batches == 2


# --------------------------------------------------------------------------------------- INT8 failure, cancel
def test_quantization_failure_is_recorded_and_profile_completes(resnet_like, monkeypatch):
    from sparsify_tui.engine.ort import OnnxRuntimeEngine as quant

    def boom(*a, **k):
        raise ModelError("INT8 quantization of resnet_like.onnx failed: ValueError: unsupported op")

    monkeypatch.setattr(quant, "quantize_int8", boom)
    prof = profile_performance(resnet_like, warmup=0, iterations=2, int8=True)
    assert "unsupported op" in prof.int8.error
    assert prof.latency_ms.median > 0 and all(n.int8_time_ms is None for n in prof.nodes)


def test_cancel_stops_the_profile(resnet_like):
    token = CancelToken()

    def progress(step, frac):
        if step == "timing":
            token.cancel()

    with pytest.raises(JobCanceled):
        profile_performance(resnet_like, warmup=2, iterations=50, int8=False, progress=progress, cancel=token)
    token2 = CancelToken()
    token2.cancel()
    with pytest.raises(JobCanceled):
        profile_performance(resnet_like, iterations=2, int8=False, cancel=token2)


# --------------------------------------------------------------------------------------- estimates
def test_pruned_estimates_are_calibrated_not_flops():
    for a in (0.0, 0.5, 1.0):
        prev = 1.0
        for s in est.LEVELS:
            f = est.layer_speedup(s, a)
            assert f >= 1.0 and f >= prev - 1e-12
            prev = f
    assert est.layer_speedup(0.99) == est.layer_speedup(0.98)  # no extrapolation beyond calibration
    assert est.layer_speedup(0.7) == 1.0  # below the measured levels nothing is claimed
    # the layer factors reproduce the measured whole-model speedups (prunable share p of the time)
    p = est._P_REF
    for s, want_r, want_m in ((0.9, 1.04, 1.06), (0.95, 1.42, 1.10), (0.98, 1.76, 1.19)):
        for dw_share, want in ((0.0, want_r), (1.0, want_m)):
            f = est.layer_speedup(s, dw_share)
            assert 1 / ((1 - p) + p / f) == pytest.approx(want, rel=1e-6)
    # FLOPs-proportional would be 20x at 0.95; we stay within the calibration
    assert est.layer_speedup(0.95) < 2.0


# --------------------------------------------------------------------------------------- job + store
def test_job_stores_record_and_blob_and_rerun_replaces(resnet_like, workspace_home):
    from sparsify_tui.jobs import run_here
    from sparsify_tui.services.profiles import load_perf_profile
    from sparsify_tui.store import Workspace

    ws = Workspace()
    proj = create_project(ws, resnet_like, name="rl", batch_size=1)
    summary = run_here(ws, proj["id"], "perf_profile", {"name": "fast", "warmup": 0, "iterations": 2, "int8": False})
    rid = summary["record_id"]
    rec = ws.get_record(proj["id"], "perf_profiles", rid)
    assert rec["name"] == "fast" and rec["batch_size"] == 1 and rec["latency_ms"] > 0 and rec["status"] == "completed"
    prof = load_perf_profile(ws, proj["id"], "fast")
    assert prof.name == "fast" and _rows(prof)["conv1"].time_ms > 0
    summary2 = run_here(ws, proj["id"], "perf_profile",
                        {"name": "fast", "record_id": rid, "batch_size": 2, "warmup": 0, "iterations": 2, "int8": False})
    assert summary2["record_id"] == rid
    assert len(ws.list_records(proj["id"], "perf_profiles")) == 1
    assert load_perf_profile(ws, proj["id"], rid).batch_size == 2


# --------------------------------------------------------------------------------------- real model
def test_mobilenet_v2_quick_profile():
    path = shared_model("mobilenet_v2.onnx")
    prof = profile_performance(path, warmup=1, iterations=3, int8=True)
    convs = [n for n in prof.nodes if n.op_type in LAYER_OPS]
    assert len(convs) >= 50
    assert all(n.time_ms > 0 for n in convs)
    assert not prof.int8.error, prof.int8
    assert all(n.int8_time_ms > 0 for n in convs)
    assert sum(n.share for n in prof.nodes) == pytest.approx(1.0)
    unattributed = sum(n.time_ms for n in prof.nodes if n.id == attr.UNATTRIBUTED_ROW)
    assert unattributed < 0.02 * prof.total_node_ms


def test_real_quantization_failure_is_recorded():
    """magika (int32 byte input, ai.onnx.ml domain) fails in quantize_static: the profile completes."""
    path = shared_model("magika_standard_v3_3.onnx")
    prof = profile_performance(path, warmup=0, iterations=2, int8=True)
    assert prof.int8.enabled and prof.int8.error, prof.int8
    assert "\n" not in prof.int8.error
    assert prof.latency_ms.median > 0 and sum(n.time_ms for n in prof.nodes) > 0


# ------------------------------------------------------------------ scaled node times, control flow, noise
def test_silero_vad_control_flow_counted_once_and_rows_scaled_to_the_median():
    """silero_vad runs its network inside If subgraphs: an If row keeps its own time only (the body's kernels
    are subtracted), so the rows add up to no more than the profiled run's wall time; per-node times are scaled
    to the unprofiled median, with the raw profiled figure kept and the profiler's overhead stated."""
    path = shared_model("silero_vad.onnx")
    prof = profile_performance(path, dims={"sr": 16000, "input:1": 512}, warmup=2, iterations=9, int8=False)
    body = [n for n in prof.nodes if n.graph]
    ifs = [n for n in prof.nodes if n.op_type == "If" and not n.graph]
    assert ifs and sum(n.time_ms for n in body) > 0
    kernel_total = prof.profiled.kernel_total_ms
    assert prof.total_node_ms == pytest.approx(kernel_total)
    # exclusive kernel times of one run cannot exceed that run's wall time: a double-counted body would
    assert kernel_total <= prof.profiled.run_ms * 1.05
    median = prof.latency_ms.median
    assert sum(n.scaled_ms for n in prof.nodes) == pytest.approx(median)
    assert sum(prof.op_type_totals().values()) == pytest.approx(median)
    assert sum(prof.op_type_totals(scaled=False).values()) == pytest.approx(kernel_total)
    assert prof.overhead_ratio == pytest.approx(kernel_total / median)
    assert prof.profiled.overhead_ratio == pytest.approx(kernel_total / median)
    assert prof.profiled.scale_to_median == pytest.approx(median / kernel_total)
    assert len(prof.profiled.runs_ms) == prof.profiled.runs
    for n in prof.nodes:
        assert n.scaled_ms == pytest.approx(n.time_ms * median / kernel_total)
    # the stored document keeps every old field and adds the new ones
    d = json.loads(json.dumps(prof.to_dict()))
    assert {"time_ms", "scaled_ms", "int8_scaled_ms"} <= set(d["nodes"][0])
    assert isinstance(d["profile"]["warnings"], list)
    assert PerfProfile.from_dict(d).nodes[5].scaled_ms == pytest.approx(prof.nodes[5].scaled_ms)


def test_a_stored_profile_without_scaled_times_gets_them():
    nodes = [{"index": 0, "id": "a", "op_type": "Conv", "time_ms": 3.0, "int8_time_ms": 1.0},
             {"index": 1, "id": "b", "op_type": "Relu", "time_ms": 1.0, "int8_time_ms": 1.0}]
    prof = PerfProfile.from_dict({"profile": {"name": "old", "latency_ms": {"median": 2.0, "p90": 2.2},
                                              "int8": {"enabled": True, "latency_ms": {"median": 0.5}}},
                                  "nodes": nodes})
    assert [n.scaled_ms for n in prof.nodes] == pytest.approx([1.5, 0.5])
    assert [n.int8_scaled_ms for n in prof.nodes] == pytest.approx([0.25, 0.25])
    assert prof.node_ms(prof.nodes[0], "int8") == pytest.approx(0.25)
    assert prof.node_ms(prof.nodes[0], "baseline", scaled=False) == 3.0
    assert prof.overhead_ratio == pytest.approx(2.0)
    assert prof.warnings == []


def test_noise_warnings():
    from sparsify_tui.profiling.perf import noise_warnings

    assert noise_warnings(LatencySummary(median=1.0, p90=1.9), [2.0, 2.5, 3.9]) == []
    busy = noise_warnings(LatencySummary(median=1.053, p90=13.252), [])
    assert len(busy) == 1 and "12.6× the median" in busy[0] and "rerun" in busy[0]
    spread = noise_warnings(LatencySummary(median=1.0, p90=1.1), [1.0, 1.2, 2.5], "INT8 ")
    assert len(spread) == 1 and spread[0].startswith("INT8 noisy profiled pass") and "2.5×" in spread[0]


def test_a_stored_profile_gets_its_noise_warnings_on_load():
    """Profiles stored by a version without the noise checks (an empty warnings list, or a NaN-weight warning only)
    get them when read, from the runs they kept; a quiet one gets none, and nothing is repeated."""
    base = {"name": "old", "latency_ms": {"median": 1.901, "p90": 14.0}, "profiled": {"runs_ms": [3.0, 3.2]},
            "int8": {"enabled": True, "latency_ms": {"median": 5.0, "p90": 5.5},
                     "profiled": {"runs_ms": [6.0, 19.0]}}}
    for stored in ([], ["model.onnx: 1 weight holds NaN or Inf"]):
        prof = PerfProfile.from_dict({"profile": {**base, "warnings": list(stored)}, "nodes": []})
        noisy = [w for w in prof.warnings if "noisy" in w]
        assert prof.warnings[:len(stored)] == stored
        assert len(noisy) == 2 and "7.4× the median" in noisy[0] and noisy[1].startswith("INT8 noisy profiled pass")
        again = PerfProfile.from_dict(prof.to_dict())
        assert again.warnings == prof.warnings  # stored with them: not added twice
    quiet = PerfProfile.from_dict({"profile": {"name": "q", "latency_ms": {"median": 1.0, "p90": 1.2},
                                               "warnings": []}, "nodes": []})
    assert quiet.warnings == []


# --------------------------------------------------------------------------------------- medians, one INT8 ratio
def test_parse_trace_keeps_each_runs_kernel_times():
    """The per-run kernel times the per-node medians are taken from (issue 29, deliverable 3)."""
    ev = []
    for t0, conv_us in ((0, 100), (10000, 100), (20000, 5000), (30000, 120)):
        ev.append({"cat": "Session", "name": "model_run", "ts": t0, "dur": 9000})
        ev.append({"cat": "Node", "name": "conv_kernel_time", "ts": t0 + 10, "dur": conv_us, "args": {"op_name": "Conv"}})
        ev.append({"cat": "Node", "name": "relu_kernel_time", "ts": t0 + 6000, "dur": 30, "args": {"op_name": "Relu"}})
    kt = parse_trace(ev, skip_runs=1)
    assert kt.ms["conv"] == pytest.approx((0.1 + 5.0 + 0.12) / 3)  # the mean carries the preempted run
    assert kt.per_run == [pytest.approx({"conv": 0.1, "relu": 0.03}), pytest.approx({"conv": 5.0, "relu": 0.03}),
                          pytest.approx({"conv": 0.12, "relu": 0.03})]


def test_over_runs_gives_each_row_its_median_mean_and_iqr():
    """A kernel split over two layers and a layout kernel: each run's times go to the rows with the attribution's
    shares; the row's time is the median over the runs, the mean and the interquartile range kept beside it."""
    att = attr.Attribution(node_ms={"a": 1.0, "b": 1.5, "c": 0.5}, special_ms={attr.LAYOUT_ROW: 0.2},
                           fused_into={"d": "a"}, kernels={"a": ["k1"]},
                           kernel_recipients={"k1": [("a", 1.0)], "k2": [("b", 1.5), ("c", 0.5)],
                                              "k3": [(attr.LAYOUT_ROW, 0.2)]})
    runs = [{"k1": 1.0, "k2": 2.0, "k3": 0.2}, {"k1": 1.0, "k2": 2.0, "k3": 0.2}, {"k1": 41.0, "k2": 2.0, "k3": 0.2},
            {"k1": 1.0, "k2": 2.0}, {"k1": 1.0, "k2": 2.0, "k3": 0.2}]  # k1 preempted once; k3 absent from one run
    out = attr.over_runs(att, runs)
    assert out.node_ms == pytest.approx({"a": 1.0, "b": 1.5, "c": 0.5})  # the preempted run moves no median
    assert out.mean_ms["a"] == pytest.approx(9.0) and out.spread_ms["a"] == 0.0
    assert out.special_ms == pytest.approx({attr.LAYOUT_ROW: 0.2}) and out.mean_ms[attr.LAYOUT_ROW] == pytest.approx(0.16)
    assert out.fused_into == {"d": "a"} and out.kernels == {"a": ["k1"]}
    assert attr.over_runs(att, []) is att  # a pass without per-run times keeps its times


@pytest.fixture
def preempted(monkeypatch):
    """A stub runtime (tests/test_engine_registry.py) whose profiled pass saw one kernel preempted in one run by
    another process: the engine's mean carries that run, its per-run times say which run it was."""
    from test_engine_registry import StubEngine

    from sparsify_tui import engine as engines

    class PreemptedEngine(StubEngine):
        name = "preempted"
        victim = None

        def profile(self, model_path, feeds, core_count, *, runs, **kw):
            pp = super().profile(model_path, feeds, core_count, runs=runs, **kw)
            keys = pp.kernels.order
            type(self).victim = next(k for k in keys if pp.kernels.op_type[k] == "Conv")
            per_run = [dict(pp.kernels.ms) for _ in range(runs)]
            per_run[1][self.victim] *= 200  # one run of 20: 200x as long
            pp.kernels.per_run = per_run
            pp.kernels.ms = {k: float(np.mean([r[k] for r in per_run])) for k in keys}
            return pp

    monkeypatch.setitem(engines.ENGINES, "preempted", PreemptedEngine)
    return PreemptedEngine


def test_a_run_another_process_interrupted_moves_no_node(preempted):
    """Issue 29, deliverable 3: per-node times are medians over the profiled runs, so one interrupted run does not
    decide the chart (it did: the mean made the preempted Conv the largest node); the mean and spread are kept."""
    from test_engine_registry import DEMO, DEMO_DIMS, FP32_MS

    from sparsify_tui.commands.perf import format_profile
    from sparsify_tui.text import cli_lines
    from sparsify_tui.text.perf import overhead_fact
    from sparsify_tui.tui.perf.profile import node_rows

    prof = profile_performance(DEMO, RunSpec(engine="preempted", core_count=1), dims=DEMO_DIMS, warmup=1,
                               iterations=30, int8=False)
    assert prof.profiled.runs == 20  # two thirds of the timed runs (a burst of preemption spans runs)
    victim = next(n for n in prof.nodes if preempted.victim in n.kernels)
    others = [n for n in prof.nodes if n.time_ms > 0 and n is not victim]
    assert victim.time_ms == pytest.approx(others[0].time_ms)  # the median: as long as every other node
    assert victim.share == pytest.approx(max(n.share for n in prof.nodes))
    assert victim.share < 0.02 < victim.mean_ms / sum(n.mean_ms for n in prof.nodes if n.mean_ms)
    assert victim.spread_ms == 0.0 and victim.mean_ms == pytest.approx(victim.time_ms * (1 + 199 / 20))
    assert prof.total_node_ms == pytest.approx(FP32_MS)
    again = PerfProfile.from_dict(json.loads(json.dumps(prof.to_dict())))  # stored and read back
    assert [(n.mean_ms, n.spread_ms) for n in again.nodes] == [(n.mean_ms, n.spread_ms) for n in prof.nodes]
    # shown as columns: the CLI's table and the Layer Results (scaled to the median like the ms)
    head, *rows = format_profile(prof).split("\n\n", 1)[1].splitlines()
    assert head.split()[3:8] == ["ms", "mean", "ms", "IQR", "ms"] and "IQR ms" in head
    row = next(r for r in node_rows(prof, "0.9") if r["id"] == victim.id)
    assert row["mean_ms"] == pytest.approx(prof.node_ms(victim, "mean")) and row["iqr_ms"] == 0.0
    assert row["mean_ms"] > 5 * row["time_ms"]
    assert cli_lines([overhead_fact(prof)])[0].startswith(
        "per-node ms: each node's median over 20 profiled runs (mean and IQR beside it), scaled ×")


STORED_INT8 = next(d for d in STORED_PROFILES["stored"] if d["profile"]["int8"].get("speedup_interleaved"))


def test_one_int8_ratio_the_interleaved_one():
    """Issue 29, deliverable 4: a stored profile whose INT8 block ratio (0.60x) and interleaved ratio (0.30x)
    disagree shows the interleaved one in its summary, its INT8 column, its report and the estimates built from
    it (the summary said 0.60x while the estimates used 0.30x); its per-node ms say they were means."""
    from sparsify_tui.report.model import Report, perf_entry
    from sparsify_tui.report.render import render_markdown
    from sparsify_tui.text import cli_lines
    from sparsify_tui.text.perf import summary_facts

    prof = PerfProfile.from_dict(STORED_INT8)
    i8 = prof.int8
    assert i8.speedup == pytest.approx(0.6008, abs=1e-4) and i8.speedup_interleaved == pytest.approx(0.3047, abs=1e-4)
    assert i8.ratio == i8.speedup_interleaved
    assert prof.int8_ms == pytest.approx(prof.latency_ms.median / i8.speedup_interleaved)
    lines = cli_lines(summary_facts(prof))
    int8 = next(line for line in lines if line.startswith("INT8"))
    assert int8 == f"INT8 measured: {prof.int8_ms:.3f} ms/batch · {1000 / prof.int8_ms:.1f} items/s · 0.30× FP32, " \
                   "timed interleaved with it"
    assert "0.60" not in "\n".join(lines)
    per_node = next(line for line in lines if line.startswith("per-node ms"))
    assert "each node's mean over 3 profiled runs (measured before medians were kept: rerun the profile)" in per_node
    # the INT8 column adds up to the INT8 time shown: FP32 column / INT8 column = the one ratio
    fp32, int8_total = (sum(prof.node_ms(n, k) or 0.0 for n in prof.nodes) for k in ("baseline", "int8"))
    assert fp32 / int8_total == pytest.approx(i8.speedup_interleaved)
    entry = perf_entry(prof)
    assert entry.int8_speedup == i8.speedup_interleaved and entry.int8_median_ms == pytest.approx(prof.int8_ms)
    md = render_markdown(Report(title="t", generated="", version="", project={}, model={}, machine={}, perf=[entry]))
    assert "| 0.30× |" in md and "0.60×" not in md


def test_the_int8_ratio_shows_its_spread_over_the_rounds():
    """The interleaved timing records the ratio of each round; the summary and the report show their range."""
    from test_engine_registry import DEMO, DEMO_DIMS, FP32_MS, INT8_MS, StubEngine

    from sparsify_tui import engine as engines
    from sparsify_tui.report.model import perf_entry
    from sparsify_tui.text import cli_lines
    from sparsify_tui.text.perf import summary_facts

    engines.ENGINES["stub"] = StubEngine
    try:
        prof = profile_performance(DEMO, RunSpec(engine="stub", core_count=1), dims=DEMO_DIMS, warmup=1,
                                   iterations=6, int8=True)
    finally:
        del engines.ENGINES["stub"]
    assert prof.int8.interleaved.round_ratios == pytest.approx([FP32_MS / INT8_MS] * 3)
    # a runtime that gives no per-run kernel times (the stub, OpenVINO's running-mean counters): its own figure
    assert prof.profiled.node_time == "engine" and all(n.mean_ms is None for n in prof.nodes)
    assert any("each node's time over 4 profiled runs as the runtime's counters give it" in line
               for line in cli_lines(summary_facts(prof)) if line.startswith("per-node ms"))
    doc = json.loads(json.dumps(prof.to_dict()))
    doc["profile"]["int8"]["interleaved"]["round_ratios"] = [1.8, 2.0, 2.3]  # a busy machine: the rounds disagree
    prof = PerfProfile.from_dict(doc)
    int8 = next(line for line in cli_lines(summary_facts(prof)) if line.startswith("INT8"))
    assert int8.endswith("· 2.00× (rounds 1.80–2.30×) FP32, timed interleaved with it")
    assert perf_entry(prof).int8_round_ratios == [1.8, 2.0, 2.3]
