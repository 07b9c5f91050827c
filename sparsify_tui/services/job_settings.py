"""The arguments of every job, validated, with the project's setup as defaults: one module, one defaulting step.

Each ``*_settings(project, args, ...)`` turns a job's arguments (from the CLI, a TUI dialog or a stored job record)
into the validated settings its run uses, and raises ``SparsifyError`` (one line) before anything runs or is
recorded. What an argument left out takes from the project is decided once, by :func:`project_defaults`: the batch
size (the setup's, else 1), the core count (the setup's, capped at the cores this process may use now), the
symbolic dims (the setup's, with the arguments' added or overriding them). The value checks are
:mod:`sparsify_tui.settings`'s. ``flags``: how the caller names each argument in its errors (default the CLI's
options; a TUI dialog passes its field labels). With ``model_path`` the model's inputs are checked too
(:func:`sparsify_tui.analysis.run_inputs.check_run_inputs`: the model, dim names, memory, sample data).

The job handlers (:mod:`sparsify_tui.jobs.handlers`) check their arguments with these before a job record exists,
and again when the job runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from sparsify_tui import settings
from sparsify_tui.errors import ProjectError, SampleDataError, SparsifyError

#: the run spec's flags (every measuring job kind takes them)
RUN_FLAGS = {"engine": "--engine", "precision": "--precision"}
PERF_FLAGS = {"batch_size": "--batch-size", "core_count": "--cores", "warmup": "--warmup",
              "iterations": "--iterations", **RUN_FLAGS}
LOSS_FLAGS = {**RUN_FLAGS, "batches": "--batches", "batch_size": "--batch-size", "core_count": "--cores", "levels": "--levels",
              "method": "--method", "metric": "--metric", "data": "--data", "structure": "--structure",
              "int8": "--int8"}
BENCHMARK_FLAGS = {"batch_sizes": "--batch-sizes", "core_counts": "--cores", "warmup": "--warmup",
                   "iterations": "--iterations", "engines": "--engines", "precisions": "--precisions"}
APPLY_FLAGS = {"optimization": "OPTIMIZATION", "out_path": "-o", "data": "--data", "labels": "--labels",
               "reconstruct": "--no-reconstruct", "calibration_size": "--calibration-size", "metric": "--metric"}
FLEET_FLAGS = {**RUN_FLAGS, "address": "--address", "targets": "--targets", "batch_size": "--batch-size",
               "batch_sizes": "--batch-sizes", "core_count": "--cores", "warmup": "--warmup",
               "iterations": "--iterations", "name": "--name"}


@dataclass
class ProjectDefaults:
    """What a job's arguments take from the project when they leave it out (not yet validated):
    ``batch_size`` (items per batch), ``core_count`` (threads), ``dims`` (symbolic dim name -> value) and the
    project's ``setup`` itself (names and data of its own)."""

    batch_size: Any
    core_count: Any
    dims: Dict[str, Any]
    setup: Dict[str, Any] = field(default_factory=dict)


def project_defaults(project: Dict[str, Any], args: Dict[str, Any]) -> ProjectDefaults:
    """The one defaulting step (module docstring)."""
    setup = project.get("setup") or {}
    cores = args.get("core_count")
    if cores is None:
        cores = min(int(setup.get("core_count") or settings.available_cores()), settings.available_cores())
    batch = args["batch_size"] if args.get("batch_size") is not None else setup.get("batch_size") or 1
    return ProjectDefaults(batch_size=batch, core_count=cores,
                           dims={**(setup.get("dims") or {}), **(args.get("dims") or {})}, setup=setup)


def _flags(defaults: Mapping[str, str], flags: Optional[Mapping[str, str]]) -> Dict[str, str]:
    return {**defaults, **(flags or {})}


def runtime(engine: Any, precision: Any, flags: Optional[Mapping[str, str]] = None) -> tuple:
    """``(engine name, precision)`` checked: a registered engine that is installed here and a precision it runs on
    this CPU (:func:`sparsify_tui.engine.get_engine`); None takes the default (onnxruntime, fp32). Raises
    ``SparsifyError`` (one line, naming ``flags``' option) otherwise."""
    from sparsify_tui.engine import DEFAULT_ENGINE, ENGINES, PRECISIONS, get_engine

    f = _flags(RUN_FLAGS, flags)
    engine, precision = str(engine or DEFAULT_ENGINE), str(precision or "fp32")
    if engine not in ENGINES:
        raise SparsifyError(f"{f['engine']} {engine!r} is not an engine: use one of {', '.join(sorted(ENGINES))}")
    if precision not in PRECISIONS:
        raise SparsifyError(f"{f['precision']} {precision!r} is not a precision: use one of {', '.join(PRECISIONS)}")
    get_engine(engine, precision)  # not installed, or this CPU lacks the precision: its one line
    return engine, precision


def _names(value: Any) -> Optional[list]:
    """A comma-separated string or a list of names as a list (None when not given)."""
    if value in (None, "", []):
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(x).strip() for x in items if str(x).strip()]


def runtimes(args: Dict[str, Any], flags: Optional[Mapping[str, str]] = None) -> tuple:
    """``(runtimes, notes)`` of a job across runtimes (a benchmark, a search): ``args["engines"]`` x
    ``args["precisions"]`` (lists or comma-separated; ``"all"``: every installed engine, every precision the engine
    runs on this CPU) as checked ``(engine, precision)`` pairs, and one line per pair skipped because the engine
    cannot run that precision here (bf16 on a CPU without it, say). ``runtimes`` is None when neither is given (the
    job's own default). Raises ``SparsifyError`` (one line) for an unknown engine or precision, an engine that is
    not installed, or a precision no asked engine runs here."""
    from sparsify_tui.engine import ENGINES, PRECISIONS, get_engine, installed_engines

    f = _flags({"engines": "--engines", "precisions": "--precisions"}, flags)
    engines, precisions = _names(args.get("engines")), _names(args.get("precisions"))
    if engines is None and precisions is None:
        return None, []
    if engines in (None, ["all"]):
        engines = installed_engines()
    every_precision = precisions == ["all"]
    precisions = list(PRECISIONS) if every_precision else (precisions or ["fp32"])
    for e in engines:
        if e not in ENGINES:
            raise SparsifyError(f"{f['engines']}: {e!r} is not an engine: use some of {', '.join(sorted(ENGINES))}")
        get_engine(e)  # not installed: its one line
    for p in precisions:
        if p not in PRECISIONS:
            raise SparsifyError(f"{f['precisions']}: {p!r} is not a precision: use some of {', '.join(PRECISIONS)}")
    pairs, notes = [], []
    for e in engines:
        for p in precisions:
            problem = get_engine(e).precision_problem(p)
            if problem is None:
                pairs.append((e, p))
            elif not every_precision:
                notes.append(f"{e} {p} skipped: {problem}")
    for p in precisions:
        if all(q != p for _, q in pairs):
            # why: the engines that have such sessions say what this CPU lacks; none has them: say so
            why = "; ".join(get_engine(e).precision_problem(p) for e in engines
                            if p in ENGINES[e].session_precisions) or \
                f"none of {', '.join(engines)} runs {p} sessions: use {f['precisions']} fp32"
            if not every_precision:
                raise SparsifyError(f"{f['precisions']} {p}: {why}")
            notes.append(f"{p} skipped: {why}")  # every precision asked for: one line for one no engine runs
    return pairs, notes


def _runtime_names(engine: Any, precision: Any, f: Mapping[str, str]) -> tuple:
    """``(engine, precision)`` named by the registry, not checked against this machine: a fleet target runs it if
    it has that runtime and says so in one line if not (its own :meth:`RunSpec.runtime`)."""
    from sparsify_tui.engine import ENGINES, PRECISIONS

    engine, precision = str(engine or "onnxruntime"), str(precision or "fp32")
    if engine not in ENGINES:
        raise SparsifyError(f"{f.get('engine', '--engine')} {engine!r} is not an engine: use one of "
                            f"{', '.join(sorted(ENGINES))}")
    if precision not in PRECISIONS:
        raise SparsifyError(f"{f.get('precision', '--precision')} {precision!r} is not a precision: use one of "
                            f"{', '.join(PRECISIONS)}")
    return engine, precision


def run_spec(d: ProjectDefaults, args: Dict[str, Any], f: Mapping[str, str]):
    """The :class:`~sparsify_tui.engine.run.RunSpec` of a one-run job: ``args``' engine and precision (else the
    project setup's, else onnxruntime fp32, :func:`runtime`), its batch size and core count (``d``, validated)."""
    from sparsify_tui.engine.run import RunSpec

    engine, precision = runtime(args.get("engine") or d.setup.get("engine"),
                                args.get("precision") or d.setup.get("precision"), f)
    return RunSpec(engine=engine, precision=precision, batch_size=settings.batch_size(d.batch_size, f["batch_size"]),
                   core_count=settings.core_count(d.core_count, f["core_count"]))


def _check_inputs(model_path, batch_sizes, dims, data, **kw) -> None:
    if model_path is not None:
        from sparsify_tui.analysis.run_inputs import check_run_inputs

        for b in batch_sizes:
            check_run_inputs(model_path, b, dims, data, **kw)


# ------------------------------------------------------------------------------------------------ profiles
def perf_settings(project: Dict[str, Any], args: Dict[str, Any], *, model_path=None,
                  flags: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Validated arguments of a perf profile: ``name, run`` (:class:`~sparsify_tui.engine.run.RunSpec`: engine,
    precision, batch size, cores), ``warmup, iterations, data, int8, dims`` (module docstring)."""
    f = _flags(PERF_FLAGS, flags)
    d = project_defaults(project, args)
    out = {
        "name": settings.name(args.get("name")) or d.setup.get("perf_name") or "baseline",
        "run": run_spec(d, args, f),
        "warmup": settings.warmup(args.get("warmup"), f["warmup"]),
        "iterations": settings.iterations(args.get("iterations"), f["iterations"]),
        "data": args.get("data") or None,
        "int8": bool(args.get("int8", True)),
        "dims": settings.dims(d.dims),
    }
    if model_path is not None:
        from sparsify_tui.profiling.perf import sample_batches_used

        _check_inputs(model_path, [out["run"].batch_size], out["dims"], out["data"], user_dims=args.get("dims"),
                      data_batches=sample_batches_used(out["warmup"], out["iterations"], out["int8"]),
                      finite=out["int8"])
    return out


def loss_settings(project: Dict[str, Any], args: Dict[str, Any], *, model_path=None,
                  flags: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Validated arguments of a loss profile: ``name, run`` (:class:`~sparsify_tui.engine.run.RunSpec`: the one-shot
    sessions' engine and precision, batch size, cores), ``method, levels, data, batches, dims, int8, metric,
    structure`` (module docstring; the method, metric and structure go together as
    :func:`sparsify_tui.profiling.loss_methods.check_loss_arguments` says). With ``model_path`` every method loads
    the model, checks the dim names and onnx's strict shape check; one-shot (which runs the model) also checks
    dims, memory and sample data."""
    from sparsify_tui.profiling.loss import parse_levels
    from sparsify_tui.profiling.loss_methods import check_loss_arguments

    f = _flags(LOSS_FLAGS, flags)
    d = project_defaults(project, args)
    levels = args.get("levels")
    if levels is not None:
        text = levels if isinstance(levels, str) else ",".join(str(x) for x in levels)
        try:
            levels = parse_levels(text)
        except SparsifyError:
            raise SparsifyError(f"bad {f['levels']} {text!r}: give comma-separated sparsities in [0, 1), "
                                "e.g. 0.2,0.4,0.9") from None
    method, metric = args.get("method") or "magnitude", args.get("metric")
    int8, structure = bool(args.get("int8", False)), str(args.get("structure") or "unstructured")
    check_loss_arguments(method, metric, structure, int8, flags=f)
    data = args.get("data") or None
    if data and method != "one-shot":
        raise SparsifyError(f"{f['data']} is used by the one-shot method only, not {method}: drop it or choose "
                            f"{f['method']} one-shot")
    out = {
        "name": settings.name(args.get("name")) or d.setup.get("loss_name") or "baseline",
        "method": method,
        "levels": levels,
        "data": data,
        "batches": settings.loss_batches(args.get("batches"), f["batches"]),
        "run": run_spec(d, args, f),
        "dims": settings.dims(d.dims),
        "int8": int8,
        "metric": metric,
        "structure": structure,
    }
    if model_path is not None and method == "one-shot":
        _check_inputs(model_path, [out["run"].batch_size], out["dims"], out["data"], batches=out["batches"],
                      user_dims=args.get("dims"), data_batches=out["batches"], finite=out["int8"])
    elif model_path is not None:
        from sparsify_tui.analysis.loading import load_model
        from sparsify_tui.analysis.shapes import check_shapes, check_user_dims, dim_keys

        model = load_model(model_path, load_external_data=False)
        check_user_dims(model, args.get("dims"))
        settings.dims(out["dims"], dim_keys(model))
        check_shapes(model, None)  # a model onnxruntime cannot load is refused even by weight magnitude
    return out


def calibration_settings(ws, project: Dict[str, Any], args: Dict[str, Any]) -> Dict[str, Any]:
    """Validated arguments of a channel calibration: ``perf`` (the perf profile record id: ``args["perf"]`` id or
    name, default the newest completed one), ``ratios`` (list or ``"0.25,0.5"``), and the perf profile's ``run``
    (:class:`~sparsify_tui.engine.run.RunSpec`: its engine, precision, batch size, and core count capped at the cores
    available now), ``dims``, ``warmup``, ``iterations``, ``data``: it measures what that profile measured. Raises ``SparsifyError`` / ``RecordNotFound`` (one line)."""
    from sparsify_tui.profiling.channel_calibration import DEFAULT_RATIOS
    from sparsify_tui.services.profiles import FLOPS, resolve_perf_profile

    ref = args.get("perf")
    if ref is not None and str(ref).lower() == FLOPS:
        raise SparsifyError("a channel calibration is stored with a measured perf profile, not FLOPS: "
                            "give --perf NAME or run sparsify-tui profile perf first")
    prof, rec_id, name = resolve_perf_profile(ws, project["id"], ref)
    if prof is None:
        raise SparsifyError(f"project {project['name']!r} has no perf profile: run sparsify-tui profile perf "
                            f"{project['name']!r} first (the calibration is stored with it)")
    ratios = args.get("ratios") or list(DEFAULT_RATIOS)
    if isinstance(ratios, str):
        try:
            ratios = [float(x) for x in ratios.replace(" ", "").split(",") if x]
        except ValueError:
            raise SparsifyError(f"--ratios {ratios!r} is not allowed: --ratios must be numbers, e.g. 0.25,0.5") from None
    if not ratios or any(not 0 < float(r) < 1 for r in ratios):
        raise SparsifyError(f"--ratios {ratios} is not allowed: --ratios must be fractions of channels in (0, 1), "
                            "e.g. 0.25,0.5")
    from sparsify_tui.engine.run import RunSpec

    engine, precision = runtime(prof.engine, prof.precision)
    return {
        "perf": rec_id, "perf_name": name, "ratios": sorted(float(r) for r in ratios),
        "run": RunSpec(engine=engine, precision=precision, batch_size=settings.batch_size(prof.batch_size or 1),
                       core_count=settings.core_count(min(int(prof.core_count or settings.available_cores()),
                                                          settings.available_cores()))),
        "dims": dict(prof.dims or {}), "warmup": settings.warmup(prof.warmup),
        "iterations": settings.iterations(prof.iterations), "data": prof.inputs.path,
    }


# ------------------------------------------------------------------------------------------------ optimizations
def int8_settings(project: Dict[str, Any], args: Dict[str, Any]) -> Dict[str, Any]:
    """Validated arguments of an INT8 search job: ``name, perf, loss, sparsity, balance, max_drop, metric, data,
    labels, calibration, calibration_size, dims, run`` (:class:`~sparsify_tui.engine.run.RunSpec`: the runtime
    searched, batch 1, the cores) (module docstring; the data defaults to the project's sample data)."""
    d = project_defaults(project, {**args, "batch_size": 1})
    name = settings.name(args.get("name"))
    if not name:
        raise ProjectError("an optimization needs a name: pass --name NAME")
    sp = args.get("sparsity")
    return {
        "name": name,
        "perf": args.get("perf"),
        "loss": args.get("loss"),
        "sparsity": 0.0 if sp is None else float(sp),
        "balance": 0.5 if args.get("balance") is None else float(args["balance"]),
        "max_drop": settings.max_drop(args.get("max_drop")),
        "metric": settings.metric(args.get("metric")),
        "data": args.get("data") or d.setup.get("data") or None,
        "labels": args.get("labels") or None,
        "calibration": settings.calibration_method(args.get("calibration")),
        "calibration_size": settings.calibration_size(args.get("calibration_size")),
        "dims": d.dims,
        "run": run_spec(d, args, _flags(PERF_FLAGS, None)),
    }


def budget_settings(project: Dict[str, Any], args: Dict[str, Any]) -> Dict[str, Any]:
    """Validated arguments of a budget search job (:mod:`sparsify_tui.services.budget`): ``name, perf, loss,
    balance, max_drop (required), metric, data (required; default the project's sample data), labels, quantize,
    calibration, calibration_size (items; None: the search's rule), max_trials, importance (None: the channel
    default), dims, core_count, runtimes`` (the candidate ``(engine, precision)`` pairs: ``engines`` x
    ``precisions``, default every installed engine and every precision this CPU runs, :func:`runtimes`) and
    ``runtime_notes`` (module docstring)."""
    from sparsify_tui.optimization.budget_search import MAX_TRIALS
    from sparsify_tui.optimization.structures.channel import IMPORTANCES

    d = project_defaults(project, args)
    name = settings.name(args.get("name"))
    if not name:
        raise SparsifyError("an optimization needs a name: pass --name NAME")
    if args.get("max_drop") in (None, ""):
        raise SparsifyError("the budget search needs a budget: add --max-drop D (e.g. 0.01 for 1 point of top-1, "
                            "0.05 for NMSE)")
    data = settings.data_file(args.get("data") or d.setup.get("data"))
    if data is None:
        raise SampleDataError("the budget search needs real items to fit the reconstruction and score each trial: "
                              "add --data FILE.npz (inputs, and labels for top-1 accuracy)")
    cal = args.get("calibration_size")
    importance = args.get("importance") or None
    if importance is not None and importance not in IMPORTANCES:
        raise SparsifyError(f"--importance {importance!r} is not allowed: use one of {', '.join(IMPORTANCES)}")
    balance = 0.5 if args.get("balance") is None else float(args["balance"])
    if not 0.0 <= balance <= 1.0:
        raise SparsifyError(f"--balance {balance} is not allowed: --balance must be between 0 and 1")
    out = {
        "name": name,
        "perf": args.get("perf"),
        "loss": args.get("loss"),
        "balance": balance,
        "max_drop": settings.max_drop(args.get("max_drop")),
        "metric": settings.metric(args.get("metric")),
        "data": data,
        "labels": args.get("labels") or None,
        "quantize": bool(args.get("quantize")),
        "calibration": settings.calibration_method(args.get("calibration")),
        "calibration_size": None if cal in (None, "") else settings.calibration_size(cal),
        "max_trials": settings.trial_count(args.get("max_trials"), MAX_TRIALS),
        "importance": importance,
        "dims": d.dims,
        "core_count": settings.core_count(d.core_count),
    }
    out["runtimes"], out["runtime_notes"] = runtimes({"engines": args.get("engines") or "all",
                                                      "precisions": args.get("precisions") or "all"})
    return out


def apply_settings(project: Dict[str, Any], args: Dict[str, Any], *, model_path=None, project_dir=None,
                   flags: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Validated arguments of an apply: ``optimization`` (required), ``out_path`` (optional; its folder must
    exist, :func:`sparsify_tui.settings.output_path`, except the project's own ``optimized/`` folder under
    ``project_dir``, created on demand), ``data`` (optional calibration data), ``labels`` (the key of its
    labels array, :mod:`sparsify_tui.analysis.labels`), ``reconstruct`` (True/False/None: a channel optimization's
    reconstruction, None = with real data), ``calibration_size`` (items that calibrate, or None), ``metric`` (what
    the applied model is scored in; None: the search's, else the default from the outputs). With ``model_path`` the calibration inputs are checked
    too (the project's dims, 16 batches of one item, the sample data)."""
    f = _flags(APPLY_FLAGS, flags)
    if not args.get("optimization"):
        raise SparsifyError(f"apply needs an optimization ({f['optimization']}): give its name or id")
    out_path = args.get("out_path") or None
    if out_path:
        own = project_dir is not None and \
            Path(out_path).expanduser().absolute().parent == (Path(project_dir) / "optimized").absolute()
        out_path = str(Path(out_path).expanduser()) if own else settings.output_path(out_path, f["out_path"],
                                                                                     allow_dir=True)
    rec = args.get("reconstruct")
    if rec is not None and not isinstance(rec, bool):
        raise SparsifyError(f"{f['reconstruct']}: reconstruct must be true, false or unset, not {rec!r}")
    size = args.get("calibration_size")
    if size is not None:
        try:
            size = int(size)
        except (TypeError, ValueError):
            size = 0
        if size < 1:
            raise SparsifyError(f"{f['calibration_size']} {args.get('calibration_size')!r}: give a number of items, 1 "
                                "or more")
    out = {"optimization": str(args["optimization"]), "out_path": out_path, "data": args.get("data") or None,
           "labels": args.get("labels") or None, "reconstruct": rec, "calibration_size": size,
           "metric": settings.metric(args.get("metric"), f["metric"])}
    if model_path is not None:  # calibration: 16 batches of one item (analysis.labels.split_items)
        _check_inputs(model_path, [1], settings.dims(project_defaults(project, {}).dims), out["data"], batches=16,
                      labels_key=out["labels"], metric=out["metric"], scores_outputs=True)
    return out


# ------------------------------------------------------------------------------------------------ benchmarks
def benchmark_settings(project: Dict[str, Any], args: Dict[str, Any], *, model_path=None,
                       flags: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Validated benchmark settings: ``batch_sizes``, ``core_counts``, ``runtimes`` (``(engine, precision)`` pairs,
    None: each optimization's own runtime, :func:`runtimes`) and ``runtime_notes``, ``warmup``, ``iterations``,
    ``dims``, ``metric`` (module docstring). With ``model_path`` (the baseline model) the inputs are checked for
    every batch size (``args["data"]`` and its ``labels`` too)."""
    f = _flags(BENCHMARK_FLAGS, flags)
    d = project_defaults(project, {"dims": args.get("dims")})
    settings.name(args.get("name"))  # a benchmark's name is shown like a profile's: no newline, no invisible character
    pairs, notes = runtimes(args, f)
    out = {
        "runtimes": pairs,
        "runtime_notes": notes,
        "batch_sizes": settings.batch_sizes(args.get("batch_sizes"), int(d.batch_size), f["batch_sizes"]),
        "core_counts": settings.core_counts(args.get("core_counts"), d.core_count, f["core_counts"]),
        "warmup": settings.warmup(args.get("warmup"), f["warmup"]),
        "iterations": settings.iterations(args.get("iterations"), f["iterations"]),
        "dims": settings.dims(d.dims),
        "metric": settings.metric(args.get("metric")),
    }
    _check_inputs(model_path, out["batch_sizes"], out["dims"], args.get("data"), labels_key=args.get("labels"),
                  metric=out["metric"], scores_outputs=True, user_dims=args.get("dims"))
    return out


def fleet_settings(kind: str, project: Dict[str, Any], args: Dict[str, Any], *, model_path=None,
                   flags: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Validated arguments of a fleet job, ``kind`` ``"profile"`` or ``"benchmark"``: ``address``, ``targets`` (the
    parsed ``--targets``), ``core_count`` (None: all of each node's cores), ``name`` (template), ``warmup``,
    ``iterations``, ``dims``, ``data``; a profile adds ``batch_size``, ``int8``, ``engine`` and ``precision``, a
    benchmark ``batch_sizes``, ``optimizations`` and ``runtimes`` (``(engine, precision)`` pairs; the names are checked
    here, the runtime itself on each target). Defaults come from the project's setup like a local job's (module docstring), except the
    core count: a target's cores are its own."""
    f = _flags(FLEET_FLAGS, flags)
    d = project_defaults(project, {**args, "core_count": None})
    out: Dict[str, Any] = {
        "address": settings.fleet_address(args.get("address"), f["address"]),
        "targets": settings.fleet_targets(args.get("targets") or "all", f["targets"]),
        "core_count": settings.fleet_cores(args.get("core_count"), f["core_count"]),
        "name": settings.fleet_name(args.get("name"), f["name"]),
        "warmup": settings.warmup(args.get("warmup"), f["warmup"]),
        "iterations": settings.iterations(args.get("iterations"), f["iterations"]),
        "dims": settings.dims(d.dims),
        "data": args.get("data") or None,
    }
    if kind == "profile":
        out["batch_size"] = settings.batch_size(d.batch_size, f["batch_size"])
        out["int8"] = bool(args.get("int8", True))
        out["engine"], out["precision"] = _runtime_names(args.get("engine") or d.setup.get("engine"),
                                                         args.get("precision") or d.setup.get("precision"), f)
        batches = [out["batch_size"]]
    else:
        out["runtimes"] = [_runtime_names(e, p, f) for e in (_names(args.get("engines")) or [None])
                           for p in (_names(args.get("precisions")) or [None])]
        out["batch_sizes"] = settings.batch_sizes(args.get("batch_sizes"), int(d.setup.get("batch_size") or 1),
                                                  f["batch_sizes"])
        out["optimizations"] = [str(o) for o in args.get("optimizations") or []]
        batches = out["batch_sizes"]
    _check_inputs(model_path, batches, out["dims"], out["data"], user_dims=args.get("dims"))
    return out


__all__ = ["ProjectDefaults", "project_defaults", "perf_settings", "loss_settings", "calibration_settings",
           "int8_settings", "apply_settings", "benchmark_settings", "fleet_settings", "PERF_FLAGS", "LOSS_FLAGS",
           "BENCHMARK_FLAGS", "APPLY_FLAGS", "FLEET_FLAGS"]
