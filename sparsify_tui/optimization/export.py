"""Export an optimization: the YAML recipe and, optionally, integration code for a framework."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any, Dict, FrozenSet, Optional

from sparsify_tui.errors import ProjectError
from sparsify_tui.optimization.integration import FRAMEWORKS
from sparsify_tui.optimization.modifiers import pruned_weight_names, recipe_warnings
from sparsify_tui.optimization.recipe import parse_recipe, to_yaml
from sparsify_tui.optimization.record import Optimization
from sparsify_tui.optimization.structures import structure_of


def safe_filename(name: str) -> str:
    """A file-name-safe version of an optimization name (letters, digits, ``-_.``; others become ``_``)."""
    out = re.sub(r"[^A-Za-z0-9._-]+", "_", name.strip()).strip("._")
    return out or "optimization"


def default_code_path(recipe_path: Path, framework: str) -> Path:
    """``<recipe dir>/<recipe stem>_<framework>.py`` (``-`` becomes ``_``)."""
    recipe_path = Path(recipe_path)
    return recipe_path.with_name(f"{recipe_path.stem}_{framework.replace('-', '_')}.py")


@functools.lru_cache(maxsize=8)
def _constant_outputs(path: str, mtime: float, size: int) -> FrozenSet[str]:
    import onnx

    model = onnx.load(path, load_external_data=False)
    return frozenset(n.output[0] for n in model.graph.node if n.op_type == "Constant" and n.output)


def constant_weight_notes(rec: Optimization, model_path: Optional[Path]) -> list:
    """Notes for weights that are ``Constant`` node outputs in the original file (Paddle exports), not
    initializers: sparsify-tui converts them to initializers of the same name when it loads the model.
    Skipped for files over 300 MB (cost of parsing)."""
    if not model_path:
        return []
    try:
        st = os.stat(model_path)
        if st.st_size > 300e6:
            return []
        consts = _constant_outputs(str(model_path), st.st_mtime, st.st_size)
    except Exception:
        return []
    names = pruned_weight_names(rec)
    hit = [n for n in names if n in consts]
    if not hit:
        return []
    return [f"{len(hit)} of {len(names)} weights are outputs of Constant nodes in the original model file "
            f"(e.g. {hit[0]!r}), not initializers; sparsify-tui loads them as initializers of the same name "
            f"(sparsify_tui.analysis.loading.constants_to_initializers)"]


def _write(path: Path, text: str) -> None:
    """Write an export file atomically (:func:`sparsify_tui.tempfiles.write_output`: never through a symlink)."""
    from sparsify_tui.tempfiles import write_output

    path = Path(path).expanduser()
    if path.is_dir() and not path.is_symlink():
        raise ProjectError(f"{path} is a directory: give a file path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_output(path, text)
    except OSError as err:
        raise ProjectError(f"cannot write {path}: {err.strerror or err}; choose another path") from None


def deployment_code(rec: Optimization) -> str:
    """How to run the optimized model on the runtime it targets, configured as measured: the engine's snippet
    (:meth:`sparsify_tui.engine.base.Engine.deployment_code`) for the applied file (``MODEL.onnx`` with a note when
    it is not applied yet) and the threads it was benchmarked with (else every core the process may use)."""
    from sparsify_tui.engine import ENGINES

    engine, precision = rec.target_runtime
    applied = rec.applied.path if rec.applied is not None and rec.applied.path else None
    cores = rec.measured.core_count if rec.measured is not None else None
    cls = ENGINES.get(engine)
    if cls is None:
        return f"# {rec.name!r} targets {engine} {precision}, a runtime this sparsify-tui does not know\n"
    text = cls(precision=precision).deployment_code(applied or "MODEL.onnx", cores)
    if applied is None:
        text = (f"# {rec.name!r} is not applied yet: `sparsify-tui apply PROJECT {rec.name!r}` writes the model; "
                "put its path for MODEL.onnx\n") + text
    return text


def render_export(rec: Optimization, *, recipe_path: Path, framework: Optional[str] = None,
                  project_name: str = "", model_path: Optional[Path] = None) -> Dict[str, Any]:
    """Texts of an export without writing: ``{"recipe": yaml text, "code": text or None, "warnings",
    "notes"}``. ``model_path`` (the project's model) enables the Constant-weights note."""
    if framework and framework not in FRAMEWORKS:
        raise ProjectError(f"unknown framework {framework!r}: use one of {', '.join(FRAMEWORKS)}")
    notes = constant_weight_notes(rec, model_path)
    text = to_yaml(rec, project_name=project_name)
    if notes:
        head, sep, body = text.partition("version: ")
        text = head + "".join(f"# note: {n}\n" for n in notes) + sep + body
    code = structure_of(rec).integration_code(rec, framework, str(recipe_path)) if framework else None
    return {"recipe": text, "code": code, "warnings": recipe_warnings(rec), "notes": notes}


def write_export(rec: Optimization, *, recipe_path: Path, framework: Optional[str] = None,
                 code_path: Optional[Path] = None, project_name: str = "",
                 model_path: Optional[Path] = None) -> Dict[str, Any]:
    """Write the recipe (and code) files, and the deployment snippet of the optimization's runtime
    (:func:`deployment_code`) as ``<recipe stem>_deploy.py`` beside the recipe. Returns ``{"recipe_path",
    "code_path", "framework", "deploy_path", "runtime", "layers", "modifiers", "avg_sparsity", "warnings", "notes"}``.
    Raises :class:`ProjectError` on unwritable paths."""
    recipe_path = Path(os.path.abspath(Path(recipe_path).expanduser()))
    out = render_export(rec, recipe_path=recipe_path, framework=framework, project_name=project_name,
                        model_path=model_path)
    _write(recipe_path, out["recipe"])
    written_code = None
    if framework:
        written_code = Path(os.path.abspath(Path(code_path).expanduser())) if code_path else \
            default_code_path(recipe_path, framework)
        _write(written_code, out["code"])
    deploy_path = recipe_path.with_name(f"{recipe_path.stem}_deploy.py")
    _write(deploy_path, deployment_code(rec))
    parsed = parse_recipe(out["recipe"])
    return {
        "optimization": rec.name, "recipe_path": str(recipe_path),
        "code_path": str(written_code) if written_code else None, "framework": framework,
        "deploy_path": str(deploy_path), "runtime": "{} {}".format(*rec.target_runtime),
        "layers": len(parsed["sparsities"]), "modifiers": [m["type"] for m in parsed["modifiers"]],
        "avg_sparsity": rec.estimates.avg_sparsity if rec.estimates is not None else None, "warnings": out["warnings"],
        "notes": out["notes"],
    }
