"""Messages the sections post to the app (they bubble up to `SparsifyApp`)."""

from __future__ import annotations

from textual.message import Message


class OpenProject(Message):
    """Ask the app to open a project (and show `section`, default Performance Profiles)."""

    def __init__(self, project_id: str, section: str = "perf") -> None:
        super().__init__()
        self.project_id = project_id
        self.section = section


class ProjectsChanged(Message):
    """A project was created, renamed or deleted: the app refreshes the header and the projects list."""

    def __init__(self, project_id: str | None = None, deleted: bool = False) -> None:
        super().__init__()
        self.project_id = project_id
        self.deleted = deleted


class ShowSection(Message):
    """Ask the app to switch to a section: projects, perf, loss, optimization, benchmarks, settings."""

    def __init__(self, section: str) -> None:
        super().__init__()
        self.section = section
