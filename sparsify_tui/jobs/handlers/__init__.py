"""Job handlers: each adapts a job's JSON arguments (with the project's setup as defaults) to one core call and
persists its typed result through :mod:`sparsify_tui.services`. A handler is ``run(ctx: JobContext) -> dict``
(a small JSON summary that names the record it wrote). Each module also exposes the validation of its
arguments (``*_settings``), which the CLI and the TUI call before a job record is created."""
