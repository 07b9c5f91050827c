"""Use cases shared by the CLI, the TUI and the job handlers: they read and write the workspace
(:mod:`sparsify_tui.store`) and call the core (analysis, profiling, optimization, benchmark) with plain data.

* :mod:`.projects`: create a project (analyze, then store), find the project of a model file, summaries.
* :mod:`.profiles`: store and load typed perf and loss profiles (the data file before the record).
* :mod:`.optimizations`: create, re-evaluate, override, copy, delete and export optimizations.
* :mod:`.apply`: apply an optimization to the project's model and record the result.
* :mod:`.benchmarks`: run and load project benchmarks.

Core packages never import this package (nor the store); only ``jobs``, ``commands`` and ``tui`` do.
"""
