"""The workspace: projects, their records and blobs, and jobs, on TinyDB files (docs/design.md, Data).

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
import json
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
from sparsify_tui.settings import default_root
from sparsify_tui.store.db import (SCHEMA_VERSION, atomic_write_json, file_lock, fsync_dir, open_db, read_json,
                                  writing)
from sparsify_tui.tempfiles import OWNER_LOCK, claim_folder, folder_claimed, release_folder

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


_SHA_CACHE: Dict[tuple, str] = {}
"""sha256 of model files by (path, device, inode, size, mtime, ctime) (:meth:`Workspace.verify_model`)."""


def now_iso() -> str:
    """Current UTC time, ISO 8601 with milliseconds and a ``Z``, e.g. ``2026-11-21T04:01:02.345Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id() -> str:
    """A new random id: 10 hex characters."""
    return uuid.uuid4().hex[:10]


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
        self.check_root()
        if write:
            with writing(self.root):
                self.root.mkdir(parents=True, exist_ok=True)
        return open_db(self.db_path, "workspace", write=write)

    def _project_db_path(self, project_id: str) -> Path:
        return self.projects_dir / project_id / "project.json"

    def _project_db(self, project_id: str, write: bool = False):
        """The project's TinyDB. A write needs its ``project.json`` to exist and never creates the project's folder:
        a write that raced the project's delete is :class:`RecordNotFound`, and the folder stays gone."""
        return open_db(self._project_db_path(project_id), "project", write=write,
                       gone=f"project {project_id} no longer exists (deleted while this ran): nothing was written; "
                            "run `sparsify-tui list` to see the projects")

    def project_stamp(self, project_id: str) -> Optional[tuple]:
        """What changes whenever anything of project ``project_id`` (its id, not a name) is written, by any
        process: a record added, changed or deleted, its settings saved. ``(mtime_ns, size, inode)`` of its
        ``project.json``, which every write replaces (:func:`~sparsify_tui.store.db.atomic_write_text`); None
        when the file is missing. One ``stat``, nothing read: cheap enough to watch every second."""
        try:
            st = self._project_db_path(project_id).stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def project_dir(self, project_id: str) -> Path:
        """Folder of a project (raises :class:`RecordNotFound` if the project does not exist)."""
        entry = self._index_entry(project_id)
        return self.projects_dir / entry["id"]

    # ------------------------------------------------------------------ projects
    def check_root(self) -> None:
        """Refuse (:class:`ProjectError`, one line) a workspace folder that cannot be one: a dangling symlink, a
        file, or a path under a file. A folder that does not exist yet is fine (created on first write)."""
        root = self.root
        what = f"SPARSIFY_TUI_HOME={root}" if os.environ.get("SPARSIFY_TUI_HOME") else f"the workspace folder {root}"
        if root.is_symlink() and not root.exists():
            raise ProjectError(f"{what} is a symbolic link to {os.readlink(root)}, which does not exist: create that "
                               "folder, or set SPARSIFY_TUI_HOME to a folder")
        if root.exists():
            if not root.is_dir():
                raise ProjectError(f"{what} is a file, not a folder: set SPARSIFY_TUI_HOME to a folder, or move the "
                                   "file away")
            return
        for parent in root.parents:
            if parent.is_symlink() and not parent.exists():
                raise ProjectError(f"{what} is under {parent}, a symbolic link to {os.readlink(parent)}, which does "
                                   "not exist: set SPARSIFY_TUI_HOME to a folder")
            if parent.exists():
                if not parent.is_dir():
                    raise ProjectError(f"{what} is under {parent}, which is a file, not a folder: set "
                                       "SPARSIFY_TUI_HOME to a folder")
                return

    def _read_index(self) -> Optional[Dict[str, Any]]:
        """The raw index (workspace.json) as a dict, None when missing or empty; :class:`ProjectError` (one line
        naming the file) when it is not JSON or not an object."""
        self.check_root()
        try:
            text = self.db_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as err:
            raise ProjectError(f"cannot read the workspace index {self.db_path} ({getattr(err, 'strerror', None) or err}): "
                               "fix its permissions, or move it away and sparsify-tui rebuilds it from the project "
                               "folders") from None
        if not text.strip():
            return None
        try:
            raw = json.loads(text)
        except ValueError as err:
            raise ProjectError(f"the workspace index {self.db_path} is not JSON ({str(err).splitlines()[0][:60]}): "
                               f"restore it from a backup, or move it away (mv {self.db_path} "
                               f"{self.db_path}.bad) and sparsify-tui rebuilds it from the project folders") from None
        if not isinstance(raw, dict):
            raise ProjectError(f"the workspace index {self.db_path} holds a JSON {type(raw).__name__}, not a "
                               f"sparsify-tui index: restore it from a backup, or move it away (mv {self.db_path} "
                               f"{self.db_path}.bad) and sparsify-tui rebuilds it from the project folders")
        meta = raw.get("meta")
        for doc in (meta.values() if isinstance(meta, dict) else ()):
            version = doc.get("schema_version") if isinstance(doc, dict) else None
            if isinstance(version, int) and version > SCHEMA_VERSION:
                raise ProjectError(f"{self.db_path} has schema version {version}, newer than this sparsify-tui "
                                   f"supports ({SCHEMA_VERSION}): upgrade sparsify-tui")
        return raw

    def _index(self) -> List[Dict[str, Any]]:
        """The valid index entries (:func:`_valid_entry`); malformed ones are skipped here and repaired by
        :meth:`recover`."""
        raw = self._read_index()
        if raw is None:
            return []
        table = raw.get("projects")
        return [dict(e) for e in table.values() if _valid_entry(e)] if isinstance(table, dict) else []

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
        _check_name(name)
        _check_printable(description or "", "a project description")
        self.check_name_free(name)
        adict = dict(analysis)
        # not resolve(): external data is looked up next to the path the model was analyzed at (onnx's rule)
        src = Path(os.path.abspath(src))

        pid = new_id()
        self.projects_dir.mkdir(parents=True, exist_ok=True)
        # the folder carries its own "unfinished create" marker, a lock file this process holds until the project
        # is indexed (tempfiles.claim_folder): recover() removes a folder only on that proof, and only once no
        # live process holds it (the pid in the name is for people reading ls)
        tmp_dir = self.projects_dir / f".creating-{pid}-{os.getpid()}"
        final_dir = self.projects_dir / pid
        try:
            tmp_dir.mkdir(parents=True)
            claim_folder(tmp_dir)
            if progress:
                progress("copying model", 0.3)
            if link:
                sha, size = _sha256_copy(src, None)
                stored_path = src
                atomic_write_json(tmp_dir / "model.link.json", {"path": str(src), "sha256": sha})
            else:
                model_dir = tmp_dir / "model"
                with writing(model_dir / src.name):
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
            # indexed: the marker goes (a kill before this leaves it on an indexed folder, which recover() drops)
            try:
                os.unlink(final_dir / OWNER_LOCK)
            except OSError:
                pass
        except BaseException:
            shutil.rmtree(tmp_dir, ignore_errors=True)
            raise
        finally:
            release_folder(tmp_dir)
        if progress:
            progress("done", 1.0)
        return project

    #: A temp file or folder whose writer cannot be identified is stale after this many seconds.
    STALE_UNKNOWN_S = 3600.0
    #: Any temp file or folder is stale after this many seconds, even if a process with its pid runs (pid reuse).
    STALE_ANY_S = 24 * 3600.0

    def recover(self) -> Dict[str, List[str]]:
        """Start-up recovery after processes were killed mid-write (``sparsify-tui`` runs it on every start).
        Nothing is ever deleted because the index lacks it: each ``project.json`` is the truth.

        Under the workspace lock (so no create or delete is half-way):

        * the index is checked and repaired (:meth:`_repair_index`): entries that are not ``{"id": <10 hex>,
          "name": str}`` are dropped, and every project folder the index lacks is indexed again from its own
          ``project.json`` (a missing, empty or malformed index is so rebuilt from the folders);
        * a project folder carrying the "unfinished create" marker (:data:`sparsify_tui.tempfiles.OWNER_LOCK`, put
          there by :meth:`create_project` and removed once indexed) that no live process holds is a killed create:
          removed if the index lacks it, else only its marker goes;
        * a ``projects/.deleting-<id>`` folder is a delete killed midway (:meth:`delete_project` moves the
          folder first, then unindexes): the index entry and jobs of ``<id>`` are removed if still there.

        Then, without the lock: ``.deleting-*`` folders are removed; ``.creating-*`` folders (a create killed
        before its folder moved into place) once no live process holds their marker (without one, an older
        version's, after a day); and atomic-write temp files ``.<name>.<pid>.<random>.tmp`` (workspace, projects
        and their data folders) whose writer is gone (or older than a day; old names without a pid after an hour).

        Returns ``{"deleted": [project ids whose delete was finished or whose create was undone], "removed":
        [paths removed], "indexed": [project ids indexed again from their folder]}``. Raises
        :class:`ProjectError` (one line naming the file) when the index is not JSON: nothing is touched then.
        """
        import time

        from sparsify_tui.store.db import TMP_SUFFIX, pid_alive, tmp_owner_pid

        done: Dict[str, List[str]] = {"deleted": [], "removed": [], "indexed": []}
        self.check_root()
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
                return sorted(e.name for e in os.scandir(self.projects_dir) if e.is_dir(follow_symlinks=False)
                              or e.name.startswith(".deleting-"))
            except OSError:
                return []

        if self.projects_dir.is_dir() or self.db_path.exists():
            with file_lock(self.db_path):
                self._repair_index(names(), done)
        folders = [self.root, self.jobs_dir, self.projects_dir]
        for name in names():
            path = self.projects_dir / name
            if name.startswith(".deleting-"):
                remove(path)
            elif name.startswith(".creating-"):
                claimed = folder_claimed(path)
                try:
                    age = now - path.lstat().st_mtime
                except OSError:
                    continue
                if claimed is False or (claimed is None and age > self.STALE_ANY_S):
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

    def _repair_index(self, folder_names: List[str], done: Dict[str, List[str]]) -> None:
        """:meth:`recover`'s work under the workspace lock (see there): read the raw index, drop malformed entries,
        undo killed creates, finish killed deletes, index every project folder the index lacks from its own
        ``project.json``, and write the index back only if something changed."""
        raw = self._read_index()
        changed = raw is None and any(_PROJECT_ID.fullmatch(n) for n in folder_names)
        raw = dict(raw or {})
        tables = {}
        for table in ("meta", "projects", "jobs"):
            value = raw.get(table, {})
            if not isinstance(value, dict):
                value, changed = {}, True
            tables[table] = value
        projects: Dict[str, Any] = {}
        for doc_id, entry in tables["projects"].items():
            if _valid_entry(entry) and str(doc_id).isdigit() and \
                    entry["id"] not in {e["id"] for e in projects.values()}:
                projects[str(doc_id)] = entry
            else:
                changed = True
        jobs = {k: v for k, v in tables["jobs"].items()
                if str(k).isdigit() and isinstance(v, dict) and isinstance(v.get("id"), str)}
        changed = changed or len(jobs) != len(tables["jobs"])
        indexed = {e["id"] for e in projects.values()}

        def unindex(pid: str) -> None:
            nonlocal changed
            for doc_id in [k for k, e in projects.items() if e["id"] == pid]:
                del projects[doc_id]
            for doc_id in [k for k, j in jobs.items() if j.get("project_id") == pid]:
                del jobs[doc_id]
            changed = True

        next_id = max([int(k) for k in projects] + [0]) + 1
        for name in folder_names:
            path = self.projects_dir / name
            if _PROJECT_ID.fullmatch(name):
                marked = (path / OWNER_LOCK).exists()
                if marked and folder_claimed(path) is False:
                    if name in indexed:  # indexed, then killed before the marker went: the create is complete
                        try:
                            os.unlink(path / OWNER_LOCK)
                        except OSError:
                            pass
                    else:  # its own marker proves an unfinished create
                        os.replace(path, self.projects_dir / f".deleting-{name}")
                        done["deleted"].append(name)
                    continue
                if marked or name in indexed:
                    continue
                entry = self._entry_from_folder(name)
                if entry is not None:
                    projects[str(next_id)] = entry
                    next_id += 1
                    indexed.add(name)
                    done["indexed"].append(name)
                    changed = True
            elif name.startswith(".deleting-"):
                pid = name[len(".deleting-"):]
                if pid in indexed and not (self.projects_dir / pid).exists():
                    unindex(pid)
                    indexed.discard(pid)
                    done["deleted"].append(pid)
        if changed:
            if not tables["meta"]:
                tables["meta"] = {"1": {"schema_version": SCHEMA_VERSION, "kind": "workspace"}}
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.db_path, {**raw, "meta": tables["meta"], "projects": projects, "jobs": jobs})

    def _entry_from_folder(self, project_id: str) -> Optional[Dict[str, Any]]:
        """An index entry ``{id, name, created}`` read from ``projects/<id>/project.json``, or None when that file
        is missing, unreadable, or describes another id (the folder is then left alone, never deleted)."""
        try:
            with self._project_db(project_id) as db:
                docs = db.table("project").all()
        except Exception:  # noqa: BLE001 - a damaged folder is left as it is
            return None
        doc = dict(docs[0]) if docs else {}
        if doc.get("id") != project_id or not isinstance(doc.get("name"), str) or not doc["name"].strip():
            return None
        return {"id": project_id, "name": doc["name"], "created": str(doc.get("created") or now_iso())}

    def check_name_free(self, name: str, db=None, exclude: Optional[str] = None) -> None:
        """Raise :class:`ProjectError` when ``name`` is empty, holds a character a name cannot (:func:`_check_name`),
        or another project (not ``exclude``) has it (case-insensitive)."""
        if not name.strip():
            raise ProjectError("a project name cannot be empty: pass --name NAME")
        _check_name(name)
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

    def project_entry(self, ref: str, *, orphans: bool = False) -> Dict[str, Any]:
        """The index entry ``{"id", "name", "created"}`` of a project by id or (unique, case-insensitive) name,
        whether or not its folder can be read (:meth:`delete_project` needs no more);
        :class:`RecordNotFound` otherwise. ``orphans``: an unindexed project folder named ``ref``
        (:meth:`damaged_projects` lists them) is ``{"id": ref, "name": ref, "created": None, "orphan": True}``."""
        try:
            return dict(self._index_entry(ref))
        except RecordNotFound:
            if orphans and self._orphan_folder(ref) is not None:
                return {"id": ref, "name": ref, "created": None, "orphan": True}
            raise

    def _orphan_folder(self, ref: str, indexed: Optional[set] = None) -> Optional[Path]:
        """``projects/<ref>`` when it is a project folder (or a link in its place) the index lacks (``indexed``: the
        ids it has, read when not given) and no create is building; None otherwise."""
        if not isinstance(ref, str) or not _PROJECT_ID.fullmatch(ref):
            return None
        path = self.projects_dir / ref
        if not os.path.lexists(path) or folder_claimed(path):
            return None
        if ref in (indexed if indexed is not None else {e["id"] for e in self._index()}):
            return None
        return path

    def project_problem(self, project_id: str) -> Optional[str]:
        """Why an indexed project cannot be read, with the fix, or None when it can: its ``project.json`` is
        missing, not JSON (a truncated write, a disk error) or holds no project."""
        path = self._project_db_path(project_id)
        fix = f"restore {path} from a backup, or remove the project with `sparsify-tui delete {project_id} --yes`"
        try:
            self._read_project(project_id)
        except FileNotFoundError:
            return f"its project.json is missing: {fix}"
        except RecordNotFound:
            return f"its project.json {'is missing' if not path.exists() else 'holds no project'}: {fix}"
        except ProjectError as err:
            reason = str(err).split(": restore", 1)[0].replace(str(path), "its project.json")
            return f"{reason}: {fix}"
        except (OSError, ValueError) as err:
            return f"its project.json cannot be read ({getattr(err, 'strerror', None) or err}): {fix}"
        return None

    def damaged_projects(self) -> List[Dict[str, Any]]:
        """The projects :meth:`list_projects` skips, each ``{"id", "name", "problem"}`` (``problem`` ends with the
        fix): indexed projects whose ``project.json`` cannot be read (:meth:`project_problem`), and project folders
        the index lacks that start-up recovery could not index again (no readable ``project.json``; ``name`` is
        empty). ``sparsify-tui list`` shows them, so a damaged project is never reported as "no projects"."""
        out = []
        index = self._index()
        for entry in index:
            problem = self.project_problem(entry["id"])
            if problem:
                out.append({"id": entry["id"], "name": entry["name"], "problem": problem})
        try:
            names = sorted(e.name for e in os.scandir(self.projects_dir))
        except OSError:
            names = []
        indexed = {e["id"] for e in index}
        for name in names:
            if self._orphan_folder(name, indexed) is not None:
                out.append({"id": name, "name": "", "problem": (
                    f"folder {self.projects_dir / name} is in no project index and holds no readable project.json: "
                    f"remove it with `sparsify-tui delete {name} --yes`")})
        return out

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
        top.update(_checked_text(top))
        with self._ws_db(write=True) as wdb:
            if not wdb.table("projects").contains(Query().id == pid):  # deleted since it was looked up
                raise RecordNotFound(f"no project {project_id!r}: it was deleted meanwhile, nothing was changed; "
                                     "run `sparsify-tui list` to see the projects")
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
        """Delete a project: its index entry, its folder (model copy, records, blobs) and its jobs; or a project
        folder the index lacks (:meth:`damaged_projects`), by its folder name.

        Running jobs of the project get SIGTERM first (``sparsify-tui delete`` asks before: ``--force``). A linked
        model file is never deleted.
        """
        import signal

        pid = self.project_entry(project_id, orphans=True)["id"]  # an unindexed folder goes the same way
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
            if os.path.lexists(src):  # a folder, or a link that replaced it (dangling or not)
                os.replace(src, trash)
                fsync_dir(self.projects_dir)
            jobs.remove(Query().project_id == pid)
            db.table("projects").remove(Query().id == pid)
        if trash.is_symlink():  # the link goes; what it points to is outside the workspace and is not ours
            trash.unlink()
        else:
            shutil.rmtree(trash, ignore_errors=True)

    def model_path(self, project_id: str, *, verify: bool = True) -> Path:
        """Path of the project's model: the copy in the project folder, or the linked original.

        The copy's name (``model.file`` in ``project.json``) is confined to the project's ``model/`` folder like
        blob keys (no ``..``, no separator, no link out of it); a linked model's path must be the one its
        ``model.link.json`` recorded. With ``verify`` (the default) the file's sha256 must be the one recorded
        when the project was created (:meth:`verify_model`), so nothing measures a swapped or overwritten model as
        the baseline. Raises :class:`ProjectError` (one line) otherwise."""
        project = self.get_project(project_id)
        model = project.get("model") if isinstance(project.get("model"), dict) else {}
        pdir = self.projects_dir / project["id"]
        if model.get("linked"):
            try:
                link = read_json(pdir / "model.link.json")
            except (FileNotFoundError, ProjectError):
                link = {}
            path = Path(str(model.get("path") or ""))
            if not isinstance(link, dict) or not path.is_absolute() or str(path) != link.get("path"):
                raise ProjectError(f"project {project['name']!r}: its linked model path {str(path)!r} is not the one "
                                   f"recorded in {pdir / 'model.link.json'}: restore project.json, or create the "
                                   "project again")
        else:
            name = model.get("file")
            base = (pdir / "model").resolve()
            path = base / str(name)
            if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name \
                    or path.resolve().parent != base:
                raise ProjectError(f"project {project['name']!r}: its model file {name!r} (project.json) is not a "
                                   f"file of {base}: restore project.json, or create the project again")
        if verify:
            self.verify_model(project, path)
        return path

    def verify_model(self, project: Dict[str, Any], path: Path) -> None:
        """Refuse (:class:`ProjectError`) a model file whose sha256 is not the one ``project`` recorded at create.
        Hashes are remembered per file identity (device, inode, size, mtime, ctime) within this process, so a
        file is read once unless it changes."""
        expected = (project.get("model") or {}).get("sha256")
        try:
            st = os.stat(path)
        except OSError as err:
            raise ProjectError(f"project {project['name']!r}: its model {path} cannot be read ({err.strerror}): "
                               "restore it, or create the project again") from None
        key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        actual = _SHA_CACHE.get(key)
        if actual is None:
            actual, _size = _sha256_copy(path, None)
            _SHA_CACHE[key] = actual
        if expected and actual != expected:
            raise ProjectError(f"project {project['name']!r}: its model {path} changed since the project was created "
                               f"(sha256 {actual[:12]}…, recorded {str(expected)[:12]}…), so it is not the baseline "
                               "any more: restore the original file, or create a new project from this model")

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
        names = [repr(r.get("name") or r.get("id")) for r in records[-8:]]
        have = (f"use a name or id of one of its {len(records)}: {', '.join(names)}"
                + (" (the newest 8)" if len(records) > 8 else "")) if records else "it has none yet"
        raise RecordNotFound(f"no {table} record {id_or_name!r} in project {project_id}: {have}")

    def update_record(self, project_id: str, table: str, record_id: str, **fields: Any) -> Dict[str, Any]:
        """Merge ``fields`` into a record (``id``/``created`` cannot change); returns the new record. Raises
        :class:`RecordNotFound`. (:meth:`modify_record` with these fields.)"""
        return self.modify_record(project_id, table, record_id, lambda _rec: fields)

    def modify_record(self, project_id: str, table: str, record_id: str, fn) -> Dict[str, Any]:
        """Locked read-modify-write of one record: ``fn(record_dict) -> fields to merge`` (None: no change), run
        while the project's file lock is held, so an edit made at the same time by another thread or process is
        neither lost nor overwritten with the state read before it (:meth:`update_record` only merges fields).
        Returns the new record. Raises :class:`RecordNotFound`."""
        pid = self._index_entry(project_id)["id"]
        table = self._table_name(table)
        with self._project_db(pid, write=True) as db:
            t = db.table(table)
            doc = t.get(Query().id == record_id)
            if doc is None:
                raise RecordNotFound(f"no {table} record {record_id!r} in project {pid}")
            rec = dict(doc)
            fields = fn(dict(rec))
            if fields is None:
                return rec
            fields = {k: v for k, v in fields.items() if k not in ("id", "created")}
            stamp = now_iso()
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
        base = (self.projects_dir / pid).resolve()
        gone = RecordNotFound(f"project {pid} no longer exists (deleted while this ran): nothing was written; run "
                              "`sparsify-tui list` to see the projects")
        try:  # the folders under the project's, never the project's own (a delete may just have moved it away)
            for folder in reversed([d for d in path.parents if base in d.parents]):
                with writing(folder):
                    folder.mkdir(exist_ok=True)
            atomic_write_json(path, obj, make_parents=False)
        except FileNotFoundError:
            raise gone from None
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
        self.check_root()
        if self.db_path.exists():
            with self._ws_db() as db:
                doc = db.table("jobs").get(Query().id == job_id)
            if doc is not None:
                return dict(doc)
        raise RecordNotFound(f"no job {job_id!r}: run `sparsify-tui job list` to see the jobs")

    def list_jobs(self, project_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """Job dicts, oldest first, optionally only those of one project."""
        self.check_root()
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


def _check_name(text: str, what: str = "a project name") -> None:
    """Refuse a name holding a control character (newline and tab included), a bidirectional control or a
    zero-width character (:func:`sparsify_tui.formatting.name_problem`): a newline forged a row of ``list``, a
    right-to-left override reordered what the terminal showed."""
    from sparsify_tui.formatting import name_problem, safe_line

    problem = name_problem(text)
    if problem:
        raise ProjectError(f"{what} cannot hold {problem} ({safe_line(text)!r}): give printable text (no "
                           "control characters, bidirectional controls or zero-width characters)")


def _check_printable(text: str, what: str) -> None:
    """Refuse control characters (escape sequences would retitle or clear the user's terminal), invisible
    characters that reorder or hide text, and bytes that are not UTF-8 (newlines and tabs are allowed: a
    description may have several lines)."""
    from sparsify_tui.formatting import has_control, safe_text

    if has_control(text):
        raise ProjectError(f"{what} cannot hold control characters or bytes that are not UTF-8 ({safe_text(text)!r}, "
                           "each shown as a symbol): use printable text")


def _checked_text(fields: Dict[str, Any]) -> Dict[str, Any]:
    """``name`` (stripped, not empty) and ``description`` of ``fields`` as stored; :class:`ProjectError` for a bad
    one."""
    out: Dict[str, Any] = {}
    if "name" in fields:
        out["name"] = str(fields["name"] or "").strip()
        if not out["name"]:
            raise ProjectError("a project name cannot be empty: pass a name")
        _check_name(out["name"])
    if "description" in fields:
        out["description"] = str(fields["description"] or "")
        _check_printable(out["description"], "a project description")
    return out


def check_project_fields(fields: Dict[str, Any]) -> None:
    """Raise :class:`ProjectError` (one line) for a value of ``fields`` (``name``, ``description``, the training
    settings) that :meth:`Workspace.update_project` would refuse, writing nothing: a form checks a field in place
    with it. (Whether a name is free is checked when it is saved.)"""
    _checked_text(fields)
    _validate_training({k: v for k, v in fields.items() if k in _TRAINING_KEYS})


def _valid_entry(entry: Any) -> bool:
    """An index entry sparsify-tui wrote: a dict whose ``id`` is a project folder name (10 hex characters, so
    never ``../x`` or a number) and whose ``name`` is a string."""
    return isinstance(entry, dict) and isinstance(entry.get("id"), str) and bool(_PROJECT_ID.fullmatch(entry["id"])) \
        and isinstance(entry.get("name"), str)


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
