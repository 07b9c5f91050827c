"""Results the Fleet dialog's workers post to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from textual.message import Message


@dataclass
class FleetDefaultsLoaded(Message):
    """The project's setup (batch size, dims) and its optimizations, for the form's defaults."""

    setup: dict
    optimizations: list[dict]


@dataclass
class FleetNodesFound(Message):
    """The cluster's alive nodes (``fleet.cluster.NodeInfo``), or why they could not be listed (`error`, shown in
    the form)."""

    address: str
    nodes: Optional[list[Any]]
    error: Optional[BaseException] = None


@dataclass
class FleetJobSubmitted(Message):
    """The ``fleet_profile`` / ``fleet_benchmark`` job was submitted (`job`), or refused (`error`, shown in the
    form)."""

    job: Optional[dict]
    error: Optional[BaseException] = None


@dataclass
class FleetJobPolled(Message):
    """A fresh read of the fleet job (its ``targets`` states); a newer one replaces a pending one."""

    job_id: str
    job: dict

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FleetJobPolled) and message.job_id == self.job_id
