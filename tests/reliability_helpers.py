"""Helpers of the reliability tests (issue 11): hostile models, the CLI run in-process or as a process, the
"refused in one line, nothing left behind" check, and a canary file that proves an outside file is never opened.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx"


# ------------------------------------------------------------------------------------------------ the CLI
@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list:
        return self.err.strip().splitlines()


def run_cli(*args: str, home: Optional[Path] = None, env: Optional[dict] = None, timeout: float = 300) -> Run:
    """``sparsify-tui ARGS`` in its own process (real exit code and stderr)."""
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    if home is not None:
        e["SPARSIFY_TUI_HOME"] = str(home)
    with subprocess.Popen([sys.executable, "-m", "sparsify_tui", *map(str, args)], env=e, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as p:
        OUR_PIDS.add(p.pid)  # its temp folders are ours to check (snapshot)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            raise
    return Run(p.returncode, out, err)


#: this process and the CLI processes run_cli started: the temp folders a command could leave behind are theirs
OUR_PIDS = {os.getpid()}


def run_main(capsys, *args: str) -> Run:
    """``sparsify_tui.cli.main(ARGS)`` in this process (argparse's exit turned into its code)."""
    from sparsify_tui.cli import main

    capsys.readouterr()
    try:
        code = main([str(a) for a in args])
    except SystemExit as ex:
        code = ex.code if isinstance(ex.code, int) else 1
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


def assert_refused(run: Run, *needles: str) -> str:
    """Exit code 2, exactly one stderr line ``sparsify-tui: error: <problem>: <fix>`` containing every
    needle, no traceback. Returns the line."""
    assert run.code == 2, (run.code, run.err)
    assert len(run.err_lines) == 1, run.err
    line = run.err_lines[0]
    assert line.startswith("sparsify-tui: error: ") and ": " in line[len("sparsify-tui: error: "):], line
    assert "Traceback" not in run.err
    for n in needles:
        assert n in line, (n, line)
    return line


def snapshot(home: Path) -> dict:
    """What a command could leave behind: every file and folder of the workspace (lock files aside), the job
    records, and this user's sparsify temp folders."""
    files = set()
    if home.exists():
        for dirpath, dirnames, filenames in os.walk(home):
            for name in dirnames + filenames:
                if not name.endswith(".lock"):
                    files.add(os.path.relpath(os.path.join(dirpath, name), home))
    jobs = []
    db = home / "workspace.json"
    if db.exists():
        import json

        jobs = sorted((json.loads(db.read_text()).get("jobs") or {}).keys())
    temps = set()
    for folder in {tempfile.gettempdir(), "/dev/shm"}:
        try:
            temps |= {e.name for e in os.scandir(folder) if e.name.startswith("sparsify-") and
                      e.name.split("-")[1] in ("perf", "quant", "apply") and not _other_live_process(e.name)}
        except OSError:
            pass
    return {"files": files, "jobs": jobs, "temps": temps}


def _other_live_process(temp_name: str) -> bool:
    """True for a temp folder that is not ours to check: named ``sparsify-KIND-PID-...`` by a process that is
    neither this one nor a CLI run of this test process (:data:`OUR_PIDS`): another test worker's (pytest-xdist runs
    tests side by side, and a kill -9 test there leaves a dead process's folder for the next start-up to remove), or
    without a pid (every folder sparsify-tui makes carries its pid, :mod:`sparsify_tui.tempfiles`)."""
    parts = temp_name.split("-")
    if len(parts) < 4 or not parts[2].isdigit():
        return True
    return int(parts[2]) not in OUR_PIDS


def assert_nothing_left(before: dict, home: Path) -> None:
    after = snapshot(home)
    assert after["files"] == before["files"], sorted(after["files"] ^ before["files"])
    assert after["jobs"] == before["jobs"]
    assert after["temps"] <= before["temps"], sorted(after["temps"] - before["temps"])


# ------------------------------------------------------------------------------------------------ models
def matmul_model(path: Path, weight: Optional[TensorProto] = None, x_shape=(1, 4), x_vi=None, extra_nodes=(),
                 opset: int = 17) -> Path:
    """``y = x @ W`` (W 4x4 ones unless ``weight``), saved at ``path``."""
    w = weight if weight is not None else numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    x = x_vi if x_vi is not None else helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm"), *extra_nodes], "g", [x], [y], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(path))
    return path


def external_weight(location: str, length: int = 64) -> TensorProto:
    """A 4x4 float initializer ``W`` whose data is external at ``location`` (offset 0)."""
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4, 4])
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(length))):
        e = w.external_data.add()
        e.key, e.value = k, v
    return w


def write_weights(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(np.arange(16, dtype=np.float32).tobytes())
    return path


# ------------------------------------------------------------------------------------------------ canary
IN_ACCESS, IN_OPEN = 0x1, 0x20


class Canary:
    """A file that must never be opened: the kernel reports every open or read of it by any process through
    ``inotify`` (its inode is watched, so opening it through a symlink or a hard link counts too)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if not self.path.exists():  # an existing file (a real model's data) is watched as it is
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(np.full(64, 7.0, np.float32).tobytes())
        self.fd = -1

    @staticmethod
    def available() -> bool:
        name = ctypes.util.find_library("c")
        return sys.platform.startswith("linux") and bool(name) and hasattr(ctypes.CDLL(name), "inotify_init1")

    def __enter__(self) -> "Canary":
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK)
        assert self.fd >= 0, ctypes.get_errno()
        wd = libc.inotify_add_watch(self.fd, str(self.path).encode(), IN_OPEN | IN_ACCESS)
        assert wd >= 0, ctypes.get_errno()
        return self

    def events(self) -> int:
        """How many opens/reads of the canary happened since the watch started."""
        n = 0
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return n
            n += len(data) // 16  # struct inotify_event without a name (a watched file)

    def __exit__(self, *exc) -> None:
        os.close(self.fd)

    def self_test(self) -> None:
        """Prove the watch sees an open (so a 0 later means 'never opened')."""
        with open(self.path, "rb") as fh:
            fh.read(1)
        assert self.events() >= 1


def files_opened_during(fn, monkeypatch) -> list:
    """Paths Python opened (``open``, ``os.open``, ``np.memmap``, ``os.stat`` excluded) while ``fn()`` ran."""
    import builtins

    seen: list = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file, *a, **k):
        if isinstance(file, (str, os.PathLike)):
            seen.append(os.path.realpath(file))
        return real_open(file, *a, **k)

    def spy_os_open(file, *a, **k):
        if isinstance(file, (str, os.PathLike)):
            seen.append(os.path.realpath(file))
        return real_os_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    try:
        fn()
    finally:
        monkeypatch.setattr(builtins, "open", real_open)
        monkeypatch.setattr(os, "open", real_os_open)
    return seen


def names(items: Iterable) -> list:
    return [getattr(i, "name", str(i)) for i in items]
