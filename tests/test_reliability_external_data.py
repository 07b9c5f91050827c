"""External data never reads outside the model's folder (issue 11, item 1).

Every traversal variant (``../``, an absolute path, ``sub/../../``, a symlink inside the folder pointing out, a
symlinked folder, a hard link) is refused in one line, before anything is opened, by ``analyze``, ``create``,
``create --link`` and every later weight read of a linked project whose model was swapped. A canary file
watched with inotify proves the outside file is never opened by any process (Python, onnx or onnxruntime).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reliability_helpers import (
    Canary, assert_nothing_left, assert_refused, external_weight, files_opened_during, matmul_model, run_cli,
    run_main, snapshot, write_weights,
)

pytestmark = pytest.mark.skipif(not Canary.available(), reason="inotify (Linux) is needed to watch the canary")


def _variants(tmp_path: Path, canary: Path) -> dict:
    """``{name: model path}``, each model's weight W pointing at the canary another way."""
    out = {}
    d = tmp_path / "m_dotdot"
    out["dotdot"] = matmul_model(d / "m.onnx", external_weight(os.path.relpath(canary, d)))
    out["absolute"] = matmul_model(tmp_path / "m_abs" / "m.onnx", external_weight(str(canary)))
    d = tmp_path / "m_inner"
    (d / "sub").mkdir(parents=True)
    out["inner_dotdot"] = matmul_model(d / "m.onnx", external_weight("sub/../" + os.path.relpath(canary, d)))
    d = tmp_path / "m_symlink"
    d.mkdir()
    os.symlink(canary, d / "w.bin")
    out["symlink"] = matmul_model(d / "m.onnx", external_weight("w.bin"))
    d = tmp_path / "m_symdir"
    d.mkdir()
    os.symlink(canary.parent, d / "data")
    out["symlinked_folder"] = matmul_model(d / "m.onnx", external_weight(f"data/{canary.name}"))
    d = tmp_path / "m_hardlink"
    d.mkdir()
    try:
        os.link(canary, d / "w.bin")
        out["hardlink"] = matmul_model(d / "m.onnx", external_weight("w.bin"))
    except OSError:  # another filesystem
        pass
    return out


@pytest.fixture
def canary(tmp_path):
    c = Canary(tmp_path / "outside" / "secret.bin")
    with c:
        c.self_test()
        yield c


def test_every_traversal_variant_is_refused_by_analyze_create_and_link(tmp_path, canary):
    home = tmp_path / "ws"
    for name, model in _variants(tmp_path, canary.path).items():
        for cmd in (["analyze", model], ["create", model, "--name", name], ["create", model, "--link", "--name", name]):
            before = snapshot(home)
            line = assert_refused(run_cli(*cmd, home=home), "'W'")
            assert any(k in line for k in ("outside", "'..'", "symbolic link", "hard link", "absolute")), line
            assert_nothing_left(before, home)
    assert canary.events() == 0, "the outside file was opened"
    assert not (home / "projects").exists() or not [p for p in (home / "projects").iterdir()]


def test_a_linked_model_swapped_for_a_traversal_one_is_refused_by_every_reader(tmp_path, canary):
    home = tmp_path / "ws"
    folder = tmp_path / "linked"
    write_weights(folder / "w.bin")
    model = matmul_model(folder / "m.onnx", external_weight("w.bin"))
    r = run_cli("create", model, "--link", "--name", "linked", home=home)
    assert r.code == 0, r.err
    # the user (or someone) rewrites the linked model so that W now lives outside its folder
    matmul_model(model, external_weight(os.path.relpath(canary.path, folder)))
    for cmd in (["profile", "loss", "linked"], ["profile", "loss", "linked", "--method", "one-shot"],
                ["profile", "perf", "linked", "--iterations", "2", "--warmup", "0", "--no-int8"],
                ["benchmark", "linked", "--iterations", "2", "--warmup", "0"], ["analyze", model]):
        before = snapshot(home)
        # a project's readers see first that the file is not the model it was created from (its sha256 changed);
        # analyze, which has no project, sees the traversal
        needles = ("'W'", "'..'") if cmd[0] == "analyze" else ("changed since the project was created",)
        assert_refused(run_cli(*cmd, home=home), *needles)
        assert_nothing_left(before, home)  # validated before the job record
    assert canary.events() == 0, "the outside file was opened"


def test_symlink_inside_the_folder_is_not_copied_into_the_project(tmp_path, canary, workspace_home, capsys,
                                                                  monkeypatch):
    model = _variants(tmp_path, canary.path)["symlink"]
    opened = files_opened_during(lambda: assert_refused(run_main(capsys, "create", model, "--name", "s"),
                                                        "symbolic link"), monkeypatch)
    assert str(canary.path) not in opened
    assert canary.events() == 0
    assert not list((workspace_home / "projects").glob("*")) if (workspace_home / "projects").exists() else True


def test_data_inside_the_folder_still_works_and_is_copied(tmp_path, workspace_home, capsys):
    folder = tmp_path / "ok"
    write_weights(folder / "sub" / "w.bin")
    model = matmul_model(folder / "m.onnx", external_weight("sub/w.bin"))
    r = run_main(capsys, "create", model, "--name", "ok", "--json")
    assert r.code == 0, r.err
    from sparsify_tui.store import Workspace

    ws = Workspace()
    copied = ws.model_path("ok").parent / "sub" / "w.bin"
    assert copied.read_bytes() == (folder / "sub" / "w.bin").read_bytes()
    r = run_main(capsys, "profile", "loss", "ok")
    assert r.code == 0, r.err


def test_the_rules_match_onnx_and_onnxruntime(tmp_path, canary):
    """Whatever we refuse for pointing outside, onnx's loader and onnxruntime refuse too (and we say so first,
    in one line)."""
    import onnx
    import onnxruntime as ort

    for name, model in _variants(tmp_path, canary.path).items():
        if name == "inner_dotdot":  # normalizes inside the folder for onnx and onnxruntime; we refuse any '..'
            continue
        with pytest.raises(Exception):
            onnx.load(str(model))
        if name != "hardlink":  # onnxruntime accepts hard links; onnx's loader does not, so neither do we
            with pytest.raises(Exception):
                ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])


@pytest.mark.realmodels
def test_a_real_model_with_external_data_passes_and_its_outside_copy_does_not(tmp_path, shared_models, canary,
                                                                              workspace_home, capsys):
    import onnx

    from conftest import shared_model

    model = onnx.load(str(shared_model("mobilenet_v2.onnx")))
    inside = tmp_path / "inside" / "mobilenet.onnx"
    inside.parent.mkdir()
    onnx.save(model, str(inside), save_as_external_data=True, location="mobilenet.onnx.data", size_threshold=1024)
    r = run_main(capsys, "analyze", inside, "--json")
    assert r.code == 0, r.err
    r = run_main(capsys, "create", inside, "--name", "mobilenet")
    assert r.code == 0, r.err
    assert run_main(capsys, "profile", "loss", "mobilenet").code == 0
    # the same model with its weights in the canary's folder: refused, and the data is never read
    outside = tmp_path / "outside_model" / "mobilenet.onnx"
    outside.parent.mkdir()
    os.replace(inside.parent / "mobilenet.onnx.data", canary.path.parent / "mobilenet.onnx.data")
    m2 = onnx.load(str(inside), load_external_data=False)
    for t in m2.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../outside/mobilenet.onnx.data"
    onnx.save(m2, str(outside))
    with Canary(canary.path.parent / "mobilenet.onnx.data") as data:
        for cmd in (["analyze", outside], ["create", outside, "--link", "--name", "out"],
                    ["profile", "loss", outside], ["profile", "perf", outside, "--iterations", "2"]):
            assert_refused(run_main(capsys, *cmd), "'..'")
        assert data.events() == 0
        data.self_test()
