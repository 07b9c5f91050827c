"""`FormScroll`: a focusable scroll container whose focus restyles itself, not every widget inside it.

Textual restyles a widget and all of its descendants when it gains or loses the focus (a rule such as
``_ChartBase:focus > .chart-title`` styles a child by its parent's focus). A form's scroll container holds every
field of the form: the Settings section's, 25 widgets, restyled each time the section was shown or left (10-25 ms of
the switch). :class:`FormScroll` restyles only itself when no rule of the app's stylesheet styles a widget by the
focus of an ancestor of its kind (:func:`focus_styles_descendants`), and everything inside it, as Textual does,
when one does.
"""

from __future__ import annotations

from typing import Any

from textual.containers import VerticalScroll
from textual.css.model import CombinatorType


_ANSWERS: dict = {}  # (the stylesheet's rules list, the node's names) -> focus_styles_descendants


def focus_styles_descendants(stylesheet: Any, node: Any) -> bool:
    """Whether a rule of ``stylesheet`` styles a descendant of ``node`` by ``node``'s focus: a selector with
    ``:focus`` on a part that names one of ``node``'s types, classes or its id, followed by a descendant or child
    part (``X:focus > .y``, ``X:focus Y``). Unsure (an unknown selector): True. Kept until the stylesheet is parsed
    again (a new list of rules)."""
    names = frozenset(node._css_type_names) | frozenset(node.classes) | ({node.id} if node.id else frozenset())
    rules = stylesheet.rules
    key = (id(rules), names)
    if key not in _ANSWERS:
        if len(_ANSWERS) > 64:
            _ANSWERS.clear()
        _ANSWERS[key] = _styles_descendants(rules, names)
    return _ANSWERS[key]


def _styles_descendants(rules: Any, names: frozenset) -> bool:
    try:
        for rule in rules:
            for selector_set in rule.selector_set:
                parts = selector_set.selectors
                for i, part in enumerate(parts):
                    if "focus" not in part.pseudo_classes:
                        continue
                    later = parts[i + 1:]
                    if any(p.combinator in (CombinatorType.DESCENDENT, CombinatorType.CHILD) for p in later) and (
                            part.name in names or part.name == "*" or not part.name):
                        return True
    except Exception:  # noqa: BLE001 - Textual's rule model changed: restyle everything, as Textual does
        return True
    return False


class FormScroll(VerticalScroll):
    """A ``VerticalScroll`` for a form (module docstring)."""

    def watch_has_focus(self, has_focus: bool) -> None:
        if focus_styles_descendants(self.app.stylesheet, self):
            super().watch_has_focus(has_focus)
        else:
            self.app.stylesheet.update_nodes([self], animate=True)
