"""Results the Settings section's workers post to it."""

from __future__ import annotations

from typing import Optional

from textual.message import Message


class ProjectSettingsLoaded(Message):
    """The project record and its size on disk in bytes (None when it could not be measured). `saved`:
    this is the answer to a save (`ctrl+s`)."""

    def __init__(self, project: dict, size_bytes: Optional[int], saved: bool = False) -> None:
        super().__init__()
        self.project = project
        self.size_bytes = size_bytes
        self.saved = saved


class ProjectDeleted(Message):
    """The project was deleted from Settings (`ctrl+d`)."""

    def __init__(self, project_id: str) -> None:
        super().__init__()
        self.project_id = project_id
