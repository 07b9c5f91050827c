"""Optimizations side by side: `=` in the Optimization section.

:class:`OptimizationCompareScreen` lists the project's optimizations with checkboxes (the highlighted one and the
one it was copied from are checked first) and shows :func:`sparsify_tui.services.comparisons.compare_optimizations`
for the checked ones (the same call as ``sparsify-tui compare PROJECT --optimizations A,B``):

* **Settings**: settings and estimates, one column per optimization, ``*`` where they differ;
* **Layers**: per-layer sparsity (``*`` marks an override) and a structure's own row fields (kept channels...), the
  layers that differ first;
* **Measured**: the applied model's output difference and size, and the benchmark runs of each.

Keys: `space`/`enter` in the list checks an optimization, `p` goes back to the list, `m` Settings & estimates,
`l` Layers, `<`/`>` any tab (Measured too), `escape` back (the keys of the sections: `m` main view, `l` table).
"""

from __future__ import annotations

from typing import Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import SelectionList, Static, TabPane

from sparsify_tui.tui import messages
from sparsify_tui.tui.optimization.messages import OptimizationsCompared, OptimizationsListed
from sparsify_tui.tui.widgets import keys
from sparsify_tui.tui.widgets.footer import KeysFooter
from sparsify_tui.tui.widgets.labels import elide_middle
from sparsify_tui.tui.widgets.tables import Column, FilterableTable
from sparsify_tui.tui.widgets.tabs import ViewTabs
from sparsify_tui.tui.widgets.toggles import TextSelectionList
from sparsify_tui.tui.workers import app_work, post_result



def value_text(v, unit: str = "") -> str:
    """A compared value as text, in its unit (:func:`sparsify_tui.formatting.format_value`: ``2.50×``, ``95.00%``,
    ``1.250 ms``), yes/no, ``-`` for None."""
    from sparsify_tui.formatting import format_value

    return format_value(v, unit)


def settings_rows(cmp) -> list[dict]:
    """Rows of the Settings & estimates table: one per setting and estimate, values in ``v0``, ``v1``…"""
    rows = []
    for kind, items in (("setting", cmp.settings), ("est.", cmp.estimates)):
        for r in items:
            row = {"_key": f"{kind}:{r.key}", "diff": "*" if r.differs else "", "kind": kind, "label": r.label}
            row.update({f"v{i}": value_text(v, r.unit) for i, v in enumerate(r.values)})
            rows.append(row)
    return rows


def layer_rows(cmp) -> list[dict]:
    """Rows of the Layers table (layers that differ first, then graph order): sparsity per optimization."""
    rows = []
    for i, r in enumerate(sorted(cmp.layers, key=lambda r: not r.differs)):
        row = {"_key": r.weight_name, "diff": "*" if r.differs else "", "weight_name": r.weight_name,
               "op_type": r.op_type or ""}
        row.update({f"v{k}": "-" if s is None else f"{s:.3f}" + (" *" if o else "")
                    for k, (s, o) in enumerate(zip(r.sparsity, r.overridden))})
        # a structure's own row fields (kept channels...), one value per optimization
        row["extra"] = "  ".join(f"{k}: {' / '.join(value_text(v) for v in vals)}" for k, vals in r.extra.items())
        rows.append(row)
    return rows


def measured_text(cmp) -> str:
    """The Measured tab: per optimization, the applied model's output difference and size, and benchmark runs
    (:func:`sparsify_tui.text.comparison.measured_facts`, as ``compare --optimizations`` prints them)."""
    from rich.markup import escape

    from sparsify_tui.text import markup_lines
    from sparsify_tui.text.comparison import measured_facts

    lines = []
    for name, m in zip(cmp.names, cmp.measured):
        lines += [f"[b]{escape(name)}[/b]"] + ["  " + line for line in markup_lines(measured_facts(m))]
    lines += [f"[dim]note: {escape(n)}[/dim]" for n in cmp.notes]
    return "\n".join(lines)


def initial_ids(records: list, current: Optional[str]) -> list[str]:
    """The optimizations checked when the screen opens (``records``: typed, list order): the current one and the
    one it was copied from (else the one before it in the list)."""
    ids = [r.id for r in records]
    if current not in ids:
        return ids[-2:]
    rec = next(r for r in records if r.id == current)
    other = rec.copied_from
    if other not in ids or other == current:
        i = ids.index(current)
        other = ids[i - 1] if i > 0 else (ids[1] if len(ids) > 1 else None)
    return [current] + ([other] if other else [])


class OptimizationCompareScreen(ModalScreen[None]):
    """Two or more optimizations side by side (module docstring)."""

    DEFAULT_CSS = """
    OptimizationCompareScreen { background: $background; }
    OptimizationCompareScreen > Vertical { width: 100%; height: 100%; }
    OptimizationCompareScreen #ocmp-title { height: 1; padding: 0 1; text-style: bold; background: $panel; }
    OptimizationCompareScreen #ocmp-left { width: 24; border-right: solid $primary-darken-2; }
    OptimizationCompareScreen #ocmp-list { height: 1fr; }
    OptimizationCompareScreen .hint { color: $text-muted; height: auto; padding: 0 1; }
    OptimizationCompareScreen ViewTabs { height: 1fr; width: 1fr; }
    OptimizationCompareScreen TabPane { padding: 0; }
    OptimizationCompareScreen FilterableTable { height: 1fr; }
    OptimizationCompareScreen #ocmp-measured { padding: 0 1; height: auto; }
    """

    BINDINGS = [
        Binding("escape", "close", "Close", id="optcompare.close", tooltip="Back to the Optimization section"),
        *keys.tabs("optcompare"),
        Binding("m", "tab('settings')", "Settings", show=False, id="optcompare.tab_settings",
                tooltip="Settings and estimates side by side"),
        Binding("l", "tab('layers')", "Layers", show=False, id="optcompare.tab_layers",
                tooltip="Per-layer sparsity side by side"),
        Binding("p", "focus_list", "Pick", id="optcompare.list", tooltip="Choose the optimizations to compare"),
        Binding("question_mark", "app.help", "Help", id="optcompare.help", tooltip="List every key"),
    ]

    def __init__(self, project_id: str, current: Optional[str] = None) -> None:
        super().__init__()
        self.project_id = project_id
        self.current = current
        self.records: list = []  # typed Optimization records
        self.comparison = None
        self._columns: tuple = ()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Compare optimizations  [dim](escape: back)[/dim]", id="ocmp-title")
            with Horizontal():
                with Vertical(id="ocmp-left", classes="list-pane"):
                    yield TextSelectionList[str](id="ocmp-list")
                    yield Static("space: check", classes="hint")
                with ViewTabs(initial="settings"):
                    with TabPane("Settings (m)", id="settings"):
                        yield Static("Loading…", id="ocmp-status", classes="hint")
                        yield Vertical(id="ocmp-settings-box")
                    with TabPane("Layers (l)", id="layers"):
                        yield Vertical(id="ocmp-layers-box")
                    with TabPane("Measured (>)", id="measured"):
                        with VerticalScroll():
                            yield Static("", id="ocmp-measured")
            yield KeysFooter()

    def on_mount(self) -> None:
        self._list()

    @app_work(group="opt-compare-list", description="list optimizations")
    def _list(self) -> None:
        from sparsify_tui.services.optimizations import list_optimizations

        post_result(self, OptimizationsListed(list_optimizations(self.app.workspace, self.project_id)))

    @on(OptimizationsListed)
    def _listed(self, message: OptimizationsListed) -> None:
        self.records = sorted(message.records, key=lambda r: str(r.created or ""))
        checked = initial_ids(self.records, self.current)
        sl = self.query_one("#ocmp-list", SelectionList)
        sl.clear_options()
        # "[x] " and the border take 6 of the 24 columns: a longer name is elided in the middle, never wrapped
        sl.add_options([(elide_middle(r.name or r.id, 18), r.id, r.id in checked) for r in self.records])
        sl.focus()
        self._compare_checked()

    @on(SelectionList.SelectedChanged, "#ocmp-list")
    def _checked_changed(self) -> None:
        self._compare_checked()

    def checked(self) -> list[str]:
        """The checked optimization ids, in list order."""
        selected = set(self.query_one("#ocmp-list", SelectionList).selected)
        return [r.id for r in self.records if r.id in selected]

    def _compare_checked(self) -> None:
        ids = self.checked()
        if len(ids) < 2:
            self.query_one("#ocmp-status", Static).update("Check two or more optimizations (space).")
            return
        self.query_one("#ocmp-status", Static).update("Comparing…")
        self._compare(tuple(ids))

    @app_work(group="opt-compare", description="compare optimizations")
    def _compare(self, ids: tuple) -> None:
        from sparsify_tui.services.comparisons import compare_optimizations

        post_result(self, OptimizationsCompared(compare_optimizations(self.app.workspace, self.project_id, ids), ids))

    @on(OptimizationsCompared)
    async def _compared(self, message: OptimizationsCompared) -> None:
        if message.ids != tuple(self.checked()):
            return
        await self.show_comparison(message.comparison)

    @on(messages.WorkFailed)
    def _failed(self) -> None:
        self.query_one("#ocmp-status", Static).update("Could not compare these optimizations.")

    async def show_comparison(self, cmp) -> None:
        """Show comparison ``cmp``; its tables are made again when its columns (the names compared) changed: the
        old table is removed before the new one, with the same id, is mounted."""
        self.comparison = cmp
        names = tuple(cmp.names)
        if (names, any(r.extra for r in cmp.layers)) != self._columns:
            self._columns = (names, any(r.extra for r in cmp.layers))
            value_cols = [Column(f"v{i}", n, numeric=True) for i, n in enumerate(names)]
            for box, table_id, cols in (
                ("#ocmp-settings-box", "ocmp-settings",
                 [Column("diff", "≠"), Column("kind", "Kind", filter=True), Column("label", "Setting", filter=True)]),
                ("#ocmp-layers-box", "ocmp-layers",
                 [Column("diff", "≠"), Column("weight_name", "Weight", filter=True),
                  Column("op_type", "Op", filter=True)]),
            ):
                extra = [Column("extra", "Other", filter=True)] if table_id == "ocmp-layers" and any(
                    r.extra for r in cmp.layers) else []
                container = self.query_one(box)
                await container.remove_children()
                await container.mount(FilterableTable(cols + value_cols + extra, id=table_id))
        self.call_after_refresh(self._fill, cmp)

    def _fill(self, cmp) -> None:
        n_diff = sum(r.differs for r in cmp.settings + cmp.estimates)
        n_layers = sum(r.differs for r in cmp.layers)
        self.query_one("#ocmp-status", Static).update(
            f"{' vs '.join(cmp.names)} · {n_diff} settings/estimates and {n_layers} layers differ (*)")
        self.query_one("#ocmp-settings", FilterableTable).set_rows(settings_rows(cmp))
        self.query_one("#ocmp-layers", FilterableTable).set_rows(layer_rows(cmp))
        self.query_one("#ocmp-measured", Static).update(measured_text(cmp))

    def action_close(self) -> None:
        self.dismiss(None)

    def action_tab(self, tab: str) -> None:
        self.query_one(ViewTabs).active = tab

    def action_cycle_tab(self, step: int) -> None:
        self.action_tab(keys.cycle(["settings", "layers", "measured"], self.query_one(ViewTabs).active, step))

    def action_focus_list(self) -> None:
        self.app.remove_class("-list-collapsed")  # `p` shows the list again if `z` hid it
        self.query_one("#ocmp-list", SelectionList).focus()
