"""The workspace: projects, their records and blobs, and jobs, on TinyDB files (DESIGN.md, Data).

Layout on disk::

    <root>/workspace.json             TinyDB: tables "projects" (index: id, name, dir) and "jobs"
    <root>/jobs/<job id>.log          stdout/stderr of a job process
    <root>/projects/<project id>/
        project.json                  TinyDB: table "project" (one doc) and the record tables
        analysis.json                 blob: the model analysis (``ModelAnalysis.to_dict()``)
        perf_profiles/<id>.json ...   other blobs (large per-node arrays)
        model/<model file>            the copied model (+ its external data files), unless linked
        model.link.json               when created with ``link=True``: where the model lives

Every operation re-reads the files (no cache); every write is atomic and happens under a file lock,
so the TUI, job processes and a second TUI can share one workspace. Everything returned is a plain
``dict`` (never a TinyDB Document).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from tinydb import Query

from sparsify_tui.errors import ProjectError, RecordNotFound
from sparsify_tui import settings
from sparsify_tui.store.db import atomic_write_json, fsync_dir, open_db, read_json

RECORD_TABLES = ("perf_profiles", "loss_profiles", "optimizations", "benchmarks")
"""Per-project record tables."""

DEFAULT_TRAINING = {"optimizer": "SGD", "epochs": 100, "init_lr": 0.01, "final_lr": 0.0001}
"""Training settings of a new project (used by recipes: optimizer, epochs, initial and final LR)."""

OPTIMIZERS = ("SGD", "Adam", "AdamW", "RMSprop")

_TRAINING_KEYS = set(DEFAULT_TRAINING)
_SETUP_KEYS = {"batch_size", "core_count", "dims", "perf_enabled", "loss_enabled", "perf_name", "loss_name"}
_PROTECTED = {"id", "created", "model"}
_PROJECT_ID = re.compile(r"[0-9a-f]{10}")
"""What :func:`new_id` makes: the name of a project folder."""


def now_iso() -> str:
    """Current UTC time, ISO 8601 with milliseconds and a ``Z``, e.g. ``2026-11-21T04:01:02.345Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id() -> str:
    """A new random id: 10 hex characters."""
    return uuid.uuid4().hex[:10]


def default_root() -> Path:
    """``$SPARSIFY_TUI_HOME``, else ``$XDG_DATA_HOME/sparsify-tui``, else ``~/.local/share/sparsify-tui``."""
    home = os.environ.get("SPARSIFY_TUI_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(xdg) / "sparsify-tui"


def _plain(doc: Any) -> Dict[str, Any]:
    return dict(doc) if doc is not None else None  # type: ignore[return-value]


def _sha256_copy(src, dst: Optional[Path]) -> tuple:
    """Stream ``src`` (a path, or an open read-only file descriptor, which is closed) to ``dst`` if given, in
    4 MiB chunks; return (sha256 hex, bytes). ``dst`` is written and fsynced."""
    h = hashlib.sha256()
    size = 0
    out = open(dst, "wb") if dst is not None else None
    try:
        with (os.fdopen(src, "rb") if isinstance(src, int) else open(src, "rb")) as fh:
            while True:
                chunk = fh.read(4 << 20)
                if not chunk:
                    break
                h.update(chunk)
                size += len(chunk)
                if out is not None:
                    out.write(chunk)
        if out is not None:
            out.flush()
            os.fsync(out.fileno())
    finally:
        if out is not None:
            out.close()
    return h.hexdigest(), size


def _copy_external_data(src: Path, model_dir: Path) -> None:
    """Copy the external data files of the model ``src`` into ``model_dir``, each opened only through
    :func:`sparsify_tui.analysis.loading.open_external_data` (location checked first: relative, no ``..``,
    no link, inside the model's folder), so nothing outside the model's folder is ever read."""
    import onnx

    from sparsify_tui.analysis.loading import all_tensors, external_data_info, open_external_data

    model = onnx.load(str(src), load_external_data=False)
    done: set = set()
    for tensor in all_tensors(model):
        info = external_data_info(tensor, src.name)
        if info is None or info["location"] in done:
            continue
        loc = info["location"]
        fd = open_external_data(src.parent, loc, tensor.name, src.name)
        dst = model_dir / os.path.normpath(loc)
        dst.parent.mkdir(parents=True, exist_ok=True)
        _sha256_copy(fd, dst)
        done.add(loc)


class Workspace:
    """All persistent state of sparsify-tui under one folder.

    ``root``: the folder; default :func:`default_root` (``$SPARSIFY_TUI_HOME`` or the XDG data dir).
    Created on first write. Cheap to construct; holds no open files.
    """

    def __init__(self, root: Union[str, Path, None] = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_root()
        self.root = self.root.absolute()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    # ------------------------------------------------------------------ paths
    @property
    def db_path(self) -> Path:
        """``<root>/workspace.json``."""
        return self.root / "workspace.json"

    @property
    def projects_dir(self) -> Path:
        return self.root / "projects"

    @property
    def jobs_dir(self) -> Path:
        """``<root>/jobs``: job logs (created on demand)."""
        return self.root / "jobs"

    def _ws_db(self, write: bool = False):
        if write:
            self.root.mkdir(parents=True, exist_ok=True)
        return open_db(self.db_path, "workspace", write=write)

    def _project_db_path(self, project_id: str) -> Path:
        return self.projects_dir / project_id / "project.json"

    def _project_db(self, project_id: str, write: bool = False):
        return open_db(self._project_db_path(project_id), "project", write=write)

    def project_dir(self, project_id: str) -> Path:
        """Folder of a project (raises :class:`RecordNotFound` if the project does not exist)."""
        entry = self._index_entry(project_id)
        return self.projects_dir / entry["id"]

    # ------------------------------------------------------------------ projects
    def _index(self) -> List[Dict[str, Any]]:
        if not self.db_path.exists():
            return []
        with self._ws_db() as db:
            return [dict(d) for d in db.table("projects").all()]

    def _index_entry(self, ref: str) -> Dict[str, Any]:
        index = self._index()
        for entry in index:
            if entry["id"] == ref:
                return entry
        matches = [e for e in index if e["name"] == ref] or [
            e for e in index if str(e["name"]).lower() == str(ref).lower()
        ]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            ids = ", ".join(e["id"] for e in matches)
            raise ProjectError(f"{len(matches)} projects are named {ref!r} ({ids}): refer to one by its id")
        raise RecordNotFound(f"no project {ref!r} in {self.root}: run `sparsify-tui list` to see the projects")

    def create_project(
        self,
        model_path: Union[str, Path],
        analysis: Dict[str, Any],
        name: Optional[str] = None,
        description: str = "",
        *,
        link: bool = False,
        batch_size: int = 1,
        dims: Optional[Dict[str, int]] = None,
        setup: Optional[Dict[str, Any]] = None,
        progress=None,
    ) -> Dict[str, Any]:
        """Store a new project for an ONNX model that the caller has already analyzed; return the project dict.

        ``analysis``: the model analysis as plain data (``ModelAnalysis.to_dict()`` at ``batch_size`` and
        ``dims``); it is stored as blob ``analysis.json`` and its totals (params, MACs, FLOPs) and opset go
        into the project's ``model``. The store never reads the model beyond copying it: analyzing is the
        caller's job (:func:`sparsify_tui.services.projects.create_project` does both).
        The model file and its external data files are copied into ``projects/<id>/model/`` (sha256
        recorded), or with ``link=True`` only referenced in place (the sha256 of the .onnx file is still
        recorded). The project folder is built under a temp name and renamed into place only when complete;
        on any error nothing is left behind (no folder, no index entry).

        Raises :class:`ProjectError` when ``name`` is already used by another project.
        """
        src = Path(model_path).expanduser()
        name = (name or src.stem).strip()
        self.check_name_free(name)
        adict = dict(analysis)
        # not resolve(): external data is looked up next to the path the model was analyzed at (onnx's rule)
        src = Path(os.path.abspath(src))

        pid = new_id()
        self.projects_dir.mkdir(parents=True, exist_ok=True)
        # the creating process's pid is in the name: a killed create is removed at start-up (recover)
        tmp_dir = self.projects_dir / f".creating-{pid}-{os.getpid()}"
        final_dir = self.projects_dir / pid
        try:
            tmp_dir.mkdir(parents=True)
            if progress:
                progress("copying model", 0.3)
            if link:
                sha, size = _sha256_copy(src, None)
                stored_path = src
                atomic_write_json(tmp_dir / "model.link.json", {"path": str(src), "sha256": sha})
            else:
                model_dir = tmp_dir / "model"
                model_dir.mkdir()
                sha, size = _sha256_copy(src, model_dir / src.name)
                _copy_external_data(src, model_dir)
                stored_path = final_dir / "model" / src.name
            totals = dict(adict.get("totals") or {})
            opset = (adict.get("model") or {}).get("opset")
            created = now_iso()
            base_setup = {
                "batch_size": int(batch_size),
                "core_count": settings.available_cores(),
                "dims": {str(k): int(v) for k, v in (dims or {}).items()},
                "perf_enabled": True,
                "loss_enabled": True,
                "perf_name": "baseline",
                "loss_name": "baseline",
            }
            base_setup.update(_validate_setup(setup or {}))
            project = {
                "id": pid,
                "name": name,
                "description": description or "",
                "created": created,
                "modified": created,
                "model": {
                    "file": src.name,
                    "path": str(stored_path),
                    "source": str(src),
                    "linked": bool(link),
                    "sha256": sha,
                    "size_bytes": size,
                    "params": totals.get("params"),
                    "macs": totals.get("macs"),
                    "flops": totals.get("flops"),
                    "opset": opset,
                },
                "training": dict(DEFAULT_TRAINING),
                "setup": base_setup,
            }
            if progress:
                progress("saving", 0.8)
            atomic_write_json(tmp_dir / "analysis.json", adict)
            with open_db(tmp_dir / "project.json", "project", write=True) as db:
                db.table("project").insert(project)
            with self._ws_db(write=True) as db:
                self.check_name_free(name, db=db)
                os.replace(tmp_dir, final_dir)
                try:
                    db.table("projects").insert({"id": pid, "name": name, "created": created})
                except BaseException:
                    os.replace(final_dir, tmp_dir)
                    raise
        except BaseException:
            shutil.rmtree(tmp_dir, ignore_errors=True)
            raise
        if progress:
            progress("done", 1.0)
        return project

    #: A temp file or folder whose writer cannot be identified is stale after this many seconds.
    STALE_UNKNOWN_S = 3600.0
    #: Any temp file or folder is stale after this many seconds, even if a process with its pid runs (pid reuse).
    STALE_ANY_S = 24 * 3600.0

    def recover(self) -> Dict[str, List[str]]:
        """Start-up recovery after processes were killed mid-write (``sparsify-tui`` runs it on every start).

        Under the workspace lock (so no create or delete is half-way):

        * a project folder without an index entry (a create killed between moving its folder into place and
          indexing it) is not committed: it is removed;
        * a ``projects/.deleting-<id>`` folder is a delete killed midway (:meth:`delete_project` moves the
          folder first, then unindexes): the index entry and jobs of ``<id>`` are removed if still there.

        Then, without the lock: ``.deleting-*`` folders are removed; ``.creating-<id>-<pid>`` folders of creates
        whose process is gone (or older than a day; old names without a pid after an hour) are removed; and so
        are atomic-write temp files ``.<name>.<pid>.<random>.tmp`` (workspace, projects and their data folders)
        by the same rule. A live writer's files are never touched, so several processes may run this at once.

        Returns ``{"deleted": [project ids whose delete was finished or whose create was undone],
        "removed": [paths removed]}``.
        """
        import time

        from sparsify_tui.store.db import TMP_SUFFIX, pid_alive, tmp_owner_pid

        done: Dict[str, List[str]] = {"deleted": [], "removed": []}
        if not self.projects_dir.is_dir() and not self.root.is_dir():
            return done
        now = time.time()

        def stale(path: Path, pid: Optional[int]) -> bool:
            try:
                age = now - path.lstat().st_mtime
            except OSError:
                return False
            if age > self.STALE_ANY_S:
                return True
            if pid is None:
                return age > self.STALE_UNKNOWN_S
            return pid != os.getpid() and not pid_alive(pid)

        def remove(path: Path) -> None:
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except OSError:
                return
            done["removed"].append(str(path))

        def names() -> List[str]:
            try:
                return sorted(e.name for e in os.scandir(self.projects_dir) if e.is_dir(follow_symlinks=False))
            except OSError:
                return []

        if self.db_path.exists() and self.projects_dir.is_dir():
            with self._ws_db(write=True) as db:
                indexed = {e["id"] for e in db.table("projects").all()}
                for name in names():
                    if _PROJECT_ID.fullmatch(name) and name not in indexed:
                        os.replace(self.projects_dir / name, self.projects_dir / f".deleting-{name}")
                        done["deleted"].append(name)
                for name in names():
                    if name.startswith(".deleting-"):
                        pid = name[len(".deleting-"):]
                        if pid in indexed and not (self.projects_dir / pid).exists():
                            db.table("jobs").remove(Query().project_id == pid)
                            db.table("projects").remove(Query().id == pid)
                            done["deleted"].append(pid)
        folders = [self.root, self.jobs_dir, self.projects_dir]
        for name in names():
            path = self.projects_dir / name
            if name.startswith(".deleting-"):
                remove(path)
            elif name.startswith(".creating-"):
                rest = name[len(".creating-"):].split("-")
                if stale(path, int(rest[1]) if len(rest) > 1 and rest[1].isdigit() else None):
                    remove(path)
            else:
                folders.append(path)
                try:
                    folders.extend(Path(e.path) for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
                except OSError:
                    pass
        for folder in folders:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") and entry.name.endswith(TMP_SUFFIX) and entry.is_file(follow_symlinks=False):
                    path = Path(entry.path)
                    if stale(path, tmp_owner_pid(entry.name)):
                        remove(path)
        return done

    def check_name_free(self, name: str, db=None, exclude: Optional[str] = None) -> None:
        """Raise :class:`ProjectError` when ``name`` is empty or another project (not ``exclude``) has it
        (case-insensitive)."""
        if not name.strip():
            raise ProjectError("a project name cannot be empty: pass --name NAME")
        entries = [dict(d) for d in db.table("projects").all()] if db is not None else self._index()
        for e in entries:
            if e["id"] != exclude and str(e["name"]).lower() == name.lower():
                raise ProjectError(
                    f"a project named {e['name']!r} already exists ({e['id']}): pick another name or delete that one"
                )

    def list_projects(self) -> List[Dict[str, Any]]:
        """Every project dict, oldest first. Projects whose folder is unreadable are skipped."""
        out = []
        for entry in self._index():
            try:
                out.append(self._read_project(entry["id"]))
            except (FileNotFoundError, ProjectError, RecordNotFound):
                continue
        return out

    def _read_project(self, project_id: str) -> Dict[str, Any]:
        path = self._project_db_path(project_id)
        if not path.exists():
            raise RecordNotFound(f"project {project_id} has no data at {path}: delete it with `sparsify-tui delete {project_id} --yes`")
        with self._project_db(project_id) as db:
            docs = db.table("project").all()
        if not docs:
            raise RecordNotFound(f"project {project_id} is empty: delete it with `sparsify-tui delete {project_id} --yes`")
        return dict(docs[0])

    def get_project(self, ref: str) -> Dict[str, Any]:
        """The project dict for an id or a (unique, case-insensitive) name; :class:`RecordNotFound` otherwise."""
        return self._read_project(self._index_entry(ref)["id"])

    def update_project(self, project_id: str, **fields: Any) -> Dict[str, Any]:
        """Change project fields and return the new dict.

        Accepted: ``name``, ``description``; training settings ``optimizer`` (one of SGD, Adam, AdamW,
        RMSprop), ``epochs`` (int > 0), ``init_lr``, ``final_lr`` (float > 0), also as ``training={...}``;
        setup settings ``batch_size, core_count, dims, perf_enabled, loss_enabled, perf_name, loss_name``,
        also as ``setup={...}``; any other key is stored as is (``id, created, model`` cannot change).
        Raises :class:`ProjectError` on an invalid value or a name used by another project.
        """
        pid = self._index_entry(project_id)["id"]
        training: Dict[str, Any] = dict(fields.pop("training", None) or {})
        setup: Dict[str, Any] = dict(fields.pop("setup", None) or {})
        top: Dict[str, Any] = {}
        for key, value in fields.items():
            if key in _TRAINING_KEYS:
                training[key] = value
            elif key in _SETUP_KEYS:
                setup[key] = value
            elif key in _PROTECTED:
                raise ProjectError(f"the project field {key!r} cannot be changed")
            else:
                top[key] = value
        training = _validate_training(training)
        setup = _validate_setup(setup)
        if "name" in top:
            top["name"] = str(top["name"] or "").strip()
            if not top["name"]:
                raise ProjectError("a project name cannot be empty: pass a name")
        if "description" in top:
            top["description"] = str(top["description"] or "")
        with self._ws_db(write=True) as wdb:
            if "name" in top:
                self.check_name_free(top["name"], db=wdb, exclude=pid)
                wdb.table("projects").update({"name": top["name"]}, Query().id == pid)
            with self._project_db(pid, write=True) as db:
                table = db.table("project")
                docs = table.all()
                if not docs:
                    raise RecordNotFound(f"project {pid} is empty: delete it with `sparsify-tui delete {pid} --yes`")
                project = dict(docs[0])
                project.update(top)
                project["training"] = {**project.get("training", {}), **training}
                project["setup"] = {**project.get("setup", {}), **setup}
                project["modified"] = now_iso()
                table.update(project, doc_ids=[docs[0].doc_id])
        return project

    def touch_project(self, project_id: str) -> None:
        """Set the project's ``modified`` time to now."""
        with self._project_db(project_id, write=True) as db:
            db.table("project").update({"modified": now_iso()})

    def delete_project(self, project_id: str) -> None:
        """Delete a project: its index entry, its folder (model copy, records, blobs) and its jobs.

        Running jobs of the project get SIGTERM first. A linked model file is never deleted.
        """
        import signal

        pid = self._index_entry(project_id)["id"]
        with self._ws_db(write=True) as db:
            jobs = db.table("jobs")
            for job in jobs.search(Query().project_id == pid):
                if job.get("status") in ("pending", "running") and job.get("pid") and int(job["pid"]) != os.getpid():
                    try:
                        os.kill(int(job["pid"]), signal.SIGTERM)
                    except (OSError, ValueError):
                        pass
            # move first, then unindex: a kill in between leaves ".deleting-<id>" next to an index entry whose
            # folder is gone, which recover() finishes; the other order would leave an orphan folder forever
            src = self.projects_dir / pid
            trash = self.projects_dir / f".deleting-{pid}"
            if src.exists():
                os.replace(src, trash)
                fsync_dir(self.projects_dir)
            jobs.remove(Query().project_id == pid)
            db.table("projects").remove(Query().id == pid)
        shutil.rmtree(trash, ignore_errors=True)

    def model_path(self, project_id: str) -> Path:
        """Path of the project's model: the copy in the project folder, or the linked original."""
        project = self.get_project(project_id)
        model = project["model"]
        if model.get("linked"):
            return Path(model["path"])
        return self.projects_dir / project["id"] / "model" / model["file"]

    def project_size_bytes(self, project_id: str) -> int:
        """Bytes used by the project folder (model copy, DB, blobs). A linked model is not counted."""
        total = 0
        for dirpath, _dirs, files in os.walk(self.project_dir(project_id)):
            for f in files:
                try:
                    total += os.lstat(os.path.join(dirpath, f)).st_size
                except OSError:
                    pass
        return total

    def analysis_of(self, project_id: str) -> Dict[str, Any]:
        """The stored model analysis (``ModelAnalysis.to_dict()`` of the project's model)."""
        return self.read_blob(project_id, "analysis.json")

    # ------------------------------------------------------------------ records
    def _table_name(self, table: str) -> str:
        if table not in RECORD_TABLES:
            raise ProjectError(f"unknown record table {table!r}: use one of {', '.join(RECORD_TABLES)}")
        return table

    def add_record(self, project_id: str, table: str, record: Dict[str, Any]) -> Dict[str, Any]:
        """Insert ``record`` into a project table; adds ``id`` (unless given), ``created``, ``modified``."""
        pid = self._index_entry(project_id)["id"]
        table = self._table_name(table)
        rec = dict(record)
        rec.setdefault("id", new_id())
        stamp = now_iso()
        rec.setdefault("created", stamp)
        rec["modified"] = stamp
        with self._project_db(pid, write=True) as db:
            if db.table(table).contains(Query().id == rec["id"]):
                raise ProjectError(f"a {table} record with id {rec['id']} already exists")
            db.table(table).insert(rec)
            db.table("project").update({"modified": stamp})
        return rec

    @staticmethod
    def record_blob_key(table: str, record_id: str) -> str:
        """Blob key of a record's large data: ``<table>/<record id>.json``."""
        return f"{table}/{record_id}.json"

    def add_record_with_blob(self, project_id: str, table: str, record: Dict[str, Any], blob: Any) -> Dict[str, Any]:
        """Insert a record whose large data lives in a blob. The blob is written first, then the record: a
        process killed in between leaves an unreferenced file, never a record without its data.
        Returns the stored record (with ``id``)."""
        pid = self._index_entry(project_id)["id"]
        rec = dict(record)
        rec.setdefault("id", new_id())
        self.write_blob(pid, self.record_blob_key(self._table_name(table), rec["id"]), blob)
        return self.add_record(pid, table, rec)

    def replace_record_blob(self, project_id: str, table: str, record_id: str, blob: Any,
                            **fields: Any) -> Dict[str, Any]:
        """Replace a record's blob (written first) and merge ``fields`` into the record (a rerun)."""
        self.get_record(project_id, table, record_id)
        self.write_blob(project_id, self.record_blob_key(self._table_name(table), record_id), blob)
        return self.update_record(project_id, table, record_id, **fields)

    def read_record_blob(self, project_id: str, table: str, record_id: str) -> Any:
        """The blob of a record; :class:`RecordNotFound` (one line, with the fix) when it is missing or empty."""
        try:
            data = self.read_blob(project_id, self.record_blob_key(self._table_name(table), record_id))
        except RecordNotFound:
            data = None
        if not data:
            raise RecordNotFound(f"{table} record {record_id} has no stored result: rerun it or delete it")
        return data

    def list_records(self, project_id: str, table: str) -> List[Dict[str, Any]]:
        """Every record of a table, oldest first."""
        pid = self._index_entry(project_id)["id"]
        table = self._table_name(table)
        with self._project_db(pid) as db:
            return [dict(d) for d in db.table(table).all()]

    def get_record(self, project_id: str, table: str, record_id: str) -> Dict[str, Any]:
        """One record by id; :class:`RecordNotFound` otherwise."""
        for rec in self.list_records(project_id, table):
            if rec.get("id") == record_id:
                return rec
        raise RecordNotFound(f"no {table} record {record_id!r} in project {project_id}")

    def find_record(self, project_id: str, table: str, id_or_name: str) -> Dict[str, Any]:
        """A record by id, else by unique name (the newest when several share the name)."""
        records = self.list_records(project_id, table)
        for rec in records:
            if rec.get("id") == id_or_name:
                return rec
        named = [r for r in records if r.get("name") == id_or_name]
        if named:
            return named[-1]
        raise RecordNotFound(
            f"no {table} record {id_or_name!r} in project {project_id}: list them with `sparsify-tui show {project_id}`"
        )

    def update_record(self, project_id: str, table: str, record_id: str, **fields: Any) -> Dict[str, Any]:
        """Merge ``fields`` into a record (``id``/``created`` cannot change); returns the new record."""
        pid = self._index_entry(project_id)["id"]
        table = self._table_name(table)
        fields.pop("id", None)
        fields.pop("created", None)
        stamp = now_iso()
        with self._project_db(pid, write=True) as db:
            t = db.table(table)
            doc = t.get(Query().id == record_id)
            if doc is None:
                raise RecordNotFound(f"no {table} record {record_id!r} in project {pid}")
            rec = dict(doc)
            rec.update(fields)
            rec["modified"] = stamp
            t.update(fields | {"modified": stamp}, doc_ids=[doc.doc_id])
            db.table("project").update({"modified": stamp})
        return rec

    def delete_record(self, project_id: str, table: str, record_id: str) -> None:
        """Remove a record and its blob ``<table>/<record_id>.json`` if present."""
        pid = self._index_entry(project_id)["id"]
        table = self._table_name(table)
        with self._project_db(pid, write=True) as db:
            removed = db.table(table).remove(Query().id == record_id)
            if not removed:
                raise RecordNotFound(f"no {table} record {record_id!r} in project {pid}")
            db.table("project").update({"modified": now_iso()})
        try:
            self._blob_path(pid, self.record_blob_key(table, record_id)).unlink()
        except FileNotFoundError:
            pass

    def count_records(self, project_id: str) -> Dict[str, int]:
        """Number of records per table, e.g. ``{"perf_profiles": 2, ...}``."""
        pid = self._index_entry(project_id)["id"]
        with self._project_db(pid) as db:
            return {t: len(db.table(t)) for t in RECORD_TABLES}

    # ------------------------------------------------------------------ blobs
    def _blob_path(self, project_id: str, key: str) -> Path:
        base = (self.projects_dir / project_id).resolve()
        path = (base / key).resolve()
        if base not in path.parents or not key.endswith(".json"):
            raise ProjectError(f"invalid blob key {key!r}: use a relative path ending in .json")
        return path

    def write_blob(self, project_id: str, key: str, obj: Any) -> Path:
        """Write a JSON blob (atomically) next to the project DB, e.g. key ``perf_profiles/<id>.json``."""
        pid = self._index_entry(project_id)["id"]
        path = self._blob_path(pid, key)
        atomic_write_json(path, obj)
        return path

    def read_blob(self, project_id: str, key: str) -> Any:
        """Read a JSON blob; :class:`RecordNotFound` if missing."""
        pid = self._index_entry(project_id)["id"]
        path = self._blob_path(pid, key)
        try:
            return read_json(path)
        except FileNotFoundError:
            raise RecordNotFound(f"project {pid} has no {key}: it was deleted or never written") from None

    # ------------------------------------------------------------------ jobs (used by sparsify_tui.jobs)
    def add_job(self, job: Dict[str, Any]) -> Dict[str, Any]:
        """Insert a job dict (must have ``id``)."""
        with self._ws_db(write=True) as db:
            db.table("jobs").insert(dict(job))
        return dict(job)

    def get_job(self, job_id: str) -> Dict[str, Any]:
        """A job dict by id; :class:`RecordNotFound` otherwise."""
        if self.db_path.exists():
            with self._ws_db() as db:
                doc = db.table("jobs").get(Query().id == job_id)
            if doc is not None:
                return dict(doc)
        raise RecordNotFound(f"no job {job_id!r}: run `sparsify-tui job list` to see the jobs")

    def list_jobs(self, project_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """Job dicts, oldest first, optionally only those of one project."""
        if not self.db_path.exists():
            return []
        with self._ws_db() as db:
            jobs = [dict(d) for d in db.table("jobs").all()]
        if project_id is not None:
            jobs = [j for j in jobs if j.get("project_id") == project_id]
        return jobs

    def modify_job(self, job_id: str, fn) -> Dict[str, Any]:
        """Locked read-modify-write of one job: ``fn(job_dict) -> dict | None`` (None: no change)."""
        with self._ws_db(write=True) as db:
            t = db.table("jobs")
            doc = t.get(Query().id == job_id)
            if doc is None:
                raise RecordNotFound(f"no job {job_id!r}: run `sparsify-tui job list` to see the jobs")
            job = dict(doc)
            new = fn(dict(job))
            if new is None:
                return job
            t.update(new, doc_ids=[doc.doc_id])
            job.update(new)
            return job

    def update_job(self, job_id: str, **fields: Any) -> Dict[str, Any]:
        """Merge fields into a job under the lock."""
        return self.modify_job(job_id, lambda job: fields)

    def delete_job(self, job_id: str) -> None:
        with self._ws_db(write=True) as db:
            db.table("jobs").remove(Query().id == job_id)


def _validate_training(t: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in t.items():
        if key not in _TRAINING_KEYS:
            raise ProjectError(f"unknown training setting {key!r}: use one of {', '.join(sorted(_TRAINING_KEYS))}")
        if key == "optimizer":
            match = [o for o in OPTIMIZERS if o.lower() == str(value).lower()]
            if not match:
                raise ProjectError(f"unknown optimizer {value!r}: use one of {', '.join(OPTIMIZERS)}")
            out[key] = match[0]
        elif key == "epochs":
            try:
                iv = int(value)
            except (TypeError, ValueError):
                iv = 0
            if iv <= 0 or float(value) != iv:
                raise ProjectError(f"epochs {value!r} is out of range: give a whole number of 1 or more")
            out[key] = iv
        else:
            try:
                fv = float(value)
            except (TypeError, ValueError):
                fv = -1.0
            if not fv > 0 or fv != fv or fv == float("inf"):
                raise ProjectError(f"{key} {value!r} is out of range: give a number above 0, e.g. 0.01")
            out[key] = fv
    return out


def _validate_setup(s: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in s.items():
        if key not in _SETUP_KEYS:
            raise ProjectError(f"unknown setup setting {key!r}: use one of {', '.join(sorted(_SETUP_KEYS))}")
        if key == "batch_size":
            out[key] = _setting(settings.batch_size, value, "batch size")
        elif key == "core_count":
            out[key] = _setting(settings.core_count, value, "core count")
        elif key == "dims":
            out[key] = _setting(settings.dims, value or {}, "dims")
        elif key in ("perf_enabled", "loss_enabled"):
            out[key] = bool(value)
        else:
            out[key] = str(value)
    return out


def _setting(check, value: Any, flag: str) -> Any:
    """A setup value through the shared validator (:mod:`sparsify_tui.settings`), as a :class:`ProjectError`."""
    from sparsify_tui.errors import SparsifyError

    try:
        return check(value, flag=flag)
    except SparsifyError as err:
        raise ProjectError(str(err)) from None
