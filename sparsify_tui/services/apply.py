"""Apply a stored optimization to its project's model (one-shot pruning and INT8) and record the result
on the optimization as ``applied``. The written file is ``<project>/optimized/<name>.onnx``."""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional

from sparsify_tui.progress import CancelToken, ProgressFn
from sparsify_tui.services.optimizations import get_optimization, store_fields

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import AppliedModel, Optimization


def optimized_path(ws, project_id: str, opt: "Optimization") -> Path:
    """``<project>/optimized/<optimization name>.onnx`` (name made filesystem-safe)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", str(opt.name or opt.id)).strip("._") or opt.id
    return ws.project_dir(project_id) / "optimized" / f"{safe}.onnx"


def is_applied(ws, project_id: str, opt: "Optimization") -> bool:
    """True when the optimization's applied file exists and matches its current settings."""
    from sparsify_tui.optimization.apply import optimization_fingerprint

    a = opt.applied
    return a is not None and bool(a.path) and Path(a.path).is_file() and \
        a.fingerprint == optimization_fingerprint(opt)


def apply_record(ws, project_id: str, opt_ref: str, *, out_path=None, data=None, labels_key=None,
                 reconstruct: Optional[bool] = None, calibration_items: Optional[int] = None,
                 metric: Optional[str] = None, progress: Optional[ProgressFn] = None,
                 cancel: Optional[CancelToken] = None) -> "AppliedModel":
    """Apply optimization ``opt_ref`` (id or name) of a project, store ``applied`` on its record and
    optionally export to ``out_path``. ``data``/``labels_key``: sample data (and its labels) to calibrate on and to
    score the held-out items of; default the data the optimization was built with (:func:`recorded_data`), else the
    INT8 search's, else the project's. ``reconstruct``: a channel optimization refits its consumers on the
    calibration items (None: when there is real data). ``calibration_items``: how many items calibrate (default:
    16 for INT8, half the items up to 64 for channels). ``metric``: what the held-out items are scored in
    (``--metric``: a built-in name or ``/path/FILE.py:FUNCTION``; default the search's metric, else the default
    from the outputs). Returns the stored
    :class:`~sparsify_tui.optimization.record.AppliedModel` (``calibration_data`` says which data and why).
    """
    from sparsify_tui.engine.run import RunSpec
    from sparsify_tui.optimization.apply import (
        apply_optimization, calibration_settings, export_model, optimization_fingerprint, quantization_settings,
    )
    from sparsify_tui.optimization.core import layer_sparsities
    from sparsify_tui.optimization.record import AppliedModel

    opt = get_optimization(ws, project_id, opt_ref)
    setup = ws.get_project(project_id).get("setup") or {}
    quant, excluded = quantization_settings(opt)
    if opt.applied is not None:
        # the file is about to be rewritten in place: a kill midway must not leave a record that vouches for a
        # half-written model, so the record forgets it first and gets it back when the new file is complete
        opt.applied = None
        store_fields(ws, project_id, opt, "applied")
    cal = calibration_settings(opt)
    source = "search" if cal.get("data") else None
    recorded, notes = recorded_data(opt)
    if data:  # the user's data replaces the search's (its labels key too)
        cal.update({"data": data, "labels_key": labels_key})
        source = "--data"
    elif recorded is not None:
        cal.update({"data": recorded, "labels_key": getattr(opt.settings, "labels_key", None)})
        source = "optimization"
    if calibration_items is not None:
        cal["calibration_samples"] = int(calibration_items)
    if metric:
        cal.update({"metric": metric, "metric_asked_by": "--metric"})
    if not cal.get("data") and setup.get("data"):
        source = "project"
    out = optimized_path(ws, project_id, opt)
    try:
        engine, precision = opt.target_runtime
        res = apply_optimization(
            ws.model_path(project_id), layer_sparsities(opt),
            RunSpec(engine=engine, precision=precision, batch_size=int(setup.get("batch_size") or 1)),
            quantize=quant, excluded=excluded, structure=opt.settings.structure, settings=opt.settings,
            out_path=out, dims=setup.get("dims") or {},
            data=cal.pop("data", None) or setup.get("data"), reconstruct=reconstruct, progress=progress,
            cancel=cancel, **cal,
        )
    except BaseException:
        # a failed (or canceled) apply leaves no model behind: no record vouches for it (forgotten above)
        for leftover in (Path(out), Path(f"{out}.data")):
            try:
                leftover.unlink()
            except OSError:
                pass
        raise
    applied = {
        "path": str(res.out_path),
        "exported_to": None,
        "fingerprint": optimization_fingerprint(opt),
        "quantized": res.quantized,
        "excluded": res.excluded,
        "sparsity": {l.weight_name: l.measured_sparsity for l in res.layers},
        "layers_exact": all(l.zero_weights is not None and abs(l.zero_weights - l.pruned_weights) <= 1
                            for l in res.layers),
        "output_diff": {k: v for k, v in res.output_diff.items() if k != "outputs"},
        "file_size_bytes": res.file_size_bytes,
        "baseline_size_bytes": res.baseline_size_bytes,
        "ir_version": res.ir_version,
        "seconds": res.seconds,
        "warnings": notes + res.warnings,
        "applied_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    note = _data_note(res.output_diff, source)
    if note is not None:  # synthetic inputs: output_diff.items says so, and the record keeps its old keys
        applied["calibration_data"] = note
    if res.structure_result is not None:
        applied.update(structure_report(res.structure, res.structure_result))
    if out_path:
        applied["exported_to"] = str(export_model(res.out_path, out_path))
    opt.applied = AppliedModel.from_dict(applied)
    return store_fields(ws, project_id, opt, "applied").applied


def recorded_data(opt: "Optimization") -> tuple:
    """``(path or None, notes)``: the sample data a channel optimization was built with (``settings.data``), which
    apply uses when not given ``--data``. Raises ``SampleDataError`` (one line) when that file is gone; a file whose
    sha256 differs from the recorded one is used with a note saying so."""
    from sparsify_tui.errors import SampleDataError

    path = getattr(opt.settings, "data", None)
    if not path:
        return None, []
    if not Path(path).is_file():
        raise SampleDataError(f"optimization {opt.name!r} was built with {path}, which is gone: give --data FILE.npz")
    want = getattr(opt.settings, "data_sha256", None)
    from sparsify_tui.services.projects import file_sha256

    if want and file_sha256(path) != want:
        return path, [f"{path} changed since optimization {opt.name!r} was built with it (sha256 differs)"]
    return path, []


def _data_note(diff: dict, source: Optional[str]) -> Optional[Dict[str, Any]]:
    """``applied.calibration_data``: the sample data apply used (``path``), ``from`` where (``--data``,
    ``optimization`` (recorded with it), ``search`` (the INT8 search's) or ``project``) and the item ranges
    (``calibration`` and ``held_out``); None with synthetic inputs (``output_diff.items`` says so)."""
    items = (diff or {}).get("items") or {}
    if items.get("source") in (None, "synthetic", "given"):
        return None
    return {"path": items.get("source"), "from": source, "calibration": items.get("calibration"),
            "held_out": items.get("held_out")}


def structure_report(structure: str, report: dict) -> Dict[str, Any]:
    """The ``applied`` fields of a model-level structure's report (channel thinning:
    :meth:`~sparsify_tui.engine.thinning.ThinResult.to_dict`): ``structure``, ``groups`` (``{id, channels, kept,
    kept_indices}`` per prunable group), ``macs_before`` / ``macs_after`` / ``macs_reduction`` (per batch, each
    counted on its own file), ``params_before`` / ``params_after``, ``exactness_max_rel_diff``, ``round_to``,
    ``thinned_output_diff`` (the thinned FP32 model against the baseline, before any INT8 and before
    reconstruction), ``thinning`` (seconds, peak memory, checker), ``importance`` (what chose the channels) and
    ``reconstruction`` (:meth:`~sparsify_tui.engine.reconstruction.ReconstructionResult.to_dict`, None when off). ``layers_exact`` becomes the exactness check's verdict."""
    from sparsify_tui.engine.thinning import EXACTNESS_TOLERANCE

    ex = report.get("exactness_max_rel_diff")
    return {
        "structure": structure,
        "groups": [{k: g.get(k) for k in ("id", "channels", "kept", "kept_indices")} for g in report.get("groups") or []],
        "macs_before": report.get("macs_before"), "macs_after": report.get("macs_after"),
        "macs_reduction": report.get("macs_reduction"),
        "params_before": report.get("params_before"), "params_after": report.get("params_after"),
        "exactness_max_rel_diff": ex,
        "layers_exact": ex is not None and ex <= EXACTNESS_TOLERANCE,
        "round_to": report.get("round_to"),
        "thinned_output_diff": {k: v for k, v in (report.get("output_diff") or {}).items() if k != "outputs"},
        "thinning": {"seconds": report.get("thinning_seconds"), "peak_memory_bytes": report.get("peak_memory_bytes"),
                     "checks": report.get("checks")},
        "importance": report.get("importance"),
        "reconstruction": report.get("reconstruction"),
    }


def ensure_applied(ws, project_id: str, opt_ref: str, *, progress=None,
                   cancel=None) -> tuple["Optimization", Path]:
    """The optimization record and its applied model path, applying it first when missing or stale."""
    opt = get_optimization(ws, project_id, opt_ref)
    if not is_applied(ws, project_id, opt):
        apply_record(ws, project_id, opt.id, progress=progress, cancel=cancel)
        opt = get_optimization(ws, project_id, opt.id)
    return opt, Path(opt.applied.path)
