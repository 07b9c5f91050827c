"""Progress reporting and cancellation shared by every long-running core function.

Core functions (profiling, apply, benchmark) take two optional keyword arguments:

* ``progress``: a :data:`ProgressFn`, called as ``progress(step, fraction)`` where ``step`` is a short
  human-readable name ("timing", "profiled pass", "quantizing") and ``fraction`` is the overall
  completion in ``[0, 1]``. Callers rate-limit; core functions may call it often.
* ``cancel``: a :class:`CancelToken`. Core functions call ``cancel.check()`` between runs and pass
  ``cancel.run_options()`` to every ``InferenceSession.run`` so a cancel also terminates a long run.

Neither imports Textual: the job process and the CLI drive them, the TUI only watches.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

from sparsify_tui.errors import JobCanceled

ProgressFn = Callable[[str, float], None]


def no_progress(step: str, fraction: float) -> None:  # pragma: no cover - trivial
    """A :data:`ProgressFn` that ignores its arguments."""


class CancelToken:
    """A thread-safe cancel flag that also terminates in-flight onnxruntime runs.

    ``cancel()`` may be called from a signal handler or another thread. Every
    ``onnxruntime.RunOptions`` handed out by :meth:`run_options` gets ``terminate = True``, which
    makes a running ``session.run`` return with an error within milliseconds.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._run_options: list = []

    def cancel(self) -> None:
        self._event.set()
        with self._lock:
            for ro in self._run_options:
                ro.terminate = True

    def is_cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`JobCanceled` if cancel was requested."""
        if self._event.is_set():
            raise JobCanceled("job canceled by the user")

    def run_options(self):
        """A new ``onnxruntime.RunOptions`` that this token terminates on cancel."""
        import onnxruntime as ort

        ro = ort.RunOptions()
        with self._lock:
            if self._event.is_set():
                ro.terminate = True
            self._run_options.append(ro)
        return ro


def maybe_check(cancel: Optional[CancelToken]) -> None:
    """``cancel.check()`` when a token was given."""
    if cancel is not None:
        cancel.check()
