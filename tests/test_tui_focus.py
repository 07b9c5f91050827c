"""Focus is never lost (issue 24 deliverable 2): after a dialog closes, focus is back where it was; after a record
is created, focus is on the widget that shows it. Seeded records (tests/seeded_workspace.py): nothing is measured."""

from __future__ import annotations

import pytest
from test_tui_keys import wait_for

from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp

SIZE = (80, 24)


def shown(widget) -> bool:
    """The widget is on screen: displayed, with every ancestor displayed, and with a region."""
    return widget is not None and widget.display and all(a.display for a in widget.ancestors if hasattr(a, "display")) \
        and widget.region.area > 0


@pytest.fixture
def demo(workspace_home, demo_model):
    from seeded_workspace import seed_demo

    ws = Workspace()
    return ws, seed_demo(ws, demo_model)


async def test_a_channel_optimization_made_from_the_layers_tab_has_the_focus(demo):
    """Issue 24 bug 2: `4`, `l`, `n`, channel est. speedup, enter: the Groups tab opened with nothing focused (the
    focused Layers table was hidden), and m/l/n did nothing until tab."""
    from textual.widgets import Select

    from sparsify_tui.tui.optimization.dialogs import CreateOptimizationDialog

    ws, pid = demo
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.focused is not None)  # the project is open
        await pilot.press("4")
        await wait_for(pilot, lambda: app.section == "optimization" and app.query_one("#optimization").rec)
        await pilot.press("l")
        await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "table")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, CreateOptimizationDialog))
        app.screen.query_one("#create-structure", Select).value = "channel:speedup"
        await pilot.pause(0.1)
        app.screen._submit()
        section = app.query_one("#optimization")
        await wait_for(pilot, lambda: section.rec is not None and section.rec.settings.structure == "channel")
        await wait_for(pilot, lambda: shown(app.focused), timeout=5)
        assert section.query_one("#group-table") in app.focused.ancestors_with_self
        await pilot.press("m")  # the section's keys work at once
        await wait_for(pilot, lambda: section.query_one("#opt-tabs").active == "tab-pruning")


@pytest.mark.parametrize("section_key, section, dialog_key", [
    ("2", "perf", "n"), ("3", "loss", "n"), ("4", "optimization", "n"), ("4", "optimization", "e"),
    ("5", "benchmarks", "n"), ("5", "benchmarks", "a"), ("2", "perf", "question_mark"), ("3", "loss", "w"),
    ("5", "benchmarks", "j")])
async def test_closing_a_dialog_gives_the_focus_back(demo, section_key, section, dialog_key):
    """After escape closes a dialog, the widget focused before it has the focus again and is on screen (after the
    Export dialog, focus sat on an unmarked scroll area of another tab: `e` then exported the wrong record)."""
    ws, pid = demo
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.focused is not None)  # the project is open
        await pilot.press(section_key)
        await wait_for(pilot, lambda: app.section == section and app.focused is not None)
        await pilot.pause(0.5)
        before = app.focused
        await pilot.press(dialog_key)
        await wait_for(pilot, lambda: len(app.screen_stack) > 1)
        await pilot.pause(0.3)
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1)
        await pilot.pause(0.3)
        assert app.focused is before and shown(before), (section, dialog_key, app.focused)


async def test_a_window_or_page_without_focus_keeps_the_footer_keys(demo):
    """Issue 24 friction: in `serve`, the footer lacked n/d/Filter until the page was clicked (the browser page
    starts unfocused and Textual took the focus away on that blur)."""
    from textual import events

    ws, pid = demo
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.focused is not None)
        await pilot.pause(0.5)
        focused = app.focused
        app.post_message(events.AppBlur())
        await pilot.pause(0.5)
        assert app.focused is focused
        keys = app.screen.query_one("KeysFooter").text
        assert "n New" in keys and "d Del" in keys, keys
