"""The New Project dialog asks for every value the model needs: symbolic dims and scalar inputs."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from sparsify_tui.tui.new_project.dialog import inspect_model


def _model_with_scalar_input(path):
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    mm = helper.make_node("MatMul", ["x", "W"], ["h"])
    cast = helper.make_node("Cast", ["sr"], ["srf"], to=TensorProto.FLOAT)
    mul = helper.make_node("Mul", ["h", "srf"], ["y"])
    graph = helper.make_graph(
        [mm, cast, mul], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_dialog_asks_for_named_dims_and_scalar_inputs_but_not_the_batch(tmp_path):
    path = tmp_path / "m.onnx"
    _model_with_scalar_input(path)
    _, dims = inspect_model(str(path))
    assert [d["key"] for d in dims] == ["seq", "sr"]
    assert all(d["suggestion"] > 0 for d in dims)


def test_dialog_addresses_anonymous_dims_by_input_and_axis(demo_model):
    _, dims = inspect_model(str(demo_model))
    assert [d["key"] for d in dims] == ["x:2", "x:3"]


async def test_run_refuses_an_empty_scalar_input_value(tmp_path, monkeypatch):
    """silero_vad's `sr`: a scalar input left empty stops RUN with one line naming it (the project is not made
    and its profile jobs do not fail later on the missing value)."""
    import time

    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.app import SparsifyApp
    from sparsify_tui.tui.widgets.dialogs import ErrorDialog

    monkeypatch.setenv("SPARSIFY_TUI_HOME", str(tmp_path / "ws"))
    path = tmp_path / "m.onnx"
    _model_with_scalar_input(path)
    app = SparsifyApp(model=str(path))
    async with app.run_test(size=(80, 24)) as pilot:
        deadline = time.monotonic() + 30
        while not (app.screen.query("#dim-1") and len(getattr(app.screen, "dims", [])) == 2):
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        app.screen.query_one("#dim-0").value = "16"  # seq given, sr left empty
        await pilot.press("ctrl+r")
        while not isinstance(app.screen, ErrorDialog):
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        assert "dim sr" in app.screen.message and "needs a value" in app.screen.message
        assert Workspace().list_projects() == []


async def test_another_model_path_asks_for_its_own_dims(tmp_path, monkeypatch, demo_model):
    """Changing the model path to a model with other symbolic dims replaces the dim fields: the app stays up (the
    new `dim-0` field was mounted before the old one was removed: DuplicateIds)."""
    from conftest import wait_for

    from sparsify_tui.tui.app import SparsifyApp

    def keys(dialog) -> list:
        return [d["key"] for d in getattr(dialog, "dims", [])]

    monkeypatch.setenv("SPARSIFY_TUI_HOME", str(tmp_path / "ws"))
    path = tmp_path / "m.onnx"
    _model_with_scalar_input(path)
    app = SparsifyApp(model=str(path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: keys(app.screen) == ["seq", "sr"] and app.screen.query("#dim-1"))
        dialog = app.screen
        dialog.query_one("#model_path").value = str(demo_model)
        await wait_for(pilot, lambda: keys(dialog) == ["x:2", "x:3"])
        await pilot.pause(0.3)
        assert app.is_running and app.screen is dialog
        assert len(dialog.query("#dim-0")) == 1 and len(dialog.query("#dim-1")) == 1
        assert "x:2" in str(dialog.query_one("#dims-form").query("Label").first().render())
