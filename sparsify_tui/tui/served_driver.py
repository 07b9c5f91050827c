"""The Textual driver of a browser session of ``sparsify-tui serve`` (textual-serve runs the app with
``TEXTUAL_DRIVER=sparsify_tui.tui.served_driver:ServedDriver``; :mod:`sparsify_tui.commands.serve` sets it).

It is Textual's :class:`~textual.drivers.web_driver.WebDriver` (the app's screen goes out on stdout as packets, the
browser's keys come in on stdin), with three changes so that an app never outlives its server:

* **stdin closed ends the app.** When the server goes away (it crashed, or was killed with SIGKILL) the app's stdin
  reaches end-of-file; WebDriver then only stops reading and the app runs on, re-parented to PID 1. Here it quits.
* **A quit before the first frame waits for it.** A ``quit`` from the server (the browser left) that arrives while
  the app is still starting is held until the app is ready: Textual 8 handles an ``ExitApp`` posted before its first
  frame by redrawing in a loop forever (a process at 40-100% CPU that ignores SIGTERM). A browser that opens the page
  and closes it within a second (``chromium --screenshot``) did just that.
* **A quit has a deadline.** An app that has not ended :data:`QUIT_DEADLINE_S` seconds after a quit (it never got
  ready: a server killed while the app started leaves it waiting forever; or a slow shutdown) ends itself with
  ``os._exit``, as the server's SIGKILL would: every write of the workspace is atomic, so nothing is half written.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Optional

from textual.drivers.web_driver import WebDriver

READY_POLL_S = 0.05
"""How often a held quit checks whether the app is ready (seconds)."""
QUIT_DEADLINE_S = 5.0
"""Seconds an app gets to end after a quit before it ends itself (``os._exit``)."""


_QUIT_LOCK = threading.Lock()


class ServedDriver(WebDriver):
    """:class:`WebDriver` that ends the app when stdin closes, defers a quit until the app is ready, and gives a quit a
    deadline (module docstring)."""

    _loop: Optional[asyncio.AbstractEventLoop] = None
    _quitting = False

    def start_application_mode(self) -> None:
        self._loop = asyncio.get_running_loop()
        super().start_application_mode()

    def run_input_thread(self) -> None:
        super().run_input_thread()
        if not self.exit_event.is_set():  # stdin closed (or unreadable) while the app runs: the server is gone
            self.request_quit()

    def on_meta(self, packet_type: str, payload: dict[str, Any]) -> None:
        if packet_type == "quit":
            self.request_quit()
        else:
            super().on_meta(packet_type, payload)

    def request_quit(self) -> None:
        """Exit the app (once it is ready); callable from any thread, any number of times."""
        with _QUIT_LOCK:
            if self._quitting:
                return
            self._quitting = True
        deadline = threading.Timer(QUIT_DEADLINE_S, os._exit, args=(0,))
        deadline.daemon = True
        deadline.start()
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._quit_when_ready)
        except RuntimeError:  # the loop closed meanwhile: the app has ended
            pass

    def _quit_when_ready(self) -> None:
        app = self._app
        # `_dom_ready` is set with the first frame (Textual's `Ready` event); an app without it counts as ready
        if getattr(app, "_dom_ready", True):
            app.exit()
        else:
            asyncio.get_running_loop().call_later(READY_POLL_S, self._quit_when_ready)
