"""CLI: ``sparsify-tui job run|list|show|cancel|log``.

``job run JOB_ID`` is the entry point of a detached job process (started by
:func:`sparsify_tui.jobs.submit`); the others inspect and control jobs of the workspace.
"""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("job", help="background jobs: list, show, cancel, log (and run, used internally)")
    jsub = p.add_subparsers(dest="job_command", metavar="JOB_COMMAND")
    jsub.required = True

    r = jsub.add_parser("run", help="run a recorded job in this process (the job process entry point)")
    r.add_argument("job_id", metavar="JOB_ID")
    r.set_defaults(handler=_run)

    ls = jsub.add_parser("list", help="list jobs (oldest first)")
    ls.add_argument("--project", metavar="PROJECT", help="only the jobs of this project (id or name)")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(handler=_list)

    sh = jsub.add_parser("show", help="show one job")
    sh.add_argument("job_id", metavar="JOB_ID")
    sh.add_argument("--json", action="store_true", help="print JSON")
    sh.set_defaults(handler=_show)

    c = jsub.add_parser("cancel", help="cancel a pending or running job (it stops within about a second)")
    c.add_argument("job_id", metavar="JOB_ID")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(handler=_cancel)

    lg = jsub.add_parser("log", help="print the end of a job's log (stdout and stderr of its process)")
    lg.add_argument("job_id", metavar="JOB_ID")
    lg.add_argument("-n", "--lines", type=int, default=50, help="number of lines (default 50)")
    lg.set_defaults(handler=_log)


def _ws():
    from sparsify_tui.store import Workspace

    return Workspace()


def _public(job: dict) -> dict:
    return {k: v for k, v in job.items() if not k.startswith("_")}


def describe_status(job: dict) -> str:
    """Short human status: ``running 42% timing (ETA 12s)``, ``queued behind ab12``, ``error: ...``."""
    status = job.get("status")
    prog = job.get("progress") or {}
    if status == "pending" and job.get("queued_behind"):
        return f"queued behind {job['queued_behind']}"
    if status == "running":
        text = f"running {100 * float(prog.get('fraction') or 0):.0f}% {prog.get('step') or ''}".rstrip()
        if prog.get("eta_s") is not None:
            text += f" (ETA {float(prog['eta_s']):.0f}s)"
        return text
    if status == "error":
        return f"error: {job.get('error')}"
    return str(status)


def _run(args) -> int:
    from sparsify_tui.jobs.runner import run_job

    return run_job(args.job_id)


def _list(args) -> int:
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.jobs import list_jobs

    jobs = list_jobs(_ws(), args.project)
    if args.json:
        print_json([_public(j) for j in jobs])
        return 0
    if not jobs:
        print("no jobs")
        return 0
    for j in jobs:
        print(f"{j['id']}  {str(j.get('project_id') or '-'):<10}  {describe_status(j):<10}  "
              f"{j.get('title') or j.get('type', '')}")
    return 0


def _show(args) -> int:
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.jobs import get_job

    job = _public(get_job(_ws(), args.job_id))
    if args.json:
        print_json(job)
        return 0
    print(f"job {job['id']} ({job.get('title') or job.get('type')}, project {job.get('project_id') or '-'}): "
          f"{describe_status(job)}")
    for key in ("created", "started", "finished"):
        if job.get(key):
            print(f"  {key}: {job[key]}")
    if job.get("result"):
        print(f"  result: {job['result']}")
    if job.get("stderr_tail"):
        print("  log tail:")
        for line in str(job["stderr_tail"]).splitlines():
            print(f"    {line}")
    return 0


def _cancel(args) -> int:
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.jobs import cancel

    job = _public(cancel(_ws(), args.job_id))
    if args.json:
        print_json(job)
    else:
        state = "cancel requested" if job["status"] in ("pending", "running") else job["status"]
        print(f"job {job['id']}: {state}")
    return 0


def _log(args) -> int:
    from sparsify_tui.jobs import get_job, log_tail

    ws = _ws()
    job = get_job(ws, args.job_id)
    text = log_tail(ws, job["id"], lines=max(1, args.lines), max_chars=1 << 20)
    if text:
        print(text)
    return 0
