"""A new pruning structure is one module plus one registration line: a toy structure defined here (with a
setting and a row field of its own) builds, evaluates, renders a recipe and code, round-trips through JSON
and goes through the services unchanged."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Dict, List

import numpy as np
import pytest

from sparsify_tui.errors import ProjectError
from sparsify_tui.optimization.allocation import Allocation
from sparsify_tui.analysis.nodes import prunable_layers
from sparsify_tui.optimization.layer_curves import GRID_LEVELS, node_group, weight_params
from sparsify_tui.optimization.core import build_optimization, change_settings, evaluate, layer_sparsities, override
from sparsify_tui.optimization.recipe import Modifier, parse_recipe, to_yaml
from sparsify_tui.optimization.record import Estimates, LayerEstimate, LayerRow, Optimization, Settings
from sparsify_tui.optimization.structures import (
    STRUCTURES, PruningStructure, get_structure, load_optimization, structure_of,
)
from sparsify_tui.services.projects import create_project

DEMO_DIMS = {"x:2": 48, "x:3": 192}


# ---------------------------------------------------------------- the stub: what a new engineer writes
@dataclass
class ToySettings(Settings):
    """A setting of the toy structure's own."""

    round_to: int = 8


@dataclass
class ToyLayer(LayerRow):
    """A row with a field of the toy structure's own."""

    channels: int = 0


class ToyStructure(PruningStructure):
    """Toy rule: every free layer gets the target sparsity; time is the FLOPs share times ``1 - s``."""

    name = "toy"
    description = "uniform sparsity, for tests"
    settings_type = ToySettings
    layer_type = ToyLayer

    def build_layers(self, analysis, perf, loss, settings, extras=None) -> List[LayerRow]:
        nodes = prunable_layers(analysis)
        total = sum(float(n.flops) for n in nodes) or 1.0
        rows = []
        for i, n in enumerate(nodes):
            share = float(n.flops) / total
            row = ToyLayer(weight_name=n.weight_name, node_id=n.id, op_type=n.op_type,
                           params=weight_params(n), flops=float(n.flops), group=node_group(n),
                           time_curve=[share * (1 - s) for s in GRID_LEVELS], loss_curve=[s * s for s in GRID_LEVELS],
                           gain_curve=[share * s for s in GRID_LEVELS],
                           channels=int((n.weight_shape or [0])[0]) // settings.round_to * settings.round_to)
            row.excluded = self.excluded_reason(settings, i, row)
            rows.append(row)
        return rows

    def allocate(self, layers, settings, overrides) -> Allocation:
        sp = {l.weight_name: overrides.get(l.weight_name, 0.0 if l.excluded else settings.sparsity) for l in layers}
        n = sum(l.params for l in layers) or 1
        return Allocation(sparsities=sp, reasons={l.weight_name: l.excluded for l in layers},
                          avg_sparsity=sum(l.params * sp[l.weight_name] for l in layers) / n,
                          max_reachable=settings.max_sparsity)

    def layer_estimates(self, layers, sparsities) -> List[LayerEstimate]:
        return [LayerEstimate(est_ms=l.time_curve[0] * (1 - sparsities[l.weight_name]),
                              est_speedup=1 / (1 - sparsities[l.weight_name]),
                              recoverability=1 - sparsities[l.weight_name], loss_sensitivity=0.0, perf_sensitivity=0.0)
                for l in layers]

    def model_estimates(self, rec, sparsities: Dict[str, float]) -> Estimates:
        n = sum(l.params for l in rec.layers) or 1
        return Estimates(sparse_runtime="toy runtime", ort_note="toy", time_units="relative",
                         avg_sparsity=sum(l.params * sparsities[l.weight_name] for l in rec.layers) / n)

    def recipe_modifiers(self, rec) -> List[Modifier]:
        return [Modifier("ToyPruningModifier", {"params": sorted(layer_sparsities(rec)),
                                                "final_sparsity": rec.settings.sparsity})]

    def integration_code(self, rec, framework, recipe_path) -> str:
        return f"# toy code for {framework}\nSPARSITIES = {layer_sparsities(rec)!r}\n"

    def prune_weight(self, weight, sparsity):
        out = np.array(weight, copy=True)
        out.reshape(-1)[: int(round(sparsity * out.size))] = 0
        return out


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(STRUCTURES, "toy", ToyStructure())  # the one registration line
    return STRUCTURES["toy"]


@pytest.fixture(scope="module")
def analysis():
    from sparsify_tui.analysis.nodes import analyze_model
    from tests.conftest import DEMO_MODEL

    return analyze_model(str(DEMO_MODEL), batch_size=1, dims=DEMO_DIMS)


# ---------------------------------------------------------------- the checks
def test_stub_structure_builds_evaluates_renders_and_round_trips(toy, analysis, tmp_path):
    from sparsify_tui.optimization.export import render_export

    rec = build_optimization("t", analysis, None, None, sparsity=0.5, settings=ToySettings(structure="toy"))
    assert structure_of(rec) is toy and all(isinstance(l, ToyLayer) for l in rec.layers)
    assert rec.layers[0].sparsity == 0 and rec.layers[0].reason == "first layer"
    assert {l.sparsity for l in rec.layers if not l.excluded} == {0.5}
    assert rec.estimates.sparse_runtime == "toy runtime"
    # the shared edits work on it: override, settings, re-evaluation
    w = rec.layers[1].weight_name
    rec = change_settings(override(rec, w, 0.2), sparsity=0.6)
    assert layer_sparsities(rec)[w] == 0.2 and rec.layers[2].sparsity in (0.0, 0.6)
    # recipe and code come from the structure, the schedule around them is shared
    text = to_yaml(rec)
    tags = [m["type"] for m in parse_recipe(text)["modifiers"]]
    assert "ToyPruningModifier" in tags and "GMPruningModifier" not in tags
    assert tags[0] == "EpochRangeModifier" and "SetLearningRateModifier" in tags
    out = render_export(rec, recipe_path=tmp_path / "r.yaml", framework="pytorch")
    assert out["code"].startswith("# toy code for pytorch")
    # JSON round trip, with the structure's own row class and field
    d = json.loads(json.dumps(rec.to_dict()))
    assert d["settings"]["structure"] == "toy" and d["settings"]["round_to"] == 8
    assert d["layers"][1]["channels"] == rec.layers[1].channels > 0
    back = load_optimization(d)
    assert back == rec and isinstance(back.layers[0], ToyLayer) and isinstance(back.settings, ToySettings)
    assert evaluate(back).to_dict() == d
    # the weight transform apply uses
    assert list(toy.prune_weight(np.arange(1.0, 11.0), 0.3)[:4]) == [0.0, 0.0, 0.0, 4.0]


def test_stub_structure_through_the_services(toy, workspace_home, demo_model):
    from sparsify_tui.services import optimizations
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    stored = optimizations.create_optimization(ws, pid, "toy", sparsity=0.4,
                                               settings={"structure": "toy", "round_to": 16})
    assert isinstance(stored, Optimization) and stored.settings.structure == "toy"
    assert stored.settings.round_to == 16 and stored.layers[1].channels % 16 == 0
    again = optimizations.reevaluate(ws, pid, "toy", sparsity=0.5, round_to=4)
    assert again.settings.round_to == 4
    assert {l.sparsity for l in again.layers if not l.excluded} == {0.5}
    with pytest.raises(ProjectError, match="unknown optimization setting 'round_to'"):
        optimizations.create_optimization(ws, pid, "plain", settings={"round_to": 16})
    with pytest.raises(ProjectError, match="structure"):
        optimizations.reevaluate(ws, pid, "toy", structure="unstructured")


def test_unknown_structure_is_a_one_line_error(analysis):
    with pytest.raises(ProjectError, match="unknown pruning structure 'nope': use one of unstructured") as err:
        build_optimization("t", analysis, None, None, settings=Settings(structure="nope"))
    assert "\n" not in str(err.value)
    with pytest.raises(ProjectError, match="unknown pruning structure"):
        get_structure("nope")
    rec = build_optimization("t", analysis, None, None, sparsity=0.5).to_dict()
    rec["settings"]["structure"] = "nope"
    with pytest.raises(ProjectError, match="unknown pruning structure"):
        load_optimization(rec)


def test_unstructured_prunes_weights_by_magnitude():
    from sparsify_tui.engine.pruning import magnitude_prune

    w = np.random.default_rng(0).normal(size=(8, 3, 3, 3)).astype(np.float32)
    kind = get_structure("unstructured")
    np.testing.assert_array_equal(kind.prune_weight(w, 0.7), magnitude_prune(w, 0.7))
    assert kind.prune_weight(w, 0.0) is w


def test_stub_structure_from_the_cli(toy, workspace_home, demo_model, capsys):
    """`optimize --structure NAME` takes any registered structure (the CLI names none itself); an unknown one is a
    one-line error naming the choices, exit 2, nothing stored."""
    from sparsify_tui.cli import main
    from sparsify_tui.services.optimizations import get_optimization, list_optimizations
    from sparsify_tui.store import Workspace

    pid = create_project(Workspace(), str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    assert main(["optimize", "demo", "--name", "t", "--structure", "toy", "--sparsity", "0.4", "--json"]) == 0
    rec = get_optimization(Workspace(), pid, "t")
    assert rec.settings.structure == "toy" and isinstance(rec.layers[1], ToyLayer)
    assert {l.sparsity for l in rec.layers if not l.excluded} == {0.4}
    capsys.readouterr()
    assert main(["optimize", "demo", "--name", "u", "--structure", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown pruning structure 'nope': use one of unstructured, channel, toy" in err and err.count("\n") == 1
    assert main(["optimize", "demo", "--name", "u", "--structure", "toy", "--quantize", "--max-drop", "0.01"]) == 2
    assert "drop --structure toy" in capsys.readouterr().err
    assert [r.name for r in list_optimizations(Workspace(), pid)] == ["t"]


async def test_stub_structure_pane_offers_its_choice_and_creates_its_records(toy, monkeypatch, workspace_home,
                                                                             demo_model):
    """A structure's pane is one class and one line in STRUCTURE_PANES: the create dialog offers its choice (with its
    default value), the record is created with its structure, and its tab replaces the Layers tab."""
    from textual.widgets import Input, Select

    from conftest import wait_for
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.app import SparsifyApp
    from sparsify_tui.tui.optimization.dialogs import CreateOptimizationDialog
    from sparsify_tui.tui.optimization.layers import LayersPane
    from sparsify_tui.tui.optimization.section import STRUCTURE_PANES

    class ToyPane(LayersPane):
        STRUCTURE = "toy"
        CREATE_CHOICES = [("toy: uniform (sparsity)", "toy", "0.4")]
        TAB_ID, TITLE, TABLE_ID, FOCUS = "tab-toy", "Toy (l)", "toy-table", "#toy-table"

    monkeypatch.setitem(STRUCTURE_PANES, "toy", ToyPane)  # the one registration line
    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.focused is not None)
        await pilot.press("4")
        await wait_for(pilot, lambda: app.section == "optimization")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, CreateOptimizationDialog))
        options = [value for _label, value in app.screen.query_one("#create-structure", Select)._options]
        assert options[:2] == ["unstructured", "channel:uniform"] and options[-1] == "toy"
        app.screen.query_one("#create-structure", Select).value = "toy"
        await wait_for(pilot, lambda: app.screen.query_one("#create-sparsity", Input).value == "0.4")
        app.screen._submit()
        section = app.query_one("#optimization")
        await wait_for(pilot, lambda: section.rec is not None)
        assert section.rec.settings.structure == "toy" and {l.sparsity for l in section.rec.layers
                                                             if not l.excluded} == {0.4}
        await wait_for(pilot, lambda: "tab-toy" in section._tabs())
        assert "tab-layers" not in section._tabs() and "tab-groups" not in section._tabs()
