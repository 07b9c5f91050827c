"""``sparsify-tui data images`` and ``data show`` (issue 31, deliverable 1): a labelled .npz from an image folder,
read back and checked against a project, through ``cli.main`` in-process and the pure core
(:mod:`sparsify_tui.analysis.sample_sets`). The images are tiny solid-colour PNGs written here, so every preprocessed
value is known exactly."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from sparsify_tui.cli import main

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402


def _img(path, rgb=(255, 0, 0), size=(12, 8)):
    """A solid ``rgb`` PNG of ``size`` = (width, height)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, rgb).save(path)
    return path


def _classes(root, counts=None, size=(12, 8)):
    """``root/<class>/<i>.png``: class ``a`` red, ``b`` green, ``c`` blue (3 images each by default)."""
    colours = {"a": (255, 0, 0), "b": (0, 255, 0), "c": (0, 0, 255)}
    for name, n in (counts or {"a": 3, "b": 3, "c": 3}).items():
        for i in range(n):
            _img(root / name / f"{i}.png", colours[name], size)
    return root


def _one_line_error(capsys, code):
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("sparsify-tui: error:") and err.count("\n") == 1, err
    return err


def _image_model(path, shape=(1, 3, 8, 12), name="img"):
    """A model with one image input ``name`` of ``shape`` (batch symbolic) and 3 class scores."""
    dims = ["N", *shape[1:]]
    c = shape[1] if shape[1] in (1, 3) else shape[3]
    w = numpy_helper.from_array(np.ones((3, c), np.float32), "w")
    axes = [2, 3] if shape[1] in (1, 3) else [1, 2]
    nodes = [helper.make_node("ReduceMean", [name], ["m"], axes=axes, keepdims=0),
             helper.make_node("Gemm", ["m", "w"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


# ------------------------------------------------------------------------------------------ building a set


def test_class_folders_give_labels_class_names_and_exact_values(tmp_path, capsys, workspace_home):
    root = _classes(tmp_path / "imgs")
    (root / "a" / "notes.txt").write_text("not an image")
    out = tmp_path / "set.npz"
    assert main(["data", "images", str(root), "-o", str(out), "--size", "4,6", "--mean", "0.5", "--std", "0.25",
                 "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["items"] == 9 and built["shape"] == [9, 3, 4, 6] and built["classes"] == ["a", "b", "c"]
    assert built["skipped"] == 1 and built["labels"] == "folders"
    with np.load(out, allow_pickle=False) as d:  # no pickle: class names are a fixed-width unicode array
        x, labels, names = d["input"], d["labels"], d["class_names"]
    assert names.dtype.kind == "U" and list(names) == ["a", "b", "c"]
    assert labels.dtype == np.int64 and sorted(np.bincount(labels)) == [3, 3, 3]
    for item, lab in zip(x, labels):  # (x/255 - 0.5) / 0.25 per channel: 1 -> 2, 0 -> -2
        want = np.full(3, -2.0, np.float32)
        want[lab] = 2.0  # class a red, b green, c blue: RGB order
        assert np.allclose(item.mean(axis=(1, 2)), want)
    assert not list(tmp_path.glob(".*tmp*"))  # the temp file was renamed, nothing left beside it


def test_bgr_nhwc_scale_and_items_shuffled_by_seed(tmp_path, capsys):
    from sparsify_tui.analysis.sample_sets import ImageRecipe, build_image_set

    root = _classes(tmp_path / "imgs", {"a": 4, "c": 4})
    rec = ImageRecipe(size=(2, 2), layout="nhwc", bgr=True, scale=1.0)
    a = build_image_set(root, tmp_path / "a.npz", rec, seed=1)
    b = build_image_set(root, tmp_path / "b.npz", rec, seed=1)
    c = build_image_set(root, tmp_path / "c.npz", rec, seed=2, limit=3)
    assert a.shape == [8, 2, 2, 3] and c.items == 3
    la, lb, lc = (np.load(tmp_path / f"{k}.npz")["labels"] for k in "abc")
    assert list(la) == list(lb) and list(la) != [0, 0, 0, 0, 1, 1, 1, 1]  # shuffled, the same for one seed
    x = np.load(tmp_path / "a.npz")["input"]
    red = x[list(la).index(0)]
    assert np.allclose(red[..., 2], 255.0) and np.allclose(red[..., :2], 0.0)  # BGR: red is the last channel


def test_resize_shorter_then_center_crop_and_pad(tmp_path):
    from sparsify_tui.analysis.sample_sets import ImageRecipe

    img = Image.new("RGB", (40, 20), (0, 0, 0))
    img.paste((255, 255, 255), (0, 0, 20, 20))  # left half white
    crop = ImageRecipe(size=(10, 10), resize_shorter=10, center_crop=True, scale=1.0).apply(img)
    assert crop.shape == (3, 10, 10)  # 40x20 -> 20x10 -> the middle 10x10: half white, half black
    assert crop[0, :, :4].min() > 200 and crop[0, :, 6:].max() < 50
    padded = ImageRecipe(size=(10, 40), pad=True, mean=(0.5,), std=(0.5,)).apply(Image.new("RGB", (20, 20), "white"))
    assert padded.shape == (3, 10, 40)  # height 10, width 10 by the ratio, then zeros after normalization
    assert np.allclose(padded[:, :, :10], 1.0) and np.allclose(padded[:, :, 10:], 0.0)


def test_csv_labels_by_name_by_index_and_as_text(tmp_path):
    from sparsify_tui.analysis.sample_sets import ImageRecipe, build_image_set

    root = tmp_path / "imgs"
    for i in range(4):
        _img(root / f"{i}.png")
    (tmp_path / "names.csv").write_text("file,label\n0.png,dog\n1.png,cat\n2.png,dog\n3.png,cat\n")
    (tmp_path / "ints.csv").write_text("0.png,7\n1.png,2\n2.png,7\n3.png,2\n")
    (tmp_path / "text.csv").write_text('file,text\n0.png,"a, b"\n1.png,hi\n2.png,\n3.png,\u00e9t\u00e9\n')
    rec = ImageRecipe(size=(2, 2))
    build_image_set(root, tmp_path / "n.npz", rec, labels=str(tmp_path / "names.csv"), seed=0)
    build_image_set(root, tmp_path / "i.npz", rec, labels=str(tmp_path / "ints.csv"), seed=0)
    t = build_image_set(root, tmp_path / "t.npz", rec, labels=str(tmp_path / "text.csv"), text_labels=True, seed=0)
    n, i, tx = (np.load(tmp_path / f"{k}.npz", allow_pickle=False) for k in "nit")
    assert list(n["class_names"]) == ["cat", "dog"] and sorted(n["labels"]) == [0, 0, 1, 1]
    assert "class_names" not in i.files and sorted(i["labels"]) == [2, 2, 7, 7]
    assert tx["labels"].dtype == np.int32 and tx["labels"].shape == (4, 4) and t.labels == "text"
    texts = sorted("".join(chr(c) for c in row if c >= 0) for row in tx["labels"])
    assert texts == ["", "a, b", "hi", "\u00e9t\u00e9"]  # code points padded with -1; commas kept


def test_project_fills_input_name_size_layout(tmp_path, capsys, workspace_home):
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    root = _classes(tmp_path / "imgs", size=(30, 20))
    for shape, key in (((1, 3, 8, 12), "nchw"), ((1, 8, 12, 3), "nhwc")):
        model = _image_model(tmp_path / f"{key}.onnx", shape)
        create_project(Workspace(), str(model), name=key)
        out = tmp_path / f"{key}.npz"
        assert main(["data", "images", str(root), "-o", str(out), "--project", key]) == 0
        assert "9 items" in capsys.readouterr().out
        with np.load(out) as d:
            assert d["img"].shape == (9, *shape[1:])  # the model's input name, size and layout
        assert main(["data", "show", str(out), "--project", key]) == 0
        assert f"fits project {key}: yes" in capsys.readouterr().out
    err = _one_line_error(capsys, main(["data", "images", str(root), "-o", str(tmp_path / "x.npz"), "--project",
                                        "nchw", "--size", "5,5"]))
    assert "--size 5,5" in err and "8,12" in err


# ------------------------------------------------------------------------------------------ what it holds


def test_show_prints_arrays_ranges_histogram_and_names(tmp_path, capsys):
    root = _classes(tmp_path / "imgs", {"a": 2, "b": 5})
    out = tmp_path / "set.npz"
    assert main(["data", "images", str(root), "-o", str(out), "--size", "3,3"]) == 0
    capsys.readouterr()
    assert main(["data", "show", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "set.npz: 7 items; input float32 [7, 3, 3, 3] in [0, 1]; labels: 2 classes (b 5, a 2)"
    assert "array class_names: str<=1 [2]" in text and "class names (2): a, b" in text
    assert main(["data", "show", str(out), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["histogram"] == {"0": 2, "1": 5} and d["class_names"] == ["a", "b"] and d["items"] == 7


def test_show_says_when_a_set_does_not_fit_a_project(tmp_path, capsys, workspace_home):
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    create_project(Workspace(), str(_image_model(tmp_path / "m.onnx")), name="m")
    np.savez(tmp_path / "bad.npz", img=np.zeros((4, 3, 5, 5), np.float32))
    assert main(["data", "show", str(tmp_path / "bad.npz"), "--project", "m"]) == 2
    out = capsys.readouterr().out
    assert "fits project m: no: sample input 'img' has shape [4, 3, 5, 5], the model needs [items, 3, 8, 12]" in out


def test_a_built_set_feeds_every_command_class_names_are_not_an_input(tmp_path):
    """Old code took ``class_names`` for an unknown input ("not model inputs") and refused the file."""
    from sparsify_tui.analysis.inputs import input_specs, load_sample_data
    from sparsify_tui.analysis.labels import sample_set
    from sparsify_tui.analysis.sample_sets import ImageRecipe, build_image_set

    model = _image_model(tmp_path / "m.onnx")
    root = _classes(tmp_path / "imgs")
    build_image_set(root, tmp_path / "s.npz", ImageRecipe(size=(8, 12)), input_name="img")
    feeds = load_sample_data(tmp_path / "s.npz", input_specs(str(model)), batch_size=3)
    assert len(feeds) == 3 and set(feeds[0]) == {"img"}
    ss = sample_set(model, data=tmp_path / "s.npz")
    assert ss.items == 9 and np.concatenate(ss.labels).tolist() == np.load(tmp_path / "s.npz")["labels"].tolist()


def test_summary_line_for_a_data_field(tmp_path):
    from sparsify_tui.analysis.sample_sets import summary_line

    np.savez(tmp_path / "s.npz", x=np.arange(12, dtype=np.float32).reshape(3, 4), labels=np.array([0, 1, 1]))
    assert summary_line(tmp_path / "s.npz") == "s.npz: 3 items; x float32 [3, 4] in [0, 11]; labels: 2 classes (1 2, 0 1)"
    assert summary_line("") == ""
    assert summary_line(tmp_path / "gone.npz").endswith("gone.npz: no such file")
    (tmp_path / "t.npz").write_text("hello")
    assert "is not a .npy or .npz file" in summary_line(tmp_path / "t.npz")


# ------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("case", ["no images", "unreadable", "mixed sizes", "one image class", "csv missing file",
                                  "crop too big", "not npz"])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, case):
    root = tmp_path / "imgs"
    args = ["data", "images", str(root), "-o", str(tmp_path / "out.npz")]
    if case == "no images":
        (root / "a").mkdir(parents=True)
        (root / "a" / "x.txt").write_text("x")
        args += ["--labels", "none"]
        want = "no images in"
    elif case == "unreadable":
        _classes(root)
        (root / "a" / "9.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
        args += ["--size", "4,4"]
        want = "9.png cannot be read as an image"
    elif case == "mixed sizes":
        _img(root / "a" / "0.png", size=(10, 10))
        _img(root / "a" / "1.png", size=(11, 10))
        want = "different sizes"
    elif case == "one image class":
        _classes(root, {"a": 3, "b": 1})
        args += ["--size", "4,4"]
        want = "class folder b/ holds 1 image"
    elif case == "csv missing file":
        _img(root / "0.png")
        (tmp_path / "l.csv").write_text("0.png,x\n1.png,y\n")
        args += ["--labels", str(tmp_path / "l.csv")]
        want = "row 2 names 1.png, which is not in"
    elif case == "crop too big":
        _classes(root)
        args += ["--size", "20,20", "--center-crop"]
        want = "smaller than the crop 20x20"
    else:
        _classes(root)
        args[4] = str(tmp_path / "out.npy")
        want = "the sample set is an .npz file"
    err = _one_line_error(capsys, main(args))
    assert want in err
    assert not (tmp_path / "out.npz").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


def test_missing_pillow_names_the_extra(tmp_path, capsys, monkeypatch):
    import sys

    _classes(tmp_path / "imgs")
    monkeypatch.setitem(sys.modules, "PIL", None)  # `import PIL` raises ImportError
    err = _one_line_error(capsys, main(["data", "images", str(tmp_path / "imgs"), "-o", str(tmp_path / "o.npz")]))
    assert "pip install 'sparsify-tui[data]'" in err


def test_text_labels_do_not_stop_a_run_that_scores_no_outputs(tmp_path):
    """A perf or loss profile never reads the labels: a set with texts as code points (``--text-labels``) feeds it as
    any other; a run that scores outputs with a built-in metric still wants class indices (one line)."""
    from sparsify_tui.analysis.run_inputs import check_run_inputs
    from sparsify_tui.errors import SampleDataError

    model = _image_model(tmp_path / "m.onnx")
    np.savez(tmp_path / "t.npz", img=np.zeros((3, 3, 8, 12), np.float32),
             labels=np.array([[72, 105, -1], [79, -1, -1], [65, 66, 67]], np.int32))
    check_run_inputs(model, 1, {}, str(tmp_path / "t.npz"))  # perf and loss profiles
    with pytest.raises(SampleDataError, match=r"have shape \[3, 3\]: give one class index per item"):
        check_run_inputs(model, 1, {}, str(tmp_path / "t.npz"), scores_outputs=True)
    np.savez(tmp_path / "short.npz", img=np.zeros((3, 3, 8, 12), np.float32), labels=np.zeros((2, 3), np.int32))
    with pytest.raises(SampleDataError, match="have 2 items and the inputs 3"):
        check_run_inputs(model, 1, {}, str(tmp_path / "short.npz"))
