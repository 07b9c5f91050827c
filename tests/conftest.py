"""Shared fixtures. Feature-specific helpers live in their own test modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_MODELS = Path(os.environ.get("SPARSIFY_TUI_SHARED_MODELS", ROOT.parent / "shared" / "models"))
DEMO_MODEL = ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx"


def pytest_configure(config):
    """``--snapshot-update`` only in one process: under pytest-xdist each worker's syrupy sees only its own tests
    and would take the others' snapshots for unused ones."""
    if config.getoption("update_snapshots", default=False) and getattr(config.option, "numprocesses", None):
        raise pytest.UsageError("--snapshot-update needs the tests in one process: add -n 0")


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


#: The instruction sets of the two kinds of x86-64 machine the suite runs on (names as
#: :func:`sparsify_tui.analysis.system.parse_cpuinfo` reports them): AVX2 only, and AVX-512 with VNNI.
#: They change what the app computes (``round_to`` is 8 on AVX2 and 16 on AVX-512F, see
#: ``analysis.channels.default_round_to``), so no snapshot may depend on which one runs the tests.
FAKE_ISAS = {
    "avx2": ["SSE4.2", "AVX", "AVX2", "FMA", "F16C"],
    "avx512_vnni": ["SSE4.2", "AVX", "AVX2", "FMA", "F16C", "AVX512F", "AVX512BW", "AVX512VL", "AVX512_VNNI"],
}


@pytest.fixture(params=sorted(FAKE_ISAS))
def fake_isa(request, monkeypatch) -> str:
    """This machine described with the instruction sets of ``FAKE_ISAS[param]`` (every other field real):
    the test runs once as an AVX2-only machine and once as an AVX-512 VNNI one, whatever the real CPU is.
    Reaches every caller in this process (they import ``machine_info`` at call time); job subprocesses see
    the real CPU."""
    return describe_machine_as(monkeypatch, request.param)


def describe_machine_as(monkeypatch, isa: str) -> str:
    """Describe this machine with the instruction sets of ``FAKE_ISAS[isa]`` for the test (see :func:`fake_isa`)."""
    from sparsify_tui.analysis import system

    real = system.machine_info

    def described(*args, **kwargs):
        info = real(*args, **kwargs)
        info.instruction_sets = list(FAKE_ISAS[isa])
        return info

    monkeypatch.setattr(system, "machine_info", described)
    return isa


@pytest.fixture
def snapshot(snapshot):
    """syrupy's snapshot, named without the ``fake_isa`` parameter: the runs of one snapshot test under each ISA
    compare against ONE stored SVG, so a screen that differs between an AVX2 and an AVX-512 machine fails. Other
    parameters stay in the name (``test_x[budget_metric]``: one SVG per case)."""
    loc = snapshot.test_location
    name = loc.testname
    kept = [p for p in name[name.index("[") + 1:-1].split("-") if p not in FAKE_ISAS] if "[" in name else []
    loc.testname = f"{loc.methodname}[{'-'.join(kept)}]" if kept else loc.methodname
    return snapshot


#: The runtimes the dialogs offer in a snapshot (``tui/widgets/runtimes``), whatever is installed here and whether
#: this CPU runs bf16: the versions and the precisions would otherwise differ between machines.
SNAPSHOT_RUNTIMES = (("onnxruntime 1.32.0 · fp32", "onnxruntime:fp32"), ("OpenVINO 2026.4.1 · fp32", "openvino:fp32"),
                     ("OpenVINO 2026.4.1 · bf16", "openvino:bf16"))


@pytest.fixture
def snap_compare(snap_compare, request, monkeypatch):
    """pytest-textual-snapshot's ``snap_compare``, the machine described as one of :data:`FAKE_ISAS` (picked by the
    test's name, so the suite's snapshots cover both; see :func:`fake_isa`), the dialogs offering
    :data:`SNAPSHOT_RUNTIMES`. What a snapshot shows then depends on the described ISA, never on this CPU's. (Each
    snapshot ran under both once: the stored SVGs are the same under either, and one run halves their time.)"""
    import zlib

    from sparsify_tui.tui.widgets import runtimes

    isas = sorted(FAKE_ISAS)
    describe_machine_as(monkeypatch, isas[zlib.crc32(request.node.originalname.encode()) % len(isas)])

    monkeypatch.setattr(runtimes, "_runtimes", lambda: SNAPSHOT_RUNTIMES)
    return snap_compare


async def wait_project_open(pilot) -> None:
    """The project the app was started on is open: its Performance section shown and focused. A section key
    (`2`-`6`) pressed before that has no project to act on."""
    await wait_for(pilot, lambda: pilot.app.section == "perf" and pilot.app.focused is not None)


async def wait_for(pilot, predicate, timeout: float = 120.0, step: float = 0.05) -> None:
    """Let the app run until ``predicate()`` is true; a predicate that raises counts as not yet. Fails the test
    after ``timeout`` seconds, naming the predicate, the screen, the running workers and the predicate's last
    error. The timeout is generous on purpose: it only costs time when the test fails anyway, and a suite run
    on a loaded 2-core machine (load 8-10) took over 30 s for steps that take 1 s alone."""
    import time

    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        await pilot.pause(step)
        try:
            if predicate():
                return
        except Exception as err:  # noqa: BLE001 - not there yet (a widget not mounted, a record not stored)
            last_error = err
        if time.monotonic() > deadline:
            workers = [(w.name, w.state.name) for w in pilot.app.workers]
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {predicate}: screen={pilot.app.screen} "
                                 f"workers={workers} last error={last_error!r}")
