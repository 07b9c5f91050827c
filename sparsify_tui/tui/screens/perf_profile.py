"""View of one measured performance profile (placeholder; owned by the perf engineer, issue 3).

`PerfProfileView(project_id, record_id)` is a Textual `Widget` mounted by
`sparsify_tui.tui.screens.perf.PerfSection` when the user selects a measured profile in the list
(the FLOPS profile view is the TUI engineer's, in perf.py). Data: `self.app.workspace` and
`sparsify_tui.profiling.perf.load_perf_profile`.

Optional hooks that PerfSection calls when they exist in this module (looked up with getattr):
- `add_profile_action(section)`      key `a`: add (create + submit) a perf profile job
- `rerun_profile_action(section, record_id)`  key `r`: rerun the selected profile
- `delete_profile_action(section, record_id)` key `delete`: delete the selected profile
`section` is the PerfSection; call `section.reload_profiles()` after changing records.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Static


class PerfProfileView(Widget):
    """One measured perf profile (coming soon)."""

    DEFAULT_CSS = """
    PerfProfileView { height: auto; padding: 1 2; }
    """

    def __init__(self, project_id: str, record_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.record_id = record_id

    def compose(self) -> ComposeResult:
        yield Static(f"Performance profile {self.record_id}: coming soon.", classes="placeholder")
