"""The ``sparsify-tui`` entry point.

* ``sparsify-tui`` opens the TUI on the projects screen.
* ``sparsify-tui MODEL.onnx`` creates (or reopens) a project for that model, then opens the TUI on it.
* ``sparsify-tui PROJECT`` (a project's name or id) opens the TUI on that project.
* ``sparsify-tui COMMAND ...`` runs a headless command; see ``sparsify-tui --help``.
* The TUI needs a terminal: with stdin or stdout not a TTY (``sparsify-tui | tee log``) it refuses with one
  line (``demo`` runs headless instead).

User errors (:class:`sparsify_tui.errors.SparsifyError`) print one line on stderr and exit with code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

from sparsify_tui import __version__
from sparsify_tui.commands import COMMAND_MODULES
from sparsify_tui.commands.output import (  # noqa: F401 - the CLI's output helpers, also used from here
    print_json, print_warnings, stderr_progress, terminal_problem, use_memory_option,
)


class SafeStream:
    """A text stream (``sys.stdout``/``sys.stderr``) whose writes show control characters instead of obeying them
    (:func:`sparsify_tui.formatting.safe_text`): names from models, projects and imported files reach the user's
    terminal (or a file it is redirected to) as text, never as escape sequences. JSON output is unchanged
    (``json.dump`` already escapes control characters)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        from sparsify_tui.formatting import safe_text

        self._stream.write(safe_text(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors (unknown option, ``invalid int value``, a missing argument...) are one
    line on stderr, ``sparsify-tui: error: <problem> (in `<command>`): see `<command> --help``, exit code 2,
    instead of the whole usage block. Sub-parsers inherit it."""

    def error(self, message: str):  # type: ignore[override]
        message = " ".join(str(message).split())
        where = f" (in `{self.prog}`)" if self.prog != "sparsify-tui" else ""
        self.exit(2, f"sparsify-tui: error: {message}{where}: see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="sparsify-tui",
        description="Analyze and optimize ONNX models on this server, in the terminal.",
    )
    parser.add_argument("--version", action="version", version=f"sparsify-tui {__version__}")
    parser.add_argument("--no-mouse", action="store_true", help="disable mouse reporting (for chatty SSH links)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"sparsify_tui.commands.{name}")
        module.register(sub)
    parser.set_defaults(command_names=frozenset(sub.choices))
    return parser


def recover_on_start() -> None:
    """Start-up clean-up after killed processes: finish or undo half-done project deletes and creates, remove
    stale temp files of the workspace (:meth:`sparsify_tui.store.Workspace.recover`) and stale temp folders of
    profiles (:func:`sparsify_tui.tempfiles.clean_stale_temp_dirs`). Never fails a command: a workspace that
    cannot be read is reported by the command itself."""
    try:
        from sparsify_tui.store import Workspace

        Workspace().recover()
    except Exception:  # noqa: BLE001 - best effort
        pass
    try:
        from sparsify_tui.tempfiles import clean_stale_temp_dirs

        clean_stale_temp_dirs()
    except Exception:  # noqa: BLE001 - best effort
        pass


def tui_target(ws, ref: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """What ``sparsify-tui REF`` opens: ``(model path, None)`` for a model file, ``(None, project id)`` for a project's
    name or id. A path with a folder in it, an ``.onnx`` name or a file that exists is a model; else a project of
    that name or id; else :class:`~sparsify_tui.errors.SparsifyError` (one line, with the fix)."""
    import os
    from pathlib import Path

    from sparsify_tui.errors import RecordNotFound, SparsifyError

    if ref is None:
        return None, None
    if os.sep in ref or ref.lower().endswith(".onnx"):
        return ref, None
    try:
        return None, ws.project_entry(ref)["id"]
    except RecordNotFound:
        pass
    if Path(ref).expanduser().exists():
        return ref, None
    raise SparsifyError(f"{ref!r} is neither a project (by name or id) nor a model file: `sparsify-tui list` shows "
                        "the projects; give the path of an .onnx file to start a new one")


def _run_tui(ref: Optional[str], no_mouse: bool) -> int:
    from sparsify_tui.errors import SparsifyError
    from sparsify_tui.store import Workspace

    ws = Workspace()
    ws.check_root()  # a bad SPARSIFY_TUI_HOME is one line here, not a dialog in a half-drawn app
    model, project = tui_target(ws, ref)
    problem = terminal_problem()
    if problem:
        raise SparsifyError(f"the TUI needs a terminal ({problem}): run sparsify-tui without a pipe or "
                            "redirection, or use a command such as `sparsify-tui list` (see --help)")
    from sparsify_tui.tui.app import run_app

    return run_app(model=model, project=project, mouse=not no_mouse)


def main(argv: Optional[Sequence[str]] = None) -> int:
    from sparsify_tui.errors import SparsifyError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    known = parser.get_default("command_names")
    # `sparsify-tui MODEL.onnx` (a path, not a command) opens the TUI on that model's project; `sparsify-tui NAME`
    # on the project of that name or id
    positional = [a for a in argv if not a.startswith("-")]
    try:
        if not positional or positional[0] not in known:
            opts, rest = parser.parse_known_args([a for a in argv if a.startswith("-")])
            if len(positional) > 1:
                parser.error(f"unknown command {positional[0]!r}")
            recover_on_start()
            return _run_tui(positional[0] if positional else None, opts.no_mouse)
        args = parser.parse_args(argv)
        use_memory_option(args)
        recover_on_start()
        if args.command == "serve":  # textual-serve's own colourful log, and a TUI in each browser tab
            return int(args.handler(args) or 0)
        out, err = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
        try:
            return int(args.handler(args) or 0)
        finally:
            sys.stdout, sys.stderr = out, err
    except SparsifyError as err:
        from sparsify_tui.formatting import safe_text

        print(f"sparsify-tui: error: {safe_text(err)}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("sparsify-tui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `sparsify-tui list --json | head`: the reader went away; exit quietly like other CLI tools.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as err:
        # a full disk, a read-only file system, no permission: the user's to fix, so one line, not a traceback
        from sparsify_tui.tempfiles import WRITE_ERRNOS, write_error

        if err.errno not in WRITE_ERRNOS:
            raise
        print(f"sparsify-tui: error: {write_error(None, err)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
