"""No cut text (issue 24 deliverable 3): every section, view and dialog at 80x24 and 120x40, on a populated seeded
project; no line of text ends (or starts) inside a word its full text continues, no header loses its last words, no
list option wraps, and a path shows its file name (tests/screen_text.py: :func:`cut_text`)."""

from __future__ import annotations

import pytest
from screen_text import cut_text, text_of
from test_tui_keys import wait_for

from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp

#: (section key, the keys of one step: a view or a dialog; None = as the section opens). A step whose keys open a
#: dialog is closed with escape after the check.
STEPS = [
    ("2", [None, "l", "g", "m", "n", "r", "equals_sign", "f"]),
    ("3", [None, "g", "greater_than_sign", "l", "n", "d"]),
    ("4", [None, "l", "greater_than_sign", "greater_than_sign", "greater_than_sign", "n", "e", "I", "equals_sign",
           "p down", "l", "greater_than_sign", "greater_than_sign", "l enter"]),
    ("5", [None, "l", "n", "a", "r"]),
    ("6", [None]),
    ("1", [None, "n"]),
    ("2", ["question_mark", "j", "w", "l i"]),
]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_no_text_is_cut_in_any_section_or_dialog(workspace_home, demo_model, monkeypatch, size):
    from seeded_workspace import seed_demo

    monkeypatch.setattr(SparsifyApp, "WATCH_SECONDS", 600.0)
    ws = Workspace()
    pid = seed_demo(ws, demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    problems = []
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.focused is not None)
        for section_key, steps in STEPS:
            await pilot.press("escape", section_key)
            await wait_for(pilot, lambda: len(app.screen_stack) == 1 and app.focused is not None)
            for step in steps:
                if step is not None:
                    await pilot.press(*step.split())
                await pilot.pause(0.8)
                problems += [f"{section_key} {step} {size}: {p}" for p in cut_text(app)]
                if app.screen.query("#out_path"):  # the apply dialog: the path field shows the file name
                    shown = text_of(app, app.screen.query_one("#out_path").region).strip()
                    if not shown.endswith(".onnx"):
                        problems.append(f"{section_key} {step} {size}: the export path shows {shown!r}")
                while len(app.screen_stack) > 1:
                    await pilot.press("escape")
                    await pilot.pause(0.2)
    assert not problems, "\n".join(problems)
