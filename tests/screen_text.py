"""What the screen of a running app (Pilot) shows, cell by cell: its text lines, and its cells with their text
style but without colour (what a user sees under NO_COLOR, or with a colour they cannot tell apart).

Used by the focus and layout tests: a focused widget must look different from the same widget unfocused in these
cells (not only in colour), and no line may end inside a word that the full text continues."""

from __future__ import annotations

from textual.geometry import Region

STYLE_ATTRS = ("bold", "dim", "italic", "underline", "reverse", "strike", "overline")


def strips(app) -> list:
    """The rendered lines (Textual Strips) of the top screen, as the terminal shows them."""
    return app.screen._compositor.render_strips()


def lines(app) -> list[str]:
    """The text of every line of the top screen."""
    return [strip.text for strip in strips(app)]


def cells(app, region: Region, colour: bool = False) -> list[tuple]:
    """``(x, y, character, text style[, fg, bg])`` of every cell of ``region`` (screen coordinates); the text style is
    the tuple of :data:`STYLE_ATTRS` that are on. With ``colour`` the foreground and background colours too."""
    out = []
    for y, strip in enumerate(strips(app)):
        if not region.y <= y < region.bottom:
            continue
        x = 0
        for seg in strip:
            style = seg.style
            for ch in seg.text:
                if region.x <= x < region.right:
                    attrs = tuple(a for a in STYLE_ATTRS if style is not None and getattr(style, a))
                    cell = (x, y, ch, attrs)
                    if colour:
                        cell += (style.color if style else None, style.bgcolor if style else None)
                    out.append(cell)
                x += 1
    return out


def text_of(app, region: Region) -> str:
    """The characters shown in ``region``, line by line."""
    rows: dict[int, list[str]] = {}
    for x, y, ch, _attrs in cells(app, region):
        rows.setdefault(y, []).append(ch)
    return "\n".join("".join(r) for _y, r in sorted(rows.items()))
