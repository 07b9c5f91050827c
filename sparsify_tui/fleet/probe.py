"""The nodes of a Ray cluster, listed by a child process: ``python -m sparsify_tui.fleet.probe HOST:PORT``.

Connecting as a Ray driver makes Ray print to the process's stdout and stderr (node deaths, worker errors,
C++ warnings) and install its own signal handlers. The CLI's ``fleet nodes`` (whose stdout may be ``--json``),
the argument checks of fleet jobs and the TUI's Fleet dialog therefore list nodes through
:func:`describe_cluster`, which runs this module in a child process and reads one JSON line from it. A failure
becomes one :class:`~sparsify_tui.fleet.FleetError` line; Ray's own output stays in the child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from sparsify_tui import settings
from sparsify_tui.errors import SparsifyError
from sparsify_tui.fleet import FleetError, require_ray
from sparsify_tui.fleet.cluster import DESCRIBE_TIMEOUT_S, NodeInfo

PROBE_TIMEOUT_S = DESCRIBE_TIMEOUT_S + 90.0
"""Seconds the child process has in all: Python and Ray start, ``ray.init``, the describe tasks."""


def _child_env() -> dict:
    import sparsify_tui

    env = dict(os.environ)
    pkg_parent = str(Path(sparsify_tui.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def describe_cluster(address: str, *, targets: Optional[str] = None, describe: bool = True,
                     timeout_s: float = PROBE_TIMEOUT_S) -> list[NodeInfo]:
    """The alive nodes of the Ray cluster at ``address`` (``HOST:PORT``), each describing itself
    (:func:`sparsify_tui.fleet.cluster.list_nodes`), listed by a child process that connects, lists and
    disconnects. With ``targets`` (a ``--targets`` value) only the nodes it chooses
    (:func:`sparsify_tui.fleet.cluster.select_targets`), and only those run the describe task. Takes a few seconds
    (Ray's start-up and one small task per node).

    Raises :class:`~sparsify_tui.fleet.FleetError` (one line): Ray not installed, a bad or unreachable address,
    no Ray node on this machine, ``targets`` choosing no node, or no answer within ``timeout_s`` seconds."""
    from sparsify_tui.fleet.cluster import check_reachable

    address = settings.fleet_address(address)
    require_ray(load=False)
    if targets is not None:
        settings.fleet_targets(targets)
    check_reachable(address)  # here first: an address that does not answer costs no child process
    cmd = [sys.executable, "-m", "sparsify_tui.fleet.probe", address] + ([] if describe else ["--no-describe"])
    cmd += ["--targets", str(targets)] if targets is not None else []
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s,
                              env=_child_env())
    except subprocess.TimeoutExpired:
        raise FleetError(f"the Ray cluster at {address} did not list its nodes within {timeout_s:.0f} s: check "
                         "`ray status` on the head node") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    try:
        doc = json.loads(lines[-1]) if lines else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not ("nodes" in doc or "error" in doc):
        err = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        raise FleetError(f"listing the nodes of the Ray cluster at {address} failed (exit code {proc.returncode})"
                         + (f": {err[-1][:300]}" if err else ""))
    if doc.get("error"):
        raise FleetError(str(doc["error"]))
    return [NodeInfo.from_dict(n) for n in doc["nodes"]]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sparsify_tui.fleet.probe HOST:PORT [--no-describe] [--targets SPEC]``: print
    ``{"address", "nodes": [...]}`` or ``{"error": one line}`` as one JSON line on stdout; exit 0, or 2 for an
    error. Everything Ray prints goes to stderr."""
    args = list(sys.argv[1:] if argv is None else argv)
    sys.stdout.flush()
    real_stdout = os.dup(1)
    os.dup2(2, 1)  # Ray prints some errors on stdout: send them to stderr, keep stdout for our one line
    try:
        from sparsify_tui.fleet.cluster import connect, describe_nodes, list_nodes, select_targets

        if not args or args[0].startswith("-"):
            raise SparsifyError("usage: python -m sparsify_tui.fleet.probe HOST:PORT [--no-describe] [--targets SPEC]")
        targets = args[args.index("--targets") + 1] if "--targets" in args[:-1] else None
        with connect(args[0]):
            nodes = list_nodes(describe=False)
            if targets is not None:
                nodes = select_targets(nodes, targets)
            if "--no-describe" not in args:
                describe_nodes(nodes)
        doc, code = {"address": args[0], "nodes": [n.to_dict() for n in nodes]}, 0
    except SparsifyError as err:
        doc, code = {"error": str(err)}, 2
    sys.stdout.flush()
    os.write(real_stdout, (json.dumps(doc) + "\n").encode())
    os.close(real_stdout)
    return code


if __name__ == "__main__":  # pragma: no cover - run as a child process
    sys.exit(main())
