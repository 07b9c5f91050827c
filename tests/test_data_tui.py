"""The TUI side of issue 31: a data-file field shows what the typed file holds (the line ``data show`` prints first),
and a search dialog takes a metric of the user's own (``FILE.py:FUNCTION``)."""

from __future__ import annotations

import asyncio

import numpy as np

from conftest import wait_for
from test_budget_tui import make_app, open_budget_tab, seeded


def test_data_field_summary_and_own_metric_in_the_search_dialog(workspace_home, demo_model, tmp_path, monkeypatch):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, data = seeded(ws, demo_model, tmp_path)
    metric = tmp_path / "m.py"
    metric.write_text("def hits(outputs, reference, labels):\n    return 1.0\n")
    labelled = tmp_path / "labelled.npz"
    np.savez(labelled, x=np.linspace(-1, 1, 2 * 3 * 48 * 192, dtype=np.float32).reshape(2, 3, 48, 192),
             labels=np.array([1, 1]), class_names=np.array(["up", "down"]))
    submitted = []
    monkeypatch.setattr("sparsify_tui.jobs.submit", lambda ws_, p, t, a: submitted.append((t, a)) or
                        {"id": "x", "type": t, "status": "pending"})

    async def run():
        app = make_app(ws, pid)
        async with app.run_test(size=(80, 24)) as pilot:
            sec = await open_budget_tab(pilot)
            sec.query_one("#opt-list").focus()
            await pilot.press("B")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "BudgetSearchDialog")
            summary = app.screen.query_one("DataSummary")
            want = "cls.npz: 4 items; x float32 [4, 3, 48, 192] in [0, 0]; labels: none"
            await wait_for(pilot, lambda: str(summary.render()) == want)  # the field's default, summarized
            app.screen.query_one("#bsd-data").value = str(labelled)
            await wait_for(pilot, lambda: "labels: 2 classes (down 2)" in str(summary.render()))
            assert "labelled.npz: 2 items; x float32 [2, 3, 48, 192] in [-1, 1]" in str(summary.render())
            app.screen.query_one("#bsd-data").value = str(tmp_path / "typo.npz")
            await wait_for(pilot, lambda: str(summary.render()).endswith("typo.npz: no such file"))
            app.screen.query_one("#bsd-data").value = ""
            await wait_for(pilot, lambda: not summary.display)  # nothing typed: no line
            # a metric of the user's own: checked in the dialog (one line, the dialog stays), then submitted
            app.screen.query_one("#bsd-data").value = str(data)
            app.screen.query_one("#bsd-drop").value = "0.02"
            app.screen.query_one("#bsd-metric").value = f"{metric}:nope"
            app.screen.query_one("#bsd-ok").press()
            await wait_for(pilot, lambda: "defines no 'nope'" in str(app.screen.query_one("#error").render()))
            app.screen.query_one("#bsd-metric").value = f"{metric}:hits"
            app.screen.query_one("#bsd-ok").press()
            await wait_for(pilot, lambda: submitted)
            assert submitted[0][0] == "budget_search" and submitted[0][1]["metric"] == f"{metric}:hits"

    asyncio.run(run())
