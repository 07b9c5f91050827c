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


#: a step name as long as a node id gets ("deepc" / "opy_124" was shown folded under the list)
LONG_STEP = "one-shot deepcopy_124_conv_features.13.conv.0.0_weight_quantized 3/10"
LONG_PATH = "/home/engineer/.local/share/sparsify-tui/projects/0a1b2c3d4e/optimized/budget-1.onnx"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_no_word_is_cut_in_job_progress_and_notifications(workspace_home, demo_model, monkeypatch, size):
    """A running job's progress under a section's list and a notification naming a long path: every word whole
    or elided in its middle, never folded across two lines."""
    import os

    from seeded_workspace import seed_demo

    monkeypatch.setattr(SparsifyApp, "WATCH_SECONDS", 600.0)
    ws = Workspace()
    pid = seed_demo(ws, demo_model)
    ws.add_job({"id": "j0123456789", "project_id": pid, "type": "loss_profile", "status": "running",
                "pid": os.getpid(), "title": "loss profile 'budget search channel sensitivity'",
                "args": {"name": "budget search channel sensitivity"}, "created": "2026-01-01T00:00:00+00:00",
                "progress": {"step": LONG_STEP, "fraction": 0.3, "eta_s": 75}})
    loss = ws.list_records(pid, "loss_profiles")[0]
    name = "budget search channel sensitivity"
    ws.update_record(pid, "loss_profiles", loss["id"], name=name)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=size, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.focused is not None)
        await pilot.press("3")
        await wait_for(pilot, lambda: app.query("#loss JobProgress") and "deep" in str(
            app.query_one("#loss JobProgress #job-status").render()))
        await pilot.pause(0.5)
        problems = cut_text(app)
        # the list shows the name's whole words, then … ("budg…earch" joined the ends of two words)
        option = str(app.query_one("#loss #loss-list").get_option(loss["id"]).prompt)
        assert all(word in name.split() for word in option.split("…")[0].split()), option
        app.notify(f"Applied: wrote {LONG_PATH} (3 groups thinned)", timeout=30)
        app.notify(f"Benchmark finished: {LONG_STEP}", severity="warning", timeout=30)
        await wait_for(pilot, lambda: len(app.screen.query("Toast")) == 2)
        await pilot.pause(0.5)
        # the notifications (the text under them is checked above: they cover some of it now)
        problems += [p for p in cut_text(app) if p.startswith("Toast")]
        shown = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
        assert "budget-1.onnx" in shown, shown  # the file name of the path shows whole
    assert not problems, "\n".join(problems)
