"""Text the TUI draws shows control characters instead of obeying them.

Textual and Rich strip a few control characters (BEL, BS, VT, FF, CR) from the text they draw and pass the rest
through: an ESC in a project, node or profile name reached the terminal raw, so ``\\e]0;pwned\\a`` retitled it and
``\\e[2J`` cleared the screen. :func:`install` extends both libraries' tables (the ones ``Content`` and ``Text`` apply
to every string they are given: labels, tables, trees, option lists, toasts, inputs) with
:data:`sparsify_tui.formatting.CONTROL_PICTURES`: every other control character is drawn as its control picture
(``␛``), one character for one, so widths and styles do not move. What they already strip stays stripped.
"""

from __future__ import annotations

from sparsify_tui.formatting import CONTROL_PICTURES


def install() -> None:
    """Extend Rich's and Textual's control-code tables (idempotent; process-wide)."""
    from rich import control
    from textual import content

    for table in (control._CONTROL_STRIP_TRANSLATE, content._CONTROL_STRIP_TRANSLATE):
        for code, picture in CONTROL_PICTURES.items():
            table.setdefault(code, picture)  # type: ignore[arg-type]
