"""Results the Report dialog's workers post."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from textual.message import Message


@dataclass
class ReportPathsFound(Message):
    """The default report path of each format (``{"md": path, "html": path, "json": path}``)."""

    paths: dict


@dataclass
class ReportWritten(Message):
    """The report was written (`result`: ``{"path", "format", "bytes"}``), or not (`error`, shown in the dialog)."""

    result: Optional[dict]
    error: Optional[BaseException] = None
