"""Job ``sleep``: a diagnostic job (used by the tests to exercise real job processes)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict

from sparsify_tui.errors import JobError


def run(ctx) -> Dict[str, Any]:
    """Sleep ``args["steps"]`` (default 5) steps of ``args["step_s"]`` seconds (default 0.1).

    Reports ``progress("step i/n", i/n)`` before each step, prints a line per step on stderr, and
    checks cancel every 20 ms. ``args["fail"]`` (a message) raises :class:`JobError` at the end;
    ``args["crash"]`` kills the process with SIGSEGV (a native crash) at the end.
    Returns ``{"steps": n, "slept_s": seconds}``.
    """
    steps = int(ctx.args.get("steps", 5))
    step_s = float(ctx.args.get("step_s", 0.1))
    t0 = time.monotonic()
    for i in range(steps):
        ctx.progress(f"step {i + 1}/{steps}", i / steps)
        print(f"sleep job: step {i + 1}/{steps}", file=sys.stderr, flush=True)
        end = time.monotonic() + step_s
        while True:
            ctx.cancel.check()
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(0.02, left))
    if ctx.args.get("crash"):
        import signal

        print("sleep job: crashing now", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(5)
    if ctx.args.get("fail"):
        raise JobError(str(ctx.args["fail"]))
    ctx.progress("done", 1.0)
    return {"steps": steps, "slept_s": round(time.monotonic() - t0, 3)}
