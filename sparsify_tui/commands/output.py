"""What every headless command prints with: JSON on stdout, warnings and progress on stderr, and whether the
TUI can run in this terminal (:mod:`sparsify_tui.cli` is the entry point that uses them too)."""

from __future__ import annotations

import json
import sys
from typing import Any, Optional


def print_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (numpy scalars and paths are converted)."""

    def default(o: Any) -> Any:
        if hasattr(o, "item"):
            return o.item()
        if hasattr(o, "tolist"):
            return o.tolist()
        if hasattr(o, "to_dict"):
            return o.to_dict()
        return str(o)

    json.dump(data, sys.stdout, indent=2, default=default)
    sys.stdout.write("\n")


def add_memory_option(parser) -> None:
    """``--max-memory SIZE`` on a command that runs a job: the memory the job may allocate (default: what is
    available when it starts; :func:`sparsify_tui.analysis.system.job_memory_limit`). :func:`use_memory_option` applies
    it."""
    parser.add_argument("--max-memory", default=None, metavar="SIZE",
                        help="memory the job may allocate, e.g. 16G or none (default: what is available when it "
                             "starts; also SPARSIFY_TUI_MAX_MEMORY); beyond it the job ends in one line")


def use_memory_option(args) -> None:
    """Check ``--max-memory`` (one line when bad) and hand it to the job through ``$SPARSIFY_TUI_MAX_MEMORY``."""
    import os

    from sparsify_tui import settings

    value = getattr(args, "max_memory", None)
    if value is not None:
        settings.memory_size(value)
        os.environ[settings.MAX_MEMORY_ENV] = str(value).strip()


def print_warnings(warnings) -> None:
    """Print each warning (for example NaN/Inf weights) as ``sparsify-tui: warning: ...`` on stderr."""
    for w in warnings or []:
        print(f"sparsify-tui: warning: {w}", file=sys.stderr)


def stderr_progress(quiet: bool = False):
    """A :data:`sparsify_tui.progress.ProgressFn` printing ``NN.N%  step`` on stderr, at most twice a second
    (plus every step change and the end), so stdout stays pure JSON. Prints nothing when ``quiet`` or once stderr's reader has gone (a broken pipe
    never fails the job), and
    nothing before the work has started (fraction 0: loading and preparing), so a model or input refused at
    that point is exactly one error line on stderr."""
    import time

    last = [0.0, ""]
    closed = [False]  # stderr piped into a reader that left (`2>&1 | head`): the work goes on without progress

    def progress(step: str, fraction: float) -> None:
        if quiet or closed[0] or not fraction > 0:
            return
        now = time.monotonic()
        if step != last[1] or now - last[0] >= 0.5 or fraction >= 1.0:
            last[0], last[1] = now, step
            try:
                print(f"  {fraction * 100:5.1f}%  {step}", file=sys.stderr, flush=True)
            except (BrokenPipeError, ValueError):  # ValueError: the stream was closed
                closed[0] = True

    return progress


def terminal_problem() -> Optional[str]:
    """Why the TUI cannot run here, or None: it needs stdin and stdout to be a terminal
    (``sparsify-tui | tee log`` or a cron job would draw escape codes into a pipe and wait for keys forever),
    unless a Textual driver that needs none is set (``sparsify-tui serve``'s browser sessions)."""
    import os

    if os.environ.get("TEXTUAL_DRIVER"):
        return None
    for name, stream in (("stdout", sys.stdout), ("stdin", sys.stdin)):
        try:
            tty = stream is not None and stream.isatty()
        except (AttributeError, ValueError, OSError):
            tty = False
        if not tty:
            return f"{name} is not a terminal"
    return None
