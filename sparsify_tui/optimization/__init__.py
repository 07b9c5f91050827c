"""Optimization: per-layer pruning allocation, quantization, schedules, estimates, recipe and code export.

Pure core (no workspace): :mod:`config` (settings, per-layer curves), :mod:`allocation` (the solver),
:mod:`estimates`, :mod:`schedule` (epochs, GMP cubic, LR), :mod:`recipe` (YAML), :mod:`integration` (code).
Workspace operations: :mod:`core` and :mod:`export`. ``apply.py`` (one-shot apply) belongs to the benchmark
feature. Never imports textual.
"""

from sparsify_tui.optimization.core import (  # noqa: F401
    build_optimization, copy_optimization, create_optimization, delete_optimization, evaluate,
    get_optimization, layer_sparsities, reevaluate, set_override, update_schedule,
)
from sparsify_tui.optimization.export import export_optimization  # noqa: F401
