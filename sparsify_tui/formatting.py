"""Number and text formatting shared by the CLI and the TUI (a leaf module: no sparsify-tui imports)."""

from __future__ import annotations

from typing import Any

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_count(value: Any, sep: str = " ", none: str = "") -> str:
    """A count with an SI suffix and two decimals: 1234 -> ``"1.23 k"``, 5.6e9 -> ``"5.60 G"`` (k = 1e3,
    M = 1e6, G = 1e9, T = 1e12; ``sep`` goes between number and suffix). Below 1000: the whole number, or 3
    significant digits. ``None`` or ``""`` -> ``none``; a non-number is returned as text."""
    if value is None or value == "":
        return none
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    for factor, suffix in _SI:
        if abs(v) >= factor:
            return f"{v / factor:.2f}{sep}{suffix}"
    return f"{v:.0f}" if v == int(v) else f"{v:.3g}"


def format_bytes(n: Any, none: str = "") -> str:
    """A size in MB (1 MB = 10**6 bytes: one size unit on every screen, in the CLI and the README), two decimals,
    thousands grouped: 705123 -> ``"0.71 MB"``, 6756831 -> ``"6.76 MB"``, 2**40 -> ``"1,099,511.63 MB"``; None ->
    ``none``."""
    if n is None:
        return none
    return f"{float(n) / 1e6:,.2f} MB"


def format_percent(value: Any, none: str = "") -> str:
    """A fraction 0..1 as a percentage with two decimals: 0.1875 -> ``"18.75%"``; None or "" -> ``none``."""
    if value is None or value == "":
        return none
    return f"{float(value) * 100:.2f}%"


def format_x(value: Any, none: str = "-") -> str:
    """A factor (speedup, reduction): two decimals and ×: 2.368 -> ``"2.37×"``; None -> ``none``."""
    return none if value is None else f"{float(value):.2f}×"


def format_value(value: Any, unit: str = "") -> str:
    """A value in its unit, with the unit's fixed decimals: ``"ms"`` :func:`format_ms` + " ms", ``"x"``
    :func:`format_x`, ``"MB"`` (a value already in MB) two decimals + " MB", ``"%"`` (a fraction 0..1)
    :func:`format_percent`, ``""`` 4 significant digits; yes/no for booleans, ``"-"`` for None, text as is."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, (int, float)):
        return str(value)
    if unit == "ms":
        return f"{format_ms(value)} ms"
    if unit == "x":
        return format_x(value)
    if unit == "MB":
        return f"{value:.2f} MB"
    if unit == "%":
        return format_percent(value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def format_fixed(value: Any, spec: str = ".2f", none: str = "n/a") -> str:
    """``format(value, spec)``, or ``none`` for None: ``format_fixed(1.234) == "1.23"``."""
    return none if value is None else format(value, spec)


def format_ms(value: Any) -> str:
    """Milliseconds: 3 decimals (``1.25`` -> ``"1.250"``), 4 significant digits below 1 µs (``4e-05`` ->
    ``"4e-05"``), ``"-"`` for None (not measured)."""
    if value is None:
        return "-"
    return f"{value:.4g}" if abs(value) < 0.001 and value else f"{value:.3f}"


def format_ratio(ratio: Any, rounds: Any = ()) -> str:
    """A measured ratio with its spread over timing rounds: ``"0.84× (rounds 0.80–0.88×)"`` (min–max of ``rounds``,
    the ratio in each round), ``"0.84×"`` with fewer than two rounds, ``"-"`` for None."""
    if ratio is None:
        return "-"
    r = [float(x) for x in rounds or () if x is not None]
    return f"{float(ratio):.2f}×" + (f" (rounds {min(r):.2f}–{max(r):.2f}×)" if len(r) > 1 else "")


def plural(n: Any, word: str, words: str = "") -> str:
    """``"1 core"``, ``"2 cores"``, ``"0 groups"``: the count and the word in the form that agrees with it
    (``words``: an irregular plural; default ``word + "s"``). A count that is not a number (``"?"``) takes the
    plural."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


CONTROL_PICTURES = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)}
"""Every C0 control character but tab and newline shown as its Unicode control picture (ESC as ``␛``, BEL as
``␇``), DEL as ``␡``, and every C1 control (0x80-0x9f, e.g. the one-byte CSI 0x9b), lone surrogate (a byte that
was not UTF-8, as Python decodes a command line), and invisible character that reorders or hides text
(:data:`INVISIBLE`: bidirectional overrides and isolates, zero-width characters, line separators) as ``�``: one
character for one, so positions do not move. A ``str.translate`` table."""
INVISIBLE = frozenset({0x061C, 0x180E, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A, 0x202B,
                       0x202C, 0x202D, 0x202E, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0x2066, 0x2067, 0x2068,
                       0x2069, 0xFEFF})
"""Characters a terminal draws as nothing while they reorder the text around them or hide a difference between
two names ("Trojan Source", CVE-2021-42574): the bidirectional embeddings, overrides, isolates and marks, the
zero-width space, joiners and word joiner, the invisible operators, the byte-order mark, and the line and paragraph
separators."""
CONTROL_PICTURES.update({0x7F: 0x2421, **{c: 0xFFFD for c in range(0x80, 0xA0)},
                         **{c: 0xFFFD for c in range(0xD800, 0xE000)}, **{c: 0xFFFD for c in INVISIBLE}})
_ONE_LINE = {**CONTROL_PICTURES, 0x09: 0x2409, 0x0A: 0x2424}


def safe_text(value: Any) -> str:
    """``str(value)`` with control characters shown, not obeyed (:data:`CONTROL_PICTURES`): a project, node or
    profile name holding ``ESC ]0;title BEL`` or ``ESC [2J`` can neither retitle nor clear a terminal, nor hide
    or reorder text, whether it is printed by the CLI, drawn by the TUI or written in a report."""
    return str(value).translate(CONTROL_PICTURES)


def safe_line(value: Any) -> str:
    """:func:`safe_text` on one line: a newline shown as ``␤`` and a tab as ``␉`` too. For a name in a list row (a
    name stored before names were checked, or by hand, cannot forge a row of ``sparsify-tui list``)."""
    return str(value).translate(_ONE_LINE)


def has_control(value: str) -> bool:
    """True when ``value`` holds a character :func:`safe_text` would change."""
    return any(ord(ch) in CONTROL_PICTURES for ch in value)


_CHAR_NAMES = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\x1b": "an escape character"}


def name_problem(value: str) -> Any:
    """What makes ``value`` unfit as a name (of a project, profile, optimization or output file) that terminals
    show, or None: the first control character (newline and tab included), format character (bidirectional
    controls, zero-width characters, the soft hyphen...: Unicode category Cf), lone surrogate (a byte that was
    not UTF-8) or line/paragraph separator, as ``"a newline (U+000A)"``."""
    import unicodedata

    for ch in str(value):
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") or ord(ch) in CONTROL_PICTURES:
            what = _CHAR_NAMES.get(ch)
            if what is None:
                label = unicodedata.name(ch, "")
                what = f"the invisible character {label.lower()}" if label else "a control character"
            return f"{what} (U+{ord(ch):04X})"
    return None


def shell_arg(value: Any) -> str:
    """``value`` as one argument of a command line to copy into a shell (``demo``, ``'my model'``): the project and
    record names in the CLI's ``next:`` hints (:func:`shlex.quote`, control characters shown)."""
    import shlex

    return shlex.quote(safe_text(value))
