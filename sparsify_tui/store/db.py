"""Low-level storage: atomic JSON files, cross-process file locks, TinyDB access with schema versions.

TinyDB has neither atomic writes nor locking, so this module adds both:

* :class:`AtomicJSONStorage` writes the whole database to a temp file in the same folder, ``fsync`` s
  it, ``os.replace`` s it over the old file and ``fsync`` s the folder. A reader (another process) sees
  the old file or the new one, never half of one.
* :func:`file_lock` takes an exclusive ``fcntl.flock`` on ``<db>.lock`` for a read-modify-write. It is
  re-entrant within a process (per path, across threads through an ``RLock``), so nested helpers that
  lock the same database do not deadlock. Lock order is always workspace DB, then project DB.
* Every access opens a fresh :class:`tinydb.TinyDB` on the file, so nothing is cached between
  operations: each read sees what other processes wrote.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional

from tinydb import TinyDB
from tinydb.storages import Storage

from sparsify_tui.errors import ProjectError, RecordNotFound
from sparsify_tui.tempfiles import (  # noqa: F401 - pid_alive: used by Workspace.recover
    TMP_SUFFIX, WRITE_ERRNOS, fsync_dir, pid_alive, write_error)

SCHEMA_VERSION = 1
"""Current schema version of workspace.json and project.json (stored in their ``meta`` table)."""

# Forward migrations: MIGRATIONS[kind][v] upgrades a DB of kind ("workspace"|"project") from v to v+1.
MIGRATIONS: Dict[str, Dict[int, Callable[[TinyDB], None]]] = {"workspace": {}, "project": {}}


def tmp_owner_pid(name: str) -> Optional[int]:
    """The writer's pid in an atomic-write temp name ``.<target>.<pid>.<random>.tmp`` (None for other names)."""
    if not (name.startswith(".") and name.endswith(TMP_SUFFIX)):
        return None
    parts = name[: -len(TMP_SUFFIX)].split(".")
    for part in reversed(parts[:-1]):
        if part.isdigit():
            return int(part)
    return None


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn a write failure the user can fix (disk full, read-only file system, permissions:
    :data:`sparsify_tui.tempfiles.WRITE_ERRNOS`) into a one-line :class:`ProjectError` naming the file."""
    try:
        yield
    except OSError as err:
        if err.errno in WRITE_ERRNOS:
            raise ProjectError(write_error(path, err)) from err
        raise


def atomic_write_text(path: Path, text: str, *, make_parents: bool = True) -> None:
    """Write ``text`` to ``path`` atomically: temp file in the same folder (named after this process's pid, so
    a killed write is recognised and removed at start-up: :meth:`sparsify_tui.store.Workspace.recover`),
    fsync, os.replace, fsync dir. A full disk or a read-only file system is a one-line :class:`ProjectError`
    (:func:`writing`), the temp file removed. ``make_parents=False``: the folder must exist (``FileNotFoundError``
    otherwise): a project's files are never written into a folder a delete has just moved away."""
    path = Path(path)
    with writing(path):
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=TMP_SUFFIX, dir=str(path.parent))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    fsync_dir(path.parent)


def atomic_write_json(path: Path, obj: Any, *, make_parents: bool = True) -> None:
    """:func:`atomic_write_text` of ``json.dumps(obj)`` (compact, UTF-8)."""
    atomic_write_text(path, json.dumps(obj, separators=(",", ":"), ensure_ascii=False), make_parents=make_parents)


def read_json(path: Path) -> Any:
    """Read a JSON file; raise :class:`ProjectError` (one line) when it is not valid JSON."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ProjectError(f"{path} is corrupt ({err.msg} at char {err.pos}): restore it from a backup or delete it")


class AtomicJSONStorage(Storage):
    """TinyDB storage that reads the file fresh on every ``read`` and writes it atomically. ``gone``: the file's
    folder must exist, and this message is the :class:`~sparsify_tui.errors.RecordNotFound` raised when it does
    not (default: the folder is created)."""

    def __init__(self, path: str, gone: Optional[str] = None, **_: Any) -> None:
        self.path = Path(path)
        self.gone = gone

    def read(self) -> Optional[Dict[str, Dict[str, Any]]]:
        try:
            data = read_json(self.path)
        except FileNotFoundError:
            return None
        return data or None

    def write(self, data: Dict[str, Dict[str, Any]]) -> None:
        if self.gone is None:
            atomic_write_json(self.path, data)
            return
        try:
            atomic_write_json(self.path, data, make_parents=False)
        except FileNotFoundError:
            raise RecordNotFound(self.gone) from None

    def close(self) -> None:
        pass


class _FileLock:
    def __init__(self, path: str) -> None:
        self.path = path
        self.rlock = threading.RLock()
        self.fd: Optional[int] = None
        self.depth = 0

    def acquire(self, make_parents: bool = True) -> None:
        self.rlock.acquire()
        try:
            if self.depth == 0:
                with writing(Path(self.path)):
                    if make_parents:
                        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
                self.fd = fd
            self.depth += 1
        except BaseException:
            self.rlock.release()
            raise

    def release(self) -> None:
        self.depth -= 1
        if self.depth == 0 and self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
        self.rlock.release()


_LOCKS: Dict[str, _FileLock] = {}
_LOCKS_GUARD = threading.Lock()
_PID = os.getpid()


@contextlib.contextmanager
def file_lock(db_path: Path, make_parents: bool = True) -> Iterator[None]:
    """Hold an exclusive cross-process lock for ``db_path`` (file ``<db_path>.lock``); re-entrant.
    ``make_parents=False``: the folder must exist (``FileNotFoundError`` otherwise; the lock never creates it)."""
    global _PID
    key = os.path.abspath(str(db_path)) + ".lock"
    with _LOCKS_GUARD:
        if os.getpid() != _PID:  # forked child: inherited lock objects are not ours
            _LOCKS.clear()
            _PID = os.getpid()
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = _FileLock(key)
    lock.acquire(make_parents)
    try:
        yield
    finally:
        lock.release()


def _check_schema(db: TinyDB, kind: str, path: Path, *, write: bool) -> None:
    meta = db.table("meta")
    docs = meta.all()
    version = int(docs[0].get("schema_version", 1)) if docs else None
    if version is None:
        if write:
            meta.insert({"schema_version": SCHEMA_VERSION, "kind": kind})
        return
    if version > SCHEMA_VERSION:
        raise ProjectError(
            f"{path} has schema version {version}, newer than this sparsify-tui supports ({SCHEMA_VERSION}): upgrade sparsify-tui"
        )
    if version < SCHEMA_VERSION and write:
        while version < SCHEMA_VERSION:
            MIGRATIONS[kind][version](db)
            version += 1
        meta.update({"schema_version": version})


@contextlib.contextmanager
def open_db(path: Path, kind: str, *, write: bool = False, gone: Optional[str] = None) -> Iterator[TinyDB]:
    """A fresh TinyDB on ``path``. ``write=True`` holds the file lock for the whole block (read-modify-write)
    and migrates an old schema forward; reads take no lock (files are replaced atomically).

    ``gone``: the file must exist (a project's database: its folder is never made again by a write that raced
    its delete); when it does not, or its folder vanishes before the write, :class:`RecordNotFound` with this
    message, and nothing is written."""
    path = Path(path)
    with contextlib.ExitStack() as stack:
        if write:
            try:
                stack.enter_context(file_lock(path, make_parents=gone is None))
            except FileNotFoundError:
                if gone is None:
                    raise
                raise RecordNotFound(gone) from None
            if gone is not None and not path.is_file():
                raise RecordNotFound(gone)
        db = TinyDB(str(path), storage=AtomicJSONStorage, gone=gone)
        try:
            _check_schema(db, kind, path, write=write)
            yield db
        finally:
            db.close()
