"""A Ray cluster as sparsify-tui sees it: connecting as its driver, its alive nodes, and choosing targets.

* :func:`connect` makes this process the cluster's driver (``ray.init(address=...)``) after two quick checks
  that turn the usual mistakes into one line: the address must answer on TCP within
  :data:`CONNECT_TIMEOUT_S`, and a Ray node must run on this machine (a driver attaches to a local raylet; a
  machine that should not be measured joins with ``ray start --address HOST:PORT --num-cpus 0``).
* :func:`list_nodes` reads the alive nodes from Ray (``ray.nodes()``: id, address, hostname, labels, resources)
  and asks every node to describe itself with a tiny task pinned to it (``num_cpus=0``, so it runs even on a
  busy node): CPU model, cores the task may use, instruction sets, onnxruntime and sparsify-tui versions
  (:func:`describe_this_node`, the same :func:`sparsify_tui.engine.system_info` a local profile records).
* :func:`select_targets` turns a ``--targets`` value (:func:`sparsify_tui.settings.fleet_targets`) into nodes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Optional

from sparsify_tui import settings
from sparsify_tui.fleet import FleetError, require_ray

CONNECT_TIMEOUT_S = 5.0
"""Seconds the head node's address has to accept a TCP connection before :func:`connect` gives up."""
DESCRIBE_TIMEOUT_S = 60.0
"""Seconds every node has to answer the describe task in :func:`list_nodes` (a new Ray worker process on a
busy node takes a few seconds to start)."""
HEAD_RESOURCE = "node:__internal_head__"
_HIDDEN_RESOURCES = ("CPU", "memory", "object_store_memory")


@dataclass
class NodeInfo:
    """One alive node of the cluster.

    From Ray: ``node_id`` (hex), ``address`` (its IP), ``hostname``, ``is_head``, ``ray_cpus`` (the logical CPUs Ray
    schedules there, ``ray start --num-cpus``), ``labels`` (``ray start --labels``; Ray's own ``ray.io/*`` labels
    left out) and ``resources`` (custom resources such as ``ray start --resources '{"genoa": 1}'``).
    From the node itself (:func:`describe_this_node`; empty when it could not answer, with the reason in
    ``error``): ``cpu_model``, ``cores`` (cores a task process may use there), ``physical_cores``,
    ``instruction_sets``, ``ort_version``, ``runtimes`` (``{engine display name: version}`` of the engines installed
    there), ``sparsify_tui_version``, ``python_version``.
    """

    node_id: str
    address: str = ""
    hostname: str = ""
    is_head: bool = False
    ray_cpus: float = 0.0
    labels: dict = field(default_factory=dict)
    resources: dict = field(default_factory=dict)
    cpu_model: str = ""
    cores: Optional[int] = None
    physical_cores: Optional[int] = None
    instruction_sets: list = field(default_factory=list)
    ort_version: str = ""
    runtimes: dict = field(default_factory=dict)
    sparsify_tui_version: str = ""
    python_version: str = ""
    error: Optional[str] = None

    @property
    def short_id(self) -> str:
        """The first 8 hex digits of the node id (what listings show)."""
        return self.node_id[:8]

    def to_dict(self) -> dict:
        """JSON-able dict (one entry of ``fleet nodes --json``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "NodeInfo":
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_ray(cls, entry: dict) -> "NodeInfo":
        """From one entry of ``ray.nodes()``."""
        resources = dict(entry.get("Resources") or {})
        return cls(
            node_id=str(entry.get("NodeID", "")),
            address=str(entry.get("NodeManagerAddress", "")),
            hostname=str(entry.get("NodeManagerHostname", "")),
            is_head=HEAD_RESOURCE in resources,
            ray_cpus=float(resources.get("CPU", 0.0)),
            labels={k: v for k, v in (entry.get("Labels") or {}).items() if not str(k).startswith("ray.io/")},
            resources={k: v for k, v in resources.items()
                       if k not in _HIDDEN_RESOURCES and not k.startswith("node:")},
        )

    def describe(self, facts: dict) -> None:
        """Fill the fields the node reports about itself (a :func:`describe_this_node` dict)."""
        system = facts.get("system") or {}
        self.hostname = facts.get("hostname") or self.hostname
        self.cpu_model = system.get("cpu_model", "")
        self.cores = system.get("available_cores")
        self.physical_cores = system.get("physical_cores")
        self.instruction_sets = list(system.get("instruction_sets") or [])
        self.ort_version = system.get("ort_version", "")
        self.runtimes = dict(facts.get("runtimes") or {})
        self.python_version = system.get("python_version", "")
        self.sparsify_tui_version = facts.get("sparsify_tui_version", "")

    def target_tag(self, label: str) -> dict:
        """What a stored profile or benchmark records about the target it ran on (``label``: its display name)."""
        return {"label": label, "node_id": self.node_id, "hostname": self.hostname, "address": self.address,
                "labels": dict(self.labels), "cpu_model": self.cpu_model, "cores": self.cores,
                "instruction_sets": list(self.instruction_sets), "ort_version": self.ort_version}


def describe_this_node() -> dict:
    """What the node running this describes about itself: ``{"hostname", "system": SystemInfo dict (cores,
    CPU, instruction sets, onnxruntime version), "runtimes": {engine: version} installed there,
    "sparsify_tui_version"}``. Runs on the node (a Ray task)."""
    import sparsify_tui
    from sparsify_tui.engine import runtime_versions, system_info

    return {"hostname": socket.gethostname(), "system": system_info().to_dict(), "runtimes": runtime_versions(),
            "sparsify_tui_version": sparsify_tui.__version__}


# --------------------------------------------------------------------------------------------- connect
def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """:class:`FleetError` unless ``address`` (``HOST:PORT``) accepts a TCP connection within ``timeout_s`` seconds."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except socket.timeout:
        raise FleetError(f"the Ray cluster at {address} did not answer within {timeout_s:.0f} s: check the address "
                         "(the head node's HOST:PORT) and that the port is open from this machine") from None
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise FleetError(f"cannot reach the Ray cluster at {address} ({reason}): start it with `ray start --head` "
                         "on the head node, or check the address") from None


def _check_local_node(address: str) -> None:
    """A driver attaches to a raylet on its own machine: refuse at once when none runs here (Ray would wait a
    minute first). Uses Ray's own lookup of local raylets; skipped if that is not available."""
    try:
        from ray._private.services import find_node_ids
    except ImportError:  # pragma: no cover - a Ray without it: let ray.init decide
        return
    try:
        local = find_node_ids()
    except Exception:  # pragma: no cover - the lookup itself failed
        return
    if not local:
        raise FleetError(f"this machine is not a node of the Ray cluster at {address}: join it first with "
                         f"`ray start --address {address}` (add --num-cpus 0 to keep measurements off this machine)")


@contextlib.contextmanager
def connect(address: str, *, timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator[Any]:
    """Connect this process to the Ray cluster at ``address`` (``HOST:PORT`` of the head node) as its driver and
    yield the ``ray`` module; disconnect on exit. Ray's log goes to this process's stderr at level ERROR only,
    and workers' output is not forwarded. A SIGTERM handler installed before (a job's cancel) is kept.

    Raises :class:`FleetError` (one line): Ray not installed, a bad address, an address that does not answer
    within ``timeout_s`` seconds, no Ray node on this machine, or ``ray.init`` refusing (a version mismatch).
    """
    address = settings.fleet_address(address)
    ray = require_ray()
    check_reachable(address, timeout_s)
    _check_local_node(address)
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    main = threading.current_thread() is threading.main_thread()
    old_term = signal.getsignal(signal.SIGTERM) if main else None
    try:
        ray.init(address=address, namespace="sparsify-tui", logging_level=logging.ERROR, log_to_driver=False,
                 configure_logging=True)
    except Exception as err:  # ConnectionError, RuntimeError (version mismatch), ValueError...
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
        reason = (lines[0] if lines else type(err).__name__)[:300]
        raise FleetError(f"cannot connect to the Ray cluster at {address}: {reason}: check that this machine runs "
                         "the same Ray and Python versions as the cluster") from None
    finally:
        if main and old_term is not None:
            signal.signal(signal.SIGTERM, old_term)  # ray.init installs its own (sys.exit): keep the job's cancel
    try:
        yield ray
    finally:
        ray.shutdown()


# ----------------------------------------------------------------------------------------------- nodes
def one_line(err: BaseException, limit: int = 300) -> str:
    """``Type: first line`` of an error, at most ``limit`` characters; for an error a task raised (Ray's
    ``RayTaskError``) the task's own exception, not Ray's wrapper and its traceback."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        err = cause
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return (f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__)[:limit]


def list_nodes(*, describe: bool = True, timeout_s: float = DESCRIBE_TIMEOUT_S) -> list[NodeInfo]:
    """The cluster's alive nodes, head first, then by hostname and id. Must be connected (:func:`connect`).
    With ``describe`` every node describes itself (:func:`describe_nodes`)."""
    ray = require_ray()
    nodes = [NodeInfo.from_ray(n) for n in ray.nodes() if n.get("Alive")]
    if describe:
        describe_nodes(nodes, timeout_s=timeout_s)
    return sorted(nodes, key=lambda n: (not n.is_head, n.hostname, n.node_id))


def describe_nodes(nodes: list[NodeInfo], *, timeout_s: float = DESCRIBE_TIMEOUT_S) -> list[NodeInfo]:
    """Fill in what every node says about itself (:func:`describe_this_node`, a task pinned to it, ``num_cpus=0``,
    no retries, all nodes at once). A node that cannot (sparsify-tui not installed there, no answer within
    ``timeout_s`` seconds) keeps Ray's fields and gets the reason in ``error``. Returns ``nodes``."""
    ray = require_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if not nodes:
        return nodes
    task = ray.remote(describe_this_node)
    refs = {task.options(num_cpus=0, max_retries=0, name="sparsify-tui describe node",
                         scheduling_strategy=NodeAffinitySchedulingStrategy(n.node_id, soft=False)).remote(): n
            for n in nodes}
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    for ref in ready:
        try:
            refs[ref].describe(ray.get(ref))
        except Exception as err:  # noqa: BLE001 - one node's failure is that node's error
            refs[ref].error = f"could not describe itself: {one_line(err)}"
    for ref in late:
        refs[ref].error = f"did not answer within {timeout_s:.0f} s"
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)
    return nodes


def select_targets(nodes: list[NodeInfo], targets: Any, flag: str = "--targets") -> list[NodeInfo]:
    """The nodes a ``--targets`` value chooses (see :func:`sparsify_tui.settings.fleet_targets`): ``all`` (every
    node with CPUs in Ray), node ids or unique id prefixes, or ``KEY=VALUE`` labels (a node must have every one).

    Raises :class:`FleetError` (one line naming what the cluster has) when an id matches no node or several,
    when no node has the labels, when a chosen node has no CPUs in Ray, or when nothing is left."""
    spec = settings.fleet_targets(targets, flag) if not isinstance(targets, dict) else targets
    measurable = [n for n in nodes if n.ray_cpus > 0]
    if spec.get("all"):
        if not measurable:
            raise FleetError("no node of the cluster has CPUs in Ray (every node was started with --num-cpus 0): "
                             "start a target with `ray start --address HOST:PORT` without --num-cpus 0")
        return measurable
    if spec.get("labels"):
        want = spec["labels"]
        chosen = [n for n in nodes if all(n.labels.get(k) == v for k, v in want.items())]
        if not chosen:
            have = sorted({f"{k}={v}" for n in nodes for k, v in n.labels.items()})
            asked = ",".join(f"{k}={v}" for k, v in want.items())
            raise FleetError(f"{flag} {asked} matches no node of the cluster: its labels are "
                             f"{', '.join(have) if have else 'none'} (see `sparsify-tui fleet nodes`)")
    else:
        chosen = []
        for prefix in spec.get("ids") or []:
            hits = [n for n in nodes if n.node_id.lower().startswith(prefix)]
            if not hits:
                raise FleetError(f"{flag}: no alive node has id {prefix}: see `sparsify-tui fleet nodes` for the "
                                 "node ids")
            if len(hits) > 1:
                raise FleetError(f"{flag}: node id {prefix} matches {len(hits)} nodes: give more of its digits")
            if hits[0] not in chosen:
                chosen.append(hits[0])
    empty = [n for n in chosen if n.ray_cpus <= 0]
    if empty:
        n = empty[0]
        raise FleetError(f"node {n.short_id} ({n.hostname}) has no CPUs in Ray (started with --num-cpus 0), so "
                         f"nothing can run there: leave it out of {flag}")
    return chosen


def target_labels(targets: list[NodeInfo]) -> dict[str, str]:
    """``{node_id: display name}``: the hostname, plus the first 6 digits of the node id when several of
    ``targets`` share a hostname (several Ray nodes on one machine, or identical container hostnames)."""
    counts: dict[str, int] = {}
    for n in targets:
        counts[n.hostname] = counts.get(n.hostname, 0) + 1
    return {n.node_id: (n.hostname if counts[n.hostname] == 1 else f"{n.hostname}-{n.node_id[:6]}")
            for n in targets}
