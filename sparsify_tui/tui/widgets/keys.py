"""The keys every section shares: one action, one key, everywhere.

| key | action | where |
|---|---|---|
| ``n`` | new (project, profile, optimization, benchmark) | every list |
| ``r`` | rerun the selected item (asks first) | Perf, Loss, Benchmarks |
| ``d`` / ``delete`` | delete the selected item (asks first) | every list |
| ``p`` | move to the section's list | Perf, Loss, Optimization, Benchmarks |
| ``c`` | cancel the section's running job (asks first; shown only while one runs) | Perf, Loss, Benchmarks |
| ``<`` / ``>`` | previous / next tab of the view | every tabbed view |
| ``m`` / ``l`` / ``g`` | the view's main tab / its per-row table / its chart | Perf, Loss (``m``/``l`` also Optimization, Benchmarks) |
| ``i`` | inspect the selected row: its full record | every per-layer table |
| ``[`` / ``]`` | lower / raise the sparsity level shown | Perf, Loss |
| ``y`` | what the view shows (baseline / pruned est. / INT8; pruning / INT8 sensitivity) | Perf, Loss |
| ``space`` | mark the highlighted item for comparing (A, then B) | Perf |
| ``=`` | compare: the marked profiles (Perf), optimizations side by side (Optimization) | Perf, Optimization |
| ``+`` / ``-`` | more / fewer (top layers shown; a layer's sparsity in Optimization) | Perf, Optimization |

Each section builds its bindings here with its own id prefix (``perf.new``, ``loss.new``...), so a user can
still remap one section's key in ``keymap.json``. The footer shows ``n``, ``r``, ``d``, ``c`` (while a job
runs) and the tab pair, plus the app's ``j`` / ``?`` / ``q`` / ``ctrl+p`` and a focused table's ``/``: every
footer fits 80 columns (tests/test_tui_keys.py checks each section). The other keys are in ``?`` and in the
hint line of the view they act on (chart titles, table status lines).
"""

from __future__ import annotations

from textual.binding import Binding

TAB_GROUP = Binding.Group("Tab", compact=True)


def new(prefix: str, what: str) -> Binding:
    return Binding("n", "new", "New", id=f"{prefix}.new", tooltip=f"New {what}")


def rerun(prefix: str, what: str) -> Binding:
    return Binding("r", "rerun", "Rerun", id=f"{prefix}.rerun",
                   tooltip=f"Measure the selected {what} again with its settings (asks first)")


def delete(prefix: str, what: str) -> Binding:
    return Binding("d,delete", "delete", "Del", id=f"{prefix}.delete",
                   tooltip=f"Delete the selected {what} (asks first)")


def focus_list(prefix: str, what: str) -> Binding:
    return Binding("p", "focus_list", "List", show=False, id=f"{prefix}.list", tooltip=f"Move to the list of {what}")


def cancel_job(prefix: str) -> Binding:
    return Binding("c", "cancel_job", "Cancel", id=f"{prefix}.cancel_job",
                   tooltip="Cancel this section's running job (asks first; with several, opens the Jobs view)")


def tabs(prefix: str) -> list[Binding]:
    return [
        Binding("less_than_sign", "cycle_tab(-1)", "Previous tab", id=f"{prefix}.tab_previous",
                tooltip="Show the previous tab of the view", group=TAB_GROUP, key_display="<"),
        Binding("greater_than_sign", "cycle_tab(1)", "Next tab", id=f"{prefix}.tab_next",
                tooltip="Show the next tab of the view", group=TAB_GROUP, key_display=">"),
    ]


def tab(prefix: str, key: str, tab_id: str, label: str, tooltip: str) -> Binding:
    return Binding(key, f"view_tab('{tab_id}')", label, show=False, id=f"{prefix}.tab_{tab_id}", tooltip=tooltip)


def inspect(prefix: str) -> Binding:
    return Binding("i", "inspect", "Inspect", show=False, id=f"{prefix}.inspect",
                   tooltip="Show the selected row's full record (id, op, weight, shapes, every number)")


def mark(prefix: str, what: str) -> Binding:
    return Binding("space", "toggle_mark", "Mark", show=False, id=f"{prefix}.mark",
                   tooltip=f"Mark the highlighted {what} for comparing (A, then B; again: unmark)")


def compare(prefix: str, tooltip: str) -> Binding:
    return Binding("equals_sign", "compare", "Compare", show=False, id=f"{prefix}.compare", key_display="=",
                   tooltip=tooltip)


def levels(prefix: str, what: str) -> list[Binding]:
    return [
        Binding("right_square_bracket", "level(1)", "Level +", show=False, id=f"{prefix}.level_up",
                tooltip=f"Next {what}"),
        Binding("left_square_bracket", "level(-1)", "Level −", show=False, id=f"{prefix}.level_down",
                tooltip=f"Previous {what}"),
    ]


def profile_list(prefix: str, *, new_what: str, record: str, records: str,
                 views: tuple[tuple[str, str, str], ...], level_what: str) -> list[Binding]:
    """The bindings a profile-list section (Perf, Loss) starts with, in this order: ``n`` new (``new_what``), ``r``
    rerun and ``d`` delete (the selected ``record``), ``c`` cancel the job, ``<`` / ``>`` the tabs, ``p`` the list
    (of ``records``), ``m`` / ``l`` / ``g`` the view's three tabs (``views``: (tab id, label, tooltip) each), ``i``
    inspect, ``[`` / ``]`` the level (``level_what``: what it steps)."""
    return [
        new(prefix, new_what),
        rerun(prefix, record),
        delete(prefix, record),
        cancel_job(prefix),
        *tabs(prefix),
        focus_list(prefix, records),
        *(tab(prefix, key, *view) for key, view in zip("mlg", views, strict=True)),
        inspect(prefix),
        *levels(prefix, level_what),
    ]


def top_n(prefix: str, action: str, more: str, fewer: str) -> list[Binding]:
    """``+`` / ``-``: more / fewer rows in a top-N chart (``action(1)`` / ``action(-1)``; ``more`` / ``fewer``: the
    tooltips)."""
    return [
        Binding("plus", f"{action}(1)", "More", show=False, id=f"{prefix}.top_more", tooltip=more),
        Binding("minus", f"{action}(-1)", "Fewer", show=False, id=f"{prefix}.top_fewer", tooltip=fewer),
    ]


def cycle(ids: list, current: str, step: int) -> str:
    """The tab ``step`` places from ``current`` in ``ids`` (wrapping)."""
    i = ids.index(current) if current in ids else 0
    return ids[(i + step) % len(ids)]


def quiet_tabs(tabbed) -> None:
    """Take a TabbedContent's tab bar out of the focus chain: tabs switch with `<`/`>` and the letter keys,
    and a focused tab bar looked the same as an unfocused one (an invisible tab stop)."""
    from textual.widgets import Tabs

    for bar in tabbed.query(Tabs):
        bar.can_focus = False
