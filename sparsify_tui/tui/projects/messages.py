"""Results the Projects section's workers post to it."""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message


@dataclass
class ProjectsListed(Message):
    """Every project in the workspace (``Workspace.list_projects()``), in the store's order, and the damaged ones
    (``Workspace.damaged_projects()``: ``{"id", "name", "problem"}``)."""

    projects: list[dict]
    damaged: list[dict] = field(default_factory=list)


@dataclass
class DeleteAsked(Message):
    """The question before deleting a project (:func:`~sparsify_tui.tui.projects.section.delete_question`: it names
    the project's running jobs, which the delete cancels) and the confirm button's label."""

    project_id: str
    question: str
    confirm_label: str
