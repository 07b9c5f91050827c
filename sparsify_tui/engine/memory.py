"""Memory of this process: resident memory sampled while a step runs (what thinning and reconstruction report as
``peak_memory_bytes``; Linux only: reads ``/proc/self/statm``, elsewhere the figures are 0), the limit a job runs
under (:func:`memory_limit`) and the allocation failures it turns into one line (:func:`allocation_failure`)."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from typing import Iterator, Optional


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


def data_bytes() -> int:
    """This process's data segment (``VmData`` of ``/proc/self/status``: its private writable memory, what
    ``RLIMIT_DATA`` counts) in bytes; 0 when unreadable."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


@contextlib.contextmanager
def memory_limit(limit_bytes: Optional[int]) -> Iterator[None]:
    """Let this process allocate at most ``limit_bytes`` more while the block runs (None: no limit): the soft
    ``RLIMIT_DATA`` (private writable memory: heap, anonymous maps, thread stacks; not the model files mapped read
    only, nor address space reserved and never made writable) is set to what the process holds now plus the limit,
    and restored after (a soft limit can go back up to the hard one). An allocation beyond it fails at once, as
    ``MemoryError`` in numpy and "Failed to allocate memory" in onnxruntime (:func:`allocation_failure`), instead of
    swapping the machine or waking the kernel's OOM killer. Does nothing where ``resource`` or ``VmData`` are
    missing."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        resource = None
    held = data_bytes()
    if resource is None or limit_bytes is None or not held:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    want = held + int(limit_bytes)
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft != resource.RLIM_INFINITY and soft <= want:  # already tighter
        yield
        return
    resource.setrlimit(resource.RLIMIT_DATA, (want, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


_ORT_ALLOC = re.compile(r"Failed to allocate memory for requested buffer of size (\d+)")
_NUMPY_ALLOC = re.compile(r"Unable to allocate ([\d.]+) ([KMGTPE]?i?B)")


def allocation_failure(err: BaseException) -> Optional[int]:
    """When ``err`` (or an error it was raised from) is a failed allocation, the bytes it asked for (0 when
    unknown); None otherwise. Knows ``MemoryError`` (numpy's says "Unable to allocate 2.00 GiB"), onnxruntime's
    "Failed to allocate memory for requested buffer of size N" and C++'s ``std::bad_alloc``."""
    seen = 0
    while err is not None and seen < 8:
        text = str(err)
        m = _ORT_ALLOC.search(text)
        if m:
            return int(m.group(1))
        m = _NUMPY_ALLOC.search(text)
        if m:
            units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}
            return int(float(m.group(1)) * units.get(m.group(2), 1))
        if isinstance(err, MemoryError) or "bad_alloc" in text:
            return 0
        err = err.__cause__ or err.__context__
        seen += 1
    return None
