"""Loss Profiles section (placeholder; owned by the loss engineer (issue 4)).

Section interface (see /work/CONTRACT.md): a Textual `Widget` constructed as
`LossSection(project_id)` and mounted by `sparsify_tui.tui.app.SparsifyApp` for the open project.
Inside, use `self.app.workspace` (a `sparsify_tui.store.Workspace`) for data, jobs via
`sparsify_tui.jobs`, reusable widgets from `sparsify_tui.tui.widgets` (`BarChart`, `LineChart`,
`FilterableTable`, `ErrorDialog`, `ConfirmDialog`), long core calls in
`@work(thread=True, exclusive=True, exit_on_error=False)` workers, and every `Binding` with `id=`
and a description (the help screen lists them). The section receives focus when shown.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Static


class LossSection(Widget):
    """Loss Profiles for one project (coming soon)."""

    DEFAULT_CSS = """
    LossSection { height: 1fr; padding: 1 2; }
    """

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id

    def compose(self) -> ComposeResult:
        yield Static("Loss Profiles: coming soon.", classes="placeholder")
