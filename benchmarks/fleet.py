"""Fleet overhead: a fleet profile on a local Ray cluster vs the same profiles run here one after another (issue 17).

Run (as root; it re-runs itself in a fresh network, PID and mount namespace with only loopback, where the Ray
cluster it starts can reach nothing and nothing can reach it, and which ends every Ray process with it)::

    flock /tmp/bench.lock python benchmarks/fleet.py                         # ResNet-50, 3 rounds
    flock /tmp/bench.lock python benchmarks/fleet.py --model /work/built-models/mobilenet_v2.onnx --rounds 2

What it does, with a project made from ``--model`` and ``--cores`` cores per profile:

* **2 nodes** (``ray start`` head + 1 worker, each ``--num-cpus CORES``, :class:`fleet_scenario.LocalCluster`). Each
  round, in alternating order: *local*, ``sparsify-tui profile perf`` run twice one after another (the profiles a
  user would run on two servers by hand, here on one), and *fleet*, one ``sparsify-tui fleet profile --targets all``
  that measures both nodes at once. Wall time of each as a user waits for it, from the command's start to its
  exit. **ratio = fleet / local**; the goal is <= 1.3x at ResNet-50 size.
* **3 nodes**: a third node joins, and the fleet run is repeated. Two nodes measure on separate cores of this
  2-core machine; a third shares them, so its measurements slow the others: what is compared is the **dispatch
  cost**, the fleet run's wall time minus its longest target's time on its node (waiting for the node's measuring
  lock plus the core function), which is what the fleet adds around the measurements: the argument check (a child
  process lists the nodes), the job process, the Ray driver's connection, shipping the model through the object
  store, a worker per node, storing each result. Each fleet run's dispatch cost is split by the job record's
  timestamps: *check* (command start to job record), *spawn* (record to job process running), *job* (the job's
  run minus its longest target) and *follow* (job end to the command's exit).

Every figure is a median over ``--rounds`` rounds. The profiles are the same on both sides (``--iterations``,
``--warmup``, ``--no-int8`` unless ``--int8``). Quote ratios, not absolute times: other work on the machine moves
both sides of a round alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = Path("/work/built-models/resnet50.onnx")
INSIDE = "SPARSIFY_FLEET_BENCH_INSIDE"


def _reexec_in_namespace(argv: list) -> int:
    if os.geteuid() != 0:
        print("benchmarks/fleet.py needs root (it makes a network namespace with only loopback for the Ray cluster)",
              file=sys.stderr)
        return 2
    script = " ".join([sys.executable, str(Path(__file__).resolve()), *[repr(a) if " " in a else a for a in argv]])
    cmd = ["unshare", "-n", "-p", "-f", "--mount-proc", "--kill-child", "bash", "-c",
           f"ip link set lo up && {script}; exit $?"]
    env = {**os.environ, INSIDE: "1", "FLEET_SCENARIO_TOKEN": f"bench-{os.getpid()}"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(cmd, env=env).returncode


def _cli(*args: str) -> tuple[float, dict]:
    """Run ``sparsify-tui ARGS --json``; ``(wall seconds, parsed stdout)``. Raises on a non-zero exit."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "sparsify_tui", *args, "--json"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"sparsify-tui {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    return wall, json.loads(proc.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(MODEL), help="ONNX model (default ResNet-50)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cores", type=int, default=1, help="cores per profile, and CPUs of each Ray node")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--int8", action="store_true", help="include the measured INT8 profile on both sides")
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args(argv)
    if not Path(args.model).is_file():
        print(f"{args.model} is not present: build it or give --model", file=sys.stderr)
        return 2
    if os.environ.get(INSIDE) != "1":
        return _reexec_in_namespace(sys.argv[1:] if argv is None else list(argv))

    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import fleet_scenario as fs

    fs.prepare_namespace()  # private /dev/shm: workspace, Ray, temp folders, measuring locks
    cluster = fs.LocalCluster(names=("a", "b", "c"), num_cpus=args.cores)
    dims = [x for d in args.dim for x in ("--dim", d)]
    _, created = _cli("create", args.model, "--name", "bench", *dims)
    project = created["id"]
    prof = ["--cores", str(args.cores), "--iterations", str(args.iterations), "--warmup", str(args.warmup)]
    prof += [] if args.int8 else ["--no-int8"]

    def local_pair() -> float:
        return sum(_cli("profile", "perf", project, "--name", f"local {i}", *prof)[0] for i in range(2))

    def fleet_run() -> tuple[float, float, list, dict]:
        from sparsify_tui.store import Workspace

        t_start = time.time()
        wall, res = _cli("fleet", "profile", project, "--address", cluster.address, "--targets", "all", *prof)
        targets = res["targets"]
        if any(t["status"] != "completed" for t in targets):
            raise SystemExit(f"a fleet target failed: {targets}")
        longest = max(t["wait_seconds"] + t["seconds"] for t in targets)
        job = Workspace().get_job(res["job"])
        created, started, finished = (_epoch(job[k]) for k in ("created", "started", "finished"))
        phases = {"check": created - t_start, "spawn": started - created,
                  "job": finished - started - longest, "follow": t_start + wall - finished}
        return wall, wall - longest, [round(t["seconds"], 2) for t in targets], phases

    t0 = time.perf_counter()
    cluster.names = ["a", "b"]
    cluster.start()
    print(f"model {Path(args.model).name}, {args.cores} core(s) per profile, {args.iterations} timed runs, "
          f"{'with' if args.int8 else 'no'} INT8; 2-node cluster up in {time.perf_counter() - t0:.1f} s", flush=True)
    rows = []
    for r in range(args.rounds):
        if r % 2 == 0:
            loc = local_pair()
            fl = fleet_run()
        else:
            fl = fleet_run()
            loc = local_pair()
        rows.append((loc, fl[0], fl[1], fl[3]))
        print(f"  round {r + 1}: local 2 profiles one after another {loc:6.1f} s   fleet 2 nodes {fl[0]:6.1f} s "
              f"(targets on their nodes {fl[2]} s, dispatch {fl[1]:5.1f} s = {_fmt(fl[3])})   "
              f"ratio {fl[0] / loc:.2f}x", flush=True)
    local_med = statistics.median(r[0] for r in rows)
    fleet_med = statistics.median(r[1] for r in rows)
    ratio_med = statistics.median(r[1] / r[0] for r in rows)
    dispatch2 = statistics.median(r[2] for r in rows)

    cluster.names = ["a", "b", "c"]
    _join(cluster, "c")
    rows3 = []
    for r in range(args.rounds):
        fl = fleet_run()
        rows3.append(fl)
        print(f"  round {r + 1}: fleet 3 nodes {fl[0]:6.1f} s (targets on their nodes {fl[2]} s, "
              f"dispatch {fl[1]:5.1f} s = {_fmt(fl[3])})", flush=True)
    dispatch3 = statistics.median(r[1] for r in rows3)
    phases2 = {k: statistics.median(r[3][k] for r in rows) for k in rows[0][3]}
    phases3 = {k: statistics.median(r[3][k] for r in rows3) for k in rows3[0][3]}
    print()
    print(f"2 nodes: local one after another {local_med:.1f} s, fleet {fleet_med:.1f} s: "
          f"ratio fleet/local {ratio_med:.2f}x (goal <= 1.3x)")
    print(f"dispatch cost (fleet wall - longest target on its node): 2 nodes {dispatch2:.1f} s, "
          f"3 nodes {dispatch3:.1f} s ({dispatch3 - dispatch2:+.1f} s for the third node)")
    print(f"  2 nodes: {_fmt(phases2)}")
    print(f"  3 nodes: {_fmt(phases3)}")
    print("  check: argument check before the job exists (a child process connects and every target describes "
          "itself); spawn: the job process starts; job: connect, ship the model, a worker per node, store (the job's "
          "run minus its longest target); follow: the CLI notices the end")
    return 0


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _fmt(phases: dict) -> str:
    return " + ".join(f"{k} {v:.1f}" for k, v in phases.items())


def _join(cluster, name: str) -> None:
    """Start one more worker node ``name`` and wait until it is alive."""
    out = subprocess.run(cluster._cmd(name, False), capture_output=True, text=True, env=cluster._env(name))
    cluster.wait_for_nodes(len(cluster.names))
    if out.returncode and not out.stdout:
        raise SystemExit(f"ray start for node {name} failed: {out.stderr[-800:]}")


if __name__ == "__main__":
    sys.exit(main())
