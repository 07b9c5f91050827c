"""The engine seam: a second runtime is one module plus one registration line.

``StubEngine`` below is that module: a fake runtime whose sessions return constant outputs and whose
clock makes every run take a fixed time. Registered in ``ENGINES`` (one line), it runs the real
benchmark and perf-profile entry points end to end, and the numbers they report are the stub's.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from sparsify_tui.engine.run import RunSpec
from sparsify_tui import engine as engines
from sparsify_tui.analysis.graph import graph_nodes
from sparsify_tui.engine.base import Engine, KernelTimes, ProfiledPass, QuantizationResult, Session

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx"
DEMO_DIMS = {"x:2": 48, "x:3": 192}
#: ms per run the stub reports, by model file name (an "int8" file runs twice as fast)
FP32_MS = 4.0
INT8_MS = 2.0


# ----------------------------------------------------------------------------------- the stub "module"
class StubSession(Session):
    """Constant outputs (zeros of the declared shapes); the clock advances ``ms`` per timed run."""

    def __init__(self, model_path: str, ms: float):
        m = onnx.load(str(model_path), load_external_data=False)
        inits = {t.name for t in m.graph.initializer}
        self.input_names = [i.name for i in m.graph.input if i.name not in inits]
        self.output_names = [o.name for o in m.graph.output]
        ticks = itertools.count(0, int(ms * 1e6))  # consecutive reads are one run apart
        self.clock = lambda: next(ticks)
        self.runs = 0

    def runner(self, outputs=None, cancel=None):
        names = list(outputs) if outputs is not None else self.output_names
        out = [np.zeros((1, 2), np.float32) for _ in names]

        def run(feed):
            self.runs += 1
            return out
        return run


class StubEngine(Engine):
    name = "stub"
    description = "stub runtime: constant outputs, fixed times"
    quantization_method = "stub: copies the model"

    @property
    def version(self) -> str:
        return "0.0-stub"

    def providers(self) -> list:
        return ["StubProvider"]

    def settings(self, core_count: int) -> dict:
        return {"provider": "StubProvider", "threads": core_count}

    @staticmethod
    def _ms(model) -> float:
        return INT8_MS if "int8" in Path(str(model)).name else FP32_MS

    def open_session(self, model, core_count=None, *, external_initializers=None):
        return StubSession(str(model), self._ms(model))

    def profile(self, model_path, feeds, core_count, *, runs, workdir, tag="model", cancel=None, on_run=None):
        nodes, inits = graph_nodes(onnx.load(str(model_path), load_external_data=False), with_initializers=True)
        nodes = [n for n in nodes if n.op_type != "Constant"]  # the stub runs the graph as given, constants folded
        keys = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(nodes)]  # unnamed kernels: <op>_<index>
        per_node = self._ms(model_path) / len(nodes)
        kernels = KernelTimes(ms={k: per_node for k in keys}, op_type={k: n.op_type for k, n in zip(keys, nodes)},
                              order=keys, runs=runs, run_ms=self._ms(model_path))
        return ProfiledPass(kernels=kernels, nodes=nodes, initializers=inits)

    def quantize_int8(self, model_path, out_path, calibration, *, per_channel=True, excluded_nodes=(),
                      progress=None, cancel=None):
        onnx.save(onnx.load(str(model_path)), str(out_path))
        return QuantizationResult(out_path=Path(out_path), seconds=0.0, excluded_nodes=list(excluded_nodes))


# ----------------------------------------------------------------------------------- the registration line
@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setitem(engines.ENGINES, "stub", StubEngine)  # the one registration line
    return engines.get_engine("stub")


def run_benchmark_on_stub(tmp_path: Path):
    from sparsify_tui.benchmark.runner import run_benchmark

    int8 = tmp_path / "demo_int8.onnx"
    int8.write_bytes(DEMO.read_bytes())
    return run_benchmark([("baseline", str(DEMO)), ("int8", str(int8))], batch_sizes=[1, 2], core_counts=[1],
                         runtimes=[("stub", "fp32")], warmup=2, iterations=9, dims=DEMO_DIMS)


def test_registry_names_and_errors(stub):
    assert isinstance(engines.get_engine(), engines.OnnxRuntimeEngine)
    assert engines.get_engine("stub") is stub and engines.get_engine(stub) is stub
    with pytest.raises(engines.SparsifyError, match="unknown engine 'tensorrt'"):
        engines.get_engine("tensorrt")
    with pytest.raises(engines.SparsifyError, match="runs only fp32 sessions here, not bf16"):
        engines.get_engine("stub", "bf16")
    info = engines.system_info("stub")
    assert info.ort_version == "0.0-stub" and info.ort_providers == ["StubProvider"] and info.available_cores >= 1


def test_run_benchmark_measures_through_the_registered_engine(stub, tmp_path):
    """The stub is one more runtime of the benchmark: its runs carry its times, and the reference (the baseline on
    onnxruntime fp32) is measured beside it, as every speedup is against that."""
    res = run_benchmark_on_stub(tmp_path)
    assert len(res.runs) == 8
    on_stub = [r for r in res.runs if r.engine == "stub"]
    assert sorted({r.model for r in on_stub}) == ["baseline · stub fp32", "int8 · stub fp32"]
    for r in on_stub:
        want = INT8_MS if r.model.startswith("int8") else FP32_MS
        assert r.iterations_ms == pytest.approx([want] * 9)
        assert (r.median_ms, r.p90_ms, r.min_ms) == pytest.approx((want, want, want))
        ref = res.run("baseline", r.batch_size, 1)
        assert ref.engine == "onnxruntime" and r.speedup == pytest.approx(ref.median_ms / want)
    d = res.to_dict()["benchmark"]
    assert [(x["engine"], x["precision"]) for x in d["runtimes"]] == [("onnxruntime", "fp32"), ("stub", "fp32")]
    assert d["runtimes"][1]["version"] == "0.0-stub" and d["runtimes"][1]["label"] == "stub 0.0-stub · fp32"
    assert res.reference_label.startswith("baseline on onnxruntime ")


def test_perf_profile_measures_through_the_registered_engine(stub):
    from sparsify_tui.profiling.perf import profile_performance

    prof = profile_performance(DEMO, RunSpec(engine="stub", core_count=1), dims=DEMO_DIMS, warmup=1, iterations=6,
                               int8=True)
    lat = prof.latency_ms
    assert (lat.median, lat.p90, lat.mean, lat.min) == pytest.approx((FP32_MS, FP32_MS, FP32_MS, FP32_MS))
    assert prof.items_per_second == pytest.approx(1000.0 / FP32_MS)
    assert prof.engine_version == "0.0-stub" and prof.settings["provider"] == "StubProvider"
    assert (prof.engine, prof.precision) == ("stub", "fp32")
    # the stub's kernels are the model's own nodes: every node gets its share, nothing is unattributed
    assert prof.total_node_ms == pytest.approx(FP32_MS)
    assert not any(n.id.startswith("[") for n in prof.nodes)
    # INT8: the stub's quantize_int8 wrote the profile's int8.onnx, which the stub runs in 2 ms
    i8 = prof.int8
    assert i8.error is None and i8.method == StubEngine.quantization_method
    assert i8.median == pytest.approx(INT8_MS) and i8.speedup == pytest.approx(2.0)
    assert i8.profiled.kernel_total_ms == pytest.approx(INT8_MS)
    assert sum(n.int8_time_ms for n in prof.nodes) == pytest.approx(INT8_MS)


STUB_ONLY = """
import sys
sys.path.insert(0, {tests!r})
import test_engine_registry as t
from sparsify_tui import engine
engine.ENGINES["stub"] = t.StubEngine
from sparsify_tui.profiling.perf import profile_performance
from sparsify_tui.engine.run import RunSpec
prof = profile_performance(t.DEMO, RunSpec(engine="stub", core_count=1), dims=t.DEMO_DIMS, warmup=0, iterations=3, int8=True)
assert prof.latency_ms.median == t.FP32_MS
print("onnxruntime" in sys.modules)
"""


def test_a_stub_run_never_imports_onnxruntime():
    """Nothing outside the engine reaches for onnxruntime: a perf profile on the stub never imports it (a benchmark
    does, on purpose: its reference is the baseline on onnxruntime fp32)."""
    proc = subprocess.run([sys.executable, "-c", STUB_ONLY.format(tests=str(ROOT / "tests"))], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
