"""Issue 30 bug 1: every section shows current data when it is shown and when its records change from anywhere: a
job, another section, the CLI (another process) or saved settings. The app watches the open project's change stamp
(``Workspace.project_stamp``) and the section on screen reads its data again when it was read at another stamp."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import wait_for, wait_project_open

from sparsify_tui.services import optimizations
from sparsify_tui.services.projects import create_project
from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp

DEMO_DIMS = {"x:2": 48, "x:3": 192}
SIZE = (120, 40)


def _cli(*args: str) -> str:
    """Run ``sparsify-tui ARGS`` in another process (as a user's second shell does)."""
    out = subprocess.run([sys.executable, "-m", "sparsify_tui", *args], capture_output=True, text=True,
                         env=os.environ.copy(), timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _summary(app) -> str:
    return str(app.query_one("#optimization #est-summary-text").render())


def test_project_stamp_moves_on_every_write_and_only_then(workspace_home, demo_model):
    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    first = ws.project_stamp(pid)
    assert first is not None
    ws.list_records(pid, "optimizations")
    ws.get_project(pid)
    assert ws.project_stamp(pid) == first  # reading changes nothing
    rec = optimizations.create_optimization(ws, pid, "base", sparsity=0.7)
    second = ws.project_stamp(pid)
    assert second != first
    ws.update_record(pid, "optimizations", rec.id, name="renamed")
    third = ws.project_stamp(pid)
    assert third != second
    ws.update_project(pid, epochs=90)
    assert ws.project_stamp(pid) != third
    assert ws.project_stamp("no-such-project") is None


async def test_optimization_on_screen_follows_an_apply_from_another_process(workspace_home, demo_model):
    """`4` shows "Applied: not yet"; the CLI applies it (`sparsify-tui apply`): the card on screen says applied,
    with no key pressed."""
    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    optimizations.create_optimization(ws, pid, "base", sparsity=0.7)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4")
        await wait_for(pilot, lambda: "Applied" in _summary(app))
        assert "not yet" in _summary(app)
        _cli("apply", pid, "base")
        await wait_for(pilot, lambda: "not yet" not in _summary(app), timeout=30)
        assert app.section == "optimization"


async def test_optimization_out_of_view_is_current_when_shown_again(workspace_home, demo_model, monkeypatch):
    """Changes made while another section is shown (an edit from the CLI, a new record from a job) are there when
    `4` shows the section again: its data is read at once, not at the next tick."""
    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    optimizations.create_optimization(ws, pid, "base", sparsity=0.7)
    monkeypatch.setattr(SparsifyApp, "WATCH_SECONDS", 600.0)  # only the look when the section is shown
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4")
        sec = app.query_one("#optimization")
        await wait_for(pilot, lambda: sec.rec is not None and sec.rec.name == "base")
        await pilot.press("5")
        await wait_for(pilot, lambda: app.section == "benchmarks")
        # what a finished job stores, from another thread: a new record and an edit of the old one
        optimizations.create_optimization(ws, pid, "from-a-job", sparsity=0.5)
        optimizations.reevaluate(ws, pid, "base", sparsity=0.6)
        await pilot.press("4")
        await wait_for(pilot, lambda: [r.name for r in sec.records] == ["base", "from-a-job"], timeout=10)
        base = next(r for r in sec.records if r.name == "base")
        assert abs(base.settings.sparsity - 0.6) < 1e-9


async def test_saved_settings_reach_the_optimization_training_tab(workspace_home, demo_model):
    """Settings (`6`): epochs 90, ctrl+s; then `4`: the Training tab says the project's settings changed and `u`
    is offered (it showed 100 and no `u` until the section was opened again)."""
    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    optimizations.create_optimization(ws, pid, "base", sparsity=0.7)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4")
        sec = app.query_one("#optimization")
        await wait_for(pilot, lambda: sec.project_training is not None and sec.rec is not None)
        assert not sec.check_action("sync_training", ())
        await pilot.press("6")
        settings = app.query_one("#settings")
        await wait_for(pilot, lambda: settings.query_one("#epochs").value == "100")
        settings.query_one("#epochs").value = "90"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: ws.get_project(pid)["training"]["epochs"] == 90)
        await pilot.press("4")
        await wait_for(pilot, lambda: sec.check_action("sync_training", ()) is True, timeout=10)
        sec.action_view_tab("tab-training")
        await pilot.pause(0.2)
        text = str(sec.query_one("#training-text").render())
        assert "changed since" in text and "epochs 90" in text


async def test_settings_on_screen_follow_the_cli_but_keep_an_edit(workspace_home, demo_model):
    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("6")
        settings = app.query_one("#settings")
        await wait_for(pilot, lambda: settings.query_one("#epochs").value == "100")
        ws.update_project(pid, epochs=80)  # `sparsify-tui project update` from another shell
        await wait_for(pilot, lambda: settings.query_one("#epochs").value == "80", timeout=10)
        settings.query_one("#description").value = "typed, not saved"
        ws.update_project(pid, epochs=70)
        await pilot.pause(2.5)
        assert settings.query_one("#description").value == "typed, not saved"  # the user's edit is kept
        assert settings.query_one("#epochs").value == "80"


async def test_a_section_reads_nothing_while_nothing_changes(workspace_home, demo_model, monkeypatch):
    """The watch is one stat a second: with nothing written, the section on screen lists nothing again."""
    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    optimizations.create_optimization(ws, pid, "base", sparsity=0.7)
    monkeypatch.setattr(SparsifyApp, "WATCH_SECONDS", 0.1)
    app = SparsifyApp(project=pid, workspace=ws)
    reads = []
    real = ws.list_records
    monkeypatch.setattr(ws, "list_records", lambda *a, **k: reads.append(a[1]) or real(*a, **k))
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4")
        sec = app.query_one("#optimization")
        await wait_for(pilot, lambda: sec.rec is not None)
        await pilot.pause(0.5)
        before = len(reads)
        await pilot.pause(1.5)
        assert len(reads) == before
