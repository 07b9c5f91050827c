"""Short labels for long node names that stay readable and distinct (charts' bar labels, tables' name columns).

ONNX node names are often long module paths whose start is shared and whose distinguishing part is in the
middle (``/features/features.13/conv/conv.0/conv.0.0/Conv``). Cutting them in the middle made every
mobilenet_v2 row read the same; :func:`shorten_labels` keeps what tells them apart. Text that wraps (a job's
progress, a notification, a label in a narrow column) keeps every word whole or elides it in the middle:
:func:`fit_words`, :class:`FittedLabel`.
"""

from __future__ import annotations

from typing import Sequence

from textual.widgets import Label

MAX_LABEL_CHARS = 28


def shorten(label: str, limit: int = MAX_LABEL_CHARS) -> str:
    """Shorten one label to ``limit`` characters, keeping a short head and the longer tail
    ('/backbone/…ck.3/conv1/Conv'): in hierarchical ONNX names the tail tells nodes apart."""
    label = str(label)
    if len(label) <= limit:
        return label
    keep = limit - 1
    head = min(keep // 3, 8)
    return label[:head] + "…" + label[len(label) - (keep - head):]


def _common_prefix(labels: Sequence[str]) -> str:
    """The longest common prefix of ``labels`` that ends at a separator ('/', '.', '_', ':')."""
    if len(labels) < 2:
        return ""
    prefix = labels[0]
    for lab in labels[1:]:
        while not lab.startswith(prefix):
            prefix = prefix[:-1]
    cut = max(prefix.rfind(c) for c in "/._:")
    return prefix[: cut + 1] if cut >= 0 else ""


def collapse_path(label: str) -> str:
    """Drop the path segments a later segment repeats: PyTorch exports name nodes by module path, one
    cumulative segment per level (``/features/features.13/conv/conv.0/conv.0.0/Conv``), so this loses nothing:
    ``/features.13/conv.0.0/Conv``."""
    parts = label.split("/")
    keep = [p for k, p in enumerate(parts)
            if not (p and k + 1 < len(parts) and parts[k + 1].startswith(p + "."))]
    return "/".join(keep)


def shorten_labels(labels: Sequence[str], limit: int = MAX_LABEL_CHARS) -> list[str]:
    """Labels of at most ``limit`` characters that stay distinct where the originals were.

    A label that fits is kept. Otherwise: repeated module-path segments are dropped (:func:`collapse_path`),
    then the prefix all labels share (up to a separator) becomes "…", then the tail is kept
    (``…features.13/conv.0.0/Conv``). Labels that still collide get their row number: ``#12 …/Conv``."""
    labels = [str(x) for x in labels]
    if all(len(x) <= limit for x in labels):
        return labels
    collapsed = [collapse_path(x) if len(x) > limit else x for x in labels]
    prefix = _common_prefix(collapsed)

    def cut(lab: str, room: int) -> str:
        if len(lab) <= room:
            return lab
        core = lab[len(prefix):] if len(prefix) > 1 else lab
        if len(core) + 1 <= room:
            return "…" + core
        return "…" + core[len(core) - (room - 1):]

    out = [cut(lab, limit) for lab in collapsed]
    if len(set(out)) < len(set(labels)):
        counts: dict = {}
        for x in out:
            counts[x] = counts.get(x, 0) + 1
        out = [f"#{i} {cut(lab, limit - len(str(i)) - 2)}" if counts[x] > 1 else x
               for i, (lab, x) in enumerate(zip(collapsed, out))]
    return out


def fit_parts(parts: Sequence[str], width: int, sep: str = " · ") -> str:
    """As many of ``parts`` as fit in ``width`` cells, joined by ``sep``, dropping whole parts from the end (a
    status or hint line that never stops inside a word). ``width`` ≤ 0 (not laid out yet): all of them."""
    from rich.cells import cell_len

    out: list[str] = []
    for part in parts:
        if width > 0 and cell_len(sep.join([*out, part])) > width:
            break
        out.append(part)
    return sep.join(out)


def elide_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, with its middle replaced by ``…`` when it is longer: a path keeps its
    root and its file name (``/home/me/…/optimized/opt1.onnx``), cut at a ``/`` when one is near. ``width`` ≤ 0:
    unchanged."""
    from rich.cells import cell_len

    text = str(text)
    if width <= 0 or cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"
    tail_room = (width - 1) * 2 // 3
    tail = text[len(text) - tail_room:]
    cut = tail.find("/")
    if 0 <= cut < len(tail) // 2:  # start the tail at a folder boundary when it costs little
        tail = tail[cut:]
    head = text[: width - 1 - len(tail)]
    slash = head.rfind("/")
    if slash > len(head) // 2:
        head = head[: slash + 1]
    return head + "…" + tail


def fit_name(text: str, width: int) -> str:
    """A record's name in at most ``width`` cells, never cut inside a word it keeps: as is when it fits; a name of
    several words keeps the whole words that fit, then ``…`` (:func:`abbreviate`); one word (or a first word wider
    than ``width``) is elided in its middle (:func:`elide_middle`: "budg…earch" mixed two words). ``width`` ≤ 0:
    unchanged."""
    text = str(text)
    if width <= 0 or len(text) <= width:
        return text
    first = text.split(" ", 1)[0]
    if " " in text.strip() and len(first) < width:
        return abbreviate(text, width)
    return elide_middle(first if len(first) < len(text) else text, width)


def abbreviate(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells: the whole words that fit, then ``…`` (a sentence cut at a word boundary,
    never inside a word; a first word longer than ``width`` is cut). ``width`` ≤ 0: unchanged."""
    text = str(text)
    if width <= 0 or len(text) <= width:
        return text
    head = text[: width - 1]
    if text[width - 1] != " " and " " in head:
        head = head[: head.rfind(" ")]
    return head.rstrip(" ·,;:(") + "…"


def fit_words(text: str, width: int) -> str:
    """``text`` with every word wider than ``width`` cells elided in its middle (:func:`elide_middle`: a path keeps
    its file name, a node id its ends), so that text wrapped at ``width`` breaks only between words: a word that
    does not fit a line was folded inside it ("deepc" / "opy_124"). Spaces and line breaks are kept; a word with
    markup brackets is left whole. ``width`` ≤ 0: unchanged."""
    import re

    from rich.cells import cell_len

    if width <= 0:
        return str(text)
    return re.sub(r"[^\s]+", lambda m: m.group(0) if cell_len(m.group(0)) <= width or "[" in m.group(0)
                  else elide_middle(m.group(0), width), str(text))


class FittedLabel(Label):
    """A ``Label`` that wraps at words and never folds a word: a word wider than the label is elided in its middle
    for the width it has (:func:`fit_words`), again on every resize. ``full_text``: the text as given. Plain text
    (no markup)."""

    def __init__(self, text: str = "", **kwargs) -> None:
        super().__init__(text, markup=False, **kwargs)
        self.full_text = str(text)

    def set_text(self, text: str) -> None:
        self.full_text = str(text)
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        self.update(fit_words(self.full_text, self.content_region.width))
