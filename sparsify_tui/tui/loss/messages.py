"""Results the Loss Profiles section's workers post (to the section and its profile view)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class LossProfileLoaded(Message):
    """One loss profile (``profiling.loss.LossProfile``): `ref` is ``"approximated"`` or a record id."""

    ref: str
    profile: Any
