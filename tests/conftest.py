"""Shared fixtures. Feature-specific helpers live in their own test modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_MODELS = Path(os.environ.get("SPARSIFY_TUI_SHARED_MODELS", ROOT.parent / "shared" / "models"))
DEMO_MODEL = ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx"


@pytest.fixture
def shared_models() -> Path:
    """The real models of ../shared/models; skips the test when that folder is missing."""
    if not SHARED_MODELS.is_dir():
        pytest.skip("../shared/models is not present")
    return SHARED_MODELS


def shared_model(name: str) -> Path:
    """Path of one real model, or skip the calling test when it is missing."""
    path = SHARED_MODELS / name
    if not path.is_file():
        pytest.skip(f"{path} is not present")
    return path


@pytest.fixture
def demo_model() -> Path:
    """The demo model bundled in the package (always present)."""
    return DEMO_MODEL


@pytest.fixture
def workspace_home(tmp_path, monkeypatch) -> Path:
    """An empty workspace: ``$SPARSIFY_TUI_HOME`` points at a temp folder for this test."""
    home = tmp_path / "workspace"
    monkeypatch.setenv("SPARSIFY_TUI_HOME", str(home))
    return home
