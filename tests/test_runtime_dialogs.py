"""The runtime is a choice in the job dialogs (issue 28): the choices come from the engine registry (every installed
engine at every precision this CPU runs), and the choice reaches the job's arguments as the CLI's flags would."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.widgets import Select

from sparsify_tui.engine import installed_engines
from sparsify_tui.tui.widgets.runtimes import EVERY, OWN, runtime_args, runtime_choices, single_runtimes


class Host(App):
    """An app showing one dialog."""

    def __init__(self, dialog) -> None:
        super().__init__()
        self.dialog = dialog

    def on_mount(self) -> None:
        self.push_screen(self.dialog)


def test_the_choices_are_the_installed_runtimes_and_become_the_cli_arguments():
    singles = [value for _label, value in single_runtimes()]
    assert singles[0] == "onnxruntime:fp32"  # the reference first: the default of every single-runtime field
    assert {v.split(":")[0] for v in singles} == set(installed_engines())
    assert [v for _l, v in runtime_choices(many=True, own=True)][:2] == [OWN, EVERY]
    assert runtime_args("openvino:bf16") == {"engine": "openvino", "precision": "bf16"}
    assert runtime_args("openvino:fp32", many=True) == {"engines": "openvino", "precisions": "fp32"}
    assert runtime_args(EVERY, many=True) == {"engines": "all", "precisions": "all"}
    assert runtime_args(OWN, many=True) == {}  # the benchmark's default: each optimization's own runtime


async def test_the_perf_dialog_passes_the_runtime_chosen_and_falls_back_from_one_this_machine_lacks():
    from sparsify_tui.tui.perf.dialogs import PerfProfileDialog

    pytest.importorskip("openvino")
    defaults = {"name": "p", "batch_size": 1, "core_count": 1, "warmup": 1, "iterations": 2, "int8": False,
                "engine": "openvino", "precision": "fp32"}
    dialog = PerfProfileDialog("pid", defaults)
    async with Host(dialog).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert dialog.query_one("#runtime", Select).value == "openvino:fp32"  # a rerun keeps the record's runtime
        args = dialog.values()
        assert (args["engine"], args["precision"]) == ("openvino", "fp32")
        dialog.query_one("#runtime", Select).value = "onnxruntime:fp32"
        assert (dialog.values()["engine"], dialog.values()["precision"]) == ("onnxruntime", "fp32")
    # a record measured in a precision this machine does not run (bf16 on a CPU without BF16): the first choice
    dialog = PerfProfileDialog("pid", {**defaults, "precision": "no-such-precision"})
    async with Host(dialog).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert dialog.query_one("#runtime", Select).value == "onnxruntime:fp32"


async def test_the_benchmark_dialog_measures_each_optimizations_own_runtime_unless_asked():
    from sparsify_tui.tui.benchmarks.dialogs import BenchmarkDialog

    dialog = BenchmarkDialog([{"id": "o1", "name": "v1"}])
    async with Host(dialog).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        args = dialog.values()
        assert "engines" not in args and "precisions" not in args  # the job's default: each one's own
        dialog.query_one("#runtime", Select).value = EVERY
        assert {k: dialog.values()[k] for k in ("engines", "precisions")} == {"engines": "all", "precisions": "all"}


async def test_the_loss_and_int8_dialogs_pass_one_runtime():
    from sparsify_tui.tui.loss.dialogs import LossProfileDialog
    from sparsify_tui.tui.optimization.int8 import Int8SearchDialog

    dialog = LossProfileDialog({"name": "l"})
    async with Host(dialog).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        args = dialog.values()
        assert (args["engine"], args["precision"]) == ("onnxruntime", "fp32")
    dialog = Int8SearchDialog("pid", default_name="q")
    async with Host(dialog).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        dialog.query_one("#i8d-drop").value = "0.01"
        args = dialog.values()
        assert (args["engine"], args["precision"]) == ("onnxruntime", "fp32")
