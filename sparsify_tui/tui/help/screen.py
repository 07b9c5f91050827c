"""Help screen: every key binding, generated from the Binding declarations of the app, its sections and
widgets (plus any widget currently mounted), with the binding id used to remap it.

Remap keys with a JSON file `{binding id: "key[,key]"}` at `$SPARSIFY_TUI_KEYMAP` or
`<workspace>/keymap.json`. A line under the title names the documentation pages (README.md and `docs/`).
"""

from __future__ import annotations

from typing import Iterable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from sparsify_tui.tui.widgets.tables import Column, FilterableTable

#: the pages of the repository's ``docs/`` folder, ``docs/<page>.md``, in the README's order (tests/test_docs.py
#: checks this names every page there is)
DOC_PAGES = ("tui", "keys", "analyze", "optimize", "benchmark", "compare", "integrate", "data", "runtimes", "serve",
             "fleet", "jobs", "reliability", "measurement", "cli", "development", "design", "architecture",
             "calibration")
#: the help screen's line naming the documentation
DOCS_LINE = "Docs (README.md, docs/<page>.md): " + " ".join(DOC_PAGES)


def known_classes(app_class: type) -> list[tuple[str, type]]:
    """(where, class) of every binding owner, in the order shown: ``app_class`` (the running app's, whose keys work
    everywhere) first; the sections and views are imported here, not at the top (they import the widgets this
    module does)."""
    from sparsify_tui.tui.benchmarks import BenchmarksSection
    from sparsify_tui.tui.loss import LossSection
    from sparsify_tui.tui.new_project import NewProjectDialog
    from sparsify_tui.tui.optimization import OptimizationSection
    from sparsify_tui.tui.optimization.compare_screen import OptimizationCompareScreen
    from sparsify_tui.tui.perf import FlopsProfileView, PerfProfileView, PerfSection
    from sparsify_tui.tui.perf.compare_screen import PerfCompareScreen
    from sparsify_tui.tui.report import ReportDialog
    from sparsify_tui.tui.widgets.diverging import DivergingBarChart
    from sparsify_tui.tui.projects import ProjectsSection
    from sparsify_tui.tui.settings import SettingsSection
    from sparsify_tui.tui.widgets.charts import BarChart
    from sparsify_tui.tui.jobs import JobsScreen
    from sparsify_tui.tui.widgets.dialogs import ConfirmDialog

    return [
        ("Everywhere", app_class),
        ("Projects", ProjectsSection),
        ("New project", NewProjectDialog),
        ("Performance", PerfSection),
        ("FLOPS profile", FlopsProfileView),
        ("Perf profile", PerfProfileView),
        ("Perf compare", PerfCompareScreen),
        ("Loss", LossSection),
        ("Optimization", OptimizationSection),
        ("Opt. compare", OptimizationCompareScreen),
        ("Benchmarks", BenchmarksSection),
        ("Settings", SettingsSection),
        ("Tables", FilterableTable),
        ("Charts", BarChart),
        ("Δ charts", DivergingBarChart),
        ("Report", ReportDialog),
        ("Jobs view", JobsScreen),
        ("Dialogs", ConfirmDialog),
    ]


def _own_bindings(cls: type) -> list[Binding]:
    """Bindings declared by `cls` and its sparsify-tui base classes (not Textual's built-in ones)."""
    out: list[Binding] = []
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("sparsify_tui"):
            continue
        for b in klass.__dict__.get("BINDINGS", []):
            if isinstance(b, tuple):
                b = Binding(*b)
            out.append(b)
    return out


def focused_first(classes: list[tuple[str, type]], focused) -> list[tuple[str, type]]:
    """``classes`` with the ones the focused widget is in first, the closest first (a table in Optimization:
    Tables, Optimization), then "Everywhere" and the rest in their order (posting's F1: the focused widget's keys
    first)."""
    if focused is None:
        return classes
    chain = [type(node) for node in focused.ancestors_with_self]
    near = sorted((c for c in classes if any(issubclass(k, c[1]) for k in chain) and c[0] != "Everywhere"),
                  key=lambda c: next(i for i, k in enumerate(chain) if issubclass(k, c[1])))
    return near + [c for c in classes if c not in near]


def binding_rows(app, focused=None) -> list[dict]:
    """One row per (key, where): key display, description, where, binding id; the keys of what ``focused`` is in
    first (:func:`focused_first`)."""
    classes = focused_first(known_classes(type(app)), focused)
    seen = {cls for _w, cls in classes}
    for node in _mounted(app):  # other widgets and dialogs with bindings that are on screen now
        cls = type(node)
        if cls not in seen and cls.__module__.startswith("sparsify_tui") and _own_bindings(cls):
            seen.add(cls)
            classes.append((cls.__name__, cls))
    keymap = dict(getattr(app, "_keymap", {}) or {})
    rows: list[dict] = []
    for where, cls in classes:
        for b in _own_bindings(cls):
            keys = keymap.get(b.id, b.key) if b.id else b.key
            display = ", ".join(_key_display(app, k.strip(), b) for k in keys.split(","))
            rows.append({"_key": f"{where}/{b.id or b.key}", "key": display,
                         "description": b.tooltip or b.description or b.action,
                         "where": where, "id": b.id or ""})
    return rows


def _key_display(app, key: str, binding: Binding) -> str:
    if binding.key_display and "," not in binding.key:
        return binding.key_display
    try:
        return app.get_key_display(Binding(key, binding.action))
    except Exception:
        return key


def _mounted(app) -> Iterable:
    for screen in app.screen_stack:
        yield from screen.query("*")


class HelpScreen(ModalScreen[None]):
    """Every key, filterable with `/`; `escape`, `q` or `?` closes."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 100; max-width: 100%; height: 100%; border: thick $primary;
                            background: $surface; padding: 0 1; }
    HelpScreen .dialog-title { text-style: bold; height: auto; }
    HelpScreen #help-docs { height: auto; color: $text-muted; }
    """

    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close", id="help.close", tooltip="Close the help screen"),
    ]

    def __init__(self, focused=None) -> None:
        """``focused``: the widget that had the focus when `?` was pressed: the keys of where it is come first."""
        super().__init__()
        self.focused_before = focused

    def compose(self) -> ComposeResult:
        # "Does" takes the width left by the key and where (a longer text ends in "…"; enter shows it whole)
        does = max(24, min(self.app.size.width, 100) - 4 - 10 - 16 - 4)
        near = focused_first(known_classes(type(self.app)), self.focused_before)[0][0]
        first = f" · {near}'s first" if near != "Everywhere" else ""
        with Vertical():
            yield Static(f"Keys{first}  [dim](escape closes · / filters · enter: the whole row · remap: "
                         "keymap.json {binding id: key})[/dim]", classes="dialog-title")
            yield Static(DOCS_LINE, id="help-docs", markup=False)
            yield FilterableTable([
                Column("key", "Key", filter=True, pin=True),
                Column("where", "Where", filter=True, pin=True),
                Column("description", "Does", filter=True, width=does, clip="end"),
                Column("id", "Binding id", filter=True),
            ], id="help-table")

    def on_mount(self) -> None:
        table = self.query_one(FilterableTable)
        table.set_rows(binding_rows(self.app, self.focused_before))
        table.focus()

    @on(FilterableTable.RowChosen)
    def _row_chosen(self, event: FilterableTable.RowChosen) -> None:
        from sparsify_tui.tui.widgets.dialogs import RecordDialog

        event.stop()
        row = event.row
        self.app.push_screen(RecordDialog(f"Key {row['key']}", [("Key", row["key"]), ("Where", row["where"]),
                                                                 ("Does", row["description"]),
                                                                 ("Binding id", row["id"])]))

    def action_close(self) -> None:
        self.dismiss(None)
