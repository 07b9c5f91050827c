"""Resident memory of this process, sampled while a step runs (what thinning and reconstruction report as
``peak_memory_bytes``). Linux only: reads ``/proc/self/statm``; elsewhere the figures are 0."""

from __future__ import annotations

import os
import threading


class PeakRSS:
    """Samples this process's resident memory every 2 ms in a thread; ``peak - start`` is what a step added."""

    def __init__(self) -> None:
        self.start = self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, rss_bytes())

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def added(self) -> int:
        return max(0, self.peak - self.start)


def rss_bytes() -> int:
    """Resident set size of this process in bytes (``/proc/self/statm`` field 2 × page size); 0 when unreadable."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
