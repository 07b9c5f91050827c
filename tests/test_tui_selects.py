"""Issue 30 bug 3: the focus bar of a list covered its first column, so a compact select's options lost their first
letter ("uto", "op1", "mse" for auto, top1, nmse) and so did a file tree's names. Every select of every dialog and
section, opened: each option shows its whole label; and an SVG snapshot of each one open."""

from __future__ import annotations

import pytest
from conftest import steady, wait_for, wait_project_open

from sparsify_tui.services import optimizations
from sparsify_tui.services.projects import create_project
from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp

DEMO = "sparsify_tui/demo/ppocr_cls.onnx"
DIMS = {"x:2": 48, "x:3": 192}

#: (name, section key, the keys that open the dialog (or None: the section itself), the select's id)
SELECTS = [
    ("budget_int8", "4", ["B"], "bsd-int8"),
    ("budget_runtime", "4", ["B"], "bsd-runtime"),
    ("int8_calibration", "4", ["I"], "i8d-calibration"),
    ("int8_runtime", "4", ["I"], "i8d-runtime"),
    ("perf_runtime", "2", ["n"], "runtime"),
    ("loss_runtime", "3", ["n"], "runtime"),
    ("benchmark_runtime", "5", ["n"], "runtime"),
    ("create_perf", "4", ["n"], "create-perf"),
    ("create_structure", "4", ["n"], "create-structure"),
    ("export_framework", "4", ["e"], "export-framework"),
    ("loss_method", "3", ["n"], "method"),
    ("loss_metric", "3", ["n"], "metric"),
    ("report_format", "2", ["w"], "report-format"),
    ("settings_optimizer", "6", [], "optimizer"),
]


@pytest.fixture
def project(workspace_home, monkeypatch):
    from pathlib import Path

    from sparsify_tui import settings as job_settings

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(job_settings, "available_cores", lambda: 4)
    # the snapshots show the project's created and modified times (Settings): fixed, not this run's clock
    monkeypatch.setattr("sparsify_tui.store.workspace.now_iso", lambda: "2026-01-01T00:00:00+00:00")
    ws = Workspace()
    pid = create_project(ws, DEMO, "demo", dims=DIMS, setup={"core_count": 4})["id"]
    optimizations.create_optimization(ws, pid, "opt", sparsity=0.7)
    return ws, pid


async def open_select(pilot, section_key: str, keys: list, select_id: str):
    """Show the select's section (and dialog), focus the select and open its list; returns the select."""
    from textual.widgets import Select

    app = pilot.app
    await wait_project_open(pilot)
    await pilot.press(section_key)
    await wait_for(pilot, lambda: app.focused is not None and len(app.screen_stack) == 1)
    await pilot.pause(0.5)
    if keys:
        await pilot.press(*keys)
    await wait_for(pilot, lambda: app.screen.query(f"#{select_id}"))
    if app.screen.query("#export-path"):  # the recipe path holds this run's temporary folder and project id
        from textual.widgets import Input

        app.screen.query_one("#export-path", Input).value = "recipes/opt.yaml"
    select = app.screen.query_one(f"#{select_id}", Select)
    select.focus()
    await wait_for(pilot, lambda: select.has_focus)
    await pilot.press("enter")
    await wait_for(pilot, lambda: select.expanded)
    await steady(pilot)
    return select


@pytest.mark.parametrize("name, section_key, keys, select_id", SELECTS, ids=[s[0] for s in SELECTS])
async def test_every_option_of_every_select_shows_its_whole_label(project, name, section_key, keys, select_id):
    from screen_text import text_of
    from textual.widgets._select import SelectOverlay

    ws, pid = project
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=(100, 30)) as pilot:
        select = await open_select(pilot, section_key, keys, select_id)
        overlay = select.query_one(SelectOverlay)
        shown = text_of(app, overlay.region)
        lines = [line.strip(" ▌▐█▲▼") for line in shown.splitlines()]
        labels = [str(overlay.get_option_at_index(i).prompt) for i in range(overlay.option_count)]
        assert labels
        for label in labels:
            assert any(line.startswith(label) for line in lines), (name, label, shown)


@pytest.mark.parametrize("name, section_key, keys, select_id", SELECTS, ids=[s[0] for s in SELECTS])
def test_snapshot_select_open(snap_compare, project, name, section_key, keys, select_id):
    ws, pid = project
    app = SparsifyApp(project=pid, workspace=ws)

    async def run_before(pilot):
        await open_select(pilot, section_key, keys, select_id)

    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)


async def test_the_file_tree_shows_whole_names(project, tmp_path):
    """The model field's file browser (ctrl+b in the New Project dialog): every entry shows its whole name."""
    from screen_text import text_of
    from textual.widgets import DirectoryTree

    ws, pid = project
    for name in ("alpha.onnx", "beta_model.onnx", "zeta"):
        (tmp_path / name).mkdir() if name == "zeta" else (tmp_path / name).write_bytes(b"")
    app = SparsifyApp(workspace=ws)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.focused is not None)
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen.query("#model_path"))
        app.screen.query_one("#model_path").value = str(tmp_path) + "/"
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: app.screen.query(DirectoryTree))
        tree = app.screen.query_one(DirectoryTree)
        tree.focus()
        await wait_for(pilot, lambda: "zeta" in text_of(app, tree.region))
        await steady(pilot)
        shown = text_of(app, tree.region)
        for name in ("alpha.onnx", "beta_model.onnx", "zeta"):
            assert any(name in line for line in shown.splitlines()), shown


async def test_a_data_field_completes_and_browses_like_the_model_field(project, tmp_path):
    """Issue 30: the sample-data fields had no completion and no file browser while the model field had both."""
    from textual.widgets import DirectoryTree

    from sparsify_tui.tui.widgets.paths import FileBrowser, PathInput

    ws, pid = project
    (tmp_path / "lines.npz").write_bytes(b"")
    (tmp_path / "model.onnx").write_bytes(b"")
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4", "B")  # the budget search dialog: its data file is required
        await wait_for(pilot, lambda: app.screen.query("#bsd-data"))
        field = app.screen.query_one("#bsd-data", PathInput)
        field.focus()
        field.value = str(tmp_path) + "/li"
        await wait_for(pilot, lambda: field._suggestion == str(tmp_path / "lines.npz"))
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: isinstance(app.screen, FileBrowser))
        tree = app.screen.query_one(DirectoryTree)
        await wait_for(pilot, lambda: tree.cursor_node is not None and tree.root.children)
        names = [str(n.label) for n in tree.root.children]  # folders and sample data, no model
        assert "lines.npz" in names and "model.onnx" not in names
        tree.move_cursor(tree.root.children[names.index("lines.npz")])
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, FileBrowser))
        assert field.value == str(tmp_path / "lines.npz")
        await wait_for(pilot, lambda: field.has_focus, timeout=5)
