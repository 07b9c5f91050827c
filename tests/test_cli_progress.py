"""CLI progress lines on stderr."""

import sys


class _GoneReader:
    """A stderr whose reader has left (`sparsify-tui ... 2>&1 | head -3`)."""

    def __init__(self):
        self.writes = 0

    def write(self, text):
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


def test_progress_on_a_broken_pipe_never_fails_the_work(monkeypatch):
    from sparsify_tui.cli import stderr_progress

    gone = _GoneReader()
    monkeypatch.setattr(sys, "stderr", gone)
    progress = stderr_progress()
    progress("profiling", 0.1)  # raised BrokenPipeError before, which failed the job
    progress("timing", 0.5)
    progress("done", 1.0)
    assert gone.writes == 1  # tried once, then stays quiet


def test_progress_lines_on_stderr(capsys):
    from sparsify_tui.cli import stderr_progress

    progress = stderr_progress()
    progress("loading", 0.0)  # nothing before the work starts
    progress("profiling", 0.25)
    assert capsys.readouterr().err == "   25.0%  profiling\n"
