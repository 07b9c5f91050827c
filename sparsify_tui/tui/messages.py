"""App-wide messages: what the sections ask of the app (they bubble up to `SparsifyApp`), what the app's
own workers found, and :class:`WorkFailed`. Each feature package has a ``messages.py`` with the typed
results its workers post (see :mod:`sparsify_tui.tui.workers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from textual.message import Message


@dataclass
class OpenProject(Message):
    """Ask the app to open a project (and show `section`, default Performance Profiles). `name` (when the
    sender knows it) is shown in the header at once."""

    project_id: str
    section: str = "perf"
    name: Optional[str] = None


@dataclass
class ProjectsChanged(Message):
    """A project was created, renamed or deleted: the app refreshes the header and the projects list."""

    project_id: str | None = None
    deleted: bool = False


@dataclass
class ShowSection(Message):
    """Ask the app to switch to a section: projects, perf, loss, optimization, benchmarks, settings."""

    section: str


@dataclass
class WorkFailed(Message, bubble=False):
    """Posted by the app to the widget whose worker raised, after the error dialog is shown. `group` is
    the worker's group (see :func:`sparsify_tui.tui.workers.app_work`); the widget may tidy up with it."""

    group: str
    error: BaseException


# -- results of the app's own workers ----------------------------------------------------------------
@dataclass
class ProjectLoaded(Message):
    """The open project's record was read (its name goes in the header)."""

    project: dict


@dataclass
class StartProjectFound(Message):
    """`sparsify-tui --project REF` or `sparsify-tui MODEL.onnx`: the project to open (found or created)."""

    project: dict


@dataclass
class ModelNeedsDims(Message):
    """`sparsify-tui MODEL.onnx` for a model that has no project yet: the New Project dialog, filled in, offers
    its baseline profiles and asks for its symbolic dims."""

    model_path: str
