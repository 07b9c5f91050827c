"""Benchmarks section through Pilot: cards newest first, views of a seeded stored result, create dialog
submitting a real benchmark job, rerun, delete, apply/export dialog; snapshots at 80x24."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import onnx
import pytest
from conftest import steady, wait_for

from sparsify_tui.benchmark.runner import BenchmarkResult, BenchmarkRun, ModelSpec
from sparsify_tui.services.projects import create_project

DEMO_DIMS = {"x:2": 48, "x:3": 192}


def seeded_result(name: str, created: str, scale: float = 1.0, noisy: bool = False) -> BenchmarkResult:
    """A deterministic stored result: baseline and "opt one" at batch 1,4 × cores 1,2, 6 runs each (in 3
    rounds of 2). ``noisy``: the baseline's second round at b4 c2 ran 3× slower (a busy machine)."""
    res = BenchmarkResult(models=[ModelSpec("baseline", "base.onnx"), ModelSpec("opt one", "opt.onnx", "opt1")],
                          batch_sizes=[1, 4], core_counts=[1, 2], warmup=2, iterations=6, name=name,
                          created=created, ort_version="1.31.1")
    for b in (1, 4):
        for c in (1, 2):
            for model, base in (("baseline", 2.0), ("opt one", 0.8)):
                med = base * scale * (0.3 + 0.7 * b) / (1 + 0.8 * (c - 1))
                times = [med * f for f in (1.3, 1.02, 0.99, 1.0, 1.01, 0.98)]
                if noisy and model == "baseline" and (b, c) == (4, 2):
                    times = [med * f for f in (1.0, 1.0, 3.0, 3.1, 1.0, 1.0)]
                res.runs.append(BenchmarkRun.from_times(model, None if model == "baseline" else "opt1", b, c, times))
    res.compute_speedups()
    return res


def seed(ws, demo_model):
    from sparsify_tui.services.benchmarks import benchmark_record

    project = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)
    pid = project["id"]
    m = onnx.load(str(demo_model))
    convs = [n for n in m.graph.node if n.op_type == "Conv"]
    opt = ws.add_record(pid, "optimizations", {
        "id": "opt1", "name": "opt one", "perf_profile": "flops", "loss_profile": "approximated",
        "layers": [{"weight_name": convs[1].input[1], "node_id": convs[1].name, "sparsity": 0.5, "override": False}],
        "quantization": {"enabled": False, "excluded": []}})
    for i, (name, created, scale) in enumerate((("older run", "2026-01-01T10:00:00+00:00", 1.5),
                                                 ("newest run", "2026-01-02T10:00:00+00:00", 1.0))):
        res = seeded_result(name, created, scale)
        rec = ws.add_record(pid, "benchmarks", {
            "id": f"bench{i}", "created": created,
            **benchmark_record(res, {"name": name, "optimizations": ["opt1"], "batch_sizes": [1],
                                     "core_counts": [1], "warmup": 0, "iterations": 2})})
        res.id = rec["id"]
        ws.write_blob(pid, f"benchmarks/{rec['id']}.json", res.to_dict())
    return pid, opt


def make_app(ws, pid):
    from sparsify_tui.tui.app import SparsifyApp

    return SparsifyApp(project=pid, workspace=ws)


async def open_section(pilot):
    await pilot.pause()
    await pilot.press("5")
    end = time.monotonic() + 30
    while time.monotonic() < end:
        await pilot.pause(0.05)
        sec = pilot.app.query("BenchmarksSection")
        if sec and sec.first().result is not None:
            return sec.first()
    raise AssertionError("benchmarks section did not load")


async def open_tab(pilot, sec, tab: str) -> None:
    """Show tab ``tab`` of the benchmark shown and wait until it is built (a tab is built when first shown)."""
    sec.action_view_tab(tab)
    await wait_for(pilot, lambda: sec.query_one("#bench-tabs").built(tab))


def test_cards_views_and_table(workspace_home, demo_model):
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.widgets.tables import FilterableTable

    ws = Workspace()
    pid, _ = seed(ws, demo_model)

    async def run():
        app = make_app(ws, pid)
        async with app.run_test(size=(80, 24)) as pilot:
            sec = await open_section(pilot)
            # newest first, the newest selected
            ids = [o.id for o in sec.query_one("#bench-list").options]
            assert ids == ["bench1", "bench0"] and sec.selected == "bench1"
            assert sec.result.name == "newest run"
            assert sec.combo == (1, 1)
            await open_tab(pilot, sec, "iter")
            iter_chart = sec.query_one("#iter-chart")
            assert set(iter_chart.series) == {"baseline", "opt one"} and len(iter_chart.series["baseline"][1]) == 6
            await pilot.press("b")  # the next (batch, cores) combination
            assert sec.combo == (1, 2)
            await open_tab(pilot, sec, "batch")
            batch = sec.query_one("#batch-chart").series
            assert batch["baseline"][0] == [1.0, 4.0]
            await open_tab(pilot, sec, "cores")
            cores = sec.query_one("#cores-chart").series
            assert cores["opt one"][0] == [1.0, 2.0]
            await open_tab(pilot, sec, "compare")
            bars = sec.query_one("#compare-chart")
            assert bars.labels == ["baseline", "opt one"]
            assert "opt one 2.50×" in str(sec.query_one("#compare-speedup").render())
            assert bars.values == [sec.result.run(m, 1, 2).median_ms for m in ("baseline", "opt one")]
            await open_tab(pilot, sec, "table")
            rows = sec.query_one("#bench-table", FilterableTable).all_rows
            assert len(rows) == 8
            r = next(x for x in rows if x["model"] == "opt one" and x["batch"] == 4 and x["cores"] == 2)
            base = next(x for x in rows if x["model"] == "baseline" and x["batch"] == 4 and x["cores"] == 2)
            assert r["speedup"] == pytest.approx(base["median"] / r["median"])
            # selecting the older card shows its result
            sec.query_one("#bench-list").focus()
            await pilot.press("down")
            await wait_for(pilot, lambda: sec.result is not None and sec.result.name == "older run")

    asyncio.run(run())


def test_create_dialog_runs_benchmark_job_then_rerun_and_delete(workspace_home, demo_model):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _ = seed(ws, demo_model)

    async def run():
        app = make_app(ws, pid)
        async with app.run_test(size=(80, 24)) as pilot:
            sec = await open_section(pilot)
            await pilot.press("n")
            await pilot.pause()
            dialog = app.screen
            assert type(dialog).__name__ == "BenchmarkDialog"
            dialog.query_one("#name").value = "from tui"
            dialog.query_one("#batch_sizes").value = "1,2"
            dialog.query_one("#core_counts").value = "1"
            dialog.query_one("#warmup").value = "0"
            dialog.query_one("#iterations").value = "2"
            dialog.query_one("#batch_sizes").value = "1,x"
            dialog.action_run()
            await pilot.pause()
            assert "whole numbers" in str(dialog.query_one("#error").render())
            dialog.query_one("#batch_sizes").value = "1,2"
            await pilot.click("#run")
            await wait_for(pilot, lambda: any(r.get("name") == "from tui" for r in sec.records), 90)
            rec = next(r for r in sec.records if r.get("name") == "from tui")
            assert sec.records[0]["id"] == rec["id"]  # newest first
            assert rec["batch_sizes"] == [1, 2] and rec["core_counts"] == [1]
            assert [m["label"] for m in rec["models"]] == ["baseline", "opt one"]
            await wait_for(pilot, lambda: sec.result is not None and sec.result.id == rec["id"])
            # rerun the selected card after a confirmation: its numbers are replaced, no second "from tui"
            from sparsify_tui.tui.widgets.dialogs import ConfirmDialog

            n = len(sec.records)
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            assert app.screen.dialog_title == "Rerun from tui"
            await pilot.press("y")
            await wait_for(pilot, lambda: any(r["id"] == rec["id"] and r.get("modified") != rec.get("modified")
                                              for r in sec.records), 90)
            assert len(sec.records) == n and sum(r.get("name") == "from tui" for r in sec.records) == 1
            assert sec.records[0]["args"]["batch_sizes"] == [1, 2]
            # delete it (confirm)
            target = sec.selected
            await pilot.press("delete")
            await pilot.pause()
            await pilot.press("y")
            await wait_for(pilot, lambda: target not in [r["id"] for r in sec.records])
            assert target not in [r["id"] for r in ws.list_records(pid, "benchmarks")]

    asyncio.run(run())


def test_apply_dialog_exports_optimized_model(workspace_home, demo_model, tmp_path):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, opt = seed(ws, demo_model)
    out = tmp_path / "exported" / "demo_opt.onnx"
    out.parent.mkdir()  # an export path's folder must exist (issue 11): apply never creates folders

    async def run():
        app = make_app(ws, pid)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_section(pilot)
            await pilot.press("a")
            await pilot.pause()
            dialog = app.screen
            assert type(dialog).__name__ == "ApplyDialog"
            path_input = dialog.query_one("#out_path")
            assert path_input.value.endswith("optimized/opt_one.onnx")
            path_input.value = str(out)
            await pilot.click("#apply")
            await wait_for(pilot, lambda: out.is_file() and
                           (ws.get_record(pid, "optimizations", "opt1").get("applied") or {}).get("exported_to"), 90)

    asyncio.run(run())
    applied = ws.get_record(pid, "optimizations", "opt1")["applied"]
    assert applied["exported_to"] == str(out) and applied["layers_exact"]
    assert Path(applied["path"]).is_file()


def test_snapshot_benchmarks_section(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _ = seed(ws, demo_model)

    async def setup(pilot):
        await open_section(pilot)
        await pilot.press("greater_than_sign")  # the Iterations tab (Compare is the first)
        for inp in pilot.app.screen.query("Input"):
            inp.cursor_blink = False  # a blinking cursor makes the snapshot flaky
        await pilot.wait_for_scheduled_animations()
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(80, 24), run_before=setup)


def test_snapshot_compare_tab(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _ = seed(ws, demo_model)

    async def setup(pilot):
        sec = await open_section(pilot)
        sec.query_one("#bench-tabs").active = "compare"
        await pilot.wait_for_scheduled_animations()
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(80, 24), run_before=setup)


def test_snapshot_create_dialog(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _ = seed(ws, demo_model)

    async def setup(pilot):
        await open_section(pilot)
        await pilot.press("n")
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "BenchmarkDialog"
                       and pilot.app.focused is not None and pilot.app.focused.id == "name", 20)
        for inp in pilot.app.screen.query("Input"):
            inp.cursor_blink = False  # a blinking cursor makes the snapshot flaky
        await pilot.wait_for_scheduled_animations()
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(80, 24), run_before=setup)


def test_noisy_runs_are_flagged(workspace_home, demo_model):
    """A combination whose rounds disagree (or whose p90 > 2× median) is flagged in the table and under the
    speedups, with the advice to rerun; the others are not."""
    from sparsify_tui.benchmark.runner import BenchmarkResult
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.widgets.tables import FilterableTable

    ws = Workspace()
    pid, _ = seed(ws, demo_model)
    noisy = seeded_result("noisy run", "2026-01-03T10:00:00+00:00", noisy=True)
    noisy.id = "bench1"
    ws.write_blob(pid, "benchmarks/bench1.json", noisy.to_dict())
    flags = BenchmarkResult.from_dict(noisy.to_dict()).run("baseline", 4, 2).noise(3)
    assert flags == ["p90 3.0× median", "rounds ±205%"]

    async def run():
        app = make_app(ws, pid)
        async with app.run_test(size=(80, 24)) as pilot:
            sec = await open_section(pilot)
            await open_tab(pilot, sec, "table")
            rows = sec.query_one("#bench-table", FilterableTable).all_rows
            flagged = [(r["model"], r["batch"], r["cores"]) for r in rows if r["noise"]]
            assert flagged == [("baseline", 4, 2)]
            assert "rounds ±205%" in next(r["noise"] for r in rows if r["noise"])
            assert "noisy" not in str(sec.query_one("#compare-speedup").render())  # b1 c1 is clean
            while sec.combo != (4, 2):
                await pilot.press("b")
            text = str(sec.query_one("#compare-speedup").render())
            assert "noisy (baseline: p90 3.0× median, rounds ±205%)" in text and "r reruns" in text

    asyncio.run(run())


def test_accuracy_shows_beside_speed(workspace_home, demo_model):
    """Issue 24 bug 5: a benchmark with labelled data stores top-1 accuracy, agreement and NMSE per model; the
    Compare tab shows them in a column per model with the metric named, and the Table beside each speed. The
    block is laid out for the width it has when it renders: a row per model where a column per model does not
    fit, a column per model again once it does (it was laid out once, for the width when the result arrived: on
    a busy machine, before the layout, and stayed that way)."""
    from seeded_workspace import seed_demo

    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.widgets.tables import FilterableTable

    ws = Workspace()
    pid = seed_demo(ws, demo_model)

    async def run():
        async with make_app(ws, pid).run_test(size=(80, 24)) as pilot:
            sec = await open_section(pilot)
            from screen_text import text_of

            accuracy = sec.query_one("#compare-accuracy")
            await wait_for(pilot, lambda: "agreement" in text_of(pilot.app, accuracy.region))
            shown = text_of(pilot.app, accuracy.region)
            assert "metric: top-1 accuracy (labels in the data)" in " ".join(shown.split())
            assert "baseline" in shown and "pruned 0.7 + INT8" in shown
            lines = {line.strip().split("  ")[0]: line.split() for line in shown.splitlines()}
            assert lines["top-1 accuracy"][-2:] == ["95.3%", "93.8%"]
            assert lines["top-1 agreement"][-2:] == ["100.0%", "96.9%"]
            assert lines["output NMSE"][-2:] == ["0", "0.0183"]
            await open_tab(pilot, sec, "table")
            rows = sec.query_one("#bench-table", FilterableTable).all_rows
            opt = next(r for r in rows if r["model"] == "pruned 0.7 + INT8")
            assert (opt["top1"], opt["agree"], opt["nmse"]) == (0.9375, 0.96875, 0.0183)
            await open_tab(pilot, sec, "compare")

            def first_words() -> set:
                return {line.split()[0] for line in text_of(pilot.app, accuracy.region).splitlines() if line.split()}

            await pilot.resize_terminal(60, 30)
            await wait_for(pilot, lambda: {"model", "baseline"} <= first_words())  # a row per model
            await pilot.resize_terminal(80, 24)
            await wait_for(pilot, lambda: "model" not in first_words() and "top-1" in first_words())

    asyncio.run(run())


#: what a benchmark without data measures of a model that agrees with no item of the baseline on random inputs
SYNTHETIC_ACCURACY = {
    "metric": "top1", "label": "top-1 agreement", "labelled": False, "items": 16, "data": "synthetic",
    "reason": "output 'softmax_0.tmp_0' is class scores [1, 2]: top-1 agreement with FP32 (no labels)",
    "models": {"baseline": {"metric": "top1", "drop": 0.0, "nmse": 0.0, "top1_agreement": 1.0, "accuracy": None},
               "opt one": {"metric": "top1", "drop": 1.0, "nmse": 0.52, "top1_agreement": 0.0, "accuracy": None}},
}


def test_a_benchmark_without_data_shows_no_accuracy(workspace_home, demo_model):
    """Issue 29, deliverable 5: without data the Compare tab says "No accuracy: no data", labels the agreement it
    measured on random inputs as that (never top-1), and the Table has no accuracy column filled from it."""
    from screen_text import text_of

    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.widgets.tables import FilterableTable

    ws = Workspace()
    pid, _ = seed(ws, demo_model)
    for rid in ("bench0", "bench1"):
        res = BenchmarkResult.from_dict(ws.read_record_blob(pid, "benchmarks", rid))
        res.accuracy = SYNTHETIC_ACCURACY
        ws.write_blob(pid, f"benchmarks/{rid}.json", res.to_dict())

    async def run():
        async with make_app(ws, pid).run_test(size=(100, 30)) as pilot:
            sec = await open_section(pilot)
            accuracy = sec.query_one("#compare-accuracy")
            await wait_for(pilot, lambda: "synthetic" in text_of(pilot.app, accuracy.region))
            shown = " ".join(text_of(pilot.app, accuracy.region).split())
            assert shown.startswith("No accuracy: no data (benchmark with sample data to measure it).")
            assert "agreement on synthetic inputs 100.0% 0.0%" in shown and "top-1" not in shown
            await open_tab(pilot, sec, "table")
            rows = sec.query_one("#bench-table", FilterableTable).all_rows
            assert all(r["top1"] is None and r["agree"] is None and r["nmse"] is None for r in rows)

    asyncio.run(run())


def test_the_cli_prints_no_accuracy_without_data(capsys):
    from sparsify_tui.commands.benchmark import _fmt_accuracy

    text = _fmt_accuracy(SYNTHETIC_ACCURACY)
    assert text.splitlines()[0].startswith("No accuracy: no data (benchmark with sample data to measure it).")
    assert "agreement on synthetic inputs" in text and "top-1" not in text
