"""Results the Jobs view's workers post to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from textual.message import Message


@dataclass
class JobsListed(Message):
    """Every job of the workspace (oldest first, vanished processes marked) and the project names by id.
    A newer list replaces one not yet shown (one redraw however fast they come)."""

    jobs: list
    projects: dict

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, JobsListed)


@dataclass
class JobLogRead(Message):
    """The last lines of a job's log (`text`), or why it could not be read (`error`)."""

    job_id: str
    text: str
    error: Optional[str] = None


@dataclass
class JobCancelAsked(Message):
    """A cancel was sent to job `job_id` (`job`: its state after the request)."""

    job_id: str
    job: dict
