"""``sparsify-tui report``: one Markdown, self-contained HTML or JSON file per project, whose numbers are the stored
ones. Seeded with stored profiles, an optimization (applied record and benchmark result written by hand): nothing
is measured."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from compare_fixtures import DEMO_DIMS, profile_from_analysis

from sparsify_tui.benchmark.runner import BenchmarkResult, BenchmarkRun, ModelSpec
from sparsify_tui.cli import main
from sparsify_tui.services.profiles import store_perf_profile
from sparsify_tui.services.projects import create_project


@pytest.fixture
def ws(workspace_home):
    from sparsify_tui.store import Workspace

    return Workspace()


@pytest.fixture
def project(ws, demo_model, capsys):
    """The demo project with perf profiles b1 and b8, a magnitude loss profile, an optimization that was applied
    and benchmarked (the applied record and the benchmark are written by hand)."""
    from sparsify_tui.services.benchmarks import TABLE as BENCH, benchmark_record
    from sparsify_tui.services.optimizations import TABLE as OPT, create_optimization

    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS, description="ticket #42")["id"]
    analysis = ws.analysis_of(pid)
    store_perf_profile(ws, pid, profile_from_analysis(analysis, "b1"))
    store_perf_profile(ws, pid, profile_from_analysis(analysis, "b8", scale=6.0, batch_size=8))
    assert main(["profile", "loss", "demo", "--name", "mag", "--json"]) == 0
    capsys.readouterr()
    opt = create_optimization(ws, pid, "opt1", perf="b1", sparsity=0.8, quantize=True)
    ws.update_record(pid, OPT, opt.id, applied={
        "path": "/nowhere/opt1.onnx", "fingerprint": "x", "quantized": True, "file_size_bytes": 300000,
        "baseline_size_bytes": 580000, "output_diff": {"nmse": 0.0123, "max_abs": 0.25, "top1_agreement": 0.875},
        "applied_at": "2026-01-02T00:00:00+00:00"})
    runs = []
    for label, oid, med in (("baseline", None, 2.0), ("opt1", opt.id, 1.25)):
        r = BenchmarkRun.from_times(label, None if oid is None else "opt1", 1, 2, [med, med * 1.1, med * 0.9])
        r.optimization_id = oid
        runs.append(r)
    res = BenchmarkResult(models=[ModelSpec("baseline", "b.onnx"), ModelSpec("opt1", "o.onnx", opt.id, "opt1")],
                          batch_sizes=[1], core_counts=[2], warmup=1, iterations=3, runs=runs, name="bench one",
                          id="bench1", created="2026-01-03T00:00:00Z", system={"hostname": "server-a",
                                                                              "cpu_model": "Test CPU"})
    res.compute_speedups()
    ws.add_record_with_blob(pid, BENCH, {"id": "bench1", **benchmark_record(res, {})}, res.to_dict())
    return pid


def write(capsys, *argv) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr()


def test_json_report_numbers_equal_the_stored_ones(ws, project, capsys, tmp_path):
    from sparsify_tui.services.profiles import load_loss_profile, load_perf_profile

    out = tmp_path / "r.json"
    write(capsys, "report", "demo", "-o", str(out))
    d = json.loads(out.read_text())
    assert d["format"] == "sparsify-tui/report"
    proj = ws.get_project(project)
    assert d["model"]["sha256"] == proj["model"]["sha256"] and d["model"]["params"] == proj["model"]["params"]
    assert d["machine"]["hostname"] and d["project"]["description"] == "ticket #42"
    assert [p["name"] for p in d["perf"]] == ["b1", "b8"]
    for entry in d["perf"]:
        prof = load_perf_profile(ws, project, entry["name"])
        assert entry["latency_ms"] == prof.latency_ms.to_dict() and entry["items_per_second"] == prof.items_per_second
        assert entry["int8_median_ms"] == prof.int8.median
        # per-node times as every screen shows them: scaled to the measured median, so they add up to it
        assert entry["node_total_ms"] == pytest.approx(prof.latency_ms.median)
        top = sorted((n for n in prof.nodes if n.time_ms > 0), key=lambda n: -n.time_ms)[:10]
        assert [t["id"] for t in entry["top"]] == [n.id for n in top]
        assert [t["time_ms"] for t in entry["top"]] == pytest.approx([prof.node_ms(n) for n in top])
        assert sum(t["share"] for t in entry["top"]) == pytest.approx(sum(prof.node_ms(n) for n in top)
                                                                      / prof.latency_ms.median)
        assert {g["id"]: g["time_ms"] for g in entry["op_types"]} == prof.op_type_totals("baseline")
        assert sum(g["share"] for g in entry["op_types"]) == pytest.approx(1.0)
        assert entry["target"]["hostname"] == "server-a"
    loss = load_loss_profile(ws, project, "mag")
    (le,) = d["loss"]
    values = sorted((l.value_at(0.9) for l in loss.layers), reverse=True)
    assert [r["value"] for r in le["most"]] == values[:5] and le["most"][0]["rank"] == 1
    assert [r["value"] for r in le["least"]] == values[::-1][:5]
    (oe,) = d["optimizations"]
    opt = ws.find_record(project, "optimizations", "opt1")
    assert oe["settings"]["sparsity"] == 0.8 and oe["settings"]["quantize"] is True
    assert oe["estimates"]["sparse_speedup"] == opt["estimates"]["sparse_speedup"]
    assert oe["applied"]["output_diff"]["nmse"] == 0.0123 and oe["applied"]["stale"] is True
    assert oe["benchmarks"][0]["speedup"] == pytest.approx(2.0 / 1.25)
    (be,) = d["benchmarks"]
    assert [(r["model"], r["median_ms"]) for r in be["rows"]] == [("baseline", 2.0), ("opt1", 1.25)]


def test_markdown_report_has_the_tables_and_numbers(ws, project, capsys):
    md = write(capsys, "report", "demo").out  # stdout, Markdown by default
    assert md.startswith("# sparsify-tui report: demo")
    for heading in ("## Model", "## Machine", "## Performance profiles", "## Loss profiles", "## Optimizations",
                    "## Benchmarks"):
        assert heading in md
    assert "| b1 | 1 | 2 | 1.250 | 1.375 | 800.0 | 0.500 | 2.50× |" in md  # the stored b1 numbers
    assert "| b8 | 8 | 2 | 7.500 |" in md
    assert "| opt1 | 1 | 2 | 1.250 |" in md and "1.60×" in md
    assert "NMSE 0.0123" in md and "top-1 agreement 87.5%" in md
    # accuracy beside speed, and a model that far from the original is flagged (agreement 0.875 < 0.9)
    assert "top-1 agreement 87.5%, NMSE 0.0123" in md and "measured 1.60× (" in md
    assert "Warning: too far from the original to use without fine-tuning: export the training code (\\`e\\`) " \
           "(top-1 agreement 87.5% &lt; 90%)." in md  # Markdown-escaped
    assert "█" in md  # charts as tables with bars
    assert md.count("\n|---") >= 8


class _Checker(HTMLParser):
    VOID = {"meta", "br", "img", "hr", "input", "link", "rect", "line"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append((tag, list(self.stack[-3:])))
        else:
            self.stack.pop()


def test_html_report_is_one_self_contained_file(ws, project, capsys, tmp_path):
    out = tmp_path / "report.html"
    err = write(capsys, "report", "demo", "-o", str(out)).err
    assert "wrote html report" in err
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>")
    # no network and no external asset: no URL, no script, no stylesheet link, no image file
    assert not re.search(r"https?://|<script|<link|<img|<iframe|@import|url\(", html, re.I)
    checker = _Checker()
    checker.feed(html)
    assert checker.errors == [] and checker.stack == []
    assert sum(1 for t, _ in checker.tags if t == "svg") >= 5  # latency, op types ×2, sensitivity, benchmark
    assert "1.250" in html and "2.50×" in html and "0.0123" in html
    assert "<title>b1: time per op type" not in html  # titles are escaped text, not tags


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_html_report_renders_in_headless_chromium(ws, project, capsys, tmp_path):
    out = tmp_path / "report.html"
    write(capsys, "report", "demo", "-o", str(out))
    proc = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'chr'}",
         "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert "sparsify-tui report: demo" in dom and dom.count("<svg") >= 5 and "<rect" in dom


def test_report_bad_input_one_line_nothing_left(ws, project, capsys, tmp_path):
    for argv, text in (
        (["report", "demo", "-o", str(tmp_path / "r.txt")], "cannot tell the report format"),
        (["report", "demo", "-o", str(tmp_path / "r.md"), "--format", "html"], "make them agree"),
        (["report", "demo", "-o", str(tmp_path / "missing" / "r.md")], "does not exist"),
        (["report", "ghost"], "no project 'ghost'"),
        (["report", "demo", "--top", "0"], "--top must be 1 or more"),
    ):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("sparsify-tui: error: ") and text in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["workspace"]


def test_report_of_a_project_without_profiles(ws, demo_model, capsys):
    create_project(ws, str(demo_model), name="empty", dims=DEMO_DIMS)
    md = write(capsys, "report", "empty", "--format", "md").out
    assert "No measured perf profile." in md and "No optimization." in md and "No benchmark." in md
    d = json.loads(write(capsys, "report", "empty", "--format", "json").out)
    assert d["perf"] == [] and d["model"]["nodes"] > 0


@pytest.fixture
def demo(ws, demo_model):
    """The seeded demo project of tests/seeded_workspace.py: a noisy perf profile, a benchmark with accuracy on
    labelled data and a noisy row, a channel optimization whose calibration warned of a busy machine."""
    from seeded_workspace import seed_demo

    return seed_demo(ws, demo_model)


def test_report_shows_accuracy_beside_speed_and_every_warning(ws, demo, capsys, tmp_path):
    """Issue 24 bugs 5 and 6: the benchmark's accuracy (top-1 with labels, agreement, NMSE; the metric named, a
    column per model), its noise flags, the perf profile's warnings and every warning `optimization show` prints
    are in the report."""
    from seeded_workspace import CALIBRATION_WARNING

    md = write(capsys, "report", "demo", "--format", "md").out
    assert "metric: top-1 accuracy (labels in the data)" in md
    assert "| top-1 accuracy | 95.3% | 93.8% |" in md
    assert "| top-1 agreement | 100.0% | 96.9% |" in md and "| output NMSE | 0 | 0.0183 |" in md
    assert "| Noise |" in md and "| ! p90 3.0× median" in md and "are noisy" in md
    assert "Warning: noisy timing: p90 1.400 ms" in md
    shown = write(capsys, "optimization", "show", "demo", "channel 1.5x").out
    assert f"warning: channel calibration: {CALIBRATION_WARNING}" in shown
    assert f"Warning: channel calibration: {CALIBRATION_WARNING}" in md
    html = (tmp_path / "r.html")
    write(capsys, "report", "demo", "-o", str(html))
    assert "93.8%" in html.read_text() and "machine was busy" in html.read_text()


def test_report_of_a_channel_optimization_lists_only_its_settings(ws, demo, capsys):
    """Issue 24 bug 7: no "sparsity 0.3", "macs reduction 2" or "min sparsity 0" for a speedup target, the target
    said once, and groups thinned rather than layers pruned."""
    md = write(capsys, "report", "demo", "--format", "md").out
    chan = md[md.index("### Optimization channel 1.5x"):]
    chan = chan[:chan.index("\n### ", 5)]
    assert "| target | 1.50x estimated speedup on onnxruntime |" in chan
    assert chan.count("speedup on onnxruntime") == 1 and "target speedup" not in chan
    for absent in ("| sparsity |", "macs reduction", "min sparsity", "min perf gain", "layers pruned"):
        assert absent not in chan, absent
    assert re.search(r"; \d+ of \d+ groups thinned\.", chan)
    assert "| kept channels round to | 8 |" in chan and "| max ratio removed per group | 0.7 |" in chan


def test_report_flags_estimates_from_noisy_measurements(ws, demo, capsys):
    """Issue 29, deliverable 3: the demo's perf profile is noisy and the channel optimization's calibration was
    taken on a busy machine: each optimization's estimates are flagged unreliable in the report, as in
    `optimization show`, and the profile's noise is named among its warnings."""
    md = write(capsys, "report", "demo", "--format", "md").out
    unstructured = md[md.index("### Optimization pruned 0.7 + INT8"):]
    unstructured = unstructured[:unstructured.index("\n### ", 5)]
    chan = md[md.index("### Optimization channel 1.5x"):]
    chan = chan[:chan.index("\n### ", 5)]
    assert "Unreliable: estimated from a noisy profile: rerun it." in unstructured
    assert "Unreliable: estimated from a noisy profile and channel calibration: rerun them." in chan
    assert "Warning: perf profile baseline: noisy timing: p90 1.400 ms" in unstructured
    shown = write(capsys, "optimization", "show", "demo", "channel 1.5x").out
    assert "unreliable: estimated from a noisy profile and channel calibration: rerun them" in shown


def test_a_benchmark_without_data_reports_no_accuracy(ws, demo, capsys):
    """Issue 29, deliverable 5: agreement on synthetic inputs is no accuracy: the report says "No accuracy: no
    data" and labels what it shows as synthetic, never as top-1."""
    from sparsify_tui.benchmark.runner import BenchmarkResult

    blob = ws.read_record_blob(demo, "benchmarks", "bench1")
    res = BenchmarkResult.from_dict(blob)
    res.data = None
    res.accuracy = {**res.accuracy, "metric": "top1", "label": "top-1 agreement", "labelled": False, "items": 16,
                    "data": "synthetic", "reason": "output 'softmax_0.tmp_0' is class scores [1, 2]: top-1 agreement "
                                                   "with FP32 (no labels)",
                    "models": {k: {**v, "accuracy": None, "top1_agreement": 1.0 if k == "baseline" else 0.0}
                               for k, v in res.accuracy["models"].items()}}
    ws.write_blob(demo, "benchmarks/bench1.json", res.to_dict())
    md = write(capsys, "report", "demo", "--format", "md").out
    bench = md[md.index("### Benchmark "):]
    assert "No accuracy: no data (benchmark with sample data to measure it)." in bench
    assert "| agreement on synthetic inputs | 100.0% | 0.0% |" in bench
    assert "top-1" not in bench


def test_a_measured_speedup_from_a_noisy_benchmark_says_so(ws, demo, capsys):
    """Issue 29, deliverable 3: the benchmark's own noise flag travels with the speedup it records on the
    optimization: `optimization show` says the benchmark was noisy there and to rerun it; a quiet one says nothing."""
    from sparsify_tui.benchmark.runner import BenchmarkResult, BenchmarkRun
    from sparsify_tui.services.measured import record_measured
    from sparsify_tui.services.optimizations import get_optimization

    opt = get_optimization(ws, demo, "pruned 0.7 + INT8")
    res = BenchmarkResult.from_dict(ws.read_record_blob(demo, "benchmarks", "bench1"))
    res.id = "bench1"
    record_measured(ws, demo, res, [opt.id], baseline_path=str(ws.model_path(demo)))
    m = get_optimization(ws, demo, opt.id).measured
    assert m.speedup and m.noise is None
    assert "noisy benchmark" not in write(capsys, "optimization", "show", "demo", opt.name).out
    ref = next(r for r in res.runs if r.model == "baseline" and (r.batch_size, r.core_count) == (m.batch_size,
                                                                                                 m.core_count))
    med = ref.median_ms
    noisy = BenchmarkRun.from_times("baseline", None, ref.batch_size, ref.core_count,
                                    [med * f for f in (1.0, 1.0, 3.0, 3.1, 1.0, 1.0)])  # round 2: a busy machine
    res.runs[res.runs.index(ref)] = noisy
    res.compute_speedups()
    record_measured(ws, demo, res, [opt.id], baseline_path=str(ws.model_path(demo)))
    noise = get_optimization(ws, demo, opt.id).measured.noise
    assert len(noise) == 2 and noise[0].startswith("baseline: p90 3.") and noise[1] == "baseline: rounds ±205%"
    shown = write(capsys, "optimization", "show", "demo", opt.name).out
    assert f"(noisy benchmark, {noise[0]}; baseline: rounds ±205%: rerun it)" in shown
