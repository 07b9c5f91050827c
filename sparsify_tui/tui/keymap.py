"""The user's key remapping: ``$SPARSIFY_TUI_KEYMAP`` or ``<workspace>/keymap.json``, ``{binding id: "key[,key]"}``.

Read once at start, safely: only a regular file (a FIFO or a device would block the start on a blank screen),
at most :data:`MAX_BYTES`. Everything the app cannot honour is named once on start (:meth:`Keymap.problems`, shown
by the app as notifications) and left at its default key, never taken or dropped silently:

* a file that is not JSON, not an object, too large or not a regular file (the default keys are used);
* an entry whose value is not a string of comma-separated key names, or names a key Textual does not know;
* a binding moved onto a key the app itself needs everywhere (:data:`RESERVED`: ``tab`` moves the focus, ``escape``
  closes dialogs and leaves fields, ``enter`` opens and submits, ``ctrl+c`` copies and ``ctrl+q`` quits);
* a binding moved onto the key of an app-wide binding (``q`` quits, ``?`` helps...) that keeps its key: the one
  moved would hide it (Quit vanished from the footer);
* a binding id no sparsify-tui or Textual class declares (:func:`unknown_ids`, checked once the sections are
  imported).

Clashes Textual finds later between two bindings of one section (``App.handle_bindings_clash``) are undone the same
way: the entry that caused it goes, and is named once.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

KEYMAP_ENV = "SPARSIFY_TUI_KEYMAP"
MAX_BYTES = 64 * 1024
"""Largest keymap.json read (a remapping of every binding takes under 8 KiB)."""
RESERVED = {"tab": "moves the focus", "shift+tab": "moves the focus back", "ctrl+i": "is tab",
            "escape": "closes dialogs and leaves fields", "ctrl+left_square_brace": "is escape",
            "enter": "opens and submits", "ctrl+m": "is enter", "ctrl+c": "copies (and asks to quit)",
            "ctrl+q": "quits"}
"""Keys no binding may be moved onto, and what they do."""
_MODIFIERS = {"ctrl", "shift", "alt", "meta", "super", "hyper"}


def keymap_path(workspace_root) -> Path:
    """``$SPARSIFY_TUI_KEYMAP``, else ``<workspace>/keymap.json``."""
    return Path(os.environ.get(KEYMAP_ENV) or Path(workspace_root) / "keymap.json")


def normalize_key(key: str) -> str:
    """A key as Textual names it (``?`` -> ``question_mark``, ``Ctrl+X`` stays as typed but stripped)."""
    from textual.keys import _character_to_key

    key = key.strip()
    return _character_to_key(key) if len(key) == 1 else key


def known_key(key: str) -> bool:
    """True for a key name Textual can deliver: modifiers (``ctrl+``, ``shift+``, ``alt+``...) over a named key
    (``f1``, ``space``, ``pageup``...), a printable character, or a character's name (``question_mark``, ``slash``)."""
    from textual.keys import KEY_NAME_REPLACEMENTS, Keys, key_to_character

    parts = normalize_key(key).split("+")
    base, mods = parts[-1], parts[:-1]
    if not base or any(m not in _MODIFIERS for m in mods):
        return False
    named = {k.value for k in Keys if "+" not in k.value and not k.value.startswith("<")}
    if base in named or (len(base) == 1 and base.isprintable()):
        return True
    unicode_name = {v: k for k, v in KEY_NAME_REPLACEMENTS.items()}.get(base, base)
    return key_to_character(unicode_name) is not None


@dataclass
class Keymap:
    """What keymap.json asks that the app honours (``entries``: binding id -> normalized keys) and what it refuses
    (``problems``: one line each, shown once on start)."""

    path: Optional[Path] = None
    entries: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)


def _read_text(path: Path) -> tuple[Optional[str], Optional[str]]:
    """``(text, problem)``: the file's text, or why it is not read (None, None: there is no file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, None
    except OSError as err:
        return None, f"cannot be read ({err.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "is not a regular file (a pipe, device or folder)"
        if st.st_size > MAX_BYTES:
            return None, f"is {st.st_size:,} bytes, more than a keymap can be ({MAX_BYTES // 1024} KiB)"
        data = os.read(fd, MAX_BYTES + 1)
    except OSError as err:
        return None, f"cannot be read ({err.strerror})"
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        return None, f"is more than a keymap can be ({MAX_BYTES // 1024} KiB)"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "is not UTF-8 text"


def read_keymap(path: Path, app_bindings: Iterable = ()) -> Keymap:
    """The keymap at ``path`` checked (module docstring). ``app_bindings``: the app-wide ``Binding`` s, whose keys no
    other binding may take while they keep them."""
    from sparsify_tui.formatting import safe_line

    km = Keymap(path=Path(path))
    text, problem = _read_text(km.path)
    where = f"keymap {safe_line(km.path)}"
    fix = "fix it or move it away; the default keys are used"
    if problem:
        km.problems.append(f"{where} {problem}: {fix}")
        return km
    if text is None:
        return km
    try:
        raw = json.loads(text)
    except ValueError as err:
        km.problems.append(f"{where} is not JSON ({str(err).splitlines()[0][:80]}): {fix}")
        return km
    if not isinstance(raw, dict):
        km.problems.append(f"{where} holds a JSON {type(raw).__name__}, not an object of binding id -> keys "
                           f"(e.g. {{\"app.help\": \"f1\"}}): {fix}")
        return km
    app_keys: dict = {}
    for b in app_bindings:
        for k in str(b.key).split(","):
            app_keys.setdefault(normalize_key(k), b)
    remapped = {str(k) for k in raw}
    for bid, value in raw.items():
        label = f"{where}: {safe_line(bid)!r}"
        if not isinstance(value, str) or not value.strip():
            km.problems.append(f"{label} must map to keys as text (e.g. \"f1\" or \"f1,ctrl+h\"), not "
                               f"{safe_line(json.dumps(value))[:40]}: it keeps its default key")
            continue
        keys = [normalize_key(k) for k in value.split(",") if k.strip()]
        bad = [k for k in keys if not known_key(k)]
        if bad:
            km.problems.append(f"{label} -> {safe_line(bad[0])!r} is not a key name (keys are like a, f1, ctrl+x, "
                               "question_mark; see ? for the defaults): it keeps its default key")
            continue
        reserved = [k for k in keys if k in RESERVED]
        if reserved:
            km.problems.append(f"{label} -> {reserved[0]!r} is refused: {reserved[0]} {RESERVED[reserved[0]]} "
                               "everywhere; choose another key (it keeps its default)")
            continue
        taken = [(k, app_keys[k]) for k in keys if k in app_keys and app_keys[k].id != bid
                 and (app_keys[k].id not in remapped)]
        if taken:
            k, other = taken[0]
            km.problems.append(f"{label} -> {k!r} is refused: {k} is the key of {other.description or other.action} "
                               f"({other.id}) everywhere; choose another key (it keeps its default)")
            continue
        km.entries[str(bid)] = ",".join(keys)
    return km


def declared_ids() -> set:
    """Every binding id declared by a class of sparsify-tui's TUI (all its modules imported) or of Textual."""
    import importlib
    import pkgutil
    import sys

    import sparsify_tui.tui as tui

    for info in pkgutil.walk_packages(tui.__path__, "sparsify_tui.tui."):
        try:
            importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - a module that cannot import declares nothing usable
            continue
    ids = set()
    for name, module in list(sys.modules.items()):
        if not (name.startswith("sparsify_tui.tui") or name.startswith("textual")) or module is None:
            continue
        for obj in list(vars(module).values()):
            for b in (getattr(obj, "BINDINGS", None) or []) if isinstance(obj, type) else []:
                bid = getattr(b, "id", None)
                if bid:
                    ids.add(bid)
    return ids


def unknown_ids(km: Keymap, ids: set) -> list:
    """Problems for the entries of ``km`` whose binding id nothing declares (``ids``: :func:`declared_ids`); those
    entries are dropped from ``km``."""
    from sparsify_tui.formatting import safe_line

    out = []
    for bid in [b for b in km.entries if b not in ids]:
        del km.entries[bid]
        out.append(f"keymap {safe_line(km.path)}: {safe_line(bid)!r} is no binding id (the ids are in the last "
                   "column of ?): it does nothing")
    return out
