"""Keys and focus through Pilot (issue 15 items 13-15): one action has one key in every section, every footer
fits 80 columns with `?` and `q` in it, and every tab stop shows that it has the focus (no invisible stop)."""

from __future__ import annotations

import time

import pytest
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import (Button, Checkbox, DataTable, Input, OptionList, Select, SelectionList, Switch,
                             TextArea)

from sparsify_tui.services import optimizations
from sparsify_tui.services.projects import create_project
from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp
from sparsify_tui.tui.benchmarks import BenchmarksSection
from sparsify_tui.tui.loss import LossSection
from sparsify_tui.tui.optimization import OptimizationSection
from sparsify_tui.tui.perf import PerfSection
from sparsify_tui.tui.projects import ProjectsSection
from sparsify_tui.tui.widgets.charts import BarChart, LineChart

SIZE = (80, 24)
DEMO_DIMS = {"x:2": 48, "x:3": 192}
SECTIONS = {"projects": ProjectsSection, "perf": PerfSection, "loss": LossSection,
            "optimization": OptimizationSection, "benchmarks": BenchmarksSection}


async def wait_for(pilot, predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause(0.05)
        try:
            if predicate():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {predicate}")


def bindings(cls) -> dict:
    """key -> action of a class's own bindings (each key of "d,delete" separately)."""
    out = {}
    for b in cls.BINDINGS:
        b = b if isinstance(b, Binding) else Binding(*b)
        for key in b.key.split(","):
            out[key.strip()] = b.action
    return out


def test_one_action_one_key_in_every_section():
    keys = {name: bindings(cls) for name, cls in SECTIONS.items()}
    for key, action in {"n": "new", "d": "delete", "delete": "delete", "r": "rerun", "c": "cancel_job",
                        "p": "focus_list", "less_than_sign": "cycle_tab(-1)", "greater_than_sign": "cycle_tab(1)",
                        "i": "inspect", "equals_sign": "compare", "m": None, "l": None, "g": None}.items():
        seen = {name: k[key] for name, k in keys.items() if key in k}
        assert seen, key
        if action is not None:
            assert set(seen.values()) == {action}, (key, seen)
        else:  # m / l / g switch the view to its main tab / its table / its chart
            assert all(a.startswith("view_tab(") for a in seen.values()), (key, seen)
    # the keys that meant several things before (c: Params, Copy, Batch/cores, Cancel; l: List) do not now;
    # the INT8 search and the comparisons joined the scheme (I, =) without taking a shared key
    assert keys["optimization"].get("C") == "copy" and keys["benchmarks"].get("b") == "next_combo"
    assert keys["optimization"].get("I") == "int8_search" and keys["perf"].get("space") == "toggle_mark"
    # `=` compares everywhere: no view inside a section takes it for something else (it was "more" there)
    from sparsify_tui.tui.optimization.compare import OptimizationCompareScreen
    from sparsify_tui.tui.perf import FlopsProfileView, PerfProfileView
    from sparsify_tui.tui.perf.compare import PerfCompareScreen

    for cls in (FlopsProfileView, PerfProfileView, PerfCompareScreen, OptimizationCompareScreen):
        assert "equals_sign" not in bindings(cls), cls
    # the comparison screens switch tabs with the sections' keys
    for cls in (PerfCompareScreen, OptimizationCompareScreen):
        own = bindings(cls)
        assert own["m"].startswith("tab(") and own["l"].startswith("tab(") and "less_than_sign" in own, cls


@pytest.fixture
def project(workspace_home, demo_model):
    ws = Workspace()
    pid = create_project(ws, str(demo_model), "demo", dims=DEMO_DIMS)["id"]
    optimizations.create_optimization(ws, pid, "opt", sparsity=0.7)
    return ws, pid


def footer_keys(app) -> list:
    """The keys of the footer on view: the top screen's, or under a dialog the screen's below it."""
    for screen in reversed(app.screen_stack):
        keys = [w for w in screen.query("FooterKey") if w.display]
        if keys:
            return keys
    return []


async def test_every_footer_fits_80_columns_with_help_and_quit(project):
    ws, pid = project
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        for key, section in (("1", "projects"), ("2", "perf"), ("3", "loss"), ("4", "optimization"),
                             ("5", "benchmarks"), ("6", "settings")):
            await pilot.press("escape", key)  # escape first: a text field would take the digit
            await wait_for(pilot, lambda: app.section == section and app.focused is not None)
            await pilot.pause(0.3)
            for _step in range(3):  # the section's first focus, then two tab stops further
                keys = footer_keys(app)
                texts = [str(k.render()) for k in keys]
                if isinstance(app.focused, (Input, TextArea, Select)):  # q and ? type into a text field
                    assert any("Leave field" in t for t in texts), (section, texts)
                else:
                    assert any("Help" in t for t in texts) and any("Quit" in t for t in texts), (section, texts)
                assert all(k.region.right <= SIZE[0] for k in keys), (section, texts)
                await pilot.press("tab")
                await pilot.pause(0.2)
        # the per-row table of every tabbed view, and every section's new dialog over it
        for key, section in (("2", "perf"), ("3", "loss"), ("4", "optimization"), ("5", "benchmarks")):
            await pilot.press("escape", key)
            await wait_for(pilot, lambda: app.section == section and app.focused is not None)
            await pilot.pause(0.3)
            for keys_ in (["l"], ["n"]):
                await pilot.press(*keys_)
                await pilot.pause(0.5)
                texts = [str(k.render()) for k in footer_keys(app)]
                assert all(k.region.right <= SIZE[0] for k in footer_keys(app)), (section, keys_, texts)
            await pilot.press("escape")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "Screen")


VISIBLE_BY_STYLE = (OptionList, SelectionList, DataTable, TextArea, BarChart, LineChart, VerticalScroll)
VISIBLE_BY_ITSELF = (Input, Button, Checkbox, Switch, Select)  # a cursor, bold reverse, reversed label


def visibly_focused(widget) -> bool:
    if isinstance(widget, VISIBLE_BY_ITSELF):
        return True
    if isinstance(widget, VISIBLE_BY_STYLE):
        edge = widget.styles.outline_left
        return bool(edge and edge[0])
    return False


async def test_every_tab_stop_shows_its_focus(project):
    """Tab through every section: each focused widget is drawn focused (a bar over its left column, a cursor,
    reversed text); no tab bar, job line or other invisible stop takes the focus."""
    ws, pid = project
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        for key, section in (("2", "perf"), ("3", "loss"), ("4", "optimization"), ("5", "benchmarks"),
                             ("6", "settings"), ("1", "projects")):
            await pilot.press("escape", key)  # escape first: a text field would take the digit
            await wait_for(pilot, lambda: app.section == section and app.focused is not None)
            await pilot.pause(0.3)
            for _ in range(8):
                focused = app.focused
                assert focused is not None and visibly_focused(focused), (section, focused)
                await pilot.press("tab")
                await pilot.pause(0.1)


def type_burst(app, *keys: str) -> None:
    """Post ``keys`` to the app at once, as a terminal delivers a fast typist's (or a paste's, or ``tmux send-keys``)
    keys: each is read before the one before it has been handled."""
    from textual import events
    from textual.keys import _character_to_key

    for key in keys:
        if len(key) == 1:
            app.post_message(events.Key(_character_to_key(key), key))
        else:
            app.post_message(events.Key(key, {"backspace": "\x7f", "tab": "\t"}.get(key)))


async def test_keys_typed_in_a_burst_edit_the_field_in_typing_order(project):
    """Issue 24 bug 8: backspace ×4 then "chan15" sent at once gave the name "ch" (the backspaces ran after the
    letters); and the keys behind a tab went to the field tab was leaving."""
    from sparsify_tui.tui.perf.dialogs import PerfProfileDialog

    ws, pid = project
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.focused is not None)
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, PerfProfileDialog) and app.focused is not None)
        dialog = app.screen
        name = dialog.query_one("#name", Input)
        assert app.focused is name and name.value == "baseline"
        type_burst(app, "end", "backspace", "backspace", "backspace", "backspace", *"chan15")
        await wait_for(pilot, lambda: name.value != "baseline")
        await pilot.pause(0.3)
        assert name.value == "basechan15"
        type_burst(app, "tab", "backspace", "4", "tab", "tab", "backspace", "7")
        await pilot.pause(0.5)
        assert (name.value, dialog.query_one("#batch_size", Input).value) == ("basechan15", "4")
        assert dialog.query_one("#warmup", Input).value == "7"
