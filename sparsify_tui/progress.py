"""Progress reporting and cancellation shared by every long-running core function.

Core functions (profiling, apply, benchmark) take two optional keyword arguments:

* ``progress``: a :data:`ProgressFn`, called as ``progress(step, fraction)`` where ``step`` is a short
  human-readable name ("timing", "profiled pass", "quantizing") and ``fraction`` is the overall
  completion in ``[0, 1]``. Callers rate-limit; core functions may call it often.
* ``cancel``: a :class:`CancelToken`. Core functions call ``cancel.check()`` between runs and hand the
  token to the engine's runners (``session.runner(cancel=token)``): the engine registers a hook with
  :meth:`CancelToken.on_cancel` that terminates its in-flight run (onnxruntime: ``RunOptions.terminate``).

Neither imports Textual nor a runtime: the job process and the CLI drive them, the TUI only watches.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

from sparsify_tui.errors import JobCanceled

ProgressFn = Callable[[str, float], None]


def no_progress(step: str, fraction: float) -> None:  # pragma: no cover - trivial
    """A :data:`ProgressFn` that ignores its arguments."""


class CancelToken:
    """A thread-safe cancel flag that also stops in-flight runs.

    ``cancel()`` may be called from a signal handler or another thread. It calls every hook registered
    with :meth:`on_cancel`; engines register one per runner that terminates a running inference
    within milliseconds (onnxruntime: ``RunOptions.terminate = True``).
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._hooks: list = []

    def cancel(self) -> None:
        self._event.set()
        with self._lock:
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    def is_cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`JobCanceled` if cancel was requested."""
        if self._event.is_set():
            raise JobCanceled("job canceled by the user")

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` on :meth:`cancel`, or at once when already cancelled."""
        with self._lock:
            if not self._event.is_set():
                self._hooks.append(hook)
                return
        hook()


def maybe_check(cancel: Optional[CancelToken]) -> None:
    """``cancel.check()`` when a token was given."""
    if cancel is not None:
        cancel.check()
