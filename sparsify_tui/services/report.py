"""Project reports (``sparsify-tui report`` and the TUI's Report dialog): read everything the project holds and
hand it to :mod:`sparsify_tui.report`, which builds and renders it."""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Any, Dict, Optional, Union

from sparsify_tui.errors import RecordNotFound, SparsifyError

DEFAULT_TOP = 10


def build_report(ws, project_ref: str, *, top: int = DEFAULT_TOP, level: float = 0.9):
    """The :class:`~sparsify_tui.report.model.Report` of a project: model, this machine, every completed perf and
    loss profile (``top`` slowest nodes; most and least sensitive layers at sparsity ``level``), every optimization
    with what was measured of it, every benchmark. Records whose stored result is missing are left out.
    Raises ``RecordNotFound`` for an unknown project."""
    from sparsify_tui import __version__
    from sparsify_tui.engine import system_info
    from sparsify_tui.report import model as rm
    from sparsify_tui.services.benchmarks import TABLE as BENCH_TABLE, load_benchmark
    from sparsify_tui.services.comparisons import measured_results
    from sparsify_tui.services.optimizations import list_optimizations
    from sparsify_tui.services.profiles import LOSS_TABLE, PERF_TABLE, load_loss_profile, load_perf_profile

    project = ws.get_project(project_ref)
    pid = project["id"]
    analysis = ws.analysis_of(pid)
    nodes = analysis.get("nodes") or []
    model = dict(project.get("model") or {})
    model_info = {k: model.get(k) for k in ("file", "sha256", "size_bytes", "params", "macs", "flops", "opset")}
    model_info["nodes"] = len(nodes)
    model_info["prunable_layers"] = sum(1 for n in nodes if n.get("prunable"))
    from sparsify_tui.engine import runtime_versions

    sysd = system_info().to_dict()
    machine = {k: sysd.get(k) for k in ("hostname", "cpu_model", "instruction_sets", "available_cores",
                                       "physical_cores", "ort_version")}
    machine["runtimes"] = runtime_versions()
    report = rm.Report(
        title=f"sparsify-tui report: {project['name']}",
        generated=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), version=__version__,
        project={"name": project["name"], "id": pid, "description": project.get("description") or "",
                 "created": project.get("created")},
        model=model_info, machine=machine)
    for rec in ws.list_records(pid, PERF_TABLE):
        if rec.get("status", "completed") != "completed":
            continue
        try:
            prof = load_perf_profile(ws, pid, rec["id"])
        except RecordNotFound:
            continue
        report.perf.append(rm.perf_entry(prof, record_id=rec["id"], top=top, imported=rec.get("imported")))
    for rec in ws.list_records(pid, LOSS_TABLE):
        try:
            prof = load_loss_profile(ws, pid, rec["id"])
        except RecordNotFound:
            continue
        report.loss.append(rm.loss_entry(prof, record_id=rec["id"], level=level))
    for rec in list_optimizations(ws, pid):
        report.optimizations.append(rm.optimization_entry(rec, measured_results(ws, pid, rec)))
    for rec in ws.list_records(pid, BENCH_TABLE):
        try:
            report.benchmarks.append(rm.benchmark_entry(load_benchmark(ws, pid, rec["id"])))
        except RecordNotFound:
            continue
    return report


def format_for(path: Optional[Union[str, Path]], fmt: Optional[str]) -> str:
    """The report format: ``fmt`` when given, else from ``path``'s suffix (.md, .html, .json), else "md".
    Raises ``SparsifyError`` when they disagree or the suffix is unknown."""
    from sparsify_tui.report.render import FORMATS, SUFFIXES

    if fmt is not None and fmt not in FORMATS:
        raise SparsifyError(f"unknown report format {fmt!r}: use md, html or json")
    if path is None:
        return fmt or "md"
    by_suffix = SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        if by_suffix is None:
            raise SparsifyError(f"cannot tell the report format from {Path(path).name!r}: end it in .md, .html or "
                                ".json, or pass --format")
        return by_suffix
    if by_suffix is not None and by_suffix != fmt:
        raise SparsifyError(f"{Path(path).name} ends in {Path(path).suffix} but --format is {fmt}: make them agree")
    return fmt


def default_report_path(ws, project_ref: str, fmt: str = "html") -> Path:
    """``<project dir>/reports/<project name>.<md|html|json>``."""
    project = ws.get_project(project_ref)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", project["name"]).strip("._") or project["id"]
    return ws.project_dir(project["id"]) / "reports" / f"{safe}.{fmt}"


def render_report(ws, project_ref: str, fmt: str = "md", *, top: int = DEFAULT_TOP, level: float = 0.9) -> str:
    """The report of a project as text in ``fmt`` ("md", "html" or "json")."""
    from sparsify_tui.report.render import render

    return render(build_report(ws, project_ref, top=top, level=level), fmt, top=top)


def write_report(ws, project_ref: str, path: Optional[Union[str, Path]] = None, fmt: Optional[str] = None, *,
                 top: int = DEFAULT_TOP, level: float = 0.9) -> Dict[str, Any]:
    """Render and write the report (atomically; folders of the default path are created). ``path`` None: the
    default path for the format. Returns ``{"path", "format", "bytes"}``. Raises ``SparsifyError`` (one line) for a
    bad path or format; nothing is left behind."""
    from sparsify_tui.services.exchange import write_text_atomic

    from sparsify_tui.settings import output_path

    fmt = format_for(path, fmt)
    if path is None:
        path = default_report_path(ws, project_ref, fmt)
        path.parent.mkdir(parents=True, exist_ok=True)
    else:  # a path the user gave: never a link, never inside the workspace (the index, a project.json...)
        path = output_path(path, "-o", workspace=ws.root)
    text = render_report(ws, project_ref, fmt, top=top, level=level)
    out = write_text_atomic(path, text)
    return {"path": str(out), "format": fmt, "bytes": len(text.encode("utf-8"))}
