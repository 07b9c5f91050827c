"""Headless CLI subcommands. One module per feature, each with ``register(subparsers)``.

Every module keeps heavy imports (onnx, onnxruntime, numpy, textual) inside its handler functions so
that ``sparsify-tui --help`` stays instant. A handler has the signature ``handler(args) -> int`` and
raises :class:`sparsify_tui.errors.SparsifyError` for user errors; ``cli.main`` turns those into one
line on stderr and exit code 2.
"""

# Order is the order shown in --help.
COMMAND_MODULES = [
    "analyze",    # analyze
    "data",       # data images, data show (sample sets from image folders)
    "projects",   # create, list, show, edit, delete, demo
    "perf",       # profile perf
    "loss",       # profile loss
    "profile_io",  # profile export, profile import
    "optimize",   # optimize, export
    "benchmark",  # apply, benchmark
    "compare",    # compare (profiles, optimizations)
    "report",     # report


    "channel",    # profile channel-calibration, optimization show
    "fleet",      # fleet nodes/profile/benchmark (optional extra: Ray)
    "jobs",       # job run/list/show/cancel/log
    "serve",      # serve (the TUI in a browser)
]


def profile_group(sub):
    """The ``profile`` command's sub-parsers (``profile perf``, ``profile loss``, ``profile export``,
    ``profile import``), created on first call and
    reused after (stored on ``sub``)."""
    existing = getattr(sub, "_profile_group", None)
    if existing is not None:
        return existing
    parser = sub.add_parser("profile", help="performance and loss profiles",
                            description="Measure performance (perf) or loss-sensitivity (loss) profiles.")
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])
    sub._profile_group = parser.add_subparsers(dest="profile_kind", metavar="KIND")
    return sub._profile_group


def looks_like_model(target: str) -> bool:
    """True when a PROJECT_OR_MODEL argument names a model path rather than a project id or name: it ends in
    ``.onnx`` or has a ``/``, or it is a file here that no project is named after (a bare name that is a project
    and also a file or folder in the current directory is the project). A folder here that is no project: a
    one-line :class:`~sparsify_tui.errors.ProjectError` naming both readings."""
    from pathlib import Path

    from sparsify_tui.errors import ProjectError

    p = Path(target)
    if p.suffix.lower() == ".onnx" or "/" in target:
        return True
    if not (p.is_file() or p.is_dir()):
        return False
    from sparsify_tui.store import Workspace

    try:
        Workspace().get_project(target)
        return False  # the project wins over a file or folder of the same name here
    except ProjectError:
        pass
    if p.is_dir():
        raise ProjectError(f"{target} is a folder here, not an ONNX model, and no project is named {target!r}: "
                           f"give the path of the .onnx file inside it, or a project's name (sparsify-tui list)")
    return True


def add_runtime_options(p, *, many: bool = False) -> None:
    """The run spec's runtime flags: ``--engine`` and ``--precision`` (one each), or with ``many`` ``--engines``
    and ``--precisions`` (comma-separated lists: a benchmark or search across runtimes). The choices come from the
    engine registry, so no command names a runtime."""
    from sparsify_tui.engine import DEFAULT_ENGINE, ENGINES, PRECISIONS

    engines, precisions = ", ".join(sorted(ENGINES)), ", ".join(PRECISIONS)
    if many:
        p.add_argument("--engines", default=None, metavar="E1,E2",
                       help=f"runtimes to measure, comma-separated ({engines}; 'all': every installed one)")
        p.add_argument("--precisions", default=None, metavar="P1,P2",
                       help=f"session precisions, comma-separated ({precisions}; 'all': every one this CPU runs)")
    else:
        p.add_argument("--engine", default=None, help=f"runtime ({engines}; default: the project's, or "
                                                      f"{DEFAULT_ENGINE})")
        p.add_argument("--precision", default=None, help=f"session precision ({precisions}; default fp32; bf16 "
                                                         "needs a CPU with BF16)")


def runtime_args(args) -> dict:
    """The job arguments of :func:`add_runtime_options`' flags that were given."""
    keys = ("engine", "precision", "engines", "precisions")
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}
