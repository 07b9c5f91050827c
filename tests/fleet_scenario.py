"""A real Ray cluster of three nodes on this machine, and the fleet commands run against it, as a user would.

Run by ``tests/test_fleet.py`` (and ``benchmarks/fleet.py`` reuses :class:`LocalCluster`) **inside a fresh network,
PID and mount namespace** that has only loopback::

    unshare -n -p -f --mount-proc --kill-child bash -c 'ip link set lo up && python tests/fleet_scenario.py ...'

Ray advertises the machine's interface address and listens on every interface even with
``--node-ip-address 127.0.0.1``; in this namespace only 127.0.0.1 exists, so nothing of the test cluster is
reachable from outside nor talks to anything outside. The PID namespace ends every Ray process with the scenario.
``/dev/shm`` is a private tmpfs here (Ray's object store and session folder, the workspace, temp folders and the
measuring lock all live there), so nothing is left on disk and no start-up clean-up here can touch anyone
else's temp folders.

The cluster: head ``a`` (labels ``cpu=alpha,node=a``), workers ``b`` and ``c`` (``cpu=beta``), 1 CPU each in Ray,
each with a custom resource ``node_a``/``node_b``/``node_c`` of 1. The scenario prints one JSON document on its
last stdout line: every step's command, exit code, stderr lines, parsed stdout, seconds, and what the workspace
holds afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx"
SHM = Path("/dev/shm")
PORT = 6379
OBJECT_STORE_BYTES = 300 * 1024 * 1024
"""Each node's object store (in the namespace's /dev/shm): room for a ResNet-50-sized model (100 MB) and results."""
NODES = {  # name: (node manager port, labels, measuring lock: each node plays its own server)
    "a": (7001, "cpu=alpha,node=a", "lock-a"),
    "b": (7002, "cpu=beta,node=b", "lock-b"),
    "c": (7003, "cpu=beta,node=c", "lock-c"),
}


def prepare_namespace() -> dict:
    """Private ``/dev/shm`` and the environment every process here inherits (Ray's nodes and workers too)."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4g,mode=1777", "tmpfs", str(SHM)], check=True)
    for sub in ("ws", "tmp"):
        (SHM / sub).mkdir()
    env = {
        "SPARSIFY_TUI_HOME": str(SHM / "ws"),
        "TMPDIR": str(SHM / "tmp"),
        "SPARSIFY_TUI_MEASURE_LOCK": str(SHM / "lock-a"),  # this machine is node a
        "RAY_USAGE_STATS_ENABLED": "0",
        # a dead raylet is noticed within about 3 s (defaults: 3 s x 5 misses)
        "RAY_health_check_period_ms": "1000",
        "RAY_health_check_failure_threshold": "3",
        "PYTHONUNBUFFERED": "1",
        # this checkout's sparsify_tui in every process: the commands, the Ray nodes and their workers
        "PYTHONPATH": str(ROOT) + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
    }
    os.environ.update(env)
    return env


def ray_cli() -> str:
    """The ``ray`` command of this Python's environment (its bin folder need not be on PATH)."""
    here = Path(sys.executable).with_name("ray")
    return str(here) if here.exists() else (shutil.which("ray") or "ray")


class LocalCluster:
    """``ray start`` head + workers on 127.0.0.1 (only inside the namespace above)."""

    def __init__(self, names=("a", "b", "c"), num_cpus: int = 1) -> None:
        self.names, self.num_cpus = list(names), num_cpus
        self.address = f"127.0.0.1:{PORT}"
        # a unique name: the test looks for it in every process's command line once the namespace is gone
        self.temp_dir = str(SHM / f"ray-{os.environ.get('FLEET_SCENARIO_TOKEN', 'fleet')}")
        self.start_seconds: dict = {}

    def _env(self, name: str) -> dict:
        return {**os.environ, "SPARSIFY_TUI_MEASURE_LOCK": str(SHM / NODES[name][2])}

    def _cmd(self, name: str, head: bool) -> list:
        port, labels, _lock = NODES[name]
        k = port - 7000  # every port of a node fixed and distinct: nodes started at once picked the same free port
        ports = ["--node-manager-port", str(port), "--object-manager-port", str(7100 + k),
                 "--metrics-export-port", str(7200 + k), "--dashboard-agent-listen-port", str(7300 + k),
                 "--dashboard-agent-grpc-port", str(7400 + k), "--runtime-env-agent-port", str(7500 + k),
                 "--min-worker-port", str(20000 + 1000 * k), "--max-worker-port", str(20999 + 1000 * k)]
        cmd = [ray_cli(), "start", "--node-ip-address", "127.0.0.1", "--num-cpus",
               str(self.num_cpus), "--resources", json.dumps({f"node_{name}": 1}), "--labels", labels, *ports,
               # a folder per node, as on separate servers: nodes started at once raced for the same socket names
               "--temp-dir", f"{self.temp_dir}/{name}", "--disable-usage-stats",
               "--object-store-memory", str(OBJECT_STORE_BYTES), "--include-log-monitor", "false"]
        if head:
            cmd += ["--head", "--port", str(PORT), "--include-dashboard", "false"]
        else:
            cmd += ["--address", self.address]
        return cmd

    def start(self) -> None:
        """Start the head, then the workers; returns once every node is alive."""
        self.start_head()
        self.start_workers()

    def start_head(self) -> None:
        t0 = time.perf_counter()
        proc = subprocess.run(self._cmd(self.names[0], True), capture_output=True, text=True,
                              env=self._env(self.names[0]))
        if proc.returncode:
            raise RuntimeError(f"ray start --head failed: {(proc.stdout + proc.stderr)[-2000:]}")
        self.start_seconds["head"] = time.perf_counter() - t0

    def start_workers(self, timeout_s: float = 60.0) -> None:
        """Start the workers at once and wait until every node is alive. On a loaded machine ``ray start`` gives
        up after 30 s while its raylet goes on registering, so its exit code alone decides nothing."""
        t1 = time.perf_counter()
        procs = [subprocess.Popen(self._cmd(n, False), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=self._env(n)) for n in self.names[1:]]
        outs = [p.communicate()[0] for p in procs]
        try:
            self.wait_for_nodes(len(self.names), timeout_s=max(5.0, timeout_s - (time.perf_counter() - t1)))
        except RuntimeError as err:
            failed = [out for p, out in zip(procs, outs) if p.returncode]
            raise RuntimeError(f"{err}: {failed[0][-1500:] if failed else ''}") from None
        self.start_seconds["workers"] = time.perf_counter() - t1

    def wait_for_nodes(self, count: int, timeout_s: float = 60.0) -> None:
        import ray

        end = time.monotonic() + timeout_s
        ray.init(address=self.address, logging_level="ERROR", log_to_driver=False)
        try:
            while sum(1 for n in ray.nodes() if n.get("Alive")) < count:
                if time.monotonic() > end:
                    raise RuntimeError(f"{count} nodes did not come up within {timeout_s:.0f} s")
                time.sleep(0.2)
        finally:
            ray.shutdown()

    @staticmethod
    def raylet_pid(name: str):
        """The pid of node ``name``'s raylet (found by its node manager port, in this PID namespace)."""
        flag = f"--node_manager_port={NODES[name][0]}".encode()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"/raylet") and flag in argv:
                return int(pid)
        return None


def start(*args: str) -> subprocess.Popen:
    """Start ``sparsify-tui ARGS`` (collect it with :func:`finish`)."""
    proc = subprocess.Popen([sys.executable, "-m", "sparsify_tui", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    proc.args_, proc.t0 = args, time.perf_counter()
    return proc


def finish(proc: subprocess.Popen, timeout: float = 240.0) -> dict:
    out, err = proc.communicate(timeout=timeout)
    return _done(proc.args_, proc.returncode, out, err, time.perf_counter() - proc.t0)


def parallel(**commands) -> dict:
    """Run several ``sparsify-tui`` commands at once; ``{name: result}``."""
    procs = {name: start(*args) for name, args in commands.items()}
    return {name: finish(p) for name, p in procs.items()}


def sparsify(*args: str, timeout: float = 240.0) -> dict:
    """Run ``sparsify-tui ARGS`` and return ``{cmd, rc, stdout (parsed JSON when possible), stderr lines, seconds}``."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "sparsify_tui", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    return _done(args, proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0)


def _done(args, rc, stdout, stderr, seconds) -> dict:
    try:
        out = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        out = stdout
    return {"cmd": " ".join(args), "rc": rc, "stdout": out,
            "stderr": [ln for ln in stderr.splitlines() if ln.strip()], "seconds": round(seconds, 2)}


def workspace_state() -> dict:
    """Jobs and stored records of the project, read the way the TUI does."""
    from sparsify_tui.store import Workspace

    ws = Workspace()
    projects = ws.list_projects()
    out = {"jobs": [{k: j.get(k) for k in ("id", "type", "status", "error", "targets", "result")}
                    for j in ws.list_jobs()]}
    if projects:
        pid = projects[0]["id"]
        out["perf_profiles"] = ws.list_records(pid, "perf_profiles")
        out["benchmarks"] = ws.list_records(pid, "benchmarks")
        from sparsify_tui.services.profiles import load_perf_profile

        out["profile_blobs_target"] = [ws.read_record_blob(pid, "perf_profiles", r["id"]).get("target")
                                       for r in out["perf_profiles"]]
        out["perf_loads"] = [load_perf_profile(ws, pid, r["id"]).latency_ms.median for r in out["perf_profiles"]]
    return out


def locks_free() -> bool:
    """True when no process holds any node's measuring lock."""
    import fcntl

    for name in {lock for _, _, lock in NODES.values()}:
        with open(SHM / name, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(fh, fcntl.LOCK_UN)
    return True


def new_job_id(known: set, timeout_s: float = 60.0):
    """The id of the first job not in ``known`` (waits for it)."""
    from sparsify_tui.store import Workspace

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        new = [j["id"] for j in Workspace().list_jobs() if j["id"] not in known]
        if new:
            return new[0]
        time.sleep(0.1)
    return None


def run_scenario() -> dict:
    from sparsify_tui.store import Workspace

    t_start = time.perf_counter()
    report: dict = {"steps": {}, "phase_seconds": {}}
    steps, phases = report["steps"], report["phase_seconds"]
    cluster = LocalCluster()
    cluster.start_head()
    t = time.perf_counter()
    create = start("create", str(DEMO), "--name", "demo", "--dim", "x:2=48", "--dim", "x:3=192")
    cluster.start_workers()  # while the project is created
    steps["create"] = finish(create)
    steps["optimize"] = sparsify("optimize", "demo", "--name", "o1", "--sparsity", "0.5")
    phases["cluster_and_create"] = round(time.perf_counter() - t, 2)
    report["cluster_start_seconds"] = {k: round(v, 2) for k, v in cluster.start_seconds.items()}
    addr = cluster.address

    # 1. the nodes, and bad input (one line, exit 2, no job record), all at once
    t = time.perf_counter()
    steps.update(parallel(
        nodes=("fleet", "nodes", "--address", addr, "--json"),
        bad_address=("fleet", "nodes", "--address", "127.0.0.1:9"),
        bad_label=("fleet", "profile", "demo", "--address", addr, "--targets", "cpu=gamma"),
        bad_id=("fleet", "profile", "demo", "--address", addr, "--targets", "abcdef012345"),
        bad_cores=("fleet", "benchmark", "demo", "--address", addr, "--target", "cpu=beta", "--cores", "999"),
        bad_optimization=("fleet", "benchmark", "demo", "--address", addr, "-O", "nope"),
    ))
    phases["nodes_and_bad_input"] = round(time.perf_counter() - t, 2)
    report["jobs_after_bad_input"] = len(Workspace().list_jobs())
    listed = steps["nodes"]["stdout"]
    nodes = {n["labels"].get("node"): n for n in listed["nodes"]} if isinstance(listed, dict) else {}
    report["node_ids"] = {k: v["node_id"] for k, v in nodes.items()}
    if set(nodes) != {"a", "b", "c"}:
        return report

    # 2. a profile on every node and a benchmark (baseline + o1, applied here once) on the cpu=beta nodes, at once
    fast = ["--cores", "1", "--warmup", "1"]
    t = time.perf_counter()
    steps.update(parallel(
        profile_all=("fleet", "profile", "demo", "--address", addr, "--targets", "all", *fast, "--iterations", "5",
                     "--no-int8", "--json"),
        benchmark_beta=("fleet", "benchmark", "demo", "--address", addr, "--target", "cpu=beta", "-O", "o1", *fast,
                        "--iterations", "6", "--json"),
    ))
    phases["profile_and_benchmark"] = round(time.perf_counter() - t, 2)

    # 3. at once: a long profile on node a (chosen by id prefix) canceled while it measures, and a profile on the
    #    cpu=beta nodes with node c's raylet killed while c measures (b goes on and is stored)
    t = time.perf_counter()
    n_profiles = len(Workspace().list_records(Workspace().list_projects()[0]["id"], "perf_profiles"))
    known = {j["id"] for j in Workspace().list_jobs()}
    cancel_proc = start("fleet", "profile", "demo", "--address", addr, "--targets", nodes["a"]["node_id"][:8], *fast,
                        "--iterations", "1000000", "--no-int8", "--json")
    cancel_job = new_job_id(known)
    kill_proc = start("fleet", "profile", "demo", "--address", addr, "--targets", "cpu=beta", *fast,
                      "--iterations", "1500", "--no-int8", "--json")
    kill_job = new_job_id(known | {cancel_job})
    report["kill_job"], report["cancel_job"] = kill_job, cancel_job
    ws = Workspace()

    def target(job_id: str, node: str) -> dict:
        return next((x for x in ws.get_job(job_id).get("targets") or [] if x["node_id"] == nodes[node]["node_id"]),
                    {})

    end = time.monotonic() + 150
    canceled_at = killed_at = None
    while time.monotonic() < end and (canceled_at is None or killed_at is None):
        if canceled_at is None and target(cancel_job, "a").get("fraction", 0) > 0.001:
            canceled_at = time.perf_counter()
            steps["cancel"] = sparsify("job", "cancel", cancel_job, "--json")
        c = target(kill_job, "c") if kill_job else {}
        if killed_at is None and c.get("status") == "running" and c.get("fraction", 0) > 0.01:
            pid = LocalCluster.raylet_pid("c")
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed_at = time.perf_counter()
                report["killed_raylet"] = {"pid": pid, "at_fraction": c.get("fraction")}
        time.sleep(0.05)
    steps["cancel_profile"] = finish(cancel_proc)
    report["cancel_seconds"] = round(time.perf_counter() - canceled_at, 2) if canceled_at else None
    job = ws.get_job(cancel_job)
    report["canceled_job"] = {"status": job.get("status"), "targets": job.get("targets"),
                              "finished": job.get("finished")}
    steps["kill"] = finish(kill_proc)
    phases["cancel_and_kill"] = round(time.perf_counter() - t, 2)
    time.sleep(0.5)
    report["locks_free_at_end"] = locks_free()

    def fleet_temp_dirs() -> list:
        return sorted(p.name for p in SHM.glob("sparsify-fleet-*")) + \
            sorted(p.name for p in (SHM / "tmp").glob("sparsify-fleet-*"))

    # a task killed with its node cannot remove its temp folder: the next sparsify-tui run on that machine does
    report["fleet_temp_dirs_after_runs"] = fleet_temp_dirs()
    steps["list"] = sparsify("list", "--json")
    report["fleet_temp_dirs_at_end"] = fleet_temp_dirs()
    state = workspace_state()
    report["profiles_added_by_cancel_and_kill"] = len(state["perf_profiles"]) - n_profiles
    report["workspace"] = state
    report["total_seconds"] = round(time.perf_counter() - t_start, 2)
    return report


def main() -> int:
    sys.path.insert(0, str(ROOT))
    prepare_namespace()
    try:
        report = run_scenario()
    except Exception as err:  # noqa: BLE001 - the test shows it
        import traceback

        report = {"crash": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()}
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
