"""Regenerate screenshots/*.svg: one SVG per screen of sparsify-tui, from a demo project.

Run from the repo root:  python screenshots/make_screenshots.py [--size 120x40] [--out screenshots]

It creates a temporary workspace ($SPARSIFY_TUI_HOME), a project from the bundled demo model
(sparsify_tui/demo/ppocr_cls.onnx, dims x:2=48, x:3=192), drives the app with Pilot like a user and
saves `app.save_screenshot` SVGs. Nothing is measured (no perf/loss jobs), so it takes seconds, except for the
channel screens (12, 13): a channel optimization (est. speedup 1.5x, FLOPS profile, group-norm magnitude) is
applied and benchmarked for real (a few seconds), then its Groups tab, pruning card and benchmark are saved.
The Fleet dialog (15) shows this machine as the one node of a cluster, described as a Ray node would describe
itself (:func:`sparsify_tui.fleet.cluster.describe_this_node`); no cluster is started.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's sparsify_tui, not an installed one

from sparsify_tui.services.projects import create_project  # noqa: E402
DEMO = ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx"


async def settle(pilot, predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        try:
            if predicate():
                break
        except Exception:
            pass
    await pilot.pause(0.3)


async def make(out: Path, size: tuple[int, int]) -> list[Path]:
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.app import SparsifyApp

    ws = Workspace()
    project = create_project(ws, DEMO, "ppocr-demo", "Bundled demo: PP-OCR text direction classifier",
                                dims={"x:2": 48, "x:3": 192})
    saved: list[Path] = []
    suffix = "" if size == (80, 24) else f"_{size[0]}x{size[1]}"

    def shot(app, name: str) -> None:
        path = out / f"{name}{suffix}.svg"
        app.save_screenshot(filename=path.name, path=str(out))
        saved.append(path)

    def in_section(app, section: str) -> bool:
        widget = app.query_one(f"#sections > #{section}")
        return app.section == section and app.focused is not None and widget in app.focused.ancestors_with_self

    app = SparsifyApp()
    async with app.run_test(size=size) as pilot:
        await settle(pilot, lambda: app.query_one("#projects-table").rows_shown())
        shot(app, "01_projects")
        await pilot.press("n")
        await settle(pilot, lambda: app.screen.query("#model_path"))
        dialog = app.screen
        dialog.query_one("#model_path").value = os.path.relpath(DEMO)
        await settle(pilot, lambda: len(dialog.dims) == 2)
        dialog.query_one("#dim-0").value = "48"
        dialog.query_one("#dim-1").value = "192"
        dialog.query_one("#name").value = "ocr"
        await pilot.pause(0.2)
        shot(app, "02_new_project")
        await pilot.press("escape")
        await pilot.pause(0.2)

    app = SparsifyApp(project=project["id"])
    async with app.run_test(size=size) as pilot:
        await settle(pilot, lambda: in_section(app, "perf") and app.query_one("#perf #op-chart").labels)
        shot(app, "03_perf_flops_summary")
        await pilot.press("l")
        await settle(pilot, lambda: app.query_one("#perf #layers").rows_shown())
        shot(app, "04_perf_layer_results")
        await pilot.press("slash", *"conv", "enter", *("s" * 8))
        await pilot.pause(0.3)
        shot(app, "05_perf_layer_results_filtered")
        await pilot.press("escape", "o", "g")
        await pilot.pause(0.3)
        shot(app, "06_perf_top_layers")
        for n, (key, name) in enumerate([("3", "loss"), ("4", "optimization"), ("5", "benchmarks"),
                                         ("6", "settings")], start=7):
            await pilot.press(key)
            await settle(pilot, lambda: app.section == name, timeout=5)
            await pilot.pause(0.7)
            shot(app, f"{n:02d}_{name}")
        await pilot.press("question_mark")
        await settle(pilot, lambda: app.screen.query("#help-table"))
        shot(app, "11_help")
        await pilot.press("escape", "2")
        await settle(pilot, lambda: in_section(app, "perf"), timeout=5)
        await make_fleet(app, pilot, shot)
    await make_channel(ws, project["id"], shot, size)
    return saved


async def make_fleet(app, pilot, shot) -> None:
    """The Fleet dialog (`f` in Performance Profiles) with this machine listed as a node of 127.0.0.1:6379."""
    from sparsify_tui.fleet.cluster import NodeInfo, describe_this_node
    from sparsify_tui.tui.fleet import FleetDialog
    from sparsify_tui.tui.fleet.messages import FleetNodesFound

    node = NodeInfo("8c1f0e5a" * 7, address="127.0.0.1", is_head=True, ray_cpus=2, labels={"cpu": "epyc"})
    node.describe(describe_this_node())
    await pilot.press("f")
    await settle(pilot, lambda: isinstance(app.screen, FleetDialog))
    app.screen.query_one("#address").value = "127.0.0.1:6379"
    app.screen.post_message(FleetNodesFound("127.0.0.1:6379", [node]))
    await settle(pilot, lambda: app.screen.query_one("#targets").option_count == 1)
    shot(app, "15_fleet_dialog")
    await pilot.press("escape")


async def make_channel(ws, pid: str, shot, size: tuple[int, int]) -> None:
    """A channel optimization of the demo project, applied and benchmarked: Groups tab, pruning card, benchmark."""
    from sparsify_tui.services import optimizations
    from sparsify_tui.services.apply import apply_record
    from sparsify_tui.services.benchmarks import benchmark_project
    from sparsify_tui.tui.app import SparsifyApp

    rec = optimizations.create_optimization(ws, pid, "channel 1.5x", settings={
        "structure": "channel", "target": "speedup", "target_speedup": 1.5})
    apply_record(ws, pid, rec["id"])
    benchmark_project(ws, pid, {"name": "channel vs baseline", "optimizations": [rec["id"]], "batch_sizes": [1],
                                "core_counts": [1], "iterations": 30})
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=size) as pilot:
        await pilot.press("4")
        await settle(pilot, lambda: app.query_one("OptimizationSection").rec is not None)
        sec = app.query_one("OptimizationSection")
        sec.query_one("#opt-tabs").active = "tab-groups"
        await pilot.pause(0.3)
        sec.query_one("#group-table").focus()
        await pilot.pause(0.5)
        shot(app, "12_channel_groups")
        sec.query_one("#opt-tabs").active = "tab-pruning"
        sec.query_one("#est-tabs").active = "est-performance"
        sec.query_one("#opt-list").focus()
        await pilot.pause(0.7)
        shot(app, "13_channel_pruning_card")
        await pilot.press("5")
        await settle(pilot, lambda: app.query_one("BenchmarksSection").result is not None)
        app.query_one("BenchmarksSection").query_one("#bench-tabs").active = "compare"
        await pilot.pause(0.7)
        shot(app, "14_channel_benchmark")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="80x24", help="terminal size WIDTHxHEIGHT (default 80x24)")
    parser.add_argument("--out", default=str(ROOT / "screenshots"), help="output folder")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home:
        os.environ["SPARSIFY_TUI_HOME"] = home
        saved = asyncio.run(make(out, (width, height)))
    for path in saved:
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
