"""Temporary folders and files that a killed process cannot leak, and output files that never land half-written.

* **Temp folders** outside the workspace (profiler traces, quantized models): each is named
  ``sparsify-<kind>-<pid>-<random>`` and holds a lock file (:data:`OWNER_LOCK`) its creating process keeps an
  exclusive ``flock`` on for the folder's life. :func:`clean_stale_temp_dirs` (run at start-up) removes this user's
  folders whose lock nobody holds: the kernel drops a lock when its process ends, however it ends, and a lock is
  seen across PID namespaces (a container's process and a host's share ``/dev/shm``), which a pid in a name is not.
  A folder without a lock file (an older sparsify-tui, or one being created this instant) is removed only when it
  is older than a day. The pid in the name is for people reading ``ls``, never a reason to delete.
* **Atomic files** (:func:`atomic_output`, :func:`write_output`): written as a temp file in the target's own folder,
  fsynced, then renamed over the target, so a reader sees the old file or the new one, never half of one. A
  target that is a symlink or an existing non-regular file (a folder, a FIFO, a device) is refused: a rename
  replaces a link instead of writing through it, and refusing says so instead of surprising anyone.

This module is a leaf: it imports nothing of sparsify-tui but :mod:`sparsify_tui.errors`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Union

from sparsify_tui.errors import SparsifyError

PREFIX = "sparsify-"
STALE_ANY_S = 24 * 3600.0
"""A temp folder without a lock file (:data:`OWNER_LOCK`) is removed only after this many seconds."""
OWNER_LOCK = ".sparsify-owner.lock"
"""The lock file inside a folder that its creating process holds (``flock``) while it uses the folder."""
TMP_SUFFIX = ".tmp"
"""Suffix of the temp files of atomic writes: ``.<name>.<pid>.<random>.tmp`` next to the target."""

_HELD: Dict[str, int] = {}  # folder -> fd of the lock this process holds on it
_HELD_GUARD = threading.Lock()


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists and is not a zombie (another user's process counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
        return data[data.rindex(")") + 2:].split()[0] not in ("Z", "X")
    except (OSError, ValueError, IndexError):
        return True


def fast_tmp() -> Optional[str]:
    """``/dev/shm`` when usable (RAM-backed: traces and optimized graphs are written there), else None (the
    default temp folder)."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def claim_folder(path: Union[str, Path]) -> None:
    """Create ``<path>/``:data:`OWNER_LOCK` and hold an exclusive ``flock`` on it until :func:`release_folder`
    (or this process ends): while held, :func:`folder_claimed` is True in every process on this host, whatever its
    PID namespace. Folders this process claimed and that are gone since are released here too (their callers
    removed them with ``shutil.rmtree``)."""
    key = os.path.abspath(str(path))
    fd = os.open(os.path.join(key, OWNER_LOCK), os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    with _HELD_GUARD:
        for gone in [k for k in _HELD if not os.path.isdir(k)]:
            with contextlib.suppress(OSError):
                os.close(_HELD.pop(gone))
        _HELD[key] = fd


def release_folder(path: Union[str, Path], *, remove_lock: bool = False) -> None:
    """Drop this process's claim on ``path`` (:func:`claim_folder`); ``remove_lock`` deletes the lock file first
    (a folder that stays, such as a finished project)."""
    key = os.path.abspath(str(path))
    with _HELD_GUARD:
        fd = _HELD.pop(key, None)
    if remove_lock:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(key, OWNER_LOCK))
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def folder_claimed(path: Union[str, Path]) -> Optional[bool]:
    """Whether a live process holds ``path``'s lock (:func:`claim_folder`): True (held, by any process,
    this one included), False (the lock file exists and nobody holds it), None (no lock file: unknown)."""
    key = os.path.abspath(str(path))
    with _HELD_GUARD:
        if key in _HELD:
            return True
    try:
        fd = os.open(os.path.join(key, OWNER_LOCK), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        return True if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else None
    finally:
        os.close(fd)  # closing drops the lock taken just now
    return False


def make_temp_dir(kind: str, dir: Optional[str] = None) -> Path:
    """A new private temp folder ``sparsify-<kind>-<pid>-<random>`` (in ``dir``, default the temp folder), claimed
    by this process (:func:`claim_folder`) so no other process's start-up removes it while this one lives."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-{os.getpid()}-", dir=dir))
    try:
        claim_folder(path)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


@contextlib.contextmanager
def temp_dir(kind: str, dir: Optional[str] = None) -> Iterator[Path]:
    """:func:`make_temp_dir` as a context manager: the folder and everything in it are removed on exit (a killed
    process leaves it to :func:`clean_stale_temp_dirs`)."""
    path = make_temp_dir(kind, dir)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        release_folder(path)


def _owner_pid(name: str) -> Optional[int]:
    parts = name[len(PREFIX):].split("-")
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else None


def clean_stale_temp_dirs(folders: Optional[List[str]] = None) -> List[str]:
    """Remove this user's ``sparsify-<kind>-<pid>-*`` folders (in ``/dev/shm`` and the temp folder) that no live
    process holds (:func:`folder_claimed` False), and those without a lock file once older than a day. Never
    follows links; other users' folders are left alone. Returns the removed paths."""
    removed: List[str] = []
    now = time.time()
    uid = os.geteuid()
    for folder in folders if folders is not None else [d for d in (fast_tmp(), tempfile.gettempdir()) if d]:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.startswith(PREFIX) or _owner_pid(entry.name) is None:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
                continue
            claimed = folder_claimed(entry.path)
            if claimed or (claimed is None and now - st.st_mtime < STALE_ANY_S):
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


# ------------------------------------------------------------------------------------------------ atomic files
def check_output_target(path: Union[str, Path], flag: str = "") -> Path:
    """``path`` as an output target: refused (``SparsifyError``, one line) when it is a symlink (even a dangling
    one) or exists and is not a regular file. ``flag`` names the option in the message (``-o``)."""
    p = Path(path)
    named = f"{flag} {p}" if flag else str(p)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as err:
        raise SparsifyError(f"cannot write {named} ({err.strerror}): choose another path") from None
    if stat.S_ISLNK(st.st_mode):
        raise SparsifyError(f"{named} is a symbolic link (to {os.readlink(p)}): sparsify-tui never writes through a "
                            "link; give the real file's path or a new name")
    if stat.S_ISDIR(st.st_mode):
        raise SparsifyError(f"{named} is a folder: give a file path inside it, e.g. {p / 'out'}")
    if not stat.S_ISREG(st.st_mode):
        raise SparsifyError(f"{named} exists and is not a regular file (a device, FIFO or socket): choose another "
                            "path")
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(targets: Sequence[Union[str, Path]], *, mode: Optional[int] = None,
                  fsync: bool = True) -> Iterator[List[Path]]:
    """Write several files that appear together: yields one temp path per target (same file name, inside a private
    folder ``.<name>.<pid>.<random>.tmp`` in the first target's folder; every target must share that folder),
    and on a normal exit renames each over its target. A target that is a symlink or not a regular file is refused
    before anything is written and again just before the rename (:func:`check_output_target`). On any error
    nothing is left: the temp folder goes, the targets are untouched (a rename already done stays done).

    ``mode``: the files' permissions (default ``0o666`` less the umask, like ``open(path, "w")``); ``fsync``: flush
    each file and the folder to disk. Raises ``SparsifyError`` (one line) for a missing or unwritable folder, a
    full disk or a read-only file system; other errors propagate."""
    paths = [Path(t) for t in targets]
    folder = paths[0].parent
    if any(p.parent != folder for p in paths):
        raise ValueError("atomic_output: every target must be in one folder")
    for p in paths:
        check_output_target(p)
    if not folder.is_dir():
        raise SparsifyError(f"folder {folder} does not exist: create it (mkdir -p {folder}) or choose another path")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{paths[0].name}.{os.getpid()}.", suffix=TMP_SUFFIX, dir=str(folder)))
    except OSError as err:
        raise SparsifyError(f"cannot write {paths[0]} ({err.strerror}): choose a folder you can write to") from None
    try:
        staged = [tmp / p.name for p in paths]
        try:
            yield staged
            perm = (0o666 & ~_umask()) if mode is None else mode
            for s in staged:
                if s.exists():
                    os.chmod(s, perm)
                    if fsync:
                        with open(s, "rb") as fh:
                            os.fsync(fh.fileno())
            for s, p in zip(staged, paths):
                if s.exists():
                    check_output_target(p)
                    os.replace(s, p)
        except OSError as err:
            if err.errno in WRITE_ERRNOS:
                raise SparsifyError(write_error(paths[0], err)) from None
            raise
        if fsync:
            fsync_dir(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_output(path: Union[str, Path], data: Union[str, bytes], *, mode: Optional[int] = None,
                 fsync: bool = True) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically (:func:`atomic_output`). Returns ``path``."""
    p = Path(path)
    with atomic_output([p], mode=mode, fsync=fsync) as (tmp,):
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
    return p


WRITE_ERRNOS = frozenset((errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG,
                          errno.EFBIG))
"""``errno`` values of a write that the user can fix (disk full, read-only, permissions, a name too long):
reported as one line (:func:`write_error`), not as a traceback."""


def write_error(path: Union[str, Path, None], err: OSError) -> str:
    """One line for a failed write: the file, the reason, and the fix."""
    where = err.filename or path
    fix = {errno.ENOSPC: "free some space on that disk and retry",
           errno.EDQUOT: "free some space within your quota and retry",
           errno.EROFS: "the file system is mounted read-only: use a writable one (e.g. set SPARSIFY_TUI_HOME, or "
                        "-o elsewhere)",
           errno.EACCES: "you may not write there: fix its permissions or choose another path",
           errno.EPERM: "you may not write there: fix its permissions or choose another path"}
    what = f"cannot write {where}" if where else "a write failed"
    return f"{what} ({err.strerror or err}): {fix.get(err.errno, 'choose another path')}"


def fsync_dir(path: Union[str, Path]) -> None:
    """fsync a directory so a rename inside it is durable (no-op where unsupported)."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
