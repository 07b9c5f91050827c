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


def _words(text: str) -> list[str]:
    return text.split()


def _plain(widget) -> str:
    """The full text a Static or Label is given (what it would show with room enough); "" for a visual that is no
    text (a Rich table lays itself out)."""
    full = getattr(widget, "full_text", None)  # a FittedLabel: the text as given, before its words were fitted
    if isinstance(full, str):
        return full
    plain = getattr(widget.render(), "plain", None)
    return plain if isinstance(plain, str) else ""


def cut_text(app) -> list[str]:
    """Every place on the top screen where text is cut: a Static, Label or notification whose shown lines end (or start) inside
    a word of its full text (``"…measured: not yet (a Benchmarks run with this"`` is cut when the text goes on:
    words left out), and a list option whose line wrapped (``"baseline (b1,"`` / ``"2c)"``). A word shortened with
    ``…`` counts as cut; a whole word followed by ``…``, or a path elided in the middle (``/wor…/opt1.onnx``, both
    ends whole), does not. Returns one line per problem: what is shown and what it should read."""
    from textual.widgets import Label, OptionList, Static

    problems = []
    visible = app.screen._compositor.visible_widgets
    for widget, (region, clip) in visible.items():
        if not widget.display or region.area == 0:
            continue
        ours = type(widget).__module__.startswith(("sparsify_tui", "textual.widgets._static", "textual.widgets._label",
                                                   "textual.widgets._toast"))  # and every notification
        if isinstance(widget, (Static, Label)) and ours:
            full = _plain(widget)
            if not full.strip():
                continue
            content = widget.content_region.intersection(clip)
            if content.area == 0:
                continue
            shown_lines = [line.rstrip() for line in text_of(app, content).split("\n")]
            shown_words = _words(" ".join(shown_lines))
            words = _words(full)
            fully_visible = widget.content_region == content
            for word in shown_words:
                bare = word[:-1] if word.endswith("…") and len(word) > 1 else word
                if word not in words and bare not in words and not _elided_path(word, words):
                    problems.append(f"{widget!r}: {word!r} is cut from {full[:200]!r}")
                    break
            else:
                if fully_visible and len(shown_words) < len(words) and not any(w.endswith("…") for w in shown_words):
                    problems.append(f"{widget!r}: shows {' '.join(shown_lines)[:120]!r}… of {full[:200]!r} "
                                    f"({len(words) - len(shown_words)} words left out)")
        elif isinstance(widget, OptionList):
            expected = set()
            for option in widget.options:
                prompt = option.prompt
                text = getattr(prompt, "plain", None) or str(prompt)
                expected.update(line.strip() for line in text.split("\n"))
            content = widget.scrollable_content_region.intersection(clip)  # without its scrollbar
            for line in text_of(app, content).split("\n"):
                line = line.strip().lstrip("▌").strip()
                line = line[4:] if line[:4] in ("[x] ", "[ ] ") else line  # a TextSelectionList's check box
                if line and line not in expected:
                    problems.append(f"{widget!r}: option line {line!r} is wrapped or cut")
                    break
    return problems


def _elided_path(word: str, words: list[str]) -> bool:
    """``head…tail`` of a word of the full text, cut in the middle (a path elided so that both ends show)."""
    if "…" not in word.strip("…"):
        return False
    head, _, tail = word.partition("…")
    return any(w.startswith(head) and w.endswith(tail) for w in words)
