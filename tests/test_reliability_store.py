"""No record without its data, deletes and creates that survive kill -9, stale temp files cleaned at start-up,
foreground job logs, and concurrent writers (issue 11, items 5, 6 and 7).

The kill -9 loop and the concurrent writers are those of ``benchmarks/reliability.py`` with a handful of
iterations here; the script runs them for 100+ iterations.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reliability_helpers import DEMO, ROOT, run_cli, run_main

DIMS = ["--dim", "x:2=48", "--dim", "x:3=192"]


def _bench():
    spec = importlib.util.spec_from_file_location("reliability_bench", ROOT / "benchmarks" / "reliability.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture
def ws(workspace_home, capsys):
    from sparsify_tui.store import Workspace

    r = run_main(capsys, "create", DEMO, "--name", "demo", *DIMS)
    assert r.code == 0, r.err
    return Workspace()


def test_kill_loop_loses_nothing(tmp_path):
    figures = _bench().kill_loop(tmp_path / "ws", iterations=10, seed=1)
    assert figures["iterations"] == 10
    assert figures["problems"] == []
    for key in ("corrupt_files", "lost_records", "records_without_data", "leftovers", "load_failures"):
        assert figures[key] == 0, figures


@pytest.mark.skipif(not hasattr(os, "fork"), reason="crash points fork the command")
def test_crash_at_every_write_point_of_edit_and_delete(tmp_path):
    figures = _bench().crash_points(tmp_path / "ws", ops=("edit", "delete"), stride=2)
    assert figures["problems"] == [] and figures["crash_points"] >= 5, figures
    for key in ("corrupt_files", "lost_records", "records_without_data", "leftovers", "load_failures"):
        assert figures[key] == 0, figures


def test_concurrent_writers_lose_nothing(tmp_path):
    figures = _bench().concurrent_writers(tmp_path / "ws", writers=3, writes=12)
    assert figures["failed_writers"] == 0 and figures["lost_records"] == 0, figures
    assert figures["corrupt_files"] == 0 and figures["leftovers"] == 0, figures


def test_a_record_whose_data_file_is_missing_is_skipped_and_reported(ws, capsys):
    pid = ws.get_project("demo")["id"]
    assert run_main(capsys, "profile", "loss", "demo", "--name", "good").code == 0
    # a loss profile record whose data file never got written (or was deleted by hand)
    ws.add_record(pid, "loss_profiles", {"name": "broken", "method": "magnitude", "status": "completed",
                                         "created": "9999-01-01T00:00:00.000Z"})
    r = run_main(capsys, "optimize", "demo", "--name", "o1", "--json")
    assert r.code == 0, r.err
    rec = json.loads(r.out)
    assert rec["loss_profile"] != "approximated" and rec["loss_profile_name"] == "good"
    assert any("'broken'" in w and "skipped" in w for w in rec["warnings"])


def test_data_file_is_written_before_its_record(ws, monkeypatch):
    """A kill between the two writes can only leave an unreferenced data file, never a record without data."""
    from sparsify_tui.store import workspace as wsmod

    pid = ws.get_project("demo")["id"]
    calls = []
    real_write, real_add = wsmod.Workspace.write_blob, wsmod.Workspace.add_record

    def write_blob(self, *a, **k):
        calls.append("data")
        return real_write(self, *a, **k)

    def add_record(self, *a, **k):
        calls.append("record")
        raise KeyboardInterrupt  # the process dies right here

    monkeypatch.setattr(wsmod.Workspace, "write_blob", write_blob)
    monkeypatch.setattr(wsmod.Workspace, "add_record", add_record)
    with pytest.raises(KeyboardInterrupt):
        ws.add_record_with_blob(pid, "perf_profiles", {"name": "p"}, {"profile": {}})
    monkeypatch.setattr(wsmod.Workspace, "add_record", real_add)
    assert calls == ["data", "record"]
    assert ws.list_records(pid, "perf_profiles") == []


def test_delete_moves_the_folder_before_unindexing_and_start_up_finishes_it(ws, capsys):
    pid = ws.get_project("demo")["id"]
    # the state a kill leaves between the two steps of delete_project: folder moved aside, index entry still there
    os.replace(ws.projects_dir / pid, ws.projects_dir / f".deleting-{pid}")
    r = run_main(capsys, "list", "--json")  # any start of sparsify-tui recovers
    assert r.code == 0 and json.loads(r.out) == []
    assert not (ws.projects_dir / f".deleting-{pid}").exists()
    assert ws._index() == []


def test_delete_order(ws, monkeypatch):
    """The folder is moved before the index entry goes: a kill in between is recoverable, never an orphan."""
    pid = ws.get_project("demo")["id"]
    events = []
    real_replace = os.replace

    def spy_replace(a, b):
        events.append(("move", Path(b).name))
        return real_replace(a, b)

    from tinydb.table import Table

    real_remove = Table.remove

    def spy_remove(self, *a, **k):
        events.append(("unindex", self.name))
        return real_remove(self, *a, **k)

    monkeypatch.setattr(os, "replace", spy_replace)
    monkeypatch.setattr(Table, "remove", spy_remove)
    ws.delete_project(pid)
    moves = [i for i, e in enumerate(events) if e == ("move", f".deleting-{pid}")]
    unindex = [i for i, e in enumerate(events) if e == ("unindex", "projects")]
    assert moves and unindex and moves[0] < unindex[0]


def _hold_lock(path: Path) -> subprocess.Popen:
    """Another live process holding ``flock`` on ``path`` (what a process in another PID namespace looks like:
    its pid means nothing here, its lock does)."""
    proc = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                             "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
                             "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(120)", str(path)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_create_killed_after_moving_its_folder_is_undone_at_start_up(ws, capsys):
    """Only the folder's own marker (the unfinished-create lock file, held by nobody) proves a killed create."""
    import shutil

    from sparsify_tui.tempfiles import OWNER_LOCK

    pid = ws.get_project("demo")["id"]
    orphan = ws.projects_dir / "0123456789"
    shutil.copytree(ws.projects_dir / pid, orphan)  # moved into place, never indexed: the create was killed
    (orphan / OWNER_LOCK).write_text("")
    live = ws.projects_dir / "9876543210"
    shutil.copytree(ws.projects_dir / pid, live)  # a create still running (its process holds the marker)
    holder = _hold_lock(live / OWNER_LOCK)
    try:
        assert run_main(capsys, "list").code == 0
        assert not orphan.exists() and (ws.projects_dir / pid).is_dir() and live.is_dir()
        assert [p["id"] for p in ws.list_projects()] == [pid]
    finally:
        holder.kill()
        holder.wait()


def test_a_complete_folder_the_index_lacks_is_indexed_again_never_deleted(ws, capsys):
    import shutil

    pid = ws.get_project("demo")["id"]
    copy = ws.projects_dir / "0123456789"
    shutil.copytree(ws.projects_dir / pid, copy)
    data = json.loads((copy / "project.json").read_text())
    doc = data["project"]["1"]
    doc["id"], doc["name"] = "0123456789", "copied"
    (copy / "project.json").write_text(json.dumps(data))
    assert run_main(capsys, "list").code == 0
    assert sorted(p["name"] for p in ws.list_projects()) == ["copied", "demo"]


def test_stale_temp_files_and_folders_are_removed_at_start_up_and_live_ones_kept(ws, capsys):
    from sparsify_tui.tempfiles import OWNER_LOCK

    pid = ws.get_project("demo")["id"]
    pdir = ws.projects_dir / pid
    dead, me = _dead_pid(), os.getpid()
    stale = [ws.root / f".workspace.json.{dead}.abc123.tmp", pdir / f".project.json.{dead}.x_1.tmp",
             pdir / "perf_profiles" / f".0123456789.json.{dead}.q.tmp"]
    live = [pdir / f".project.json.{me}.live.tmp"]
    old = pdir / ".analysis.json.zzz.tmp"  # an old-style name without a pid: removed once an hour old
    for f in stale + live + [old]:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("{half")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    creating_dead = ws.projects_dir / f".creating-0123456789-{dead}"
    creating_live = ws.projects_dir / f".creating-9876543210-{dead}"  # held by a process whose pid we cannot see
    creating_dead.mkdir()
    creating_live.mkdir()
    (creating_dead / OWNER_LOCK).write_text("")
    import tempfile

    shm = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
    perf_dead = shm / f"sparsify-perf-{dead}-test"
    perf_held = shm / f"sparsify-perf-{dead}-held"  # e.g. a fleet task in another PID namespace on this host
    perf_unknown = shm / f"sparsify-perf-{dead}-nolock"  # no lock file: kept until a day old, whatever its pid
    for f in (perf_dead, perf_held, perf_unknown):
        f.mkdir(exist_ok=True)
    (perf_dead / OWNER_LOCK).write_text("")
    holders = [_hold_lock(creating_live / OWNER_LOCK), _hold_lock(perf_held / OWNER_LOCK)]
    try:
        assert run_main(capsys, "list").code == 0
        for f in stale + [old, creating_dead, perf_dead]:
            assert not f.exists(), f
        for f in live + [creating_live, perf_held, perf_unknown]:
            assert f.exists(), f
    finally:
        for h in holders:
            h.kill()
            h.wait()
    assert run_main(capsys, "list").code == 0  # the holders are gone: so are their folders
    assert not creating_live.exists() and not perf_held.exists() and perf_unknown.exists()
    os.utime(perf_unknown, (time.time() - 2 * 86400, time.time() - 2 * 86400))
    assert run_main(capsys, "list").code == 0
    assert not perf_unknown.exists()
    live[0].unlink()


def test_killed_foreground_job_is_marked_error_and_its_log_exists(ws, tmp_path):
    env = {"SPARSIFY_TUI_HOME": str(ws.root)}
    proc = subprocess.Popen([sys.executable, "-m", "sparsify_tui", "profile", "perf", "demo", "--iterations", "100000",
                             "--warmup", "0", "--no-int8"], env=dict(os.environ, PYTHONPATH=str(ROOT), **env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from sparsify_tui import jobs

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = [j for j in ws.list_jobs() if j.get("status") == "running"
                   and (j.get("progress") or {}).get("fraction", 0) > 0]
        if running:
            break
        time.sleep(0.1)
    assert running, "the job never started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    job = jobs.get_job(ws, running[0]["id"])
    assert job["status"] == "error" and "killed" in job["error"] or "vanished" in job["error"]
    log = jobs.log_path(ws, job["id"])
    assert log.is_file() and str(log) in job["error"]
    r = run_cli("job", "log", job["id"], home=ws.root)
    assert r.code == 0 and "foreground job" in r.out and "timing" in r.out


def test_failed_argument_checks_leave_no_job_record(ws, capsys):
    for args in (["profile", "perf", "demo", "--cores", "1000"], ["benchmark", "demo", "--optimization", "nosuch"],
                 ["profile", "loss", "demo", "--method", "one-shot", "--batches", "0"]):
        assert run_main(capsys, *args).code == 2
    assert ws.list_jobs() == []
    assert not ws.jobs_dir.exists() or list(ws.jobs_dir.iterdir()) == []


def test_reapply_forgets_the_old_file_first(ws, capsys, monkeypatch):
    """A kill while an optimized model is rewritten must not leave a record vouching for a half-written file."""
    assert run_main(capsys, "optimize", "demo", "--name", "o").code == 0
    assert run_main(capsys, "apply", "demo", "o").code == 0
    from sparsify_tui.optimization import apply as apply_mod
    from sparsify_tui.services.optimizations import get_optimization

    pid = ws.get_project("demo")["id"]
    seen = {}

    def dying_apply(*a, **k):
        seen["applied_during_write"] = get_optimization(ws, pid, "o").applied
        raise KeyboardInterrupt

    monkeypatch.setattr(apply_mod, "apply_optimization", dying_apply)
    assert run_main(capsys, "apply", "demo", "o").code == 130  # interrupted mid-write
    assert seen["applied_during_write"] is None
    assert get_optimization(ws, pid, "o").applied is None
