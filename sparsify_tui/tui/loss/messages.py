"""Results the Loss Profiles section's workers post (to the section and its profile view)."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class LossProfilesListed(Message):
    """The project's stored loss profile records, and its ``loss_profile`` jobs still pending or running."""

    def __init__(self, records: list[dict], active_jobs: list[dict]) -> None:
        super().__init__()
        self.records = records
        self.active_jobs = active_jobs


class LossProfileLoaded(Message):
    """One loss profile (``profiling.loss.LossProfile``): `ref` is ``"approximated"`` or a record id."""

    def __init__(self, ref: str, profile: Any) -> None:
        super().__init__()
        self.ref = ref
        self.profile = profile


class LossJobSubmitted(Message):
    """A ``loss_profile`` job was started (add or rerun)."""

    def __init__(self, job: dict) -> None:
        super().__init__()
        self.job = job


class LossProfileDeleted(Message):
    """A stored loss profile was deleted."""

    def __init__(self, record_id: str) -> None:
        super().__init__()
        self.record_id = record_id
