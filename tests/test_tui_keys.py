"""Keys and focus through Pilot (issue 15 items 13-15): one action has one key in every section, every footer
fits 80 columns with `?` and `q` in it, and every tab stop shows that it has the focus (no invisible stop)."""

from __future__ import annotations


import time

import pytest
from textual.binding import Binding
from textual.geometry import Region
from textual.widgets import (Input, TextArea)

from sparsify_tui.services import optimizations
from sparsify_tui.services.projects import create_project
from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp
from sparsify_tui.tui.benchmarks import BenchmarksSection
from sparsify_tui.tui.loss import LossSection
from sparsify_tui.tui.optimization import OptimizationSection
from sparsify_tui.tui.perf import PerfSection
from sparsify_tui.tui.projects import ProjectsSection
from conftest import wait_for

SIZE = (80, 24)
DEMO_DIMS = {"x:2": 48, "x:3": 192}
SECTIONS = {"projects": ProjectsSection, "perf": PerfSection, "loss": LossSection,
            "optimization": OptimizationSection, "benchmarks": BenchmarksSection}


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
    from sparsify_tui.tui.optimization.compare_screen import OptimizationCompareScreen
    from sparsify_tui.tui.perf import FlopsProfileView, PerfProfileView
    from sparsify_tui.tui.perf.compare_screen import PerfCompareScreen

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


def footer(app):
    """The footer on view: the top screen's, or under a dialog the screen's below it."""
    for screen in reversed(app.screen_stack):
        footers = screen.query("KeysFooter")
        if footers:
            return footers.first()
    return None


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
                shown = footer(app)
                text = shown.text
                # q and ? type into a text field that takes the keys typed; a section's field takes them only
                # while it is edited (enter), so the section's and the app's keys work on it
                if isinstance(app.focused, (Input, TextArea)) and getattr(app.focused, "editing", None) is None:
                    assert "Leave field" in text, (section, text)
                else:
                    assert "? Help" in text and "q Quit" in text, (section, text)
                assert shown.region.right <= SIZE[0] and len(text) <= SIZE[0], (section, text)
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
                text = footer(app).text
                assert len(text) <= SIZE[0], (section, keys_, text)
            await pilot.press("escape")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "Screen")


#: (section key, section, the keys that show each of its views: None = as the section opens)
WALK = [("2", "perf", (None, "l", "g", "m")), ("3", "loss", (None, "g", "greater_than_sign", "l", "m")),
        ("4", "optimization", (None, "l")), ("5", "benchmarks", (None, "l", "m")), ("6", "settings", (None,)),
        ("1", "projects", (None,))]


async def settled_cells(pilot, region: Region) -> list:
    """The cells of ``region`` once two frames 50 ms apart agree (a focus change is drawn at the next refresh)."""
    from screen_text import cells

    for _ in range(2):  # the focus change restyles the widgets (one refresh), which are then drawn (the next)
        await pilot.app.screen.wait_for_refresh()
    last, same = None, 0
    for _ in range(40):
        await pilot.pause(0.05)
        now = cells(pilot.app, region)
        same = same + 1 if now == last else 0
        if same == 1:
            break
        last = now
    return last


async def focus_marks(pilot, widget) -> tuple[Region, str, bool]:
    """(the part of ``widget`` on screen, the text shown there, whether it looks different focused and unfocused
    without colour: the focus is visible under NO_COLOR, in any theme)."""
    from screen_text import text_of

    app = pilot.app
    shown = widget.region.intersection(app.screen.region)
    focused = await settled_cells(pilot, shown)
    text = text_of(app, shown)
    app.set_focus(None)
    unfocused = await settled_cells(pilot, shown)
    app.set_focus(widget)
    return shown, text, focused != unfocused


@pytest.mark.parametrize("size, theme, no_color", [((80, 24), "textual-dark", False),
                                                   ((120, 40), "textual-light", False),
                                                   ((80, 24), "textual-dark", True)])
async def test_every_tab_stop_is_visible_and_shows_its_focus(workspace_home, demo_model, monkeypatch, size, theme,
                                                             no_color):
    """Issue 24 deliverable 2: `tab` through every view of every section; each stop is on screen, shows something
    (no empty area below a chart), and looks different focused (a bar, a cursor, reversed text: not a colour only),
    in both themes and under NO_COLOR."""
    from seeded_workspace import seed_demo

    # a list read again (the project's change stamp moved) focuses itself when it finds nothing focused: not while
    # a stop is drawn unfocused here
    monkeypatch.setattr(SparsifyApp, "WATCH_SECONDS", 600.0)
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    ws = Workspace()
    pid = seed_demo(ws, demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=size) as pilot:
        app.theme = theme
        for key, section, views in WALK:
            await pilot.press("escape", key)  # escape first: a text field would take the digit
            await wait_for(pilot, lambda: app.section == section and app.focused is not None)
            await pilot.pause(0.5)
            for view in views:
                if view is not None:
                    await pilot.press("escape", view)
                    await pilot.pause(0.4)
                seen = []
                while app.focused not in seen and len(seen) < 16:
                    widget = app.focused
                    assert widget is not None, (section, view, seen)
                    seen.append(widget)
                    shown, text, marked = await focus_marks(pilot, widget)
                    where = (section, view, widget)
                    assert shown.width > 0 and shown.height > 0, where  # on screen
                    assert text.strip(), where  # shows something
                    assert marked, where  # and shows that it has the focus, without colour
                    await pilot.press("tab")


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


async def test_the_new_optimization_name_takes_keys_typed_at_once(project):
    """Issue 24 bug 8 as reported: in the New optimization dialog, backspace ×4 then "chan15" sent together gave
    the name "ch"."""
    from sparsify_tui.tui.optimization.dialogs import CreateOptimizationDialog

    ws, pid = project
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.focused is not None)
        await pilot.press("4")
        await wait_for(pilot, lambda: app.section == "optimization" and app.focused is not None)
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, CreateOptimizationDialog) and app.focused is not None)
        name = app.screen.query_one("#create-name", Input)
        assert app.focused is name and name.value == "opt1"
        type_burst(app, "backspace", "backspace", "backspace", "backspace", *"chan15")
        await wait_for(pilot, lambda: name.value != "opt1")
        await pilot.pause(0.3)
        assert name.value == "chan15"


class SlowWorkspace(Workspace):
    """A workspace whose reads of the project take 0.8 s (a loaded machine): a dialog's data comes late."""

    def get_project(self, ref):
        time.sleep(0.8)
        return super().get_project(ref)


async def test_keys_typed_before_a_dialog_shows_go_into_it(workspace_home, demo_model):
    """`n`, then "run3" at once while the dialog's defaults are still read: the name is "run3"; before, the keys went
    to the section under it (r asked to rerun, 3 switched to Loss). escape while waiting gives the dialog up."""
    from sparsify_tui.tui.perf.dialogs import PerfProfileDialog

    ws = SlowWorkspace()
    pid = create_project(ws, str(demo_model), "demo", dims=DEMO_DIMS)["id"]
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.focused is not None)
        await pilot.pause(1.0)
        type_burst(app, "n", "backspace", *"run3")
        await wait_for(pilot, lambda: isinstance(app.screen, PerfProfileDialog) and app.focused is not None)
        await wait_for(pilot, lambda: app.screen.query_one("#name", Input).value == "run3", timeout=5)
        assert app.section == "perf" and len(app.screen_stack) == 2
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1)
        type_burst(app, "n", "escape")  # given up before it showed: it never does
        await pilot.pause(2.0)
        assert len(app.screen_stack) == 1 and app.section == "perf"
        type_burst(app, "x")  # and the keys reach the section again
        await pilot.pause(0.3)
        assert len(app.screen_stack) == 1
