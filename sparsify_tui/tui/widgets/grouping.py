"""Grouping the Performance Profiles and Benchmarks lists by the target machine each result ran on.

A fleet job stores ordinary perf profiles and benchmarks with a ``target`` tag (``{"label", "node_id", "hostname",
"cpu_model", "instruction_sets", ...}``, :mod:`sparsify_tui.jobs.handlers.fleet`); a local one has none. When any
record of a list has a tag, the list shows one header line per machine ("this machine" first) above its records;
otherwise it looks as it always did.
"""

from __future__ import annotations

from typing import Callable, Optional

from rich.text import Text
from textual.widgets.option_list import Option

LOCAL = "this machine"


def target_label(record: dict) -> Optional[str]:
    """The label of the fleet target a record ran on, or None for this machine."""
    return (record.get("target") or {}).get("label") or None


def has_targets(records: list[dict]) -> bool:
    """True when any record ran on a fleet target."""
    return any(target_label(r) for r in records)


def group_records(records: list[dict]) -> list[tuple[Optional[dict], list[dict]]]:
    """``[(target tag or None for this machine, records)]``: this machine first, then each target in the order its
    first record appears; records keep their order within a group."""
    groups: dict = {}
    tags: dict = {}
    for r in records:
        key = target_label(r)
        groups.setdefault(key, []).append(r)
        tags.setdefault(key, r.get("target"))
    order = ([None] if None in groups else []) + [k for k in groups if k is not None]
    return [(tags[k], groups[k]) for k in order]


def header_text(target: Optional[dict], width: int) -> str:
    """``─ label · CPU · ISA`` in at most ``width`` characters (the list's width): the CPU and the instruction set
    only when they fit whole, the label cut with ``…`` when it alone is too long."""
    if not target:
        text = f"─ {LOCAL}"
    else:
        isa = [x for x in target.get("instruction_sets") or [] if x.startswith(("AVX512", "AMX", "AVX2"))]
        text = "─ " + str(target.get("label") or target.get("hostname") or "?")
        for part in ([str(target["cpu_model"])] if target.get("cpu_model") else []) + isa[-1:]:
            if len(text) + 3 + len(part) > width:
                break
            text += " · " + part
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def grouped_options(records: list[dict], make_option: Callable[[dict], Option], width: int) -> list[Option]:
    """The options of a list: ``make_option(record)`` for each record, under a disabled header line per target
    machine when any record ran on a fleet target (else exactly ``[make_option(r) for r in records]``)."""
    if not has_targets(records):
        return [make_option(r) for r in records]
    out: list[Option] = []
    for target, recs in group_records(records):
        out.append(Option(Text(header_text(target, width), style="bold"), disabled=True))
        out.extend(make_option(r) for r in recs)
    return out
