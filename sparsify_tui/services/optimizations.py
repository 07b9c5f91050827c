"""Optimizations of a project: create one from the project's profiles, change it (settings, overrides,
schedule), copy, delete, and export its recipe and integration code.

The boundary between the store and the typed core: the record is plain JSON in the project's
``optimizations`` table; every change reads it with
:func:`~sparsify_tui.optimization.structures.load_optimization`, runs the pure functions of
:mod:`sparsify_tui.optimization.core` on the typed record, and stores its
:meth:`~sparsify_tui.optimization.record.Optimization.to_dict`. Every function returns the typed
:class:`~sparsify_tui.optimization.record.Optimization` as stored (its ``id``, ``created`` and ``modified`` in
``extra``), which is what the TUI and the CLI read: dicts exist only between this module and the store."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from sparsify_tui.errors import ProjectError
from sparsify_tui.services import profiles
from sparsify_tui.services.projects import model_analysis

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization

TABLE = "optimizations"


def _typed(stored: Dict[str, Any]) -> "Optimization":
    from sparsify_tui.optimization.structures import load_optimization

    return load_optimization(stored)


def list_optimizations(ws, project_id: str) -> List["Optimization"]:
    """The project's optimizations, in the order they were stored. A record whose pruning structure this version
    does not know (a newer version wrote it) is read with the base classes, so the list still shows it."""
    from sparsify_tui.optimization.record import Optimization

    out = []
    for r in ws.list_records(project_id, TABLE):
        try:
            out.append(_typed(r))
        except ProjectError:
            out.append(Optimization.from_dict(r))
    return out


def create_optimization(ws, project_id: str, name: str, perf: Optional[str] = None, loss: Optional[str] = None,
                        sparsity: float = 0.85, balance: float = 0.5, quantize: bool = False, *,
                        settings: Optional[Dict[str, Any]] = None,
                        overrides: Optional[Dict[str, float]] = None) -> "Optimization":
    """Create, evaluate and store an optimization for a project; returns it as stored (with its ``id``).

    ``settings``: extra :class:`~sparsify_tui.optimization.record.Settings` fields (e.g. ``min_sparsity``;
    ``structure`` picks the pruning structure, whose ``settings_type`` may have more);
    ``overrides``: weight name -> sparsity fixed from the start. Nothing is stored when any of them is invalid.
    ``perf``: perf profile id or name, ``"flops"``, or None (:func:`profiles.resolve_perf_profile`: the newest, or for
    a structure that reads a channel calibration the newest calibrated one); ``loss``:
    loss profile id or name, ``"approximated"``, or None (:func:`profiles.resolve_loss_profile`).
    Raises :class:`ProjectError` for a taken name or bad setting, :class:`RecordNotFound` for an unknown profile.
    """
    rec = build_record(ws, project_id, name, perf=perf, loss=loss, sparsity=sparsity, balance=balance,
                       quantize=quantize, settings=settings, overrides=overrides)
    return _typed(ws.add_record(ws.get_project(project_id)["id"], TABLE, rec.to_dict()))


def check_name_free(ws, project_id: str, name: str) -> str:
    """The stripped ``name``; ``ProjectError`` (one line) when it is empty or the project already has an
    optimization of that name."""
    from sparsify_tui import settings

    project = ws.get_project(project_id)
    name = settings.name(name)
    if not name:
        raise ProjectError("an optimization needs a name: pass --name NAME")
    if any(r.get("name") == name for r in ws.list_records(project["id"], TABLE)):
        raise ProjectError(f"optimization {name!r} already exists in project {project['name']!r}: "
                           f"choose another name or copy it")
    return name


def build_record(ws, project_id: str, name: str, perf: Optional[str] = None, loss: Optional[str] = None,
                 sparsity: float = 0.85, balance: float = 0.5, quantize: bool = False, *,
                 settings: Optional[Dict[str, Any]] = None,
                 overrides: Optional[Dict[str, float]] = None, loss_profile=None) -> "Optimization":
    """The evaluated optimization :func:`create_optimization` stores (same arguments and errors), not stored: a
    search (:mod:`sparsify_tui.services.budget`) sets its target before storing it. It targets its perf profile's
    runtime (``runtime``: the estimates are measured there). ``loss_profile``: a typed
    :class:`~sparsify_tui.profiling.loss.LossProfile` not stored yet, used instead of ``loss`` (its record id is
    the caller's to set once it stores it)."""
    from sparsify_tui.optimization import core
    from sparsify_tui.optimization.record import UNSTRUCTURED
    from sparsify_tui.optimization.structures import get_structure

    project = ws.get_project(project_id)
    pid = project["id"]
    name = check_name_free(ws, pid, name)
    analysis = model_analysis(ws, pid)
    settings = dict(settings or {})
    kind = get_structure(settings.get("structure") or UNSTRUCTURED)
    st = kind.settings_type(sparsity=sparsity, balance=balance).with_changes(**settings)
    skipped: list = []  # newest profiles whose data file is missing: skipped and reported, never fatal
    perf_prof, perf_ref, perf_name = profiles.resolve_perf_profile(ws, pid, perf, skipped,
                                                                   prefer_calibrated=kind.calibrated_perf)
    if loss_profile is not None:
        loss_prof, loss_ref, loss_name = loss_profile, "", loss_profile.name
    else:
        loss_prof, loss_ref, loss_name = profiles.resolve_loss_profile(ws, pid, loss, skipped,
                                                                       structure=kind.loss_structure, require=True)
    if kind.loss_structure != UNSTRUCTURED and loss_ref == profiles.APPROXIMATED:
        # no loss profile of this structure: the structure computes its own curves from the weights
        loss_prof, loss_name = None, getattr(kind, "computed_loss_name", "computed from the weights")
    if kind.model_level:  # it reads the model itself (channel groups) and what is stored with the perf profile
        setup = project.get("setup") or {}
        extras = kind.analysis_extras(
            ws.model_path(pid), analysis,
            batch_size=int(perf_prof.batch_size if perf_prof is not None else setup.get("batch_size") or 1),
            dims=dict(perf_prof.dims if perf_prof is not None and perf_prof.dims else setup.get("dims") or {}),
            perf_extras=profiles.perf_profile_extras(ws, pid, perf_ref), settings=st)
    else:
        extras = {}
    rec = core.build_optimization(name, analysis, perf_prof, loss_prof, training=project.get("training"),
                                  sparsity=st.sparsity, balance=st.balance, quantize=quantize, perf_ref=perf_ref,
                                  perf_name=perf_name, loss_ref=loss_ref, loss_name=loss_name, settings=st,
                                  model_file=(project.get("model") or {}).get("file", ""), extras=extras)
    for w, s in (overrides or {}).items():
        rec = core.override(rec, w, s)
    if perf_prof is not None and (perf_prof.engine, perf_prof.precision) != ("onnxruntime", "fp32"):
        from sparsify_tui.optimization.record import TargetRuntime

        # its estimates are that profile's runtime's: the optimization targets it (apply, benchmark default)
        rec.runtime = TargetRuntime(engine=perf_prof.engine, precision=perf_prof.precision)
    if skipped:
        rec.warnings = list(rec.warnings or []) + skipped
    return rec


def channel_data_settings(data, labels_key=None) -> Dict[str, Any]:
    """The settings a channel optimization records about its sample data: ``data`` (absolute path), ``data_sha256``
    and ``labels_key``; apply calibrates and scores on that file unless given another. The file is checked as apply
    reads it (``SampleDataError``, one line); ``labels_key`` without ``data`` is refused."""
    from sparsify_tui.analysis.labels import split_labels
    from sparsify_tui.errors import SampleDataError
    from sparsify_tui.services.projects import file_sha256

    if not data:
        raise SampleDataError(f"--labels {labels_key} needs --data FILE.npz holding the inputs and the labels")
    path = Path(data).expanduser().absolute()
    if not path.is_file():
        raise SampleDataError(f"--data {data}: no such file; give the .npz of sample inputs (and labels)")
    split_labels(path, labels_key)  # a missing labels key or a bad file: one line now, not at apply
    return {"data": str(path), "data_sha256": file_sha256(path), "labels_key": labels_key}


def get_optimization(ws, project_id: str, ref: str) -> "Optimization":
    """The stored optimization by id or name (RecordNotFound otherwise)."""
    return _typed(ws.find_record(project_id, TABLE, ref))


def store_fields(ws, project_id: str, rec: "Optimization", *names: str) -> "Optimization":
    """Store fields ``names`` of ``rec`` (e.g. ``"applied"``, ``"measured"``) on its stored record, as
    :meth:`~sparsify_tui.optimization.record.Optimization.to_dict` writes them (None: written as null);
    returns the record as stored."""
    def plain(value: Any) -> Any:
        return value.to_dict() if hasattr(value, "to_dict") else value

    return _typed(ws.update_record(project_id, TABLE, rec.id, **{k: plain(getattr(rec, k)) for k in names}))


def _change(ws, project_id: str, ref: str, change: Callable[..., Any], *args: Any, **kwargs: Any) -> "Optimization":
    """Run ``change(typed record, *args, **kwargs)`` (a core function returning the record) on the stored
    optimization ``ref`` and store the result, as one locked read-modify-write (two quick edits from the TUI's
    threads, e.g. INT8 on then a layer kept FP32, both land: before, the later one could write back the state it
    read before the first was stored); returns it as stored."""

    def changed(stored: Dict[str, Any]) -> Dict[str, Any]:
        rec = change(_typed(stored), *args, **kwargs)
        mark_stale(rec)
        return {k: v for k, v in rec.to_dict().items() if k not in ("id", "created", "modified")}

    return _typed(ws.modify_record(project_id, TABLE, get_optimization(ws, project_id, ref).id, changed))


def mark_stale(rec: "Optimization") -> None:
    """Flag ``measured`` stale (in place) when the optimization no longer matches the file that was measured."""
    from sparsify_tui.optimization.apply import optimization_fingerprint

    m = rec.measured
    if m is not None and m.fingerprint and m.fingerprint != optimization_fingerprint(rec):
        m.stale = True


def reevaluate(ws, project_id: str, ref: str, **settings: Any) -> "Optimization":
    """Change settings of a stored optimization, re-evaluate (overrides kept), save."""
    from sparsify_tui.optimization.core import change_settings

    return _change(ws, project_id, ref, change_settings, **settings)


def set_override(ws, project_id: str, ref: str, weight_name: str, sparsity: Optional[float]) -> "Optimization":
    """Fix (or with None, release) one layer's sparsity of a stored optimization; re-evaluate and save."""
    from sparsify_tui.optimization.core import override

    return _change(ws, project_id, ref, override, weight_name, sparsity)


def update_schedule(ws, project_id: str, ref: str, **changes: Any) -> "Optimization":
    """:func:`~sparsify_tui.optimization.core.change_schedule` on a stored optimization, then save."""
    from sparsify_tui.optimization.core import change_schedule

    return _change(ws, project_id, ref, change_schedule, **changes)


def sync_training(ws, project_id: str, ref: str) -> "Optimization":
    """:func:`~sparsify_tui.optimization.core.change_training` with the project's current training settings,
    then save: the optimization's epoch plan and LR schedule follow the project's settings again."""
    from sparsify_tui.optimization.core import change_training

    return _change(ws, project_id, ref, change_training, dict(ws.get_project(project_id).get("training") or {}))


def copy_optimization(ws, project_id: str, ref: str, new_name: Optional[str] = None) -> "Optimization":
    """A new version of an optimization (same settings, overrides and schedules) named ``new_name`` (default
    ``"<name> v2"``, ``v3``... the first free one). Returns the stored copy."""
    rec = ws.find_record(project_id, TABLE, ref)
    names = {r.get("name") for r in ws.list_records(project_id, TABLE)}
    if new_name:
        from sparsify_tui import settings

        new_name = settings.name(new_name)
    if new_name:
        if new_name in names:
            raise ProjectError(f"optimization {new_name!r} already exists: choose another name")
    else:
        base = rec["name"].rsplit(" v", 1)[0] if rec["name"].rsplit(" v", 1)[-1].isdigit() else rec["name"]
        k = 2
        while f"{base} v{k}" in names:
            k += 1
        new_name = f"{base} v{k}"
    new = copy.deepcopy({k: v for k, v in rec.items() if k not in ("id", "created", "modified")})
    new["name"] = new_name
    new["copied_from"] = rec["id"]
    return _typed(ws.add_record(project_id, TABLE, new))


def delete_optimization(ws, project_id: str, ref: str) -> None:
    """Delete a stored optimization."""
    ws.delete_record(project_id, TABLE, ws.find_record(project_id, TABLE, ref)["id"])


# ------------------------------------------------------------------------------------------------ export
def default_recipe_path(ws, project_id: str, name: str) -> Path:
    """``<project dir>/recipes/<name>.yaml``."""
    from sparsify_tui.optimization.export import safe_filename

    return Path(ws.project_dir(project_id)) / "recipes" / f"{safe_filename(name)}.yaml"


def _export_inputs(ws, project_id: str, ref: str):
    """(project, typed optimization record, model path or None)."""
    project = ws.get_project(project_id)
    rec = get_optimization(ws, project["id"], ref)
    try:
        model_path = ws.model_path(project["id"])
    except Exception:
        model_path = None
    return project, rec, model_path


def render_export(ws, project_id: str, ref: str, *, recipe_path, framework: Optional[str] = None) -> Dict[str, Any]:
    """The texts an export would write, without writing (the TUI's preview): see
    :func:`sparsify_tui.optimization.export.render_export`."""
    from sparsify_tui.optimization import export

    project, rec, model_path = _export_inputs(ws, project_id, ref)
    return export.render_export(rec, recipe_path=Path(recipe_path).expanduser(), framework=framework or None,
                                project_name=project.get("name", ""), model_path=model_path)


def export_optimization(ws, project_id: str, ref: str, *, recipe_path: Optional[str] = None,
                        framework: Optional[str] = None, code_path: Optional[str] = None,
                        flags: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Export a stored optimization (id or name): the recipe to ``recipe_path`` (default
    :func:`default_recipe_path`), code for ``framework`` to ``code_path`` (default next to the recipe).
    A given path's folder must exist (:func:`sparsify_tui.settings.output_path`; ``flags`` names the paths in
    errors, default ``-o``/``-O``), except the project's own ``recipes/`` folder, created on demand.
    The one export path of the CLI (``sparsify-tui export``) and the TUI. Returns
    :func:`sparsify_tui.optimization.export.write_export`'s summary."""
    from sparsify_tui import settings as _settings
    from sparsify_tui.optimization import export

    f = {"recipe_path": "-o", "code_path": "-O", **(flags or {})}
    project, rec, model_path = _export_inputs(ws, project_id, ref)
    default = default_recipe_path(ws, project["id"], rec.name)
    path = Path(recipe_path).expanduser() if recipe_path else default
    # the project's own recipes/ folder is created on demand; any other folder must exist already
    if path.absolute().parent != default.absolute().parent:
        _settings.output_path(path, f["recipe_path"], workspace=ws.root)
    if code_path:
        _settings.output_path(code_path, f["code_path"], workspace=ws.root)
    return export.write_export(rec, recipe_path=path, framework=framework or None,
                               code_path=Path(code_path) if code_path else None,
                               project_name=project.get("name", ""), model_path=model_path)
