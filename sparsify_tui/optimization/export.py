"""Export an optimization: the YAML recipe and, optionally, integration code for a framework."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, Optional

from sparsify_tui.errors import ProjectError
from sparsify_tui.optimization.integration import FRAMEWORKS, generate_code
from sparsify_tui.optimization.recipe import parse_recipe, recipe_warnings, to_yaml


def safe_filename(name: str) -> str:
    """A file-name-safe version of an optimization name (letters, digits, ``-_.``; others become ``_``)."""
    out = re.sub(r"[^A-Za-z0-9._-]+", "_", name.strip()).strip("._")
    return out or "optimization"


def default_recipe_path(ws, project_id: str, name: str) -> Path:
    """``<project dir>/recipes/<name>.yaml``."""
    return Path(ws.project_dir(project_id)) / "recipes" / f"{safe_filename(name)}.yaml"


def default_code_path(recipe_path: Path, framework: str) -> Path:
    """``<recipe dir>/<recipe stem>_<framework>.py`` (``-`` becomes ``_``)."""
    recipe_path = Path(recipe_path)
    return recipe_path.with_name(f"{recipe_path.stem}_{framework.replace('-', '_')}.py")


def _write(path: Path, text: str) -> None:
    path = Path(path).expanduser()
    if path.is_dir():
        raise ProjectError(f"{path} is a directory: give a file path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as err:
        raise ProjectError(f"cannot write {path}: {err.strerror or err}; choose another path") from None


def render_export(rec: Dict[str, Any], *, recipe_path: Path, framework: Optional[str] = None,
                  project_name: str = "") -> Dict[str, Any]:
    """Texts of an export without writing: ``{"recipe": yaml text, "code": text or None, "warnings"}``."""
    if framework and framework not in FRAMEWORKS:
        raise ProjectError(f"unknown framework {framework!r}: use one of {', '.join(FRAMEWORKS)}")
    text = to_yaml(rec, project_name=project_name)
    code = generate_code(rec, framework, str(recipe_path)) if framework else None
    return {"recipe": text, "code": code, "warnings": recipe_warnings(rec)}


def write_export(rec: Dict[str, Any], *, recipe_path: Path, framework: Optional[str] = None,
                 code_path: Optional[Path] = None, project_name: str = "") -> Dict[str, Any]:
    """Write the recipe (and code) files. Returns ``{"recipe_path", "code_path", "framework", "layers",
    "modifiers", "avg_sparsity", "warnings"}``. Raises :class:`ProjectError` on unwritable paths."""
    recipe_path = Path(recipe_path).expanduser().resolve()
    out = render_export(rec, recipe_path=recipe_path, framework=framework, project_name=project_name)
    _write(recipe_path, out["recipe"])
    written_code = None
    if framework:
        written_code = Path(code_path).expanduser().resolve() if code_path else default_code_path(recipe_path, framework)
        _write(written_code, out["code"])
    parsed = parse_recipe(out["recipe"])
    return {
        "optimization": rec.get("name"), "recipe_path": str(recipe_path),
        "code_path": str(written_code) if written_code else None, "framework": framework,
        "layers": len(parsed["sparsities"]), "modifiers": [m["type"] for m in parsed["modifiers"]],
        "avg_sparsity": (rec.get("estimates") or {}).get("avg_sparsity"), "warnings": out["warnings"],
    }


def export_optimization(ws, project_id: str, ref: str, *, recipe_path: Optional[str] = None,
                        framework: Optional[str] = None, code_path: Optional[str] = None) -> Dict[str, Any]:
    """Export a stored optimization (id or name): recipe to ``recipe_path`` (default
    :func:`default_recipe_path`), code for ``framework`` to ``code_path`` (default next to the recipe)."""
    from sparsify_tui.optimization.core import get_optimization

    project = ws.get_project(project_id)
    rec = get_optimization(ws, project["id"], ref)
    path = Path(recipe_path) if recipe_path else default_recipe_path(ws, project["id"], rec["name"])
    return write_export(rec, recipe_path=path, framework=framework,
                        code_path=Path(code_path) if code_path else None, project_name=project.get("name", ""))
