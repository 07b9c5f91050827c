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


async def steady(pilot, timeout: float = 20.0) -> None:
    """Wait until the screen stops changing, for an SVG snapshot that does not depend on the machine's load.

    Freezes blinking cursors (Input, TextArea) on every screen, then waits until the frame exported twice 0.15 s
    apart is the same three times in a row (a worker still loading, a tab underline not yet placed, or a
    chart still drawing all change the frame)."""
    import time

    from textual.widgets import Input, TextArea

    app = pilot.app
    deadline = time.monotonic() + timeout
    same, last = 0, None
    while time.monotonic() < deadline and same < 3:
        for screen in app.screen_stack:
            for widget in screen.query(Input):
                widget.cursor_blink = False
            for widget in screen.query(TextArea):
                widget.cursor_blink = False
        await pilot.pause(0.15)
        frame = app.export_screenshot()
        same = same + 1 if frame == last else 0
        last = frame
