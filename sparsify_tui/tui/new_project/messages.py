"""Results the New Project dialog's workers post to it."""

from __future__ import annotations

from typing import Optional

from textual.message import Message


class ModelInspected(Message):
    """The model at `path` was read: a one-line `description` and the symbolic `dims` the dialog must
    ask for; or it could not be read (`error`, shown under the path)."""

    def __init__(self, path: str, description: str = "", dims: Optional[list[dict]] = None,
                 error: Optional[BaseException] = None) -> None:
        super().__init__()
        self.path = path
        self.description = description
        self.dims = dims or []
        self.error = error


class CreateProgress(Message):
    """Creating the project: `step` (text) and `fraction` (0..1). A newer one replaces a pending one, so a
    fast stream of steps costs one redraw."""

    def __init__(self, step: str, fraction: float) -> None:
        super().__init__()
        self.step = step
        self.fraction = fraction

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CreateProgress)


class ProjectCreated(Message):
    """RUN finished: the `project`, the profile `jobs` it submitted, and `notes` for the user (a job
    that could not start)."""

    def __init__(self, project: dict, jobs: list[dict], notes: list[str]) -> None:
        super().__init__()
        self.project = project
        self.jobs = jobs
        self.notes = notes
