"""Headless CLI subcommands. One module per feature, each with ``register(subparsers)``.

Every module keeps heavy imports (onnx, onnxruntime, numpy, textual) inside its handler functions so
that ``sparsify-tui --help`` stays instant. A handler has the signature ``handler(args) -> int`` and
raises :class:`sparsify_tui.errors.SparsifyError` for user errors; ``cli.main`` turns those into one
line on stderr and exit code 2.
"""

# Order is the order shown in --help.
COMMAND_MODULES = [
    "analyze",    # analyze                                           (issue: foundation, analysis owner)
    "projects",   # create, list, show, edit, delete, demo            (issue: foundation, store owner)
    "perf",       # profile perf                                      (issue: perf profiles)
    "loss",       # profile loss                                      (issue: loss profiles)
    "optimize",   # optimize, export                                  (issue: optimization)
    "benchmark",  # apply, benchmark                                  (issue: benchmarks)
    "jobs",       # job run/list/cancel                               (issue: perf profiles, jobs)
]
