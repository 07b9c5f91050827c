"""CLI: ``sparsify-tui create|list|show|edit|delete|demo`` (projects in the workspace).

The workspace is ``$SPARSIFY_TUI_HOME`` or ``~/.local/share/sparsify-tui``
(see :class:`sparsify_tui.store.Workspace`).
"""

from __future__ import annotations

import sys

from sparsify_tui.formatting import plural

DEMO_NAME = "demo"
DEMO_DIMS = {"x:2": 48, "x:3": 192}


def register(sub) -> None:
    c = sub.add_parser("create", help="create a project from an ONNX model (copied into the workspace)")
    c.add_argument("model", metavar="MODEL", help="path of the .onnx file")
    c.add_argument("--name", help="project name (default: the model file name without .onnx)")
    c.add_argument("--description", default="", help="free text")
    c.add_argument("--link", action="store_true",
                   help="reference the model where it is instead of copying it (for huge files)")
    c.add_argument("--batch-size", type=int, default=1, metavar="N", help="batch size for shapes (default 1)")
    c.add_argument("--dim", action="extend", nargs="+", default=[], metavar="NAME=VALUE",
                   help="value of a symbolic input dim, by dim name or INPUT:AXIS (repeatable)")
    c.add_argument("--json", action="store_true", help="print the project as JSON")
    c.set_defaults(handler=_create)

    ls = sub.add_parser("list", help="list the projects")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(handler=_list)

    sh = sub.add_parser("show", help="show a project: settings, model, size on disk, record counts")
    sh.add_argument("project", metavar="PROJECT", help="project id or name")
    sh.add_argument("--json", action="store_true", help="print JSON")
    sh.set_defaults(handler=_show)

    e = sub.add_parser("edit", help="change a project's name, description or training settings")
    e.add_argument("project", metavar="PROJECT", help="project id or name")
    e.add_argument("--name")
    e.add_argument("--description")
    e.add_argument("--optimizer", help="SGD, Adam, AdamW or RMSprop")
    e.add_argument("--epochs", type=int, metavar="N")
    e.add_argument("--init-lr", type=float, metavar="LR", help="initial learning rate")
    e.add_argument("--final-lr", type=float, metavar="LR", help="final learning rate")
    e.add_argument("--json", action="store_true", help="print the project as JSON")
    e.set_defaults(handler=_edit)

    d = sub.add_parser("delete", help="delete a project and everything in its folder")
    d.add_argument("project", metavar="PROJECT", help="project id or name")
    d.add_argument("--yes", action="store_true", help="confirm the deletion")
    d.add_argument("--force", action="store_true",
                   help="delete even while a job of the project runs or waits: the job is canceled")
    d.add_argument("--json", action="store_true", help="print JSON")
    d.set_defaults(handler=_delete)

    m = sub.add_parser(
        "demo",
        help="create (or reuse) the demo project from the bundled model, profile it, and open it",
        description="Create (or reuse) the project 'demo' from the bundled PP-OCR classifier. The first time, run its "
        "baseline performance profile (measured on the default runtime, INT8 included) and a weight-magnitude loss profile, "
        "with progress on stderr; then open the TUI on it.",
    )
    m.add_argument("--headless", action="store_true", help="do not open the TUI; print the project summary")
    m.add_argument("--no-profile", action="store_true", help="skip the baseline perf and loss profiles")
    m.add_argument("--json", action="store_true", help="with --headless: print the summary as JSON")
    m.set_defaults(handler=_demo)


def _ws():
    from sparsify_tui.store import Workspace

    return Workspace()


def _print_summary(s: dict) -> None:
    from sparsify_tui.formatting import format_bytes, format_count, safe_line

    m = s["model"]
    t = s["training"]
    st = s["setup"]
    print(f"{safe_line(s['name'])} ({s['id']})" + (f": {s['description']}" if s.get("description") else ""))
    print(f"  model     {m['file']}{' (linked: ' + m['path'] + ')' if m.get('linked') else ''}, "
          f"opset {m.get('opset')}, sha256 {m['sha256'][:12]}")
    print(f"            params {format_count(m.get('params'), '', '?')}, MACs {format_count(m.get('macs'), '', '?')}, "
          f"FLOPs {format_count(m.get('flops'), '', '?')} at batch {st.get('batch_size')}")
    dims = ", ".join(f"{k}={v}" for k, v in (st.get("dims") or {}).items())
    print(f"  setup     batch {st.get('batch_size')}, {plural(st.get('core_count'), 'core')}" + (f", dims {dims}" if dims else ""))
    print(f"  training  {t['optimizer']}, {t['epochs']} epochs, LR {t['init_lr']:g} -> {t['final_lr']:g}")
    if "records" in s:
        r = s["records"]
        print(f"  records   {r['perf_profiles']} perf profiles, {r['loss_profiles']} loss profiles, "
              f"{r['optimizations']} optimizations, {r['benchmarks']} benchmarks")
        print(f"  folder    {s['path']} ({format_bytes(s['size_bytes'])})")
    print(f"  created   {s['created']}, modified {s['modified']}")


def _create(args) -> int:
    from sparsify_tui.analysis.shapes import parse_dim_args
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.formatting import format_count
    from sparsify_tui.services.projects import create_project

    from sparsify_tui.commands.output import print_warnings

    dims = parse_dim_args(args.dim)
    ws = _ws()
    project = create_project(ws, args.model, args.name, args.description, link=args.link,
                             batch_size=args.batch_size, dims=dims)
    print_warnings(((ws.analysis_of(project["id"]) or {}).get("model") or {}).get("warnings"))
    if args.json:
        print_json(project)
    else:
        m = project["model"]
        print(f"created project {project['name']} ({project['id']}) from {m['file']}: "
              f"{format_count(m.get('params'), '', '?')} params, {format_count(m.get('flops'), '', '?')} FLOPs; "
              f"open it with `sparsify-tui` or `sparsify-tui show {project['id']}`")
    return 0


def _list(args) -> int:
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.formatting import format_count

    from sparsify_tui.commands.output import print_warnings
    from sparsify_tui.formatting import safe_line

    ws = _ws()
    projects = ws.list_projects()
    damaged = ws.damaged_projects()
    if args.json:
        print_json(projects)
        print_warnings(f"project {safe_line(d['name'] or d['id'])} ({d['id']}) is damaged: {d['problem']}"
                       for d in damaged)
        return 0
    if not projects and not damaged:
        print("no projects: create one with `sparsify-tui create MODEL.onnx --name NAME`")
        return 0
    names = {p["id"]: safe_line(p["name"]) for p in projects + damaged}  # a newline cannot forge a row
    width = max(len(n) for n in names.values())
    for p in projects:
        print(f"{p['id']}  {names[p['id']]:<{width}}  {safe_line(p['model']['file']):<24} "
              f"{format_count(p['model'].get('params'), '', '?'):>8} params  modified {p['modified'][:19].replace('T', ' ')}")
    for d in damaged:
        print(f"{d['id']}  {names[d['id']] or '?':<{width}}  DAMAGED: {d['problem']}")
    return 0


def _show(args) -> int:
    from sparsify_tui.commands.output import print_json

    from sparsify_tui.services.projects import project_summary

    s = project_summary(_ws(), args.project)
    if args.json:
        print_json(s)
    else:
        _print_summary(s)
    return 0


def _edit(args) -> int:
    from sparsify_tui.commands.output import print_json

    fields = {}
    for key in ("name", "description", "optimizer", "epochs", "init_lr", "final_lr"):
        value = getattr(args, key)
        if value is not None:
            fields[key] = value
    ws = _ws()
    pid = ws.get_project(args.project)["id"]
    project = ws.update_project(pid, **fields) if fields else ws.get_project(pid)
    if args.json:
        print_json(project)
    else:
        t = project["training"]
        print(f"{project['name']} ({project['id']}): {t['optimizer']}, {t['epochs']} epochs, "
              f"LR {t['init_lr']:g} -> {t['final_lr']:g}" + ("" if fields else " (nothing changed)"))
    return 0


def _delete(args) -> int:
    from sparsify_tui.commands.output import print_json
    from sparsify_tui.errors import ProjectError

    from sparsify_tui.formatting import safe_line
    from sparsify_tui.jobs import active_jobs, active_jobs_phrase, delete_project

    ws = _ws()
    # not the project's data: a damaged or linked-away folder is deletable, and so is a folder the index lacks
    project = ws.project_entry(args.project, orphans=True)
    name = safe_line(project["name"])
    jobs = [] if project.get("orphan") else active_jobs(ws, project["id"])
    if jobs and not args.force:
        ids = " ".join(j["id"] for j in jobs)
        raise ProjectError(f"project {name} ({project['id']}) has {active_jobs_phrase(jobs)}, which deleting it "
                           f"would cancel: wait for it, or cancel it (`sparsify-tui job cancel {ids}`), or add "
                           "--yes --force to cancel it and delete the project")
    if not args.yes:
        raise ProjectError(f"refusing to delete project {name} ({project['id']}) without confirmation: add --yes")
    delete_project(ws, project["id"])
    if args.json:
        print_json({"deleted": project["id"], "name": project["name"]})
    else:
        print(f"deleted project {name} ({project['id']})")
    return 0


def demo_model_path():
    """Path of the bundled demo model (``sparsify_tui/demo/ppocr_cls.onnx``)."""
    from pathlib import Path

    import sparsify_tui.demo

    return Path(sparsify_tui.demo.__file__).resolve().parent / "ppocr_cls.onnx"


def ensure_demo_project(ws) -> dict:
    """The project named "demo", created from the bundled model (dims x:2=48, x:3=192) if missing."""
    from sparsify_tui.errors import RecordNotFound
    from sparsify_tui.services.projects import create_project

    try:
        return ws.get_project(DEMO_NAME)
    except RecordNotFound:
        return create_project(ws, demo_model_path(), DEMO_NAME,
                              "PP-OCR text direction classifier (bundled demo model, Apache-2.0)", dims=dict(DEMO_DIMS))


def run_demo_profiles(ws, project: dict) -> None:
    """Run the demo's main jobs in this process, once: its baseline profiles (:func:`sparsify_tui.jobs.baseline_jobs`:
    the perf profile and the weight-magnitude loss profile), each only if the project has none of that kind yet."""
    from sparsify_tui.commands.output import stderr_progress
    from sparsify_tui.jobs import baseline_jobs, run_here

    for job_type, args, label in baseline_jobs(ws, project, missing_only=True):
        print(f"demo: measuring the {args['name']} {label.lower()} ...", file=sys.stderr)
        run_here(ws, project["id"], job_type, args, progress=stderr_progress())


def _demo(args) -> int:
    from sparsify_tui.commands.output import print_json, terminal_problem

    problem = None if args.headless else terminal_problem()
    if problem:  # `sparsify-tui demo | tee log`: the same work, headless, the summary into the pipe
        print(f"sparsify-tui: {problem}: running the demo headless (as with --headless)", file=sys.stderr)
        args.headless = True
    ws = _ws()
    project = ensure_demo_project(ws)
    if not args.no_profile:
        run_demo_profiles(ws, project)
    if args.headless:
        from sparsify_tui.services.projects import project_summary

        s = project_summary(ws, project["id"])
        if args.json:
            print_json(s)
        else:
            _print_summary(s)
        return 0
    from sparsify_tui.tui.app import run_app

    return run_app(project=project["id"], mouse=not getattr(args, "no_mouse", False))
