"""Results the Projects section's workers post to it."""

from __future__ import annotations

from textual.message import Message


class ProjectsListed(Message):
    """Every project in the workspace (``Workspace.list_projects()``), in the store's order."""

    def __init__(self, projects: list[dict]) -> None:
        super().__init__()
        self.projects = projects
