"""Recipe YAML and integration code (issue 5 item 6): tags, round-trip, params are initializers, plain-PyTorch
schedule without torch."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from sparsify_tui.optimization.core import build_optimization, change_schedule, layer_sparsities
from sparsify_tui.optimization.integration import FRAMEWORKS, generate_code
from sparsify_tui.optimization.recipe import anonymous_names, parse_recipe, to_yaml
from sparsify_tui.optimization.schedule import gmp_sparsity, lr_at


class IndependentLoader(yaml.SafeLoader):
    """A YAML reader written here (not the package's) that accepts any !Tag mapping."""


IndependentLoader.add_multi_constructor(
    "!", lambda loader, suffix, node: {"__tag__": suffix, **loader.construct_mapping(node, deep=True)})


def small_model(path, weight_names=("conv1.weight", "conv2.weight", "fc.weight")):
    """Conv(3->8) -> Relu -> Conv(8->16) -> GlobalAveragePool -> Flatten -> Gemm(16->10), IR 8."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), weight_names[0])
    w2 = numpy_helper.from_array(rng.normal(size=(16, 8, 3, 3)).astype(np.float32), weight_names[1])
    w3 = numpy_helper.from_array(rng.normal(size=(10, 16)).astype(np.float32), weight_names[2])
    nodes = [
        helper.make_node("Conv", ["x", weight_names[0]], ["a"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["b"], name="relu"),
        helper.make_node("Conv", ["b", weight_names[1]], ["c"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c"], ["d"], name="gap"),
        helper.make_node("Flatten", ["d"], ["e"], name="flat"),
        helper.make_node("Gemm", ["e", weight_names[2]], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], [w1, w2, w3])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def analysis_of(path, **kw):
    from sparsify_tui.analysis.nodes import analyze_model

    return analyze_model(str(path), batch_size=1, **kw)


def initializer_names(path):
    from sparsify_tui.analysis.loading import load_model

    return {i.name for i in load_model(str(path)).graph.initializer}


@pytest.fixture(scope="module")
def demo_rec():
    from tests.conftest import DEMO_MODEL

    a = analysis_of(DEMO_MODEL, dims={"x:2": 48, "x:3": 192})
    return build_optimization("demo opt", a, None, None, sparsity=0.7, quantize=True,
                              training={"epochs": 30, "init_lr": 0.01, "final_lr": 0.0001})


def test_recipe_parses_with_tags_and_round_trips(demo_rec):
    text = to_yaml(demo_rec)
    data = yaml.load(text, Loader=IndependentLoader)
    assert data["version"] == "1.1.0"
    tags = [m["__tag__"] for m in data["modifiers"]]
    assert tags[0] == "EpochRangeModifier"
    assert {"SetLearningRateModifier", "LearningRateModifier", "GMPruningModifier", "QuantizationModifier"} <= set(tags)
    sp = {}
    finals = []
    for m in data["modifiers"]:
        if m["__tag__"] == "GMPruningModifier":
            assert set(m) >= {"params", "init_sparsity", "final_sparsity", "start_epoch", "end_epoch",
                              "update_frequency", "inter_func"}
            assert m["inter_func"] == "cubic"
            finals.append(m["final_sparsity"])
            for p in m["params"]:
                assert p not in sp
                sp[p] = m["final_sparsity"]
    assert len(finals) == len(set(finals)), "one GMPruningModifier per distinct final sparsity"
    assert sp == pytest.approx(layer_sparsities(demo_rec))
    assert parse_recipe(text)["sparsities"] == pytest.approx(layer_sparsities(demo_rec))
    # weighted sparsity computed from the recipe alone + the layer sizes hits the target
    n = {l.weight_name: l.params for l in demo_rec.layers}
    avg = sum(n[w] * s for w, s in sp.items()) / sum(n.values())
    assert abs(avg - 0.7) <= 0.02


def test_recipe_epoch_order(demo_rec):
    mods = parse_recipe(to_yaml(demo_rec))["modifiers"]
    rng = next(m for m in mods if m["type"] == "EpochRangeModifier")
    for m in mods:
        assert rng["start_epoch"] <= m["start_epoch"] <= rng["end_epoch"]
        if m["type"] in ("GMPruningModifier", "LearningRateModifier"):
            assert m["start_epoch"] < m["end_epoch"] <= rng["end_epoch"]
    gmp = next(m for m in mods if m["type"] == "GMPruningModifier")
    q = next(m for m in mods if m["type"] == "QuantizationModifier")
    assert q["start_epoch"] >= gmp["end_epoch"]


def test_every_param_is_an_initializer(tmp_path, demo_model, demo_rec):
    inits = initializer_names(demo_model)
    params = parse_recipe(to_yaml(demo_rec))["sparsities"]
    assert params and set(params) <= inits
    path = small_model(tmp_path / "m.onnx")
    rec = build_optimization("s", analysis_of(path), None, None, sparsity=0.6,
                             settings=None)
    params = parse_recipe(to_yaml(rec))["sparsities"]
    assert params and set(params) <= initializer_names(path)


def test_lr_modifiers_in_recipe(demo_rec):
    import copy

    rec = change_schedule(copy.deepcopy(demo_rec), lr_modifiers=[
        {"type": "set", "start_epoch": 0, "learning_rate": 0.05},
        {"type": "step", "start_epoch": 2, "end_epoch": 10, "init_lr": 0.05, "step_size": 2, "gamma": 0.5},
        {"type": "multistep", "start_epoch": 10, "end_epoch": 15, "init_lr": 0.01, "milestones": [12, 14],
         "gamma": 0.1},
    ])
    mods = [m for m in parse_recipe(to_yaml(rec))["modifiers"] if m["type"] == "LearningRateModifier"]
    assert [m["lr_class"] for m in mods] == ["StepLR", "MultiStepLR"]
    assert mods[0]["lr_kwargs"] == {"step_size": 2.0, "gamma": 0.5} and mods[0]["init_lr"] == 0.05
    assert mods[1]["lr_kwargs"]["milestones"] == [12.0, 14.0]
    assert lr_at(5, rec.lr_modifiers) == pytest.approx(0.05 * 0.5 ** 1)
    assert lr_at(14.5, rec.lr_modifiers) == pytest.approx(0.01 * 0.01)


def test_anonymous_names_warn(tmp_path):
    path = small_model(tmp_path / "anon.onnx", ("onnx::Conv_12", "/layer/Conv_output_0", "fc.weight"))
    rec = build_optimization("s", analysis_of(path), None, None, sparsity=0.6,
                             settings=None)
    rec.layers[0].sparsity = 0.5  # make sure the anonymous first layer is listed
    text = to_yaml(rec)
    assert "# WARNING:" in text and "onnx::Conv_12" in text
    code = generate_code(rec, "pytorch-plain")
    assert "# WARNING:" in code
    assert anonymous_names(["conv1.weight", "fc.weight", "conv2_expand_weights"]) == []


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_code_compiles(demo_rec, framework):
    code = generate_code(demo_rec, framework, "/tmp/recipe.yaml")
    compile(code, f"<{framework}>", "exec")


def test_plain_pytorch_schedule_runs_without_torch(demo_rec):
    code = generate_code(demo_rec, "pytorch-plain", "r.yaml")
    ns: dict = {}
    exec(compile(code, "<plain>", "exec"), ns)  # torch is only imported inside functions
    ep = demo_rec.epochs.to_dict()
    f = ns["sparsity_at"]
    for final in {l["sparsity"] for l in ns["LAYERS"]}:
        init = min(ep["init_sparsity"], final)
        assert f(ep["pruning_start_epoch"] - 0.01, final) == 0.0
        assert f(ep["pruning_start_epoch"], final) == pytest.approx(init)
        assert f(ep["pruning_end_epoch"], final) == pytest.approx(final)
        assert f(ep["total_epochs"], final) == pytest.approx(final)
        xs = np.linspace(ep["pruning_start_epoch"], ep["pruning_end_epoch"], 57)
        ys = [f(x, final) for x in xs]
        assert all(b >= a - 1e-12 for a, b in zip(ys, ys[1:]))
        # same as the package's schedule (and so the recipe's GMP semantics)
        for x in xs:
            assert f(x, final) == pytest.approx(gmp_sparsity(x, init, final, ep["pruning_start_epoch"],
                                                             ep["pruning_end_epoch"], ep["update_frequency"]))
    for e in np.linspace(0, ep["total_epochs"], 31):
        assert ns["lr_at"](e) == pytest.approx(lr_at(e, demo_rec.lr_modifiers))
    assert {l["weight"] for l in ns["LAYERS"]} == set(layer_sparsities(demo_rec))


def test_gmp_cubic_formula():
    # s_t = s_f + (s_i - s_f)(1 - (t - t0)/(n dt))^3 at update steps
    assert gmp_sparsity(5.0, 0.05, 0.9, 1.0, 11.0, 1.0) == pytest.approx(0.9 + (0.05 - 0.9) * (1 - 0.4) ** 3)
    assert gmp_sparsity(5.5, 0.05, 0.9, 1.0, 11.0, 1.0) == gmp_sparsity(5.0, 0.05, 0.9, 1.0, 11.0, 1.0)


def test_generated_code_names_only_commands_and_flags_that_exist(demo_rec):
    """Every `sparsify-tui COMMAND --flag` the generated code tells the user to run is a real command and flag (it
    once said `apply --quantize`, which does not exist)."""
    import re

    from sparsify_tui.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for framework in FRAMEWORKS:
        code = generate_code(demo_rec, framework, "recipe.yaml")
        for command, rest in re.findall(r"sparsify-tui \(?(\w+)([^`\n)]*)", code):
            assert command in commands, (framework, command)
            flags = {o for a in commands[command]._actions for o in a.option_strings}
            for flag in re.findall(r"--[\w-]+", rest):
                assert flag in flags, (framework, command, flag)
    assert "apply --quantize" not in generate_code(demo_rec, "pytorch-plain", "recipe.yaml")
