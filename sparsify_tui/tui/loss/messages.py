"""Results the Loss Profiles section's workers post (to the section and its profile view)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from textual.message import Message


@dataclass
class LossProfileLoaded(Message):
    """One loss profile (``profiling.loss.LossProfile``): `ref` is ``"approximated"`` or a record id; with the
    stored analysis' nodes by id (weights and shapes for a layer's record)."""

    ref: str
    profile: Any
    analysis_nodes: Optional[dict] = None
