"""The measuring lock: one measuring job at a time (docs/design.md, Jobs), safe against planted links.

Where it lives (:func:`measure_lock_path`):

* ``$SPARSIFY_TUI_MEASURE_LOCK`` when set. This is how several users share **one machine-wide lock**: an
  admin creates the file once (``install -m 0644 /dev/null /var/lock/sparsify-tui.lock``) and every user
  sets the variable. ``flock`` works on a read-only descriptor, so other users need no write access.
* otherwise a **per-user** lock: ``$XDG_RUNTIME_DIR/sparsify-tui/measure.lock`` when ``$XDG_RUNTIME_DIR``
  is a private (0700) folder of this user, else ``<temp dir>/sparsify-tui-<uid>/measure.lock``, whose folder
  is created 0700 and must be a real folder owned by this user with no group/other access.

How it is opened (:meth:`MeasureLock.try_acquire`), so a planted file can never be damaged:

* ``O_CREAT | O_EXCL | O_NOFOLLOW`` first (a new file is ours), else ``O_NOFOLLOW`` without ``O_CREAT``: a
  symbolic link at the path is refused (``ELOOP``), never followed, and a dangling one never creates its target;
* ``fstat`` of the open descriptor: anything but a regular file with one link (a hard link to someone's
  file) is refused;
* the holder's job id is written into the file (and blanked on release) only when this user owns it;
  the file is never ``chmod``-ed, and never truncated or written when it belongs to someone else.

Refusals raise :class:`sparsify_tui.errors.JobError` with one line naming the path and the fix.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Optional

from sparsify_tui.errors import JobError

MEASURE_LOCK_ENV = "SPARSIFY_TUI_MEASURE_LOCK"
LOCK_NAME = "measure.lock"

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _private_dir(path: Path) -> bool:
    """True when ``path`` is a real folder (not a link) owned by this user with no group/other access."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def _ensure_private_dir(path: Path) -> Path:
    """Create ``path`` 0700 if missing, then check it is this user's private folder; ``JobError`` otherwise."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as err:
        raise JobError(f"cannot create the measuring-lock folder {path} ({err.strerror}): set "
                       f"${MEASURE_LOCK_ENV} to a file in a folder of yours") from None
    if not _private_dir(path):
        raise JobError(f"measuring-lock folder {path} is not a private folder of yours (a link, another owner, or "
                       f"group/other access): remove it, or set ${MEASURE_LOCK_ENV} to a file in a folder of yours")
    return path


def default_lock_dir() -> Path:
    """The per-user folder of the lock (not created): ``$XDG_RUNTIME_DIR/sparsify-tui`` when that runtime dir is
    private to this user, else ``<temp dir>/sparsify-tui-<uid>``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _private_dir(Path(runtime)):
        return Path(runtime) / "sparsify-tui"
    return Path(tempfile.gettempdir()) / f"sparsify-tui-{os.geteuid()}"


def measure_lock_path() -> Path:
    """The measuring lock file: ``$SPARSIFY_TUI_MEASURE_LOCK``, else the per-user default (module docstring)."""
    explicit = os.environ.get(MEASURE_LOCK_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return default_lock_dir() / LOCK_NAME


class MeasureLock:
    """Exclusive ``flock`` on :func:`measure_lock_path` (path read when constructed); the holder writes its job
    id into the file when the file is its own (see the module docstring for the safety rules)."""

    def __init__(self) -> None:
        self.explicit = bool(os.environ.get(MEASURE_LOCK_ENV))
        self.path = measure_lock_path()
        self.fd: Optional[int] = None
        self.writable = False

    def _refuse(self, what: str) -> JobError:
        return JobError(f"measuring lock {self.path} {what}: refusing to use it; remove it (it is not "
                        f"sparsify-tui's) or set ${MEASURE_LOCK_ENV} to a file of yours")

    def _open(self) -> int:
        if self.explicit:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise JobError(f"cannot create the folder of measuring lock {self.path} ({err.strerror}): set "
                               f"${MEASURE_LOCK_ENV} to a file in an existing folder") from None
        else:
            _ensure_private_dir(self.path.parent)
        mode = 0o644 if self.explicit else 0o600
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)
        except (FileExistsError, PermissionError):
            fd = None
        except OSError as err:
            raise JobError(f"cannot create measuring lock {self.path} ({err.strerror}): set "
                           f"${MEASURE_LOCK_ENV} to a file in a folder of yours") from None
        if fd is None:
            fd = self._open_existing()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise self._refuse("is not a regular file")
        if st.st_nlink != 1:
            os.close(fd)
            raise self._refuse(f"has {st.st_nlink} hard links (it may be someone else's file)")
        accmode = os.O_ACCMODE if hasattr(os, "O_ACCMODE") else 3
        import fcntl

        self.writable = st.st_uid == os.geteuid() and fcntl.fcntl(fd, fcntl.F_GETFL) & accmode == os.O_RDWR
        return fd

    def _open_existing(self) -> int:
        for flags in (os.O_RDWR, os.O_RDONLY):
            try:
                return os.open(self.path, flags | _NOFOLLOW | _CLOEXEC)
            except PermissionError:
                continue
            except FileNotFoundError:
                # removed between the two opens: create it again (exclusively, never through a link)
                try:
                    return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
                except OSError:
                    break
            except OSError as err:
                if err.errno == errno.ELOOP:
                    raise self._refuse("is a symbolic link") from None
                raise JobError(f"cannot open measuring lock {self.path} ({err.strerror}): set "
                               f"${MEASURE_LOCK_ENV} to a file of yours") from None
        raise JobError(f"cannot open measuring lock {self.path} (permission denied): set ${MEASURE_LOCK_ENV} to a "
                       "file of yours")

    def try_acquire(self, holder: str) -> bool:
        """Take the lock without waiting; True when taken. ``holder`` (``"<job id> <pid> <workspace>"``) is
        written into the file when it is ours. Raises ``JobError`` for a refused lock file."""
        import fcntl

        if self.fd is None:
            self.fd = self._open()
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if self.writable:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, holder.encode(), 0)
        return True

    def holder(self) -> Optional[str]:
        """The job id written by the current holder, if any (read through the open descriptor)."""
        if self.fd is None:
            return None
        try:
            text = os.pread(self.fd, 512, 0).decode("utf-8", "replace").strip()
        except OSError:
            return None
        return text.split()[0] if text else None

    def release(self) -> None:
        """Blank the holder (our own file only), unlock and close."""
        import fcntl

        if self.fd is None:
            return
        try:
            if self.writable:
                os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
            self.fd = None
