"""Background jobs: each runs in its own detached OS process (docs/design.md, Jobs).

* :func:`submit` records a ``pending`` job in the workspace and starts
  ``python -m sparsify_tui job run JOB_ID`` in a new session (``start_new_session=True``, stdin
  ``/dev/null``, stdout+stderr appended to ``<workspace>/jobs/<id>.log``), so closing the TUI or
  dropping the SSH session does not kill it.
* The job process (:func:`run_job`) waits for the **measuring lock** (:mod:`sparsify_tui.jobs.measure_lock`:
  an ``flock`` on a per-user file, or on ``$SPARSIFY_TUI_MEASURE_LOCK`` for one lock shared by every user
  of the machine) when the job measures: one measuring job at a time, across workspaces. While it waits the
  job stays ``pending``
  with ``queued_behind`` set to the id of the job holding the lock. Then it runs the handler of its
  type (:mod:`sparsify_tui.jobs.registry`) with a :class:`JobContext`.
* Progress (step, fraction, ETA) is written at most 4 times a second.
* :func:`cancel` sets ``cancel_requested`` and sends SIGTERM; the job process turns both into
  ``CancelToken.cancel()``, which also terminates running onnxruntime calls (``RunOptions``), so a
  job stops within about a second.
* :func:`refresh` marks a ``pending``/``running`` job whose process is gone (SIGKILL, OOM killer, a
  native crash) as ``error`` with the tail of its log. It runs on every :func:`get_job` and
  :func:`list_jobs`, so a job is never left ``running`` forever.
* :func:`run_here` runs a job in the calling process (the headless CLI) with the same lock and
  records.
* A job may allocate at most its memory limit (:func:`sparsify_tui.analysis.system.job_memory_limit`: ``--max-memory``
  / ``$SPARSIFY_TUI_MAX_MEMORY``, else the memory available when it starts); an allocation beyond it ends the job in
  one line naming the limit and how to raise it (:func:`_run_handler`). Python warnings of a foreground job go to
  its log, not to the terminal.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from sparsify_tui.errors import JobCanceled, JobError, SparsifyError
from sparsify_tui.jobs.measure_lock import MEASURE_LOCK_ENV, MeasureLock, measure_lock_path  # noqa: F401
from sparsify_tui.progress import CancelToken, ProgressFn
from sparsify_tui.tempfiles import pid_alive
from sparsify_tui.store.workspace import Workspace, new_id, now_iso

ACTIVE = ("pending", "running")
FINAL = ("completed", "canceled", "error")
PROGRESS_INTERVAL_S = 0.25
"""Minimum seconds between two progress writes (at most 4 per second)."""
POLL_INTERVAL_S = 0.2
"""How often a running job checks ``cancel_requested`` and a queued job retries the lock."""
START_GRACE_S = 30.0
"""A pending job with no pid after this many seconds is marked error (its process never started)."""
TAIL_LINES = 20


@dataclass
class JobContext:
    """What a job handler gets.

    ``ws``: the workspace; ``job``: the job dict as it was when the handler started; ``project_id``;
    ``args``: the job arguments (JSON dict); ``progress(step, fraction)``: rate-limited progress
    writer (fraction of the whole job in [0, 1]); ``cancel``: a :class:`CancelToken` (call
    ``cancel.check()`` between steps, pass ``cancel.run_options()`` to onnxruntime runs).
    """

    ws: Workspace
    job: Dict[str, Any]
    project_id: Optional[str]
    args: Dict[str, Any]
    progress: ProgressFn
    cancel: CancelToken


# ---------------------------------------------------------------------------- processes
def _proc_start_time(pid: int) -> Optional[int]:
    """Start time of a process in clock ticks since boot (Linux /proc), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
        fields = data[data.rindex(")") + 2 :].split()
        return int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _pid_alive(pid: Optional[int], start: Optional[int] = None) -> bool:
    """True when ``pid`` runs (:func:`sparsify_tui.tempfiles.pid_alive`: not a zombie) and, if ``start`` is known,
    is the same process (its start time, so a reused pid does not count)."""
    if not pid or not pid_alive(int(pid)):
        return False
    if start is not None:
        now_start = _proc_start_time(int(pid))
        if now_start is not None and now_start != start:
            return False
    return True


def log_path(ws: Workspace, job_id: str) -> Path:
    """``<workspace>/jobs/<job id>.log``: stdout and stderr of the job process."""
    return ws.jobs_dir / f"{job_id}.log"


def log_tail(ws: Workspace, job_id: str, lines: int = TAIL_LINES, max_chars: int = 4000) -> str:
    """The last ``lines`` lines (at most ``max_chars`` characters) of a job's log, or ""."""
    path = log_path(ws, job_id)
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    tail = "\n".join(text.rstrip("\n").splitlines()[-lines:])
    return tail[-max_chars:]


def _child_env(ws: Workspace) -> Dict[str, str]:
    import sparsify_tui

    env = dict(os.environ)
    env["SPARSIFY_TUI_HOME"] = str(ws.root)
    pkg_parent = str(Path(sparsify_tui.__file__).resolve().parent.parent)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + old if old else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ---------------------------------------------------------------------------- public API
def _new_job(ws: Workspace, project_id: Optional[str], job_type: str, args: Dict[str, Any], measuring: bool) -> Dict[str, Any]:
    from sparsify_tui.jobs import registry

    registry.resolve(job_type)
    try:
        args = json.loads(json.dumps(dict(args or {})))
    except (TypeError, ValueError) as err:
        raise JobError(f"job arguments must be JSON values ({err}): pass strings, numbers, lists or dicts") from None
    project = None
    if project_id is not None:
        project = ws.get_project(project_id)
        project_id = project["id"]
        check = registry.JOB_CHECKS.get(job_type)
        if check is not None:
            check(ws, project, args)
    return {
        "id": new_id(),
        "project_id": project_id,
        "type": job_type,
        "title": registry.describe(ws, project, job_type, args),
        "args": args,
        "measuring": bool(measuring),
        "status": "pending",
        "progress": {"step": "waiting to start", "fraction": 0.0, "eta_s": None},
        "queued_behind": None,
        "cancel_requested": False,
        "error": None,
        "stderr_tail": None,
        "pid": None,
        "pid_start": None,
        "created": now_iso(),
        "started": None,
        "finished": None,
        "result": None,
    }


def submit(ws: Workspace, project_id: Optional[str], job_type: str, args: Dict[str, Any], *, measuring: bool = True) -> Dict[str, Any]:
    """Record a job and start its detached process; returns the job dict (status ``pending``).

    ``project_id``: project id or name (or None for project-less diagnostic jobs); ``job_type``: a
    key of :data:`sparsify_tui.jobs.registry.JOB_TYPES`; ``args``: JSON-able dict for the handler;
    ``measuring``: the job times things, so it waits for the machine-wide measuring lock.
    Raises :class:`JobError` for an unknown type or when the process cannot be started.
    """
    job = _new_job(ws, project_id, job_type, args, measuring)
    ws.add_job(job)
    ws.jobs_dir.mkdir(parents=True, exist_ok=True)
    log = log_path(ws, job["id"])
    try:
        with open(log, "ab") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "sparsify_tui", "job", "run", job["id"]],
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                env=_child_env(ws),
            )
    except OSError as err:
        ws.update_job(job["id"], status="error", error=f"could not start the job process: {err}", finished=now_iso())
        raise JobError(f"could not start the job process ({err}): check that {sys.executable} runs") from None
    start = _proc_start_time(proc.pid)
    # Reap the child when it ends (no zombie) and record a death by signal right away.
    threading.Thread(target=_reap, args=(ws, job["id"], proc), daemon=True, name=f"reap-{job['id']}").start()
    return ws.modify_job(job["id"], lambda j: {"pid": proc.pid, "pid_start": start} if j.get("pid") is None else None)


def _reap(ws: Workspace, job_id: str, proc: subprocess.Popen) -> None:
    rc = proc.wait()
    if rc is not None and rc != 0:
        try:
            _mark_if_dead(ws, job_id, returncode=rc)
        except Exception:  # pragma: no cover - workspace gone
            pass


def _death_fields(ws: Workspace, job: Dict[str, Any], returncode: Optional[int]) -> Dict[str, Any]:
    tail = log_tail(ws, job["id"])
    if "Fatal Python error" not in tail:  # a native crash's header sits above a long stack dump: keep it
        fatal = [ln for ln in log_tail(ws, job["id"], lines=200, max_chars=64 * 1024).splitlines()
                 if ln.startswith("Fatal Python error")]
        if fatal:
            tail = f"{fatal[-1]}\n...\n{tail}"
    if job.get("cancel_requested"):
        return {"status": "canceled", "finished": now_iso(), "stderr_tail": tail or None}
    if returncode is not None and returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    elif returncode is not None:
        how = f"exited with code {returncode} without finishing"
    else:
        how = "vanished (killed, out of memory, or a native crash)"
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.startswith("Fatal Python error")]
    last = (fatal or lines or [""])[-1]
    msg = f"job process {job.get('pid')} {how}" + (f"; last log line: {last}" if last else "")
    msg += f": see {log_path(ws, job['id'])}"
    return {"status": "error", "error": msg, "stderr_tail": tail, "finished": now_iso()}


def _mark_if_dead(ws: Workspace, job_id: str, returncode: Optional[int] = None) -> Dict[str, Any]:
    def fn(job: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        if job.get("status") not in ACTIVE:
            return None
        pid = job.get("pid")
        if pid is None:
            if returncode is None:
                from datetime import datetime

                try:
                    created = datetime.fromisoformat(job["created"].replace("Z", "+00:00")).timestamp()
                except (KeyError, ValueError, AttributeError):
                    created = 0.0
                if time.time() - created < START_GRACE_S:
                    return None
            return _death_fields(ws, job, returncode)
        if _pid_alive(pid, job.get("pid_start")):
            return None
        return _death_fields(ws, job, returncode)

    return ws.modify_job(job_id, fn)


def refresh(ws: Workspace) -> List[Dict[str, Any]]:
    """Mark every pending/running job whose process is gone as ``error`` (with its log tail; or
    ``canceled`` when a cancel was requested). Returns the jobs that changed."""
    changed = []
    for job in ws.list_jobs():
        if job.get("status") in ACTIVE and not _pid_alive(job.get("pid"), job.get("pid_start")):
            new = _mark_if_dead(ws, job["id"])
            if new.get("status") != job.get("status"):
                changed.append(new)
    return changed


def get_job(ws: Workspace, job_id: str) -> Dict[str, Any]:
    """A job dict (fresh from disk, refreshed if its process vanished); :class:`RecordNotFound` if unknown."""
    job = ws.get_job(job_id)
    if job.get("status") in ACTIVE and not _pid_alive(job.get("pid"), job.get("pid_start")):
        job = _mark_if_dead(ws, job_id)
    return job


def list_jobs(ws: Workspace, project_id: Optional[str] = None) -> List[Dict[str, Any]]:
    """Jobs (oldest first), optionally of one project (id or name), after :func:`refresh`."""
    if project_id is not None:
        project_id = ws.get_project(project_id)["id"]
    refresh(ws)
    return ws.list_jobs(project_id)


def active_jobs(ws: Workspace, project_id: str) -> List[Dict[str, Any]]:
    """The pending and running jobs of a project (id or name), after :func:`refresh` (a job whose process is gone
    is not active): what deleting the project would cancel. Its index entry is enough (a damaged project has jobs
    too)."""
    pid = ws.project_entry(project_id)["id"]
    refresh(ws)
    return [j for j in ws.list_jobs(pid) if j.get("status") in ACTIVE]


def active_jobs_phrase(jobs: List[Dict[str, Any]]) -> str:
    """The active jobs a deletion would cancel, in words, once for the CLI and the TUI:
    ``a running job (perf profile 'baseline')``, ``2 jobs (perf profile 'a', running; loss profile 'b', queued)``."""
    def state(j: Dict[str, Any]) -> str:
        return "running" if j.get("status") == "running" else "queued"

    if len(jobs) == 1:
        return f"a {state(jobs[0])} job ({jobs[0].get('title') or jobs[0].get('type')})"
    return f"{len(jobs)} jobs (" + "; ".join(f"{j.get('title') or j.get('type')}, {state(j)}" for j in jobs) + ")"


def delete_project(ws: Workspace, project_id: str) -> None:
    """Delete a project (:meth:`Workspace.delete_project`, an unindexed folder too) after asking each of its active
    jobs to stop (:func:`cancel`: marked canceled, SIGTERM): the CLI's ``delete --force`` and the TUI's confirmed
    delete. The caller has told the user about those jobs (:func:`active_jobs_phrase`)."""
    entry = ws.project_entry(project_id, orphans=True)
    if not entry.get("orphan"):
        for job in active_jobs(ws, entry["id"]):
            try:
                cancel(ws, job["id"])
            except SparsifyError:  # finished and gone meanwhile
                pass
    ws.delete_project(entry["id"])


def cancel(ws: Workspace, job_id: str) -> Dict[str, Any]:
    """Ask a job to stop: sets ``cancel_requested`` and sends SIGTERM to its process.

    A job that has not started yet (no process) is marked ``canceled`` at once; a finished job is
    left as is. Returns the job dict. The process marks itself ``canceled`` within about a second.
    """

    def fn(job: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        if job.get("status") not in ACTIVE:
            return None
        if job.get("pid") is None:
            return {"cancel_requested": True, "status": "canceled", "finished": now_iso()}
        return {"cancel_requested": True}

    job = ws.modify_job(job_id, fn)
    if job.get("status") in ACTIVE and job.get("pid") and _pid_alive(job["pid"], job.get("pid_start")):
        try:
            os.kill(int(job["pid"]), signal.SIGTERM)
        except OSError:
            pass
    return get_job(ws, job_id)


def wait(ws: Workspace, job_id: str, timeout_s: float = 60.0, poll_s: float = 0.1) -> Dict[str, Any]:
    """Block until a job is no longer pending/running (or ``timeout_s`` passes); returns the job dict."""
    end = time.monotonic() + timeout_s
    while True:
        job = get_job(ws, job_id)
        if job.get("status") not in ACTIVE or time.monotonic() > end:
            return job
        time.sleep(poll_s)


# ---------------------------------------------------------------------------- measuring lock
def _wait_for_lock(ws: Workspace, job_id: str, lock: MeasureLock, token: CancelToken) -> None:
    shown: Optional[str] = None
    while not lock.try_acquire(f"{job_id} {os.getpid()} {ws.root}\n"):
        holder = lock.holder() or "another measuring process"
        if holder != shown:
            ws.update_job(
                job_id,
                queued_behind=holder,
                progress={"step": f"queued behind {holder}", "fraction": 0.0, "eta_s": None},
            )
            shown = holder
        token.check()
        time.sleep(POLL_INTERVAL_S)
        token.check()


# ---------------------------------------------------------------------------- execution
class _Reporter:
    """Rate-limited progress writer (≤ 1 write per :data:`PROGRESS_INTERVAL_S`) with an ETA."""

    def __init__(self, ws: Workspace, job_id: str, extra: Optional[ProgressFn]) -> None:
        self.ws, self.job_id, self.extra = ws, job_id, extra
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.last_write = 0.0
        self.pending: Optional[Dict[str, Any]] = None

    def __call__(self, step: str, fraction: float) -> None:
        if self.extra is not None:
            self.extra(step, fraction)
        try:
            f = min(1.0, max(0.0, float(fraction)))
        except (TypeError, ValueError):
            f = 0.0
        elapsed = time.monotonic() - self.t0
        eta = round(elapsed * (1.0 - f) / f, 1) if f >= 0.01 else None
        with self.lock:
            self.pending = {"step": str(step), "fraction": round(f, 4), "eta_s": eta}
        if time.monotonic() - self.last_write >= PROGRESS_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            pending, self.pending = self.pending, None
            if pending is None:
                return
            self.last_write = time.monotonic()
            self.ws.update_job(self.job_id, progress=pending)


def _watch(ws: Workspace, job_id: str, token: CancelToken, reporter: _Reporter, stop: threading.Event) -> None:
    """Background thread: turn ``cancel_requested`` into ``token.cancel()``; flush pending progress."""
    while not stop.wait(POLL_INTERVAL_S):
        try:
            if not token.is_cancelled() and ws.get_job(job_id).get("cancel_requested"):
                token.cancel()
            if time.monotonic() - reporter.last_write >= PROGRESS_INTERVAL_S:
                reporter.flush()
        except Exception:  # pragma: no cover - keep watching
            pass


def _run_handler(handler, ctx: JobContext, log=None) -> Any:
    """``handler(ctx)`` under the job's memory limit (:func:`sparsify_tui.engine.memory.memory_limit` of
    :func:`sparsify_tui.analysis.system.job_memory_limit`), with Python warnings (numpy's RuntimeWarnings...) written to
    the job's ``log`` (a foreground job's; a detached job's stderr is its log). A failed allocation
    (:func:`sparsify_tui.engine.memory.allocation_failure`) becomes a :class:`JobError`: one line naming what was
    asked, the limit and how to raise it."""
    import warnings

    from sparsify_tui.analysis.system import job_memory_limit
    from sparsify_tui.engine.memory import allocation_failure, memory_limit
    from sparsify_tui.formatting import format_bytes

    limit, source = job_memory_limit()
    out = log if log is not None else sys.stderr

    def to_log(message, category, filename, lineno, file=None, line=None) -> None:
        _log_line(out, warnings.formatwarning(message, category, filename, lineno, line).strip())

    try:
        with warnings.catch_warnings(), memory_limit(limit):
            warnings.showwarning = to_log
            return handler(ctx)
    except (JobCanceled, KeyboardInterrupt):
        raise
    except BaseException as err:  # noqa: BLE001 - only a failed allocation is turned into a line here
        asked = allocation_failure(err)
        if asked is None:
            raise
        what = ctx.job.get("title") or ctx.job.get("type") or "the job"
        asked_text = f"{format_bytes(asked)} at once" if asked else "more memory"
        if limit is None:
            raise JobError(f"{what} ran out of memory: it asked for {asked_text}, more than this machine could give: "
                           "give smaller inputs (--batch-size, --dim) or run it on a machine with more memory") from err
        raise JobError(f"{what} ran out of memory: it asked for {asked_text}, beyond its limit of "
                       f"{format_bytes(limit)} ({source}): give smaller inputs (--batch-size, --dim), or raise the "
                       f"limit with --max-memory SIZE (or SPARSIFY_TUI_MAX_MEMORY=SIZE before starting the TUI) if "
                       "the machine has the memory") from err


def _execute(ws: Workspace, job: Dict[str, Any], token: CancelToken, extra: Optional[ProgressFn],
             log=None) -> Dict[str, Any]:
    """Wait for the lock, run the handler, record the outcome. Returns the final job dict.

    The exception (if any) is attached as ``job["_exc"]`` for :func:`run_here` to re-raise. ``log``: the open
    log of a foreground job (a detached job's stderr already is its log), where a crash's traceback goes.
    """
    from sparsify_tui.jobs import registry

    job_id = job["id"]
    reporter = _Reporter(ws, job_id, extra)
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(ws, job_id, token, reporter, stop), daemon=True)
    watcher.start()
    lock = MeasureLock() if job.get("measuring") else None
    exc: Optional[BaseException] = None
    try:
        try:
            handler = registry.resolve(job["type"])
            if lock is not None:
                _wait_for_lock(ws, job_id, lock, token)
            token.check()
            reporter.t0 = time.monotonic()
            job = ws.update_job(
                job_id,
                status="running",
                started=now_iso(),
                queued_behind=None,
                progress={"step": "starting", "fraction": 0.0, "eta_s": None},
            )
            ctx = JobContext(ws=ws, job=job, project_id=job.get("project_id"), args=dict(job.get("args") or {}),
                             progress=reporter, cancel=token)
            result = _run_handler(handler, ctx, log)
            result = json.loads(json.dumps(result if result is not None else {}, default=str))
            stop.set()
            with reporter.lock:
                reporter.pending = None
            final = {"status": "completed", "result": result,
                     "progress": {"step": "done", "fraction": 1.0, "eta_s": 0.0}}
        except JobCanceled as err:
            exc = err
            final = {"status": "canceled"}
        except SparsifyError as err:
            exc = err
            final = {"status": "canceled"} if token.is_cancelled() else {"status": "error", "error": str(err)}
        except BaseException as err:  # noqa: BLE001 - everything is recorded, then re-raised for run_here
            exc = err
            if token.is_cancelled() or isinstance(err, KeyboardInterrupt):
                final = {"status": "canceled"}
            else:
                out = log if log is not None else sys.stderr
                traceback.print_exc(file=out)
                out.flush()
                final = {"status": "error", "error": f"{type(err).__name__}: {err}"}
    finally:
        stop.set()
        if lock is not None:
            lock.release()
    if final["status"] != "completed":
        try:
            reporter.flush()
        except Exception:  # pragma: no cover
            pass
    if final["status"] == "error":
        final["stderr_tail"] = log_tail(ws, job_id) or None
    final["finished"] = now_iso()
    job = ws.update_job(job_id, **final)
    watcher.join(timeout=2)
    if exc is not None:
        job["_exc"] = exc
    return job


def run_job(job_id: str, ws: Optional[Workspace] = None) -> int:
    """Entry point of a job process (``sparsify-tui job run JOB_ID``). Returns the exit code:
    0 completed, 1 error, 3 canceled (and 0 when the job was no longer pending)."""
    token = CancelToken()
    signal.signal(signal.SIGTERM, lambda *_: token.cancel())
    signal.signal(signal.SIGINT, lambda *_: token.cancel())
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    except (AttributeError, ValueError):  # pragma: no cover
        pass
    faulthandler.enable(all_threads=True)
    ws = ws or Workspace()
    me, start = os.getpid(), _proc_start_time(os.getpid())

    def claim(job: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        if job.get("status") != "pending":
            return None
        return {"pid": me, "pid_start": start}

    job = ws.modify_job(job_id, claim)
    if job.get("status") != "pending" or job.get("pid") != me:
        print(f"job {job_id} is {job.get('status')}: nothing to run", file=sys.stderr)
        return 0
    if job.get("cancel_requested"):
        token.cancel()
    log = sys.stderr  # the job's log (submit opened it as the process's stdout and stderr)
    _log_line(log, f"job {job_id} ({job.get('title') or job.get('type')}) in process {me}, "
                   f"args {json.dumps(job.get('args'), default=str)}")
    job = _execute(ws, job, token, _LogProgress(log, None))
    job.pop("_exc", None)
    _log_outcome(log, job)
    return {"completed": 0, "canceled": 3}.get(job["status"], 1)


def _log_line(log, text: str) -> None:
    """One timestamped line in a job's log (a log that cannot be written to loses the line, not the job)."""
    try:
        log.write(f"{now_iso()}  {text}\n")
        log.flush()
    except (OSError, ValueError):
        pass


def _log_outcome(log, job: Dict[str, Any]) -> None:
    _log_line(log, str(job.get("status")) + (f": {job.get('error')}" if job.get("error") else ""))


class _LogProgress:
    """A job's progress written to its log (a foreground job's and a detached one's alike): a line per step change,
    at most one a second."""

    def __init__(self, log, extra: Optional[ProgressFn]) -> None:
        self.log, self.extra = log, extra
        self.last = (0.0, "")

    def __call__(self, step: str, fraction: float) -> None:
        if self.extra is not None:
            self.extra(step, fraction)
        now = time.monotonic()
        if step != self.last[1] or now - self.last[0] >= 1.0:
            self.last = (now, step)
            try:
                self.log.write(f"{now_iso()}  {float(fraction) * 100:5.1f}%  {step}\n")
            except (OSError, ValueError, TypeError):
                pass


def run_here(ws: Workspace, project_id: Optional[str], job_type: str, args: Dict[str, Any],
             progress: Optional[ProgressFn] = None, *, measuring: bool = True) -> Dict[str, Any]:
    """Run a job in this process (headless CLI): same job record, same measuring lock, and a log like a
    detached job's (``<workspace>/jobs/<id>.log``: the arguments, progress steps, a crash's traceback or a
    native crash's stack via ``faulthandler``, and the outcome), so ``job log`` and the error of a killed
    foreground job point to a real file.

    ``progress`` additionally receives every progress call (unthrottled). SIGTERM (for example a
    ``sparsify-tui job cancel`` from elsewhere) and Ctrl-C cancel it. Returns the handler's summary;
    re-raises the handler's error (a :class:`SparsifyError` such as :class:`JobCanceled`, or a bug).
    """
    from sparsify_tui.store.db import writing

    job = _new_job(ws, project_id, job_type, args, measuring)
    job["pid"], job["pid_start"] = os.getpid(), _proc_start_time(os.getpid())
    path = log_path(ws, job["id"])
    with writing(path):
        ws.jobs_dir.mkdir(parents=True, exist_ok=True)
        log = open(path, "a", encoding="utf-8", buffering=1)  # before the record points to it
        try:
            log.write(f"{now_iso()}  foreground job {job['id']} ({job.get('title') or job_type}) in process "
                      f"{os.getpid()}, args {json.dumps(job['args'], default=str)}\n")
            ws.add_job(job)
        except BaseException:
            _forget_job(ws, job["id"], log)
            raise
    token = CancelToken()
    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGTERM, lambda *_: token.cancel())
    own_faulthandler = not faulthandler.is_enabled()
    if own_faulthandler:
        faulthandler.enable(file=log, all_threads=True)
    try:
        job = _execute(ws, job, token, _LogProgress(log, progress), log=log)
    except BaseException as err:  # recording the outcome failed (a full disk fails that too)
        job = {**job, "_exc": err}
    finally:
        if own_faulthandler:
            faulthandler.disable()
        if old is not None:
            signal.signal(signal.SIGTERM, old)
        try:
            _log_outcome(log, job)
        finally:
            log.close()
    exc = job.pop("_exc", None)
    if exc is not None and _out_of_space(exc):
        # nothing was measured and nothing can be kept on a full disk: no job record, no log (their space is freed)
        _forget_job(ws, job["id"], None)
    if exc is not None:
        raise exc
    return job.get("result") or {}


def _out_of_space(err: BaseException) -> bool:
    """True when ``err`` (or what caused it) is a full disk or quota, or a read-only file system."""
    import errno

    seen = 0
    while err is not None and seen < 8:
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            return True
        if "No space left on device" in str(err) or "Read-only file system" in str(err):
            return True
        err, seen = err.__cause__ or err.__context__, seen + 1
    return False


def _forget_job(ws: Workspace, job_id: str, log) -> None:
    """Best effort: close and remove a foreground job's log, then its record (the log goes first: on a full disk,
    its space lets the index be rewritten)."""
    if log is not None:
        try:
            log.close()
        except OSError:
            pass
    try:
        os.unlink(log_path(ws, job_id))
    except OSError:
        pass
    try:
        ws.delete_job(job_id)
    except Exception:  # noqa: BLE001 - the record could not be written either: recovery marks it later
        pass
