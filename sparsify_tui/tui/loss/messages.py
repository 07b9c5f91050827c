"""Results the Loss Profiles section's workers post (to the section and its profile view)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class LossProfilesListed(Message):
    """The project's stored loss profile records, and its ``loss_profile`` jobs still pending or running."""

    records: list[dict]
    active_jobs: list[dict]


@dataclass
class LossProfileLoaded(Message):
    """One loss profile (``profiling.loss.LossProfile``): `ref` is ``"approximated"`` or a record id."""

    ref: str
    profile: Any


@dataclass
class LossJobSubmitted(Message):
    """A ``loss_profile`` job was started (add or rerun)."""

    job: dict


@dataclass
class LossProfileDeleted(Message):
    """A stored loss profile was deleted."""

    record_id: str
