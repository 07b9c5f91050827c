"""Results the New Project dialog's workers post to it."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass
class CreateProgress(Message):
    """Creating the project: `step` (text) and `fraction` (0..1). A newer one replaces a pending one, so a
    fast stream of steps costs one redraw."""

    step: str
    fraction: float

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CreateProgress)


@dataclass
class ProjectCreated(Message):
    """RUN finished: the `project`, the profile `jobs` it submitted, and `notes` for the user (a job
    that could not start)."""

    project: dict
    jobs: list[dict]
    notes: list[str]
