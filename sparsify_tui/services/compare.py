"""Comparisons of stored profiles and optimizations: what ``sparsify-tui compare`` and the TUI's compare screens
show. The workspace is read here; the comparing is done by the core (:mod:`sparsify_tui.profiling.compare`,
:mod:`sparsify_tui.optimization.compare`).

A perf profile is named by ``SPEC`` = its id or name, optionally followed by ``:int8`` (the times measured in its
INT8 model) or ``:fp32`` (the default). A profile whose name really ends in ``:int8`` is found by its full name
first.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from sparsify_tui.errors import ProjectError, RecordNotFound
from sparsify_tui.services.profiles import PERF_TABLE, load_loss_profile, load_perf_profile

VIEW_SUFFIXES = {":int8": "int8", ":fp32": "fp32"}


def parse_perf_spec(ws, project_id: str, spec: str) -> tuple[dict, str]:
    """``(record, view)`` of a perf profile ``SPEC`` (see the module docstring). Raises ``RecordNotFound``."""
    spec = str(spec)
    try:
        return ws.find_record(project_id, PERF_TABLE, spec), "fp32"
    except RecordNotFound:
        for suffix, view in VIEW_SUFFIXES.items():
            if spec.lower().endswith(suffix):
                return ws.find_record(project_id, PERF_TABLE, spec[: -len(suffix)]), view
        raise


def loss_profile_names(ws, project_ref: str) -> set:
    """Names of the project's stored loss profiles (to tell a user who named one without ``--loss``)."""
    from sparsify_tui.services.profiles import LOSS_TABLE

    try:
        project = ws.get_project(project_ref)
    except RecordNotFound:
        return set()
    return {r.get("name") for r in ws.list_records(project["id"], LOSS_TABLE)}


def _perf_side(ws, project: dict, spec: str, cross: bool):
    from sparsify_tui.profiling.compare import profile_side

    record, view = parse_perf_spec(ws, project["id"], spec)
    prof = load_perf_profile(ws, project["id"], record["id"])
    name = record.get("name") or record["id"]
    label = (f"{project['name']}/" if cross else "") + name + (" INT8" if view == "int8" else "")
    try:
        side = profile_side(prof, view, label=label, project=project["name"],
                            model_sha256=(project.get("model") or {}).get("sha256"))
    except ValueError as err:
        raise ProjectError(f"{err}: compare its FP32 times, or measure a profile with INT8") from None
    return prof, view, side


def compare_perf_profiles(ws, project_ref: str, a: str, b: str, *, project_b: Optional[str] = None):
    """Compare perf profile ``a`` of project ``project_ref`` with ``b`` (of ``project_b`` when given, else the same
    project) per node: :func:`sparsify_tui.profiling.compare.compare_perf`. Profiles of two projects are matched by
    node id; when their models differ (sha256) the comparison says so in its notes.

    Raises: ``RecordNotFound`` (unknown project or profile), ``ProjectError`` (``:int8`` on a profile without
    INT8)."""
    from sparsify_tui.profiling.compare import compare_perf

    pa = ws.get_project(project_ref)
    pb = ws.get_project(project_b) if project_b else pa
    cross = pb["id"] != pa["id"]
    prof_a, view_a, side_a = _perf_side(ws, pa, a, cross)
    prof_b, view_b, side_b = _perf_side(ws, pb, b, cross)
    cmp = compare_perf(prof_a, prof_b, a_view=view_a, b_view=view_b, a_side=side_a, b_side=side_b)
    sha_a, sha_b = side_a.model_sha256, side_b.model_sha256
    if cross and sha_a and sha_b and sha_a != sha_b:
        cmp.notes.insert(0, f"different models ({(pa.get('model') or {}).get('file')} sha256 {sha_a[:12]}…, "
                            f"{(pb.get('model') or {}).get('file')} sha256 {sha_b[:12]}…): rows are matched by node id")
    return cmp


def compare_loss_profiles(ws, project_ref: str, a: str, b: str, *, project_b: Optional[str] = None,
                          level: float = 0.9, int8: bool = False):
    """Compare loss profiles ``a`` and ``b`` (ids or names, or ``approximated``) per layer at sparsity ``level``
    (or their INT8 sensitivity): :func:`sparsify_tui.profiling.compare.compare_loss`.

    Raises: ``RecordNotFound``; ``ProjectError`` for a bad level or a missing INT8 sensitivity."""
    from sparsify_tui.profiling.compare import compare_loss, loss_side

    pa = ws.get_project(project_ref)
    pb = ws.get_project(project_b) if project_b else pa
    cross = pb["id"] != pa["id"]
    sides = []
    for project, ref in ((pa, a), (pb, b)):
        prof = load_loss_profile(ws, project["id"], ref)
        label = (f"{project['name']}/" if cross else "") + (prof.name or str(ref))
        sides.append((prof, loss_side(prof, label=label, project=project["name"])))
    try:
        return compare_loss(sides[0][0], sides[1][0], level=level, int8=int8, a_side=sides[0][1],
                            b_side=sides[1][1])
    except ValueError as err:
        raise ProjectError(str(err)) from None


def measured_results(ws, project_id: str, opt) -> Dict[str, Any]:
    """What was measured of a stored optimization: ``applied`` (output difference, file sizes, when, and ``stale``
    when its settings changed since) or None, and ``benchmarks``: its runs in the newest benchmark that measured it
    (``benchmark``, ``batch_size``, ``core_count``, ``median_ms``, ``p90_ms``, ``items_per_second``,
    ``speedup``)."""
    from sparsify_tui.services.apply import is_applied
    from sparsify_tui.services.benchmarks import TABLE as BENCH_TABLE, load_benchmark

    applied = None
    if opt.applied is not None:
        a = opt.applied
        applied = {"output_diff": a.output_diff, "file_size_bytes": a.file_size_bytes,
                   "baseline_size_bytes": a.baseline_size_bytes, "quantized": a.quantized, "applied_at": a.applied_at,
                   "path": a.path, "stale": not is_applied(ws, project_id, opt)}
    runs = []
    benches = [r for r in ws.list_records(project_id, BENCH_TABLE)
               if any(m.get("optimization_id") == opt.id for m in r.get("models") or [])]
    if benches:
        rec = sorted(benches, key=lambda r: r.get("created", ""))[-1]
        try:
            res = load_benchmark(ws, project_id, rec["id"])
        except RecordNotFound:
            res = None
        for run in (res.runs if res is not None else []):
            if run.optimization_id == opt.id:
                runs.append({"benchmark": rec.get("name"), "batch_size": run.batch_size,
                             "core_count": run.core_count, "median_ms": run.median_ms, "p90_ms": run.p90_ms,
                             "items_per_second": run.items_per_second, "speedup": run.speedup})
    return {"applied": applied, "benchmarks": runs}


def compare_optimizations(ws, project_ref: str, refs: Sequence[str]):
    """Compare two or more stored optimizations (ids or names) of a project, with what was measured of each:
    :func:`sparsify_tui.optimization.compare.compare_optimizations`.

    Raises: ``RecordNotFound``; ``ProjectError`` with fewer than two."""
    from sparsify_tui.optimization.compare import compare_optimizations as core_compare
    from sparsify_tui.services.optimizations import get_optimization

    project = ws.get_project(project_ref)
    refs = [str(r).strip() for r in refs if str(r).strip()]
    if len(refs) < 2:
        raise ProjectError("compare needs two or more optimizations: --optimizations A,B")
    opts = [get_optimization(ws, project["id"], r) for r in refs]
    measured = {o.id: measured_results(ws, project["id"], o) for o in opts}
    return core_compare(opts, measured)
