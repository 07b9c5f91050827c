"""The one timing loop and the one set of latency statistics (perf profiles and benchmarks both use them).

**Loop** (:func:`time_runs`): ``warmup`` untimed runs, then ``iterations`` timed runs of one session,
cycling the pre-built feeds. Only the bound run call sits between the two clock reads
(``t0 = clock(); run(feed); dt = clock() - t0``): the runner and the feeds are built before the loop,
the result list is pre-allocated, the clock is the session's (``time.perf_counter_ns`` by default),
and the cancel check and progress callback sit outside the timed interval.
``benchmarks/benchmark_overhead.py`` measures this loop against a bare ``sess.run`` loop.

**Statistics** (:class:`LatencyStats`), all in ms per batch: median, mean, min, max, population standard
deviation, and the percentiles p90/p99 by **linear interpolation between order statistics** (numpy's
default ``percentile`` method, Hyndman & Fan type 7: the q-th percentile of n sorted values
x[0..n-1] is ``x[f] + (h - f)·(x[f+1] - x[f])`` with ``h = (n - 1)·q/100``, ``f = floor(h)``; it equals
the median at q = 50). Chosen over nearest-rank (``x[ceil(n·q/100) - 1]``, what perf profiles reported
before) because benchmarks always reported it and it moves continuously with the data instead of
jumping from one run to the next.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from sparsify_tui.errors import JobCanceled
from sparsify_tui.progress import CancelToken


def percentile(times_ms: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation (module docstring). Raises
    ``ValueError`` for an empty sequence."""
    a = np.asarray(times_ms, dtype=np.float64)
    if a.size == 0:
        raise ValueError("no timed iterations")
    return float(np.percentile(a, q))


@dataclass(frozen=True)
class LatencyStats:
    """Statistics of timed runs, ms per batch (module docstring for the percentile rule)."""

    median: float
    mean: float
    p90: float
    p99: float
    min: float
    max: float
    std: float

    @classmethod
    def from_times(cls, times_ms: Sequence[float]) -> "LatencyStats":
        """Statistics of ``times_ms`` (ms per run, at least one; ``ValueError`` otherwise)."""
        a = np.asarray(times_ms, dtype=np.float64)
        if a.size == 0:
            raise ValueError("no timed iterations")
        return cls(median=float(np.median(a)), mean=float(a.mean()), p90=percentile(a, 90), p99=percentile(a, 99),
                   min=float(a.min()), max=float(a.max()), std=float(a.std()))

    def summary(self) -> dict:
        """``{"median", "p90", "mean", "min"}``: the ``latency_ms`` of a perf profile."""
        return {"median": self.median, "p90": self.p90, "mean": self.mean, "min": self.min}


def latency_summary(times_ms: Sequence[float]) -> dict:
    """:meth:`LatencyStats.summary` of ``times_ms``; every value None when there are no times."""
    if len(times_ms) == 0:
        return {"median": None, "p90": None, "mean": None, "min": None}
    return LatencyStats.from_times(times_ms).summary()


@contextlib.contextmanager
def canceled_as_job(cancel: Optional[CancelToken]):
    """Inside the block, any error raised after ``cancel`` was cancelled (a run the token terminated)
    becomes ``JobCanceled``; other errors pass through."""
    try:
        yield
    except JobCanceled:
        raise
    except Exception as err:
        if cancel is not None and cancel.is_cancelled():
            raise JobCanceled("job canceled by the user") from err
        raise


def time_runs(session, feeds: Sequence[Mapping[str, Any]], *, warmup: int, iterations: int,
              cancel: Optional[CancelToken] = None, outputs: Optional[Sequence[str]] = None,
              on_run: Optional[Callable[[int, int], None]] = None) -> list[float]:
    """Run ``session`` (an engine :class:`~sparsify_tui.engine.base.Session`) ``warmup`` times untimed, then
    ``iterations`` times timed, cycling ``feeds`` (at least one); returns ms per timed run, in run order.

    ``outputs``: output names to fetch (default all). ``on_run(done, total)`` is called after every run
    (warm-up included), outside the timed interval. A cancel is checked before every run and
    terminates a running one; both raise ``JobCanceled``.
    """
    warmup, iterations = max(0, int(warmup)), max(0, int(iterations))
    if not feeds:
        raise ValueError("time_runs needs at least one feed")
    run = session.runner(outputs, cancel)
    clock = session.clock
    is_cancelled = cancel.is_cancelled if cancel is not None else (lambda: False)
    n = len(feeds)
    total = warmup + iterations
    times_ns = [0] * iterations
    with canceled_as_job(cancel):
        for i in range(warmup):
            if is_cancelled():
                break
            run(feeds[i % n])
            if on_run is not None:
                on_run(i + 1, total)
        for i in range(iterations):
            if is_cancelled():
                break
            feed = feeds[i % n]
            t0 = clock()
            run(feed)
            times_ns[i] = clock() - t0
            if on_run is not None:
                on_run(warmup + i + 1, total)
    if is_cancelled():
        raise JobCanceled("job canceled by the user")
    return [t / 1e6 for t in times_ns]


def round_shares(iterations: int, rounds: int) -> list[int]:
    """Timed runs per round: ``iterations`` split over ``rounds`` (at most ``iterations``) as evenly as possible,
    the first rounds taking the remainder (the order :func:`interleaved_times` times them in)."""
    rounds = max(1, min(int(rounds), int(iterations)))
    return [int(iterations) // rounds + (1 if r < int(iterations) % rounds else 0) for r in range(rounds)]


def per_round(times_ms: Sequence[float], rounds: int, iterations: int) -> list[list[float]]:
    """One model's times from :func:`interleaved_times` split back into its rounds (same ``rounds`` and
    ``iterations``, :func:`round_shares`), so two models can be compared round by round (paired: the same machine
    state)."""
    out, i = [], 0
    for n in round_shares(iterations, rounds):
        out.append(list(times_ms[i:i + n]))
        i += n
    return out


def round_medians(times_ms: Sequence[float], rounds: int, iterations: int) -> list[float]:
    """Median ms of each timing round of one model (:func:`per_round`, same ``rounds`` and ``iterations``), rounds
    without a time left out."""
    return [float(np.median(r)) for r in per_round(times_ms, rounds, iterations) if r]


#: a model must beat another's median by this fraction in every timing round to count as faster
BEAT_MARGIN = 0.03


def beats_every_round(rounds_ms: Sequence[float], ref_rounds_ms: Sequence[float],
                      margin: float = BEAT_MARGIN) -> bool:
    """A model whose median ms per batch in each timing round is ``rounds_ms`` runs faster than a reference timed in
    the same rounds (``ref_rounds_ms``, :func:`round_medians`): lower by more than ``margin`` (a fraction of the
    reference's) in **every** round. Paired within a round, so machine drift between rounds cancels and one slow
    run moves no median (a p90-spread rule does not: on a shared 2-core machine one slow run in the top 10 % made
    the spread larger than a 2.6× speedup of a small model). False when either has no rounds. The one rule by which
    the INT8 search and the budget search call a model faster than FP32 or than another trial."""
    pairs = list(zip(rounds_ms, ref_rounds_ms))
    return bool(pairs) and all(t < f * (1.0 - margin) for t, f in pairs)


FeedsOf = Callable[[int], Sequence[Mapping[str, Any]]]


def interleaved_times(engine, models: Sequence[Any], feeds: "Sequence[Mapping[str, Any]] | FeedsOf",
                      core_count: Optional[int], *, rounds: int = 3, warmup: int = 2, iterations: int = 12,
                      cancel: Optional[CancelToken] = None,
                      on_step: Optional[Callable[[int, int], None]] = None,
                      before_session: Optional[Callable[[int, int, int, int], None]] = None) -> list[list[float]]:
    """The interleaved timing rounds (the one implementation): ``rounds`` rounds, each opening every model's
    session in turn (the order reversed every other round), ``warmup`` untimed runs, then its share of
    ``iterations`` timed runs (:func:`round_shares`) with :func:`time_runs`, then closing it (one live session at
    a time). Machine drift then hits every model alike, which is what makes the ratios between them trustworthy
    on a shared machine (the benchmark's rule, :mod:`sparsify_tui.benchmark.runner`).

    ``engine``: the :class:`~sparsify_tui.engine.base.Engine` every model runs on, or a sequence of engines, one
    per model (models on several runtimes interleaved: still one live session at a time).
    ``models``: paths (or anything ``engine.open_session`` takes); ``feeds``: the feed dicts every model runs
    on, or a function model index -> that model's feeds. Returns, per model, its ms per timed run (``iterations``
    of them, round after round). ``before_session(done, total, round, model index)`` before each session,
    ``on_step(done, total)`` after it. Raises ``ModelError`` when a model cannot be loaded, ``JobCanceled`` on
    cancel."""
    import gc

    share = round_shares(iterations, rounds)
    feeds_of = feeds if callable(feeds) else (lambda _i: feeds)
    engines = list(engine) if isinstance(engine, (list, tuple)) else [engine] * len(models)
    if len(engines) != len(models):
        raise ValueError(f"{len(engines)} engines for {len(models)} models")
    out: list[list[float]] = [[] for _ in models]
    order = list(range(len(models)))
    total, done = len(share) * len(order), 0
    for r, runs in enumerate(share):
        for i in (order if r % 2 == 0 else order[::-1]):
            if cancel is not None:
                cancel.check()
            if before_session is not None:
                before_session(done, total, r, i)
            model_feeds = feeds_of(i)
            session = engines[i].open_session(models[i], core_count)
            try:
                out[i] += time_runs(session, model_feeds, warmup=warmup, iterations=runs, cancel=cancel)
            finally:
                session.close()
                del session
                gc.collect()
            done += 1
            if on_step is not None:
                on_step(done, total)
    return out
