"""Hostile inputs, through the CLI as a user meets them (issue 21): each is refused in one line (exit 2, no
traceback), leaves nothing behind, and leaves the workspace's data intact; or, where the input is legitimate, it
works. The workspace is a copy of one populated by a real run (a project with a perf profile, a loss profile and
an applied optimization), made once per module.

Covered: outputs that are symlinks, non-regular files or inside the workspace; escape sequences in names; Markdown
and HTML reports of hostile names; a model path in project.json pointing out of the project, and a swapped
baseline model; a damaged index (``{}``, empty, lists, int ids, ``../x``, a report written over it); hostile
profile imports (types, ranges, NaN, sizes, nesting); a bad ``SPARSIFY_TUI_HOME``; a read-only and a full disk;
``serve`` on a port in use, a bad host, and a forged Origin or Host; duplicate node names; input sizes 0 and -5;
uint64 labels; a project folder replaced by a symlink; a failed apply; the params of a thinned shared weight; and a
temp folder of a process in another PID namespace. The browser half of the serve check and the count of serve's
children are in tests/test_serve.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from reliability_helpers import DEMO, ROOT, assert_nothing_left, assert_refused, run_cli, run_main, snapshot

DIMS = ["--dim", "x:2=48", "--dim", "x:3=192"]
ESCAPES = ("\x1b", "\x07", "\x9b")


# ------------------------------------------------------------------------------------------------ the workspace
@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A workspace populated as a user would: `create`, a perf profile, a loss profile, an optimization, `apply`."""
    home = tmp_path_factory.mktemp("hostile") / "base"
    for args in (["create", DEMO, "--name", "demo", *DIMS],
                 ["profile", "perf", "demo", "--name", "baseline", "--warmup", "1", "--iterations", "3", "--no-int8"],
                 ["profile", "loss", "demo", "--name", "baseline"],
                 ["optimize", "demo", "--name", "opt"],
                 ["apply", "demo", "opt"]):
        r = run_cli(*args, home=home)
        assert r.code == 0, (args, r.err)
    return home


@pytest.fixture
def home(base, tmp_path, monkeypatch) -> Path:
    """A fresh copy of :func:`base`, as ``$SPARSIFY_TUI_HOME``."""
    dst = tmp_path / "ws"
    shutil.copytree(base, dst, symlinks=True)
    monkeypatch.setenv("SPARSIFY_TUI_HOME", str(dst))
    return dst


def project_dir(home: Path) -> Path:
    (pdir,) = [p for p in (home / "projects").iterdir() if not p.name.startswith(".")]
    return pdir


def model_file(home: Path) -> Path:
    return project_dir(home) / "model" / DEMO.name


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def assert_one_error(run, *needles: str) -> str:
    """Exit code 2, no traceback, and exactly one ``sparsify-tui: error:`` line holding every needle (progress lines
    of a job that started are allowed before it). Returns the line."""
    assert run.code == 2 and "Traceback" not in run.err, (run.code, run.err)
    errors = [line for line in run.err_lines if line.startswith("sparsify-tui: error: ")]
    assert len(errors) == 1, run.err
    for n in needles:
        assert n in errors[0], (n, errors[0])
    return errors[0]


def state(home: Path) -> dict:
    """What must stay intact: the project's data, its model, and what `list` shows."""
    pdir = project_dir(home)
    return {"project": (pdir / "project.json").read_text(), "model": sha256(model_file(home)),
            "blobs": sorted(str(p.relative_to(pdir)) for p in pdir.rglob("*.json"))}


def assert_intact(before: dict, home: Path, capsys) -> None:
    assert state(home) == before
    r = run_main(capsys, "list", "--json")
    assert r.code == 0 and [p["name"] for p in json.loads(r.out)] == ["demo"], r.err


# ------------------------------------------------------------------------------------------------ outputs
def test_outputs_never_write_through_a_symlink(home, tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    cases = [("r.yaml", ["export", "demo", "opt", "-o"]), ("c.py", ["export", "demo", "opt", "--code", "pytorch", "-O"]),
             ("o.onnx", ["apply", "demo", "opt", "-o"]), ("r.md", ["report", "demo", "-o"]),
             ("p.json", ["profile", "export", "demo", "baseline", "-o"]),
             ("n.json", ["profile", "export", "demo", "baseline", "--format", "model-explorer", "-o"])]
    before, kept = snapshot(home), state(home)
    for name, args in cases:
        link = tmp_path / name
        link.symlink_to(victim)
        assert_refused(run_main(capsys, *args, link), "symbolic link", name)
        assert victim.read_text() == "precious" and link.is_symlink()
    dangling = tmp_path / "dangling.yaml"
    dangling.symlink_to(tmp_path / "nowhere" / "x")
    assert_refused(run_main(capsys, "export", "demo", "opt", "-o", dangling), "symbolic link")
    assert not (tmp_path / "nowhere").exists()
    assert_nothing_left(before, home)
    assert_intact(kept, home, capsys)


def test_an_existing_fifo_or_folder_is_not_an_output(home, tmp_path, capsys):
    fifo = tmp_path / "r.md"
    os.mkfifo(fifo)
    assert_refused(run_main(capsys, "report", "demo", "-o", fifo), "not a regular file")
    assert_refused(run_main(capsys, "export", "demo", "opt", "-o", tmp_path), "is a folder")


@pytest.mark.parametrize("target,args", [
    ("workspace.json", ["report", "demo", "-o"]),
    ("{project}/project.json", ["export", "demo", "opt", "-o"]),
    ("{project}/model/ppocr_cls.onnx", ["apply", "demo", "opt", "-o"]),
    ("{project}/analysis.json", ["profile", "export", "demo", "baseline", "-o"]),
    ("{project}/perf_profiles/x.json", ["profile", "export", "demo", "baseline", "--format", "model-explorer", "-o"]),
    ("{project}/x.py", ["export", "demo", "opt", "-o", "/dev/null/unused.yaml", "--code", "pytorch", "-O"]),
])
def test_outputs_inside_the_workspace_are_refused(home, capsys, target, args):
    path = home / target.format(project=f"projects/{project_dir(home).name}")
    if "/dev/null/unused.yaml" in args:  # -O alone: the recipe goes to a path outside the workspace
        args = [a if a != "/dev/null/unused.yaml" else str(home.parent / "r.yaml") for a in args]
    before, kept = snapshot(home), state(home)
    assert_refused(run_main(capsys, *args, path), "inside the sparsify-tui workspace")
    assert_nothing_left(before, home)
    assert_intact(kept, home, capsys)
    assert run_main(capsys, "list").code == 0 and state(home) == kept  # the next start deletes nothing either


# ------------------------------------------------------------------------------------------------ text
def esc_model(path: Path) -> Path:
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "W\x1b]0;pwned\x07")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("MatMul", ["x", w.name], ["y"], name="mm\x1b[2J\x9b31m")
    m = helper.make_model(helper.make_graph([node], "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def test_escape_sequences_in_names_never_reach_the_terminal(home, tmp_path, capsys):
    pdir = project_dir(home)
    before, kept = snapshot(home), state(home)
    assert_refused(run_main(capsys, "create", DEMO, "--name", "\x1b]0;pwned\x07\x1b[2Jx", *DIMS), "control characters")
    assert_refused(run_main(capsys, "edit", "demo", "--description", "\x1b[31mred"), "control characters")
    assert_nothing_left(before, home)
    assert_intact(kept, home, capsys)
    model = esc_model(tmp_path / "esc.onnx")
    for args in (["analyze", model], ["create", model, "--name", "esc"],
                 ["profile", "perf", "esc", "--name", "a", "--warmup", "0", "--iterations", "2", "--no-int8"],
                 ["profile", "perf", "esc", "--name", "b", "--warmup", "0", "--iterations", "2", "--no-int8"],
                 ["compare", "esc", "a", "b"], ["show", "esc"]):
        r = run_main(capsys, *args)
        assert r.code == 0, r.err
        assert not any(e in r.out + r.err for e in ESCAPES), (args, r.out)
    assert "mm␛[2J" in run_main(capsys, "analyze", model).out  # shown, as a symbol
    # a name that got into project.json some other way (an older version, a hand edit) is shown too
    db = pdir / "project.json"
    data = json.loads(db.read_text())
    data["project"]["1"]["name"] = "\x1b]0;pwned\x07x"
    db.write_text(json.dumps(data))
    for args in (["list"], ["show", pdir.name], ["report", pdir.name]):
        r = run_main(capsys, *args)
        assert r.code == 0 and not any(e in r.out + r.err for e in ESCAPES), (args, r.out[:300])


def exported(home: Path, capsys, tmp_path: Path) -> dict:
    out = tmp_path / "exported.json"
    assert run_main(capsys, "profile", "export", "demo", "baseline", "-o", out).code == 0
    return json.loads(out.read_text())


def test_markdown_and_html_reports_escape_imported_names(home, tmp_path, capsys):
    doc = exported(home, capsys, tmp_path)
    doc["profile"]["name"] = "<script>alert(1)</script> ![x](http://evil.example/t.png)"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(doc))
    assert run_main(capsys, "profile", "import", "demo", path).code == 0
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    assert run_main(capsys, "report", "demo", "-o", md).code == 0
    assert run_main(capsys, "report", "demo", "-o", html).code == 0
    for text in (md.read_text(), html.read_text()):
        assert "<script>" not in text and "<img" not in text and "&lt;script&gt;" in text  # no raw HTML
    assert "![x](" not in md.read_text()  # no Markdown image that loads a URL when the file is viewed
    assert "!\\[x\\](http://evil.example/t.png)" in md.read_text()  # shown as text


# ------------------------------------------------------------------------------------------------ the model
def test_a_model_path_pointing_out_of_the_project_is_refused(home, tmp_path, capsys):
    outside = tmp_path / "outside-model.onnx"
    shutil.copy(DEMO, outside)
    db = project_dir(home) / "project.json"
    data = json.loads(db.read_text())
    data["project"]["1"]["model"]["file"] = "../../../../" + os.path.relpath(outside, "/")
    db.write_text(json.dumps(data))
    before = snapshot(home)
    for args in (["profile", "perf", "demo", "--name", "p2"], ["benchmark", "demo", "-O", "opt"],
                 ["apply", "demo", "opt"], ["profile", "loss", "demo", "--name", "l2"]):
        assert_refused(run_main(capsys, *args), "is not a file of")
    assert_nothing_left(before, home)


def test_a_swapped_baseline_model_is_never_measured_as_the_baseline(home, capsys):
    shutil.copy(project_dir(home) / "optimized" / "opt.onnx", model_file(home))
    before = snapshot(home)
    for args in (["profile", "perf", "demo", "--name", "p2"], ["benchmark", "demo", "-O", "opt"],
                 ["apply", "demo", "opt"], ["profile", "loss", "demo", "--name", "l2"]):
        assert_refused(run_main(capsys, *args), "changed since the project was created", "sha256")
    assert_nothing_left(before, home)


# ------------------------------------------------------------------------------------------------ the index
def _damage(home: Path, how: str) -> None:
    db = home / "workspace.json"
    data = json.loads(db.read_text())
    entry = data["projects"]["1"]
    if how == "missing":
        db.unlink()
        return
    text = {"empty object": "{}", "empty file": "", "whitespace": " \n"}.get(how)
    if text is None:
        if how == "projects a list":
            data["projects"] = [entry]
        elif how == "int id":
            entry["id"] = 123
        elif how == "../x id":
            entry["id"] = "../x"
        elif how == "{} entry":
            data["projects"]["2"] = {}
        elif how == "entry without id":
            del entry["id"]
        elif how == "jobs a list":
            data["jobs"] = [1, 2]
        elif how == "projects null":
            data["projects"] = None
        text = json.dumps(data)
    db.write_text(text)


@pytest.mark.parametrize("how", ["missing", "empty object", "empty file", "whitespace", "projects a list", "int id",
                                 "../x id", "{} entry", "entry without id", "jobs a list", "projects null"])
def test_a_damaged_index_is_rebuilt_from_the_project_folders(home, capsys, how):
    kept = state(home)
    _damage(home, how)
    r = run_main(capsys, "list", "--json")
    assert r.code == 0 and [p["name"] for p in json.loads(r.out)] == ["demo"], r.err
    assert state(home) == kept
    assert run_main(capsys, "profile", "export", "demo", "baseline").code == 0  # records reachable again


@pytest.mark.parametrize("text", ["# demo report\n\nnot an index", "[1, 2]", '"text"', "{\"meta\": "])
def test_an_index_that_is_not_one_is_refused_in_one_line_and_nothing_is_deleted(home, capsys, text):
    kept = state(home)
    (home / "workspace.json").write_text(text)
    for args in (["list"], ["show", "demo"], ["create", DEMO, "--name", "other", *DIMS]):
        assert_refused(run_main(capsys, *args), str(home / "workspace.json"), "rebuilds it from the project folders")
    assert state(home) == kept and len(list((home / "projects").iterdir())) == 1
    (home / "workspace.json").rename(home / "workspace.json.bad")  # the fix the line gives
    assert_intact(kept, home, capsys)


# ------------------------------------------------------------------------------------------------ imports
BAD_IMPORTS = {
    "batch_size text": (lambda d: d["profile"].update(batch_size="abc"), "profile.batch_size"),
    "core_count negative": (lambda d: d["profile"].update(core_count=-7), "profile.core_count"),
    "node time NaN": (lambda d: d["nodes"][0].update(time_ms=float("nan")), "NaN"),
    "node time Infinity": (lambda d: d["nodes"][1].update(time_ms=float("inf")), "Infinity"),
    "node time 1e308": (lambda d: d["nodes"][2].update(time_ms=1e308), "nodes[2].time_ms"),
    "est_pruned_ms text": (lambda d: d["nodes"][0].update(est_pruned_ms="x"), "nodes[0].est_pruned_ms"),
    "format_version text": (lambda d: d.update(format_version="abc"), "format_version"),
    "format_version list": (lambda d: d.update(format_version=[1]), "format_version"),
    "model a list": (lambda d: d.update(model=[1]), "model"),
    "latency a list": (lambda d: d["profile"].update(latency_ms=[1]), "profile.latency_ms"),
    "int8 yes": (lambda d: d["profile"].update(int8="yes"), "profile.int8"),
    "name with escape": (lambda d: d["profile"].update(name="a\x1b[2Jb"), "profile.name"),
    "speedup negative": (lambda d: d["profile"]["int8"].update(speedup_interleaved=-1), "speedup_interleaved"),
    "node id a number": (lambda d: d["nodes"][0].update(id=5), "nodes[0].id"),
}


@pytest.mark.parametrize("case", sorted(BAD_IMPORTS))
def test_a_hostile_import_is_refused_before_anything_is_stored(home, tmp_path, capsys, case):
    doc = exported(home, capsys, tmp_path)
    change, needle = BAD_IMPORTS[case]
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    before, kept = snapshot(home), state(home)
    assert_refused(run_main(capsys, "profile", "import", "demo", path), "bad.json", needle)
    assert_nothing_left(before, home)
    assert_intact(kept, home, capsys)
    assert run_main(capsys, "report", "demo").code == 0 and run_main(capsys, "optimize", "demo", "--name", "o2").code == 0


def test_imports_over_the_size_limits_are_refused_naming_them(home, tmp_path, capsys):
    from sparsify_tui.services.profile_schema import MAX_IMPORT_BYTES, MAX_ROWS

    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: nothing is read before the size is checked
        fh.truncate(MAX_IMPORT_BYTES + 1)
    before = snapshot(home)
    assert_refused(run_main(capsys, "profile", "import", "demo", big), "over the import limit", "MAX_IMPORT_BYTES")
    doc = exported(home, capsys, tmp_path)
    doc["nodes"] = [{"index": i, "id": f"n{i}", "op_type": "Relu", "time_ms": 0.0} for i in range(MAX_ROWS + 1)]
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps(doc, separators=(",", ":")))
    assert_refused(run_main(capsys, "profile", "import", "demo", rows), f"{MAX_ROWS + 1} rows", "MAX_ROWS")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    assert_refused(run_main(capsys, "profile", "import", "demo", deep), "nests too deep")
    assert_nothing_left(before, home)


# ------------------------------------------------------------------------------------------------ environment
@pytest.mark.parametrize("kind", ["dangling link", "a file", "under a file", "under a dangling link"])
def test_a_bad_sparsify_tui_home_is_one_line(tmp_path, kind):
    target = {"dangling link": tmp_path / "link", "a file": tmp_path / "file",
              "under a file": tmp_path / "file" / "sub", "under a dangling link": tmp_path / "link" / "sub"}[kind]
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    (tmp_path / "file").write_text("not a folder")
    for args in (["list"], ["create", DEMO, *DIMS], ["job", "list"], ["show", "demo"]):
        assert_refused(run_cli(*args, home=target), "SPARSIFY_TUI_HOME")
    assert not (tmp_path / "nowhere").exists() and (tmp_path / "file").read_text() == "not a folder"


def _mount_ns() -> list:
    """A command prefix that runs its command in a new mount namespace (to mount a read-only or tiny file system),
    or skip."""
    for prefix in (["unshare", "-m"], ["unshare", "-rm"]):
        try:
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0:
                return prefix
        except (OSError, subprocess.TimeoutExpired):
            pass
    pytest.skip("no mount namespace here (unshare -m)")


def _in_mount_ns(script: str, home: Path, tmp_path: Path) -> list:
    """Run the shell ``script`` (``$H`` is the workspace, ``run ARGS`` a sparsify-tui command whose exit code and
    stderr are recorded) in a new mount namespace; returns ``[(args, code, stderr)]``."""
    out = tmp_path / "ns-out"
    out.mkdir(exist_ok=True)
    prelude = (f'H={home}; OUT={out}; N=0\nrun() {{ N=$((N+1)); echo "$*" > $OUT/$N.args; '
               f'PYTHONPATH={ROOT} SPARSIFY_TUI_HOME=$H {sys.executable} -m sparsify_tui "$@" >/dev/null '
               f'2>$OUT/$N.err; echo $? > $OUT/$N.code; }}\n')
    r = subprocess.run([*_mount_ns(), "sh", "-c", prelude + script], capture_output=True, text=True, timeout=600)
    if "mount:" in r.stderr and not any(out.glob("*.code")):
        pytest.skip(f"cannot mount here: {r.stderr.strip()[:200]}")
    results = []
    for code in sorted(out.glob("*.code"), key=lambda p: int(p.stem)):
        n = code.stem
        results.append(((out / f"{n}.args").read_text().strip(), int(code.read_text()), (out / f"{n}.err").read_text()))
    return results


def test_a_read_only_workspace_is_one_line_for_every_command(home, tmp_path, capsys):
    kept = state(home)
    results = _in_mount_ns(
        "mount --bind $H $H && mount -o remount,ro,bind $H || exit 1\n"
        f"run create {DEMO} --name x2 {' '.join(DIMS)}\nrun edit demo --description hi\nrun optimize demo --name o3\n"
        "run profile perf demo --name p3\nrun profile loss demo --name l3\nrun apply demo opt\n"
        "run benchmark demo -O opt\nrun delete demo --yes\nrun export demo opt\n", home, tmp_path)
    assert len(results) == 9, results
    for args, code, err in results:
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, (args, code, err)
        assert "Read-only file system" in lines[0] or "read-only" in lines[0], (args, err)
    assert_intact(kept, home, capsys)


def test_a_full_disk_is_one_line_and_leaves_no_job_record(home, tmp_path, capsys):
    """The workspace on a 3 MiB file system filled up: a perf profile fails in one line, with no job record and no
    log left (nothing was measured; the space they took is given back); the project is intact."""
    jobs_before = sorted(json.loads((home / "workspace.json").read_text())["jobs"])
    logs_before = sorted(p.name for p in (home / "jobs").iterdir())
    copy = tmp_path / "copy"
    shutil.copytree(home, copy, symlinks=True)
    results = _in_mount_ns(
        f"mount -t tmpfs -o size=3m none $H && cp -a {copy}/. $H/ || exit 1\n"
        "dd if=/dev/zero of=$H/filler bs=4k 2>/dev/null; sync\n"
        "for free in 0 64 256; do\n"
        "  [ $free -gt 0 ] && truncate -s -${free}k $H/filler\n"
        "  run profile perf demo --name full$free --warmup 0 --iterations 2\n"
        f"  run create {DEMO} --name c$free {' '.join(DIMS)}\n"
        "done\n"
        "rm $H/filler; cp $H/workspace.json $OUT/workspace.json; ls $H/jobs > $OUT/logs; "
        "ls -a $H/projects > $OUT/projects\n", home, tmp_path)
    assert len(results) == 6, results
    for args, code, err in results:
        lines = err.strip().splitlines()
        if code == 0:  # enough space freed for this one: fine
            continue
        assert code == 2 and "Traceback" not in err, (args, code, err)
        assert "No space left on device" in lines[-1] and len([x for x in lines if "error" in x]) == 1, (args, err)
    out = tmp_path / "ns-out"
    jobs = json.loads((out / "workspace.json").read_text())["jobs"]
    failed = [j for j in jobs.values() if j.get("status") == "error"]
    assert failed == [], failed
    ok_runs = sum(1 for args, code, _ in results if code == 0 and args.startswith("profile"))
    assert len(jobs) == len(jobs_before) + ok_runs
    assert len((out / "logs").read_text().split()) == len(logs_before) + ok_runs
    assert not [n for n in (out / "projects").read_text().split() if n.startswith(".creating")]


def test_serve_refuses_a_port_in_use_a_bad_host_and_a_bad_url_in_one_line(tmp_path):
    pytest.importorskip("textual_serve")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_refused(run_cli("serve", "--port", port, home=tmp_path / "ws", timeout=60), f"port {port}", "in use")
    assert_refused(run_cli("serve", "--host", "no such host!", home=tmp_path / "ws", timeout=60), "--host")
    assert_refused(run_cli("serve", "--public-url", "ftp://x", home=tmp_path / "ws", timeout=60), "--public-url")
    assert not (tmp_path / "ws").exists()


def test_serve_answers_only_its_own_page(tmp_path):
    """A forged-Origin client (what a web page in the user's browser is) and a foreign Host (DNS rebinding) get 403
    on the page and on the WebSocket; the served page's own origin gets the app."""
    pytest.importorskip("textual_serve")
    import aiohttp
    from browser_cdp import ServedApp, free_port

    port = free_port()

    async def run():
        async with ServedApp(tmp_path / "ws", port) as served, aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{port}"
            token = {"token": served.token}  # refused even with the token
            for headers in ({"Origin": "http://evil.example"}, {"Host": f"evil.example:{port}"}, {"Origin": "null"},
                            {"Origin": f"http://localhost:{port + 1}"}):
                async with http.get(url + "/", headers=headers, params=token) as r:
                    assert r.status == 403, headers
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await http.ws_connect(url + "/ws", headers=headers, params=token)
                assert refused.value.status == 403
            for origin in (f"http://localhost:{port}", f"http://127.0.0.1:{port}"):
                async with http.ws_connect(url + "/ws", headers={"Origin": origin}, params=token) as ws:
                    msg = await asyncio.wait_for(ws.receive(), 60)
                    assert msg.type == aiohttp.WSMsgType.BINARY  # the app's first frame
            assert "refused GET /ws: Origin 'http://evil.example'" in served.stderr_path.read_text()

    (tmp_path / "ws").mkdir()
    asyncio.run(run())


def test_serve_public_url_is_the_page_it_answers(tmp_path):
    """Behind a tunnel on another local port, --public-url names the page: its origin is admitted."""
    pytest.importorskip("textual_serve")
    import aiohttp
    from browser_cdp import ServedApp, free_port

    port = free_port()

    async def run():
        public = "http://localhost:9443"
        async with ServedApp(tmp_path / "ws", port, ("--public-url", public)) as served, \
                aiohttp.ClientSession() as http:
            assert served.url == f"{public}/?token={served.token}"  # the URL it prints is the tunnel's
            async with http.get(f"http://127.0.0.1:{port}/", headers={"Host": "localhost:9443", "Origin": public},
                                params={"token": served.token}) as r:
                assert r.status == 200 and "ws://localhost:9443/ws" in await r.text()

    (tmp_path / "ws").mkdir()
    asyncio.run(run())


# ------------------------------------------------------------------------------------------------ models
def _matmul(path: Path, shape, names=("mm", "mm2")) -> Path:
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name=names[0]),
             helper.make_node("MatMul", ["h", "W"], ["y"], name=names[1])]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


@pytest.mark.parametrize("shape,names,needles", [
    ([1, 4], ("mm", "mm"), ("two nodes named 'mm'",)),
    ([0, 4], ("a", "b"), ("size 0 on axis 0", "empty tensor")),
    ([1, 0, 4], ("a", "b"), ("size 0 on axis 1",)),
    ([-5, 4], ("a", "b"), ("size -5 on axis 0", "not a size")),
])
def test_a_model_onnxruntime_cannot_run_is_refused_at_create_with_the_reason(home, tmp_path, capsys, shape, names,
                                                                             needles):
    model = _matmul(tmp_path / "m.onnx", shape, names)
    before = snapshot(home)
    for args in (["create", model, "--name", "bad"], ["analyze", model]):
        assert_refused(run_main(capsys, *args), *needles)
    assert_nothing_left(before, home)


def test_a_free_size_marked_minus_one_still_works(home, tmp_path, capsys):
    model = _matmul(tmp_path / "m.onnx", [-1, 4])
    assert run_main(capsys, "create", model, "--name", "free").code == 0


def test_uint64_labels_are_refused_with_their_real_value(home, tmp_path, capsys):
    data = tmp_path / "u64.npz"
    np.savez(data, x=np.random.rand(4, 3, 48, 192).astype(np.float32),
             labels=np.array([0, 1, 2 ** 64 - 1, 1], np.uint64))
    before = snapshot(home)
    for args in (["apply", "demo", "opt", "--data", data],
                 ["optimize", "demo", "--name", "q", "--sparsity", "0", "--quantize", "--max-drop", "0.05",
                  "--data", data]):
        line = assert_refused(run_main(capsys, *args), "18446744073709551615")
        assert "contain -1" not in line
    assert_nothing_left(before, home)


@pytest.mark.parametrize("kind", ["to its real folder", "dangling", "to an empty folder"])
def test_a_project_folder_replaced_by_a_symlink_can_be_deleted(home, tmp_path, capsys, kind):
    pdir = project_dir(home)
    real = tmp_path / "real"
    if kind == "to its real folder":
        shutil.move(str(pdir), real)
    else:
        shutil.rmtree(pdir)
        if kind == "to an empty folder":
            real.mkdir()
    pdir.symlink_to(real)
    r = run_main(capsys, "delete", "demo", "--yes")
    assert r.code == 0, r.err
    assert not os.path.lexists(pdir) and [p.name for p in (home / "projects").iterdir()] == []
    assert run_main(capsys, "list", "--json").out.strip() == "[]"
    if kind == "to its real folder":  # what the link pointed to is outside the workspace: left as it is
        assert (real / "project.json").is_file()


def test_a_failed_apply_leaves_no_model_behind(home, capsys, monkeypatch):
    import sparsify_tui.optimization.apply as apply_mod
    from sparsify_tui.errors import ModelError

    out = project_dir(home) / "optimized" / "opt.onnx"
    out.unlink()

    def fail(*a, **k):
        raise ModelError("onnxruntime cannot run the optimized model (simulated): check it")

    monkeypatch.setattr(apply_mod, "output_difference", fail)
    assert_one_error(run_main(capsys, "apply", "demo", "opt"), "simulated")
    assert not out.exists() and not Path(f"{out}.data").exists()


def shared_weight_model(path: Path, channels: int = 32) -> Path:
    """Conv -> Conv(W) -> Conv(W) -> Conv: one weight read by two layers."""
    rng = np.random.default_rng(0)
    c = channels
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in
             (("W1", (c, 3, 3, 3)), ("Wshared", (c, c, 3, 3)), ("B", (c,)), ("W3", (8, c, 1, 1)))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    pads = {"pads": [1, 1, 1, 1]}
    nodes = [helper.make_node("Conv", ["x", "W1"], ["a"], name="c1", **pads),
             helper.make_node("Relu", ["a"], ["a2"], name="r1"),
             helper.make_node("Conv", ["a2", "Wshared", "B"], ["b"], name="c2", **pads),
             helper.make_node("Relu", ["b"], ["b2"], name="r2"),
             helper.make_node("Conv", ["b2", "Wshared", "B"], ["c"], name="c3", **pads),
             helper.make_node("Relu", ["c"], ["c2r"], name="r3"),
             helper.make_node("Conv", ["c2r", "W3"], ["y"], name="c4")]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def test_the_params_estimate_of_a_thinned_shared_weight_is_what_the_file_holds(home, tmp_path, capsys):
    model = shared_weight_model(tmp_path / "shared.onnx")
    assert run_main(capsys, "create", model, "--name", "shared").code == 0
    r = run_main(capsys, "optimize", "shared", "--name", "ch", "--structure", "channel", "--sparsity", "0.5",
                 "--round-to", "8", "--json")
    assert r.code == 0, r.err
    est = json.loads(r.out)["estimates"]
    r = run_main(capsys, "apply", "shared", "ch", "--json")
    assert r.code == 0, r.err
    written = onnx.load(json.loads(r.out)["applied"]["path"])
    in_file = sum(int(np.prod(t.dims)) for t in written.graph.initializer)
    assert in_file < est["params"]  # something was thinned
    assert est["params_nonzero"] == pytest.approx(in_file, rel=0.01), (est["params_nonzero"], in_file)


# ------------------------------------------------------------------------------------------------ processes
def _pid_namespace() -> list:
    try:
        if subprocess.run(["unshare", "-pf", "--mount-proc", "true"], capture_output=True, timeout=10).returncode == 0:
            return ["unshare", "-pf", "--mount-proc"]
    except (OSError, subprocess.TimeoutExpired):
        pass
    pytest.skip("no PID namespace here (unshare -pf)")


def test_a_temp_folder_of_a_process_in_another_pid_namespace_survives_every_start_up(home, tmp_path):
    """A perf profile runs in its own PID namespace (a container, a Ray worker) while this namespace starts
    sparsify-tui over and over: its temp folder's name holds a pid that means nothing here, but it holds the
    folder's lock, so no start-up removes it and the profile completes. (Removing by pid failed it with
    "onnxruntime cannot load ppocr_cls.onnx (SystemError : 2)": the folder of its optimized graph was gone.)
    Both run in a private mount namespace with their own /dev/shm, so that no other sparsify-tui on this machine
    (another checkout, an older version) takes part."""
    _pid_namespace()
    prefix = _mount_ns()
    env = f"PYTHONPATH={ROOT} SPARSIFY_TUI_HOME={home}"
    cleaner = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from sparsify_tui.tempfiles import "
               "clean_stale_temp_dirs as c; print(*c(), sep=chr(10))")
    script = f"""mount -t tmpfs -o size=256m none /dev/shm || exit 97
unshare -pf --mount-proc sh -c 'for i in $(seq 1 150); do /bin/true; done; {env} {sys.executable} -m sparsify_tui \
    profile perf demo --name ns --warmup 2 --iterations 150 --quiet >/dev/null 2>{tmp_path}/perf.err; \
    echo $? > {tmp_path}/perf.code' &
BG=$!
while kill -0 $BG 2>/dev/null; do
  {sys.executable} -c '{cleaner}' >> {tmp_path}/removed
  {env} {sys.executable} -m sparsify_tui job list >/dev/null 2>&1
done
wait $BG
"""
    r = subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=600)
    if r.returncode == 97:
        pytest.skip(f"cannot mount a private /dev/shm here: {r.stderr.strip()[:200]}")
    assert (tmp_path / "perf.code").read_text().strip() == "0", (tmp_path / "perf.err").read_text()
    removed = (tmp_path / "removed").read_text().split() if (tmp_path / "removed").exists() else []
    assert not [p for p in removed if "sparsify-perf-" in p], removed
