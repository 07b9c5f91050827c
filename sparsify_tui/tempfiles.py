"""Temporary folders outside the workspace (profiler traces, quantized models) that a killed process cannot
leak: each is named ``sparsify-<kind>-<pid>-<random>``, and :func:`clean_stale_temp_dirs` (run at start-up)
removes this user's folders whose process is gone, or that are older than a day.

This module is a leaf: it imports nothing of sparsify-tui.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional

PREFIX = "sparsify-"
STALE_ANY_S = 24 * 3600.0
"""A temp folder is removed after this many seconds even if a process with its pid runs (pid reuse)."""


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


def make_temp_dir(kind: str, dir: Optional[str] = None) -> Path:
    """A new private temp folder ``sparsify-<kind>-<pid>-<random>`` (in ``dir``, default the temp folder)."""
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-{os.getpid()}-", dir=dir))


@contextlib.contextmanager
def temp_dir(kind: str, dir: Optional[str] = None) -> Iterator[Path]:
    """:func:`make_temp_dir` as a context manager: the folder and everything in it are removed on exit (a killed
    process leaves it to :func:`clean_stale_temp_dirs`)."""
    path = make_temp_dir(kind, dir)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _owner_pid(name: str) -> Optional[int]:
    parts = name[len(PREFIX):].split("-")
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else None


def clean_stale_temp_dirs(folders: Optional[List[str]] = None) -> List[str]:
    """Remove this user's ``sparsify-<kind>-<pid>-*`` folders (in ``/dev/shm`` and the temp folder) whose
    process is gone or that are older than a day. Never follows links; other users' folders are left alone.
    Returns the removed paths."""
    removed: List[str] = []
    now = time.time()
    uid = os.geteuid()
    for folder in folders if folders is not None else [d for d in (fast_tmp(), tempfile.gettempdir()) if d]:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            pid = _owner_pid(entry.name) if entry.name.startswith(PREFIX) else None
            if pid is None:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
                continue
            if pid == os.getpid() or (pid_alive(pid) and now - st.st_mtime < STALE_ANY_S):
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed
