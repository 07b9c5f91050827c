"""`sparsify-tui serve`: the TUI through textual-serve in a real headless browser (Debian's chromium, driven over
the DevTools protocol: tests/browser_cdp.py). Skipped when chromium or textual-serve is missing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from browser_cdp import ROOT, Chromium, ServedApp, chromium_path, free_port
from sparsify_tui.commands.serve import is_loopback, serve_command
from sparsify_tui.services.projects import create_project
from sparsify_tui.store import Workspace

DEMO_DIMS = {"x:2": 48, "x:3": 192}


def needs_browser():
    pytest.importorskip("textual_serve")
    pytest.importorskip("aiohttp")
    if chromium_path() is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")


def test_loopback_rule():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("127.8.0.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.org")
    assert serve_command().endswith("-m sparsify_tui")


def test_serve_binds_loopback_and_warns_for_another_host(tmp_path):
    """Bound to 127.0.0.1 by default (not reachable on other addresses); --host 0.0.0.0 is only done when given,
    with a warning on stderr."""
    pytest.importorskip("textual_serve")
    import socket

    port = free_port()
    env = {"SPARSIFY_TUI_HOME": str(tmp_path / "ws"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([sys.executable, "-m", "sparsify_tui", "serve", "--port", str(port)], cwd=ROOT,
                            env={**env, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get(
                                "PYTHONPATH", "")) if p)}, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert f"serving on http://127.0.0.1:{port}" in line and "ssh -L" in line
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
        if listening.strip():  # `ss` is there: only the loopback address listens
            local = {line.split()[3] for line in listening.splitlines() if line.strip()}
            assert local == {f"127.0.0.1:{port}"}, listening
    finally:
        proc.terminate()
        proc.wait(10)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sparsify_tui", "serve", "--port", str(port), "--host", "0.0.0.0"],
                            cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True)
    try:
        warning = proc.stderr.readline()
        assert "warning: serving on 0.0.0.0, not loopback" in warning and "unencrypted (no TLS)" in warning
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_projects_screen_renders_in_a_browser_and_keys_reach_the_app(tmp_path):
    needs_browser()
    home = tmp_path / "ws"
    home.mkdir()
    os.environ["SPARSIFY_TUI_HOME"] = str(home)
    try:
        create_project(Workspace(home), ROOT / "sparsify_tui" / "demo" / "ppocr_cls.onnx", "browser-demo",
                       dims=DEMO_DIMS)
    finally:
        del os.environ["SPARSIFY_TUI_HOME"]

    async def run():
        async with ServedApp(home, free_port()) as served, Chromium.launch(tmp_path) as browser:
            page = await browser.open(served.url)
            await page.wait_for_text("browser-demo", timeout=60)  # the Projects screen, with the project
            assert "Projects" in page.received()
            mark = len(page.frames)
            await page.press("n")  # a key typed in the browser reaches the app: the New Project dialog
            await page.wait_for_text("New project", since=mark, timeout=30)
            png = await page.screenshot(tmp_path / "browser.png")
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000

    asyncio.run(run())


EVIL_PAGE = """<!DOCTYPE html><html><head><title>waiting</title></head><body><script>
const ws = new WebSocket("ws://localhost:%(port)d/ws?width=80&height=24");
ws.onopen = () => { document.title = "open"; ws.send(JSON.stringify(["stdin", "j"])); };
ws.onclose = (e) => { if (document.title !== "open") document.title = "refused " + e.code; };
</script></body></html>"""


def _stat(pid) -> tuple:
    """``(state, ppid, pgrp, session)`` of process ``pid`` from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def _children(pid: int) -> list:
    """Every descendant of ``pid`` (from /proc)."""
    kids = [int(e) for e in os.listdir("/proc") if e.isdigit() and (_stat(e) or ("", 0))[1] == pid]
    return kids + [d for k in kids for d in _children(k)]


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _left(ids) -> list:
    """The live (not zombie) processes whose process group or session is one of ``ids``, as ``ps`` lines."""
    ids = set(ids)
    out = []
    for entry in os.listdir("/proc"):
        stat = _stat(entry) if entry.isdigit() else None
        if stat and stat[0] not in ("Z", "X") and (stat[2] in ids or stat[3] in ids):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                cmd = "?"
            out.append(f"{entry} {stat} {cmd}")
    return out


def _kill_left(ids) -> None:
    """SIGKILL what :func:`_left` finds (a failed test leaves nothing running)."""
    for line in _left(ids):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _session_groups(serve_pid: int) -> set:
    """The process groups of the browser sessions ``serve`` started (its children's groups)."""
    groups = set()
    for pid in _children(serve_pid):
        stat = _stat(pid)
        if stat:
            groups.add(stat[2])
    return groups - {serve_pid}


def test_a_page_from_another_origin_cannot_drive_the_served_tui(tmp_path):
    """A web page open in the user's browser (here: a real headless Chromium) opens ws://localhost:PORT/ws: the
    server refuses the handshake (403: its Origin is not the served page), starts no sparsify-tui for it, and the
    served page itself still works in the same browser."""
    needs_browser()
    from aiohttp import web

    home = tmp_path / "ws"
    home.mkdir()
    port, evil_port = free_port(), free_port()

    async def run():
        async def evil_page(_request):
            return web.Response(text=EVIL_PAGE % {"port": port}, content_type="text/html")

        evil = web.Application()
        evil.router.add_get("/", evil_page)
        runner = web.AppRunner(evil)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", evil_port).start()
        try:
            async with ServedApp(home, port) as served, Chromium.launch(tmp_path) as browser:
                page = await browser.open(f"http://127.0.0.1:{evil_port}/")
                deadline = time.monotonic() + 30
                title = "waiting"
                while title == "waiting" and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                    title = (await page.send("Runtime.evaluate", {"expression": "document.title"}))["result"]["value"]
                assert title.startswith("refused"), title
                assert _children(served.proc.pid) == []  # no sparsify-tui was started for it
                assert "refused GET /ws: Origin 'http://127.0.0.1:" in served.stderr_path.read_text()
                own = await browser.open(served.url)  # the served page, in the same browser, still works
                await own.wait_for_text("Projects", timeout=60)
        finally:
            await runner.cleanup()

    asyncio.run(run())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_ends_every_child_it_started(tmp_path, sig):
    """Three browser sessions, one of them stopped (SIGSTOP: it can answer neither the quit message nor SIGTERM, as
    a stuck child would not): on SIGINT or SIGTERM serve ends all of them, then exits."""
    pytest.importorskip("textual_serve")
    import aiohttp

    home = tmp_path / "ws"
    home.mkdir()
    port = free_port()

    async def run():
        async with ServedApp(home, port) as served, aiohttp.ClientSession() as http:
            origin = {"Origin": f"http://localhost:{port}"}
            url = f"http://127.0.0.1:{port}/ws?token={served.token}"
            sockets = [await http.ws_connect(url, headers=origin) for _ in range(3)]
            for ws in sockets:
                await asyncio.wait_for(ws.receive(), 60)  # the session's process drew something
            deadline = time.monotonic() + 30
            while len(_children(served.proc.pid)) < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            children = _children(served.proc.pid)
            assert len(children) >= 3, children
            os.kill(children[0], signal.SIGSTOP)
            served.proc.send_signal(sig)
            served.proc.wait(30)
            assert served.proc.returncode == 0
            time.sleep(0.5)
            assert [c for c in children if _alive(c)] == []
            for ws in sockets:
                await ws.close()

    asyncio.run(run())


ROUTES = ["/", "/static/js/textual.js", "/static/css/xterm.css", "/static/", "/download/abc", "/favicon.ico",
          "/no/such/page"]


def _upgrade(port: int, query: str = "", cookie: str = "") -> str:
    """The status line a raw socket gets for a WebSocket upgrade of /ws with the served page's own Origin and Host
    (what a local process, not a browser, can send)."""
    import base64
    import socket

    key = base64.b64encode(os.urandom(16)).decode()
    request = (f"GET /ws?width=80&height=24{query} HTTP/1.1\r\nHost: localhost:{port}\r\n"
               f"Origin: http://localhost:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
               + (f"Cookie: {cookie}\r\n" if cookie else "") + "\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request.encode())
        return sock.recv(4096).split(b"\r\n", 1)[0].decode()


def test_without_the_token_every_route_and_the_websocket_are_refused(tmp_path):
    """A local process that is not the user's browser: a plain HTTP client and a raw socket sending a WebSocket
    upgrade with the page's own Origin get 403 on every route without the token (and with a wrong one); the
    printed URL's token lets them in, and sets an HttpOnly, SameSite=Strict cookie that lets later requests (the
    page's static files, its WebSocket) in without it. The token never reaches the access log."""
    pytest.importorskip("textual_serve")
    import aiohttp

    home = tmp_path / "ws"
    home.mkdir()
    port = free_port()

    async def run():
        async with ServedApp(home, port) as served:
            token = served.token
            assert len(token) >= 40 and served.url == f"http://localhost:{port}/?token={token}"
            async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
                for route in ROUTES:
                    for query in ("", "?token=", "?token=wrong", f"?token={token[:-1]}", "?token=%C3%A9"):
                        async with http.get(f"http://localhost:{port}{route}{query}") as r:
                            assert r.status == 403, (route, query, r.status)
                            assert "needs its token" in await r.text()
                # the page's own Origin and Host, but no token: no session, no process
                assert _upgrade(port).endswith("403 Forbidden")
                assert _upgrade(port, cookie=f"sparsify-tui-{port}=0123").endswith("403 Forbidden")
                assert _children(served.proc.pid) == []
                async with http.get(f"http://localhost:{port}/?token={token}") as r:
                    assert r.status == 200 and "textual-terminal" in await r.text()
                    set_cookie = r.headers["Set-Cookie"]
                async with http.get(f"http://localhost:{port}/static/js/textual.js?token={token}") as r:
                    assert r.status == 200
            assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie and token not in set_cookie
            cookie = set_cookie.split(";", 1)[0]
            async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
                for route in ("/", "/static/js/textual.js", "/static/css/xterm.css"):
                    async with http.get(f"http://localhost:{port}{route}", headers={"Cookie": cookie}) as r:
                        assert r.status == 200, route
            # the WebSocket: with the token in the query, then with the cookie only
            assert _upgrade(port, query=f"&token={token}").endswith("101 Switching Protocols")
            assert _upgrade(port, cookie=cookie).endswith("101 Switching Protocols")
            assert token not in served.stderr_path.read_text().split("\n", 1)[1]  # only in the printed URL

    asyncio.run(run())


def test_token_file(tmp_path):
    """``--token-file``: its token is the one in the printed URL and the one that opens the page; a file other users
    can read, an empty file or a FIFO is refused in one line (exit 2, naming the fix), before anything listens."""
    pytest.importorskip("textual_serve")
    import aiohttp

    home = tmp_path / "ws"
    home.mkdir()
    good = tmp_path / "token"
    good.write_text("my-own-token-of-32-characters-00\n")
    good.chmod(0o600)
    port = free_port()

    async def run():
        async with ServedApp(home, port, extra_args=("--token-file", str(good))) as served:
            assert served.token == "my-own-token-of-32-characters-00"
            async with aiohttp.ClientSession() as http:
                async with http.get(served.base) as r:
                    assert r.status == 403

    asyncio.run(run())
    env = dict(os.environ, SPARSIFY_TUI_HOME=str(home), PYTHONPATH=str(ROOT))
    shared = tmp_path / "shared"
    shared.write_text("my-own-token-of-32-characters-00\n")
    shared.chmod(0o644)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    empty.chmod(0o600)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    for path, expected in ((shared, "chmod 600"), (empty, "is empty"), (fifo, "not a regular file"),
                           (tmp_path / "missing", "cannot be read")):
        done = subprocess.run([sys.executable, "-m", "sparsify_tui", "serve", "--port", str(free_port()),
                               "--token-file", str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2, (path, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_token_file_contents_and_token_helpers(tmp_path):
    """read_token_file: one word on one line (whitespace around it stripped), a short one with a warning; more than one
    word, control characters, more than 4 KiB or non-UTF-8 are one-line errors. Tokens are compared in constant time
    on their bytes (a non-ASCII guess is simply wrong), the cookie is not the token, and the log never shows it."""
    from sparsify_tui.commands.serve import (cookie_value, read_token_file, redact_token, same_secret,
                                             token_url)
    from sparsify_tui.errors import SparsifyError

    def token_file(data: bytes):
        path = tmp_path / "t"
        path.write_bytes(data)
        path.chmod(0o600)
        return str(path)

    assert read_token_file(token_file(b"  abcdefghijklmnopqrstuvwxyz\n")) == ("abcdefghijklmnopqrstuvwxyz", None)
    token, warning = read_token_file(token_file(b"short\n"))
    assert token == "short" and "5 characters" in warning and "guessed" in warning
    for data, expected in ((b"two words\n", "more than one word"), (b"a\nb\n", "more than one word"),
                           (b"tok\x07en", "control characters"), (b"x" * 5000, "larger than 4096 bytes"),
                           (b"\xff\xfe", "not UTF-8")):
        with pytest.raises(SparsifyError) as err:
            read_token_file(token_file(data))
        assert expected in str(err.value) and "\n" not in str(err.value)
    assert same_secret("abc", "abc") and not same_secret("abd", "abc") and not same_secret(None, "abc")
    assert not same_secret("\u00e9\udcff", "abc")  # no TypeError on non-ASCII (hmac.compare_digest on str raises)
    assert "abc" not in cookie_value("abc") and cookie_value("abc") != cookie_value("abd")
    assert token_url("http://localhost:9000", "a+b/c") == "http://localhost:9000/?token=a%2Bb%2Fc"
    assert redact_token('GET /ws?width=80&token=s3cret&height=24 "http://localhost/?token=s3cret"') == \
        'GET /ws?width=80&token=...&height=24 "http://localhost/?token=..."'


def test_a_browser_that_leaves_at_once_ends_its_app(tmp_path):
    """A browser that opens the page and leaves within a moment (``chromium --screenshot`` does): its session's app,
    asked to quit while still starting, ends within a few seconds, nothing of its process group is left, and serve
    goes on serving (the issue's app stayed at 60% CPU, ignoring SIGTERM)."""
    pytest.importorskip("textual_serve")
    import aiohttp

    home = tmp_path / "ws"
    home.mkdir()
    port = free_port()

    async def run():
        async with ServedApp(home, port) as served, aiohttp.ClientSession() as http:
            origin = {"Origin": f"http://localhost:{port}"}
            ws = await http.ws_connect(f"http://127.0.0.1:{port}/ws?width=80&height=24&token={served.token}",
                                       headers=origin)
            await ws.send_json(["resize", {"width": 100, "height": 30}])  # as xterm.js fits the page's window
            deadline = time.monotonic() + 30
            while not _session_groups(served.proc.pid) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            groups.update(_session_groups(served.proc.pid))
            assert groups
            await ws.close()  # before the app has drawn anything
            deadline = time.monotonic() + 10
            while _left(groups) and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            assert _left(groups) == []
            assert served.proc.poll() is None
            again = await http.ws_connect(f"http://127.0.0.1:{port}/ws?token={served.token}", headers=origin)
            await asyncio.wait_for(again.receive(), 60)  # a new session still starts
            await again.close()

    groups: set = set()
    try:
        asyncio.run(run())
    finally:
        _kill_left(groups)


def test_the_apps_end_when_serve_is_killed(tmp_path):
    """serve killed with SIGKILL (no chance to clean up): each session's app sees its stdin close and quits within a
    few seconds, instead of running on re-parented to PID 1."""
    pytest.importorskip("textual_serve")
    import aiohttp

    home = tmp_path / "ws"
    home.mkdir()
    port = free_port()

    async def run():
        async with ServedApp(home, port) as served, aiohttp.ClientSession() as http:
            origin = {"Origin": f"http://localhost:{port}"}
            ws = await http.ws_connect(f"http://127.0.0.1:{port}/ws?token={served.token}", headers=origin)
            await asyncio.wait_for(ws.receive(), 60)  # the app drew something
            groups.update(_session_groups(served.proc.pid))
            assert groups and _left(groups)
            served.proc.kill()
            served.proc.wait(10)
            deadline = time.monotonic() + 10
            while _left(groups) and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            assert _left(groups) == []

    groups: set = set()
    try:
        asyncio.run(run())
    finally:
        _kill_left(groups)


def test_a_killed_browser_and_ctrl_c_leave_no_process(tmp_path):
    """The user's real browser (headless Chromium) opens the printed URL and gets the app; a second tab is opening
    (and being resized) when the browser is killed (SIGKILL, no goodbye); then Ctrl+C (SIGINT) on serve. 5 s later
    nothing is left of serve's session or of the process groups of the sessions it started (the issue's app of such
    a tab ran on at 60% CPU, re-parented to PID 1: it ignored the quit and SIGTERM, and SIGKILL went to its shell)."""
    needs_browser()
    home = tmp_path / "ws"
    home.mkdir()

    async def run():
        async with ServedApp(home, free_port()) as served, Chromium.launch(tmp_path) as browser:
            page = await browser.open(served.url)
            await page.wait_for_text("Projects", timeout=60)  # the app, in the browser
            first = _session_groups(served.proc.pid)
            assert len(first) == 1
            second = await browser.open(served.url)  # a second tab, resized while its app starts (as the
            # window of `chromium --screenshot` is): the browser dies before the app has drawn its first frame

            async def resizes(n: int) -> None:
                deadline = time.monotonic() + 30
                while sum('"resize"' in frame for frame in second.sent) < n and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                assert sum('"resize"' in frame for frame in second.sent) >= n, second.sent

            await resizes(1)  # the page fitted the terminal to the window and told its app
            await second.send("Emulation.setDeviceMetricsOverride",
                              {"width": 900, "height": 500, "deviceScaleFactor": 1, "mobile": False})
            await resizes(2)
            groups.update(_session_groups(served.proc.pid))
            assert len(groups) == 2
            os.killpg(browser.proc.pid, signal.SIGKILL)
            await asyncio.sleep(2)  # the user notices later
            served.proc.send_signal(signal.SIGINT)
            await asyncio.sleep(5)
            assert _left(groups | {served.proc.pid}) == []
            assert served.proc.poll() == 0

    groups: set = set()
    try:
        asyncio.run(run())
    finally:
        _kill_left(groups)
