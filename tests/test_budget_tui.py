"""The Budget tab of a channel optimization (issue 23, deliverable 5): the budget search card (budget, metric, the
calibration and held-out items, every trial, the chosen one), `B` opens the search dialog that submits a
``budget_search`` job (bad input: one line in the dialog, which stays open); snapshots at 80x24 and 120x40.

The search record is seeded (fixed numbers, as a search on a 2-core EPYC stored them): what the clock and the
quantizer return differs between CPUs, and the card only presents the record. The optimization itself is made by the
services on the demo model with the FLOPS profile and round_to pinned to 8 (the same on AVX2 and AVX-512)."""

from __future__ import annotations

import asyncio

import numpy as np

from conftest import steady, wait_for, wait_project_open

from sparsify_tui.services.projects import create_project

DEMO_DIMS = {"x:2": 48, "x:3": 192}


def make_app(ws, pid):
    from sparsify_tui.tui.app import SparsifyApp

    return SparsifyApp(project=pid, workspace=ws)


async def open_budget_tab(pilot):
    await wait_project_open(pilot)
    await pilot.press("4")
    await wait_for(pilot, lambda: pilot.app.query("OptimizationSection"))
    sec = pilot.app.query_one("OptimizationSection")
    await wait_for(pilot, lambda: not any(w.group == "opt-load" for w in sec.workers) and sec.rec is not None)
    sec.query_one("#opt-tabs").active = "tab-budget"
    await settle(pilot)
    return sec


async def settle(pilot):
    await wait_for(pilot, lambda: not any(w.is_running for w in pilot.app.workers))
    await pilot.wait_for_scheduled_animations()
    await steady(pilot)


def seeded(ws, demo_model, tmp_path, data_path=None):
    """A project with one channel optimization whose target a (seeded) budget search chose: four thinned trials and
    one INT8 trial, the third thinned one chosen. Its data file is a real one in ``tmp_path`` or, for a snapshot,
    ``data_path`` (a fixed name: the card shows it)."""
    from sparsify_tui.optimization.record import BudgetSearch, BudgetTrial
    from sparsify_tui.services.optimizations import create_optimization, get_optimization, store_fields

    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    create_optimization(ws, pid, "budget snap", settings={"structure": "channel", "round_to": 8, "target": "speedup",
                                                          "target_speedup": 1.84})
    data = tmp_path / "cls.npz"
    np.savez(data, x=np.zeros((4, 3, 48, 192), np.float32))
    data = data_path or data
    trials = [
        BudgetTrial(index=0, target=1.5, kept_channels=1136, channels=1424, metric_value=0.0, within_budget=True,
                    median_ms=1.21, p90_ms=1.3, round_ms=[1.2, 1.22, 1.21], speedup=1.32, accuracy=0.977,
                    note="ladder"),
        BudgetTrial(index=1, target=2.25, kept_channels=880, channels=1424, metric_value=0.0547, within_budget=False,
                    median_ms=0.82, p90_ms=0.9, round_ms=[0.8, 0.83, 0.82], speedup=1.95, accuracy=0.922,
                    note="ladder"),
        BudgetTrial(index=2, target=1.84, kept_channels=992, channels=1424, metric_value=0.0156, within_budget=True,
                    median_ms=0.97, p90_ms=1.02, round_ms=[0.96, 0.98, 0.97], speedup=1.65, accuracy=0.961,
                    note="bisection"),
        BudgetTrial(index=3, target=2.03, kept_channels=944, channels=1424, metric_value=0.0313, within_budget=False,
                    median_ms=0.9, p90_ms=0.95, round_ms=[0.9, 0.91, 0.9], speedup=1.78, accuracy=0.945,
                    note="bisection"),
        BudgetTrial(index=4, target=1.84, quantized=True, source=2, fp32_groups=6, excluded_count=14,
                    kept_channels=992, channels=1424, metric_value=0.0234, within_budget=False, median_ms=1.4,
                    p90_ms=1.5, round_ms=[1.4, 1.41, 1.4], speedup=1.14, accuracy=0.953,
                    note="INT8 search on trial 2 (1.84× target): within budget"),
    ]
    search = BudgetSearch(max_drop=0.02, metric="top1", metric_reason="labels given: top-1 accuracy of output "
                          "'softmax_0.tmp_0' [1, 2]", budget_units="absolute drop of top-1 accuracy (with labels) or "
                          "of top-1 agreement with FP32 (0.01 = 1 point)", labelled=True, data=str(data),
                          data_sha256="0" * 64, labels_key="labels", calibration_items=64, held_out_items=128,
                          items="0-63", held_out="64-191", quantize=True, trials=trials, chosen=2,
                          status="within budget", fp32_ms=1.6, fp32_round_ms=[1.59, 1.61, 1.6], accuracy_fp32=0.977,
                          reachable_speedup=3.4, timing={"rounds": 3, "warmup": 2, "iterations": 24, "cores": 2},
                          seconds=41.5)
    opt = get_optimization(ws, pid, "budget snap")
    opt.search = search
    store_fields(ws, pid, opt, "search")
    return pid, data


def test_budget_card_shows_the_search_and_b_starts_one(workspace_home, demo_model, tmp_path, monkeypatch):
    from sparsify_tui import jobs
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.widgets.tables import FilterableTable

    ws = Workspace()
    pid, data = seeded(ws, demo_model, tmp_path)
    submitted = []
    real_submit = jobs.submit

    def fake_submit(ws_, p, t, a):  # record the arguments; run a short real job the section follows instead
        submitted.append((t, a))
        return real_submit(ws_, p, "sleep", {"steps": 200, "step_s": 0.05}, measuring=False)

    monkeypatch.setattr("sparsify_tui.jobs.submit", fake_submit)

    async def run():
        app = make_app(ws, pid)
        async with app.run_test(size=(80, 24)) as pilot:
            sec = await open_budget_tab(pilot)
            card = sec.query_one("#budget-card")
            summary = str(card.query_one("#bs-summary").render())
            assert "max drop 0.02" in summary and "calibration items 0-63" in summary
            assert "held-out items 64-191 (128 scored)" in summary and "within budget" in summary
            assert "Chosen: trial 2, 1.84× target: measured 1.65× vs FP32" in summary
            rows = card.query_one("#bs-trials", FilterableTable).rows_shown()
            assert len(rows) == 5 and [r["note"].startswith("▶") for r in rows] == [False, False, True, False, False]
            assert rows[4]["int8"] == "yes (6 FP32)" and rows[0]["kept"] == "1136/1424"
            # B: the dialog starts a budget_search job with the data file of this optimization's search
            sec.query_one("#opt-list").focus()
            await pilot.press("B")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "BudgetSearchDialog")
            assert app.screen.query_one("#bsd-data").value == str(data)
            app.screen.query_one("#bsd-drop").value = "0.02"
            app.screen.query_one("#bsd-cal").value = "2"
            app.screen.query_one("#bsd-ok").press()
            await wait_for(pilot, lambda: submitted)
            job_type, args = submitted[0]
            assert job_type == "budget_search" and args["max_drop"] == 0.02 and args["name"] == "budget-1"
            assert args["data"] == str(data) and args["calibration_size"] == 2 and args["quantize"] is False
            # by default the search tries every runtime this machine has (issue 28: it chooses the runtime too)
            from sparsify_tui.tui.widgets.runtimes import single_runtimes

            assert [list(r) for r in args["runtimes"]] == [v.split(":") for _l, v in single_runtimes()], args
            await wait_for(pilot, lambda: sec.query_one("#opt-jobs").query("JobProgress"))
            assert sec.check_action("cancel_job", ()) is True
            # bad input: one line in the dialog, which stays open; no job
            await pilot.press("B")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "BudgetSearchDialog")
            app.screen.query_one("#bsd-data").value = ""
            app.screen.query_one("#bsd-ok").press()
            await wait_for(pilot, lambda: "needs a .npz of real items" in str(app.screen.query_one("#error").render()))
            app.screen.query_one("#bsd-data").value = str(data)
            app.screen.query_one("#bsd-drop").value = "-1"
            app.screen.query_one("#bsd-ok").press()
            await wait_for(pilot, lambda: "Max drop -1 is not allowed" in str(app.screen.query_one("#error").render()))
            assert type(app.screen).__name__ == "BudgetSearchDialog"
            await pilot.press("escape")
            await pilot.pause(0.3)
            assert len(submitted) == 1

    asyncio.run(run())


def test_the_budget_tab_is_shown_for_channel_optimizations_only(workspace_home, demo_model, tmp_path):
    from sparsify_tui.services.optimizations import create_optimization
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _data = seeded(ws, demo_model, tmp_path)
    create_optimization(ws, pid, "unstructured", sparsity=0.5)

    async def run():
        app = make_app(ws, pid)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_project_open(pilot)
            await pilot.press("4")
            await wait_for(pilot, lambda: pilot.app.query("OptimizationSection"))
            sec = pilot.app.query_one("OptimizationSection")
            await wait_for(pilot, lambda: sec.rec is not None and sec.rec.name == "unstructured")
            assert "tab-budget" not in sec._tabs()
            sec.query_one("#opt-list").highlighted = 0
            await wait_for(pilot, lambda: sec.rec.name == "budget snap")
            assert "tab-budget" in sec._tabs()

    asyncio.run(run())


SNAP_DATA = "/srv/data/ppocr_cls_eval.npz"


def test_snapshot_budget_card(workspace_home, demo_model, tmp_path, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _data = seeded(ws, demo_model, tmp_path, SNAP_DATA)

    async def setup(pilot):
        await open_budget_tab(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(80, 24), run_before=setup)


def test_snapshot_budget_card_wide(workspace_home, demo_model, tmp_path, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _data = seeded(ws, demo_model, tmp_path, SNAP_DATA)

    async def setup(pilot):
        await open_budget_tab(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(120, 40), run_before=setup)
