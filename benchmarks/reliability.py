"""Reliability loops: kill -9 at random points of workspace writes, and concurrent writers (issue 11).

Run::

    python benchmarks/reliability.py                      # 100 kill iterations, 4 writers x 50 writes
    python benchmarks/reliability.py --iterations 300 --writers 6 --writes 100 --seed 7

**Kill loop.** A workspace holds a project ``base`` (the bundled demo model). Each iteration runs one real CLI
command in its own process, round robin: ``create`` (a new project), ``edit base --description``, ``optimize
base``, ``profile loss base`` (weight magnitude, stored as record + data file) and ``delete`` (a project made
earlier). The command gets ``SIGKILL`` after a random delay between 0 and 1.4x the median duration of its
completed runs (so about a third of the commands finish, the others die at a random point of their run). Then, like the next ``sparsify-tui`` start, the
loop runs :meth:`Workspace.recover` and checks:

* the workspace loads (``Workspace.list_projects``, and ``sparsify-tui list --json`` every 10 iterations);
* **corrupt files**: every ``*.json`` of the workspace parses;
* **lost records**: everything a *completed* command committed is there (its project, its description or a
  later one, its optimization, its loss profile with its data file, and a completed delete stays deleted);
* **records without data**: no loss-profile record lacks its data file;
* **leftovers**: no temp file, ``.creating-*`` or ``.deleting-*`` folder remains after recovery.

**Crash at every write point.** Each of the same commands runs in a forked child that dies like ``kill -9``
(``os._exit``, no clean-up) right before its 1st, then 2nd, 3rd ... disk-changing call (``os.replace``,
``os.mkdir``, ``os.unlink``, ``os.fsync``, ``shutil.rmtree`` ...), until it completes; the same checks follow each
crash. This reaches the short windows (between a data file and its record, between moving a deleted project's
folder and unindexing it) that random kills rarely hit.

**Concurrent writers.** ``--writers`` processes each make ``--writes`` rounds of: add an optimization record
to one shared project, change that project's description, add a job to the workspace table, and write a data
file. One more writer is killed with ``SIGKILL`` midway. Afterwards every record, job and data file of the
finished writers must be there and every JSON file must parse.

The figures printed are what the issue quotes: iterations, corrupt files, lost records, time.

**The hostile set** (``--hostile``, instead of the loops above): every hostile-input case of the reliability issues
(11, 21, 29), as the tests of :data:`HOSTILE_FILES` run them, in one command; prints per file and in total how many
cases pass, fail or are skipped, and the failing ones::

    python benchmarks/reliability.py --hostile            # all of them (about 10 min on a busy 2-core machine)
    python benchmarks/reliability.py --hostile -k keymap  # a subset (pytest's -k)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEMO = ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx"
DEMO_DIMS = ["--dim", "x:2=48", "--dim", "x:3=192"]
OPS = ("create", "edit", "optimize", "loss", "delete")


def _env(root: Path) -> Dict[str, str]:
    env = dict(os.environ, SPARSIFY_TUI_HOME=str(root), PYTHONPATH=str(ROOT))
    env.setdefault("SPARSIFY_TUI_MEASURE_LOCK", str(root.parent / "measure.lock"))
    return env


def cli(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``sparsify-tui ARGS`` in a new process on workspace ``root``."""
    return subprocess.run([sys.executable, "-m", "sparsify_tui", *args], env=_env(root), capture_output=True,
                          text=True, timeout=timeout)


def _command(op: str, i: int, victim: Optional[str]) -> List[str]:
    if op == "create":
        return ["create", str(DEMO), "--name", f"p{i}", *DEMO_DIMS]
    if op == "edit":
        return ["edit", "base", "--description", f"d{i}"]
    if op == "optimize":
        return ["optimize", "base", "--name", f"o{i}"]
    if op == "loss":
        return ["profile", "loss", "base", "--name", f"l{i}"]
    return ["delete", str(victim), "--yes"]


def workspace_files(root: Path) -> Dict[str, List[str]]:
    """``{"json": [...], "leftovers": [...]}``: the JSON files of a workspace and the temp files/folders of
    killed writes still in it."""
    out: Dict[str, List[str]] = {"json": [], "leftovers": []}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in list(dirnames):
            if d.startswith((".creating-", ".deleting-")):
                out["leftovers"].append(os.path.join(dirpath, d))
        for f in filenames:
            p = os.path.join(dirpath, f)
            if f.startswith(".") and f.endswith(".tmp"):
                out["leftovers"].append(p)
            elif f.endswith(".json"):
                out["json"].append(p)
    return out


def corrupt_files(root: Path) -> List[str]:
    """JSON files of the workspace that do not parse."""
    bad = []
    for p in workspace_files(root)["json"]:
        try:
            json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            bad.append(p)
    return bad


class Expected:
    """What completed commands committed (and what killed ones may have)."""

    def __init__(self) -> None:
        self.projects: set = {"base"}          # must exist
        self.maybe_projects: set = set()       # killed create/delete: may exist
        self.deleted: set = set()              # completed delete: must not exist
        self.descriptions: set = {""}          # base's description: the last committed one or a later attempt
        self.optimizations: set = set()
        self.loss_profiles: set = set()


def check(root: Path, exp: Expected) -> Dict[str, Any]:
    """Recover like a start-up, then compare the workspace with ``exp``. Returns the problems found."""
    from sparsify_tui.store import Workspace

    ws = Workspace(root)
    found = ws.recover()
    problems: Dict[str, Any] = {"load_failure": None, "lost": [], "without_data": [], "corrupt": [],
                                "leftovers": [], "recovered": len(found["removed"]) + len(found["deleted"])}
    problems["corrupt"] = corrupt_files(root)
    problems["leftovers"] = workspace_files(root)["leftovers"]
    try:  # a project folder nothing indexes is an orphan nothing would ever clean
        indexed = {e["id"] for e in ws._index()}
        problems["leftovers"] += [f"orphan folder {d.name}" for d in ws.projects_dir.iterdir()
                                  if d.is_dir() and not d.name.startswith(".") and d.name not in indexed]
    except (OSError, ValueError):
        pass
    try:
        projects = {p["name"]: p for p in ws.list_projects()}
        for name in projects:
            ws.analysis_of(projects[name]["id"])
    except Exception as err:  # noqa: BLE001 - reported
        problems["load_failure"] = f"{type(err).__name__}: {err}"
        return problems
    for name in exp.projects:
        if name not in projects:
            problems["lost"].append(f"project {name}")
    for name in exp.deleted:
        if name in projects:
            problems["lost"].append(f"deleted project {name} came back")
    base = projects.get("base")
    if base is not None:
        if base.get("description", "") not in exp.descriptions:
            problems["lost"].append(f"description {base.get('description')!r} not in {sorted(exp.descriptions)}")
        opts = {r["name"] for r in ws.list_records(base["id"], "optimizations")}
        problems["lost"] += [f"optimization {o}" for o in exp.optimizations - opts]
        loss = ws.list_records(base["id"], "loss_profiles")
        problems["lost"] += [f"loss profile {n}" for n in exp.loss_profiles - {r["name"] for r in loss}]
        for r in loss:
            path = ws.project_dir(base["id"]) / ws.record_blob_key("loss_profiles", r["id"])
            if not path.is_file():
                problems["without_data"].append(f"loss profile {r['name']}")
    return problems


def _existing(root: Path) -> List[str]:
    """Names of the projects the workspace lists now."""
    from sparsify_tui.store import Workspace

    return [p["name"] for p in Workspace(root).list_projects()]


def kill_loop(root: Path, iterations: int = 100, seed: int = 0, verbose: bool = False) -> Dict[str, Any]:
    """The kill -9 loop (module docstring) on a new workspace at ``root``. Returns the figures."""
    rng = random.Random(seed)
    t0 = time.perf_counter()
    r = cli(root, "create", str(DEMO), "--name", "base", *DEMO_DIMS)
    if r.returncode != 0:
        raise RuntimeError(f"cannot create the base project: {r.stderr}")
    exp = Expected()
    durations: Dict[str, List[float]] = {}  # of each command's completed runs
    figures = {"iterations": 0, "killed": 0, "completed": 0, "corrupt_files": 0, "lost_records": 0,
               "records_without_data": 0, "leftovers": 0, "load_failures": 0, "recovered": 0,
               "per_op": {op: [0, 0] for op in OPS}}
    problems_seen: List[str] = []
    for i in range(iterations):
        op = OPS[i % len(OPS)]
        victim = None
        if op == "delete":
            candidates = sorted(set(_existing(root)) - {"base"})
            if not candidates:
                cli(root, "create", str(DEMO), "--name", f"v{i}", *DEMO_DIMS)
                exp.projects.add(f"v{i}")
                candidates = [f"v{i}"]
            victim = rng.choice(candidates)
        cmd = _command(op, i, victim)
        ts = time.perf_counter()
        if op not in durations:  # calibrate: the full duration of this command
            first = subprocess.run([sys.executable, "-m", "sparsify_tui", *cmd], env=_env(root), capture_output=True)
            returncode, killed = first.returncode, False
        else:
            proc = subprocess.Popen([sys.executable, "-m", "sparsify_tui", *cmd], env=_env(root),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            typical = sorted(durations[op])[len(durations[op]) // 2]
            try:  # anywhere in the run, up to a bit after its usual end: most die mid-run, some finish
                proc.wait(timeout=rng.uniform(0.0, 1.4 * typical))
            except subprocess.TimeoutExpired:
                pass
            killed = proc.poll() is None
            if killed:
                os.kill(proc.pid, signal.SIGKILL)
            returncode = proc.wait()
        if not killed and returncode == 0:
            durations.setdefault(op, []).append(time.perf_counter() - ts)
        done = returncode == 0 and not killed
        figures["iterations"] += 1
        figures["killed" if killed else "completed"] += 1
        figures["per_op"][op][0 if killed else 1] += 1
        if op == "create":
            (exp.projects if done else exp.maybe_projects).add(f"p{i}")
        elif op == "edit":
            exp.descriptions = {f"d{i}"} if done else exp.descriptions | {f"d{i}"}
        elif op == "optimize" and done:
            exp.optimizations.add(f"o{i}")
        elif op == "loss" and done:
            exp.loss_profiles.add(f"l{i}")
        elif op == "delete":
            exp.projects.discard(victim)
            if done:
                exp.maybe_projects.discard(victim)
                exp.deleted.add(victim)
            else:
                exp.maybe_projects.add(victim)
        problems = check(root, exp)
        if i % 10 == 9:
            listed = cli(root, "list", "--json")
            if listed.returncode != 0:
                problems["load_failure"] = problems["load_failure"] or listed.stderr.strip()
        figures["corrupt_files"] += len(problems["corrupt"])
        figures["lost_records"] += len(problems["lost"])
        figures["records_without_data"] += len(problems["without_data"])
        figures["leftovers"] += len(problems["leftovers"])
        figures["load_failures"] += 1 if problems["load_failure"] else 0
        figures["recovered"] += 1 if problems["recovered"] else 0
        flat = problems["corrupt"] + problems["lost"] + problems["without_data"] + problems["leftovers"] + \
            ([problems["load_failure"]] if problems["load_failure"] else [])
        if flat:
            problems_seen.append(f"iteration {i} ({op}, {'killed' if killed else 'done'}): {flat}")
        if verbose:
            print(f"  {i:4d} {op:9s} {'killed' if killed else 'done  '} problems={len(flat)}", file=sys.stderr)
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    figures["problems"] = problems_seen
    return figures


# ------------------------------------------------------------------------------------------ crash points
#: The calls that change the disk; a crash is injected right before the k-th of them.
_WRITE_CALLS = (("os", "replace"), ("os", "rename"), ("os", "mkdir"), ("os", "unlink"), ("os", "rmdir"),
                ("os", "fsync"), ("os", "ftruncate"), ("shutil", "rmtree"), ("shutil", "copyfile"))


def _run_crashing_at(root: Path, args: List[str], k: int) -> int:
    """Run ``sparsify-tui ARGS`` in a forked child that dies like ``kill -9`` (``os._exit(137)``, no clean-up)
    right before its ``k``-th disk-changing call (:data:`_WRITE_CALLS`); ``k = 0`` never dies. Returns the exit
    code (137 when it died)."""
    pid = os.fork()
    if pid == 0:  # child
        import shutil

        try:
            os.environ["SPARSIFY_TUI_HOME"] = str(root)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            count = [0]
            mods = {"os": os, "shutil": shutil}

            def wrap(fn):
                def inner(*a, **kw):
                    count[0] += 1
                    if count[0] == k:
                        os._exit(137)
                    return fn(*a, **kw)
                return inner

            for mod, name in _WRITE_CALLS:
                setattr(mods[mod], name, wrap(getattr(mods[mod], name)))
            from sparsify_tui.cli import main

            try:
                code = main(args)
            except SystemExit as ex:
                code = ex.code if isinstance(ex.code, int) else 1
            os._exit(int(code or 0))
        except BaseException:  # noqa: BLE001
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def crash_points(root: Path, max_points: int = 400, ops=OPS, stride: int = 1) -> Dict[str, Any]:
    """Every disk-changing step of ``ops`` (create, edit, optimize, a loss profile and delete), crashed one at a
    time (:func:`_run_crashing_at` with k = 1, 1 + stride, ... until the command completes), each followed by
    the start-up recovery and the checks of the kill loop. Returns the figures."""
    import sparsify_tui.cli  # noqa: F401 - imported once, before the forks
    import onnx  # noqa: F401
    import numpy  # noqa: F401

    t0 = time.perf_counter()
    r = cli(root, "create", str(DEMO), "--name", "base", *DEMO_DIMS)
    if r.returncode != 0:
        raise RuntimeError(f"cannot create the base project: {r.stderr}")
    exp = Expected()
    figures = {"crash_points": 0, "completed": 0, "corrupt_files": 0, "lost_records": 0, "records_without_data": 0,
               "leftovers": 0, "load_failures": 0, "recovered": 0, "per_op": {}}
    problems_seen: List[str] = []
    i = 0
    for op in ops:
        k = 1
        while k <= max_points:
            i += 1
            victim = None
            if op == "delete":
                candidates = sorted(set(_existing(root)) - {"base"})
                if not candidates:
                    _run_crashing_at(root, _command("create", 10_000 + i, None), 0)
                    exp.projects.add(f"p{10_000 + i}")
                    candidates = [f"p{10_000 + i}"]
                victim = candidates[0]
            code = _run_crashing_at(root, _command(op, i, victim), k)
            done = code == 0
            if code not in (0, 137):
                problems_seen.append(f"{op} crash point {k}: exit code {code}")
            figures["crash_points" if not done else "completed"] += 1
            if op == "create":
                (exp.projects if done else exp.maybe_projects).add(f"p{i}")
            elif op == "edit":
                exp.descriptions = {f"d{i}"} if done else exp.descriptions | {f"d{i}"}
            elif op == "optimize" and done:
                exp.optimizations.add(f"o{i}")
            elif op == "loss" and done:
                exp.loss_profiles.add(f"l{i}")
            elif op == "delete":
                exp.projects.discard(victim)
                if done:
                    exp.maybe_projects.discard(victim)
                    exp.deleted.add(victim)
                else:
                    exp.maybe_projects.add(victim)
            problems = check(root, exp)
            for key, fig in (("corrupt", "corrupt_files"), ("lost", "lost_records"),
                             ("without_data", "records_without_data"), ("leftovers", "leftovers")):
                figures[fig] += len(problems[key])
            figures["load_failures"] += 1 if problems["load_failure"] else 0
            figures["recovered"] += 1 if problems["recovered"] else 0
            flat = problems["corrupt"] + problems["lost"] + problems["without_data"] + problems["leftovers"] + \
                ([problems["load_failure"]] if problems["load_failure"] else [])
            if flat:
                problems_seen.append(f"{op} crash point {k}: {flat}")
            if done:
                break
            k += stride
        figures["per_op"][op] = k - 1
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    figures["problems"] = problems_seen
    return figures


# ----------------------------------------------------------------------------------------------- writers
def _writer(root: str, project_id: str, wid: int, writes: int, delay: float) -> None:
    from sparsify_tui.store import Workspace

    ws = Workspace(root)
    for k in range(writes):
        tag = f"w{wid}-{k}"
        ws.add_record(project_id, "optimizations", {"name": tag, "writer": wid})
        ws.update_project(project_id, description=tag)
        ws.add_job({"id": f"job-{tag}", "type": "sleep", "project_id": project_id, "status": "completed"})
        ws.write_blob(project_id, f"writers/{tag}.json", {"tag": tag, "payload": list(range(200))})
        if delay:
            time.sleep(delay)


def concurrent_writers(root: Path, writers: int = 4, writes: int = 50) -> Dict[str, Any]:
    """``writers`` processes writing to one project at once, plus one killed with SIGKILL midway (module
    docstring). Returns the figures."""
    from sparsify_tui.store import Workspace

    t0 = time.perf_counter()
    r = cli(root, "create", str(DEMO), "--name", "shared", *DEMO_DIMS)
    if r.returncode != 0:
        raise RuntimeError(f"cannot create the shared project: {r.stderr}")
    ws = Workspace(root)
    pid = ws.get_project("shared")["id"]
    def spawn(wid: int, delay: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, __file__, "--writer", str(root), pid, str(wid), str(writes),
                                 str(delay)], env=_env(root))

    procs = [spawn(w, 0.0) for w in range(writers)]
    victim = spawn(writers, 0.005)
    time.sleep(0.5)
    if victim.poll() is None:
        os.kill(victim.pid, signal.SIGKILL)
    for p in procs + [victim]:
        p.wait()
    failed_writers = sum(1 for p in procs if p.returncode != 0)
    ws.recover()
    opts = {r["name"] for r in ws.list_records(pid, "optimizations")}
    jobs = {j["id"] for j in ws.list_jobs()}
    lost = 0
    for w in range(writers):
        for k in range(writes):
            tag = f"w{w}-{k}"
            lost += (tag not in opts) + (f"job-{tag}" not in jobs)
            lost += not (ws.project_dir(pid) / "writers" / f"{tag}.json").is_file()
    return {"writers": writers, "writes_each": writes, "writes": writers * writes * 4, "failed_writers": failed_writers,
            "lost_records": lost, "corrupt_files": len(corrupt_files(root)),
            "leftovers": len(workspace_files(root)["leftovers"]), "seconds": round(time.perf_counter() - t0, 1)}


# ----------------------------------------------------------------------------------------------- the hostile set
HOSTILE_FILES = ("tests/test_bad_input.py", "tests/test_reliability_bad_input.py", "tests/test_reliability_hostile.py",
                 "tests/test_reliability_store.py", "tests/test_reliability_hostile_round3.py")
"""The tests holding the hostile cases: bad models (issue 11), bad data and arguments, the store under kills and
races, the hostile set of issue 21 and the one of issue 29 (round 3)."""


def hostile_set(select: Optional[str] = None, workers: int = 0) -> Dict[str, Any]:
    """Run the hostile cases (:data:`HOSTILE_FILES`) with pytest in a child process; returns ``{"files": {file:
    {"passed", "failed", "skipped"}}, "failed": [case ids], "total": {...}, "seconds"}`` read from its JUnit XML."""
    import tempfile
    import xml.etree.ElementTree as ET

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sparsify-hostile-") as tmp:
        xml_path = Path(tmp) / "hostile.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(workers),
               f"--junitxml={xml_path}", *HOSTILE_FILES] + (["-k", select] if select else [])
        subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL)
        files: Dict[str, Dict[str, int]] = {f: {"passed": 0, "failed": 0, "skipped": 0} for f in HOSTILE_FILES}
        failed: List[str] = []
        for case in ET.parse(xml_path).getroot().iter("testcase"):
            module = (case.get("classname") or "").split(".")[-1]
            name = f"tests/{module}.py"
            outcome = "skipped" if case.find("skipped") is not None else \
                "failed" if case.find("failure") is not None or case.find("error") is not None else "passed"
            files.setdefault(name, {"passed": 0, "failed": 0, "skipped": 0})[outcome] += 1
            if outcome == "failed":
                failed.append(f"{name}::{case.get('name')}")
    total = {k: sum(f[k] for f in files.values()) for k in ("passed", "failed", "skipped")}
    return {"files": files, "failed": failed, "total": total, "seconds": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--writer"]:  # one concurrent writer process (see concurrent_writers)
        root, pid, wid, writes, delay = argv[1:6]
        _writer(root, pid, int(wid), int(writes), float(delay))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=100, help="kill -9 iterations (default 100)")
    parser.add_argument("--writers", type=int, default=4, help="concurrent writer processes (default 4)")
    parser.add_argument("--writes", type=int, default=50, help="write rounds per writer (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=None, help="where the workspaces go (default a new temp folder)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--hostile", action="store_true",
                        help="run the hostile set (the cases of HOSTILE_FILES) instead of the kill/crash/writer loops")
    parser.add_argument("-k", dest="select", default=None, help="with --hostile: only the cases pytest -k selects")
    parser.add_argument("-n", dest="workers", type=int, default=0, help="with --hostile: pytest-xdist workers (0)")
    args = parser.parse_args(argv)
    if args.hostile:
        h = hostile_set(args.select, args.workers)
        for name, counts in h["files"].items():
            print(f"{name}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
        t = h["total"]
        print(f"hostile set: {t['passed']} of {t['passed'] + t['failed']} cases pass ({t['skipped']} skipped), "
              f"time {h['seconds']} s")
        for case in h["failed"]:
            print(f"  FAILED {case}")
        return 1 if t["failed"] or not t["passed"] else 0
    import tempfile

    work = Path(args.workdir or tempfile.mkdtemp(prefix="sparsify-reliability-"))
    print(f"workspaces under {work}", file=sys.stderr)
    k = kill_loop(work / "kill", args.iterations, args.seed, args.verbose)
    cp = crash_points(work / "crash")
    c = concurrent_writers(work / "writers", args.writers, args.writes)
    print(f"kill -9 loop: {k['iterations']} iterations ({k['killed']} killed mid-run, {k['completed']} completed; "
          + ", ".join(f"{op} {n[0]}/{n[0] + n[1]} killed" for op, n in k["per_op"].items()) + ")")
    print(f"  {k['recovered']} kills left a half-done write that start-up recovery cleaned (temp files, "
          ".creating/.deleting folders, unindexed folders)")
    print(f"  corrupt files {k['corrupt_files']}, lost records {k['lost_records']}, records without data "
          f"{k['records_without_data']}, leftovers after recovery {k['leftovers']}, load failures "
          f"{k['load_failures']}, time {k['seconds']} s")
    for line in k["problems"][:20]:
        print(f"  PROBLEM {line}")
    print(f"crash at every write point: {cp['crash_points']} crash points ("
          + ", ".join(f"{op} {n}" for op, n in cp["per_op"].items()) + f"), each command then run to completion "
          f"({cp['completed']}): corrupt files {cp['corrupt_files']}, lost records {cp['lost_records']}, records "
          f"without data {cp['records_without_data']}, leftovers after recovery {cp['leftovers']}, load failures "
          f"{cp['load_failures']}, time {cp['seconds']} s")
    for line in cp["problems"][:20]:
        print(f"  PROBLEM {line}")
    print(f"concurrent writers: {c['writers']} processes x {c['writes_each']} rounds ({c['writes']} writes) + 1 "
          f"killed midway: lost records {c['lost_records']}, corrupt files {c['corrupt_files']}, leftovers "
          f"{c['leftovers']}, failed writers {c['failed_writers']}, time {c['seconds']} s")
    bad = (k["corrupt_files"] + k["lost_records"] + k["records_without_data"] + k["leftovers"] + k["load_failures"]
           + cp["corrupt_files"] + cp["lost_records"] + cp["records_without_data"] + cp["leftovers"]
           + cp["load_failures"] + len(cp["problems"])
           + c["lost_records"] + c["corrupt_files"] + c["failed_writers"] + c["leftovers"])
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
