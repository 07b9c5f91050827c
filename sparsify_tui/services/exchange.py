"""Perf profiles in and out of a project: a self-contained JSON file to compare on another machine or workspace
(``profile export`` / ``profile import``), and per-node overlays for Google's Model Explorer.

**Profile file** (:data:`FORMAT`, version :data:`FORMAT_VERSION`)::

    {"format": "sparsify-tui/perf-profile", "format_version": 1, "exported": ISO time, "sparsify_tui": version,
     "project": name,
     "model": {"file", "sha256", "size_bytes", "opset", "params", "macs", "flops", "nodes"},
     "machine": {"hostname", "cpu_model", "instruction_sets", "available_cores", ...},
     "settings": {"batch_size", "core_count", "warmup", "iterations", "dims", "inputs", "engine": {...}},
     "profile": PerfProfile.to_dict()["profile"], "nodes": PerfProfile.to_dict()["nodes"]}

It is bound to the model by its sha256: :func:`import_perf_profile` adds it only to a project whose model has the
same sha256, and refuses anything else with one line, storing nothing.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any, Dict, Optional, Union

from sparsify_tui.errors import ProjectError, SparsifyError
from sparsify_tui.services.profile_schema import FORMAT, FORMAT_VERSION
from sparsify_tui.services.profiles import PERF_TABLE, load_perf_profile, perf_record


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def write_text_atomic(path: Union[str, Path], text: str) -> Path:
    """Write ``text`` to ``path`` through a temp file in the same folder renamed over it (a failed write leaves
    nothing behind; :func:`sparsify_tui.tempfiles.write_output`, which refuses a symlink or a non-regular target).
    Raises ``SparsifyError`` (one line) when the folder is missing or not writable."""
    from sparsify_tui.tempfiles import write_output

    path = Path(path).expanduser()
    if path.is_dir() and not path.is_symlink():
        raise SparsifyError(f"{path} is a directory: give a file name, e.g. {path / 'out.json'}")
    if not path.parent.is_dir():
        raise SparsifyError(f"folder {path.parent} does not exist: create it or choose another path")
    try:
        return write_output(path, text, fsync=False)
    except OSError as err:
        raise SparsifyError(f"cannot write {path} ({err.strerror}): choose another path") from None


def _machine(prof) -> Dict[str, Any]:
    """The profile's target: what it recorded, else what its settings say (older profiles)."""
    if prof.machine.recorded:
        return prof.machine.to_dict()
    s = prof.settings or {}
    return {"hostname": None, "cpu_model": s.get("cpu_model"), "instruction_sets": list(prof.instruction_sets or []),
            "available_cores": s.get("available_cores"),
            **({"ort_version": prof.engine_version} if prof.engine == "onnxruntime" else {})}


def export_perf_profile(ws, project_ref: str, ref: str) -> Dict[str, Any]:
    """The self-contained export document of perf profile ``ref`` (id or name) of a project (module docstring).
    Raises ``RecordNotFound``."""
    from sparsify_tui import __version__

    project = ws.get_project(project_ref)
    record = ws.find_record(project["id"], PERF_TABLE, ref)
    prof = load_perf_profile(ws, project["id"], record["id"])
    doc = prof.to_dict()
    model = project.get("model") or {}
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "exported": _now(),
        "sparsify_tui": __version__,
        "project": project.get("name"),
        "model": {"file": model.get("file"), "sha256": model.get("sha256"), "size_bytes": model.get("size_bytes"),
                  "opset": model.get("opset"), "params": model.get("params"), "macs": model.get("macs"),
                  "flops": model.get("flops"),
                  "nodes": sum(1 for n in prof.nodes if not str(n.id).startswith("["))},
        "machine": _machine(prof),
        "settings": {"batch_size": prof.batch_size, "core_count": prof.core_count, "warmup": prof.warmup,
                     "iterations": prof.iterations, "dims": dict(prof.dims or {}), "inputs": prof.inputs.to_dict(),
                     "engine": dict(prof.settings or {})},
        "imported": record.get("imported"),
        "profile": doc["profile"],
        "nodes": doc["nodes"],
    }


def read_profile_file(path: Union[str, Path]) -> Dict[str, Any]:
    """Read and check an export document against its schema (:func:`sparsify_tui.services.profile_schema.
    load_profile_document`: types, ranges, finite numbers, a file-size and a row limit). Raises ``SparsifyError``
    (one line) for a missing or unreadable file, bad JSON, another format or a newer version, or a value of the
    wrong type or out of range."""
    from sparsify_tui.services.profile_schema import load_profile_document

    return load_profile_document(path)


def _free_name(taken: set, name: str, host: Optional[str]) -> Optional[str]:
    for cand in (name, f"{name} ({host})" if host else None, f"{name} (imported)"):
        if cand and cand not in taken:
            return cand
    return None


def import_perf_profile(ws, project_ref: str, path: Union[str, Path], *, name: Optional[str] = None) -> Dict[str, Any]:
    """Add the perf profile exported to ``path`` to a project whose model has the same sha256. Returns the stored
    record (with ``id``, the list fields of :func:`sparsify_tui.services.profiles.perf_record`, and ``imported``:
    ``{"from", "at", "project", "hostname", "exported"}``).

    The name is ``name``, else the exported name, else ``"<name> (<hostname>)"`` when that is taken.

    Raises ``SparsifyError`` (one line; nothing stored) for a bad file (:func:`read_profile_file`), another model
    (sha256), nodes that do not match the project's model, or a taken ``name``."""
    from sparsify_tui.profiling.perf import MachineRecord, PerfProfile

    doc = read_profile_file(path)
    project = ws.get_project(project_ref)
    pid = project["id"]
    mine = (project.get("model") or {}).get("sha256")
    theirs = doc["model"]["sha256"]
    if theirs != mine:
        raise ProjectError(
            f"{Path(path).name} was measured on another model ({doc['model'].get('file')}, sha256 {str(theirs)[:12]}…) "
            f"than project {project['name']!r} ({(project.get('model') or {}).get('file')}, sha256 {str(mine)[:12]}…): "
            "import it into a project of that model")
    try:
        prof = PerfProfile.from_dict({"profile": doc["profile"], "nodes": doc["nodes"]})
        for n in prof.nodes:
            n.time_ms = float(n.time_ms)
            if n.int8_time_ms is not None:
                n.int8_time_ms = float(n.int8_time_ms)
    except (TypeError, ValueError, AttributeError) as err:
        raise SparsifyError(f"{Path(path).name} has malformed nodes ({err}): export it again") from None
    ids = [n.get("id") for n in (ws.analysis_of(pid).get("nodes") or [])]
    theirs_ids = [n.id for n in prof.nodes if not str(n.id).startswith("[")]
    if ids != theirs_ids:
        raise ProjectError(f"{Path(path).name} lists {len(theirs_ids)} nodes that do not match the "
                           f"{len(ids)} nodes of project {project['name']!r}'s model: export it again with this "
                           "sparsify-tui version")
    if not prof.machine.recorded:
        prof.machine = MachineRecord.from_dict(doc.get("machine") or {})
    host = prof.machine.hostname
    taken = {r.get("name") for r in ws.list_records(pid, PERF_TABLE)}
    if name:
        from sparsify_tui import settings

        name = settings.name(name)
        if name in taken:
            raise ProjectError(f"perf profile {name!r} already exists in project {project['name']!r}: "
                               "choose another --name")
        final = name
    else:
        final = _free_name(taken, prof.name or "imported", host)
        if final is None:
            raise ProjectError(f"perf profile {prof.name!r} already exists in project {project['name']!r}: "
                               "give the import a name with --name")
    prof.name = final
    imported = {"from": str(Path(path).expanduser().resolve()), "at": _now(), "project": doc.get("project"),
                "hostname": host, "exported": doc.get("exported")}
    fields = {**perf_record(prof), "imported": imported}
    return ws.add_record_with_blob(pid, PERF_TABLE, fields, prof.to_dict())


def export_model_explorer(ws, project_ref: str, ref: str, out: Union[str, Path], *, loss: Optional[str] = None,
                          level: float = 0.9) -> Dict[str, Any]:
    """Write Model Explorer node-data files for perf profile ``ref`` (:mod:`sparsify_tui.profiling.model_explorer`):
    ``out`` holds the per-node ms; ``<out stem>.share.json``, ``.int8_ratio.json`` and ``.sensitivity.json`` (from
    loss profile ``loss``, else the newest, else Approximated, at sparsity ``level``) sit next to it.

    Returns ``{"files": {metric: path}, "model": model path, "command": the model-explorer command line, "nodes",
    "not_on_graph", "skipped"}``. Nothing is left behind on an error."""
    import shlex

    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.profiling.model_explorer import node_data
    from sparsify_tui.services.profiles import resolve_loss_profile

    from sparsify_tui.settings import output_path

    out = Path(out).expanduser()
    if out.suffix.lower() != ".json":
        raise SparsifyError(f"{out} must end in .json: Model Explorer reads node data from .json files")
    for metric in ("ms", "share", "int8_ratio", "sensitivity"):  # every file it may write: no link, not the workspace
        output_path(out if metric == "ms" else Path(f"{out.with_suffix('')}.{metric}.json"), "-o", workspace=ws.root)
    if not 0.0 <= float(level) < 1.0:
        raise SparsifyError(f"--level must be in [0, 1), got {level}")
    project = ws.get_project(project_ref)
    pid = project["id"]
    record = ws.find_record(pid, PERF_TABLE, ref)
    prof = load_perf_profile(ws, pid, record["id"])
    loss_prof, _loss_ref, loss_name = resolve_loss_profile(ws, pid, loss)
    model_path = ws.model_path(pid)
    model = load_model(model_path, load_external_data=False, constants_as_initializers=False)
    try:
        data = node_data(model, prof, loss=loss_prof, level=level, label=f"{prof.name}")
    except ValueError as err:
        raise ProjectError(str(err)) from None
    if "sensitivity" in data.files:
        for g in data.files["sensitivity"].values():
            g["name"] = f"{prof.name} sensitivity at {level:g} ({loss_name})"
    paths = {}
    stem = out.with_suffix("")
    written: list = []
    try:
        for metric, doc in data.files.items():
            target = out if metric == "ms" else Path(f"{stem}.{metric}.json")
            written.append(write_text_atomic(target, json.dumps(doc, indent=1)))
            paths[metric] = str(target)
    except BaseException:
        for p in written:
            try:
                p.unlink()
            except OSError:
                pass
        raise
    command = ("model-explorer --extensions=model_explorer_onnx " + shlex.quote(str(model_path)) +
               " --node_data_paths=" + shlex.quote(",".join(paths.values())))
    return {"files": paths, "model": str(model_path), "command": command, "nodes": data.nodes,
            "not_on_graph": data.not_on_graph, "skipped": data.skipped, "loss_profile": loss_name,
            "level": float(level)}
