"""Optimization: per-layer pruning allocation, quantization, schedules, estimates, recipe and code export.

Pure core (typed data in and out, never a workspace): :mod:`record` (the typed record and its JSON),
:mod:`config` (per-layer inputs shared by the structures), :mod:`structures` (what is pruned: one module per
pruning structure, registered in ``STRUCTURES``), :mod:`allocation` (the solver), :mod:`estimates`,
:mod:`schedule` (epochs, GMP cubic, LR), :mod:`recipe` (YAML), :mod:`integration` (code), :mod:`export`
(rendering and writing the files), :mod:`core` (building and changing a record), :mod:`apply` (one-shot
apply of a record to a model). Stored optimizations are handled by :mod:`sparsify_tui.services.optimizations`.
"""

from sparsify_tui.optimization.core import build_optimization, evaluate, layer_sparsities  # noqa: F401
from sparsify_tui.optimization.record import Optimization  # noqa: F401
