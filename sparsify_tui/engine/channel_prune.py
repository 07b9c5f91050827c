"""Channel pruning as apply runs it: thin exactly (:mod:`sparsify_tui.engine.thinning`), with the channels
chosen by an importance (:mod:`sparsify_tui.engine.importance`), then, given calibration items, refit every
consumer on them (:mod:`sparsify_tui.engine.reconstruction`). :func:`thin_and_reconstruct` is the one call;
apply, the budget search and ``benchmarks/channel_accuracy.py`` all make it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from sparsify_tui.engine.importance import DATA_METHODS
from sparsify_tui.engine.reconstruction import RIDGE, ReconstructionResult, reconstruct
from sparsify_tui.engine.thinning import thin_model
from sparsify_tui.errors import SparsifyError
from sparsify_tui.progress import CancelToken, ProgressFn
from sparsify_tui.tempfiles import temp_dir

@dataclass
class ChannelPruneResult:
    """Outcome of :func:`thin_and_reconstruct`: ``thin`` (:class:`~sparsify_tui.engine.thinning.ThinResult`, the
    exact thinning), ``reconstruction`` (:class:`~sparsify_tui.engine.reconstruction.ReconstructionResult`, or None when it was off), ``importance``
    (the method that chose the channels), ``out_path``, ``seconds`` (wall time of both)."""

    thin: Any
    reconstruction: Optional[ReconstructionResult]
    importance: str
    out_path: str
    seconds: float

    def to_dict(self) -> dict:
        """The thinning report (:meth:`~sparsify_tui.engine.thinning.ThinResult.to_dict`) plus ``reconstruction``
        (:meth:`~sparsify_tui.engine.reconstruction.ReconstructionResult.to_dict` or None); ``out_path`` is the written file."""
        d = self.thin.to_dict()
        d.update({"out_path": self.out_path, "importance": self.importance,
                  "reconstruction": self.reconstruction.to_dict() if self.reconstruction is not None else None})
        return d


def resolve_importance(importance: Optional[str], calibrated: bool) -> str:
    """The channel importance to use: ``"auto"`` (or None) is ThiNet's greedy choice when calibration data is
    given (it did best on the real models, docs/optimize.md "Which channels go") and the group L2 norm without; a data
    importance without data is refused (``SparsifyError``, one line)."""
    name = importance or "auto"
    if name == "auto":
        return "thinet" if calibrated else "l2"
    if name in DATA_METHODS and not calibrated:
        raise SparsifyError(f"channel importance {name!r} ranks channels on calibration data: give --data FILE.npz "
                            "or use l2")
    return name


def thin_and_reconstruct(model_path, out_path, *, ratios: Optional[dict] = None, ratio: Optional[float] = None,
                         kept: Optional[dict] = None, round_to: Optional[int] = None, importance: str = "auto",
                         calibration: Optional[Sequence[dict]] = None, reconstruct_model: bool = True,
                         real_data: bool = True,
                         ridge: Union[float, str] = RIDGE, batch_size: int = 1, dims: Optional[dict] = None,
                         check_feeds: Optional[Sequence[dict]] = None, engine: Any = None,
                         progress: Optional[ProgressFn] = None,
                         cancel: Optional[CancelToken] = None) -> ChannelPruneResult:
    """The channel-pruning core call: thin (:func:`~sparsify_tui.engine.thinning.thin_model`: exact, checked), with
    the channels chosen by ``importance`` (:func:`resolve_importance`), then, with ``calibration`` items and
    ``reconstruct_model``, refit every consumer (:func:`~sparsify_tui.engine.reconstruction.reconstruct`) so the written model reproduces the original
    layer outputs on those items. ``out_path`` gets the final model. Scoring on held-out items is the caller's
    (:func:`sparsify_tui.optimization.apply.output_difference`).

    ``ratios`` / ``ratio`` / ``kept`` / ``round_to``: as :func:`~sparsify_tui.engine.thinning.thin_model`;
    ``check_feeds``: the exactness check's inputs (default the first 4 calibration items, else synthetic);
    ``real_data``: the calibration items are the user's data (False: synthetic inputs, which may still be
    reconstructed on when asked, but never choose channels: ``"auto"`` is then the group L2 norm).
    Raises as :func:`~sparsify_tui.engine.thinning.thin_model` and :func:`~sparsify_tui.engine.reconstruction.reconstruct`."""
    t0 = time.perf_counter()
    prog = progress or (lambda s, f: None)
    cal = list(calibration or [])
    method = resolve_importance(importance, bool(cal) and real_data)
    checks = list(check_feeds)[:4] if check_feeds else (cal[:4] or None)
    out = Path(out_path)
    with temp_dir("reconstruct") as tmp:
        thinned = Path(tmp) / "thinned.onnx" if (cal and reconstruct_model) else out

        def tprog(step, frac):
            prog(f"thinning: {step}", 0.4 * frac if thinned != out else frac)

        res = thin_model(model_path, thinned, ratios=ratios, ratio=ratio, kept=kept, round_to=round_to,
                         importance=method, batch_size=batch_size, dims=dims or {}, feeds=checks,
                         calibration=cal if real_data else None,
                         engine=engine, progress=tprog, cancel=cancel)
        rec = None
        if thinned != out:
            rec = reconstruct(model_path, thinned, out, cal, res.consumers, ridge=ridge, engine=engine,
                              progress=lambda step, frac: prog(step, 0.4 + 0.6 * frac), cancel=cancel)
    res.out_path = str(out)
    return ChannelPruneResult(res, rec, method, str(out), time.perf_counter() - t0)


__all__ = ["ChannelPruneResult", "resolve_importance", "thin_and_reconstruct"]
