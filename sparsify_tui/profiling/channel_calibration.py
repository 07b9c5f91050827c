"""Channel calibration: the channel time model measured on this server (docs/design.md, Optimization).

Speedups from channel pruning are not MACs-proportional (docs/calibration.md: 1.7-2.4x for 2.1x fewer MACs on one CPU,
1.35x on a GPU), so a channel optimization estimates its time from measurements on the target:

1. **Thin** the model uniformly at a few ratios (default 0.25, 0.5 and 0.7; kept counts rounded to this CPU's
   ``round_to``) with :func:`sparsify_tui.engine.thinning.thin_model`.
2. **Latency**: the dense and thinned models timed *unprofiled*, interleaved in ``rounds`` rounds (a fresh session
   per model per round, order alternating, one live session at a time), median ms per batch each.
3. **Per node**: one profiled pass per model, attributed to the original nodes exactly as a perf profile is
   (:func:`sparsify_tui.profiling.attribution.attribute`; thinning keeps node names), each node's time its
   *median* over the pass's runs (:func:`sparsify_tui.profiling.attribution.over_runs`, the perf profile's rule: on
   a shared machine a kernel preempted in one run moves the mean by milliseconds; measured on the demo model under
   load, the kernels' shares moved 10x less between passes with the median). Each node's work fraction
   ``f`` at a ratio comes from the node tables of the two files: a Conv/Gemm/MatMul's MACs after / before, any
   other node's output elements after / before; rows onnxruntime adds (layout conversions) use the model's
   Conv/Gemm/MatMul MACs fraction.
4. **Scale** each model's node times to its own unprofiled latency (``ms · median / Σ profiled ms``): the
   profiled pass gives the *shares* (profiling adds time per kernel, and a busy machine shifts one pass), the
   unprofiled runs the total, so the node times of each point add up to its measured latency, framework time
   between kernels included. The latencies come from the interleaved rounds as ``L_r = L_0 / median over rounds of
   (dense / thinned in the same round)``, each round's time its 25th percentile (other processes only add time),
   so machine drift and a busy neighbour cancel.
5. **Per node**, its measured points ``(f, t)``, made non-decreasing in ``f`` (isotonic regression:
   :func:`monotone_points`), interpolated piecewise-linearly between them and continued below the smallest
   measured ``f`` along the line ``t0·(c0 + c1·f)`` fitted by least squares (``c0, c1 >= 0``; a node whose work
   does not change keeps its mean time). Then ``latency = a·Σ t + g`` is fitted on the measured latencies
   (least squares, ``a > 0``, ``g >= 0``; ``a ≈ 1``, ``g ≈ 0`` since the node times are latency ms already), so
   the model reproduces the measured latency of every calibrated ratio up to ``fit_rel_error``, and a config
   between them interpolates each node on its own measurements. This gives
   :class:`sparsify_tui.optimization.channel_model.ChannelTimeModel` its ``calibrated`` kind.

The result is stored with the perf profile (``services.profiles.store_channel_calibration``) with its cost in
seconds; ``fit_rel_error`` is the mean relative error of the fitted latency at the measured points.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from sparsify_tui.engine.run import REFERENCE, RunSpec
from sparsify_tui.errors import SparsifyError
from sparsify_tui.progress import maybe_check
from sparsify_tui.tempfiles import fast_tmp, make_temp_dir

DEFAULT_RATIOS = (0.25, 0.5, 0.7)
"""Uniform ratios measured by default (the dense model is always measured too): up to the default per-group cap
(0.7), so an allocation interpolates each node between measured points rather than extrapolating."""
DEFAULT_ROUNDS = 7
"""Interleaved timing rounds (a fresh session per model per round)."""
MIN_RUNS_PER_ROUND = 10
"""Timed runs per model and round, at least."""


@dataclass
class ChannelCalibration:
    """A channel calibration (module docstring). ``points``: per measured ratio (0 = dense) ``{ratio,
    median_ms, speedup, macs, kernel_total_ms, node_ms: {node id: ms}, special_ms}``; ``nodes``: ``{node id:
    {t0, c0, c1}}``; ``special``: ``[{id, t0, c0, c1}]``; ``latency``: ``{a, g_ms}``; ``seconds``: what it cost."""

    ratios: list
    round_to: int
    batch_size: int
    core_count: int
    points: list
    nodes: dict
    special: list
    latency: dict
    fit_rel_error: float
    seconds: float
    created: str
    engine: str = ""
    rounds: int = 3
    iterations: int = 30
    warmup: int = 5
    dims: dict = field(default_factory=dict)
    load_average: list = field(default_factory=list)
    """The machine's 1-minute load average when the measurement started and ended (``os.getloadavg``)."""
    warnings: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def fit_node(f: Sequence[float], t: Sequence[float]) -> tuple:
    """``(t0, c0, c1)`` of ``t = t0·(c0 + c1·f)`` from points (``f[0] = 1``, the dense model): least squares on
    ``y = t/t0`` with ``c0, c1 >= 0``; when the fractions barely change (range < 0.05) or the dense time is 0,
    the mean time (``c1 = 0``)."""
    f = np.asarray(f, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    t0 = float(t[0])
    if t0 <= 1e-6:
        m = float(t.mean())
        return (m, 1.0, 0.0) if m > 0 else (0.0, 0.0, 1.0)
    y = t / t0
    if float(f.max() - f.min()) < 0.05:
        return t0, float(y.mean()), 0.0
    A = np.stack([np.ones_like(f), f], axis=1)
    (c0, c1), *_ = np.linalg.lstsq(A, y, rcond=None)
    if c1 < 0:
        return t0, float(y.mean()), 0.0
    if c0 < 0:  # through the origin
        return t0, 0.0, float((f * y).sum() / (f * f).sum())
    return t0, float(c0), float(c1)


def monotone_points(f: Sequence[float], t: Sequence[float]) -> list:
    """``[[f, t], ...]`` sorted by ``f`` ascending, points with the same ``f`` averaged, then made non-decreasing
    in ``f`` by isotonic regression (pool adjacent violators: a run of points that goes down as the work grows is
    replaced by its mean, the least-squares monotone fit; Barlow et al. 1972). Less work never takes longer: a
    point below its neighbour is measurement noise, and an allocation would otherwise "gain" time by thinning
    a node whose thinned pass happened to run while the dense one was disturbed. Pooling averages (taking the
    larger of two times would bias every node upward); what it moves off the measured latencies the latency fit
    (``a``, ``g``) takes back."""
    pts: dict = {}
    for x, y in zip(f, t):
        key = round(float(x), 9)
        pts.setdefault(key, []).append(float(y))
    xs = sorted(pts)
    blocks: list = []  # [sum of values, count, first index]
    for i, x in enumerate(xs):
        blocks.append([float(np.mean(pts[x])), 1, i])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            v, n, _ = blocks.pop()
            blocks[-1][0] += v
            blocks[-1][1] += n
    ys = [0.0] * len(xs)
    for v, n, i in blocks:
        for j in range(i, i + n):
            ys[j] = v / n
    return [[x, y] for x, y in zip(xs, ys)]


def node_time(c: dict, f: float) -> float:
    """Time of a calibrated node (``{"t0", "c0", "c1", "pts"}``) at work fraction ``f``: piecewise-linear through
    its points, below the smallest one along ``t0·(c0 + c1·f)`` shifted to meet it (never below 0)."""
    pts = c.get("pts")
    if not pts:
        return float(c["t0"]) * (float(c["c0"]) + float(c["c1"]) * float(f))
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    if f >= xs[0] or len(xs) == 1 and f >= xs[0]:
        return float(np.interp(f, xs, ys))
    slope = float(c["t0"]) * float(c["c1"])
    return max(0.0, ys[0] - slope * (xs[0] - f))


def fit_latency(sums: Sequence[float], medians: Sequence[float]) -> tuple:
    """``(a, g)`` of ``median = a·sum + g`` (least squares, ``g >= 0``, ``a > 0``)."""
    s = np.asarray(sums, dtype=np.float64)
    m = np.asarray(medians, dtype=np.float64)
    if len(s) >= 2 and float(s.max() - s.min()) > 1e-9:
        A = np.stack([s, np.ones_like(s)], axis=1)
        (a, g), *_ = np.linalg.lstsq(A, m, rcond=None)
        if a > 0 and g >= 0:
            return float(a), float(g)
    a = float((s * m).sum() / (s * s).sum()) if float((s * s).sum()) > 0 else 1.0
    return max(a, 1e-9), 0.0


def _node_fraction(n0, n1, matrix: bool) -> Optional[float]:
    """Work fraction of one node between the dense (``n0``) and thinned (``n1``) node tables."""
    if matrix:
        return (n1.macs / n0.macs) if n0.macs else None
    s0 = n0.output_shapes[0] if n0.output_shapes else None
    s1 = n1.output_shapes[0] if n1.output_shapes else None
    if not s0 or not s1:
        return None
    e0, e1 = float(np.prod(s0)), float(np.prod(s1))
    return e1 / e0 if e0 else None


def calibrate_channels(model_path, run: RunSpec = REFERENCE, *, ratios: Sequence[float] = DEFAULT_RATIOS,
                       dims: Optional[dict] = None, data=None, warmup: int = 5, iterations: int = 30,
                       rounds: int = DEFAULT_ROUNDS, round_to: Optional[int] = None, progress=None,
                       cancel=None) -> ChannelCalibration:
    """Measure the channel time model of the model at ``model_path`` (module docstring) on the runtime, batch size and
    cores of ``run`` (:class:`~sparsify_tui.engine.run.RunSpec`: those of the perf profile it is stored with).

    ``ratios``: uniform fractions of channels removed (each in (0, 1)); ``dims``,
    ``data``, ``warmup``, ``iterations`` as a perf profile takes them (``iterations`` timed runs per model, split
    over ``rounds`` interleaved rounds; the profiled pass runs :func:`~sparsify_tui.profiling.perf.profiled_runs_for`
    times). Raises
    ``SparsifyError`` for bad ratios or a model without prunable channel groups, ``ModelError`` /
    ``DimensionError`` / ``SampleDataError`` as a perf profile does, ``JobCanceled``."""
    from sparsify_tui import settings
    from sparsify_tui.analysis import inputs as ainputs
    from sparsify_tui.analysis.channels import default_round_to
    from sparsify_tui.engine import get_engine
    from sparsify_tui.engine.timing import interleaved_times

    t_start = time.perf_counter()
    load_start = _load()
    prog = progress or (lambda s, f: None)
    ratios = sorted({round(float(r), 6) for r in ratios})
    if not ratios or ratios[0] <= 0 or ratios[-1] >= 1:
        raise SparsifyError(f"calibration ratios must be fractions of channels in (0, 1), got {list(ratios)}: "
                            "e.g. 0.25,0.5")
    engine = run.runtime()
    cores = settings.core_count(run.core_count)
    batch_size = settings.batch_size(run.batch_size)
    warmup, iterations = settings.warmup(warmup), settings.iterations(iterations)
    rounds = max(1, int(rounds))
    round_to = default_round_to() if round_to is None else int(round_to)
    dims = dict(dims or {})
    src = Path(model_path)
    specs = ainputs.input_specs(str(src), batch_size=batch_size, dims=dims)
    feeds = ainputs.load_sample_data(str(data), specs, batch_size) if data else \
        [ainputs.synthetic_inputs(specs, seed=0, values=dims)]
    tmp = make_temp_dir("chcal", fast_tmp())  # named after this pid: removed at start-up if we are killed
    try:
        # the thinned models' graphs and shapes do not depend on the runtime measured: the default engine's analysis
        paths, tables = _thinned_models(src, ratios, tmp, round_to=round_to, batch_size=batch_size, dims=dims,
                                        engine=get_engine(), prog=prog, cancel=cancel)
        maybe_check(cancel)
        # unprofiled latency, interleaved
        per_round = max(MIN_RUNS_PER_ROUND, iterations // rounds)  # equal rounds: per-round percentiles below
        times = interleaved_times(engine, paths, feeds, cores, rounds=rounds, warmup=warmup,
                                  iterations=rounds * per_round, cancel=cancel,
                                  on_step=lambda done, total: prog("timing (interleaved)", 0.1 + 0.45 * done / total))
        # latency of each model: the dense median, and each thinned one from its per-round ratios to the dense
        # per round the 25th percentile: other processes only ever add time, so the fast part of a round is the
        # least disturbed (the median of a round a neighbour's job shares is that job's as much as ours)
        per_round_med = [[float(np.percentile(t[i * per_round:(i + 1) * per_round], 25)) for i in range(rounds)]
                         for t in times]
        dense_ms = statistics.median(times[0])
        medians = [dense_ms] + [dense_ms / statistics.median([d / x for d, x in zip(per_round_med[0], per_round_med[m])])
                                for m in range(1, len(paths))]
        passes = _profiled_passes(engine, paths, tables, feeds, cores, iterations, tmp, prog, cancel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    prog("fitting", 0.97)
    fit = _Fit(tables, passes, medians)
    points = []
    for m, r in enumerate([0.0] + ratios):
        points.append({"ratio": r, "median_ms": medians[m], "speedup": medians[0] / medians[m] if medians[m] else None,
                       "macs": int(tables[m].totals.get("macs") or 0), "kernel_total_ms": passes[m].total_ms,
                       "modeled_ms": float(fit.modeled[m]), "round_medians_ms": per_round_med[m],
                       "node_ms": {k: float(v) for k, v in passes[m].node_ms.items()},
                       "special_ms": {k: float(v) for k, v in passes[m].special_ms.items()}})
    prog("done", 1.0)
    load = [load_start, _load()]
    busy = busy_warning(load, cores, os.cpu_count() or 1)
    warnings = [busy] if busy else []
    return ChannelCalibration(load_average=load, warnings=warnings,
        ratios=ratios, round_to=round_to, batch_size=batch_size, core_count=cores, points=points, nodes=fit.nodes,
        special=fit.special, latency={"a": fit.a, "g_ms": fit.g}, fit_rel_error=fit.err,
        seconds=time.perf_counter() - t_start,
        created=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), engine=engine.label,
        rounds=rounds, iterations=iterations, warmup=warmup, dims=dims)


def _thinned_models(src: Path, ratios: list, tmp: Path, *, round_to: int, batch_size: int, dims: dict, engine, prog,
                    cancel) -> tuple:
    """``(paths, node tables)``: the dense model (runnable) and a uniformly thinned copy at each ratio in ``tmp``,
    each with its node table. Raises ``SparsifyError`` when a ratio thins no group."""
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.engine.thinning import thin_model
    from sparsify_tui.engine.weights import runnable_path

    dense = analyze_model(str(src), batch_size=batch_size, dims=dims, include_system=False, count_zeros=False,
                          engine=engine)
    paths = [runnable_path(src, int(dense.ir_version), tmp)]
    tables = [dense]
    for k, r in enumerate(ratios):
        prog(f"thinning at {r:g}", 0.05 * k / len(ratios))
        out = tmp / f"thinned_{k}.onnx"
        res = thin_model(src, out, ratio=r, round_to=round_to, batch_size=batch_size, dims=dims, check=False,
                         engine=engine, cancel=cancel)
        if not any(g.kept < g.channels for g in res.groups):
            raise SparsifyError(f"{src.name} has no prunable channel group that ratio {r:g} thins: nothing to "
                                "calibrate (see `sparsify-tui analyze MODEL --channel-groups`)")
        paths.append(str(out))
        tables.append(analyze_model(str(out), batch_size=batch_size, dims=dims, include_system=False,
                                    count_zeros=False, engine=engine))
    return paths, tables


def _profiled_passes(engine, paths: list, tables: list, feeds, cores: int, iterations: int, tmp: Path, prog,
                     cancel) -> list:
    """One profiled pass per model, attributed to its main-graph nodes like a perf profile."""
    from sparsify_tui.profiling import attribution as attr
    from sparsify_tui.profiling.perf import profiled_runs_for

    passes = []
    for m, path in enumerate(paths):
        maybe_check(cancel)
        prog("profiled passes", 0.55 + 0.4 * m / len(paths))
        pp = engine.profile(path, feeds, cores, runs=profiled_runs_for(iterations), workdir=tmp, tag=f"cal{m}",
                            cancel=cancel)
        main = [n for n in tables[m].nodes if not n.graph]
        att = attr.attribute(main, pp.nodes, attr.attributed_ms(pp.kernels), optimized_initializers=pp.initializers,
                             kernel_op_types=pp.kernels.op_type)
        passes.append(attr.over_runs(att, pp.kernels.per_run))
    return passes


class _Fit:
    """The channel time model fitted on the measured models: per node ``t0, c0, c1`` and its monotone points
    (``nodes``), the same for onnxruntime's own rows against the MACs fraction (``special``), and the latency line
    ``a``, ``g`` on the node sums (``modeled``: the model's ms at each measured point; ``err``: mean relative
    error against the medians)."""

    def __init__(self, tables: list, passes: list, medians: list):
        from sparsify_tui.analysis.layers import PRUNABLE_OPS

        self.by_id = [{n.id: n for n in t.nodes if not n.graph} for t in tables]
        # node times in latency ms: each pass scaled to its model's unprofiled latency
        scales = [medians[m] / p.total_ms if p.total_ms > 0 else 1.0 for m, p in enumerate(passes)]
        node_lat = [{k: float(v) * scales[m] for k, v in p.node_ms.items()} for m, p in enumerate(passes)]
        special_lat = [{k: float(v) * scales[m] for k, v in p.special_ms.items()} for m, p in enumerate(passes)]
        matrix0 = sum(n.macs for n in self.by_id[0].values() if n.op_type in PRUNABLE_OPS) or 1
        self.macs_frac = [sum(n.macs for n in b.values() if n.op_type in PRUNABLE_OPS) / matrix0 for b in self.by_id]
        self.nodes = self._fit_nodes(node_lat)
        self.special = []
        for row in sorted(set().union(*(p.special_ms for p in passes))):
            ts = [sl.get(row, 0.0) for sl in special_lat]
            t0, c0, c1 = fit_node(self.macs_frac, ts)
            self.special.append({"id": row, "t0": t0, "c0": c0, "c1": c1, "pts": monotone_points(self.macs_frac, ts)})
        # the node sums at the measured points; latency = a·sum + g fitted on them (the node times are latency ms
        # already, so a ≈ 1 and g ≈ 0; the fit takes back what the monotone pooling moved)
        modeled = np.array([self._node_sum(m) for m in range(len(tables))])
        self.a, self.g = fit_latency(modeled, medians)
        self.modeled = self.a * modeled + self.g
        self.err = float(np.mean(np.abs(self.modeled - np.asarray(medians)) / np.asarray(medians)))

    def _fraction(self, m: int, nid: str) -> Optional[float]:
        """The work fraction of node ``nid`` in model ``m`` (None: not comparable; the node gone: None)."""
        from sparsify_tui.analysis.layers import PRUNABLE_OPS

        n0, n1 = self.by_id[0][nid], self.by_id[m].get(nid)
        return _node_fraction(n0, n1, n0.op_type in PRUNABLE_OPS and n0.prunable) if n1 is not None else None

    def _fit_nodes(self, node_lat: list) -> dict:
        nodes: dict = {}
        for nid in self.by_id[0]:
            fs, ts = [1.0], [node_lat[0].get(nid, 0.0)]
            for m in range(1, len(self.by_id)):
                fr = self._fraction(m, nid)
                if fr is None:
                    continue
                fs.append(fr)
                ts.append(node_lat[m].get(nid, 0.0))
            t0, c0, c1 = fit_node(fs, ts)
            nodes[nid] = {"t0": t0, "c0": c0, "c1": c1, "pts": monotone_points(fs, ts)}
        return nodes

    def _node_sum(self, m: int) -> float:
        """The fitted node and special times summed at model ``m``'s fractions."""
        tot = 0.0
        for nid in self.by_id[0]:
            fr = 1.0 if m == 0 else (self._fraction(m, nid) if self.by_id[m].get(nid) is not None else 1.0)
            tot += node_time(self.nodes[nid], fr if fr is not None else 1.0)
        tot += sum(node_time(s, self.macs_frac[m]) for s in self.special)
        return tot


def busy_warning(load: Sequence[float], cores: int, cpus: int) -> Optional[str]:
    """A warning when other processes competed for the CPUs while measuring, else None. ``load``: the 1-minute load
    average before and after the measurement (the one after includes our ``cores`` threads); ``cpus``: the
    machine's CPUs. Busy means the other processes' load and our threads together exceed the CPUs by more than
    half a CPU."""
    others = max(float(load[0]), float(load[-1]) - cores)
    if others + cores <= cpus + 0.5:
        return None
    return (f"the machine was busy while measuring (other processes' 1-minute load about {others:.1f} next to our "
            f"{cores} threads on {cpus} CPUs): other processes stretch long runs more than short ones, so the thinned "
            "models' speedups may be inflated; rerun `sparsify-tui profile channel-calibration` when it is quieter")


def _load() -> float:
    """The 1-minute load average (0 where the OS has none)."""
    try:
        return round(float(os.getloadavg()[0]), 2)
    except (AttributeError, OSError):
        return 0.0


def profile_node_ms(model_path, run: RunSpec = REFERENCE, *, dims: Optional[dict] = None, data=None, runs: int = 10,
                    cancel=None) -> dict:
    """One profiled pass of the model at ``model_path`` on ``run``'s runtime, batch size and cores, attributed to its
    nodes as a perf profile is: ``{"node_ms":
    {node id: ms per batch}, "special_ms": {row: ms}, "kernel_total_ms"}`` (profiled units: share, not latency).
    Used to put measured per-group times next to a channel optimization's estimates once it is benchmarked."""
    from sparsify_tui import settings
    from sparsify_tui.analysis import inputs as ainputs
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.engine import get_engine
    from sparsify_tui.engine.weights import runnable_path
    from sparsify_tui.profiling import attribution as attr

    engine, batch_size = run.runtime(), run.batch_size
    cores = settings.core_count(run.core_count)
    dims = dict(dims or {})
    src = Path(model_path)
    specs = ainputs.input_specs(str(src), batch_size=batch_size, dims=dims)
    feeds = ainputs.load_sample_data(str(data), specs, batch_size) if data else \
        [ainputs.synthetic_inputs(specs, seed=0, values=dims)]
    table = analyze_model(str(src), batch_size=batch_size, dims=dims, include_system=False, count_zeros=False,
                          engine=get_engine())
    tmp = make_temp_dir("nodes", fast_tmp())
    try:
        path = runnable_path(src, int(table.ir_version), tmp)
        pp = engine.profile(path, feeds, cores, runs=max(1, int(runs)), workdir=tmp, tag="nodes", cancel=cancel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    a = attr.over_runs(attr.attribute([n for n in table.nodes if not n.graph], pp.nodes, attr.attributed_ms(pp.kernels),
                                      optimized_initializers=pp.initializers, kernel_op_types=pp.kernels.op_type),
                       pp.kernels.per_run)
    return {"node_ms": {k: float(v) for k, v in a.node_ms.items()},
            "special_ms": {k: float(v) for k, v in a.special_ms.items()}, "kernel_total_ms": float(a.total_ms)}
