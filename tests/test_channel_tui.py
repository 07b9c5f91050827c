"""Channel optimizations in the TUI (issues 12 and 13): the structure chosen at create time, the Groups table
(channels, kept, ratio, sensitivity, est. ms, est. speedup, measured ms), estimate vs measured on the pruning
card, the apply result, a group override; snapshots of a populated channel optimization and of its benchmark.

Records are made through the services on the demo model with the FLOPS profile and the group-norm magnitude
(deterministic), round_to pinned to 8; the apply result and the measurement are seeded (fixed numbers)."""

from __future__ import annotations

import asyncio

from conftest import steady, wait_for, wait_project_open

from sparsify_tui.services.projects import create_project

DEMO_DIMS = {"x:2": 48, "x:3": 192}
CHANNEL = {"structure": "channel", "round_to": 8}


def make_app(ws, pid):
    from sparsify_tui.tui.app import SparsifyApp

    return SparsifyApp(project=pid, workspace=ws)


async def open_optimization(pilot):
    await wait_project_open(pilot)
    await pilot.press("4")
    await wait_for(pilot, lambda: pilot.app.query("OptimizationSection"))
    sec = pilot.app.query_one("OptimizationSection")
    await wait_for(pilot, lambda: not any(w.group == "opt-load" for w in sec.workers) and sec.rec is not None)
    await pilot.pause(0.1)
    return sec


async def settle(pilot):
    await wait_for(pilot, lambda: not any(w.is_running for w in pilot.app.workers))
    await pilot.wait_for_scheduled_animations()
    await steady(pilot)


def seeded_project(ws, demo_model, *, measured=True):
    """A project with one channel optimization at est. speedup 1.5 (FLOPS profile), applied and benchmarked
    (seeded numbers)."""
    from sparsify_tui.optimization.apply import optimization_fingerprint
    from sparsify_tui.services import optimizations

    from optimization_fixtures import synthetic_profiles

    from sparsify_tui.services.profiles import store_perf_profile

    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    perf, _loss = synthetic_profiles(ws.analysis_of(pid))  # deterministic node times
    store_perf_profile(ws, pid, perf)
    opt = optimizations.create_optimization(ws, pid, "chan 1.5x", perf="synthetic",
                                            settings={**CHANNEL, "target": "speedup", "target_speedup": 1.5})
    rec = opt.to_dict()
    groups = [{"id": l["weight_name"], "channels": l["channels"], "kept": l["kept"],
               "kept_indices": list(range(l["kept"]))} for l in rec["layers"] if l["prunable"]]
    applied = {"path": "/nonexistent/chan.onnx", "fingerprint": optimization_fingerprint(opt), "quantized": False,
               "excluded": [], "structure": "channel", "groups": groups, "macs_before": 16315376,
               "macs_after": 9061232, "macs_reduction": 16315376 / 9061232, "exactness_max_rel_diff": 3.1e-7,
               "layers_exact": True, "output_diff": {"nmse": 0.0912, "max_abs": 0.271, "top1_agreement": 0.75},
               "file_size_bytes": 331000, "baseline_size_bytes": 585532}
    fields = {"applied": applied}
    if measured:
        fields["measured"] = {
            "benchmark": "bench1", "benchmark_name": "b1", "batch_size": 1, "core_count": 2, "speedup": 1.43,
            "median_ms": 1.12, "baseline_ms": 1.6, "estimated_speedup": rec["estimates"]["ort_speedup"],
            "fingerprint": optimization_fingerprint(opt), "stale": False,
            "groups": {g["id"]: {"ms": 0.05 + 0.01 * i, "baseline_ms": 0.08 + 0.01 * i} for i, g in enumerate(groups)}}
    ws.update_record(pid, "optimizations", rec["id"], **fields)
    return pid, rec


def test_groups_tab_estimates_measured_and_override(workspace_home, demo_model):
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.widgets.tables import FilterableTable

    ws = Workspace()
    pid, rec = seeded_project(ws, demo_model)

    async def run():
        async with make_app(ws, pid).run_test(size=(80, 24)) as pilot:
            sec = await open_optimization(pilot)
            tabs = sec.query_one("#opt-tabs")
            assert "tab-groups" in tabs.tab_ids() and "tab-layers" not in tabs.tab_ids()
            header = str(sec.query_one("#opt-header").render())
            assert "channel" in header and "measured 1.43×" in header and "target 1.50× faster (est.)" in header
            perf = str(sec.query_one("#est-performance-text").render())
            assert "Estimated" in perf and "not calibrated" in perf
            summary = str(sec.query_one("#est-summary-text").render())
            assert "Applied" in summary and "exactness" in summary and "NMSE 0.0912" in summary
            assert "measured 1.43×" in summary
            tabs.active = "tab-groups"  # built when first opened
            await wait_for(pilot, lambda: tabs.built("tab-groups"))
            await pilot.pause(0.2)
            rows = sec.query_one("#group-table", FilterableTable).all_rows
            assert len(rows) == len(rec["layers"])
            assert all({"channels", "kept", "kept_of", "sparsity", "sens", "est_ms", "speedup", "measured"} <= set(r)
                       for r in rows)
            assert any(r["measured"] is not None for r in rows)
            # + on a group row raises its ratio by 0.05 as an override, kept by the allocation
            table = sec.query_one("#group-table", FilterableTable)
            table.focus()
            target = next(i for i, r in enumerate(rows) if r["note"] == "" and r["sparsity"] < 0.6)
            table.data_table.move_cursor(row=target)
            gid = rows[target]["layer"]
            before = rows[target]["sparsity"]
            await pilot.press("plus")
            await wait_for(pilot, lambda: gid in sec.rec.overrides)
            assert sec.rec.overrides[gid] > before

    asyncio.run(run())


def test_create_dialog_channel_structure_and_target(workspace_home, demo_model):
    from textual.widgets import Input, Select

    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]

    async def run():
        async with make_app(ws, pid).run_test(size=(80, 24)) as pilot:
            await wait_project_open(pilot)
            await pilot.press("4")
            await wait_for(pilot, lambda: pilot.app.query("OptimizationSection"))
            await pilot.pause(0.3)
            await pilot.press("n")
            await wait_for(pilot, lambda: pilot.app.screen.query("#create-structure"))
            dlg = pilot.app.screen
            dlg.query_one("#create-structure", Select).value = "channel:speedup"
            await pilot.pause(0.1)
            assert dlg.query_one("#create-sparsity", Input).value == "1.5"
            dlg.query_one("#create-sparsity", Input).value = "1.3"
            dlg.query_one("#create-name", Input).value = "fast"
            dlg._submit()
            await wait_for(pilot, lambda: any(r["name"] == "fast" for r in ws.list_records(pid, "optimizations")))
            rec = next(r for r in ws.list_records(pid, "optimizations") if r["name"] == "fast")
            assert rec["settings"]["structure"] == "channel" and rec["settings"]["target"] == "speedup"
            assert rec["settings"]["target_speedup"] == 1.3 and rec["estimates"]["ort_speedup"] >= 1.3 - 1e-6

    asyncio.run(run())


def test_snapshot_channel_optimization_pruning_card(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _ = seeded_project(ws, demo_model)

    async def setup(pilot):
        sec = await open_optimization(pilot)
        sec.query_one("#opt-list").focus()
        await settle(pilot)
        sec.query_one("#est-performance-title").scroll_visible(animate=False, top=True)  # the performance card
        await settle(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(80, 24), run_before=setup)


def test_snapshot_channel_optimization_groups(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _ = seeded_project(ws, demo_model)

    async def setup(pilot):
        sec = await open_optimization(pilot)
        sec.query_one("#opt-tabs").active = "tab-groups"
        await pilot.pause(0.2)
        sec.query_one("#group-table").focus()
        await settle(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(80, 24), run_before=setup)


def test_snapshot_channel_benchmark(workspace_home, demo_model, snap_compare):
    """The Benchmarks section on a seeded benchmark of the channel optimization against the baseline."""
    from sparsify_tui.benchmark.runner import BenchmarkResult, BenchmarkRun, ModelSpec
    from sparsify_tui.services.benchmarks import benchmark_record
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, rec = seeded_project(ws, demo_model)
    res = BenchmarkResult(models=[ModelSpec("baseline", "base.onnx"),
                                  ModelSpec("chan 1.5x", "chan.onnx", rec["id"], "chan 1.5x")],
                          batch_sizes=[1, 8], core_counts=[2], warmup=5, iterations=30, name="b1",
                          created="2026-01-02T10:00:00+00:00", ort_version="1.32.0")
    for b in (1, 8):
        for model, base in (("baseline", 1.6), ("chan 1.5x", 1.12)):
            med = base * (0.4 + 0.6 * b)
            times = [med * f for f in (1.25, 1.02, 0.99, 1.0, 1.01, 0.98)]
            res.runs.append(BenchmarkRun.from_times(model, None if model == "baseline" else rec["id"], b, 2, times))
    res.compute_speedups()
    stored = ws.add_record(pid, "benchmarks", {"id": "bench1", "created": res.created, **benchmark_record(
        res, {"name": "b1", "optimizations": [rec["id"]], "batch_sizes": [1, 8], "core_counts": [2],
              "warmup": 5, "iterations": 30})})
    res.id = stored["id"]
    ws.write_blob(pid, f"benchmarks/{stored['id']}.json", res.to_dict())

    async def setup(pilot):
        await pilot.pause()
        await pilot.press("5")
        await wait_for(pilot, lambda: pilot.app.query("BenchmarksSection")
                       and pilot.app.query_one("BenchmarksSection").result is not None)
        pilot.app.query_one("BenchmarksSection").query_one("#bench-tabs").active = "compare"
        await settle(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(80, 24), run_before=setup)


def test_loss_section_lists_a_channel_profile_per_group(workspace_home, demo_model):
    from sparsify_tui.profiling.loss_channel import channel_profile
    from sparsify_tui.services.profiles import store_loss_profile
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    prof = channel_profile(ws.model_path(pid), method="magnitude", dims=DEMO_DIMS, name="groups")
    rid = store_loss_profile(ws, pid, prof)["record_id"]

    async def run():
        async with make_app(ws, pid).run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await pilot.press("3")
            await wait_for(pilot, lambda: pilot.app.query("LossProfileView"))
            view = pilot.app.query_one("LossProfileView")
            view.set_ref(rid)
            await wait_for(pilot, lambda: view.profile is not None and view.profile.name == "groups")
            assert [l.id for l in view.profile.layers] == [l.id for l in prof.layers]
            await pilot.press("g")  # the Sensitivity tab (built when first opened)
            chart = view.query_one("#sens-chart")
            assert chart.labels == [l.id for l in prof.layers]

    asyncio.run(run())


def test_the_pruning_card_shows_every_warning_optimization_show_prints(workspace_home, demo_model, capsys):
    """Issue 24 bug 6: the channel calibration's "machine was busy" warning was in `optimization show` but not on
    the Pruning card."""
    from seeded_workspace import CALIBRATION_WARNING, seed_demo

    from sparsify_tui.cli import main
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid = seed_demo(ws, demo_model)
    assert main(["optimization", "show", "demo", "channel 1.5x"]) == 0
    shown = [line.split("warning: ", 1)[1] for line in capsys.readouterr().out.splitlines() if "warning: " in line]
    assert f"channel calibration: {CALIBRATION_WARNING}" in shown

    async def run():
        async with make_app(ws, pid).run_test(size=(120, 40)) as pilot:
            sec = await open_optimization(pilot)
            await wait_for(pilot, lambda: sec.rec.name == "channel 1.5x")
            card = " ".join(str(sec.query_one("#est-summary-text").render()).split())
            for warning in shown:
                assert " ".join(warning.split()) in card, warning

    asyncio.run(run())


def test_channel_calibration_from_the_perf_list_and_the_calibrated_profile_is_the_default(workspace_home, demo_model,
                                                                                          tmp_path, monkeypatch):
    """Issue 24 friction: the calibration could only be started from the CLI, and new channel optimizations still
    took the newest, uncalibrated perf profile. `k` on the perf list starts it as a job with its progress under the
    list; a calibrated profile is marked in the list and in the New optimization dialog, which takes it for a
    channel structure (and the service does without a profile named)."""
    from seeded_workspace import seed_demo, seed_perf
    from textual.widgets import Select

    from sparsify_tui.jobs import get_job, list_jobs
    from sparsify_tui.services.optimizations import create_optimization
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.optimization.dialogs import CreateOptimizationDialog
    from sparsify_tui.tui.widgets.dialogs import ConfirmDialog

    monkeypatch.setenv("SPARSIFY_TUI_MEASURE_LOCK", str(tmp_path / "measure.lock"))
    ws = Workspace()
    pid = seed_demo(ws, demo_model)

    async def run():
        async with make_app(ws, pid).run_test(size=(80, 24)) as pilot:
            app = pilot.app
            await wait_for(pilot, lambda: app.section == "perf" and app.query_one("#perf").records)
            await pilot.press("k")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            assert "perf profile 'baseline'" in app.screen.question
            await pilot.press("y")
            await wait_for(pilot, lambda: app.query("#perf-jobs JobProgress"))
            (job,) = [j for j in list_jobs(ws, pid) if j["type"] == "channel_calibration"]
            assert job["args"]["perf"] == "perf1" and job["title"] == "channel calibration of perf profile 'baseline'"
            line = app.query_one("#perf-jobs JobProgress")
            await wait_for(pilot, lambda: "channel calibration of perf profile 'baseline'"
                           in str(line.query_one("#job-title").render()))
            line.cancel()  # the measurement itself is profiling's to test: a few minutes
            await wait_for(pilot, lambda: get_job(ws, job["id"])["status"] in ("canceled", "error"), 60)

    asyncio.run(run())

    # a newer profile without calibration, then the older one calibrated: the channel default is the calibrated one
    ws.update_record(pid, "perf_profiles", "perf1", channel_calibration={"ratios": [0.25, 0.5], "seconds": 12.0})
    seed_perf(ws, pid, "newer", created="2026-03-01T00:00:00Z")
    rec = create_optimization(ws, pid, "chan default", settings={"structure": "channel", "round_to": 8})
    assert rec.perf_profile == "perf1"

    async def dialog():
        async with make_app(ws, pid).run_test(size=(80, 24)) as pilot:
            app = pilot.app
            await wait_for(pilot, lambda: app.section == "perf" and len(app.query_one("#perf").records) == 2)
            labels = [str(o.prompt) for o in app.query_one("#profiles").options]
            assert "baseline (b1, 2c, cal)" in labels and "newer (b1, 2c)" in labels
            await pilot.press("4")
            await wait_for(pilot, lambda: app.section == "optimization" and app.focused is not None)
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, CreateOptimizationDialog))
            perf = app.screen.query_one("#create-perf", Select)
            assert perf.value == "newer"  # unstructured: the newest
            app.screen.query_one("#create-structure", Select).value = "channel:speedup"
            await wait_for(pilot, lambda: perf.value == "perf1")
            assert "baseline (measured, channel-calibrated)" in [label for label, _v in app.screen.perf_options]

    asyncio.run(dialog())
