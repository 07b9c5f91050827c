"""Regenerate screenshots/: an SVG of every screen of sparsify-tui, populated, a PNG of each (the SVG as headless
Chromium renders it) and a PNG of the app in a browser.

Run from the repo root, under the machine's timing lock so that the measured figures the screens show are not a
busy machine's:  flock /tmp/bench.lock python screenshots/make_screenshots.py [--size 120x40] [--out screenshots]
[--no-browser]

It creates a temporary workspace ($SPARSIFY_TUI_HOME) with a project from the bundled demo model
(sparsify_tui/demo/ppocr_cls.onnx, dims x:2=48, x:3=192), measures what the screens show (its perf profile with
INT8, a weight-magnitude loss profile, an optimization with INT8, its benchmark against the baseline: about a
minute on a quiet machine), leaves one perf profile queued behind the measuring lock (a job in progress), drives
the app with Pilot like a user and saves `app.save_screenshot` SVGs. Then a channel optimization of the demo (est.
speedup 1.5x, FLOPS profile, group-norm magnitude) is applied and benchmarked for real (a few seconds), and a
budget search (channels + reconstruction within 1 point of top-1, on text lines rendered by
benchmarks/real_data.py) makes a second one; the Groups tab, the pruning card, the benchmark and the budget card are
saved (14-16, 18). The Fleet dialog (17) shows this machine as the one node of a cluster, described as a Ray node
would describe itself (:func:`sparsify_tui.fleet.cluster.describe_this_node`); no cluster is started. With chromium
and textual-serve installed the app is also served (`sparsify-tui serve`, once the queued job is gone) and the
browser's view saved as 13_browser.png, and the SVGs of the largest size (120x40) are rendered to PNGs beside them
(the README shows those; --png-all: every SVG).
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
DEMO = ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx"
DIMS = {"x:2": 48, "x:3": 192}


async def settle(pilot, predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        try:
            if predicate():
                break
        except Exception:
            pass
    await pilot.pause(0.4)


def labelled_data(folder: Path) -> Path:
    """128 labelled text lines (upright / rotated 180°) rendered by benchmarks/real_data.py, the demo model's own
    kind of input: the benchmark's accuracy and the budget search are judged on them."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from real_data import cls_set

    data = folder / "ppocr_cls.npz"
    if not data.exists():
        np.savez(data, **cls_set(128, seed=7))
    return data


def populate(ws) -> dict:
    """The demo project with a measured perf profile (INT8), a loss profile, an INT8 optimization and a benchmark
    (with top-1 accuracy on labelled text lines)."""
    from sparsify_tui.jobs import run_here
    from sparsify_tui.services.optimizations import create_optimization
    from sparsify_tui.services.projects import create_project

    project = create_project(ws, DEMO, "ppocr-demo", "Bundled demo: PP-OCR text direction classifier", dims=DIMS)
    pid = project["id"]
    print("measuring the baseline perf profile (INT8 included) ...", file=sys.stderr)
    run_here(ws, pid, "perf_profile", {"name": "baseline", "iterations": 30, "int8": True})
    print("loss profile (weight magnitude) ...", file=sys.stderr)
    run_here(ws, pid, "loss_profile", {"name": "baseline", "method": "magnitude", "int8": True})
    opt = create_optimization(ws, pid, "pruned 0.85 + INT8", sparsity=0.85, quantize=True)
    print("benchmark: baseline vs the optimization (applied first) ...", file=sys.stderr)
    run_here(ws, pid, "benchmark", {"name": "benchmark 1", "optimizations": [opt.id], "batch_sizes": [1, 4],
                                    "core_counts": [1, 2], "warmup": 3, "iterations": 30,
                                    "data": str(labelled_data(ws.root))})
    return project


async def make(out: Path, size: tuple[int, int], project: dict, suffix: str) -> list[Path]:
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.app import SparsifyApp

    ws = Workspace()
    saved: list[Path] = []

    def shot(app, name: str) -> None:
        path = out / f"{name}{suffix}.svg"
        app.save_screenshot(filename=path.name, path=str(out))
        saved.append(path)

    def in_section(app, section: str) -> bool:
        widget = app.query_one(f"#sections > #{section}")
        return app.section == section and app.focused is not None and widget in app.focused.ancestors_with_self

    app = SparsifyApp(workspace=ws)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, lambda: app.query_one("#projects-table").rows_shown()
                     and "queued" in str(app.query_one("#projects-table").rows_shown()[0]["jobs"]))
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

    app = SparsifyApp(project=project["id"], workspace=ws)
    async with app.run_test(size=size) as pilot:
        from sparsify_tui.tui.perf.profile import PerfProfileView

        # the measured profile, with the queued rerun under the list (a job in progress)
        await settle(pilot, lambda: in_section(app, "perf") and app.query_one(PerfProfileView).profile is not None
                     and app.query("#perf-jobs JobProgress"))
        await settle(pilot, lambda: "queued" in str(app.query_one("#perf-jobs JobProgress #job-status").render()))
        shot(app, "03_perf_summary_with_running_job")
        await pilot.press("l")
        await settle(pilot, lambda: app.query_one(PerfProfileView).query_one("#layer-table").rows_shown())
        shot(app, "04_perf_layer_results")
        await pilot.press("slash", *"conv", "enter", "s", "s", "s")  # sorted by ms, largest first
        await pilot.pause(0.3)
        shot(app, "05_perf_layer_results_filtered")
        await pilot.press("escape", "o", "g")
        await pilot.pause(0.4)
        shot(app, "06_perf_top_layers")
        await pilot.press("3")
        await settle(pilot, lambda: in_section(app, "loss") and app.query_one("LossProfileView").profile is not None)
        await pilot.press("g")
        await pilot.pause(0.4)
        shot(app, "07_loss_sensitivity")
        await pilot.press("4")
        await settle(pilot, lambda: in_section(app, "optimization") and app.query_one("#optimization").rec)
        shot(app, "08_optimization_cards")
        await pilot.press("l")
        await pilot.pause(0.4)
        shot(app, "08b_optimization_layers")
        await pilot.press("5")
        await settle(pilot, lambda: in_section(app, "benchmarks") and app.query_one("#benchmarks").result is not None)
        await pilot.pause(0.4)
        shot(app, "09_benchmarks_compare")
        await pilot.press("6")
        await settle(pilot, lambda: app.section == "settings" and app.query_one("#settings #name").value)
        shot(app, "10_settings")
        await pilot.press("escape", "question_mark")
        await settle(pilot, lambda: app.screen.query("#help-table"))
        shot(app, "11_help")
        await pilot.press("escape")
        await pilot.pause(0.2)
        await pilot.press("j")
        await settle(pilot, lambda: type(app.screen).__name__ == "JobsScreen" and app.screen.jobs)
        shot(app, "12_jobs_view")
    return saved


async def browser_png(out: Path, home: Path) -> Path | None:
    """The app served by `sparsify-tui serve`, as headless Chromium shows it (None without chromium/textual-serve)."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import textual_serve  # noqa: F401

        from browser_cdp import Chromium, ServedApp, chromium_path, free_port
    except ImportError:
        return None
    if chromium_path() is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        async with ServedApp(home, free_port()) as served, Chromium.launch(Path(tmp), size=(1100, 660)) as browser:
            page = await browser.open(served.url)
            await page.wait_for_text("ppocr-demo", timeout=60)
            await asyncio.sleep(1.5)
            return await page.screenshot(out / "13_browser.png")


async def svg_pngs(svgs: list[Path]) -> list[Path]:
    """Each SVG as headless Chromium renders it, saved beside it as a PNG of the SVG's own size: the README shows
    these, since a Markdown viewer may not load the SVG's web font. Rendered from a copy without the font's CDN
    URLs (nothing is fetched: the local Fira Code if installed, else the system monospace font)."""
    import re

    from browser_cdp import Chromium

    pngs = []
    with tempfile.TemporaryDirectory() as tmp:
        async with Chromium.launch(Path(tmp), size=(1600, 1200)) as browser:
            for svg in svgs:
                text = svg.read_text()
                width, height = (int(float(v) + 0.999) for v in
                                 re.search(r'viewBox="0 0 ([0-9.]+) ([0-9.]+)"', text[:2000]).groups())
                local = Path(tmp) / svg.name
                local.write_text(re.sub(r',\s*url\("https?://[^)]*\) format\("[a-z0-9]+"\)', "", text))
                page = await browser.open("about:blank")
                await page.send("Emulation.setDeviceMetricsOverride",
                                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
                await page.send("Page.navigate", {"url": local.as_uri()})
                await asyncio.sleep(0.5)
                await page.send("Runtime.evaluate", {"expression": "document.fonts.ready.then(() => 1)",
                                                     "awaitPromise": True})
                await asyncio.sleep(0.3)
                pngs.append(await page.screenshot(svg.with_suffix(".png")))
                await page.close()
    return pngs


def populate_channel(ws, pid: str) -> None:
    """A channel optimization of the demo project (est. speedup 1.5x), applied (its consumers refit on labelled text
    lines) and benchmarked against the baseline with top-1 accuracy on the held-out lines (made after the other
    screens, which show the project without it)."""
    from sparsify_tui.services import optimizations
    from sparsify_tui.services.apply import apply_record
    from sparsify_tui.services.benchmarks import benchmark_project

    print("channel optimization: apply and benchmark ...", file=sys.stderr)
    rec = optimizations.create_optimization(ws, pid, "channel 1.5x", settings={
        "structure": "channel", "target": "speedup", "target_speedup": 1.5})
    data = str(labelled_data(ws.root))  # reconstruction on its first items, accuracy on the others
    apply_record(ws, pid, rec.id, data=data)
    benchmark_project(ws, pid, {"name": "channel vs baseline", "optimizations": [rec.id], "batch_sizes": [1],
                                "core_counts": [1], "iterations": 30, "data": data})


def populate_budget(ws, pid: str, data_dir: Path) -> None:
    """A budget search of the demo project: the fastest channel-thinned model (reconstructed) within 1 point of
    top-1 on 128 labelled text lines rendered by benchmarks/real_data.py (the demo model's own kind of input)."""
    from sparsify_tui.jobs import run_here

    data = labelled_data(data_dir)
    print("budget search (channels within 1 point of top-1) ...", file=sys.stderr)
    run_here(ws, pid, "budget_search", {"name": "budget 1pt", "max_drop": 0.01, "data": str(data)})


async def select_optimization(pilot, sec, name: str) -> None:
    """Highlight optimization ``name`` in the section's list and wait until its cards show it."""
    opt_list = sec.query_one("#opt-list")
    opt_list.focus()
    names = [str(opt_list.get_option_at_index(i).prompt) for i in range(opt_list.option_count)]
    opt_list.highlighted = next(i for i, n in enumerate(names) if n.startswith(name))
    await settle(pilot, lambda: sec.rec is not None and sec.rec.name == name)


async def make_channel(out: Path, size: tuple[int, int], pid: str, suffix: str) -> list[Path]:
    """The channel optimization's Groups tab, pruning card and benchmark (14-16)."""
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.app import SparsifyApp

    saved: list[Path] = []

    def shot(app, name: str) -> None:
        path = out / f"{name}{suffix}.svg"
        app.save_screenshot(filename=path.name, path=str(out))
        saved.append(path)

    app = SparsifyApp(project=pid, workspace=Workspace())
    async with app.run_test(size=size) as pilot:
        await settle(pilot, lambda: app.project_id == pid and app.section == "perf")  # the project is open
        await pilot.press("4")
        await settle(pilot, lambda: app.query_one("OptimizationSection").rec is not None)
        sec = app.query_one("OptimizationSection")
        await select_optimization(pilot, sec, "channel 1.5x")  # not the newest (the budget search's)
        sec.query_one("#opt-tabs").active = "tab-groups"
        await pilot.pause(0.3)
        sec.query_one("#group-table").focus()
        await pilot.pause(0.5)
        shot(app, "14_channel_groups")
        sec.query_one("#opt-tabs").active = "tab-pruning"
        sec.query_one("#opt-list").focus()
        await pilot.pause(0.3)
        sec.query_one("#est-performance-title").scroll_visible(animate=False, top=True)
        await pilot.pause(0.7)
        shot(app, "15_channel_pruning_card")
        await pilot.press("5")
        await settle(pilot, lambda: app.query_one("BenchmarksSection").result is not None)
        app.query_one("BenchmarksSection").query_one("#bench-tabs").active = "compare"
        await pilot.pause(0.7)
        shot(app, "16_channel_benchmark")
        await pilot.press("4")
        await settle(pilot, lambda: app.section == "optimization")
        await select_optimization(pilot, sec, "budget 1pt")
        opt_list = sec.query_one("#opt-list")
        sec.query_one("#opt-tabs").active = "tab-budget"
        await settle(pilot, lambda: sec.query("#bs-trials"))
        opt_list.focus()
        for scroll in sec.query_one("#bs-trials").ancestors:  # the card from its top: the chart, then the trials
            if getattr(scroll, "is_scrollable", False) and scroll.max_scroll_y:
                scroll.scroll_home(animate=False)
        await pilot.pause(0.7)
        shot(app, "18_budget_search_card")
    return saved


async def make_fleet(out: Path, size: tuple[int, int], pid: str, suffix: str) -> list[Path]:
    """The Fleet dialog (`f` in Performance Profiles) with this machine listed as a node of 127.0.0.1:6379 (17)."""
    from sparsify_tui.fleet.cluster import NodeInfo, describe_this_node
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.app import SparsifyApp
    from sparsify_tui.tui.fleet import FleetDialog
    from sparsify_tui.tui.fleet.messages import FleetNodesFound

    node = NodeInfo("8c1f0e5a" * 7, address="127.0.0.1", is_head=True, ray_cpus=2, labels={"cpu": "epyc"})
    node.describe(describe_this_node())
    app = SparsifyApp(project=pid, workspace=Workspace())
    async with app.run_test(size=size) as pilot:
        await settle(pilot, lambda: app.project_id == pid and app.section == "perf")  # the project is open
        await pilot.press("2")
        await settle(pilot, lambda: app.section == "perf")
        await pilot.press("f")
        await settle(pilot, lambda: isinstance(app.screen, FleetDialog))
        app.screen.query_one("#address").value = "127.0.0.1:6379"
        app.screen.post_message(FleetNodesFound("127.0.0.1:6379", [node]))
        await settle(pilot, lambda: app.screen.query_one("#targets").option_count == 1)
        path = out / f"17_fleet_dialog{suffix}.svg"
        app.save_screenshot(filename=path.name, path=str(out))
    return [path]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", action="append", default=None,
                        help="terminal size WIDTHxHEIGHT, repeatable (default: 80x24 and 120x40)")
    parser.add_argument("--out", default=str(ROOT / "screenshots"), help="output folder")
    parser.add_argument("--no-browser", action="store_true", help="skip the browser PNG and the PNGs of the SVGs")
    parser.add_argument("--png-all", action="store_true", help="a PNG of every SVG (default: the largest size's)")
    args = parser.parse_args()
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in (args.size or ["80x24", "120x40"])]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home:
        os.environ["SPARSIFY_TUI_HOME"] = home
        os.environ["SPARSIFY_TUI_MEASURE_LOCK"] = str(Path(home) / "measure.lock")
        from sparsify_tui import jobs
        from sparsify_tui.jobs.runner import MeasureLock
        from sparsify_tui.store import Workspace

        ws = Workspace()
        project = populate(ws)
        lock = MeasureLock()  # held by "screenshots": the rerun below waits, as behind another measuring job
        lock.try_acquire("screenshots\n")
        job = jobs.submit(ws, project["id"], "perf_profile", {"name": "baseline 2"})
        saved: list[Path] = []
        try:
            for size in sizes:
                suffix = "" if size == (80, 24) else f"_{size[0]}x{size[1]}"
                saved += asyncio.run(make(out, size, project, suffix))
        finally:
            jobs.cancel(ws, job["id"])
            lock.release()
        populate_channel(ws, project["id"])
        populate_budget(ws, project["id"], Path(home))
        for size in sizes:
            suffix = "" if size == (80, 24) else f"_{size[0]}x{size[1]}"
            saved += asyncio.run(make_channel(out, size, project["id"], suffix))
            saved += asyncio.run(make_fleet(out, size, project["id"], suffix))
        if not args.no_browser:  # now that no job is queued: the browser shows the project as it is
            png = asyncio.run(browser_png(out, Path(home)))
            if png is not None:
                saved.append(png)
                big = max(sizes)  # the README shows the largest size's screens (PNGs of the others: --png-all)
                tag = "" if big == (80, 24) else f"_{big[0]}x{big[1]}"
                saved += asyncio.run(svg_pngs([p for p in saved if p.suffix == ".svg" and (
                    args.png_all or not tag or p.stem.endswith(tag))]))
    for path in saved:
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
