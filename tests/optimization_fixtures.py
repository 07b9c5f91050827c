"""Optimization records written by a given version of the code, for the compatibility tests
(tests/test_optimization_record.py).

:func:`synthetic_profiles` builds a deterministic perf profile and loss profile for an analysis dict; the
tests and the generator both use it, so the inputs are the same for both versions of the code.

Generating ``tests/data/optimization_main_records.json`` (done once, with the code of ``main`` before the
typed optimization domain, commit 1c19c5a)::

    git archive 1c19c5a sparsify_tui | tar -x -C /tmp/main-code
    PYTHONPATH=/tmp/main-code:. python tests/optimization_fixtures.py tests/data/optimization_main_records.json

The script runs the CLI and the services the way a user would: a project on the bundled demo model,
``optimize --json`` with a stored perf and loss profile and with the FLOPS profile, schedule and override
edits, apply, copy. It stores every printed JSON document and every stored record.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

DEMO_DIMS = {"x:2": 48, "x:3": 192}
LEVELS = (0.4, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99)
LOSS_LEVELS = (0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99)


def synthetic_profiles(analysis: dict):
    """A :class:`PerfProfile` named "synthetic" (INT8 measured) and a :class:`LossProfile` named "synthetic
    loss" for ``analysis`` (an analysis dict). Node time = 1 µs + FLOPs / 1e9 ms; pruned estimates: no gain
    up to 0.85, then linear to 0.475 of the time at 0.99; INT8 2.5x faster (one node slower); per-layer
    sensitivity ``(k % 5 + 1) * 0.01 * s**2`` with an INT8 outlier at layer 3."""
    from sparsify_tui.profiling.loss import LossLayer, LossProfile
    from sparsify_tui.profiling.perf import Int8Profile, LatencySummary, NodePerf, PerfProfile

    nodes, total = [], 0.0
    for k, n in enumerate(analysis["nodes"]):
        t = 0.001 + float(n.get("flops") or 0) / 1e9
        total += t
        est = {str(lv): t * (1.0 if lv <= 0.85 else 1 - (lv - 0.85) * 3.75) for lv in LEVELS} \
            if n.get("prunable") else {str(lv): t for lv in LEVELS}
        nodes.append(NodePerf(index=k, id=n["id"], op_type=n["op_type"], weight_name=n.get("weight_name"),
                              time_ms=t, flops=int(n.get("flops") or 0), est_pruned_ms=est,
                              int8_time_ms=t * (1.2 if k == 7 else 0.4), prunable=bool(n.get("prunable"))))
    perf = PerfProfile(name="synthetic", batch_size=1, core_count=2, instruction_sets=["AVX2"],
                       latency_ms=LatencySummary(median=total * 1.1, p90=total * 1.2, mean=total * 1.1, min=total),
                       items_per_second=1000 / (total * 1.1),
                       int8=Int8Profile.from_dict({"enabled": True, "error": None,
                                                   "latency_ms": {"median": total * 1.1 / 2.5}}),
                       nodes=nodes)
    layers = []
    for k, n in enumerate(x for x in analysis["nodes"] if x.get("prunable") and x.get("weight_name")):
        sens = {str(s): (k % 5 + 1) * 0.01 * s ** 2 for s in LOSS_LEVELS}
        layers.append(LossLayer(id=n["id"], weight_name=n["weight_name"], op_type=n["op_type"],
                                params=int(n.get("params") or 0), prunable_params=int(n.get("params") or 0),
                                sparsity=0.0, sensitivity=sens, int8_sensitivity=0.5 if k == 3 else 0.01))
    loss = LossProfile(name="synthetic loss", method="one-shot", settings={}, metric="nmse",
                       levels=list(LOSS_LEVELS), total_params=int(analysis["totals"]["params"]),
                       prunable_params=sum(x.params for x in layers), layers=layers)
    return perf, loss


def project_with_profiles(ws, demo_model) -> str:
    """A project "demo" on the demo model with the synthetic profiles stored; returns its id."""
    from sparsify_tui.services.profiles import store_loss_profile, store_perf_profile
    from sparsify_tui.services.projects import create_project

    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    perf, loss = synthetic_profiles(ws.analysis_of(pid))
    store_perf_profile(ws, pid, perf)
    store_loss_profile(ws, pid, loss)
    return pid


PERF_ARGS = ["optimize", "demo", "--name", "perf", "--perf", "synthetic", "--loss", "synthetic loss",
             "--sparsity", "0.6", "--balance", "0.4", "--quantize", "--min-sparsity", "0.45",
             "--max-sparsity", "0.9", "--override", "conv3_expand_weights=0.3", "--json"]
FLOPS_ARGS = ["optimize", "demo", "--name", "flops", "--perf", "flops", "--loss", "approximated",
              "--sparsity", "0.7", "--json"]
LR_MODIFIERS = [
    {"type": "set", "start_epoch": 0, "learning_rate": 0.05},
    {"type": "step", "start_epoch": 2, "end_epoch": 10, "init_lr": 0.05, "step_size": 2, "gamma": 0.5},
    {"type": "multistep", "start_epoch": 10, "end_epoch": -1, "init_lr": 0.01, "milestones": [12, 14],
     "gamma": 0.1},
]


def run_cli(args) -> dict:
    """``sparsify-tui ARGS`` in-process; the printed JSON document."""
    from sparsify_tui.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0
    return json.loads(out.getvalue())


def edit(ws, pid) -> None:
    """The edits applied after creation: schedule, LR modifiers, override, settings, apply, copy."""
    from sparsify_tui.services import optimizations as opts
    from sparsify_tui.services.apply import apply_record

    opts.update_schedule(ws, pid, "perf", epochs={"pruning_start_epoch": 2, "pruning_end_epoch": 20,
                                                  "total_epochs": 40, "update_frequency": 0.5},
                         lr_modifiers=LR_MODIFIERS)
    opts.update_schedule(ws, pid, "perf", quantization={"start_epoch": 25})
    opts.set_override(ws, pid, "perf", "conv6_expand_weights", 0.66)
    opts.reevaluate(ws, pid, "perf", sparsity=0.65, dense_grouped=False)
    apply_record(ws, pid, "flops")
    opts.copy_optimization(ws, pid, "perf")


def main(out_path: str) -> None:
    from sparsify_tui.store import Workspace

    demo_model = Path(__file__).resolve().parents[1] / "sparsify_tui" / "demo" / "ppocr_cls.onnx"
    with tempfile.TemporaryDirectory() as home:
        os.environ["SPARSIFY_TUI_HOME"] = home
        ws = Workspace()
        pid = project_with_profiles(ws, demo_model)
        cli = {"perf": run_cli(PERF_ARGS), "flops": run_cli(FLOPS_ARGS)}
        edit(ws, pid)
        stored = ws.list_records(pid, "optimizations")
    for rec in stored:  # machine-specific values of apply
        if rec.get("applied"):
            rec["applied"]["path"] = "optimized/flops.onnx"
    doc = {"generated_by": "tests/optimization_fixtures.py", "cli": cli, "stored": stored}
    Path(out_path).write_text(json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
