"""Projects: create one from a model (the model is analyzed here, then handed to the store), find the project
of a model file, and the summary shown by ``sparsify-tui show`` and the TUI."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Dict, Optional, Union

from sparsify_tui import settings


def create_project(ws, model_path: Union[str, Path], name: Optional[str] = None, description: str = "", *,
                   link: bool = False, batch_size: int = 1, dims: Optional[Dict[str, int]] = None,
                   setup: Optional[Dict[str, Any]] = None, progress=None) -> Dict[str, Any]:
    """Analyze ``model_path`` at ``batch_size`` and ``dims`` (symbolic dims: name or ``"input:axis"`` ->
    value), then store it as a new project of workspace ``ws``; returns the project dict.

    The name is checked before the (possibly slow) analysis. Errors of the analysis (:class:`ModelError`,
    :class:`DimensionError`) propagate and nothing is created; see
    :meth:`sparsify_tui.store.Workspace.create_project` for what is stored.
    """
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.engine import get_engine

    src = Path(model_path).expanduser()
    name = (name or src.stem).strip()
    ws.check_name_free(name)
    batch_size = settings.batch_size(batch_size)
    if dims:
        from sparsify_tui.analysis.loading import load_model
        from sparsify_tui.analysis.shapes import check_user_dims

        check_user_dims(load_model(str(src), load_external_data=False), dims)
    if progress:
        progress("analyzing model", 0.0)
    analysis = analyze_model(str(src), batch_size=batch_size, dims=dict(dims or {}), engine=get_engine())
    return ws.create_project(src, analysis.to_dict(), name, description, link=link, batch_size=batch_size,
                             dims=dims, setup=setup, progress=progress)


def model_analysis(ws, project_id: str):
    """The project's stored model analysis, typed (:class:`~sparsify_tui.analysis.nodes.ModelAnalysis`)."""
    from sparsify_tui.analysis.nodes import ModelAnalysis

    return ModelAnalysis.from_dict(ws.analysis_of(project_id))


def file_sha256(path: Union[str, Path]) -> str:
    """sha256 hex digest of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def find_project_for_model(ws, model: Union[str, Path]) -> Optional[Dict[str, Any]]:
    """The project whose model has the same sha256 as this file, preferring one made from the same path
    (None if none). The file is hashed only when some project's model has the same size."""
    path = Path(model).expanduser()
    if not path.is_file():
        return None  # creating the project raises the proper one-line ModelError
    here = {str(path.resolve()), os.path.abspath(path)}  # projects store the absolute path as given
    size = path.stat().st_size
    candidates = [p for p in ws.list_projects() if p.get("model", {}).get("size_bytes") == size]
    if not candidates:
        return None
    digest = file_sha256(path)
    same = [p for p in candidates if p["model"].get("sha256") == digest]
    same.sort(key=lambda p: not here & {p["model"].get("source"), p["model"].get("path")})
    return same[0] if same else None


def project_summary(ws, project_ref: str) -> Dict[str, Any]:
    """The project dict plus ``path`` (its folder), ``size_bytes`` (on disk) and ``records`` (counts per table)."""
    project = ws.get_project(project_ref)
    pid = project["id"]
    return {
        **project,
        "path": str(ws.project_dir(pid)),
        "size_bytes": ws.project_size_bytes(pid),
        "records": ws.count_records(pid),
    }
