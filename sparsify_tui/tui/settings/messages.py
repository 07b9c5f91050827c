"""Results the Settings section's workers post to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from textual.message import Message


@dataclass
class ProjectSettingsLoaded(Message):
    """The project record and its size on disk in bytes (None when it could not be measured). `saved`:
    this is the answer to a save (`ctrl+s`)."""

    project: dict
    size_bytes: Optional[int]
    saved: bool = False


@dataclass
class SettingsRefused(Message):
    """The workspace refused the settings saved (a name another project has): said under the form."""

    error: str


@dataclass
class ProjectDeleted(Message):
    """The project was deleted from Settings (`ctrl+d`)."""

    project_id: str
