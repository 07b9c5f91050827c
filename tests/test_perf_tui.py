"""Perf profile view through Pilot on a seeded stored result (nothing is measured): Model Summary,
Layer Summaries types, Layer Results level/filter, Top Layers, add dialog validation, delete; 80x24 snapshots."""

from __future__ import annotations


import pytest
from textual import events
from conftest import steady, wait_for

from sparsify_tui.profiling import perf_estimate as est
from sparsify_tui.profiling.perf import (
    Int8Profile, LatencySummary, NodePerf, PerfProfile, ProfiledRecord, _model_estimates,
)
from sparsify_tui.services.profiles import perf_record as record_summary
from sparsify_tui.services.projects import create_project

SIZE = (80, 24)
DEMO_DIMS = {"x:2": 48, "x:3": 192}


def seeded_profile(analysis: dict) -> PerfProfile:
    """A deterministic profile over the demo model's nodes: convs 0.02-0.08 ms, others 0.005 ms (medians over 20
    profiled runs, each mean 10% above and IQR 5% of it); INT8 2.5× faster, timed interleaved in 3 rounds."""
    nodes = []
    for n in analysis["nodes"]:
        prunable = bool(n.get("prunable"))
        t = 0.01 * (n["index"] % 7 + 2) if n["op_type"] == "Conv" else (0.005 if n["index"] % 3 == 0 else 0.0)
        nodes.append(NodePerf(index=n["index"], id=n["id"], op_type=n["op_type"], weight_name=n.get("weight_name"),
                              time_ms=t, flops=int(n.get("flops") or 0),
                              gflops_per_s=(n.get("flops") or 0) / (t * 1e-3) / 1e9 if t else None,
                              est_pruned_ms=est.estimate_node_ms(t, prunable, 0.2),
                              int8_time_ms=t * 0.4, prunable=prunable, mean_ms=t * 1.1, spread_ms=t * 0.05))
    nodes.append(NodePerf(index=len(nodes), id="[layout conversion]", op_type="layout conversion", time_ms=0.03,
                          est_pruned_ms=est.estimate_node_ms(0.03, False, 0.0), int8_time_ms=0.01))
    total = sum(n.time_ms for n in nodes)
    for n in nodes:
        n.share = n.time_ms / total
    prof = PerfProfile(name="baseline", batch_size=1, core_count=2, instruction_sets=["AVX2", "AVX512F", "AVX512_VNNI"],
                       latency_ms=LatencySummary(median=1.25, p90=1.4, mean=1.3, min=1.2), items_per_second=800.0,
                       int8=Int8Profile.from_dict({"enabled": True, "error": None,
                                                   "latency_ms": {"median": 0.5, "p90": 0.6, "mean": 0.55, "min": 0.45},
                                                   "items_per_second": 2000.0, "speedup": 2.5,
                                                   "interleaved": {"fp32_ms": 1.3, "int8_ms": 0.52, "rounds": 3,
                                                                   "iterations": 15,
                                                                   "round_ratios": [2.4, 2.5, 2.6]},
                                                   "speedup_interleaved": 2.5}),
                       nodes=nodes, engine_version="1.31.1", created="2026-01-01T00:00:00Z", warmup=5, iterations=30,
                       profiled=ProfiledRecord(runs=20, node_time="median"))
    prof.pruned_estimate = _model_estimates(nodes, 1.25, 0.2)
    return prof


def seed(ws, demo_model):
    project = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)
    pid = project["id"]
    prof = seeded_profile(ws.analysis_of(pid))
    rec = ws.add_record(pid, "perf_profiles", {"id": "perf1", **record_summary(prof)})
    ws.write_blob(pid, f"perf_profiles/{rec['id']}.json", prof.to_dict())
    return pid, prof


def make_app(ws, pid):
    from sparsify_tui.tui.app import SparsifyApp

    return SparsifyApp(project=pid, workspace=ws)


async def open_profile(pilot):
    from sparsify_tui.tui.perf.profile import PerfProfileView

    app = pilot.app
    await wait_for(pilot, lambda: app.section == "perf" and len(app.query_one("#perf").records) == 1)
    section = app.query_one("#perf")
    # the section opens on the measured profile (not FLOPS), highlighted in the list
    await wait_for(pilot, lambda: app.query_one(PerfProfileView).profile is not None)
    assert section.query_one("#profiles").highlighted == 1
    section.focus_default()
    await pilot.press("enter")  # picks it: focus moves into its view, so its keys work at once
    await wait_for(pilot, lambda: app.focused is not None and app.query_one(PerfProfileView) in app.focused.ancestors)
    return section, app.query_one(PerfProfileView)


async def open_add_dialog(pilot):
    """Open the seeded profile, then `n`: (section, profile view, the add dialog)."""
    from sparsify_tui.tui.perf.dialogs import PerfProfileDialog

    section, view = await open_profile(pilot)
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, PerfProfileDialog))
    return section, view, pilot.app.screen


@pytest.fixture
def ws(workspace_home):
    from sparsify_tui.store import Workspace

    return Workspace()


async def test_navigate_a_finished_profile(ws, demo_model):
    from sparsify_tui.tui.widgets.charts import BarChart
    from sparsify_tui.tui.widgets.tables import FilterableTable

    pid, prof = seed(ws, demo_model)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        section, view = await open_profile(pilot)
        summary = str(view.query_one("#perf-summary").render())
        assert "1.250 ms/batch" in summary and "800.0 items/s" in summary
        assert "AVX512_VNNI" in summary and "INT8 measured" in summary and "2.50×" in summary
        assert "est." in summary and "no speedup" in summary
        # per-node times are scaled to the measured median, and the summary says by how much
        scale = 1.25 / prof.total_node_ms
        assert f"×{scale:.3g}" in summary and f"add up to {1 / scale:.1f}× it" in summary
        assert "each node's median over 20 profiled runs" in summary and "2.50× (rounds 2.40–2.60×) FP32" in summary
        chart = view.query_one("#op-chart", BarChart)
        assert chart.labels[0] == "Conv" and "Baseline ms" in chart.title
        conv_total = sum(n.time_ms for n in prof.nodes if n.op_type == "Conv") * scale
        assert chart.values[0] == pytest.approx(conv_total)
        assert sum(chart.values) == pytest.approx(1.25)  # the op types add up to the measured latency
        await pilot.press("m")  # focus the Summary tab (the profile list had the focus)
        await pilot.press("y")  # Summary Type: first pruned level (est.)
        assert "Pruned 0.4 ms (est.)" in chart.title
        for _ in range(len(est.LEVELS)):
            await pilot.press("y")
        assert "INT8 ms (measured)" in chart.title
        assert sum(chart.values) == pytest.approx(0.5)  # scaled to the INT8 median

        await pilot.press("l")  # Layer Results
        table = view.query_one("#layer-table", FilterableTable)
        await wait_for(pilot, lambda: len(table.rows_shown()) == len(prof.nodes))
        assert [r["index"] for r in table.rows_shown()] == sorted(n.index for n in prof.nodes)  # graph order
        conv = next(n for n in prof.nodes if n.prunable and n.time_ms > 0)
        row = next(r for r in table.rows_shown() if r["id"] == conv.id)
        assert row["est_ms"] == pytest.approx(conv.est_pruned_ms["0.9"] * scale)
        assert row["time_ms"] == pytest.approx(conv.time_ms * scale) and row["raw_ms"] == conv.time_ms
        await pilot.press("right_square_bracket")  # level 0.9 -> 0.95
        row = next(r for r in table.all_rows if r["id"] == conv.id)
        assert row["est_ms"] == pytest.approx(conv.est_pruned_ms["0.95"] * scale) and row["est_ms"] < row["time_ms"]
        assert "0.95" in str(view.query_one("#level-line").render())
        await pilot.press("slash", *"Conv", "enter")
        n_conv = sum(n.op_type == "Conv" for n in prof.nodes)
        await wait_for(pilot, lambda: n_conv <= len(table.rows_shown()) < len(prof.nodes))
        for r in table.rows_shown():  # node id, op type and weight: not the "Fused into" column
            assert "conv" in " ".join(str(r[k]) for k in ("id", "op_type", "weight_name")).lower()
        # i (or enter) shows the row's full record: id, op, weight, shapes, every number
        from sparsify_tui.tui.widgets.dialogs import RecordDialog

        table.data_table.move_cursor(row=next(i for i, r in enumerate(table.rows_shown()) if r["id"] == conv.id))
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, RecordDialog))
        record = app.screen.text()
        assert f"Node id: {conv.id}" in record and "Weight shape: " in record and "Output shapes: 1×" in record
        assert f"ms (raw, profiled pass): {conv.time_ms:.6g}" in record and "Est. pruned 0.99 ms" in record
        # at 80 columns a long field name wraps at its words and the values keep the width: the weight's name is
        # whole on the line of its field name (a 64-cell name column once left the values 8 cells: "conv1_we|ights")
        await pilot.pause()
        lines = ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]
        weight = next(line for line in lines if "Weight  " in line and "shape" not in line)
        assert conv.weight_name and conv.weight_name in weight
        assert any("ms (median over the profiled" in line and "runs, scaled" not in line for line in lines)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RecordDialog))

        await pilot.press("g")  # Top Layers
        top = view.query_one("#top-chart", BarChart)
        assert len(top.labels) == 20 and top.values == sorted(top.values, reverse=True)


async def test_add_dialog_validates_and_delete_removes(ws, demo_model):
    from sparsify_tui.tui.perf.dialogs import PerfProfileDialog
    from sparsify_tui.tui.widgets.dialogs import ConfirmDialog

    pid, _ = seed(ws, demo_model)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        section, view, dialog = await open_add_dialog(pilot)
        assert dialog.query_one("#name").value == "baseline 2"  # a fresh name, not "baseline" again
        dialog.query_one("#data").value = "no/such/samples.npz"
        await pilot.press("ctrl+r")
        assert "does not exist" in str(dialog.query_one("#error").render())
        dialog.query_one("#data").value = ""
        dialog.query_one("#core_count").value = "0"
        await pilot.press("ctrl+r")
        assert "Cores must be 1 or more" in str(dialog.query_one("#error").render())
        assert dialog.job is None  # nothing submitted
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, PerfProfileDialog))

        section.focus_default()
        await pilot.press("delete")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        app.screen.dismiss(True)
        await wait_for(pilot, lambda: ws.list_records(pid, "perf_profiles") == [])
        await wait_for(pilot, lambda: section.selected == "flops")


def test_snapshot_profile_summary(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _ = seed(ws, demo_model)

    async def setup(pilot):
        await open_profile(pilot)
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=SIZE, run_before=setup)


def test_snapshot_layer_results(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _ = seed(ws, demo_model)

    async def setup(pilot):
        await open_profile(pilot)
        await pilot.press("l")
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=SIZE, run_before=setup)


def test_snapshot_add_dialog(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _ = seed(ws, demo_model)

    async def setup(pilot):
        from textual.widgets import Input

        from sparsify_tui.tui.perf.dialogs import PerfProfileDialog

        await open_profile(pilot)
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, PerfProfileDialog))
        for widget in pilot.app.screen.query(Input):
            widget.cursor_blink = False  # a blinking cursor makes the snapshot depend on timing
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=SIZE, run_before=setup)


def _cli(*args: str) -> str:
    """Run ``sparsify-tui ARGS`` in its own process (as another shell would); returns its stdout."""
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "sparsify_tui", *args], capture_output=True, text=True,
                         env=os.environ.copy(), timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


async def test_a_profile_stored_by_another_process_shows_while_the_section_is_open(ws, demo_model, tmp_path,
                                                                                   monkeypatch):
    """Issue 24 bug 1 (crashed with DuplicateIds 'measured-view'): a profile another shell stores while the
    Performance section shows a measured profile is listed, and shown when the user has not picked one; the view
    is reused, and switching between measured profiles and FLOPS back and forth in one frame does not crash."""
    from sparsify_tui.tui.perf.profile import PerfProfileView

    pid, prof = seed(ws, demo_model)
    exported = tmp_path / "perf1.json"
    _cli("profile", "export", pid, "perf1", "-o", str(exported))
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.query("#perf") and app.query_one("#perf").selected == "perf1")
        section = app.query_one("#perf")
        view = section.current_view()
        await wait_for(pilot, lambda: view.profile is not None)
        _cli("profile", "import", pid, str(exported), "--name", "tui2")  # another process, as from a shell
        await wait_for(pilot, lambda: len(section.records) == 2)
        tui2 = next(str(r["id"]) for r in section.records if r["name"] == "tui2")
        await wait_for(pilot, lambda: section.selected == tui2 and view.profile_id == tui2)
        assert section.current_view() is view and len(section.query(PerfProfileView)) == 1
        assert "tui2" in str(view.query_one("#perf-summary").render())
        # a rerun finishing (refresh), the other profile, FLOPS and back, all in one frame
        section.select("perf1", refresh=True)
        section.select(tui2, refresh=True)
        section.select("flops")
        section.select("perf1")
        await wait_for(pilot, lambda: view.profile_id == section.selected != "flops")  # (the poll shows the newest)
        assert len(section.query(PerfProfileView)) == 1 and view.display
        assert app.query_one("#flops-view").display is False


async def test_a_profile_run_from_the_new_dialog_shows_when_it_finishes(ws, demo_model, tmp_path, monkeypatch):
    """Issue 24 bug 1 as reported: `n`, name, 1 core, run; when the job finishes, its profile is shown (the app
    died with DuplicateIds 'measured-view' here), and the focus moves from the list into its view."""
    from sparsify_tui.tui.perf.dialogs import PerfProfileDialog

    monkeypatch.setenv("SPARSIFY_TUI_MEASURE_LOCK", str(tmp_path / "measure.lock"))
    pid, _ = seed(ws, demo_model)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        section, view = await open_profile(pilot)
        await pilot.press("p", "n")  # from the list
        await wait_for(pilot, lambda: isinstance(app.screen, PerfProfileDialog))
        dialog = app.screen
        for key, value in (("name", "tui2"), ("core_count", "1"), ("warmup", "1"), ("iterations", "3")):
            dialog.query_one(f"#{key}").value = value
        dialog.query_one("#int8").value = False
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not isinstance(app.screen, PerfProfileDialog), timeout=120)
        await wait_for(pilot, lambda: len(section.records) == 2)
        tui2 = next(str(r["id"]) for r in section.records if r["name"] == "tui2")
        await wait_for(pilot, lambda: section.selected == tui2 and view.profile_id == tui2)
        await pilot.pause(0.5)
        assert app.is_running and section.current_view() is view
        assert app.focused is not None and view in app.focused.ancestors


async def test_op_types_without_time_of_their_own_are_named_not_drawn_as_zero_bars(ws, demo_model):
    """Issue 24 friction: the op-type chart listed "[quantize/dequantize] 0 ms" in FP32 and fused op types as
    "BatchNormalization 0 ms" rows; they are named in the line above the chart instead."""
    from sparsify_tui.tui.widgets.charts import BarChart

    pid, prof = seed(ws, demo_model)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        section, view = await open_profile(pilot)
        chart = view.query_one("#op-chart", BarChart)
        await wait_for(pilot, lambda: chart.values)
        zero = sorted(k for k, v in prof.op_type_totals("baseline").items() if not v > 0)
        assert zero and all(v > 0 for v in chart.values) and not set(zero) & set(chart.labels)
        assert f"no time of their own: {', '.join(zero)}" in str(view.query_one("#summary-type").render())


def test_one_core_reads_one_core(ws, demo_model):
    """Issue 24 friction: "1 cores" (also "1 trials", "0 group(s)"): counts agree with their noun."""
    from sparsify_tui.formatting import plural
    from sparsify_tui.tui.perf.profile import model_summary_text

    pid, prof = seed(ws, demo_model)
    prof.core_count = 1
    assert "batch 1 · 1 core · onnxruntime" in model_summary_text(prof, "0.9")
    assert [plural(n, "group") for n in (0, 1, 2)] == ["0 groups", "1 group", "2 groups"]


async def test_a_key_typed_with_the_key_that_opens_a_tab_waits_for_it(ws, demo_model):
    """Issue 30 item 9: a tab's widgets are built the first time it is opened (lazy tabs). `l` and `i` read at once (a
    fast typist, `tmux send-keys`): `i` waits until Layer Results is built, then works on its table as it did when
    every tab was built up front; it read a table whose widgets were not composed yet (an error dialog)."""
    from sparsify_tui.tui.widgets.dialogs import ErrorDialog, RecordDialog

    pid, prof = seed(ws, demo_model)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        section, view = await open_profile(pilot)
        assert view.current_tab() == "summary"
        for key in ("l", "i"):
            app.post_message(events.Key(key, key))  # in one burst, nothing awaited
        # `i` acts on the table `l` opened, whether or not its rows were drawn yet: the first row's record
        await wait_for(pilot, lambda: isinstance(app.screen, RecordDialog))
        assert f"Node id: {prof.nodes[0].id}" in app.screen.text()
        assert view.current_tab() == "layers" and not any(isinstance(s, ErrorDialog) for s in app.screen_stack)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RecordDialog))
        table = view.query_one("#layer-table")
        await wait_for(pilot, lambda: table.data_table.row_count == len(prof.nodes))
        await pilot.press("down", "i")  # and the keys go on working on the drawn table: the second row's record
        await wait_for(pilot, lambda: isinstance(app.screen, RecordDialog))
        assert f"Node id: {table.rows_shown()[1]['id']}\n" in app.screen.text()
