"""The runtime as a user choice (issue 28): the run spec, the runtimes a job measures, the budget search choosing the
runtime too, and benchmarks across runtimes.

Speed is never asserted: two fake runtimes registered for the test run onnxruntime's sessions (real outputs) and the
timing is a deterministic stand-in (a model's ms per batch is its file size in MB times its runtime's factor), so the
tests assert what the search and the benchmark do with the times they are given, on any CPU."""

from __future__ import annotations

import os

import numpy as np
import pytest

from sparsify_tui import engine as engines
from sparsify_tui.engine.ort import OnnxRuntimeEngine
from sparsify_tui.engine.run import REFERENCE, RunSpec
from sparsify_tui.errors import SparsifyError

from test_budget_search import TIMING, _cnn, _data, _rec


class FastEngine(OnnxRuntimeEngine):
    """A second runtime: onnxruntime's sessions (the same outputs), timed at half the reference's ms."""

    name = "fast"
    display_name = "Fast"
    session_precisions = ("fp32", "bf16")

    def precision_problem(self, precision):
        if precision == "fp32":
            return None
        return "this CPU has no BF16: use --precision fp32"


class ZeroEngine(OnnxRuntimeEngine):
    """A runtime that is fast and wrong: every output is zeros."""

    name = "zero"
    display_name = "Zero"

    def open_session(self, model, core_count=None, *, external_initializers=None):
        session = super().open_session(model, core_count, external_initializers=external_initializers)
        run = session.runner

        def zeros(outputs=None, cancel=None):
            inner = run(outputs, cancel)
            return lambda feed: [np.zeros_like(o) for o in inner(feed)]
        session.runner = zeros
        return session


FACTOR = {"onnxruntime": 1.0, "fast": 0.5, "zero": 0.1}


def _times(engine, models, feeds, core_count, *, rounds=3, warmup=2, iterations=12, cancel=None, on_step=None,
           **kw):
    """interleaved_times stand-in: a run takes the model's file size in MB times its runtime's factor."""
    per = list(engine) if isinstance(engine, (list, tuple)) else [engine] * len(models)
    return [[os.path.getsize(m) / 1e6 * FACTOR[e.name]] * int(iterations) for e, m in zip(per, models)]


@pytest.fixture
def runtimes(monkeypatch):
    from sparsify_tui.engine import timing

    monkeypatch.setitem(engines.ENGINES, "fast", FastEngine)
    monkeypatch.setitem(engines.ENGINES, "zero", ZeroEngine)
    monkeypatch.setattr(engines, "_instances", {})
    monkeypatch.setattr(timing, "interleaved_times", _times)


# ------------------------------------------------------------------------------------------------ the run spec


def test_a_run_spec_names_its_runtime_and_round_trips():
    run = RunSpec(engine="onnxruntime", precision="fp32", batch_size=4, core_count=2)
    assert RunSpec.from_dict(run.to_dict()) == run and run.is_reference and run.but(batch_size=1).batch_size == 1
    assert RunSpec.from_dict({}) == REFERENCE  # records from before the runtime was a choice
    assert run.runtime().label.startswith("onnxruntime ") and run.runtime().label.endswith(" · fp32")


def test_an_engine_refuses_a_precision_it_cannot_run_in_one_line(runtimes):
    with pytest.raises(SparsifyError, match="^onnxruntime's CPU provider runs fp32 sessions only, not bf16"):
        engines.get_engine("onnxruntime", "bf16")
    with pytest.raises(SparsifyError, match="^this CPU has no BF16"):
        engines.get_engine("fast", "bf16")
    with pytest.raises(SparsifyError, match="unknown precision 'int4'"):
        engines.get_engine("fast", "int4")
    assert engines.get_engine("fast", "fp32").label.startswith("Fast ")


def test_runtimes_of_a_job_skip_a_precision_no_engine_runs_here_in_one_line(runtimes):
    from sparsify_tui.services.job_settings import runtimes as job_runtimes

    pairs, notes = job_runtimes({"engines": "onnxruntime,fast", "precisions": "all"})
    assert pairs == [("onnxruntime", "fp32"), ("fast", "fp32")]
    # one line, with the reason of the engine that has bf16 sessions (the CPU), not onnxruntime's
    assert notes == ["bf16 skipped: this CPU has no BF16: use --precision fp32"]
    with pytest.raises(SparsifyError, match="^--precisions bf16: this CPU has no BF16"):
        job_runtimes({"engines": "fast", "precisions": "bf16"})
    with pytest.raises(SparsifyError, match="^--engines: 'tensorrt' is not an engine"):
        job_runtimes({"engines": "tensorrt"})
    assert job_runtimes({}) == (None, [])


# ------------------------------------------------------------------------------------------------ the budget search


def test_the_budget_search_chooses_a_faster_runtime_and_drops_a_slow_one(runtimes, tmp_path):
    """Every candidate runtime is screened on the unthinned model: onnxruntime (twice the fast runtime's time) is
    dropped with its reason, the chosen trial runs on the fast runtime, and every trial names its runtime."""
    from sparsify_tui.optimization.budget_search import search_budget

    model = _cnn(tmp_path / "cnn.onnx")
    data = _data(model, tmp_path / "d.npz", n=32)
    res = search_budget(model, _rec(model), max_drop=0.5, data=data, max_trials=2, timing=TIMING,
                        runs=[RunSpec(engine="fast", core_count=1)])
    screened = {(r["engine"], r["precision"]): r for r in res.runtimes}
    assert screened[("fast", "fp32")]["kept"] and screened[("fast", "fp32")]["speedup"] == pytest.approx(2.0)
    assert not screened[("onnxruntime", "fp32")]["kept"]
    assert "2.00× the fastest runtime on the unthinned model" in screened[("onnxruntime", "fp32")]["note"]
    chosen = res.chosen_trial
    assert chosen is not None and chosen.runtime == ("fast", "fp32") and chosen.label.endswith(" · Fast fp32")
    assert all(t.median_ms is None for t in res.trials if t.runtime == ("onnxruntime", "fp32"))


def test_a_runtime_over_budget_on_the_unthinned_model_is_not_searched(runtimes, tmp_path):
    from sparsify_tui.optimization.budget_search import search_budget

    model = _cnn(tmp_path / "cnn.onnx")
    data = _data(model, tmp_path / "d.npz", n=32)
    res = search_budget(model, _rec(model), max_drop=0.01, data=data, max_trials=1, timing=TIMING,
                        runs=[RunSpec(engine="zero", core_count=1)])
    zero = next(r for r in res.runtimes if r["engine"] == "zero")
    assert not zero["kept"] and zero["note"].startswith("over budget on the unthinned model")
    assert any(w.startswith("Zero ") and "not searched: over budget" in w for w in res.warnings)
    assert all(t.runtime != ("zero", "fp32") for t in res.trials)


def test_int8_gives_way_to_its_own_model_when_it_does_not_pay():
    from sparsify_tui.optimization.budget_search import choose
    from sparsify_tui.optimization.record import BudgetTrial

    thinned = BudgetTrial(index=0, target=1.5, within_budget=True, median_ms=1.0, round_ms=[1.0, 1.0])
    int8 = BudgetTrial(index=1, target=1.5, quantized=True, source=0, within_budget=True, median_ms=0.99,
                       round_ms=[0.99, 0.99])
    assert choose([thinned, int8], [2.0, 2.0]) is thinned  # 1% faster is within the noise: INT8 is not worth it
    int8.round_ms, int8.median_ms = [0.5, 0.5], 0.5
    assert choose([thinned, int8], [2.0, 2.0]) is int8


def test_the_chosen_runtime_is_the_optimizations_and_its_deployment_snippet(runtimes, tmp_path, workspace_home):
    """Through the service: the optimization stores the runtime its search chose; export writes how to run it."""
    from sparsify_tui.services.budget import search_budget_optimization
    from sparsify_tui.services.optimizations import export_optimization
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    model = _cnn(tmp_path / "cnn.onnx")
    data = _data(model, tmp_path / "d.npz", n=32)
    ws = Workspace()
    pid = create_project(ws, str(model), name="cnn")["id"]
    opt = search_budget_optimization(ws, pid, {"name": "b", "max_drop": 0.5, "data": str(data), "max_trials": 1,
                                               "engines": "onnxruntime,fast"}, timing=TIMING)
    assert opt.target_runtime == ("fast", "fp32") and opt.search.chosen_trial.runtime == ("fast", "fp32")
    res = export_optimization(ws, pid, "b", recipe_path=str(tmp_path / "r.yaml"))
    assert res["runtime"] == "fast fp32" and os.path.basename(res["deploy_path"]) == "r_deploy.py"
    text = open(res["deploy_path"]).read()
    assert "not applied yet" in text and "intra_op_num_threads" in text  # the fast runtime is onnxruntime's class


# ------------------------------------------------------------------------------------------------ benchmarks


def test_a_benchmark_measures_every_model_on_every_runtime_against_the_reference(runtimes, tmp_path):
    from sparsify_tui.benchmark.runner import run_benchmark

    model = _cnn(tmp_path / "cnn.onnx")
    res = run_benchmark([("baseline", str(model)), ("copy", str(model))], batch_sizes=[1], core_counts=[1],
                        runtimes=[("fast", "fp32"), ("zero", "fp32")], iterations=4, warmup=0, rounds=2,
                        dims={}, data=_data(model, tmp_path / "d.npz", n=8))
    labels = sorted(r.model for r in res.runs)
    assert labels == ["baseline", "baseline · Fast fp32", "baseline · Zero fp32", "copy", "copy · Fast fp32",
                      "copy · Zero fp32"]
    assert res.run("baseline · Fast fp32", 1, 1).speedup == pytest.approx(2.0)  # against the baseline on onnxruntime
    assert res.reference_label.startswith("baseline on onnxruntime ")
    acc = res.accuracy["models"]
    assert acc["copy · Fast fp32"]["drop"] == 0.0 and acc["copy · Zero fp32"]["drop"] > 0.5  # accuracy per runtime
