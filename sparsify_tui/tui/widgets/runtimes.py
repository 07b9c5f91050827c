"""The runtime choices of the job dialogs, from the engine registry (no dialog names a runtime): one runtime
(perf and loss profiles, the INT8 search) or a set of them (a benchmark, the budget search).

A choice's value is ``"engine:precision"`` for one runtime, :data:`EVERY` for every installed engine at every
precision this CPU runs, :data:`OWN` for a benchmark's default (each optimization's own runtime);
:func:`runtime_args` turns it into the job's arguments (``engine``/``precision`` or ``engines``/``precisions``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from textual.app import ComposeResult

#: every installed engine, every precision this CPU runs
EVERY = "every"
#: a benchmark's default: each optimization's own runtime (and the reference)
OWN = "own"


@lru_cache(maxsize=1)
def _runtimes() -> tuple:
    from sparsify_tui.engine import get_engine, installed_engines

    out = []
    for name in installed_engines():
        engine = get_engine(name)
        for precision in engine.precisions():
            out.append((get_engine(name, precision).label, f"{name}:{precision}"))
    return tuple(out)


def single_runtimes() -> list[tuple[str, str]]:
    """``(label, value)`` of every runtime this machine runs, the default engine's fp32 first: ``("onnxruntime
    1.32.0 · fp32", "onnxruntime:fp32")``. Read once per process (importing the runtimes takes about a second: the
    app reads it in its preload thread, before a dialog asks)."""
    return list(_runtimes())


def runtime_choices(*, many: bool = False, own: bool = False) -> list[tuple[str, str]]:
    """The options of a dialog's runtime field: :func:`single_runtimes`, preceded with ``many`` by "every runtime
    here" (:data:`EVERY`) and with ``own`` by "each optimization's own" (:data:`OWN`)."""
    head = []
    if own:
        head.append(("each optimization's own (+ the reference)", OWN))
    if many:
        head.append(("every runtime here", EVERY))
    return head + single_runtimes()


def runtime_value(engine: Optional[str], precision: Optional[str]) -> str:
    """The value of one runtime (a record's or a default's; None: the default engine, fp32)."""
    from sparsify_tui.engine import DEFAULT_ENGINE

    return f"{engine or DEFAULT_ENGINE}:{precision or 'fp32'}"


def runtime_row(select_id: str, value: Optional[str] = None, *, many: bool = False, own: bool = False,
                label: str = "Runtime") -> ComposeResult:
    """A dialog's runtime row (:func:`~sparsify_tui.tui.widgets.dialogs.select_row`): the choices of
    :func:`runtime_choices`, set to ``value`` when this machine runs it (a record's bf16 on a CPU without BF16: the
    first choice). ``yield from runtime_row("runtime", ...)``; the job's arguments: :func:`runtime_args`."""
    from sparsify_tui.tui.widgets.dialogs import select_row

    choices = runtime_choices(many=many, own=own)
    values = [v for _label, v in choices]
    yield from select_row(label, select_id, choices, value if value in values else values[0])


def runtime_args(value: str, *, many: bool = False) -> dict:
    """The job arguments of a choice: ``{"engine", "precision"}`` for one runtime, or with ``many``
    ``{"engines", "precisions"}`` (:data:`EVERY`: "all"; :data:`OWN`: none, the job's default)."""
    if value == OWN:
        return {}
    if value == EVERY:
        return {"engines": "all", "precisions": "all"}
    engine, _, precision = str(value).partition(":")
    if many:
        return {"engines": engine, "precisions": precision or "fp32"}
    return {"engine": engine, "precision": precision or "fp32"}


__all__ = ["EVERY", "OWN", "runtime_args", "runtime_choices", "runtime_row", "runtime_value", "single_runtimes"]
