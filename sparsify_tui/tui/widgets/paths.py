"""File fields: a path typed with completion (→ takes it) or picked in a file browser (`ctrl+b`), for any kind of
file. The model field of the New Project dialog (``.onnx``) and every sample-data field of the profile, benchmark,
apply and search dialogs (``.npz`` / ``.npy``) are the same widget (:class:`PathInput`).

* :class:`PathSuggester`: completes a path to a folder (with a trailing ``/``) or a file with one of the suffixes;
* :class:`FileTree`: a directory tree of folders (not hidden ones) and files with those suffixes;
* :class:`FileBrowser`: the tree in a dialog (enter opens a folder or picks a file, backspace goes up, escape
  cancels), dismissed with the path picked;
* :class:`PathInput`: a text field with the suggester and `ctrl+b` for the browser.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import DirectoryTree, Static

from sparsify_tui.tui.widgets.inputs import TextInput

ONNX = (".onnx",)
"""The suffixes of a model file."""
SAMPLE_DATA = (".npz", ".npy")
"""The suffixes of a sample-data file (:func:`sparsify_tui.analysis.inputs.load_sample_data`)."""


def _wanted(path: Path, suffixes: tuple) -> bool:
    return path.suffix.lower() in suffixes


class PathSuggester(Suggester):
    """Completes a filesystem path: folders (with a trailing `/`) and files ending in one of ``suffixes``."""

    def __init__(self, suffixes: tuple = ONNX) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.suffixes = tuple(s.lower() for s in suffixes)

    async def get_suggestion(self, value: str) -> Optional[str]:
        if not value:
            return None
        expanded = os.path.expanduser(value)
        folder, prefix = os.path.split(expanded)
        try:
            entries = sorted(os.scandir(folder or "."), key=lambda e: e.name)
        except OSError:
            return None
        for entry in entries:
            if not entry.name.startswith(prefix) or entry.name == prefix:
                continue
            if entry.name.startswith(".") and not prefix.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir or entry.name.lower().endswith(self.suffixes):
                completed = entry.name[len(prefix):] + ("/" if is_dir else "")
                return value + completed
        return None


class FileTree(DirectoryTree):
    """A directory tree of folders (not hidden ones) and the files ending in one of ``suffixes``."""

    def __init__(self, path, *, suffixes: tuple = ONNX, **kwargs) -> None:
        self.suffixes = tuple(s.lower() for s in suffixes)
        super().__init__(path, **kwargs)

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        out = []
        for p in paths:
            if p.name.startswith("."):
                continue
            try:
                if p.is_dir() or _wanted(p, self.suffixes):
                    out.append(p)
            except OSError:
                continue
        return out


class FileBrowser(ModalScreen[Optional[str]]):
    """Pick a file (``what``: "an .onnx model", "a sample data file (.npz, .npy)"): arrows move, enter opens a folder
    or picks a file, `escape` cancels, `backspace` goes to the parent folder. Opens in the folder of ``start`` (or
    the nearest one that exists)."""

    DEFAULT_CSS = """
    FileBrowser { align: center middle; }
    FileBrowser > Vertical { width: 90%; height: 90%; border: thick $primary; background: $surface; }
    FileBrowser FileTree { height: 1fr; }
    """

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="browser.cancel", tooltip="Close the file browser"),
        Binding("backspace", "parent", "Parent folder", id="browser.parent", tooltip="Show the parent folder"),
    ]

    def __init__(self, start: str, *, suffixes: tuple = ONNX, what: str = "an .onnx model") -> None:
        super().__init__()
        start_path = Path(os.path.expanduser(start or ".")).absolute()
        while not start_path.is_dir() and start_path != start_path.parent:
            start_path = start_path.parent
        self.start = start_path
        self.suffixes = suffixes
        self.what = what

    def _title(self, folder: Path) -> str:
        return f"Pick {self.what} in {folder} (enter: open/pick, backspace: parent, escape: cancel)"

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._title(self.start), id="browser-title", markup=False)
            yield FileTree(self.start, suffixes=self.suffixes, id="tree")

    def on_mount(self) -> None:
        self.query_one(FileTree).focus()

    def action_parent(self) -> None:
        tree = self.query_one(FileTree)
        parent = Path(tree.path).absolute().parent
        tree.path = parent
        self.query_one("#browser-title", Static).update(self._title(parent))

    @on(DirectoryTree.FileSelected)
    def _picked(self, event: DirectoryTree.FileSelected) -> None:
        event.stop()
        self.dismiss(str(event.path))

    def action_cancel(self) -> None:
        self.dismiss(None)


class PathInput(TextInput):
    """A path field: → takes the completion (:class:`PathSuggester`), `ctrl+b` opens the :class:`FileBrowser` in
    the folder typed so far and puts the file picked in the field (``Input.Changed`` follows, as when typed)."""

    BINDINGS = [Binding("ctrl+b", "browse", "Browse", id="path.browse", tooltip="Pick the file in a file browser")]

    def __init__(self, value: str = "", *, suffixes: tuple = SAMPLE_DATA, what: str = "", **kwargs) -> None:
        super().__init__(value, suggester=PathSuggester(suffixes), **kwargs)
        self.suffixes = suffixes
        self.what = what or ("an .onnx model" if suffixes == ONNX else
                             "a sample data file (" + ", ".join(suffixes) + ")")

    def action_browse(self) -> None:
        def picked(path: Optional[str]) -> None:
            if path:
                self.value = path
                self.show_end()
            self.call_after_refresh(self.focus)  # once the dialog under the browser is shown again

        self.app.push_screen(FileBrowser(self.value, suffixes=self.suffixes, what=self.what), picked)


__all__ = ["FileBrowser", "FileTree", "ONNX", "PathInput", "PathSuggester", "SAMPLE_DATA"]
