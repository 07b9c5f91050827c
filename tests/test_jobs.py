"""Jobs in real detached processes: completion, progress, cancel, crashes, vanished pids, queueing.

Timeouts below are generous upper bounds so a loaded CI machine does not hang the suite; they are
not performance claims.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sparsify_tui import jobs
from sparsify_tui.jobs.runner import MeasureLock, log_path
from sparsify_tui.store import Workspace
from sparsify_tui.store.workspace import now_iso

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 60.0


@pytest.fixture
def ws(tmp_path, monkeypatch) -> Workspace:
    # a private measuring lock, so these tests never queue behind (or block) real jobs on this machine
    monkeypatch.setenv("SPARSIFY_TUI_MEASURE_LOCK", str(tmp_path / "measure.lock"))
    monkeypatch.setenv("SPARSIFY_TUI_HOME", str(tmp_path / "ws"))
    return Workspace(tmp_path / "ws")


def wait_until(fn, timeout=TIMEOUT, poll=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = fn()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError("condition not reached before the timeout")


def test_submit_runs_to_completion_in_its_own_process(ws):
    job = jobs.submit(ws, None, "sleep", {"steps": 2, "step_s": 0.05})
    assert job["status"] == "pending" and job["pid"] and job["pid"] != os.getpid()
    done = jobs.wait(ws, job["id"], TIMEOUT)
    assert done["status"] == "completed"
    assert done["result"]["steps"] == 2
    assert done["progress"]["fraction"] == 1.0
    assert done["started"] and done["finished"] >= done["started"]
    assert "sleep job: step 2/2" in log_path(ws, job["id"]).read_text()
    # the job process ran in its own session (detached from our terminal)
    assert done["pid"] != os.getpid()


def test_progress_has_step_fraction_and_eta(ws):
    job = jobs.submit(ws, None, "sleep", {"steps": 8, "step_s": 0.25})

    def mid():
        j = jobs.get_job(ws, job["id"])
        p = j["progress"]
        return j if j["status"] == "running" and 0 < p["fraction"] < 1 and p["eta_s"] is not None else None

    j = wait_until(mid)
    assert j["progress"]["step"].startswith("step ")
    assert j["progress"]["eta_s"] >= 0
    assert jobs.wait(ws, job["id"], TIMEOUT)["status"] == "completed"


def test_cancel_stops_a_running_job(ws):
    job = jobs.submit(ws, None, "sleep", {"steps": 1000, "step_s": 0.1})
    wait_until(lambda: jobs.get_job(ws, job["id"])["status"] == "running")
    jobs.cancel(ws, job["id"])
    done = jobs.wait(ws, job["id"], 10)
    assert done["status"] == "canceled"
    assert done["finished"]


def test_sigkilled_job_is_marked_error_with_log_tail(ws):
    job = jobs.submit(ws, None, "sleep", {"steps": 1000, "step_s": 0.1})
    wait_until(lambda: "step 2/" in log_path(ws, job["id"]).read_text())
    os.kill(job["pid"], signal.SIGKILL)
    done = jobs.wait(ws, job["id"], TIMEOUT)
    assert done["status"] == "error"
    assert "SIGKILL" in done["error"] or "vanished" in done["error"]
    assert "sleep job: step" in done["stderr_tail"]


def test_native_crash_is_marked_error_with_fault_trace(ws):
    job = jobs.submit(ws, None, "sleep", {"steps": 1, "step_s": 0.01, "crash": True})
    done = jobs.wait(ws, job["id"], TIMEOUT)
    assert done["status"] == "error"
    assert "Segmentation fault" in done["stderr_tail"]


def test_handler_error_is_recorded(ws):
    job = jobs.submit(ws, None, "sleep", {"steps": 1, "step_s": 0.01, "fail": "the model broke: fix it"})
    done = jobs.wait(ws, job["id"], TIMEOUT)
    assert done["status"] == "error" and done["error"] == "the model broke: fix it"


def test_refresh_marks_vanished_process_as_error(ws):
    # a job whose recorded process is gone (as after a reboot or a kill while nobody watched)
    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('last words', file=sys.stderr)"],
                            stderr=subprocess.PIPE)
    _, err = proc.communicate()
    ws.jobs_dir.mkdir(parents=True, exist_ok=True)
    log_path(ws, "ghost").write_bytes(err)
    ws.add_job({"id": "ghost", "project_id": None, "type": "sleep", "args": {}, "status": "running",
                "progress": {"step": "x", "fraction": 0.5, "eta_s": 1}, "queued_behind": None,
                "pid": proc.pid, "pid_start": None, "created": now_iso(), "cancel_requested": False})
    changed = jobs.refresh(ws)
    assert [j["id"] for j in changed] == ["ghost"]
    job = jobs.get_job(ws, "ghost")
    assert job["status"] == "error" and "vanished" in job["error"]
    assert job["stderr_tail"] == "last words"


def test_measuring_jobs_queue_one_at_a_time(ws):
    first = jobs.submit(ws, None, "sleep", {"steps": 10, "step_s": 0.2})
    wait_until(lambda: jobs.get_job(ws, first["id"])["status"] == "running")
    second = jobs.submit(ws, None, "sleep", {"steps": 1, "step_s": 0.01})
    queued = wait_until(lambda: (lambda j: j if j["queued_behind"] else None)(jobs.get_job(ws, second["id"])))
    assert queued["status"] == "pending" and queued["queued_behind"] == first["id"]
    assert jobs.get_job(ws, first["id"])["status"] == "running"
    a = jobs.wait(ws, first["id"], TIMEOUT)
    b = jobs.wait(ws, second["id"], TIMEOUT)
    assert a["status"] == b["status"] == "completed"
    assert b["started"] >= a["finished"] and b["queued_behind"] is None


def test_non_measuring_job_does_not_wait_and_queued_job_can_be_canceled(ws):
    lock = MeasureLock()
    assert lock.try_acquire("holder-job 1 elsewhere\n")
    try:
        quick = jobs.submit(ws, None, "sleep", {"steps": 1, "step_s": 0.01}, measuring=False)
        assert jobs.wait(ws, quick["id"], TIMEOUT)["status"] == "completed"
        queued = jobs.submit(ws, None, "sleep", {"steps": 1, "step_s": 0.01})
        wait_until(lambda: jobs.get_job(ws, queued["id"])["queued_behind"] == "holder-job")
        jobs.cancel(ws, queued["id"])
        assert jobs.wait(ws, queued["id"], 10)["status"] == "canceled"
    finally:
        lock.release()


def test_run_here_takes_the_same_lock_and_records_the_job(ws):
    lock = MeasureLock()
    assert lock.try_acquire("other 1 elsewhere\n")
    seen = []
    out = {}
    t = threading.Thread(target=lambda: out.update(jobs.run_here(ws, None, "sleep", {"steps": 2, "step_s": 0.01},
                                                                  progress=lambda s, f: seen.append((s, f)))))
    t.start()
    try:
        job = wait_until(lambda: [j for j in jobs.list_jobs(ws) if j["queued_behind"] == "other"])[0]
        assert job["status"] == "pending" and job["pid"] == os.getpid()
    finally:
        lock.release()
    t.join(TIMEOUT)
    assert out == {"steps": 2, "slept_s": out["slept_s"]}
    assert seen[-1] == ("done", 1.0)
    assert jobs.list_jobs(ws)[0]["status"] == "completed"


def test_run_here_reraises_errors(ws):
    from sparsify_tui.errors import JobError

    with pytest.raises(JobError, match="bad"):
        jobs.run_here(ws, None, "sleep", {"steps": 1, "step_s": 0.01, "fail": "bad"})
    assert jobs.list_jobs(ws)[0]["status"] == "error"
    with pytest.raises(JobError, match="unknown job type"):
        jobs.submit(ws, None, "nope", {})


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "sparsify_tui", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)


def test_job_cli_list_show_cancel(ws):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    job = jobs.submit(ws, None, "sleep", {"steps": 1000, "step_s": 0.1})
    wait_until(lambda: jobs.get_job(ws, job["id"])["status"] == "running")
    listed = json.loads(_cli("job", "list", "--json", env=env).stdout)
    assert [j["id"] for j in listed] == [job["id"]]
    shown = json.loads(_cli("job", "show", job["id"], "--json", env=env).stdout)
    assert shown["status"] == "running" and shown["type"] == "sleep"
    r = _cli("job", "cancel", job["id"], "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert jobs.wait(ws, job["id"], 10)["status"] == "canceled"
    r = _cli("job", "show", "nope", env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_job_survives_its_launcher_hanging_up(ws):
    # the launcher (think: the TUI in an SSH session) submits a job, then its whole session gets SIGHUP
    code = ("import sys, time; from sparsify_tui import jobs; from sparsify_tui.store import Workspace; "
            "j = jobs.submit(Workspace(sys.argv[1]), None, 'sleep', {'steps': 4, 'step_s': 0.25}); "
            "print(j['id'], flush=True); time.sleep(60)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    launcher = subprocess.Popen([sys.executable, "-c", code, str(ws.root)], stdout=subprocess.PIPE, text=True,
                                env=env, start_new_session=True)
    job_id = launcher.stdout.readline().strip()
    wait_until(lambda: jobs.get_job(ws, job_id)["status"] == "running")
    os.killpg(launcher.pid, signal.SIGHUP)
    launcher.wait(TIMEOUT)
    assert launcher.returncode == -signal.SIGHUP
    assert jobs.wait(ws, job_id, TIMEOUT)["status"] == "completed"


def test_a_detached_job_logs_like_a_foreground_one_and_is_titled_by_what_it_works_on(ws, demo_model):
    """Issue 24 friction: jobs started from the TUI (detached) had empty logs while CLI jobs logged their lines, and
    job rows named ids and internal types ("apply '9625f664bf'", "channel_calibration 4829ca8073")."""
    import sys as _sys

    _sys.path.insert(0, str(ROOT / "tests"))
    from seeded_workspace import seed_demo

    from sparsify_tui.jobs.registry import describe
    from sparsify_tui.services.optimizations import get_optimization

    job = jobs.submit(ws, None, "sleep", {"steps": 3, "step_s": 0.3, "name": "nap"})
    assert job["title"] == "sleep 'nap'"
    jobs.wait(ws, job["id"], TIMEOUT)
    log = log_path(ws, job["id"]).read_text()
    assert f"job {job['id']} (sleep 'nap') in process" in log
    assert "step 2/3" in log and "%  step 3/3" in log  # the progress steps, as a foreground job's log has them
    assert log.rstrip().endswith("completed")

    pid = seed_demo(ws, demo_model)
    project = ws.get_project(pid)
    opt = get_optimization(ws, pid, "pruned 0.7 + INT8")
    assert describe(ws, project, "apply", {"optimization": opt.id}) == "apply 'pruned 0.7 + INT8'"
    assert describe(ws, project, "channel_calibration", {}) == "channel calibration of perf profile 'baseline'"
    assert describe(ws, project, "int8_search", {"name": "int8-1"}) == "INT8 search 'int8-1'"
    assert describe(ws, project, "perf_profile", {"name": "b", "record_id": "x"}) == "perf profile 'b' (rerun)"
