"""The run spec: how and where a model runs, as one typed value passed whole through every measuring entry point.

A :class:`RunSpec` names the **engine** (runtime, a key of :data:`sparsify_tui.engine.ENGINES`), the session
**precision** (:data:`sparsify_tui.engine.base.PRECISIONS`), the **batch size** (items per batch) and the **core
count** (threads; None: every core this process may use). Perf profiles, loss one-shot, channel calibration,
benchmarks, apply's checks, both searches and the fleet take one instead of separate ``engine`` /
``batch_size`` / ``core_count`` keywords, and every measured record stores :meth:`RunSpec.to_dict` beside
the engine's version.

:data:`REFERENCE` is the deployment the user has today, the reference of every speedup: onnxruntime, fp32.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

#: engine and precision of the reference every speedup is stated against (docs/design.md, Measuring)
REFERENCE_ENGINE, REFERENCE_PRECISION = "onnxruntime", "fp32"


@dataclass(frozen=True)
class RunSpec:
    """How a model runs: ``engine`` (name), ``precision`` ("fp32" | "bf16"), ``batch_size`` (items per batch,
    >= 1), ``core_count`` (threads, >= 1; None: every available core). Frozen: change one field with
    :meth:`but`."""

    engine: str = REFERENCE_ENGINE
    precision: str = REFERENCE_PRECISION
    batch_size: int = 1
    core_count: Optional[int] = None

    def runtime(self):
        """The :class:`~sparsify_tui.engine.base.Engine` bound to this precision
        (:func:`sparsify_tui.engine.get_engine`; ``SparsifyError`` when not installed or the CPU lacks the
        precision)."""
        from sparsify_tui.engine import get_engine

        return get_engine(self.engine, self.precision)

    def but(self, **changes) -> "RunSpec":
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    @property
    def is_reference(self) -> bool:
        """Engine and precision are the reference's (onnxruntime fp32)."""
        return (self.engine, self.precision) == (REFERENCE_ENGINE, REFERENCE_PRECISION)

    @property
    def runtime_key(self) -> str:
        """``"engine/precision"``, e.g. ``"openvino/bf16"``: the key of a runtime in search and benchmark records."""
        return f"{self.engine}/{self.precision}"

    def to_dict(self) -> dict:
        return {"engine": self.engine, "precision": self.precision, "batch_size": int(self.batch_size),
                "core_count": None if self.core_count is None else int(self.core_count)}

    @classmethod
    def from_dict(cls, d: Optional[dict]) -> "RunSpec":
        """A spec from :meth:`to_dict` (missing keys: the reference's; records older than engines had none)."""
        d = d or {}
        cores = d.get("core_count")
        return cls(engine=d.get("engine") or REFERENCE_ENGINE, precision=d.get("precision") or REFERENCE_PRECISION,
                   batch_size=int(d.get("batch_size") or 1), core_count=None if cores is None else int(cores))


#: the reference run at batch 1 on every core
REFERENCE = RunSpec()


def display_name(engine: str) -> str:
    """The name users see for engine ``engine`` ("onnxruntime", "OpenVINO"); a name no longer registered as stored."""
    from sparsify_tui.engine import ENGINES

    cls = ENGINES.get(engine)
    return (getattr(cls, "display_name", "") or engine) if cls is not None else engine


def runtime_label(engine: str, version: str = "", precision: str = REFERENCE_PRECISION) -> str:
    """How summaries, reports and comparisons name a runtime: ``"onnxruntime 1.32.0 · fp32"``,
    ``"OpenVINO 2026.4.1 · bf16"``."""
    return " ".join(x for x in (display_name(engine), version or "") if x) + f" · {precision or REFERENCE_PRECISION}"
