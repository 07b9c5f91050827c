"""A populated demo project from stored records only (nothing is measured, so every screen looks the same on any
CPU): a measured perf profile with INT8 and a noise warning, a one-shot loss profile, an unstructured optimization
with INT8 and a benchmark of the baseline against it with accuracy on labelled data (top-1, agreement, NMSE), and a
channel optimization (est. speedup 1.5×, round_to pinned to 8: the CPU's own block size is not used) whose channel
calibration warned that the machine was busy.

Used by the tests that walk every section and dialog (focus, cut text). :func:`seed_demo` builds the records once per
test process and copies them into each test's empty workspace."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path

from sparsify_tui.services.projects import create_project

DEMO_DIMS = {"x:2": 48, "x:3": 192}

#: the accuracy block a benchmark with labelled data stores (:func:`sparsify_tui.benchmark.runner.measure_accuracy`)
ACCURACY = {
    "metric": "top1", "label": "top-1 accuracy (labels in the data)", "reason": "labels given", "labelled": True,
    "items": 64, "data": "lines.npz",
    "models": {
        "baseline": {"metric": "top1", "drop": 0.0, "nmse": 0.0, "max_abs": 0.0, "kl": 0.0, "top1_agreement": 1.0,
                     "accuracy": 0.953125, "accuracy_reference": 0.953125, "items": 64},
        "pruned 0.7 + INT8": {"metric": "top1", "drop": 0.015625, "nmse": 0.0183, "max_abs": 0.21, "kl": 0.004,
                              "top1_agreement": 0.96875, "accuracy": 0.9375, "accuracy_reference": 0.953125,
                              "items": 64},
    },
}


def seed_perf(ws, pid: str, name: str = "baseline", created: str = "") -> str:
    """The perf profile of tests/test_perf_tui.py (INT8 measured) with a noise warning, named ``name`` (record id
    "perf1" for the first, else ``name``); returns its record id."""
    from test_perf_tui import seeded_profile

    from sparsify_tui.services.profiles import perf_record

    prof = seeded_profile(ws.analysis_of(pid))
    prof.name = name
    prof.created = created or prof.created
    prof.warnings = ["noisy timing: p90 1.400 ms is 1.1× the median 1.250 ms (was the machine busy?); rerun the "
                     "profile"]
    rid = "perf1" if name == "baseline" else name
    rec = ws.add_record(pid, "perf_profiles", {"id": rid, **perf_record(prof)})
    ws.write_blob(pid, f"perf_profiles/{rec['id']}.json", prof.to_dict())
    return rec["id"]


def seed_loss(ws, pid: str) -> str:
    """The one-shot loss profile of tests/test_loss_tui.py; returns its record id."""
    from test_loss_tui import seeded_profile

    from sparsify_tui.services.profiles import store_loss_profile

    return store_loss_profile(ws, pid, seeded_profile())["record_id"]


def seed_benchmark(ws, pid: str, optimization) -> str:
    """A benchmark of the baseline against ``optimization`` (the runs of tests/test_benchmark_tui.py, the baseline
    noisy at batch 4, 2 cores) with the accuracy of :data:`ACCURACY`; returns its record id."""
    from test_benchmark_tui import seeded_result

    from sparsify_tui.benchmark.runner import ModelSpec
    from sparsify_tui.services.benchmarks import benchmark_record

    res = seeded_result("benchmark 1", "2026-01-02T10:00:00+00:00", noisy=True)  # b4 c2: a busy machine
    label = optimization.name
    res.models = [ModelSpec("baseline", "base.onnx"), ModelSpec(label, "opt.onnx", optimization.id, label)]
    for run in res.runs:
        if run.model != "baseline":
            run.model, run.optimization, run.optimization_id = label, label, optimization.id
    res.accuracy = ACCURACY
    args = {"name": res.name, "optimizations": [optimization.id], "batch_sizes": [1, 4], "core_counts": [1, 2],
            "warmup": 2, "iterations": 6, "data": "lines.npz"}
    rec = ws.add_record(pid, "benchmarks", {"id": "bench1", "created": res.created, **benchmark_record(res, args)})
    res.id = rec["id"]
    ws.write_blob(pid, f"benchmarks/{rec['id']}.json", res.to_dict())
    return rec["id"]


#: the warning a channel calibration measured on a busy machine stores (sparsify_tui.profiling.channel_calibration)
CALIBRATION_WARNING = ("the machine was busy while calibrating (load 7.0 on 2 CPUs): the thinned models measured "
                       "3.13x faster for 1.60x fewer MACs; calibrate again on a quiet machine")


def add_calibration_warning(ws, pid: str, name: str) -> None:
    """Store :data:`CALIBRATION_WARNING` in the channel time model of optimization ``name`` (as a calibration on a
    busy machine leaves it)."""
    rec = ws.find_record(pid, "optimizations", name)
    model = dict(rec["model"])
    tm = dict(model.get("channel_time_model") or {})
    tm["calibration"] = {**(tm.get("calibration") or {}), "warnings": [CALIBRATION_WARNING]}
    model["channel_time_model"] = tm
    ws.update_record(pid, "optimizations", rec["id"], model=model)


#: (demo model, instruction sets the machine is described with) -> (template workspace folder, project id)
_TEMPLATES: dict = {}


def seed_demo(ws, demo_model) -> str:
    """The demo project with every kind of record (module docstring) in ``ws``; returns the project id.

    The records are built once per test process, for each demo model and each set of instruction sets the machine
    is described with (``fake_isa`` of tests/conftest.py), in a template workspace; an empty (or absent) ``ws``
    gets a copy of it, in which only the model path ``project.json`` records is made ``ws``'s own. The copies share
    the template's project id and creation times (a build in place gets new ones). A workspace that already holds
    something gets the records built in place."""
    from sparsify_tui.analysis import system
    from sparsify_tui.store import Workspace

    root = Path(ws.root)
    if root.exists() and any(root.iterdir()):
        return build_demo(ws, demo_model)
    key = (str(demo_model), tuple(system.machine_info().instruction_sets))
    if key not in _TEMPLATES:
        folder = Path(tempfile.mkdtemp(prefix="sparsify-tui-seeded-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        template = Workspace(folder / "workspace")
        _TEMPLATES[key] = (template.root, build_demo(template, demo_model))
    template_root, pid = _TEMPLATES[key]
    shutil.copytree(template_root, root, symlinks=True, dirs_exist_ok=True)
    project_json = root / "projects" / pid / "project.json"
    # the model path as JSON writes it (a string's inside), the template's folder replaced by this workspace's
    old, new = (json.dumps(str(r))[1:-1] for r in (template_root, root))
    project_json.write_text(project_json.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    return pid


def build_demo(ws, demo_model) -> str:
    """Build the records of :func:`seed_demo` in ``ws`` (nothing copied); returns the project id."""
    from sparsify_tui.services.optimizations import create_optimization

    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    seed_perf(ws, pid)
    seed_loss(ws, pid)
    opt = create_optimization(ws, pid, "pruned 0.7 + INT8", perf="perf1", sparsity=0.7, quantize=True)
    seed_benchmark(ws, pid, opt)
    create_optimization(ws, pid, "channel 1.5x", perf="perf1", settings={
        "structure": "channel", "round_to": 8, "target": "speedup", "target_speedup": 1.5})
    add_calibration_warning(ws, pid, "channel 1.5x")
    return pid
