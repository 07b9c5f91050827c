"""Results the Projects section's workers post to it."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class ProjectsListed(Message):
    """Every project in the workspace (``Workspace.list_projects()``), in the store's order."""

    projects: list[dict]
