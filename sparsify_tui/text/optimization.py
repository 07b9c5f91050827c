"""An optimization's summary (:class:`~sparsify_tui.optimization.record.Optimization`), in its structure's words:
``optimize`` / ``optimization show`` print it above the per-layer or per-group table, the Optimization section shows
it in its header and on the Pruning tab's four cards.

* :func:`estimate_facts`: the facts of each card (:data:`CARDS`: summary, performance, FLOPs, params), per structure
  (unstructured weights, channel groups); the summary ends with :func:`applied_facts`;
* :func:`applied_facts`: the applied model's held-out accuracy or agreement beside its measured speedup (any
  structure), a channel model's thinning report, and the too-far flag;
* :func:`header_facts`: the section's header line (the first summary fact and the speed);
* :func:`profiles_fact`, :func:`epochs_fact`: the profiles used and the pruning schedule.

Where to act differs between the front ends (``sparsify-tui apply`` on the CLI, a key in Benchmarks in the TUI):
each passes its :class:`Hints`; every other word is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional

from sparsify_tui.engine.run import display_name
from sparsify_tui.formatting import format_bytes, format_count, format_fixed, format_ratio, plural
from sparsify_tui.optimization.fidelity import applied_fidelity, predicted_change
from sparsify_tui.text import Fact

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization

CARDS = {"summary": "Summary", "performance": "Performance (est.)", "flops": "FLOPs (est.)",
         "params": "Params and size (est.)"}
"""The cards of an optimization's summary, in order: key -> title (the TUI's card titles, the CLI's headings)."""

CHANNEL_TARGET = {
    "uniform": "uniform ratio {sparsity:.2f} per group",
    "sparsity": "{sparsity:.2f} of all channels, allocated",
    "speedup": "{target_speedup:.2f}× faster (est.)",
    "macs": "{macs_reduction:.2f}× fewer MACs",
}
"""What each channel target asks for, formatted with the settings."""


NOT_TIMED = "none: the FLOPS profile gives relative times only"


@dataclass(frozen=True)
class Hints:
    """Where a front end's user acts: ``apply`` (writes the optimized model), ``benchmark`` (measures it)."""

    apply: str
    benchmark: str


def inline(facts: List[Fact]) -> str:
    """Facts on one line: ``"label value · label value"`` (the TUI's header)."""
    return " · ".join(f"{f.label} {f.value}" for f in facts)


def _x(v: Optional[float]) -> str:
    return format_fixed(v) + "×"


def unreliable_facts(opt: "Optimization") -> List[Fact]:
    """``unreliable: estimated from a noisy profile: rerun it`` when the measurements the estimates come from were
    noisy (:meth:`~sparsify_tui.optimization.record.Optimization.noise_sources`, stored as ``estimates.noise`` when
    evaluated; :func:`~sparsify_tui.optimization.estimates.noise_flag`; the warnings say which and why), else none."""
    from sparsify_tui.optimization.estimates import noise_flag

    flag = noise_flag(opt.noise_sources())
    return [Fact("unreliable", flag)] if flag else []


def int8_ratio(opt: "Optimization") -> str:
    """The perf profile's INT8 ratio an estimate used (FP32 / INT8, timed interleaved: the one its summary shows)
    with its spread over the timing rounds: ``"0.84× (rounds 0.80–0.88×) FP32"``; "-" when not measured."""
    m = opt.model
    if not m.baseline_ms or not m.int8_ms:
        return "-"
    return f"{format_ratio(m.baseline_ms / m.int8_ms, m.int8_round_ratios)} FP32"


def target_text(settings) -> str:
    """What a channel optimization's settings ask for, e.g. "1.50× faster (est.)"."""
    st = settings.to_dict()
    fmt = CHANNEL_TARGET.get(st.get("target") or "uniform", "{target}")
    try:
        return fmt.format(**{"sparsity": 0.0, "target_speedup": 1.0, "macs_reduction": 1.0, **st})
    except (KeyError, ValueError):
        return str(st.get("target"))


def achieved_text(settings, achieved: Optional[float]) -> str:
    """What a channel optimization reached, in its target's unit: "2.37×" for a speedup or MACs target (est.), the
    fraction of channels removed (two decimals) for a ratio; "achieved 2.368" had no unit."""
    if achieved is None:
        return "n/a"
    target = settings.to_dict().get("target") or "uniform"
    if target == "speedup":
        return f"{achieved:.2f}× (est.)"
    if target == "macs":
        return f"{achieved:.2f}× fewer MACs"
    return f"{achieved:.2f} of the channels"


def profiles_fact(opt: "Optimization") -> Fact:
    """The perf and loss profiles the optimization was made from."""
    return Fact("profiles", f"perf {opt.perf_profile_name} · loss {opt.loss_profile_name}")


def epochs_why(opt: "Optimization") -> str:
    """Why the recipe has the epochs it has: from the training epochs E of the optimization's copy of the project's
    settings, 1 stabilization epoch, E/3 pruning, E/4 fine-tuning (Sparsify's defaults; 100 training epochs give a
    59.3-epoch recipe), or edited since."""
    from sparsify_tui.optimization.schedule import default_epochs

    ep, e = opt.epochs, (opt.training or {}).get("epochs")
    try:
        plan = default_epochs(float(e)) if e is not None else None
    except (TypeError, ValueError):
        plan = None
    if plan is not None and all(abs(float(plan[k]) - float(getattr(ep, k))) < 1e-6 for k in
                                ("pruning_start_epoch", "pruning_end_epoch", "total_epochs")):
        return (f"{ep.total_epochs:g} epochs from {e} training epochs: 1 to stabilize, {e}/3 to prune, {e}/4 to "
                "fine-tune (Sparsify's defaults)")
    return f"{ep.total_epochs:g} epochs, set by hand (the defaults from {e} training epochs differ)"


def epochs_fact(opt: "Optimization") -> Fact:
    """The pruning schedule: stabilize, prune, fine-tune (epochs), the mask update frequency, and where the numbers
    come from (:func:`epochs_why`)."""
    ep = opt.epochs
    return Fact("epochs", f"stabilize to {ep.pruning_start_epoch:g}, prune to {ep.pruning_end_epoch:g}, fine-tune to "
                          f"{ep.total_epochs:g}, update every {ep.update_frequency:g} ({epochs_why(opt)})")


def runtime_text(opt: "Optimization") -> str:
    """The runtime an optimization targets, as its facts name it: "onnxruntime fp32", "OpenVINO bf16"."""
    engine, precision = opt.target_runtime
    return f"{display_name(engine)} {precision}"


def runtime_fact(opt: "Optimization") -> Fact:
    """The runtime the optimization targets: where its estimates were measured and apply quantizes for."""
    return Fact("runtime", f"{runtime_text(opt)} (estimates measured there; apply quantizes for it)")


def measured_fact(opt: "Optimization", hints: Hints) -> Fact:
    """What a benchmark measured of the applied model on its runtime: the speedup against the reference (the
    original model on onnxruntime fp32; benchmark, batch, cores) and the estimate then, whether the optimization
    changed since, whether the benchmark was noisy there (its runs disagree: rerun it), and the benchmark's other
    runs of it; or where to measure it."""
    m = opt.measured
    if m is None or m.speedup is None:
        return Fact("speed", f"not measured yet ({hints.benchmark})")
    stale = " (stale: the optimization changed since)" if m.stale else ""
    if m.noise:
        stale += f" (noisy benchmark, {'; '.join(m.noise)}: rerun it)"
    on = "" if opt.target_runtime == ("onnxruntime", "fp32") else f" on {runtime_text(opt)}"
    others = [f"{_x(r.speedup)} at batch {r.batch_size}, {plural(r.core_count, 'core')}" for r in m.runs or []
              if (r.batch_size, r.core_count) != (m.batch_size, m.core_count) and r.speedup is not None]
    return Fact("measured", f"{_x(m.speedup)}{on} vs the original on onnxruntime fp32 ({m.benchmark_name!r}, batch "
                            f"{m.batch_size}, {plural(m.core_count, 'core')}), estimated {_x(m.estimated_speedup)}"
                            f"{stale}" + (f"; also {', '.join(others)}" if others else ""))


def _applied_model(opt: "Optimization") -> List[Fact]:
    """A channel model's thinning report (deterministic fields only): groups thinned and channels kept, the MACs
    counted on both files, the exactness check, the largest output difference, the file sizes."""
    a = opt.applied
    if a is None or a.structure != "channel":
        return []
    groups = a.groups or []
    thinned = sum(1 for g in groups if g.get("kept", 0) < g.get("channels", 0))
    kept, chans = sum(g.get("kept", 0) for g in groups), sum(g.get("channels", 0) for g in groups)
    return [Fact("applied model", f"{'INT8 after thinning' if a.quantized else 'FP32'}, {plural(thinned, 'group')} "
                                  f"thinned, {kept}/{chans} channels kept; MACs {format_count(a.macs_before)} "
                                  f"→ {format_count(a.macs_after)} ({_x(a.macs_reduction)} fewer); exactness "
                                  f"{format_fixed(a.exactness_max_rel_diff, '.1e')}; max |Δ| "
                                  f"{format_fixed(a.diff.get('max_abs'), '.3g')}; "
                                  f"file {format_bytes(a.file_size_bytes or 0)} (baseline file "
                                  f"{format_bytes(a.baseline_size_bytes or 0)})")]


def applied_facts(opt: "Optimization", hints: Hints) -> List[Fact]:
    """The applied model's held-out accuracy or agreement next to its measured speedup
    (:mod:`sparsify_tui.optimization.fidelity`), a channel model's thinning report, and the too-far flag (a
    ``warning`` fact), any structure."""
    fid = applied_fidelity(opt.applied.diff if opt.applied is not None else None)
    applied = fid.text if fid is not None else f"not yet ({hints.apply})"
    facts = [Fact("applied", f"{applied}; {inline([measured_fact(opt, hints)])}")] + _applied_model(opt)
    if fid is not None and fid.too_far:
        facts.append(Fact("warning", fid.flag))
    return facts


def _unstructured(opt: "Optimization", hints: Hints) -> Dict[str, List[Fact]]:
    from sparsify_tui.optimization.estimates import recovery_text  # (imports numpy: not at start-up)
    from sparsify_tui.optimization.record import Estimates

    est, st, q = opt.estimates or Estimates(), opt.settings, opt.quantization
    excluded = set(q.excluded or [])
    fp32 = sum(1 for l in opt.layers if l.node_id in excluded)  # an INT8 search also keeps nodes between layers
    fp32_text = f"{plural(fp32, 'layer')} kept FP32" + (f" ({len(excluded)} nodes)" if len(excluded) != fp32 else "")
    timed = est.baseline_ms is not None
    rt = runtime_text(opt)
    return {
        "summary": [
            Fact("sparsity", f"{est.avg_sparsity or 0:.3f} (params-weighted; target {st.sparsity:.2f})"),
            Fact("allocation", f"balance {st.balance:.2f}; {sum(1 for l in opt.layers if l.sparsity)} of "
                               f"{len(opt.layers)} layers pruned, {plural(len(opt.overrides or {}), 'override')}"),
            Fact("est. recovery", recovery_text(est.est_recovery, opt.loss_profile)),
            Fact("quantization", f"INT8, {fp32_text}" if q.enabled else "off"),
            runtime_fact(opt),
            *applied_facts(opt, hints)],
        "performance": [
            Fact("estimated", f"{_x(est.sparse_speedup)} sparse-kernel CPU, {_x(est.ort_speedup)} {rt}"),
            Fact("est. ms/batch", f"{format_fixed(est.sparse_ms, '.3f')} sparse-kernel CPU runtime (DeepSparse-class), "
                                  f"{format_fixed(est.ort_ms, '.3f')} {rt}; baseline "
                                  f"{format_fixed(est.baseline_ms, '.3f')} (measured)" if timed else
                                  NOT_TIMED),
            Fact(f"on {rt}", "no gain from sparsity; INT8 " + (
                "not measured" if not est.int8_measured else f"measured ({est.int8_source})" if est.int8_source
                else f"measured {int8_ratio(opt)}")),
            *unreliable_facts(opt)],
        "flops": [Fact("FLOPs", f"{format_count(est.flops, none='n/a')} → {format_count(est.flops_pruned, none='n/a')}"
                                f", {_x(est.flops_reduction)} fewer (est.)")],
        "params": [
            Fact("params", f"{format_count(est.params, none='n/a')}, {format_count(est.params_nonzero, none='n/a')} "
                           f"nonzero after pruning: {_x(est.params_compression)} compression (est.)"),
            Fact("weights size", f"{format_fixed(est.size_mb_fp32, '.2f')} MB FP32 → ~{format_fixed(est.est_size_mb, '.2f')} "
                                 f"MB nonzero{' INT8' if q.enabled else ''} (params × bytes each; the file holds "
                                 "the graph too)")],
    }


def _channel(opt: "Optimization", hints: Hints) -> Dict[str, List[Fact]]:
    from sparsify_tui.optimization.structures.channel import ChannelEstimates

    est, st, q = opt.estimates or ChannelEstimates(), opt.settings, opt.quantization
    if not q.enabled:
        int8 = ""
    elif est.int8_measured:
        int8 = f", {_x(est.ort_speedup)} with INT8 (measured {int8_ratio(opt)} on the dense model)"
    else:  # no measured INT8 time (the FLOPS profile, or a profile without INT8): the gain is not known
        int8 = ", with INT8: not estimated (no measured INT8 time; benchmark the applied model)"
    timed = est.baseline_ms is not None  # ms only from a measured perf profile (FLOPS: relative units)
    return {
        "summary": [
            Fact("target", f"{target_text(st)}, achieved {achieved_text(st, est.achieved)}"),
            Fact("allocation", f"balance {st.balance:.2f}, cap {st.max_sparsity:.2f} per group, round to "
                               f"{st.round_to}"),
            Fact("channels kept", f"{est.kept_channels} of {est.channels} prunable, "
                                  f"{plural(est.groups_thinned, 'group')} thinned"),
            Fact("predicted output change", predicted_change(opt)),
            Fact("quantization", ("dynamic INT8 after thinning" if q.calibration_method == "dynamic" else
                                  "INT8 after thinning") if q.enabled else "off"),
            runtime_fact(opt),
            *applied_facts(opt, hints)],
        "performance": [
            Fact("estimated", f"{_x(est.ort_speedup_fp32)} FP32{int8} on {runtime_text(opt)}"),
            Fact("est. ms/batch", f"{format_fixed(est.ort_ms_fp32, '.3f')} thinned FP32 of "
                                  f"{format_fixed(est.baseline_ms, '.3f')} baseline (measured)" if timed else
                                  NOT_TIMED),
            Fact("time model", est.time_model_note or "-"),
            *unreliable_facts(opt)],
        "flops": [Fact("MACs", f"{format_count(est.macs)} → {format_count(est.macs_pruned)}, "
                               f"{_x(est.macs_reduction)} fewer (est.; apply counts the file)")],
        "params": [
            Fact("params", f"{format_count(est.params)} → {format_count(est.params_nonzero)} "
                           "(dense)"),
            Fact("weights size", f"{format_fixed(est.size_mb_fp32, '.2f')} MB FP32 → ~{format_fixed(est.est_size_mb, '.2f')} "
                                 f"MB{' INT8' if q.enabled else ''} (params × bytes each; the file holds the graph "
                                 "too)")],
    }


STRUCTURE_FACTS: Dict[str, Callable[["Optimization", Hints], Dict[str, List[Fact]]]] = {"channel": _channel}
"""Pruning structure -> its cards' facts (one line per structure whose summary differs; the rest: unstructured)."""


def estimate_facts(opt: "Optimization", hints: Hints) -> Dict[str, List[Fact]]:
    """The facts of each card of :data:`CARDS` (same keys, same order), in the words of the record's structure."""
    return STRUCTURE_FACTS.get(opt.settings.structure, _unstructured)(opt, hints)


def header_facts(opt: "Optimization", hints: Hints) -> List[Fact]:
    """The header's facts: the first summary fact (sparsity, or the channel target) and the speed: measured (with
    the estimate then), else estimated, flagged when it comes from noisy measurements (:func:`unreliable_facts`)."""
    cards = estimate_facts(opt, hints)
    measured = measured_fact(opt, hints)
    if measured.label == "measured":
        return [cards["summary"][0], measured]
    return [cards["summary"][0], cards["performance"][0], *unreliable_facts(opt)]


__all__ = ["CARDS", "CHANNEL_TARGET", "Hints", "applied_facts", "epochs_fact", "epochs_why", "estimate_facts",
           "header_facts", "inline", "int8_ratio", "measured_fact", "profiles_fact", "runtime_fact", "runtime_text",
           "target_text", "unreliable_facts"]
