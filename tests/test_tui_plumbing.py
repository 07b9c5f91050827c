"""TUI plumbing through Pilot: workers post typed result messages, one App handler turns a worker failure
into the error dialog (the app stays up), and no workspace call runs on the UI thread."""

from __future__ import annotations

import inspect
import threading

import pytest
from textual.app import App, ComposeResult
from textual.message import Message
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from sparsify_tui.services.projects import create_project
from sparsify_tui.store import Workspace
from sparsify_tui.tui import messages
from sparsify_tui.tui.app import SparsifyApp
from sparsify_tui.tui.loss.messages import LossProfileLoaded
from sparsify_tui.tui.new_project.messages import CreateProgress
from sparsify_tui.tui.optimization.messages import OptimizationsListed
from sparsify_tui.tui.perf.messages import FlopsAnalysisLoaded
from sparsify_tui.tui.projects.messages import ProjectsListed
from sparsify_tui.tui.settings.messages import ProjectSettingsLoaded
from sparsify_tui.tui.widgets.dialogs import ErrorDialog
from sparsify_tui.tui.widgets.jobs import JobProgress
from sparsify_tui.tui.widgets.records import RecordListSection
from sparsify_tui.tui.workers import app_work, post_result
from conftest import wait_for

SIZE = (80, 24)
DEMO_DIMS = {"x:2": 48, "x:3": 192}


def focused_in(app, section: str) -> bool:
    widget = app.query_one(f"#sections > #{section}")
    return app.section == section and app.focused is not None and widget in app.focused.ancestors_with_self


class Recorder:
    """A message_hook that keeps every message (in the order they were dispatched)."""

    def __init__(self) -> None:
        self.seen: list[Message] = []

    def __call__(self, message: Message) -> None:
        self.seen.append(message)

    def of(self, cls: type) -> list:
        return [m for m in self.seen if isinstance(m, cls)]

    def listed(self, table: str) -> list:
        """The lists of stored records of ``table`` that a section's worker posted."""
        return [m for m in self.of(RecordListSection.Listed) if m.table == table]


@pytest.fixture
def ws(workspace_home) -> Workspace:
    return Workspace()


@pytest.fixture
def project(ws, demo_model) -> dict:
    return create_project(ws, demo_model, "demo", dims=DEMO_DIMS)


async def test_each_section_posts_its_typed_results(ws, project):
    """Walking 1-6, every section's data arrives as its typed message, carrying what the store holds."""
    hook = Recorder()
    app = SparsifyApp()
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await wait_for(pilot, lambda: hook.of(ProjectsListed))
        assert [p["id"] for p in hook.of(ProjectsListed)[-1].projects] == [project["id"]]
        await pilot.press("enter")  # open the selected project
        await wait_for(pilot, lambda: focused_in(app, "perf") and hook.of(FlopsAnalysisLoaded))
        opened = hook.of(messages.OpenProject)[-1]
        assert opened.project_id == project["id"] and opened.name == "demo"
        assert "project: demo" in app.sub_title
        loaded = hook.of(FlopsAnalysisLoaded)[-1]
        assert len(loaded.analysis["nodes"]) == len(ws.analysis_of(project["id"])["nodes"])
        assert loaded.project["id"] == project["id"]
        await wait_for(pilot, lambda: hook.listed('perf_profiles'))
        assert hook.listed('perf_profiles')[-1].records == []

        await pilot.press("3")
        await wait_for(pilot, lambda: hook.listed('loss_profiles') and hook.of(LossProfileLoaded))
        assert hook.of(LossProfileLoaded)[-1].ref == "approximated"
        assert hook.of(LossProfileLoaded)[-1].profile.method == "approximated"
        await pilot.press("4")
        await wait_for(pilot, lambda: hook.of(OptimizationsListed))
        assert hook.of(OptimizationsListed)[-1].records == []
        await pilot.press("5")
        await wait_for(pilot, lambda: hook.listed('benchmarks'))
        assert hook.listed('benchmarks')[-1].records == []
        await pilot.press("6")
        await wait_for(pilot, lambda: hook.of(ProjectSettingsLoaded))
        settings = hook.of(ProjectSettingsLoaded)[-1]
        assert settings.project["name"] == "demo" and not settings.saved and settings.size_bytes > 0
        # nothing failed on the way
        assert not [m for m in hook.of(Worker.StateChanged) if m.state == WorkerState.ERROR]
        assert not hook.of(messages.WorkFailed)


class FailingWorkspace(Workspace):
    """A workspace whose perf profile list cannot be read (every other call works)."""

    def list_records(self, project_id, table):
        if table == "perf_profiles":
            raise RuntimeError("perf table is unreadable")
        return super().list_records(project_id, table)


async def test_a_worker_failure_shows_one_error_dialog_and_the_app_stays_up(workspace_home, project, monkeypatch):
    monkeypatch.setattr(SparsifyApp, "WATCH_SECONDS", 0.2)  # still one failing list read, not one per look
    hook = Recorder()
    app = SparsifyApp(project=project["id"], workspace=FailingWorkspace())
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorDialog) and app.screen.query("#error-message"))
        assert "perf table is unreadable" in str(app.screen.query_one("#error-message").render())
        # the one App handler saw the failed worker and told the section that started it
        failed = [m for m in hook.of(Worker.StateChanged) if m.state == WorkerState.ERROR]
        assert [m.worker.group for m in failed] == ["record-list"]
        assert failed[0].worker.origin is app.query_one("#perf")
        await wait_for(pilot, lambda: hook.of(messages.WorkFailed))
        assert [m.group for m in hook.of(messages.WorkFailed)] == ["record-list"]
        assert sum(isinstance(s, ErrorDialog) for s in app.screen_stack) == 1
        # the rest of the app works: close the dialog, the FLOPS view is there, go to Settings
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ErrorDialog))
        await wait_for(pilot, lambda: app.query_one("#perf #op-chart").labels)  # shown although the list failed
        assert app.is_running
        await pilot.press("6")
        await wait_for(pilot, lambda: app.query_one("#settings #name").value == "demo")
        assert app.is_running and not isinstance(app.screen, ErrorDialog)


class BrokenAnalysisWorkspace(Workspace):
    def analysis_of(self, project_id):
        raise RuntimeError("analysis.json is truncated")


async def test_a_failed_load_says_so_in_place(workspace_home, project):
    """WorkFailed lets the view that started the worker replace its 'Loading…' text."""
    app = SparsifyApp(project=project["id"], workspace=BrokenAnalysisWorkspace())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorDialog))
        summary = app.query_one("#perf #model-summary")
        await wait_for(pilot, lambda: "Could not read the model analysis" in str(summary.render()))
        await pilot.press("escape")
        assert app.is_running


class ThreadCheckingWorkspace(Workspace):
    """Records every public Workspace call made on the UI (main) thread."""

    ui_thread_calls: list[str] = []


def _checked(name, fn):
    def method(self, *args, **kwargs):
        if threading.current_thread() is threading.main_thread():
            self.ui_thread_calls.append(name)
        return fn(self, *args, **kwargs)
    return method


for _name, _fn in inspect.getmembers(Workspace, inspect.isfunction):
    # static methods (record_blob_key) take no self: wrapping them would break every blob read
    if not _name.startswith("_") and not isinstance(inspect.getattr_static(Workspace, _name), staticmethod):
        setattr(ThreadCheckingWorkspace, _name, _checked(_name, _fn))


async def test_no_workspace_call_runs_on_the_ui_thread(workspace_home, demo_model):
    from sparsify_tui.services import optimizations as core

    ws = ThreadCheckingWorkspace()
    pid = create_project(ws, demo_model, "demo", dims=DEMO_DIMS)["id"]
    core.create_optimization(ws, pid, "opt", sparsity=0.7)
    ws.ui_thread_calls.clear()  # the set-up above ran on this thread on purpose
    check = Workspace(ws.root)  # the test's own reads (on this thread) are not the app's

    app = SparsifyApp(workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.query_one("#projects-table").rows_shown())
        await pilot.press("enter")
        await wait_for(pilot, lambda: focused_in(app, "perf") and app.query_one("#perf #op-chart").labels)
        await pilot.press("n")  # perf add dialog (reads the project's setup)
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PerfProfileDialog")
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "Screen")
        await pilot.press("j")  # the Jobs view (lists every job and project)
        await wait_for(pilot, lambda: type(app.screen).__name__ == "JobsScreen"
                       and "in all" in str(app.screen.query_one("#jobs-title").render()))
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "Screen")
        await pilot.press("3")
        await wait_for(pilot, lambda: app.query_one("LossSection").query_one("LossProfileView").profile)
        await pilot.press("4")
        await wait_for(pilot, lambda: app.query_one("OptimizationSection").rec is not None)
        await pilot.press("e")  # export dialog: default path, then the preview
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ExportDialog"
                       and "GMPruning" in app.screen.query_one("#export-yaml").text)
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "Screen")
        app.query_one("#opt-list").focus()
        await pilot.press("n")  # create dialog (lists the profiles)
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CreateOptimizationDialog")
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "Screen")
        await pilot.press("5")
        await wait_for(pilot, lambda: focused_in(app, "benchmarks"))
        await pilot.press("n")  # benchmark dialog (project setup, optimizations)
        await wait_for(pilot, lambda: type(app.screen).__name__ == "BenchmarkDialog")
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "Screen")
        await pilot.press("a")  # apply dialog (optimized paths, applied state)
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ApplyDialog")
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "Screen")
        await pilot.press("6")
        await wait_for(pilot, lambda: app.query_one("#settings #name").value == "demo")
        app.query_one("#settings #description").value = "checked"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: check.get_project(pid)["description"] == "checked")
        await wait_for(pilot, lambda: "demo" in app.sub_title)
        assert ws.ui_thread_calls == []


class Done(Message):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n


class Loader(Widget):
    def __init__(self) -> None:
        super().__init__()
        self.got: list[int] = []
        self.returned: list[int] = []

    @app_work(group="load", description="a slow read")
    def load(self, n: int, started: threading.Event, gate: threading.Event) -> None:
        started.set()
        gate.wait(10)
        post_result(self, Done(n))
        self.returned.append(n)

    def on_done(self, message: Done) -> None:
        self.got.append(message.n)


class LoaderApp(App):
    def compose(self) -> ComposeResult:
        yield Loader()


async def test_a_newer_worker_of_the_same_group_supersedes_an_older_one():
    """app_work(exclusive) as textual.work: the older read, finishing last, posts nothing."""
    app = LoaderApp()
    async with app.run_test() as pilot:
        loader = app.query_one(Loader)
        gates = [threading.Event() for _ in range(4)]
        w1 = loader.load(1, gates[0], gates[1])
        assert w1.node is app and w1.origin is loader  # owned by the App, reporting to the widget
        await wait_for(pilot, gates[0].is_set)  # the first read is under way in its thread
        w2 = loader.load(2, gates[2], gates[3])
        assert w1.is_cancelled and not w2.is_cancelled
        gates[3].set()
        await wait_for(pilot, lambda: loader.got == [2])
        gates[1].set()
        await wait_for(pilot, lambda: 1 in loader.returned)
        await pilot.pause(0.2)
        assert loader.got == [2]


def test_progress_messages_coalesce():
    assert JobProgress.Updated("a", {"status": "running"}).can_replace(JobProgress.Updated("a", {}))
    assert not JobProgress.Updated("a", {}).can_replace(JobProgress.Updated("b", {}))
    assert CreateProgress("copy", 0.2).can_replace(CreateProgress("analyze", 0.5))
    assert not CreateProgress("copy", 0.2).can_replace(Done(1))
