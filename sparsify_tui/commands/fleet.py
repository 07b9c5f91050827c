"""CLI: ``sparsify-tui fleet nodes|profile|benchmark``: a project measured on the servers of a Ray cluster.

``fleet nodes`` lists the cluster's alive nodes (:func:`sparsify_tui.fleet.probe.describe_cluster`). ``fleet profile``
and ``fleet benchmark`` submit a ``fleet_profile`` / ``fleet_benchmark`` job (:mod:`sparsify_tui.jobs.handlers.fleet`):
a detached job process is the Ray driver, so the job survives the terminal going away; the command follows it
(progress and every target's state on stderr) until it ends, or returns at once with ``--detach``. Ctrl-C while
following cancels the job. Arguments, the model's inputs and the targets are checked before a job record exists
(one line on stderr, exit code 2). Exit codes: 0 every target stored, 1 some targets failed (the others are
stored), 2 bad input or no target finished, 3 canceled.

Without Ray installed every fleet command says how to install it (``pip install "sparsify-tui[fleet]"``).
"""

from __future__ import annotations

import sys

from sparsify_tui.commands import add_runtime_options, runtime_args

ADDRESS_ENV = "RAY_ADDRESS"


def _address(args) -> str:
    import os

    from sparsify_tui.errors import SparsifyError

    value = args.address or os.environ.get(ADDRESS_ENV)
    if not value:
        raise SparsifyError(f"fleet needs the Ray cluster's address: give --address HOST:PORT (the head node's, "
                            f"what `ray start --head` printed) or set ${ADDRESS_ENV}")
    return value


def _common(p, *, benchmark: bool) -> None:
    p.add_argument("project", metavar="PROJECT", help="project id or name")
    p.add_argument("--address", default=None, metavar="HOST:PORT",
                   help=f"the Ray head node's address (default ${ADDRESS_ENV})")
    p.add_argument("--targets", "--target", dest="targets", default="all", metavar="all|ID,...|KEY=VALUE",
                   help="where to measure: all (default), node ids (or their first 6+ digits), or node labels "
                        "KEY=VALUE (a node must have each)")
    p.add_argument("--cores", default=None, metavar="N|all",
                   help="cores (intra-op threads) on each target (default all of each target's cores)")
    p.add_argument("--warmup", type=int, default=None, metavar="N", help="untimed runs before timing (default 5)")
    p.add_argument("--iterations", type=int, default=None, metavar="N", help="timed runs (default 30)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="value of a symbolic dim or scalar input (repeatable; default the project's)")
    p.add_argument("--data", default=None, metavar="FILE", help="sample inputs (.npz/.npy), sent to every target")
    p.add_argument("--name", default=None, metavar="TEMPLATE",
                   help="name of each stored result (default '{target} b{batch} {cores}c'; fields {target} "
                        "{hostname} {node} {batch} {cores})")
    p.add_argument("--detach", action="store_true", help="print the job id and return; the job keeps running")
    p.add_argument("--json", action="store_true", help="print the job's result (or the job, with --detach) as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def register(sub) -> None:
    p = sub.add_parser("fleet", help="profile and benchmark on the servers of a Ray cluster (optional extra)",
                       description="Measure a project's model on target servers through a Ray cluster; results are "
                                   "stored here as perf profiles and benchmarks tagged with their target. Needs "
                                   'pip install "sparsify-tui[fleet]".')
    fsub = p.add_subparsers(dest="fleet_command", metavar="FLEET_COMMAND")
    fsub.required = True

    n = fsub.add_parser("nodes", help="list the cluster's alive nodes (id, hostname, CPU, cores, instruction sets, "
                                      "runtimes, labels)")
    n.add_argument("--address", default=None, metavar="HOST:PORT",
                   help=f"the Ray head node's address (default ${ADDRESS_ENV})")
    n.add_argument("--json", action="store_true", help="print JSON")
    n.set_defaults(handler=cmd_nodes)

    pr = fsub.add_parser("profile", help="a perf profile of the project's model on every target",
                         description="Run the same perf profile as `profile perf` on every target node, one at a "
                                     "time per node (each task holds all of its node's CPUs and its measuring "
                                     "lock), and store one profile per target.")
    _common(pr, benchmark=False)
    pr.add_argument("--batch-size", type=int, default=None, metavar="N",
                    help="items per batch (default the project's, or 1)")
    pr.add_argument("--no-int8", action="store_true", help="skip the measured INT8 profile")
    add_runtime_options(pr)
    pr.set_defaults(handler=cmd_profile)

    b = fsub.add_parser("benchmark", help="baseline vs optimizations, measured on every target",
                        description="Apply the optimizations here (once, when needed), then run the same benchmark "
                                    "as `benchmark` on every target node and store one benchmark per target.")
    _common(b, benchmark=True)
    b.add_argument("--optimization", "-O", action="append", default=[], metavar="NAME",
                   help="optimization name or id to compare with the baseline (repeatable)")
    b.add_argument("--batch-sizes", default=None, metavar="B1,B2", help="batch sizes (default the project's)")
    add_runtime_options(b, many=True)
    b.set_defaults(handler=cmd_benchmark)


# ------------------------------------------------------------------------------------------------ nodes
def _fmt_nodes(nodes) -> str:
    rows = [("node id", "hostname", "address", "CPUs (Ray)", "cores", "CPU", "instruction sets", "runtimes",
             "labels / resources")]
    for n in nodes:
        tags = [f"{k}={v}" for k, v in sorted(n.labels.items())]
        tags += [f"{k}:{v:g}" for k, v in sorted(n.resources.items())]
        isa = ",".join(x for x in n.instruction_sets if x.startswith(("AVX", "AMX", "NEON", "SVE")))
        rows.append((n.short_id + (" (head)" if n.is_head else ""), n.hostname, n.address, f"{n.ray_cpus:g}",
                     str(n.cores or "?"), (n.cpu_model or "?")[:40], isa or "-",
                     ", ".join(f"{k} {v}" for k, v in n.runtimes.items()) or n.ort_version or "?",
                     " ".join(tags) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    for n in nodes:
        if n.error:
            lines.append(f"node {n.short_id}: {n.error}")
    return "\n".join(lines)


def cmd_nodes(args) -> int:
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.fleet import require_ray
    from sparsify_tui.fleet.probe import describe_cluster

    require_ray(load=False)
    address = _address(args)
    nodes = describe_cluster(address)
    if args.json:
        print_json({"address": address, "nodes": [n.to_dict() for n in nodes]})
    else:
        print(f"{len(nodes)} alive node{'s' if len(nodes) != 1 else ''} in the Ray cluster at {address}")
        print(_fmt_nodes(nodes))
    return 0


# ------------------------------------------------------------------------------------- profile / benchmark
def _job_args(args) -> dict:
    from pathlib import Path

    out = {"address": _address(args), "targets": args.targets, "core_count": args.cores, "warmup": args.warmup,
           "iterations": args.iterations, "name": args.name,
           "data": str(Path(args.data).absolute()) if args.data else None}
    if args.dim:
        from sparsify_tui.analysis.shapes import parse_dim_args

        out["dims"] = parse_dim_args(args.dim)  # added to the setup's by the job's settings
    out.update(runtime_args(args))
    return {k: v for k, v in out.items() if v is not None}


def _follow(ws, job: dict, quiet: bool) -> dict:
    """Print the job's progress and each target's state changes on stderr until it ends; Ctrl-C cancels it."""
    import time

    from sparsify_tui import jobs

    last_line, last_t, seen = "", 0.0, {}
    try:
        while True:
            job = jobs.get_job(ws, job["id"])
            for t in job.get("targets") or []:
                state = (t.get("status"), t.get("error"))
                if seen.get(t["node_id"]) != state and t.get("status") in ("completed", "error", "canceled", "queued"):
                    seen[t["node_id"]] = state
                    if not quiet:
                        what = t.get("error") if t.get("status") == "error" else (t.get("name") or t.get("step"))
                        print(f"  {t['label']}: {t['status']}" + (f": {what}" if what else ""), file=sys.stderr,
                              flush=True)
            if job.get("status") not in jobs.ACTIVE:
                return job
            prog = job.get("progress") or {}
            line = f"  {100 * float(prog.get('fraction') or 0):5.1f}%  {prog.get('step') or job.get('status')}"
            now = time.monotonic()
            if not quiet and line != last_line and now - last_t >= 1.0:
                print(line, file=sys.stderr, flush=True)
                last_line, last_t = line, now
            time.sleep(0.25)
    except KeyboardInterrupt:
        print(f"sparsify-tui: canceling fleet job {job['id']}", file=sys.stderr, flush=True)
        jobs.cancel(ws, job["id"])
        return jobs.wait(ws, job["id"], timeout_s=60.0)


def _submit_and_follow(args, job_type: str, extra: dict) -> int:
    from sparsify_tui import jobs
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.errors import JobError
    from sparsify_tui.fleet import require_ray
    from sparsify_tui.store import Workspace

    require_ray(load=False)
    ws = Workspace()
    project = ws.get_project(args.project)
    job_args = {**_job_args(args), **extra}
    # arguments, inputs and targets are checked before the job record exists (jobs.registry.JOB_CHECKS)
    job = jobs.submit(ws, project["id"], job_type, job_args, measuring=False)
    if args.detach:
        if args.json:
            print_json({k: v for k, v in job.items() if not k.startswith("_")})
        else:
            print(f"fleet job {job['id']} started; follow it with `sparsify-tui job show {job['id']}`")
        return 0
    if not args.quiet:
        print(f"fleet job {job['id']} started (it keeps running if this terminal goes away)", file=sys.stderr,
              flush=True)
    job = _follow(ws, job, args.quiet)
    status = job.get("status")
    if status == "canceled":
        print(f"sparsify-tui: fleet job {job['id']} canceled", file=sys.stderr)
        return 3
    if status != "completed":
        raise JobError(f"fleet job {job['id']} failed: {job.get('error') or status}: see "
                       f"`sparsify-tui job log {job['id']}`")
    result = job.get("result") or {}
    if args.json:
        print_json({"job": job["id"], **result})
    else:
        kind = "perf profile" if job_type == "fleet_profile" else "benchmark"
        for t in result.get("targets") or []:
            if t["status"] == "completed":
                print(f"{t['label']}: stored {kind} {t.get('name')!r} ({t.get('record_id')})")
            else:
                print(f"{t['label']}: {t['status']}" + (f": {t['error']}" if t.get("error") else ""))
    return 0 if not result.get("failed") else 1


def cmd_profile(args) -> int:
    extra = {"int8": not args.no_int8}
    if args.batch_size is not None:
        extra["batch_size"] = args.batch_size
    return _submit_and_follow(args, "fleet_profile", extra)


def cmd_benchmark(args) -> int:
    extra = {"optimizations": list(args.optimization or [])}
    if args.batch_sizes is not None:
        extra["batch_sizes"] = args.batch_sizes
    return _submit_and_follow(args, "fleet_benchmark", extra)
