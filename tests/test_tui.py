"""The TUI driven through Pilot at 80x24: new-project dialog, sections 1-6, Layer Results filter/sort,
settings, delete, bad inputs, help, command palette, `sparsify-tui MODEL.onnx`."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
import numpy as np

from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp
from sparsify_tui.tui.new_project.dialog import NewProjectDialog
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog, ErrorDialog
from sparsify_tui.tui.widgets.tables import FilterableTable
from sparsify_tui.services.projects import create_project
from conftest import wait_for

SIZE = (80, 24)
DEMO_DIMS = {"x:2": 48, "x:3": 192}


async def wait_section(pilot, app, section: str) -> None:
    """Wait until `section` is shown and has the keyboard focus (as a user would see it)."""
    def ready():
        widget = app.query_one(f"#sections > #{section}")
        return app.section == section and app.focused is not None and widget in app.focused.ancestors_with_self
    await wait_for(pilot, ready)


def tiny_model(path: Path, batch=1) -> Path:
    """Conv(3->4, 3x3) + Relu + Flatten + Gemm(4*4*4 -> 2), IR 8; static shapes unless ``batch`` names a
    symbolic batch dim."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "conv.weight")
    fc = numpy_helper.from_array(rng.standard_normal((2, 64)).astype(np.float32), "fc.weight")
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.weight"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 2])], [w, fc])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture
def ws(workspace_home) -> Workspace:
    return Workspace()


@pytest.fixture
def demo_project(ws, demo_model) -> dict:
    return create_project(ws, demo_model, "demo", dims=DEMO_DIMS)


async def fill_new_project(pilot, app, model_path: str, *, perf=False, loss=False, dims=None, name="") -> None:
    """Open the dialog with `n` and fill it like a user (typing the path, then the dims it asks for)."""
    await wait_for(pilot, lambda: app.focused is not None)
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, NewProjectDialog) and app.screen.query("#model_path"))
    dialog = app.screen
    dialog.query_one("#model_path").value = model_path
    if dims:
        await wait_for(pilot, lambda: len(dialog.dims) == len(dims))
        for i, d in enumerate(dialog.dims):
            dialog.query_one(f"#dim-{i}").value = str(dims[d["key"]])
    if name:
        dialog.query_one("#name").value = name
    for key, on in (("perf", perf), ("loss", loss)):
        switch = dialog.query_one(f"#{key}_enabled")
        if switch.value != on:
            switch.focus()
            await pilot.press("space")
    await pilot.pause()


async def test_create_project_through_dialog_then_visit_every_section(ws, demo_model):
    app = SparsifyApp()
    async with app.run_test(size=SIZE) as pilot:
        await fill_new_project(pilot, app, str(demo_model), dims=DEMO_DIMS, name="ocr")
        dialog = app.screen
        assert [d["key"] for d in dialog.dims] == ["x:2", "x:3"]  # the dialog asked for the symbolic dims
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not dialog.query_one("#complete").disabled)
        [project] = ws.list_projects()
        assert project["name"] == "ocr"
        assert project["setup"]["dims"] == DEMO_DIMS
        assert project["setup"]["perf_enabled"] is False and project["setup"]["loss_enabled"] is False
        await pilot.click("#complete")
        await wait_for(pilot, lambda: app.project_id == project["id"] and app.section == "perf")
        assert "ocr" in app.sub_title
        for key, section in zip("123456", ["projects", "perf", "loss", "optimization", "benchmarks", "settings"]):
            await pilot.press(key)
            await wait_for(pilot, lambda: app.section == section and app.query_one(f"#sections > #{section}").display)
            assert app.query_one("#sections").current == section
        # Layer Results of the FLOPS profile list every node of the analysis
        await pilot.press("2")
        await wait_section(pilot, app, "perf")
        await pilot.press("l")
        table = app.query_one("#perf #layers", FilterableTable)
        await wait_for(pilot, lambda: len(table.rows_shown()) > 0)
        assert len(table.rows_shown()) == len(ws.analysis_of(project["id"])["nodes"])


async def test_layer_results_filter_and_sort(ws, demo_project):
    app = SparsifyApp(project=demo_project["id"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_section(pilot, app, "perf")
        await pilot.press("l")
        table = app.query_one("#perf #layers", FilterableTable)
        # drawn and focused (on a loaded machine `/` pressed earlier went to the list)
        await wait_for(pilot, lambda: table.data_table.row_count > 0 and table.has_focus_within)
        nodes = ws.analysis_of(demo_project["id"])["nodes"]
        assert [r["id"] for r in table.rows_shown()] == [n["id"] for n in nodes]  # graph order
        await pilot.press("slash")
        await wait_for(pilot, lambda: table.has_class("-filtering"))
        await pilot.press(*"CONV")
        await pilot.press("enter")
        shown = table.rows_shown()
        want = [n for n in nodes if any("conv" in str(n.get(k) or "").lower() for k in ("id", "op_type", "weight_name"))]
        assert 0 < len(shown) == len(want) < len(nodes)
        # filter by weight name substring only present in one layer
        weight = next(n["weight_name"] for n in nodes if n.get("weight_name"))
        table.set_filter(weight)
        assert weight in [r["weight_name"] for r in table.rows_shown()]
        await pilot.press("escape")  # clears the filter
        assert len(table.rows_shown()) == len(nodes)
        # s: the columns with their keys (#, Node id, FLOPs: 3); the key sorts, numbers largest first
        await pilot.press("s")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SortMenu")
        assert "3  FLOPs" in str(app.screen.query_one("#sort-columns").get_option_at_index(2).prompt)
        await pilot.press("3")
        await wait_for(pilot, lambda: table.sort_key == "flops")
        flops = [r["flops"] for r in table.rows_shown()]
        assert flops == sorted(flops, reverse=True) and table.sort_key == "flops"
        await pilot.press("S")
        flops = [r["flops"] for r in table.rows_shown()]
        assert flops == sorted(flops)
        await pilot.press("o")
        assert [r["id"] for r in table.rows_shown()] == [n["id"] for n in nodes]


async def test_flops_summary_and_op_type_chart(ws, demo_project):
    app = SparsifyApp(project=demo_project["id"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_section(pilot, app, "perf")
        await wait_for(pilot, lambda: app.query("#perf #op-chart"))  # the FLOPS view is built when first shown
        chart = app.query_one("#perf #op-chart")
        await wait_for(pilot, lambda: chart.labels)
        nodes = ws.analysis_of(demo_project["id"])["nodes"]
        conv_flops = sum(n["flops"] for n in nodes if n["op_type"] == "Conv")
        assert chart.labels[0] == "Conv" and chart.values[0] == pytest.approx(conv_flops)
        assert chart.values == sorted(chart.values, reverse=True)
        summary = str(app.query_one("#perf #model-summary").render())
        assert "36.18 M" in summary and "Batch size" in summary
        # values -> % -> log, and the table view has the same numbers
        chart.focus()
        await pilot.press("v")
        shown, label = chart.displayed()
        assert chart.mode == "percent" and sum(shown) == pytest.approx(100.0)
        await pilot.press("t")
        assert chart.show_table
        rows = chart.table.rows_shown()
        assert [r["label"] for r in rows] == chart.labels and rows[0]["value"] == pytest.approx(conv_flops)


async def test_settings_edit_and_bad_value(ws, demo_project):
    app = SparsifyApp(project=demo_project["id"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_section(pilot, app, "perf")
        await pilot.press("6")
        await wait_for(pilot, lambda: app.query_one("#settings #name").value == "demo")
        app.query_one("#settings #name").value = "renamed"
        app.query_one("#settings #description").value = "ocr direction classifier"
        app.query_one("#settings #epochs").value = "30"
        app.query_one("#settings #optimizer").value = "AdamW"
        app.query_one("#settings #init_lr").value = "0.05"
        app.query_one("#settings #name").focus()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: ws.get_project(demo_project["id"])["name"] == "renamed")
        project = ws.get_project(demo_project["id"])
        assert project["description"] == "ocr direction classifier"
        assert project["training"] == {"optimizer": "AdamW", "epochs": 30, "init_lr": 0.05, "final_lr": 0.0001}
        await wait_for(pilot, lambda: "renamed" in app.sub_title)
        # a bad value: said under the form (issue 30: in place, no dialog), nothing saved, the edit kept
        app.query_one("#settings #final_lr").value = "-1"
        await pilot.press("ctrl+s")
        line = app.query_one("#settings #settings-error")
        await wait_for(pilot, lambda: "Not saved" in line.text and "final_lr" in line.text)
        assert ws.get_project(demo_project["id"])["training"]["final_lr"] == 0.0001
        assert app.query_one("#settings #final_lr").value == "-1" and len(app.screen_stack) == 1
        assert app.section == "settings"


async def test_delete_project_from_projects_and_settings(ws, demo_model, tmp_path):
    first = create_project(ws, demo_model, "one", dims=DEMO_DIMS)
    second = create_project(ws, tiny_model(tmp_path / "tiny.onnx"), "two")
    app = SparsifyApp()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one("#projects-table", FilterableTable)
        await wait_for(pilot, lambda: len(table.rows_shown()) == 2)
        assert [r["name"] for r in table.rows_shown()] == ["one", "two"]
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("n")  # answer no: nothing deleted
        assert len(ws.list_projects()) == 2
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await wait_for(pilot, lambda: [p["id"] for p in ws.list_projects()] == [second["id"]])
        await wait_for(pilot, lambda: [r["name"] for r in table.rows_shown()] == ["two"])
        # open the other one and delete it from Settings
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.project_id == second["id"])
        await pilot.press("6")
        await wait_for(pilot, lambda: app.query_one("#settings #name").value == "two")
        await pilot.press("ctrl+d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await wait_for(pilot, lambda: ws.list_projects() == [] and app.project_id is None)
        assert app.section == "projects" and not (Path(ws.root) / "projects" / second["id"]).exists()
        assert first["id"] not in [p["id"] for p in ws.list_projects()]


def _bad_inputs(tmp_path: Path, demo_model: Path) -> dict[str, Path]:
    data = demo_model.read_bytes()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(data[: len(data) // 2])
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n")
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    folder = tmp_path / "folder.onnx"
    folder.mkdir()
    cases = {"truncated": truncated, "text": text, "empty": empty, "missing": tmp_path / "nope.onnx",
             "directory": folder}
    # an op from an unknown domain
    graph = helper.make_graph([helper.make_node("Mystery", ["x"], ["y"], domain="com.example.unknown")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example.unknown", 1)])
    model.ir_version = 8
    cases["unknown_domain"] = tmp_path / "unknown_domain.onnx"
    onnx.save(model, cases["unknown_domain"])
    # external data file missing
    ext = tmp_path / "ext"
    ext.mkdir()
    big = onnx.load(tiny_model(ext / "tiny_src.onnx"))
    onnx.save(big, ext / "external.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="external.onnx.data", size_threshold=0)
    (ext / "external.onnx.data").unlink()
    cases["missing_external_data"] = ext / "external.onnx"
    # inputs without a shape
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    cases["no_input_shape"] = tmp_path / "no_shape.onnx"
    onnx.save(model, cases["no_input_shape"])
    return cases


@pytest.mark.parametrize("case", ["truncated", "text", "empty", "missing", "directory", "unknown_domain",
                                  "missing_external_data", "no_input_shape"])
async def test_bad_model_shows_error_dialog_and_creates_nothing(ws, demo_model, tmp_path, case):
    path = _bad_inputs(tmp_path, demo_model)[case]
    app = SparsifyApp()
    async with app.run_test(size=SIZE) as pilot:
        await fill_new_project(pilot, app, str(path))
        dialog = app.screen
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorDialog))
        message = str(app.screen.query_one("#error-message").render())
        assert message and "Traceback" not in message and "\n" not in message.strip()
        assert ws.list_projects() == []
        assert not (Path(ws.root) / "projects").exists() or not [
            p for p in (Path(ws.root) / "projects").iterdir()]
        await pilot.press("escape")  # back to the dialog, the app is still up
        assert app.screen is dialog and app.is_running
        await pilot.press("escape")
        assert app.query_one("#projects-table", FilterableTable).rows_shown() == []


async def test_missing_dims_and_bad_numbers_show_errors(ws, demo_model):
    app = SparsifyApp()
    async with app.run_test(size=SIZE) as pilot:
        await fill_new_project(pilot, app, str(demo_model))
        dialog = app.screen
        await wait_for(pilot, lambda: len(dialog.dims) == 2)
        await pilot.press("ctrl+r")  # dims left empty
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorDialog))
        assert "x:2" in str(app.screen.query_one("#error-message").render())
        await pilot.press("escape")
        dialog.query_one("#batch_size").value = "0"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorDialog))
        assert "batch size" in str(app.screen.query_one("#error-message").render())
        assert ws.list_projects() == []


async def test_run_submits_enabled_profile_jobs_with_live_progress(ws, tmp_path, monkeypatch):
    """RUN submits one job per enabled toggle with {name, batch_size, core_count}; progress is shown.
    The perf toggle is mapped to the built-in `sleep` job type so the test does not measure anything."""
    from sparsify_tui import jobs
    from sparsify_tui.jobs import baseline
    from sparsify_tui.tui.widgets.jobs import JobProgress

    monkeypatch.setattr(baseline, "BASELINE", (("perf", "sleep", "Performance profile"),))
    model = tiny_model(tmp_path / "tiny.onnx", batch="N")  # batch 2 needs a batch dim
    app = SparsifyApp()
    async with app.run_test(size=SIZE) as pilot:
        await fill_new_project(pilot, app, str(model), perf=True)
        dialog = app.screen
        dialog.query_one("#perf_name").value = "fast"
        dialog.query_one("#batch_size").value = "2"
        dialog.query_one("#core_count").value = "1"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not dialog.query_one("#complete").disabled)
        [project] = ws.list_projects()
        [job] = jobs.list_jobs(ws, project["id"])
        try:
            assert job["type"] == "sleep" and job["args"] == {"name": "fast", "batch_size": 2, "core_count": 1}
            assert len(dialog.query(JobProgress)) == 1
            await pilot.click("#complete")
            await wait_for(pilot, lambda: app.project_id == project["id"])
        finally:
            jobs.cancel(ws, job["id"])


async def test_help_lists_every_key_and_palette_switches_section(ws, demo_project):
    app = SparsifyApp(project=demo_project["id"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_section(pilot, app, "perf")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        rows = app.screen.query_one(FilterableTable).rows_shown()
        ids = {r["id"] for r in rows}
        for needed in ["section.projects", "section.settings", "app.help", "app.quit", "projects.new",
                       "projects.delete", "table.filter", "chart.cycle_mode", "settings.save", "perf.tab_layers"]:
            assert needed in ids
        assert all(r["description"] for r in rows)
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ != "HelpScreen")
        await pilot.press("ctrl+p")
        await pilot.press(*"Go to Settings")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.section == "settings")


async def test_project_sections_need_an_open_project(ws):
    app = SparsifyApp()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await pilot.pause()
        assert app.section == "projects" and app.project_id is None


async def test_open_model_path_offers_the_baseline_profiles_then_reuses_the_project(ws, tmp_path):
    """`sparsify-tui tiny.onnx` on a new model opens the New Project dialog filled in, offering the baseline
    profiles as `n` does; the second time it opens the project made the first time."""
    from textual.widgets import Switch

    model = tiny_model(tmp_path / "tiny.onnx")
    app = SparsifyApp(model=str(model))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, NewProjectDialog) and app.screen.query("#model_path"))
        dialog = app.screen
        assert dialog.query_one("#model_path").value == str(model)
        assert dialog.query_one("#perf_enabled", Switch).value and dialog.query_one("#loss_enabled", Switch).value
        assert ws.list_projects() == []  # nothing is created before RUN
        dialog.query_one("#perf_enabled", Switch).value = False  # keep the test quick: no background jobs
        dialog.query_one("#loss_enabled", Switch).value = False
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: dialog.project is not None)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.project_id is not None)
        await wait_section(pilot, app, "perf")
    app = SparsifyApp(model=str(model))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.project_id is not None)
        await wait_section(pilot, app, "perf")
        assert [p["id"] for p in ws.list_projects()] == [app.project_id]


async def test_open_model_with_symbolic_dims_opens_dialog(ws, demo_model):
    app = SparsifyApp(model=str(demo_model))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, NewProjectDialog) and app.screen.query("#model_path"))
        dialog = app.screen
        assert dialog.query_one("#model_path").value == str(demo_model)
        await wait_for(pilot, lambda: len(dialog.dims) == 2)
        assert ws.list_projects() == []


async def test_quit_key(ws):
    app = SparsifyApp()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_keymap_file_remaps_a_binding(ws):
    """Users remap keys by binding id in <workspace>/keymap.json."""
    Path(ws.root).mkdir(parents=True, exist_ok=True)
    (Path(ws.root) / "keymap.json").write_text('{"section.settings": "f6", "app.help": "f1"}')
    project = create_project(ws, tiny_model(Path(ws.root) / "tiny.onnx"), "tiny")
    app = SparsifyApp(project=project["id"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_section(pilot, app, "perf")
        await pilot.press("f6")
        await wait_for(pilot, lambda: app.section == "settings")
        await pilot.press("escape", "f1")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        keys = {r["id"]: r["key"] for r in app.screen.query_one(FilterableTable).rows_shown()}
        assert keys["section.settings"].lower() == "f6"


async def test_path_completion_and_browser_filter(tmp_path):
    from types import SimpleNamespace

    from sparsify_tui.tui.widgets.paths import SAMPLE_DATA, FileTree, PathSuggester

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "resnet50.onnx").write_bytes(b"x")
    (tmp_path / "models" / "readme.txt").write_text("x")
    (tmp_path / ".hidden").mkdir()
    suggester = PathSuggester()
    assert await suggester.get_suggestion(str(tmp_path / "mo")) == str(tmp_path / "models") + "/"
    assert await suggester.get_suggestion(str(tmp_path / "models" / "r")) == str(tmp_path / "models" / "resnet50.onnx")
    assert await suggester.get_suggestion(str(tmp_path / "nothing")) is None
    shown = FileTree.filter_paths(SimpleNamespace(suffixes=(".onnx",)),
                                  list(tmp_path.iterdir()) + list((tmp_path / "models").iterdir()))
    assert sorted(p.name for p in shown) == ["models", "resnet50.onnx"]
    # a sample-data field completes and lists .npz / .npy files, not models (issue 30)
    (tmp_path / "models" / "rotated.npz").write_bytes(b"x")
    data = PathSuggester(SAMPLE_DATA)
    assert await data.get_suggestion(str(tmp_path / "models" / "r")) == str(tmp_path / "models" / "rotated.npz")
    shown = FileTree.filter_paths(SimpleNamespace(suffixes=SAMPLE_DATA), list((tmp_path / "models").iterdir()))
    assert [p.name for p in shown] == ["rotated.npz"]


async def test_open_bad_model_path_shows_error_and_stays_up(ws, demo_model, tmp_path):
    """`sparsify-tui truncated.onnx`: the error dialog, the app stays up on Projects, nothing created."""
    app = SparsifyApp(model=str(_bad_inputs(tmp_path, demo_model)["truncated"]))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorDialog))
        await pilot.press("escape")
        assert app.is_running and app.section == "projects" and ws.list_projects() == []
