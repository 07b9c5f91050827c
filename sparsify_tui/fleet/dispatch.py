"""Run one core function on every target node of a Ray cluster: one task per target, results back to the driver.

How a task runs (:func:`run_on_targets`):

* **Pinned, holding the node.** Each task is pinned to its node (``NodeAffinitySchedulingStrategy(node_id,
  soft=False)``) and asks for **all** of that node's CPUs in Ray (``num_cpus`` = the node's ``CPU`` resource).
  A Ray resource request does not limit what a task uses (Ray's docs say so); asking for all of them keeps
  every other CPU-requesting Ray task off the node while it measures, and a second fleet job waits in Ray's
  queue. This is a one-bundle placement group pinned to the node, with the failure mode a measurement needs: a
  pinned task fails when its node dies, where a placement group would be rescheduled on another node.
* **The node's measuring lock.** Processes that Ray does not schedule (someone's local ``sparsify-tui`` job on
  that server) are kept apart by the node's measuring lock, taken on the node before the measurement
  (:attr:`TargetCall.guard`; the target shows "queued behind ..." while it waits).
* **Files through the object store.** The model (and its external data, sample data) is read once on the driver,
  put in Ray's object store once (``ray.put`` of numpy byte arrays, read zero-copy on the node), fetched by every
  target node, written to a private temp folder there (``sparsify-fleet-<pid>-*`` in ``/dev/shm``, removed after
  the call; a task killed before it could remove it leaves it for the next fleet task or ``sparsify-tui`` run on
  that node to remove), and the call's :class:`ShippedFile` placeholders become those paths.
* **The same core function.** :attr:`TargetCall.fn` (``profile_performance``, ``run_benchmark``) runs on the
  node with the node-side ``progress`` and ``cancel`` a local job gives it; the task returns its typed result,
  the node's machine info (:func:`sparsify_tui.engine.system_info` there), hostname and seconds.
* **No retries.** ``max_retries=0`` and ``retry_exceptions=False``: a task whose node or worker died is never run
  again, so a half-run measurement is never merged with a second one. That target gets an ``error`` with the
  reason; the other targets go on.
* **Progress** streams from each task (a Ray generator task: it yields progress at most
  :data:`PROGRESS_INTERVAL_S` apart, then its result), so the driver knows each target's state without an extra
  actor.
* **Cancel** (``cancel`` token): every unfinished task is cancelled (``ray.cancel``: a queued task never starts; a
  running one gets ``KeyboardInterrupt``, which cancels its core function through its token, so onnxruntime's
  running inference is terminated and the temp folder removed); tasks still running
  :data:`CANCEL_GRACE_S` seconds later are force-killed.
"""

from __future__ import annotations

import dataclasses

import contextlib
import os
import queue
import shutil
import socket
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from sparsify_tui.errors import JobCanceled, SparsifyError
from sparsify_tui.fleet import FleetError, require_ray
from sparsify_tui.fleet.cluster import NodeInfo, one_line, target_labels
from sparsify_tui.progress import CancelToken, ProgressFn

PROGRESS_INTERVAL_S = 0.5
"""Least seconds between two progress messages of one task (each is a small Ray object)."""
CANCEL_GRACE_S = 3.0
"""Seconds cancelled tasks have to stop on their own before they are force-killed."""
ABANDON_S = 10.0
"""Seconds after the force-kill when the driver stops waiting for a task's answer and records it canceled."""


@dataclass(frozen=True)
class ShippedFile:
    """A placeholder in :attr:`TargetCall.kwargs`: the path, on the target node, of the file shipped under ``name``
    (a key of :attr:`TargetCall.files`; a relative path such as ``"model/model.onnx"``)."""

    name: str


@dataclass(frozen=True)
class NodeCores:
    """A placeholder in :attr:`TargetCall.kwargs`: every core a task process may use on the target node (the node's
    :func:`sparsify_tui.settings.available_cores`), for ``--cores all``."""


@dataclass
class TargetCall:
    """What to run on each target.

    ``fn``: the core function, a module-level function of sparsify-tui (Ray sends it by reference: sparsify-tui
    and Ray must be installed on every node, in the Python version of the driver). It is called as
    ``fn(**kwargs, progress=..., cancel=...)`` and its return value is the target's result.
    ``kwargs``: JSON-like arguments; :class:`ShippedFile` and :class:`NodeCores` placeholders (also inside
    lists, tuples, dicts and dataclasses such as a :class:`~sparsify_tui.engine.run.RunSpec`) are replaced on the
    node. ``files``: ``{name: local path}`` shipped to every node.
    ``guard``: optional ``guard(waiting, cancel)`` returning a context manager entered on the node before ``fn``
    (the node's measuring lock); ``waiting(step)`` reports why it waits.
    """

    fn: Callable
    kwargs: dict
    files: dict = field(default_factory=dict)
    guard: Optional[Callable] = None


@dataclass
class TargetState:
    """One target's progress as the driver knows it. ``status``: ``waiting`` (the task waits for the node's CPUs
    in Ray), ``queued`` (on the node, waiting for its measuring lock), ``running``, ``completed``, ``error``,
    ``canceled``; ``step`` and ``fraction`` (0..1) come from the core function on the node."""

    node_id: str
    label: str
    status: str = "waiting"
    step: str = "waiting for the node's CPUs in Ray"
    fraction: float = 0.0
    error: Optional[str] = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TargetOutcome:
    """The end of one target. ``status``: ``completed`` (``result`` is the core function's typed result),
    ``error`` (``error``: one line with the reason) or ``canceled``. ``machine``: the node's
    :class:`~sparsify_tui.analysis.system.SystemInfo` dict as measured there; ``hostname`` its hostname;
    ``seconds``: wall seconds of the core function on the node; ``wait_seconds``: seconds it waited for the
    node's measuring lock first."""

    target: NodeInfo
    label: str
    status: str
    result: Any = None
    error: Optional[str] = None
    machine: dict = field(default_factory=dict)
    hostname: str = ""
    seconds: float = 0.0
    wait_seconds: float = 0.0
    traceback: Optional[str] = None


# --------------------------------------------------------------------------------------------- node side
def _write_files(folder: Path, files: dict) -> dict:
    """Write the shipped byte arrays under ``folder``; ``{name: path}``. Names are relative paths without ``..``."""
    paths = {}
    for name, data in files.items():
        rel = os.path.normpath(str(name))
        if os.path.isabs(rel) or rel == ".." or rel.startswith(".." + os.sep):
            raise FleetError(f"shipped file name {name!r} is not a relative path inside the task folder")
        dest = folder / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        data.tofile(str(dest))
        paths[name] = dest
    return paths


def _resolve(value: Any, paths: dict) -> Any:
    """``value`` with :class:`ShippedFile` and :class:`NodeCores` replaced by their values on this node."""
    from sparsify_tui import settings

    if isinstance(value, ShippedFile):
        return str(paths[value.name])
    if isinstance(value, NodeCores):
        return settings.available_cores()
    if isinstance(value, dict):
        return {k: _resolve(v, paths) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_resolve(v, paths) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a RunSpec whose cores are the node's
        return dataclasses.replace(value, **{f.name: _resolve(getattr(value, f.name), paths)
                                             for f in dataclasses.fields(value) if f.init})
    return value


def _run_on_node(fn: Callable, kwargs: dict, guard: Optional[Callable], files: dict):
    """The Ray generator task run on a target node (see the module docstring). Yields ``("state", status, step,
    fraction)`` items, then one of ``("done", {...})``, ``("error", message, traceback)`` or ``("canceled",)``."""
    from sparsify_tui.engine import system_info
    from sparsify_tui.tempfiles import clean_stale_temp_dirs, fast_tmp, make_temp_dir

    yield ("state", "running", "starting on the node", 0.0)
    clean_stale_temp_dirs()  # folders of fleet tasks killed on this node before
    folder = make_temp_dir("fleet", fast_tmp())
    token = CancelToken()
    events: queue.Queue = queue.Queue()
    box: dict = {"wait_seconds": 0.0}

    def progress(step: str, fraction: float) -> None:
        events.put(("running", str(step), float(fraction)))

    def waiting(step: str) -> None:
        events.put(("queued", str(step), 0.0))

    def work() -> None:
        try:
            paths = _write_files(folder, files)
            kw = _resolve(kwargs, paths)
            t0 = time.perf_counter()
            with (guard(waiting, token) if guard is not None else contextlib.nullcontext()):
                box["wait_seconds"] = time.perf_counter() - t0
                events.put(("running", "measuring", 0.0))
                t1 = time.perf_counter()
                box["result"] = fn(**kw, progress=progress, cancel=token)
                box["seconds"] = time.perf_counter() - t1
        except JobCanceled:
            box["canceled"] = True
        except SparsifyError as err:
            box["error"] = str(err)
        except BaseException as err:  # noqa: BLE001 - a bug or a runtime failure: reported as this target's error
            box["error"] = f"{type(err).__name__}: {err}"
            box["traceback"] = traceback.format_exc()
        finally:
            events.put(("end",))

    thread = threading.Thread(target=work, name="sparsify-tui fleet call", daemon=True)
    thread.start()
    try:
        last, pending = 0.0, None
        while True:
            try:
                event = events.get(timeout=0.2)
            except queue.Empty:
                event = None
            if event is not None and event[0] == "end":
                break
            if event is not None:
                if pending is not None and event[0] != pending[0]:
                    last = 0.0  # a change of status (queued -> running) goes out at once
                pending = event
            if pending is not None and time.monotonic() - last >= PROGRESS_INTERVAL_S:
                yield ("state", *pending)
                pending, last = None, time.monotonic()
        thread.join()
    except BaseException:  # KeyboardInterrupt from ray.cancel, or the generator closed: stop the call, then go
        token.cancel()
        thread.join(timeout=ABANDON_S)
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if box.get("canceled"):
        yield ("canceled",)
    elif "error" in box:
        yield ("error", box["error"], box.get("traceback"))
    else:
        import ray

        yield ("done", {"result": box["result"], "machine": system_info().to_dict(), "hostname": socket.gethostname(),
                        "node_id": ray.get_runtime_context().get_node_id(), "seconds": box.get("seconds", 0.0),
                        "wait_seconds": box["wait_seconds"]})


# ------------------------------------------------------------------------------------------- driver side
def model_files(model_path, folder: str) -> tuple[dict, ShippedFile]:
    """The files to ship for the model at ``model_path``: ``({name: local path}, placeholder of the .onnx file)``,
    named ``<folder>/<file name>`` and ``<folder>/<external data location>`` so the node sees the model's folder
    as it is here. Every external-data location is checked first
    (:func:`sparsify_tui.analysis.loading.resolve_external_location`: relative, no ``..``, no link, inside the
    model's folder). Raises ``ModelError``."""
    import onnx

    from sparsify_tui.analysis.loading import all_tensors, external_data_info, resolve_external_location

    path = Path(model_path)
    name = f"{folder}/{path.name}"
    files = {name: path}
    model = onnx.load(str(path), load_external_data=False)
    for tensor in all_tensors(model):
        info = external_data_info(tensor, path.name)
        if info is None:
            continue
        real, _st = resolve_external_location(path.parent, info["location"], tensor.name, path.name)
        files.setdefault(f"{folder}/{os.path.normpath(info['location'])}", real)
    return files, ShippedFile(name)


def _collect_placeholders(value: Any, out: set) -> set:
    if isinstance(value, ShippedFile):
        out.add(value.name)
    elif isinstance(value, dict):
        for v in value.values():
            _collect_placeholders(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect_placeholders(v, out)
    return out


def _read_files(files: dict) -> dict:
    """``{name: numpy uint8 array}`` of the local files (zero-copy on the nodes once in the object store)."""
    import numpy as np

    out = {}
    for name, path in files.items():
        try:
            out[name] = np.fromfile(str(path), dtype=np.uint8)
        except OSError as err:
            raise FleetError(f"cannot read {path} to send it to the targets ({err.strerror}): check the file") from None
    return out


def _failure(err: BaseException, label: str, cancelling: bool) -> tuple[str, str]:
    """``(status, reason)`` of a task that raised instead of answering."""
    from ray import exceptions as rex

    if isinstance(err, rex.TaskCancelledError) or (cancelling and not isinstance(err, rex.NodeDiedError)):
        return "canceled", "canceled"  # after a cancel, a crashed or interrupted worker is the cancel's doing
    if isinstance(err, rex.NodeDiedError):
        return "error", (f"node {label} died during the measurement (its raylet or the machine went away), so "
                         "nothing from it was kept: rerun it once the node is back")
    if isinstance(err, rex.WorkerCrashedError):
        return "error", (f"the Ray worker measuring on {label} died (killed, out of memory, or a native crash in "
                         "onnxruntime): see the raylet logs of that node")
    if isinstance(err, rex.TaskUnschedulableError):
        return "error", f"Ray could not run the task on {label} (the node left the cluster?): {one_line(err)}"
    return "error", f"the task on {label} failed: {one_line(err)}"


def run_on_targets(targets: list[NodeInfo], call: TargetCall, *, labels: Optional[dict] = None,
                   progress: Optional[ProgressFn] = None, on_state: Optional[Callable[[list], None]] = None,
                   on_outcome: Optional[Callable[[TargetOutcome], None]] = None,
                   cancel: Optional[CancelToken] = None, poll_s: float = 0.2,
                   cancel_grace_s: float = CANCEL_GRACE_S) -> list[TargetOutcome]:
    """Run ``call`` on every node of ``targets`` (see the module docstring) and return one
    :class:`TargetOutcome` per target, in the order of ``targets``. Must be connected
    (:func:`sparsify_tui.fleet.cluster.connect`).

    ``labels``: ``{node_id: display name}`` (default :func:`~sparsify_tui.fleet.cluster.target_labels`).
    ``progress(step, fraction)``: the whole run, fraction = (finished targets + the running ones' fractions) /
    targets, step ``"k/n targets done · <label>: <step>"``. ``on_state(states)``: every :class:`TargetState`, called
    when one changes (at most every ``poll_s`` seconds). ``on_outcome(outcome)``: called as soon as a target ends,
    in the driver (the place to store a result, so a later failure loses nothing finished).
    ``cancel``: when cancelled, every unfinished task is cancelled (:data:`CANCEL_GRACE_S`), the function returns
    with those targets ``canceled``; the caller raises :class:`~sparsify_tui.errors.JobCanceled` if it wants.

    Raises :class:`~sparsify_tui.fleet.FleetError` when a shipped file cannot be read or a placeholder names
    no shipped file; whatever ``on_outcome`` raises (every unfinished task is force-cancelled first).
    """
    ray = require_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    missing = _collect_placeholders(call.kwargs, set()) - set(call.files)
    if missing:
        raise FleetError(f"the call names shipped file {sorted(missing)[0]!r} but it is not in its files")
    labels = dict(labels or target_labels(targets))
    files_ref = ray.put(_read_files(call.files))
    task = ray.remote(_run_on_node)
    name = getattr(call.fn, "__name__", "call")
    gens = {}
    for n in targets:
        gens[n.node_id] = task.options(
            num_cpus=n.ray_cpus, max_retries=0, retry_exceptions=False,
            name=f"sparsify-tui {name} on {labels[n.node_id]}",
            scheduling_strategy=NodeAffinitySchedulingStrategy(n.node_id, soft=False),
        ).remote(call.fn, call.kwargs, call.guard, files_ref)
    run = _TargetRun(targets, labels, gens, progress=progress, on_state=on_state, on_outcome=on_outcome)
    changed = True
    try:
        while run.pending:
            if run.cancel_step(ray, cancel, cancel_grace_s):
                changed = True
                break
            ready, _ = ray.wait(list(run.pending.values()), num_returns=1, timeout=poll_s)
            for g in ready:
                changed = True
                run.receive(ray, g)
            if changed:
                run.report()
                changed = False
    finally:
        for g in run.pending.values():  # an error in the driver (or in on_outcome): nothing keeps running
            with contextlib.suppress(Exception):
                ray.cancel(g, force=True)
    if changed:
        run.report()
    return [run.outcomes[n.node_id] for n in targets]


class _TargetRun:
    """The driver's state of one :func:`run_on_targets`: every target's :class:`TargetState`, the outcomes so far,
    the generators still owed an answer (``pending``: node id -> generator) and the cancel's progress."""

    def __init__(self, targets: list[NodeInfo], labels: dict, gens: dict, *, progress, on_state, on_outcome):
        self.targets, self.labels = targets, labels
        self.states = {n.node_id: TargetState(n.node_id, labels[n.node_id]) for n in targets}
        self.outcomes: dict[str, TargetOutcome] = {}
        self.by_id = {n.node_id: n for n in targets}
        self.pending = dict(gens)
        self.progress, self.on_state, self.on_outcome = progress, on_state, on_outcome
        self.cancel_at: Optional[float] = None
        self.forced_at: Optional[float] = None

    def finish(self, node_id: str, status: str, **kw: Any) -> None:
        out = TargetOutcome(self.by_id[node_id], self.labels[node_id], status, **kw)
        self.outcomes[node_id] = out
        st = self.states[node_id]
        st.status, st.error = status, out.error
        st.step = {"completed": "done", "canceled": "canceled"}.get(status, out.error or "error")
        st.fraction = 1.0 if status == "completed" else st.fraction
        self.pending.pop(node_id, None)
        if self.on_outcome is not None:
            self.on_outcome(out)

    def report(self) -> None:
        states, n_targets = self.states, len(self.targets)
        if self.on_state is not None:
            self.on_state([states[n.node_id] for n in self.targets])
        if self.progress is not None:
            done = sum(1 for s in states.values() if s.status in ("completed", "error", "canceled"))
            frac = sum(1.0 if s.status in ("completed", "error", "canceled") else s.fraction for s in states.values())
            running = [s for s in states.values() if s.status in ("running", "queued")]
            step = f"{done}/{n_targets} targets done"
            if running:
                step += " · " + "; ".join(f"{s.label}: {s.step}" for s in running[:2])
                step += f" (+{len(running) - 2})" if len(running) > 2 else ""
            self.progress(step, frac / max(1, n_targets))

    def cancel_step(self, ray, cancel: Optional[CancelToken], grace_s: float) -> bool:
        """On cancel: cancel every pending task, force it after ``grace_s``, and give up on the tasks that still do
        not answer :data:`ABANDON_S` later (they end ``canceled``; returns True: stop waiting)."""
        now = time.monotonic()
        if cancel is not None and cancel.is_cancelled() and self.cancel_at is None:
            self.cancel_at = now
            for g in self.pending.values():
                with contextlib.suppress(Exception):
                    ray.cancel(g)
        if self.cancel_at is not None and self.forced_at is None and now - self.cancel_at > grace_s:
            self.forced_at = now
            for g in self.pending.values():
                with contextlib.suppress(Exception):
                    ray.cancel(g, force=True)
        if self.forced_at is not None and now - self.forced_at > ABANDON_S:
            for node_id in list(self.pending):
                self.finish(node_id, "canceled", error="canceled (the task did not answer after it was killed)")
            return True
        return False

    def receive(self, ray, g) -> None:
        """Take the next item of the ready generator ``g``: a state update, the result, a cancel or an error."""
        node_id = next(k for k, v in self.pending.items() if v is g)
        label = self.labels[node_id]
        cancelling = self.cancel_at is not None
        try:
            item = ray.get(next(g))
        except StopIteration:
            if cancelling:  # the user cancelled: however the task then ended, it is canceled
                self.finish(node_id, "canceled")
            else:
                self.finish(node_id, "error", error=f"the task on {label} ended without a result")
            return
        except Exception as err:  # noqa: BLE001 - Ray's errors: node died, worker crashed, cancelled
            status, reason = _failure(err, label, self.cancel_at is not None)
            self.finish(node_id, status, error=None if status == "canceled" else reason)
            return
        kind = item[0]
        if kind == "state":
            st = self.states[node_id]
            st.status, st.step, st.fraction = item[1], item[2], max(0.0, min(1.0, float(item[3])))
        elif kind == "done":
            d = item[1]
            self.finish(node_id, "completed", result=d["result"], machine=d.get("machine") or {},
                        hostname=d.get("hostname", ""), seconds=float(d.get("seconds", 0.0)),
                        wait_seconds=float(d.get("wait_seconds", 0.0)))
        elif kind == "canceled" or cancelling:  # an error raised by the interrupted measurement is the cancel's
            self.finish(node_id, "canceled")
        else:
            self.finish(node_id, "error", error=str(item[1]), traceback=item[2] if len(item) > 2 else None)
