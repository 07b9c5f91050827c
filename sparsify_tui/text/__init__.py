"""The worded text of each result, written once for the CLI and the TUI.

A result's text is a list of :class:`Fact` (a label and a value, one line each), built by one function per result:

* :mod:`sparsify_tui.text.perf`: a perf profile's summary (latency, INT8, pruned estimates, profiler overhead);
* :mod:`sparsify_tui.text.comparison`: the two sides and the totals of a perf profile comparison;
* :mod:`sparsify_tui.text.searches`: the head of an INT8 search and of a budget search (metric, budget, data,
  result, the chosen trial);
* :mod:`sparsify_tui.text.optimization`: an optimization's summary cards per structure, its applied model beside
  the measured speedup, and the Optimization section's header.

The CLI prints them with :func:`cli_lines` (``label: value``), the TUI shows them with :func:`markup_lines`
(``[b]Label:[/b] value``, Rich console markup with the text escaped). One wording per fact, so a figure cannot
read one way in ``sparsify-tui perf`` and another on the Performance Profiles screen. Tables stay with their front
end (fixed-width text for the CLI, a DataTable in the TUI); the rows they show come from the same records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from rich.markup import escape


@dataclass(frozen=True)
class Fact:
    """One line of a result's text: ``label`` (lower case unless it starts with a name such as "INT8") and
    ``value`` (plain text, no markup)."""

    label: str
    value: str


def cli_lines(facts: Iterable[Fact], indent: str = "") -> list:
    """The facts as the CLI prints them: ``"{indent}{label}: {value}"`` a line."""
    return [f"{indent}{f.label}: {f.value}" for f in facts]


def markup_lines(facts: Iterable[Fact]) -> list:
    """The facts as the TUI shows them: ``"[b]Label:[/b] value"`` a line (Rich markup; the label's first letter
    upper case, label and value escaped)."""
    return [f"[b]{escape(f.label[:1].upper() + f.label[1:])}:[/b] {escape(f.value)}" for f in facts]


__all__ = ["Fact", "cli_lines", "markup_lines"]
