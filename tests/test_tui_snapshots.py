"""SVG snapshots of the TUI engineer's screens (80x24, a few at 120x40).

Regenerate after an intended visual change: `pytest tests/test_tui_snapshots.py --snapshot-update`,
then look at the report / SVGs. Host-dependent values are pinned: core count, times, size on disk.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import steady

from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp
from sparsify_tui.services.projects import create_project

ROOT = Path(__file__).resolve().parents[1]
DEMO = "sparsify_tui/demo/ppocr_cls.onnx"
DIMS = {"x:2": 48, "x:3": 192}


@pytest.fixture
def pinned(workspace_home, monkeypatch):
    """Deterministic screens: cwd = repo root, 4 cores, fixed timestamps, fixed size on disk."""
    from sparsify_tui import settings as job_settings
    from sparsify_tui.tui.settings import section as settings
    from sparsify_tui.tui.widgets import tables

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(job_settings, "available_cores", lambda: 4)
    monkeypatch.setattr(tables, "format_timestamp", lambda value: "2026-01-02 03:04" if value else "")
    monkeypatch.setattr(settings, "format_timestamp", lambda value: "2026-01-02 03:04" if value else "")
    monkeypatch.setattr(Workspace, "project_size_bytes", lambda self, pid: 705_123)
    return Workspace()


@pytest.fixture
def demo(pinned) -> dict:
    return create_project(pinned, DEMO, "demo", "OCR direction classifier", dims=DIMS,
                                 setup={"core_count": 4})


def no_blink(app) -> None:
    """Input cursors blink on a timer: freeze them so a snapshot does not depend on timing."""
    from textual.widgets import Input

    for widget in app.screen.query(Input):
        widget.cursor_blink = False


async def settle(pilot, predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        try:
            if predicate():
                break
        except Exception:
            pass
    await steady(pilot)


def tabs_drawn(app, where: str) -> bool:
    """The tab underline is placed after a refresh: wait for it (else it is drawn at width 0)."""
    from textual.widgets._tabs import Underline

    return all(u.highlight_end - u.highlight_start > 2 for u in app.query(f"{where} Underline").results(Underline)
               if u.region.width)


def focused_in(app, section: str) -> bool:
    widget = app.query_one(f"#sections > #{section}")
    return app.section == section and app.focused is not None and widget in app.focused.ancestors_with_self


def test_snapshot_projects_empty(snap_compare, pinned):
    app = SparsifyApp()
    assert snap_compare(app, run_before=lambda pilot: settle(pilot, lambda: app.focused is not None))


def test_snapshot_projects_list(snap_compare, demo, pinned, tmp_path):
    create_project(pinned, DEMO, "second", dims={"x:2": 32, "x:3": 100}, setup={"core_count": 4})
    app = SparsifyApp()

    async def ready(pilot):
        await settle(pilot, lambda: len(app.query_one("#projects-table").rows_shown()) == 2)

    assert snap_compare(app, run_before=ready)


def _new_project_run_before(app, with_model: bool):
    async def run_before(pilot):
        await settle(pilot, lambda: app.focused is not None)
        await pilot.press("n")
        await settle(pilot, lambda: app.screen.query("#model_path"))
        if with_model:
            dialog = app.screen
            dialog.query_one("#model_path").value = DEMO
            await settle(pilot, lambda: len(dialog.dims) == 2)
            dialog.query_one("#dim-0").value = "48"
            dialog.query_one("#dim-1").value = "192"
            dialog.query_one("#name").value = "ocr"
            dialog.query_one("#model_path").focus()
        no_blink(app)
        await pilot.pause(0.2)
    return run_before


def test_snapshot_new_project_empty(snap_compare, pinned):
    app = SparsifyApp()
    assert snap_compare(app, run_before=_new_project_run_before(app, False))


def test_snapshot_new_project_filled(snap_compare, pinned):
    app = SparsifyApp()
    assert snap_compare(app, run_before=_new_project_run_before(app, True))


def test_snapshot_new_project_filled_wide(snap_compare, pinned):
    app = SparsifyApp()
    assert snap_compare(app, run_before=_new_project_run_before(app, True), terminal_size=(120, 40))


def _perf_run_before(app, keys=()):
    async def run_before(pilot):
        await settle(pilot, lambda: focused_in(app, "perf") and app.query_one("#perf #op-chart").labels
                     and tabs_drawn(app, "#perf"))
        for key in keys:
            await pilot.press(key)
        no_blink(app)
        await pilot.pause(0.3)
    return run_before


def test_snapshot_flops_summary(snap_compare, demo):
    app = SparsifyApp(project=demo["id"])
    assert snap_compare(app, run_before=_perf_run_before(app))


def test_snapshot_flops_summary_wide(snap_compare, demo):
    app = SparsifyApp(project=demo["id"])
    assert snap_compare(app, run_before=_perf_run_before(app), terminal_size=(120, 40))


def test_snapshot_flops_summary_percent(snap_compare, demo):
    app = SparsifyApp(project=demo["id"])

    async def run_before(pilot):
        await _perf_run_before(app)(pilot)
        app.query_one("#perf #op-chart").focus()
        await pilot.press("v")
        await pilot.pause(0.3)

    assert snap_compare(app, run_before=run_before)


def test_snapshot_layer_results(snap_compare, demo):
    app = SparsifyApp(project=demo["id"])
    assert snap_compare(app, run_before=_perf_run_before(app, ["l"]))


def test_snapshot_layer_results_filtered_sorted(snap_compare, demo):
    app = SparsifyApp(project=demo["id"])
    keys = ["l", "slash", *"conv", "enter", *("s" * 3)]  # sorted by FLOPs, largest first
    assert snap_compare(app, run_before=_perf_run_before(app, keys), terminal_size=(120, 40))


def test_snapshot_top_layers(snap_compare, demo):
    app = SparsifyApp(project=demo["id"])
    assert snap_compare(app, run_before=_perf_run_before(app, ["g"]))


def test_snapshot_top_layers_table(snap_compare, demo):
    app = SparsifyApp(project=demo["id"])
    assert snap_compare(app, run_before=_perf_run_before(app, ["g", "t"]))


def test_snapshot_settings(snap_compare, demo):
    app = SparsifyApp(project=demo["id"])

    async def run_before(pilot):
        await settle(pilot, lambda: focused_in(app, "perf"))
        await pilot.press("6")
        await settle(pilot, lambda: focused_in(app, "settings") and app.query_one("#settings #name").value)

    assert snap_compare(app, run_before=run_before)


def test_snapshot_help(snap_compare, demo):
    app = SparsifyApp(project=demo["id"])

    async def run_before(pilot):
        await settle(pilot, lambda: focused_in(app, "perf"))
        await pilot.press("question_mark")
        await settle(pilot, lambda: app.screen.query("#help-table"))
        # only the app-wide keys: other sections' bindings change as their owners add keys
        await pilot.press("slash", *"Everywhere", "enter")
        await pilot.pause(0.3)

    assert snap_compare(app, run_before=run_before)


def test_snapshot_error_dialog(snap_compare, pinned, tmp_path):
    app = SparsifyApp()

    async def run_before(pilot):
        await _new_project_run_before(app, False)(pilot)
        app.screen.query_one("#model_path").value = "does/not/exist.onnx"
        no_blink(app)
        await pilot.press("ctrl+r")
        await settle(pilot, lambda: type(app.screen).__name__ == "ErrorDialog")

    assert snap_compare(app, run_before=run_before)


def test_snapshot_confirm_delete(snap_compare, demo):
    app = SparsifyApp()

    async def run_before(pilot):
        await settle(pilot, lambda: app.query_one("#projects-table").rows_shown() and app.focused is not None)
        await pilot.press("d")
        await settle(pilot, lambda: type(app.screen).__name__ == "ConfirmDialog")

    assert snap_compare(app, run_before=run_before)
