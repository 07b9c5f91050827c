"""A metric of the user's own, ``--metric FILE.py:FUNCTION`` (issue 31, deliverable 2): checked without running it,
loaded and called in the job process, its errors one line naming the file and the line, its worsening budgeted in
its own direction, and its name and sha256 stored with every record it scored (searches, apply, benchmark)."""

from __future__ import annotations

import hashlib
import json
import textwrap

import numpy as np
import pytest

from sparsify_tui import settings
from sparsify_tui.cli import main
from sparsify_tui.errors import MetricError, SampleDataError, SparsifyError
from sparsify_tui.profiling import metrics as M

from test_budget_search import TIMING, _cnn, _data, _rec, size_timing  # noqa: F401 - fixtures
from test_int8 import _mlp, flat_timing  # noqa: F401 - fixture


def _metric_file(path, body: str):
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


NMSE_FILE = """\
    import numpy as np

    SEEN = []


    def rel_error(outputs, reference, labels):
        SEEN.append((len(outputs), [o.shape for o in outputs], None if labels is None else labels.shape))
        y, r = outputs[0].astype(np.float64), reference[0].astype(np.float64)
        return float(((y - r) ** 2).sum() / (r ** 2).sum())


    rel_error.higher_is_better = False


    def first_label_hits(outputs, reference, labels):
        return float(np.mean(outputs[0].argmax(-1) == labels[:, 0]))
    """


# ------------------------------------------------------------------------------------------ the flag


def test_the_flag_is_checked_without_running_the_file(tmp_path, monkeypatch):
    f = _metric_file(tmp_path / "m.py", "raise RuntimeError('never run here')\n\ndef acc(o, r, l):\n    return 1.0\n")
    monkeypatch.chdir(tmp_path)
    assert settings.metric("m.py:acc") == f"{f}:acc"  # absolute, and the module was not executed
    assert settings.metric("top1") == "top1" and settings.metric("auto") is None
    with pytest.raises(SparsifyError, match=r"gone\.py does not exist"):
        settings.metric("gone.py:acc")
    with pytest.raises(SparsifyError, match=r"m\.py defines no 'cer' at its top level \(it defines acc\)"):
        settings.metric("m.py:cer")
    with pytest.raises(SparsifyError, match="is not a Python function name"):
        settings.metric("m.py:1x")
    _metric_file(tmp_path / "bad.py", "def acc(o, r, l):\n    return (\n")
    with pytest.raises(SparsifyError, match=r"bad\.py line 2"):
        settings.metric("bad.py:acc")
    with pytest.raises(SparsifyError, match=r"FILE\.py:FUNCTION for a metric of your own"):
        settings.metric("f1")


def test_load_and_call_errors_are_one_line_naming_file_and_line(tmp_path):
    from sparsify_tui.profiling.user_metric import load_user_metric

    boom = _metric_file(tmp_path / "boom.py", "import numpy\nx = 1 / 0\n\ndef f(o, r, l):\n    return 1.0\n")
    with pytest.raises(MetricError, match=r"boom\.py failed while loading, at boom\.py line 2 \(ZeroDivisionError"):
        load_user_metric(f"{boom}:f")
    bad = _metric_file(tmp_path / "bad.py", """\
        import numpy as np

        def raises(o, r, l):
            return o[0][5]

        def array(o, r, l):
            return np.ones(3)

        def nan(o, r, l):
            return float("nan")

        def fine(o, r, l):
            return np.float32(0.5)
        """)
    outs = [np.zeros((2, 3))]
    m = load_user_metric(f"{bad}:raises")
    with pytest.raises(MetricError) as err:
        m(outs, outs, None)
    assert str(err.value).startswith("metric raises failed at bad.py line 4 (IndexError: index 5 is out of bounds")
    assert "\n" not in str(err.value)
    with pytest.raises(MetricError, match=r"returned an array of shape \[3\], not one number"):
        load_user_metric(f"{bad}:array")(outs, outs, None)
    with pytest.raises(MetricError, match="returned nan: return a finite number"):
        load_user_metric(f"{bad}:nan")(outs, outs, None)
    fine = load_user_metric(f"{bad}:fine")
    assert fine(outs, outs, None) == 0.5 and fine.higher_is_better  # default direction: higher is better
    assert fine.sha256 == hashlib.sha256(bad.read_bytes()).hexdigest()
    assert fine.to_dict() == {"name": "fine", "path": str(bad), "sha256": fine.sha256, "higher_is_better": True}


# ------------------------------------------------------------------------------------------ the machinery


def test_worsening_is_budgeted_in_the_metric_direction_with_stacked_items(tmp_path):
    f = _metric_file(tmp_path / "m.py", NMSE_FILE)
    ref = [{"y": np.array([[0.0, 1.0]], np.float32), "ids": np.array([[3]])},
           {"y": np.array([[1.0, 0.0]], np.float32), "ids": np.array([[4]])}]
    new = [{"y": np.array([[0.0, 1.0]], np.float32), "ids": np.array([[3]])},
           {"y": np.array([[0.0, 1.0]], np.float32), "ids": np.array([[4]])}]
    labels = [np.array([[1, -1]]), np.array([[0, 5]])]  # any int rows, padded with -1
    lower = M.choose_metric(ref[0], settings.metric(f"{f}:rel_error"), labelled=True)
    assert lower.label == "rel_error" and "lower is better" in lower.reason and lower.class_output is None
    assert lower.budget_units.startswith("allowed worsening of rel_error vs FP32 (a rise")
    ev = M.evaluate(ref, new, lower, labels)
    assert (ev.score_reference, ev.score, ev.drop) == (0.0, 1.0, 1.0)  # error energy 2 of 2: a rise of 1
    seen = lower.user.fn.__globals__["SEEN"]
    assert seen[-1] == (2, [(2, 2), (2, 1)], (2, 2))  # every output (graph order), items stacked; labels stacked
    higher = M.choose_metric(ref[0], settings.metric(f"{f}:first_label_hits"), labelled=True)
    ev = M.evaluate(ref, new, higher, labels)
    assert (ev.score_reference, ev.score) == (1.0, 0.5) and ev.drop == pytest.approx(0.5)  # a drop of half
    assert ev.to_dict()["score"] == 0.5 and "score" not in M.evaluate(ref, new, M.choose_metric(ref[0], "nmse")).to_dict()


def test_labels_may_be_any_array_for_a_user_metric_only(tmp_path):
    from sparsify_tui.analysis.labels import check_labels

    spec = settings.metric(f"{_metric_file(tmp_path / 'm.py', NMSE_FILE)}:rel_error")
    padded = np.array([[72, 105, -1], [79, -1, -1]], np.int32)  # texts as code points
    assert check_labels(padded, 2, "labels", metric=spec) is padded
    with pytest.raises(SampleDataError, match=r"have shape \[2, 3\]: give one class index per item"):
        check_labels(padded, 2, "labels")
    with pytest.raises(SampleDataError, match="have 2 items and the inputs 3"):
        check_labels(padded, 3, "labels", metric=spec)


def test_int8_search_scores_and_records_the_user_metric(tmp_path, flat_timing):  # noqa: F811
    from sparsify_tui.optimization.int8_search import search_int8
    from sparsify_tui.text import cli_lines
    from sparsify_tui.text.searches import int8_search_facts

    f = _metric_file(tmp_path / "m.py", NMSE_FILE)
    res = search_int8(_mlp(tmp_path / "mlp.onnx"), max_drop=0.05, metric=settings.metric(f"{f}:rel_error"),
                      calibration_size=8, timing={"rounds": 1, "warmup": 0, "iterations": 1})
    assert res.chosen_trial.groups == 1  # the sensitive layer reverted, as with the built-in NMSE
    assert res.user_metric == {"name": "rel_error", "path": str(f), "sha256": hashlib.sha256(f.read_bytes()).hexdigest(),
                               "higher_is_better": False}
    assert res.score_fp32 == 0.0 and all(t.score is not None for t in res.trials)
    assert res.full_int8.score == pytest.approx(res.full_int8.metric_value)
    text = "\n".join(cli_lines(int8_search_facts(res)))
    assert "metric: rel_error (--metric m.py:rel_error: your metric, lower is better" in text
    assert f"sha256 {res.user_metric['sha256'][:12]}" in text and "rel_error " in text.split("chosen: ")[1]
    stored = res.to_dict()
    assert stored["user_metric"]["name"] == "rel_error" and "score" in stored["trials"][0]


def test_budget_search_gives_held_out_labels_and_records_the_metric(tmp_path, size_timing):  # noqa: F811
    from sparsify_tui.optimization.budget_search import search_budget

    model = _cnn(tmp_path / "cnn.onnx")
    _data(model, tmp_path / "d.npz", n=32)
    with np.load(tmp_path / "d.npz") as d:  # labels as 2-D rows padded with -1: only a user metric takes them
        np.savez(tmp_path / "rows.npz", x=d["x"], labels=np.stack([d["labels"], -np.ones(32, int)], axis=1))
    f = _metric_file(tmp_path / "m.py", NMSE_FILE)
    res = search_budget(model, _rec(model), max_drop=0.05, data=tmp_path / "rows.npz",
                        metric=settings.metric(f"{f}:first_label_hits"), timing=TIMING, max_trials=2)
    assert res.user_metric["name"] == "first_label_hits" and res.user_metric["higher_is_better"]
    assert res.score_fp32 == 1.0  # the labels are FP32's own classes on the 16 held-out items
    for t in res.trials:
        assert t.metric_value == pytest.approx(1.0 - t.score)  # the drop of the hit rate is budgeted
        assert t.within_budget == (t.metric_value <= 0.05 + 1e-12)


def test_loss_profiles_refuse_a_user_metric(workspace_home, demo_model, tmp_path, capsys):
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    create_project(Workspace(), str(demo_model), name="demo", dims={"x:2": 48, "x:3": 192})
    f = _metric_file(tmp_path / "m.py", NMSE_FILE)
    assert main(["profile", "loss", "demo", "--method", "one-shot", "--metric", f"{f}:rel_error"]) == 2
    err = capsys.readouterr().err
    assert "a metric of your own scores whole models" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------------------ CLI: apply, benchmark


@pytest.fixture
def demo(workspace_home, demo_model):
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    ws = Workspace()
    create_project(ws, str(demo_model), name="demo", dims={"x:2": 48, "x:3": 192})
    assert main(["optimize", "demo", "--name", "v1", "--sparsity", "0.5"]) == 0
    return ws


def test_apply_and_benchmark_name_the_metric_and_store_its_hash(demo, tmp_path, capsys):
    f = _metric_file(tmp_path / "m.py", NMSE_FILE)
    sha = hashlib.sha256(f.read_bytes()).hexdigest()
    capsys.readouterr()
    assert main(["apply", "demo", "v1", "--metric", f"{f}:rel_error"]) == 0
    out = capsys.readouterr().out
    assert f"metric rel_error (m.py, sha256 {sha[:12]}):" in out and "lower is better" in out
    from sparsify_tui.services.optimizations import get_optimization

    p = demo.get_project("demo")
    diff = get_optimization(demo, p["id"], "v1").applied.output_diff
    assert diff["user_metric"]["sha256"] == sha and diff["score_baseline"] == 0.0 and diff["score"] > 0
    assert main(["benchmark", "demo", "-O", "v1", "--warmup", "0", "--iterations", "2", "--metric",
                 f"{f}:rel_error"]) == 0
    out = capsys.readouterr().out
    assert f"metric: rel_error (m.py, sha256 {sha[:12]}, lower is better)" in out
    assert any(line.strip().startswith("rel_error on synthetic inputs") for line in out.splitlines())
    rec = demo.list_records(p["id"], "benchmarks")[-1]
    assert rec["accuracy"]["user_metric"]["sha256"] == sha and rec["args"]["metric"] == f"{f}:rel_error"


def test_a_failing_metric_stops_the_job_with_one_line_and_no_record(demo, tmp_path, capsys):
    f = _metric_file(tmp_path / "m.py", "def broken(outputs, reference, labels):\n    return outputs[7]\n")
    capsys.readouterr()
    code = main(["optimize", "demo", "--name", "q", "--quantize", "--max-drop", "0.05", "--metric", f"{f}:broken",
                 "--calibration-size", "2", "--json"])  # --json: no progress lines on stderr
    assert code == 2
    err = capsys.readouterr().err
    assert "metric broken failed at m.py line 2 (IndexError" in err and err.count("\n") == 1
    p = demo.get_project("demo")
    assert [o["name"] for o in demo.list_records(p["id"], "optimizations")] == ["v1"]


def test_an_int8_search_by_a_user_metric_is_named_by_optimize_show_and_the_report(demo, tmp_path, capsys,
                                                                                  flat_timing):  # noqa: F811
    f = _metric_file(tmp_path / "m.py", NMSE_FILE)
    sha = hashlib.sha256(f.read_bytes()).hexdigest()
    capsys.readouterr()
    assert main(["optimize", "demo", "--name", "q", "--quantize", "--max-drop", "100", "--metric", f"{f}:rel_error",
                 "--calibration-size", "2"]) == 0  # full INT8 within budget: one trial
    out = capsys.readouterr().out
    assert f"metric: rel_error (--metric m.py:rel_error: your metric, lower is better" in out and sha[:12] in out
    assert main(["optimization", "show", "demo", "q", "--json"]) == 0
    search = json.loads(capsys.readouterr().out)["quantization"]["search"]
    assert search["user_metric"]["sha256"] == sha and search["score_fp32"] == 0.0
    assert main(["report", "demo"]) == 0
    report = capsys.readouterr().out
    assert f"metric: rel\\_error (m.py, sha256 {sha[:12]}, lower is better), budget 100" in report  # Markdown
