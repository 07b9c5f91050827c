"""Issue 30 deliverable 5, bugs 6-8: one number format. Units on every figure, one size unit (MB), fixed decimals
per unit, percentages as %, recovery on one scale, drops called drops, the epoch schedule explained, the shape a
perf profile ran at; the same words in the CLI and the TUI."""

from __future__ import annotations

from types import SimpleNamespace

from sparsify_tui.formatting import format_bytes, format_percent, format_value, format_x


def test_one_size_unit_and_fixed_decimals_per_unit():
    assert format_bytes(6756831) == "6.76 MB" and format_bytes(705123) == "0.71 MB"  # was 6756831 bytes, 6.4 MiB
    assert format_bytes(None, none="?") == "?"
    assert format_percent(0.1875) == "18.75%" and format_x(2.368) == "2.37×"
    # a chart's bar beside a table's cell: "0.6 ms" and "0.4903 ms" were two precisions for one unit
    assert format_value(0.6, "ms") == "0.600 ms" and format_value(0.4903, "ms") == "0.490 ms"
    assert format_value(0.98, "%") == "98.00%" and format_value(6.5, "MB") == "6.50 MB"
    assert format_value(None, "x") == "-" and format_value(True) == "yes"


def test_chart_values_use_the_unit_formats():
    from sparsify_tui.tui.widgets.charts import format_value as chart_value

    assert chart_value(0.6, "ms") == chart_value(0.6000001, "ms") == "0.600 ms"
    assert chart_value(1.2e9, "FLOPs") == "1.20 GFLOPs"


def test_recovery_is_a_percentage_everywhere():
    from sparsify_tui.optimization.estimates import recovery_text

    assert recovery_text(0.98, "abc").startswith("98.0%")  # the loss profile says "90.0%": one scale
    from sparsify_tui.optimization.comparison import ESTIMATE_ROWS

    assert dict((k, u) for k, _label, u in ESTIMATE_ROWS)["est_recovery"] == "%"


def test_the_measured_comparison_is_one_wording_with_units():
    """The Measured tab said "1 cores", "6756831 bytes", "0.1875"; the CLI its own words."""
    from sparsify_tui.commands.compare import format_optimizations
    from sparsify_tui.tui.optimization.compare_screen import measured_text

    measured = {"applied": {"file_size_bytes": 6756831, "stale": False,
                            "output_diff": {"nmse": 0.0123, "max_abs": 0.5, "top1_agreement": 0.1875}},
                "benchmarks": [{"benchmark": "b1", "batch_size": 1, "core_count": 1, "median_ms": 0.49031,
                                "items_per_second": 2039.5, "speedup": 2.368}]}
    cmp = SimpleNamespace(names=["opt1"], measured=[measured], notes=[], settings=[], estimates=[], layers=[])
    tui = measured_text(cmp)
    cli = format_optimizations(cmp)
    for text in (tui, cli):
        assert "6.76 MB" in text and "18.75%" in text and "1 core:" in text and "0.490 ms" in text
        assert "2.37×" in text and "bytes" not in text and "1 cores" not in text
    assert "Applied: yes, 6.76 MB; output vs baseline: NMSE 0.0123" in tui.replace("[/b]", "").replace("[b]", "")
    assert "applied: yes, 6.76 MB; output vs baseline: NMSE 0.0123" in cli


def test_search_drops_are_called_drops():
    from sparsify_tui.text.searches import metric_name, metric_text

    assert metric_text("top1", 0.0) == "top-1 drop 0.0 points"  # "top1 0" read as a top-1 of 0
    assert metric_text("top1", 0.0078) == "top-1 drop 0.8 points"
    assert metric_text("nmse", 0.01234) == "nmse 0.01234"
    assert metric_name("top1") == "top-1 drop"  # the chart's y axis and the trials' column
    from sparsify_tui.tui.optimization.budget import TRIAL_COLUMNS
    from sparsify_tui.tui.optimization.pane import metric_columns

    col = next(c for c in metric_columns(TRIAL_COLUMNS, "top1") if c.key == "metric_value")
    assert col.label == "Top-1 drop (points)" and col.text(0.0078) == "0.8"


def test_a_channel_target_is_achieved_in_its_unit():
    from sparsify_tui.text.optimization import achieved_text

    assert achieved_text(SimpleNamespace(to_dict=lambda: {"target": "speedup"}), 2.368) == "2.37× (est.)"
    assert achieved_text(SimpleNamespace(to_dict=lambda: {"target": "uniform"}), 0.3) == "0.30 of the channels"


def test_the_epoch_schedule_says_where_it_comes_from(workspace_home, demo_model):
    """`epochs 100` gives a 59.3-epoch recipe: the text says why (1 + 100/3 + 100/4), and when it was edited."""
    from sparsify_tui.services import optimizations
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace
    from sparsify_tui.text.optimization import epochs_fact, epochs_why
    from sparsify_tui.tui.optimization.schedule import training_text

    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims={"x:2": 48, "x:3": 192})["id"]
    opt = optimizations.create_optimization(ws, pid, "o", sparsity=0.5)
    why = epochs_why(opt)
    assert why.startswith("59.3 epochs from 100 training epochs") and "100/3" in why and "100/4" in why
    assert why in epochs_fact(opt).value and why in training_text(opt)
    edited = optimizations.update_schedule(ws, pid, opt.id, epochs={"pruning_end_epoch": 20})
    assert "set by hand" in epochs_why(edited)


def test_a_perf_summary_says_the_shape_it_ran_at():
    from sparsify_tui.text.perf import inputs_fact

    prof = SimpleNamespace(inputs=SimpleNamespace(shapes={"x": [1, 3, 320, 320]}, source="synthetic"),
                           dims={"x:2": 320, "x:3": 320})
    assert inputs_fact(prof).value == "x 1×3×320×320 (synthetic; dims x:2=320, x:3=320)"


def test_measured_speed_is_quoted_at_the_same_cores_for_every_optimization():
    """`optimization show` quoted the 1-core run for one optimization and the 2-core run for another: without the
    estimate's own (batch, cores), the smallest batch on the most cores, and the other runs named too."""
    from sparsify_tui.optimization.record import Measured
    from sparsify_tui.text.optimization import Hints, measured_fact

    m = Measured.from_dict({"benchmark": "b", "benchmark_name": "bench", "batch_size": 1, "core_count": 2,
                            "speedup": 2.07, "estimated_speedup": 2.0,
                            "runs": [{"batch_size": 1, "core_count": 1, "speedup": 1.85},
                                     {"batch_size": 1, "core_count": 2, "speedup": 2.07}]})
    fact = measured_fact(SimpleNamespace(measured=m, target_runtime=("onnxruntime", "fp32")), Hints("a", "b"))
    assert fact.value.startswith("2.07× vs the original on onnxruntime fp32 ('bench', batch 1, 2 cores)")
    assert "also 1.85× at batch 1, 1 core" in fact.value
