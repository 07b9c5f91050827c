"""Thread workers for the TUI's workspace, job and core calls, and how their results and failures come back.

Every call that reads or writes the workspace, starts a job process (``jobs.submit`` runs ``Popen``) or runs
core code is a widget method decorated with :func:`app_work`:

* It runs in a thread worker, never on the event loop.
* It posts its result as a typed Message to the widget that started it, with :func:`post_result`. The
  widget handles that message like any other. A worker that a newer one of the same group superseded
  (``exclusive``) posts nothing.
* A failure (an exception out of the method) is reported once, by the App's one
  ``on_worker_state_changed`` handler: the error dialog (``App.show_error``), then a
  :class:`sparsify_tui.tui.messages.WorkFailed` to the widget that started it, so the widget can tidy up
  (re-enable a button, replace "Loading…"). That is why the worker is owned by the App: Textual posts
  ``Worker.StateChanged`` only to the worker's own node (the message does not bubble), and harlequin
  gets its single handler the same way, with every worker on the App.

A worker whose failure is the answer to a form (a model path being inspected, an export preview, a job
submitted from a dialog) catches it and returns it inside its result message, for the form to show inline.

``textual.work`` is still the right tool for widget-local work that touches no store, job or core call.
"""

from __future__ import annotations

from functools import partial, wraps
from typing import Any, Callable, TypeVar

from textual.dom import DOMNode
from textual.message import Message
from textual.worker import Worker, get_current_worker

ReturnT = TypeVar("ReturnT")


class AppWorker(Worker):
    """A thread worker owned by the App and started by ``origin`` (the widget its messages go to)."""

    def __init__(self, origin: DOMNode, work: Callable[[], Any], *, name: str, group: str,
                 description: str) -> None:
        super().__init__(origin.app, work, name=name, group=group, description=description,
                         exit_on_error=False, thread=True)
        self.origin = origin


def app_work(*, group: str, description: str, exclusive: bool = True
             ) -> Callable[[Callable[..., ReturnT]], Callable[..., AppWorker]]:
    """Decorate a widget method so that calling it starts it in an :class:`AppWorker` (a thread).

    ``group`` names the kind of work (shown in the worker list and in :class:`WorkFailed`);
    ``exclusive`` cancels the same widget's unfinished worker of the same group first, as
    ``textual.work(exclusive=True)`` does for a node. Returns the worker.
    """

    def decorator(method: Callable[..., ReturnT]) -> Callable[..., AppWorker]:
        @wraps(method)
        def start(origin: DOMNode, *args: Any, **kwargs: Any) -> AppWorker:
            app = origin.app
            if exclusive:
                for other in list(app.workers):
                    if (isinstance(other, AppWorker) and other.origin is origin and other.group == group
                            and not other.is_finished):
                        other.cancel()
            worker = AppWorker(origin, partial(method, origin, *args, **kwargs), name=method.__name__,
                               group=group, description=description)
            app.workers.add_worker(worker, start=True, exclusive=False)
            return worker

        return start

    return decorator


def post_result(origin: DOMNode, message: Message) -> bool:
    """From inside a worker: post ``message`` to ``origin`` unless this worker was cancelled (superseded
    by a newer one of its group, or its widget went away). Thread-safe. True when posted."""
    try:
        if get_current_worker().is_cancelled:
            return False
    except Exception:  # not in a worker (a direct call, e.g. from a test): post it
        pass
    return origin.post_message(message)
