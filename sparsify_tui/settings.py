"""Defaults and validation of the settings jobs take: one rule for the CLI, the TUI dialogs, the job handlers
and the core functions.

Every check raises :class:`sparsify_tui.errors.SparsifyError` with one line that names the value, what is
allowed and how to fix it, for example::

    --cores 1000 is more than the 2 cores this process may use: give 1 to 2
    --warmup -1 is not allowed: --warmup must be 0 or more (default 5)

``flag`` names the setting the way the caller's user typed it (``--cores`` on the CLI, ``core count`` in a
dialog). This module is a leaf: it imports nothing of sparsify-tui but :mod:`sparsify_tui.errors` (and
:mod:`sparsify_tui.tempfiles`, a leaf too, for output paths).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional

from sparsify_tui.errors import SparsifyError
from sparsify_tui.formatting import name_problem, plural, safe_line

WARMUP = 5
"""Untimed runs before timing (perf profiles and benchmarks)."""
ITERATIONS = 30
"""Timed runs (perf profiles and benchmarks)."""
LOSS_BATCHES = 2
"""Batches per one-shot loss measurement."""
MAX_BATCH_SIZE = 1 << 16
"""Largest batch size accepted (65,536 items)."""


def available_cores() -> int:
    """Cores this process may use: its CPU affinity (``os.sched_getaffinity``), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def _whole(value: Any, flag: str) -> int:
    ok = not isinstance(value, bool)
    try:
        number = int(str(value).strip()) if isinstance(value, str) else int(value)
        ok = ok and float(value) == number
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise SparsifyError(f"{flag} {value!r} is not allowed: {flag} must be a whole number")
    return number


def name(value: Any, flag: str = "--name", what: str = "a name") -> str:
    """A record or project name (stripped; empty stays empty, for the caller's default): no control character
    (newline and tab included), bidirectional control or zero-width character (:func:`sparsify_tui.formatting.
    name_problem`): a newline forged a row of ``sparsify-tui list``, and a right-to-left override reordered
    what the terminal showed."""
    text = str(value if value is not None else "").strip()
    problem = name_problem(text)
    if problem:
        raise SparsifyError(f"{flag} {safe_line(text)!r} is not allowed: {what} cannot hold {problem}; give "
                            "printable text (no control characters, bidirectional controls or zero-width characters)")
    return text


MAX_MEMORY_ENV = "SPARSIFY_TUI_MAX_MEMORY"
"""Environment variable of the memory a job may allocate (``--max-memory`` sets it for the jobs a command runs; set
it before ``sparsify-tui`` for the TUI's jobs): a size such as ``16G``, or ``none``."""
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def memory_size(value: Any, flag: str = "--max-memory") -> Optional[int]:
    """A memory limit in bytes: a number with an optional binary unit (``512M``, ``16G``, ``1.5T``; ``KiB``/``GB``
    spellings too, all powers of 1024), at least 64 MiB; ``none``/``unlimited`` is None (no limit)."""
    import re

    text = str(value if value is not None else "").strip()
    if text.lower() in ("none", "unlimited", "off"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", text, flags=re.IGNORECASE)
    if not m:
        raise SparsifyError(f"{flag} {text!r} is not allowed: give a size such as 16G, 512M or 1.5T (or none)")
    n = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if n < 64 << 20:
        raise SparsifyError(f"{flag} {text} is not allowed: {flag} must be 64M or more (or none)")
    return n


def max_memory_setting() -> tuple[Optional[int], bool]:
    """``(bytes, set)``: the job memory limit :data:`MAX_MEMORY_ENV` gives (None: no limit) and whether it is set
    at all (unset: the memory available when the job starts, :func:`sparsify_tui.analysis.system.job_memory_limit`)."""
    text = os.environ.get(MAX_MEMORY_ENV)
    if text is None or not text.strip():
        return None, False
    return memory_size(text, MAX_MEMORY_ENV), True


def batch_size(value: Any, flag: str = "--batch-size") -> int:
    """A batch size in 1..:data:`MAX_BATCH_SIZE` items."""
    n = _whole(value, flag)
    if not 1 <= n <= MAX_BATCH_SIZE:
        raise SparsifyError(f"{flag} {value} is not allowed: {flag} must be 1 to {MAX_BATCH_SIZE}")
    return n


def core_count(value: Any, flag: str = "--cores", *, available: Optional[int] = None,
               where: str = "this process may use") -> int:
    """A core count (intra-op threads) in 1..``available`` (default :func:`available_cores`). ``None`` means every
    available core. ``where`` ends the phrase "the N cores ..." in errors (a fleet target names its node)."""
    cores = available_cores() if available is None else int(available)
    if value is None:
        return cores
    n = _whole(value, flag)
    if n < 1:
        raise SparsifyError(f"{flag} {value} is not allowed: {flag} must be 1 or more, up to the {plural(cores, 'core')} "
                            f"{where}")
    if n > cores:
        raise SparsifyError(f"{flag} {value} is more than the {plural(cores, 'core')} {where}: give 1 to {cores}")
    return n


def _count_at_least(value: Any, flag: str, low: int, default: int) -> int:
    """A whole number >= ``low``; ``None`` gives ``default``."""
    if value is None:
        return default
    n = _whole(value, flag)
    if n < low:
        raise SparsifyError(f"{flag} {value} is not allowed: {flag} must be {low} or more (default {default})")
    return n


def warmup(value: Any, flag: str = "--warmup") -> int:
    """Untimed runs: 0 or more (default :data:`WARMUP`)."""
    return _count_at_least(value, flag, 0, WARMUP)


def iterations(value: Any, flag: str = "--iterations") -> int:
    """Timed runs: 1 or more (default :data:`ITERATIONS`)."""
    return _count_at_least(value, flag, 1, ITERATIONS)


def loss_batches(value: Any, flag: str = "--batches") -> int:
    """Batches per one-shot measurement: 1 or more (default :data:`LOSS_BATCHES`)."""
    return _count_at_least(value, flag, 1, LOSS_BATCHES)


def data_file(value: Any, flag: str = "--data") -> Optional[str]:
    """Sample data: None when empty, else the absolute path of an existing ``.npz`` or ``.npy`` file
    (``~`` expanded; its contents are checked against the model inputs when the job starts)."""
    import os

    if value in (None, ""):
        return None
    path = os.path.abspath(os.path.expanduser(str(value).strip()))
    if not os.path.isfile(path):
        raise SparsifyError(f"{flag}: {value} does not exist or is not a file: give an .npz or .npy file")
    if not path.lower().endswith((".npz", ".npy")):
        raise SparsifyError(f"{flag}: {value} is not .npz or .npy: save your samples with numpy.savez")
    return path


def whole_list(value: Any, check, flag: str) -> list[int]:
    """A list of whole numbers from ``"1,8"``, ``[1, 8]`` or ``8``, each passed through ``check(v, flag)``."""
    if isinstance(value, str):
        items: Iterable[Any] = [v for v in value.replace(" ", "").split(",") if v]
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        items = [value]
    items = list(items)
    if not items:
        raise SparsifyError(f"{flag} is empty: give comma-separated whole numbers, e.g. 1,8")
    for v in items:
        try:
            _whole(v, flag)
        except SparsifyError:
            raise SparsifyError(f"{flag} must be comma-separated whole numbers (e.g. 1,8), not {value!r}") from None
    return [check(v, flag) for v in items]


def batch_sizes(value: Any, default: int, flag: str = "--batch-sizes") -> list[int]:
    """Batch sizes of a benchmark (``None``: ``[default]``)."""
    return [batch_size(default, flag)] if value in (None, "", []) else whole_list(value, batch_size, flag)


def core_counts(value: Any, default: Optional[int], flag: str = "--cores") -> list[int]:
    """Core counts of a benchmark (``None``: ``[default]``, itself ``None`` for every core)."""
    return [core_count(default, flag)] if value in (None, "", []) else whole_list(value, core_count, flag)


def dim_value(value: Any, flag: str = "--dim") -> int:
    """The value of a symbolic input dim: a whole number >= 1 (the memory an input needs is checked against
    this machine by :func:`sparsify_tui.analysis.shapes.input_shapes`)."""
    n = _whole(value, flag)
    if n < 1:
        raise SparsifyError(f"{flag} {value} is not allowed: {flag} must be at least 1 (give the real input size)")
    return n


def _dim_items(value: Any, flag: str) -> list[tuple[str, Any]]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [(str(k), v) for k, v in value.items()]
    texts = [value] if isinstance(value, str) else list(value)
    out = []
    for text in texts:
        for part in str(text).split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, number = part.rpartition("=")
            if not sep or not name.strip() or not number.strip():
                raise SparsifyError(f"bad {flag} value {part!r}: write NAME=VALUE with an integer value, "
                                    f"e.g. {flag} seq=128 or {flag} x:2=48")
            out.append((name.strip(), number.strip()))
    return out


def dims(value: Any, known: Optional[Iterable[str]] = None, flag: str = "--dim") -> dict[str, int]:
    """Values of symbolic dims, scalar inputs (``sr=16000``) and vocabulary sizes of integer inputs, by name or
    ``INPUT:AXIS``: from a mapping, ``"seq=128,x:2=48"`` or a list of such strings. Each value is a whole
    number >= 0 (a dim must be >= 1: :func:`dim_value`, checked where the dims are resolved).

    ``known``: the names the model accepts (:func:`sparsify_tui.analysis.shapes.dim_keys`); a name not among
    them is refused, listing them, instead of being silently ignored."""
    out: dict[str, int] = {}
    for name, raw in _dim_items(value, flag):
        try:
            n = _whole(raw, flag)
        except SparsifyError:
            raise SparsifyError(f"{flag} {name}={raw} is not a whole number: write NAME=VALUE with an integer value, "
                                f"e.g. {flag} {name}=128") from None
        if n < 0:
            raise SparsifyError(f"{flag} {name}={raw} is negative: give a whole number of 0 or more")
        out[name] = n
    if known is not None:
        known = list(known)
        unknown = [k for k in out if k not in known]
        if unknown:
            if known:
                shown = ", ".join(known[:12]) + (" ..." if len(known) > 12 else "")
                fix = f"give one of {shown} (a dim's name or INPUT:AXIS, or a scalar/integer input's name)"
            else:
                fix = f"drop {flag}: the model has no symbolic dims or scalar inputs"
            raise SparsifyError(f"{flag} {unknown[0]}={out[unknown[0]]} names nothing in the model: {fix}")
    return out


def default_root():
    """The workspace folder: ``$SPARSIFY_TUI_HOME``, else ``$XDG_DATA_HOME/sparsify-tui``, else
    ``~/.local/share/sparsify-tui`` (a ``Path``)."""
    from pathlib import Path

    home = os.environ.get("SPARSIFY_TUI_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(xdg) / "sparsify-tui"


def inside_workspace(path: Any, workspace: Any = None) -> bool:
    """True when ``path`` (or where it would be created) lies inside the workspace folder ``workspace`` (default
    :func:`default_root`), links resolved: the index, project folders, models and blobs are sparsify-tui's own."""
    from pathlib import Path

    root = Path(workspace) if workspace is not None else default_root()
    try:
        real_root = os.path.realpath(root)
        target = Path(os.path.realpath(Path(path).expanduser().parent)) / Path(path).name
    except (OSError, ValueError):
        return False
    return target == Path(real_root) or Path(real_root) in target.parents


def output_path(value: Any, flag: str = "-o", *, allow_dir: bool = False, workspace: Any = None) -> str:
    """A file path to write: its folder must already exist and be writable (nothing creates folders the user
    did not ask for); an existing folder is accepted only with ``allow_dir`` (the file is written inside). Refused:
    a symlink or an existing non-regular file (:func:`sparsify_tui.tempfiles.check_output_target`), and any path
    inside the workspace ``workspace`` (default :func:`default_root`): sparsify-tui's own files are never an
    output."""
    from pathlib import Path

    from sparsify_tui.tempfiles import check_output_target

    text = str(value or "").strip()
    if not text:
        raise SparsifyError(f"{flag} is empty: give the path of the file to write")
    problem = name_problem(text)
    if problem:
        raise SparsifyError(f"{flag} {safe_line(text)!r} is not allowed: a file path written here cannot hold "
                            f"{problem}; give a path of printable characters")
    p = Path(text).expanduser()
    if p.is_dir() and not p.is_symlink():
        if allow_dir and os.access(p, os.W_OK):
            _outside_workspace(p / "x", flag, text, workspace)
            return str(p)
        raise SparsifyError(f"{flag} {text} is a folder: give a file path inside it, e.g. {flag} {p / 'out'}")
    check_output_target(p, flag)
    parent = p.parent
    if not parent.is_dir():
        raise SparsifyError(f"{flag} {text}: folder {parent} does not exist: create it first (mkdir -p {parent}) "
                            "or choose another path")
    if not os.access(parent, os.W_OK):
        raise SparsifyError(f"{flag} {text}: folder {parent} is not writable: choose a folder you can write to")
    _outside_workspace(p, flag, text, workspace)
    return str(p)


def _outside_workspace(p, flag: str, text: str, workspace: Any) -> None:
    if inside_workspace(p, workspace):
        root = workspace if workspace is not None else default_root()
        raise SparsifyError(f"{flag} {text} is inside the sparsify-tui workspace {root} (its index, projects, models "
                            "and data): write it elsewhere, or leave out the option to use the project's own folder")


METRICS = ("top1", "nmse", "kl", "max_abs")
"""Output metrics an accuracy budget can be stated in (:mod:`sparsify_tui.profiling.metrics`); a metric of the
user's own (``FILE.py:FUNCTION``, :func:`is_user_metric`) is one more."""
CALIBRATION_METHODS = ("minmax", "entropy", "percentile")
"""INT8 calibration methods (:data:`sparsify_tui.engine.ort_quant.CALIBRATION_METHODS`)."""
MAX_DROP = 0.01
"""Default accuracy budget of the INT8 search (NNCF's default ``max_drop``)."""
CALIBRATION_SIZE = 16
"""Calibration batches (1 item each) of INT8 quantization (docs/calibration.md used 16)."""


def max_drop(value: Any, flag: str = "--max-drop") -> float:
    """An accuracy budget: a number >= 0 in the metric's units (absolute drop for top1; the value of
    nmse/kl/max_abs). ``None`` gives :data:`MAX_DROP`."""
    if value is None or value == "":
        return MAX_DROP
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise SparsifyError(f"{flag} {value!r} is not allowed: {flag} must be a number, e.g. 0.01 "
                            "(1 point of top-1)") from None
    if not v >= 0 or v == float("inf"):
        raise SparsifyError(f"{flag} {value} is not allowed: {flag} must be 0 or more, e.g. 0.01 (1 point of top-1) "
                            "or 0.05 (NMSE)")
    return v


def is_user_metric(value: Any) -> bool:
    """True for a metric of the user's own, ``FILE.py:FUNCTION`` (:func:`metric` checks it;
    :mod:`sparsify_tui.profiling.user_metric` loads and calls it)."""
    return isinstance(value, str) and ":" in value and value.rpartition(":")[0].strip().lower().endswith(".py")


def metric(value: Any, flag: str = "--metric") -> Optional[str]:
    """An output metric of :data:`METRICS`, or None / "auto" for the default chosen from the model outputs, or a
    metric of the user's own, ``FILE.py:FUNCTION``: returned as ``/absolute/FILE.py:FUNCTION`` once the file exists,
    parses as Python and defines ``FUNCTION`` at its top level (read, not run: it runs in the job process)."""
    if value in (None, "", "auto"):
        return None
    if is_user_metric(value):
        return _user_metric_spec(str(value).strip(), flag)
    if value not in METRICS:
        raise SparsifyError(f"{flag} {value!r} is not allowed: {flag} must be one of {', '.join(METRICS)}, or "
                            "FILE.py:FUNCTION for a metric of your own (or leave it out for the default from the "
                            "model outputs)")
    return str(value)


def _user_metric_spec(value: str, flag: str) -> str:
    """``/absolute/FILE.py:FUNCTION`` of ``FILE.py:FUNCTION`` (see :func:`metric`). Raises ``SparsifyError``."""
    import ast

    path_text, _, func = value.rpartition(":")
    path = os.path.abspath(os.path.expanduser(path_text.strip()))
    func = func.strip()
    if not func.isidentifier():
        raise SparsifyError(f"{flag} {value}: {func!r} is not a Python function name: give FILE.py:FUNCTION, e.g. "
                            "examples/metrics/ctc_text.py:cer")
    if not os.path.isfile(path):
        raise SparsifyError(f"{flag} {value}: {path_text} does not exist or is not a file: give the path of your "
                            "metric's .py file")
    name = os.path.basename(path)
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except SyntaxError as err:
        raise SparsifyError(f"{flag} {value}: {name} line {err.lineno}: {err.msg}: fix the file") from None
    except (OSError, ValueError) as err:
        raise SparsifyError(f"{flag} {value}: {name} cannot be read ({err}): check the file") from None
    defined = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined += [t.id for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined += [(a.asname or a.name).split(".")[0] for a in node.names]
    if func not in defined:
        funcs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
        has = f" (it defines {', '.join(funcs[:6])})" if funcs else ""
        raise SparsifyError(f"{flag} {value}: {name} defines no {func!r} at its top level{has}: give one of its "
                            "functions, FILE.py:FUNCTION")
    return f"{path}:{func}"


def calibration_method(value: Any, flag: str = "--calibration") -> str:
    """An INT8 calibration method of :data:`CALIBRATION_METHODS` (``None``: "minmax")."""
    if value in (None, ""):
        return "minmax"
    if value not in CALIBRATION_METHODS:
        raise SparsifyError(f"{flag} {value!r} is not allowed: {flag} must be one of "
                            f"{', '.join(CALIBRATION_METHODS)}")
    return str(value)


def calibration_size(value: Any, flag: str = "--calibration-size") -> int:
    """Calibration batches: 1 or more (default :data:`CALIBRATION_SIZE`)."""
    return _count_at_least(value, flag, 1, CALIBRATION_SIZE)


def trial_count(value: Any, default: int, flag: str = "--max-trials") -> int:
    """Trials of a search at most: 1 or more (``None``: ``default``)."""
    return _count_at_least(value, flag, 1, default)


# ------------------------------------------------------------------------------------------- fleet
FLEET_NAME = "{target} b{batch} {cores}c"
"""Default name of a fleet result: ``<hostname> b<batch> <cores>c`` (``{target}`` is the hostname, with the node
id's first 6 digits when several chosen targets share a hostname)."""
FLEET_NAME_FIELDS = ("target", "hostname", "node", "batch", "cores")
"""The ``{field}`` placeholders a fleet result name may use."""


def fleet_address(value: Any, flag: str = "--address") -> str:
    """A Ray cluster address, ``HOST:PORT`` of the head node (what ``ray start --head`` printed; the port is 6379
    unless ``--port`` was given). Ray Client addresses (``ray://``) are refused: the driver must be a node."""
    text = str(value or "").strip()
    if not text:
        raise SparsifyError(f"{flag} is empty: give the Ray head node's HOST:PORT (what `ray start --head` printed, "
                            "e.g. 10.0.0.5:6379)")
    if "://" in text:
        raise SparsifyError(f"{flag} {text} is not allowed: {flag} must be the head node's HOST:PORT, not a Ray "
                            "Client address (join this machine to the cluster with `ray start --address HOST:PORT`)")
    host, sep, port = text.rpartition(":")
    if not sep or not host.strip("[]") or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise SparsifyError(f"{flag} {text} is not allowed: {flag} must be the Ray head node's HOST:PORT, "
                            "e.g. 10.0.0.5:6379")
    return text


def fleet_targets(value: Any, flag: str = "--targets") -> dict:
    """Which nodes of a Ray cluster a fleet job measures on, from ``all``; comma-separated node ids (or unique
    prefixes of at least 6 hex digits); or comma-separated ``KEY=VALUE`` node labels, every one of which a node
    must have. Returns ``{"all": True}``, ``{"ids": [...]}`` or ``{"labels": {key: value}}``."""
    text = ",".join(value) if isinstance(value, (list, tuple)) else str(value or "")
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise SparsifyError(f"{flag} is empty: give all, node ids (see `sparsify-tui fleet nodes`) or a node label "
                            "KEY=VALUE")
    if [t.lower() for t in items] == ["all"]:
        return {"all": True}
    labelled = [t for t in items if "=" in t]
    if labelled and len(labelled) != len(items):
        raise SparsifyError(f"{flag} {text} is not allowed: {flag} must be node ids or KEY=VALUE labels, not both")
    if labelled:
        labels: dict = {}
        for t in labelled:
            key, _, val = t.partition("=")
            if not key.strip() or not val.strip():
                raise SparsifyError(f"{flag} {t} is not allowed: {flag} labels must be KEY=VALUE, e.g. "
                                    f"{flag} cpu=epyc-genoa")
            labels[key.strip()] = val.strip()
        return {"labels": labels}
    for t in items:
        if t.lower() == "all":
            raise SparsifyError(f"{flag} {text} is not allowed: {flag} must be all alone, or node ids without it")
        if len(t) < 6 or any(c not in "0123456789abcdefABCDEF" for c in t):
            raise SparsifyError(f"{flag} {t} is not allowed: {flag} must be all, node ids (at least their first 6 "
                                "hex digits; see `sparsify-tui fleet nodes`) or KEY=VALUE labels")
    return {"ids": [t.lower() for t in items]}


def fleet_cores(value: Any, flag: str = "--cores") -> Optional[int]:
    """Cores per fleet target: ``all`` or ``None`` (every core the task may use on each node: returns None) or a
    whole number >= 1 (each target's own limit is checked with :func:`core_count` and ``available=``)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "all")):
        return None
    n = _whole(value, flag)
    if n < 1:
        raise SparsifyError(f"{flag} {value} is not allowed: {flag} must be all or a whole number of 1 or more")
    return n


def fleet_name(value: Any, flag: str = "--name") -> str:
    """The name template of fleet results (default :data:`FLEET_NAME`); may use the fields of
    :data:`FLEET_NAME_FIELDS` in braces."""
    import string

    text = name(value, flag) or FLEET_NAME
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as err:
        raise SparsifyError(f"{flag} {text} is not allowed: {flag} must be a name template with fields in braces "
                            f"such as {{target}}, other braces doubled ({err})") from None
    unknown = [f for f in fields if f not in FLEET_NAME_FIELDS]
    if unknown:
        raise SparsifyError(f"{flag} {text} is not allowed: {flag} may use only the fields "
                            + ", ".join("{" + f + "}" for f in FLEET_NAME_FIELDS) + f", not {{{unknown[0]}}}")
    return text
