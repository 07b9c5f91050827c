"""Fleet: the commands against a real 3-node Ray cluster on this machine, and what works without one.

The cluster test runs ``tests/fleet_scenario.py`` once, inside a fresh network, PID and mount namespace with only
loopback (``unshare -n -p -f --mount-proc``, as root): Ray advertises the interface address and listens on every
interface, so only there does all of its traffic stay on 127.0.0.1; the PID namespace ends every Ray process with
the scenario, so the cluster is always shut down and nothing is stopped by name. The tests below assert on the
scenario's report. They skip, saying why, when Ray is not installed or namespaces cannot be made here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "tests" / "fleet_scenario.py"
SCENARIO_TIMEOUT_S = 300
# one pytest-xdist worker runs this module (`--dist loadgroup` in pyproject.toml): the module-scoped scenario starts
# its Ray cluster once, not once per worker (spread over 4 workers it ran 4 clusters at once, 158 s each)
pytestmark = pytest.mark.xdist_group("fleet")
"""The whole scenario (cluster start, every command, the namespace's end) must end within this many seconds: a guard
against a hang, not a speed check (it takes about 50 s alone on a 2-core machine, and took 93 s within the suite on
that machine loaded by other work; each of its steps gives up after at most 240 s)."""


# ------------------------------------------------------------------------------------ without a cluster
def run_cli(*args: str, env: dict | None = None, prelude: str = "") -> subprocess.CompletedProcess:
    code = f"{prelude}\nimport sys\nfrom sparsify_tui.cli import main\nsys.exit(main({list(args)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args", [("fleet", "nodes", "--address", "127.0.0.1:6379"),
                                  ("fleet", "profile", "demo", "--address", "127.0.0.1:6379")])
def test_without_ray_every_fleet_command_says_how_to_install_it(args, workspace_home):
    proc = run_cli(*args, env={"SPARSIFY_TUI_HOME": str(workspace_home)},
                   prelude="import sys; sys.modules['ray'] = None  # as if Ray were not installed")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == ['sparsify-tui: error: the fleet commands need Ray, which is not installed: '
                     'pip install "sparsify-tui[fleet]"']
    assert proc.stdout == ""


def test_fleet_without_an_address_names_the_flag_and_the_variable(workspace_home):
    env = {"SPARSIFY_TUI_HOME": str(workspace_home), "RAY_ADDRESS": ""}
    proc = run_cli("fleet", "nodes", env=env)
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (pip install -e '.[fleet]'): the install hint comes first")
    assert proc.returncode == 2
    assert "--address HOST:PORT" in proc.stderr and "$RAY_ADDRESS" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("value, fragment", [
    ("ray://10.0.0.5:10001", "--address ray://10.0.0.5:10001 is not allowed: --address must be the head node's"),
    ("10.0.0.5", "--address 10.0.0.5 is not allowed: --address must be the Ray head node's HOST:PORT"),
    ("10.0.0.5:99999", "--address 10.0.0.5:99999 is not allowed"),
])
def test_fleet_address_rejects_what_is_not_a_head_node_address(value, fragment):
    from sparsify_tui import settings
    from sparsify_tui.errors import SparsifyError

    with pytest.raises(SparsifyError) as err:
        settings.fleet_address(value)
    assert str(err.value).startswith(fragment)


def test_fleet_targets_parses_all_ids_and_labels():
    from sparsify_tui import settings
    from sparsify_tui.errors import SparsifyError

    assert settings.fleet_targets("all") == {"all": True}
    assert settings.fleet_targets("ABCDEF12, 0123456789") == {"ids": ["abcdef12", "0123456789"]}
    assert settings.fleet_targets("cpu=epyc-genoa,zone=a") == {"labels": {"cpu": "epyc-genoa", "zone": "a"}}
    for bad in ("", "all,abcdef12", "abc", "cpu=genoa,abcdef12", "=genoa"):
        with pytest.raises(SparsifyError, match="--targets"):
            settings.fleet_targets(bad)


def test_select_targets_by_label_and_id_prefix():
    from sparsify_tui.errors import SparsifyError
    from sparsify_tui.fleet.cluster import NodeInfo, select_targets

    a = NodeInfo("aa11" * 14, hostname="h1", ray_cpus=2, labels={"cpu": "genoa"})
    b = NodeInfo("bb22" * 14, hostname="h2", ray_cpus=2, labels={"cpu": "skylake"})
    driver = NodeInfo("cc33" * 14, hostname="me", ray_cpus=0, labels={"cpu": "genoa"})
    nodes = [a, b, driver]
    assert select_targets(nodes, "all") == [a, b]  # a node started with --num-cpus 0 is not measurable
    assert select_targets(nodes, "bb22bb") == [b]
    with pytest.raises(SparsifyError, match="has no CPUs in Ray"):
        select_targets(nodes, "cpu=genoa")
    with pytest.raises(SparsifyError, match="matches no node of the cluster: its labels are cpu=genoa, cpu=skylake"):
        select_targets(nodes, "cpu=zen5")
    with pytest.raises(SparsifyError, match="no alive node has id dddddd"):
        select_targets(nodes, "dddddd")


def test_target_labels_add_the_node_id_only_where_hostnames_collide():
    from sparsify_tui.fleet.cluster import NodeInfo, target_labels

    nodes = [NodeInfo("aa" * 28, hostname="gpu1"), NodeInfo("bb" * 28, hostname="box"),
             NodeInfo("cc" * 28, hostname="box")]
    assert target_labels(nodes) == {"aa" * 28: "gpu1", "bb" * 28: "box-bbbbbb", "cc" * 28: "box-cccccc"}


# ------------------------------------------------------------------------------------- the real cluster
def _namespace_problem() -> str | None:
    """Why the scenario cannot run here, or None."""
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed: pip install -e '.[fleet]' (CI installs it)"
    if not sys.platform.startswith("linux"):
        return "needs Linux network and PID namespaces"
    if os.geteuid() != 0:
        return "needs root to make a network namespace (unshare -n)"
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            return f"needs the {tool} command (util-linux / iproute2)"
    probe = subprocess.run(["unshare", "-n", "-p", "-f", "--mount-proc", "--kill-child", "sh", "-c",
                            "ip link set lo up"], capture_output=True, text=True, timeout=30)
    if probe.returncode:
        return f"cannot make a network and PID namespace here: {(probe.stderr or probe.stdout).strip()[:200]}"
    return None


def _processes_mentioning(token: str) -> list[str]:
    """Command lines of this machine's processes that contain ``token`` (the scenario's Ray temp folder)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if token in cmd:
            found.append(f"{pid}: {cmd[:120]}")
    return found


@pytest.fixture(scope="module")
def scenario() -> dict:
    """The scenario's report (one run for every test of this module)."""
    problem = _namespace_problem()
    if problem:
        pytest.skip(problem)
    token = f"fleet-test-{uuid.uuid4().hex[:10]}"
    # bash stays process 1 of the namespace and reaps orphans as init does: a killed raylet must not linger as a
    # zombie, or its workers would think it alive
    cmd = ["unshare", "-n", "-p", "-f", "--mount-proc", "--kill-child", "bash", "-c",
           f"ip link set lo up && {sys.executable} {SCENARIO}; exit $?"]
    env = {**os.environ, "FLEET_SCENARIO_TOKEN": token}
    env.pop("RAY_ADDRESS", None)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SCENARIO_TIMEOUT_S, env=env, cwd=ROOT,
                              stdin=subprocess.DEVNULL)
        out, err = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:  # the namespace ends with unshare (--kill-child), the cluster with it
        out, err = exc.stdout or "", exc.stderr or ""
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        err = err.decode(errors="replace") if isinstance(err, bytes) else err
        report = {"crash": f"the scenario took more than {SCENARIO_TIMEOUT_S} s"}
    else:
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        report = json.loads(lines[-1]) if lines else {"crash": f"no report (exit code {proc.returncode})"}
    report["left_running"] = _processes_mentioning(token)
    if "crash" in report:
        pytest.fail(f"fleet scenario failed: {report['crash']}\n{report.get('traceback', '')}\n"
                    f"stderr tail: {err[-3000:]}")
    return report


def test_the_cluster_ends_with_the_scenario_and_leaves_nothing_behind(scenario):
    assert scenario["left_running"] == []  # the cluster ended with its namespace
    assert scenario["locks_free_at_end"]
    # only the task killed with node c may leave its temp folder, and the next sparsify-tui run removes it
    assert len(scenario["fleet_temp_dirs_after_runs"]) <= 1
    assert scenario["steps"]["list"]["rc"] == 0
    assert scenario["fleet_temp_dirs_at_end"] == []


def test_fleet_nodes_lists_every_node_with_what_it_says_about_itself(scenario):
    step = scenario["steps"]["nodes"]
    assert step["rc"] == 0, step["stderr"]
    nodes = step["stdout"]["nodes"]
    assert sorted(n["labels"]["node"] for n in nodes) == ["a", "b", "c"]
    assert len({n["node_id"] for n in nodes}) == 3
    assert [n["is_head"] for n in nodes] == [True, False, False]  # head first
    for n in nodes:
        assert n["error"] is None
        assert n["address"] == "127.0.0.1"
        assert n["ray_cpus"] == 1
        assert n["resources"] == {f"node_{n['labels']['node']}": 1}
        assert n["hostname"] and n["cpu_model"] and n["cores"] >= 1 and n["ort_version"]
        assert n["instruction_sets"]  # what the node's CPU reports
    assert {n["labels"]["node"]: n["labels"]["cpu"] for n in nodes} == {"a": "alpha", "b": "beta", "c": "beta"}


@pytest.mark.parametrize("step, message", [
    ("bad_address", "cannot reach the Ray cluster at 127.0.0.1:9"),
    ("bad_label", "--targets cpu=gamma matches no node of the cluster: its labels are cpu=alpha, cpu=beta"),
    ("bad_id", "--targets: no alive node has id abcdef012345"),
    ("bad_cores", "--cores 999 is more than the"),
    ("bad_optimization", "no optimizations record 'nope'"),
])
def test_bad_fleet_input_is_one_line_exit_2_and_no_job(scenario, step, message):
    res = scenario["steps"][step]
    assert res["rc"] == 2
    assert len(res["stderr"]) == 1 and message in res["stderr"][0], res["stderr"]
    assert scenario["jobs_after_bad_input"] == 0


def test_fleet_profile_all_stores_one_profile_per_node(scenario):
    step = scenario["steps"]["profile_all"]
    assert step["rc"] == 0, step["stderr"]
    targets = step["stdout"]["targets"]
    assert [t["status"] for t in targets] == ["completed"] * 3
    ids = scenario["node_ids"]
    assert sorted(t["node_id"] for t in targets) == sorted(ids.values())
    job = next(j for j in scenario["workspace"]["jobs"] if j["id"] == step["stdout"]["job"])
    assert job["status"] == "completed"
    stored = {r["id"]: r for r in scenario["workspace"]["perf_profiles"]}
    recs = [stored[t["record_id"]] for t in targets]
    assert len({r["target"]["node_id"] for r in recs}) == 3  # distinct node ids, stored as ordinary profiles
    for t, r in zip(targets, recs):
        assert r["target"]["node_id"] == t["node_id"]
        assert r["name"] == f"{t['label']} b1 1c"  # the default name: <target> b<batch> <cores>c
        assert r["core_count"] == 1 and r["batch_size"] == 1
        assert r["target"]["cpu_model"] and r["target"]["instruction_sets"]
    # every stored profile loads like a local one (the views and the comparison read them)
    assert all(ms and ms > 0 for ms in scenario["workspace"]["perf_loads"])


def test_fleet_benchmark_applies_once_and_measures_on_the_labelled_nodes(scenario):
    step = scenario["steps"]["benchmark_beta"]
    assert step["rc"] == 0, step["stderr"]
    targets = step["stdout"]["targets"]
    ids = scenario["node_ids"]
    assert sorted(t["node_id"] for t in targets) == sorted([ids["b"], ids["c"]])
    stored = {r["id"]: r for r in scenario["workspace"]["benchmarks"]}
    for t in targets:
        rec = stored[t["record_id"]]
        assert rec["target"]["node_id"] == t["node_id"]
        assert {s["model"] for s in rec["summary"]} == {"baseline", "o1"}


def test_killing_a_nodes_raylet_mid_run_fails_that_target_only(scenario):
    assert scenario.get("killed_raylet"), "the scenario never saw node c measuring"
    step = scenario["steps"]["kill"]
    assert step["rc"] == 1  # some targets failed, the others are stored
    by_node = {t["node_id"]: t for t in step["stdout"]["targets"]}
    ids = scenario["node_ids"]
    dead, alive = by_node[ids["c"]], by_node[ids["b"]]
    assert dead["status"] == "error" and "died during the measurement" in dead["error"]
    assert "record_id" not in dead
    assert alive["status"] == "completed" and alive["record_id"]
    assert alive["record_id"] in {r["id"] for r in scenario["workspace"]["perf_profiles"]}
    job = next(j for j in scenario["workspace"]["jobs"] if j["id"] == scenario["kill_job"])
    assert job["status"] == "completed"
    assert {t["node_id"]: t["status"] for t in job["targets"]} == {ids["b"]: "completed", ids["c"]: "error"}


def test_cancel_stops_the_fleet_job_and_stores_nothing_of_it(scenario):
    assert scenario["steps"]["cancel"]["rc"] == 0
    assert scenario["steps"]["cancel_profile"]["rc"] == 3
    assert scenario["canceled_job"]["status"] == "canceled"
    assert [t["status"] for t in scenario["canceled_job"]["targets"]] == ["canceled"]
    assert scenario["profiles_added_by_cancel_and_kill"] == 1  # node b's profile of the kill run, nothing else
