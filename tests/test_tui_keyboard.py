"""Issue 30 bug 2 and 4, deliverable 2: one keyboard model. A field of a section is a tab stop the section keys work
on until `enter` (or a click) starts an edit; `escape` puts the value back; a bad value is said on one line under the
field (never "Unexpected error") and nothing is stored; keys typed at once (escape then a digit) act in order."""

from __future__ import annotations

from conftest import wait_for, wait_project_open
from textual import events

from sparsify_tui.services import optimizations
from sparsify_tui.services.projects import create_project
from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp

DEMO_DIMS = {"x:2": 48, "x:3": 192}
SIZE = (120, 40)


def project(demo_model):
    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    optimizations.create_optimization(ws, pid, "base", sparsity=0.7)
    return ws, pid


def sparsity(ws, pid) -> float:
    return ws.find_record(pid, "optimizations", "base")["settings"]["sparsity"]


async def open_pruning(pilot):
    app = pilot.app
    await pilot.press("4")
    await wait_for(pilot, lambda: app.query("#optimization") and app.query_one("#optimization").rec is not None)
    await pilot.press("m")
    field = app.query_one("#in-sparsity")
    await wait_for(pilot, lambda: field.has_focus and field.value == "0.70")
    return field


async def test_section_keys_work_on_a_field_until_enter(workspace_home, demo_model):
    """`4 m 5`: Benchmarks (the "5" was typed into the Sparsity field); `m 1 enter` does not set sparsity 1."""
    ws, pid = project(demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        field = await open_pruning(pilot)
        assert not field.editing
        footer = app.query_one("KeysFooter").text
        assert "⏎ Edit" in footer and "? Help" in footer and "Leave field" not in footer
        await pilot.press("5")
        await wait_for(pilot, lambda: app.section == "benchmarks")
        assert field.value == "0.70"
        await pilot.press("4")
        await wait_for(pilot, lambda: app.section == "optimization")
        await pilot.press("m", "b", "x")  # keys nothing binds: not typed into the field either
        await pilot.pause(0.2)
        assert field.value == "0.70" and field.has_focus
        await pilot.press("1")
        await wait_for(pilot, lambda: app.section == "projects")
        assert sparsity(ws, pid) == 0.7


async def test_an_edit_is_checked_in_place_and_escape_puts_the_value_back(workspace_home, demo_model):
    ws, pid = project(demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        field = await open_pruning(pilot)
        line = app.query_one("#pruning-error")
        await pilot.press("enter")
        assert field.editing
        assert "⏎ Keep" in app.query_one("KeysFooter").text
        await pilot.press("m", "1", "enter")  # "m1": a bad number, said under the field; the edit goes on
        await wait_for(pilot, lambda: "not a number" in line.text)
        assert "Unexpected" not in line.text and field.editing and field.value == "m1"
        assert len(app.screen_stack) == 1  # no error dialog
        await pilot.press("escape")
        assert field.value == "0.70" and not field.editing
        await pilot.press("enter", "1", ".", "5", "enter")  # out of range: the core's rule, in place
        await wait_for(pilot, lambda: "between 0 and 1" in line.text)
        await pilot.press("escape")
        await pilot.press("enter", "0", ".", "6", "enter")
        await wait_for(pilot, lambda: sparsity(ws, pid) == 0.6)
        await wait_for(pilot, lambda: not field.editing and not line.text)
        await pilot.press("5")  # the section keys work again at once
        await wait_for(pilot, lambda: app.section == "benchmarks")


async def test_settings_fields_take_keys_only_while_edited(workspace_home, demo_model):
    ws, pid = project(demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("6")
        settings = app.query_one("#settings")
        epochs = settings.query_one("#epochs")
        await wait_for(pilot, lambda: epochs.value == "100")
        epochs.focus()
        await pilot.press("enter", "0", "enter")  # 0 epochs: the store's rule, in place
        line = settings.query_one("#settings-error")
        await wait_for(pilot, lambda: "whole number of 1 or more" in line.text)
        await pilot.press("escape", "9", "0")  # reverted; then 9 and 0 are no section keys: nothing typed
        assert epochs.value == "100"
        await pilot.press("enter", "9", "0", "ctrl+s")  # ctrl+s after the digits, in typing order
        await wait_for(pilot, lambda: ws.get_project(pid)["training"]["epochs"] == 90)
        assert not epochs.editing
        await pilot.press("2")
        await wait_for(pilot, lambda: app.section == "perf")


async def test_escape_then_a_digit_typed_at_once_closes_the_dialog_and_switches(workspace_home, demo_model):
    """Bug 4: escape and a digit read in one go (over SSH keys come that fast) close the dialog and show the
    section; the digit is neither lost nor typed into the closing dialog's field."""
    from sparsify_tui.tui.perf.dialogs import PerfProfileDialog

    ws, pid = project(demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, PerfProfileDialog) and app.focused is not None)
        name = app.focused
        for key, char in (("a", "a"), ("escape", "\x1b"), ("5", "5")):  # in one burst, nothing awaited
            app.post_message(events.Key(key, char))
        await wait_for(pilot, lambda: app.section == "benchmarks")
        assert not isinstance(app.screen, PerfProfileDialog) and not name.value.endswith("5")


async def test_escape_then_a_digit_through_the_terminal_parser(workspace_home, demo_model):
    """What the terminal sends for escape then 5 within the escape delay (``ESC 5``) read as escape, 5: Textual's
    table made it "∞" and the digit was lost."""
    from textual._xterm_parser import XTermParser

    ws, pid = project(demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4")
        await wait_for(pilot, lambda: app.section == "optimization")
        parser = XTermParser()
        keys = list(parser.feed("\x1b5"))
        try:
            keys += list(parser.feed(""))  # the end of input stands for the escape delay running out
        except Exception:  # noqa: BLE001 - the parser says it reached its end
            pass
        assert [k.key for k in keys if isinstance(k, events.Key)] == ["alt+5"]
        for key in keys:
            app.post_message(key)
        await wait_for(pilot, lambda: app.section == "benchmarks")


async def test_lr_text_is_read_only_until_enter(workspace_home, demo_model):
    ws, pid = project(demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4")
        sec = app.query_one("#optimization")
        await wait_for(pilot, lambda: sec.rec is not None)
        sec.query_one("#opt-tabs").active = "tab-lr"
        await wait_for(pilot, lambda: sec.query_one("#opt-tabs").built("tab-lr"))  # built when first opened
        ta = sec.query_one("#lr-text")
        await wait_for(pilot, lambda: ta.text.strip() != "")
        before = ta.text
        ta.focus()
        await pilot.press("5")
        await wait_for(pilot, lambda: app.section == "benchmarks")
        assert ta.text == before
        await pilot.press("4")
        await wait_for(pilot, lambda: app.section == "optimization")
        ta.focus()
        await pilot.press("enter", "x", "y", "z", "ctrl+s")  # a bad modifier: said under the text, in place
        await wait_for(pilot, lambda: "learning-rate modifiers" in sec.query_one("#lr-error").text)
        assert len(app.screen_stack) == 1 and ta.editing
        await pilot.press("escape")
        assert ta.text == before and not ta.editing


async def test_budget_and_int8_searches_are_in_the_optimization_footer_and_hints(workspace_home, demo_model):
    """`B` (the budget search, which delivered the walk's result) and `I` were in neither the footer nor the hints."""
    ws, pid = project(demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4")
        sec = app.query_one("#optimization")
        await wait_for(pilot, lambda: sec.rec is not None and app.focused is not None)
        await pilot.pause(0.3)
        footer = app.query_one("KeysFooter").text
        assert "B Budget" in footer and "I INT8" in footer and "? Help" in footer and "q Quit" in footer
        hints = str(sec.query_one("#opt-left .hint").render())
        assert "B budget" in hints and "I INT8" in hints


async def test_help_opens_at_the_focused_sections_keys(workspace_home, demo_model):
    """`?` listed the app's keys first wherever it was pressed; now the keys of where the focus is come first."""
    from sparsify_tui.tui.help.screen import HelpScreen

    ws, pid = project(demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4")
        await wait_for(pilot, lambda: app.query("#optimization") and app.query_one("#optimization").rec is not None)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        rows = app.screen.query_one("#help-table").rows_shown()
        assert rows[0]["where"] == "Optimization" and "Optimization's first" in str(
            app.screen.query_one(".dialog-title").render())
        assert {r["where"] for r in rows[:5]} == {"Optimization"}
        await pilot.press("escape", "l")  # the layer table: its keys (Tables) first, then Optimization's
        await wait_for(pilot, lambda: len(app.screen_stack) == 1)
        await pilot.pause(0.3)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        wheres = [r["where"] for r in app.screen.query_one("#help-table").rows_shown()]
        assert wheres[0] == "Tables" and wheres.index("Optimization") < wheres.index("Everywhere")


async def test_a_refused_search_keeps_the_dialog_and_what_was_typed(workspace_home, demo_model, tmp_path):
    """Issue 30 deliverable 6: a validation error closed the budget dialog and dropped the path typed; and the
    footer of the screen under a dialog showed keys that do nothing there."""
    import numpy as np

    from sparsify_tui.tui.optimization.budget import BudgetSearchDialog

    ws, pid = project(demo_model)
    bad = tmp_path / "wrong.npz"
    np.savez(bad, nothing=np.zeros((4, 3), np.float32))  # no array for the model's input: the job's check refuses
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_project_open(pilot)
        footer = app.query_one("KeysFooter")
        await pilot.press("4", "B")
        await wait_for(pilot, lambda: isinstance(app.screen, BudgetSearchDialog))
        dialog = app.screen
        await wait_for(pilot, lambda: not footer.display)  # the section's keys are not shown under the dialog
        dialog.query_one("#bsd-data").value = str(bad)
        await pilot.press("ctrl+r")
        error = dialog.query_one("#error")
        await wait_for(pilot, lambda: str(error.render()).strip() != "")
        assert app.screen is dialog and dialog.query_one("#bsd-data").value == str(bad)
        assert "Unexpected" not in str(error.render()) and not ws.list_records(pid, "optimizations")[1:]
        assert not dialog.query_one("#bsd-ok").disabled  # it can be run again once fixed
        await pilot.press("escape")
        await wait_for(pilot, lambda: footer.display and app.screen is not dialog)
