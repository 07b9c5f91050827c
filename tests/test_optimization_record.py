"""The typed optimization record against the JSON that main wrote (tests/data/optimization_main_records.json,
made by tests/optimization_fixtures.py with the code of commit 1c19c5a): every stored record reads and
writes back unchanged, older records migrate forward, and the same user flow prints and stores the same JSON.

Differences on purpose, from the one pruned-time calibration (issue 10 item 4): evaluating now writes
``perf_estimate.RUNTIME`` / ``NOTE`` as ``estimates.sparse_runtime`` / ``ort_note``, and a new FLOPS-profile
optimization has the time curves of ``perf_estimate`` (so its ``est_ms``, ``est_speedup`` and
``sparse_speedup``), with the same sparsities; and (issue 15 item 2) a new perf-profile optimization takes the
per-node times scaled to the unprofiled median (``PerfProfile.node_ms``), so its layer times are main's times ×
the profile's scale and ``model.nodes_total_ms`` is the median, with the same sparsities."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from sparsify_tui.optimization.core import evaluate, layer_sparsities
from sparsify_tui.optimization.record import Epochs, LayerRow, ModelSummary, Optimization, Settings
from sparsify_tui.profiling import perf_estimate
from tests.optimization_fixtures import FLOPS_ARGS, PERF_ARGS, edit, project_with_profiles, run_cli

MAIN = json.loads((Path(__file__).parent / "data" / "optimization_main_records.json").read_text(encoding="utf-8"))
STORED = {r["name"]: r for r in MAIN["stored"]}


def migrated(d: dict) -> dict:
    """What this version writes for a record of main: the same keys in the same order with the same values,
    plus ``settings.structure`` (the pruning structure, new in this version)."""
    out = copy.deepcopy(d)
    out["settings"]["structure"] = "unstructured"
    return out


def evaluated(d: dict) -> dict:
    """:func:`migrated` as this version evaluates it: the runtime and note of ``perf_estimate``."""
    out = migrated(d)
    out["estimates"].update(sparse_runtime=perf_estimate.RUNTIME, ort_note=perf_estimate.NOTE)
    return out


def dumps(d) -> str:
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("name", list(STORED))
def test_every_stored_record_of_main_round_trips(name):
    stored = STORED[name]
    rec = Optimization.from_dict(stored)
    assert dumps(rec.to_dict()) == dumps(migrated(stored))  # same keys, order and values
    again = Optimization.from_dict(rec.to_dict())
    assert again == rec and dumps(again.to_dict()) == dumps(rec.to_dict())
    assert Optimization.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec


def test_typed_fields_of_a_stored_record():
    stored = STORED["perf"]
    rec = Optimization.from_dict(stored)
    assert rec.id == stored["id"] and set(rec.extra) == {"id", "created", "modified"}
    assert isinstance(rec.settings, Settings) and rec.settings.structure == "unstructured"
    assert isinstance(rec.layers[0], LayerRow) and isinstance(rec.epochs, Epochs)
    assert isinstance(rec.model, ModelSummary) and rec.model.perf_nodes[0].int8_time_ms is not None
    assert rec.layers[0].time_curve == stored["layers"][0]["time_curve"]
    assert rec.quantization.excluded == stored["quantization"]["excluded"]
    assert rec.estimates.avg_sparsity == stored["estimates"]["avg_sparsity"]
    assert layer_sparsities(rec) == {l["weight_name"]: l["sparsity"] for l in stored["layers"] if l["sparsity"] > 0}
    # apply's record is typed and written back as it was
    flops = Optimization.from_dict(STORED["flops"])
    assert flops.applied.to_dict() == STORED["flops"]["applied"] and flops.flops_profile
    assert flops.applied.path == STORED["flops"]["applied"]["path"] and flops.applied.quantized is False
    # the typed record is a copy: changing it leaves the stored dict alone
    before = copy.deepcopy(stored)
    rec.layers[0].sparsity += 0.1
    rec.layers[0].time_curve.append(1.0)
    rec.training["epochs"] = 1
    assert stored == before


def test_an_older_record_migrates_forward():
    old = copy.deepcopy(STORED["perf"])
    del old["model"]["nodes_total_ms"]  # written before commit 83703d1
    rec = Optimization.from_dict(old)
    assert rec.model.nodes_total_ms is None and rec.settings.structure == "unstructured"
    out = rec.to_dict()
    assert list(out["model"]) == list(STORED["perf"]["model"]) and out["model"]["nodes_total_ms"] is None
    assert list(out["settings"]) == list(Settings().to_dict())
    # and it still evaluates: the per-node saving is not rescaled, as the code of its time did
    assert evaluate(rec).estimates.sparse_ms is not None


@pytest.mark.parametrize("name", list(STORED))
def test_reevaluating_a_record_of_main_keeps_every_number(name):
    assert evaluate(Optimization.from_dict(STORED[name])).to_dict() == evaluated(STORED[name])


VOLATILE = {"id", "created", "modified", "perf_profile", "loss_profile", "copied_from", "applied"}
FLOPS_CALIBRATED = {"time_curve", "est_ms", "est_speedup", "sparse_speedup"}
# layer times of a perf-profile optimization: scaled to the median now (checked by _check_scaled)
SCALED = {"time_curve", "baseline_ms", "est_ms", "int8_time_ms", "est_speedup", "perf_sensitivity", "gain_curve"}
SCALED_ESTIMATES = {"sparse_ms", "sparse_speedup"}


def _stable(d: dict) -> dict:
    """``d`` without the keys that differ between two runs (ids, times, record ids, apply's measurements), and
    for a FLOPS-profile optimization without the numbers of the pruned-time calibration; for a perf-profile one
    without the layer times that are scaled to the median now (module docstring)."""
    out = {k: v for k, v in d.items() if k not in VOLATILE}
    if d["perf_profile"] == "flops":
        out["layers"] = [{k: v for k, v in l.items() if k not in FLOPS_CALIBRATED} for l in d["layers"]]
        out["estimates"] = {k: v for k, v in d["estimates"].items() if k not in FLOPS_CALIBRATED}
    else:
        out["layers"] = [{k: v for k, v in l.items() if k not in SCALED} for l in d["layers"]]
        out["estimates"] = {k: v for k, v in d["estimates"].items() if k not in SCALED_ESTIMATES}
        out["model"] = {k: v for k, v in d["model"].items() if k not in ("nodes_total_ms", "perf_nodes")}
    return out


def _check_scaled(new: dict, main: dict, scale: float) -> None:
    """The layer times of ``new`` are main's × ``scale`` and its node total is the median."""
    assert new["model"]["nodes_total_ms"] == pytest.approx(new["model"]["baseline_ms"])
    for a, b in zip(new["layers"], main["layers"]):
        assert a["baseline_ms"] == pytest.approx(b["baseline_ms"] * scale, rel=1e-6, abs=1e-9)
        assert a["est_ms"] == pytest.approx(b["est_ms"] * scale, rel=1e-3, abs=2e-6)
    assert new["estimates"]["sparse_ms"] == pytest.approx(main["estimates"]["sparse_ms"], rel=1e-3)


def test_the_same_flow_prints_and_stores_what_main_did(workspace_home, demo_model):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid = project_with_profiles(ws, demo_model)
    cli = {"perf": run_cli(PERF_ARGS), "flops": run_cli(FLOPS_ARGS)}
    for key in ("perf", "flops"):
        assert dumps(_stable(cli[key])) == dumps(_stable(evaluated(MAIN["cli"][key])))
    _check_scaled(cli["perf"], MAIN["cli"]["perf"], 1.1)  # the synthetic profile's median is 1.1 × its node sum
    edit(ws, pid)
    stored = {r["name"]: r for r in ws.list_records(pid, "optimizations")}
    assert list(stored) == list(STORED)
    for name, rec in stored.items():
        assert list(rec) == list(STORED[name])
        assert dumps(_stable(rec)) == dumps(_stable(evaluated(STORED[name])))
    assert stored["perf v2"]["copied_from"] == stored["perf"]["id"]
    assert set(stored["flops"]["applied"]) == set(STORED["flops"]["applied"])


def test_search_records_write_the_keys_they_share_where_they_always_stood():
    """Int8Search / BudgetSearch and their trials share runs of fields (SearchBudget, SearchOutcome,
    TrialMeasures: one base each) but write them in the middle of their own keys, in the order stored records
    and ``--json`` have them; a record read back writes the same keys."""
    from sparsify_tui.optimization.record import BudgetSearch, BudgetTrial, Int8Search, Int8Trial

    measures = ["metric_value", "within_budget", "nmse", "max_abs", "kl", "top1_agreement", "accuracy", "median_ms",
                "p90_ms", "round_ms", "speedup"]
    budget = ["max_drop", "metric", "metric_reason", "budget_units", "labelled", "data"]
    outcome = ["trials", "chosen", "status", "fp32_ms", "fp32_round_ms", "accuracy_fp32"]
    assert list(Int8Trial().to_dict()) == ["index", "groups", "excluded_count", *measures, "quantize_s", "eval_s",
                                           "note"]
    assert list(BudgetTrial().to_dict()) == [
        "index", "target", "quantized", "source", "fp32_groups", "excluded_count", "est_speedup", "groups_thinned",
        "kept_channels", "channels", "macs_reduction", "importance", *measures, "reconstruction", "seconds", "note"]
    assert list(Int8Search().to_dict()) == [
        *budget, "labels_key", "eval_items", "calibration_method", "calibration_size", "ranking_source",
        "ranking_metric", "groups", *outcome, "timing", "seconds", "warnings"]
    assert list(BudgetSearch().to_dict()) == [
        "structure", *budget, "data_sha256", "labels_key", "calibration_items", "held_out_items", "items", "held_out",
        "quantize", *outcome, "reachable_speedup", "timing", "seconds", "warnings"]
    search = BudgetSearch(trials=[BudgetTrial(index=0, int8_search=Int8Search(trials=[Int8Trial(index=1)], chosen=1))],
                          chosen=0, extra={"id": "x"})
    again = BudgetSearch.from_dict(json.loads(dumps(search.to_dict())))
    assert again == search and dumps(again.to_dict()) == dumps(search.to_dict())
    assert again.chosen_trial.int8_search.chosen_trial.index == 1
