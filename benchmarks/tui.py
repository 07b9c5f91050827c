#!/usr/bin/env python3
"""How fast the TUI answers (issue 15 item 27): cold start, opening a project, switching sections, Layer Results and
its filter, on a model of ~1,500 nodes with one measured perf profile.

Figures (each the median of ``--rounds`` runs, in ms, and as a multiple of the *floor*: a minimal Textual app
switching between two lists with a key, timed the same way in the same rounds, which shows how much of a figure
is this machine's load rather than sparsify-tui; and the CPU ms this process used over the same span, which the
machine's load hardly changes):

* **cold start**: ``sparsify-tui`` started in a pseudo-terminal (as a user's shell starts it), until its first
  frame shows the Projects screen (goal <= 1000 ms); and in tmux (until ``capture-pane`` shows it), each paired
  with a minimal Textual app started the same way;
* in-process with Pilot (``App.run_test``), from the key press until the screen is idle: the data the key asks
  for is on screen, no worker is running and no message is pending (Pilot's own waits included: compare with the
  floor, not with the goals):
  * **open project**: `enter` on the Projects list, the first open (the Performance section opens on the
    measured profile's Summary);
  * **section switch** `2`..`6` and back, the first time each section of the project is shown (it is built
    then) and again (it is only shown);
  * **Layer Results** (`l`: 1,500 rows);
  * **filter, per key**: typing "conv" into the Layer Results filter, until the filtered rows are shown.

In tmux (the figures issue 24 sets goals for, measured on a quiet machine; a project opened both right after the
list's first frame, while the sections' modules are still being imported in the background, and 2 s later, as a
user reading the list would): open a project <= 200 ms, a section's
first open <= 150 ms, Layer Results <= 100 ms, a switch back to a section <= 60 ms; each also as a multiple of the
floor (a minimal Textual app switching two lists the same way in the same run), which the machine's load changes
less.

The model (``--nodes``, default 1,500) is built here by stacking Conv/BatchNormalization/Relu/Conv/Add blocks
(ir_version 8, opset 17), or given with ``--model`` (e.g. ``../built-models/bert_base.onnx``); its perf profile
is measured once (3 timed runs, no INT8) in a temporary workspace. The machine is shared: read the figures
against each other and against the goals, not as absolutes.

Usage (from the repo root):  python benchmarks/tui.py [--rounds 5] [--nodes 1500] [--model PATH] [--dim K=V]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZE = (120, 40)


def build_model(path: Path, nodes: int = 1500) -> Path:
    """A residual stack of ``nodes // 5`` blocks Conv3x3 -> BatchNormalization -> Relu -> Conv1x1 -> Add,
    16 channels at 8x8 (small: the point is the node count, not the FLOPs)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    c, blocks = 16, max(1, nodes // 5)
    graph_nodes, inits = [], []
    x = "input"
    for b in range(blocks):
        p = f"/blocks/block.{b}"
        w1, w2 = f"blocks.{b}.conv1.weight", f"blocks.{b}.conv2.weight"
        inits += [numpy_helper.from_array((rng.standard_normal((c, c, 3, 3)) * 0.1).astype(np.float32), w1),
                  numpy_helper.from_array((rng.standard_normal((c, c, 1, 1)) * 0.1).astype(np.float32), w2)]
        for name, value in (("scale", 1.0), ("bias", 0.0), ("mean", 0.0), ("var", 1.0)):
            inits.append(numpy_helper.from_array(np.full(c, value, np.float32), f"blocks.{b}.bn.{name}"))
        graph_nodes += [
            helper.make_node("Conv", [x, w1], [f"{p}/conv1/Conv_output_0"], name=f"{p}/conv1/Conv", pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", [f"{p}/conv1/Conv_output_0"] +
                             [f"blocks.{b}.bn.{n}" for n in ("scale", "bias", "mean", "var")],
                             [f"{p}/bn/BatchNormalization_output_0"], name=f"{p}/bn/BatchNormalization"),
            helper.make_node("Relu", [f"{p}/bn/BatchNormalization_output_0"], [f"{p}/relu/Relu_output_0"],
                             name=f"{p}/relu/Relu"),
            helper.make_node("Conv", [f"{p}/relu/Relu_output_0", w2], [f"{p}/conv2/Conv_output_0"],
                             name=f"{p}/conv2/Conv"),
            helper.make_node("Add", [f"{p}/conv2/Conv_output_0", x], [f"{p}/Add_output_0"], name=f"{p}/Add"),
        ]
        x = f"{p}/Add_output_0"
    graph = helper.make_graph(graph_nodes, "stack", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                                    ["batch", c, 8, 8])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", c, 8, 8])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def cold_start_ms(home: Path) -> float:
    """``sparsify-tui`` in a pseudo-terminal of 120x40 until the Projects screen is drawn (ms)."""
    import fcntl
    import struct
    import termios

    env = dict(os.environ, SPARSIFY_TUI_HOME=str(home), TERM="xterm-256color", PYTHONPATH=str(ROOT),
               COLUMNS=str(SIZE[0]), LINES=str(SIZE[1]))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "sparsify_tui"], stdin=slave, stdout=slave, stderr=slave,
                            env=env, close_fds=True, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        while time.perf_counter() - t0 < 30:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
                if b"Projects" in seen and b"Quit" in seen:  # the screen and its footer: the first full frame
                    return (time.perf_counter() - t0) * 1000
        raise RuntimeError("no first frame within 30 s")
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
        os.close(master)


FLOOR_APP = """
from textual.app import App
from textual.widgets import ContentSwitcher, Footer, Header, OptionList
class Floor(App):
    BINDINGS = [("q", "quit", "Quit"), ("1", "show('a')", "A"), ("2", "show('b')", "B")]
    def compose(self):
        yield Header()
        with ContentSwitcher(initial="a"):
            yield OptionList("Projects", "alpha", id="a")
            yield OptionList("Other", "omega", id="b")
        yield Footer()
    def action_show(self, which):
        self.query_one(ContentSwitcher).current = which
        self.query_one("#" + which).focus()
Floor().run()
"""


TMUX = ["tmux", "-L", f"tuibench{os.getpid()}"]  # a tmux server of our own, kept up by an idle session


def cold_start_tmux_ms(home: Path, floor_app: Optional[Path] = None) -> float:
    """``sparsify-tui`` (or the minimal Textual app in ``floor_app``: header, a list, a footer) started in a new
    tmux window of 120x40, until ``tmux capture-pane`` shows its first full frame (ms; polled every 10 ms)."""
    env = dict(os.environ, SPARSIFY_TUI_HOME=str(home), PYTHONPATH=str(ROOT))
    cmd = f"{sys.executable} {floor_app}" if floor_app else f"{sys.executable} -m sparsify_tui"
    t0 = time.perf_counter()
    pane = subprocess.run([*TMUX, "new-window", "-d", "-P", "-F", "#{pane_id}", f"env SPARSIFY_TUI_HOME={home} "
                           f"PYTHONPATH={ROOT} {cmd}"], env=env, check=True, capture_output=True, text=True).stdout
    pane = pane.strip()
    try:
        while time.perf_counter() - t0 < 30:
            text = subprocess.run([*TMUX, "capture-pane", "-t", pane, "-p"], capture_output=True, text=True).stdout
            if "Projects" in text and "Quit" in text:
                return (time.perf_counter() - t0) * 1000
            time.sleep(0.01)
        raise RuntimeError("no first frame within 30 s")
    finally:
        subprocess.run([*TMUX, "kill-pane", "-t", pane], capture_output=True)


def _tmux_start(home: Path, floor_app: Optional[Path] = None) -> str:
    cmd = f"{sys.executable} {floor_app}" if floor_app else f"{sys.executable} -m sparsify_tui"
    return subprocess.run([*TMUX, "new-window", "-d", "-P", "-F", "#{pane_id}", f"env SPARSIFY_TUI_HOME={home} "
                           f"PYTHONPATH={ROOT} {cmd}"], check=True, capture_output=True, text=True).stdout.strip()


def _tmux_until(pane: str, *texts: str, t0: float, timeout: float = 30.0, absent: str = "") -> float:
    """ms from ``t0`` until every one of ``texts`` is on the pane, and ``absent`` is not (``capture-pane`` every
    10 ms)."""
    while time.perf_counter() - t0 < timeout:
        shown = subprocess.run([*TMUX, "capture-pane", "-t", pane, "-p"], capture_output=True, text=True).stdout
        if all(t in shown for t in texts) and not (absent and absent in shown):
            return (time.perf_counter() - t0) * 1000
        time.sleep(0.01)
    raise RuntimeError(f"{texts} not shown within {timeout} s")


def _tmux_key(pane: str, key: str, *texts: str, absent: str = "") -> float:
    t0 = time.perf_counter()
    subprocess.run([*TMUX, "send-keys", "-t", pane, key], check=True)
    return _tmux_until(pane, *texts, t0=t0, absent=absent)


def tmux_round(home: Path, floor_app: Path) -> dict:
    """The steps of :func:`in_app_round` in a real terminal: keys sent with ``tmux send-keys``, timed until the
    screen (``capture-pane``) shows what the key asked for (each step's own text, e.g. the loaded profile's
    "Measured" line, or the filter's row count). Includes tmux's own latency (one client call per key and per
    10 ms poll), as the floor does: a minimal Textual app switching between two lists the same way."""
    out: dict = {}
    pane = _tmux_start(home, floor_app)
    try:
        _tmux_until(pane, "Projects", "Quit", t0=time.perf_counter())
        out["floor"] = statistics.median(_tmux_key(pane, k, w) for k, w in (("2", "omega"), ("1", "alpha")) * 3)
    finally:
        subprocess.run([*TMUX, "kill-pane", "-t", pane], capture_output=True)
    pane = _tmux_start(home)
    try:  # `enter` at the list's first frame: the sections' modules are still being imported (app._preload_sections)
        _tmux_until(pane, "Projects", "bench", "Quit", t0=time.perf_counter())
        out["open project (at the first frame)"] = _tmux_key(pane, "Enter", "Measured", "Summary type")
    finally:
        subprocess.run([*TMUX, "kill-pane", "-t", pane], capture_output=True)
    pane = _tmux_start(home)
    try:  # `enter` 2 s after the list shows (a user reading it), then the sections, as a user goes on
        _tmux_until(pane, "Projects", "bench", "Quit", t0=time.perf_counter())
        time.sleep(2.0)
        out["open project (2 s after the list)"] = _tmux_key(pane, "Enter", "Measured", "Summary type")
        for label in ("first", "again"):
            for key, texts in (("3", ("Loss profile: Approximated",)), ("4", ("No optimization yet",)),
                               ("5", ("No benchmarks yet",)), ("6", ("Description", "Name")),
                               ("2", ("Measured", "Summary type"))):
                out[f"section {key} {SECTION_NAMES[key]} ({label})"] = _tmux_key(pane, key, *texts)
        out["Layer Results (l)"] = _tmux_key(pane, "l", "Node id", " rows · ")
        _tmux_key(pane, "/", "Filter", absent="Quit")  # the filter field has the focus: its footer has no q
        per_key = [_tmux_key(pane, ch, f"filter: '{'conv'[:i + 1]}'") for i, ch in enumerate("conv")]
        out["filter, per key"] = statistics.median(per_key)
    finally:
        subprocess.run([*TMUX, "kill-pane", "-t", pane], capture_output=True)
    return out


SECTION_NAMES = {"2": "perf", "3": "loss", "4": "optimization", "5": "benchmarks", "6": "settings"}


def goal_ms(step: str) -> Optional[float]:
    """Issue 24's goal for a step measured in tmux on a quiet machine (ms): open a project <= 200, a section's first
    open <= 150, Layer Results <= 100, a switch back <= 60."""
    if step.startswith("open project"):
        return 200.0
    if step.endswith("(first)"):
        return 150.0
    if step.endswith("(again)"):
        return 60.0
    if step.startswith("Layer Results"):
        return 100.0
    return None


async def until_idle(pilot, done, timeout: float = 30.0) -> None:
    """Until ``done()`` and the app is idle (no worker running, no pending message after a pause)."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause()
        try:
            ok = done()
        except Exception:
            ok = False
        if ok and not any(w.is_running for w in app.workers):
            await pilot.pause()
            return
    raise RuntimeError(f"not idle after {timeout} s")


CPU: dict = {}  # label -> CPU ms of this process (every thread) for the same step, filled by timed()


async def timed(pilot, keys, done, label: str = "") -> float:
    """Wall ms from the key press until idle; the process's CPU ms of the same span go to ``CPU[label]`` (CPU time
    hardly changes with the machine's load, so it tells this app's own cost apart from waiting for a core)."""
    t0, c0 = time.perf_counter(), time.process_time()
    await pilot.press(*keys)
    await until_idle(pilot, done)
    if label:
        CPU.setdefault(label, []).append((time.process_time() - c0) * 1000)
    return (time.perf_counter() - t0) * 1000


async def floor_round() -> float:
    """The floor on this machine now: a minimal Textual app (header, two sections of one focusable list each,
    footer) switching sections with a key, timed the same way (ms, median of 6 switches)."""
    from textual.app import App
    from textual.binding import Binding
    from textual.widgets import ContentSwitcher, Footer, Header, OptionList

    class Floor(App):
        BINDINGS = [Binding("1", "show('a')", "A"), Binding("2", "show('b')", "B")]

        def compose(self):
            yield Header()
            with ContentSwitcher(initial="a"):
                yield OptionList("one", "two", id="a")
                yield OptionList("three", "four", id="b")
            yield Footer()

        def action_show(self, which: str) -> None:
            self.query_one(ContentSwitcher).current = which
            self.query_one(f"#{which}").focus()

    app = Floor()
    times = []
    async with app.run_test(size=SIZE) as pilot:
        await until_idle(pilot, lambda: app.focused is not None)
        for key, which in (("2", "b"), ("1", "a")) * 3:
            times.append(await timed(pilot, [key], lambda w=which: app.focused.id == w, "floor"))
    return statistics.median(times)


async def in_app_round(ws, pid) -> dict:
    from sparsify_tui.tui.app import SparsifyApp
    from sparsify_tui.tui.perf.profile import PerfProfileView

    app = SparsifyApp(workspace=ws)
    out: dict = {}

    def section_ready(section: str):
        def check() -> bool:
            widget = app.query_one(f"#sections > #{section}")
            if app.section != section or app.focused is None or widget not in app.focused.ancestors_with_self:
                return False
            if section == "perf":
                return app.query_one(PerfProfileView).profile is not None
            if section == "loss":
                return widget.query_one("LossProfileView").profile is not None
            if section == "optimization":
                return widget.records is not None and widget.query("#opt-empty")
            if section == "benchmarks":
                return bool(widget.query("#bench-empty"))
            return True
        return check

    async with app.run_test(size=SIZE) as pilot:
        await until_idle(pilot, lambda: app.query_one("#projects-table").rows_shown())
        out["open project"] = await timed(pilot, ["enter"], section_ready("perf"), "open project")
        for label in ("first", "again"):
            for key, section in (("3", "loss"), ("4", "optimization"), ("5", "benchmarks"), ("6", "settings"),
                                 ("2", "perf")):
                name = f"section {key} {section} ({label})"
                out[name] = await timed(pilot, [key], section_ready(section), name)
        view = app.query_one(PerfProfileView)

        def layer_table():  # built when the tab is first opened (a lazy tab)
            return view.query_one("#layer-table")

        out["Layer Results (l)"] = await timed(
            pilot, ["l"], lambda: layer_table().rows_shown() and layer_table().data_table.row_count, "Layer Results (l)")
        table = layer_table()
        await pilot.press("slash")
        await until_idle(pilot, lambda: table.has_class("-filtering"))
        per_key = []
        for i, ch in enumerate("conv"):
            want = "conv"[: i + 1]
            per_key.append(await timed(pilot, [ch], lambda w=want: table.filter_text == w, "filter, per key"))
        out["filter, per key"] = statistics.median(per_key)
        out["_rows"] = len(table.all_rows)
        out["_filtered"] = len(table.rows_shown())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1500, help="nodes of the built model (default 1500)")
    parser.add_argument("--model", default=None, help="an .onnx to use instead of the built stack")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE", help="its symbolic dims")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "ws"
        os.environ["SPARSIFY_TUI_HOME"] = str(home)
        from sparsify_tui.analysis.shapes import parse_dim_args
        from sparsify_tui.jobs import run_here
        from sparsify_tui.services.projects import create_project
        from sparsify_tui.store import Workspace

        model = Path(args.model) if args.model else build_model(Path(tmp) / f"stack{args.nodes}.onnx", args.nodes)
        ws = Workspace(home)
        t0 = time.perf_counter()
        project = create_project(ws, model, "bench", dims=parse_dim_args(args.dim) if args.dim else None)
        pid = project["id"]
        run_here(ws, pid, "perf_profile", {"name": "baseline", "iterations": 3, "warmup": 1, "int8": False})
        nodes = len(ws.analysis_of(pid)["nodes"])
        print(f"model {model.name}: {nodes} nodes; project and perf profile made in {time.perf_counter() - t0:.1f} s",
              flush=True)

        starts = [cold_start_ms(home) for _ in range(args.rounds)]
        tmux_starts, tmux_floors, tmux_rounds = [], [], []
        if shutil.which("tmux"):
            floor_app = Path(tmp) / "floor_app.py"
            floor_app.write_text(FLOOR_APP)
            subprocess.run([*TMUX, "new-session", "-d", "-x", str(SIZE[0]), "-y", str(SIZE[1]), "sleep 3600"],
                           check=True)
            try:
                for _ in range(args.rounds):  # interleaved: the app, then the floor app
                    tmux_starts.append(cold_start_tmux_ms(home))
                    tmux_floors.append(cold_start_tmux_ms(home, floor_app))
                tmux_rounds = [tmux_round(home, floor_app) for _ in range(args.rounds)]
            finally:
                subprocess.run([*TMUX, "kill-server"], capture_output=True)
        rounds, floors = [], []
        for _ in range(args.rounds):  # side by side, so machine load hits both alike
            floors.append(asyncio.run(floor_round()))
            rounds.append(asyncio.run(in_app_round(ws, pid)))
    floor = statistics.median(floors)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nmedian of {args.rounds} rounds, ms (terminal {SIZE[0]}x{SIZE[1]}; goal: start <= 1000, the rest <= 100); "
          f"load average {load:.1f} on {os.cpu_count()} cores")
    cpu = {k: statistics.median(v) for k, v in CPU.items()}
    print(f"  {'':42s} {'wall':>8s}   {'x floor':>6s}   {'CPU ms':>7s}")
    print(f"  {'floor: a minimal Textual app, one switch':42s} {floor:8.1f}   {'1.0x':>6s}   {cpu['floor']:7.1f}")
    print(f"  {'cold start to the first frame (pty)':42s} {statistics.median(starts):8.1f}   "
          f"(min {min(starts):.1f}, max {max(starts):.1f})")
    if tmux_starts:
        ratio = statistics.median(a / b for a, b in zip(tmux_starts, tmux_floors))
        print(f"  {'cold start in tmux':42s} {statistics.median(tmux_starts):8.1f}   "
              f"(min {min(tmux_starts):.1f}, max {max(tmux_starts):.1f}; {ratio:.2f}x a minimal Textual app's "
              f"{statistics.median(tmux_floors):.1f}, paired)")
    for key in rounds[0]:
        if key.startswith("_"):
            continue
        values = [r[key] for r in rounds]
        print(f"  {key:42s} {statistics.median(values):8.1f}   {statistics.median(values) / floor:5.1f}x   "
              f"{cpu.get(key, float('nan')):7.1f}   (wall min {min(values):.1f}, max {max(values):.1f})")
    print(f"  (Layer Results: {rounds[0]['_rows']} rows; 'conv' keeps {rounds[0]['_filtered']})")
    if tmux_rounds:
        tfloor = statistics.median(r["floor"] for r in tmux_rounds)
        print(f"\nin tmux {SIZE[0]}x{SIZE[1]}: from `tmux send-keys` until `capture-pane` shows the result, median of "
              f"{len(tmux_rounds)} rounds, ms")
        print(f"  {'':42s} {'wall':>8s}   {'x floor':>7s}   {'goal':>5s}")
        print(f"  {'floor: a minimal Textual app, one switch':42s} {tfloor:8.1f}   {'1.0x':>7s}")
        for key in tmux_rounds[0]:
            if key == "floor":
                continue
            values = [r[key] for r in tmux_rounds]
            goal = goal_ms(key)
            med = statistics.median(values)
            mark = "" if goal is None else f"{goal:5.0f} {'ok' if med <= goal else 'over'}"
            print(f"  {key:42s} {med:8.1f}   {med / tfloor:6.1f}x   {mark:9s} (min {min(values):.1f}, "
                  f"max {max(values):.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
