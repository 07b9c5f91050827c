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
        assert "warning: serving on 0.0.0.0, not loopback" in warning and "without a login" in warning
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


def _children(pid: int) -> list:
    """Every descendant of ``pid`` (from /proc)."""
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                kids.append(int(entry))
    return kids + [d for k in kids for d in _children(k)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] not in ("Z", "X")


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
            sockets = [await http.ws_connect(f"http://127.0.0.1:{port}/ws", headers=origin) for _ in range(3)]
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
