"""A headless Chromium driven over the DevTools protocol (CDP), for `sparsify-tui serve` in a real browser.

No Playwright: Chromium is started as Debian ships it, and spoken to with aiohttp's WebSocket client (aiohttp
comes with textual-serve). What the app sends to the page is read from the page's WebSocket frames
(``Network.webSocketFrameReceived``): textual-serve draws with xterm.js on a canvas, so there is no text in the
DOM to read. Keys go in as ``Input.dispatchKeyEvent``; ``screenshot`` saves a PNG.

Used by tests/test_serve.py and screenshots/make_screenshots.py::

    async with ServedApp(home, port) as served, Chromium.launch(tmp) as browser:
        page = await browser.open(served.url)
        await page.wait_for_text("Projects")
        await page.press("n")
        await page.wait_for_text("New project")
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--mute-audio",
                  "--remote-debugging-port=0", "--remote-allow-origins=*"]


def chromium_path() -> Optional[str]:
    """The Chromium binary (Debian's ``chromium``), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServedApp:
    """``sparsify-tui serve --port PORT`` in a subprocess (its own session) on workspace ``home``. Once it answers:
    ``url``, the URL it printed (with its token, as a user copies it), ``token``, and ``base`` (the URL without)."""

    def __init__(self, home: Path, port: int, extra_args: tuple = ()) -> None:
        self.home, self.port, self.extra_args = Path(home), port, tuple(extra_args)
        self.base = f"http://localhost:{port}/"
        self.url = self.token = ""
        self.proc: Optional[subprocess.Popen] = None
        self.stderr_path = self.home.parent / f"serve-{port}.log"

    def _printed_url(self) -> str:
        """The ``http://.../?token=...`` URL serve printed on stderr ("" until it has)."""
        found = re.search(r"open (http://\S+\?token=\S+)", self.stderr_path.read_text(errors="replace"))
        return found.group(1) if found else ""

    async def __aenter__(self) -> "ServedApp":
        import aiohttp

        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env = dict(os.environ, SPARSIFY_TUI_HOME=str(self.home), PYTHONPATH=path)
        self._log = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "sparsify_tui", "serve", "--port", str(self.port),
                                      *self.extra_args], cwd=ROOT, env=env, stdout=self._log, stderr=self._log,
                                     start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            async with aiohttp.ClientSession() as http:
                while time.monotonic() < deadline:
                    if self.proc.poll() is not None:
                        raise RuntimeError(f"serve exited: {self.stderr_path.read_text(errors='replace')}")
                    self.url = self.url or self._printed_url()
                    if self.url:
                        token = parse_qs(urlsplit(self.url).query)["token"][0]
                        with contextlib.suppress(Exception):  # on the bound port (a --public-url may be a tunnel's)
                            async with http.get(self.base, params={"token": token}) as r:
                                if r.status == 200:
                                    self.token = token
                                    return self
                    await asyncio.sleep(0.2)
            raise RuntimeError(f"serve did not answer: {self.stderr_path.read_text(errors='replace')}")
        except BaseException:
            await self.__aexit__()
            raise

    async def __aexit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._log.close()


class Page:
    """One tab, spoken to over its CDP WebSocket."""

    def __init__(self, ws, session) -> None:
        self.ws, self.session = ws, session
        self._next = 0
        self._pending: dict[int, asyncio.Future] = {}
        self.frames: list[bytes] = []  # what the app sent to the page, in order
        self.sent: list[str] = []  # what the page sent to the app (its text frames: keys, resizes), in order
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            elif data.get("method") == "Network.webSocketFrameSent":
                self.sent.append(data["params"]["response"].get("payloadData", ""))
            elif data.get("method") == "Network.webSocketFrameReceived":
                response = data["params"]["response"]
                payload = response.get("payloadData", "")
                self.frames.append(base64.b64decode(payload) if response.get("opcode") == 2
                                   else payload.encode("utf-8", "replace"))

    async def send(self, method: str, params: Optional[dict] = None) -> dict:
        self._next += 1
        future = asyncio.get_running_loop().create_future()
        self._pending[self._next] = future
        await self.ws.send_str(json.dumps({"id": self._next, "method": method, "params": params or {}}))
        reply = await asyncio.wait_for(future, 30)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def received(self, since: int = 0) -> str:
        """Everything the app sent since frame ``since``, as text (escape codes included)."""
        return b"".join(self.frames[since:]).decode("utf-8", "replace")

    async def wait_for_text(self, text: str, since: int = 0, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.received(since):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never reached the page")
            await asyncio.sleep(0.1)

    async def press(self, key: str) -> None:
        """Type one printable key into the terminal, as a user's keyboard does."""
        await self.send("Runtime.evaluate", {"expression": "document.querySelector('.xterm-helper-textarea')"
                                                            "?.focus()"})
        code = f"Key{key.upper()}" if key.isalpha() else f"Digit{key}" if key.isdigit() else ""
        base = {"key": key, "code": code, "windowsVirtualKeyCode": ord(key.upper()), "text": key}
        await self.send("Input.dispatchKeyEvent", {"type": "keyDown", **base})
        await self.send("Input.dispatchKeyEvent", {"type": "keyUp", **{k: v for k, v in base.items() if k != "text"}})

    async def screenshot(self, path: Path) -> Path:
        shot = await self.send("Page.captureScreenshot", {"format": "png"})
        Path(path).write_bytes(base64.b64decode(shot["data"]))
        return Path(path)

    async def close(self) -> None:
        self._reader.cancel()
        await self.ws.close()


class Chromium:
    """Headless Chromium with the flags of DESIGN (no sandbox, no GPU, no background networking), its profile in
    ``tmp``; ``open(url)`` gives a :class:`Page` with the page's WebSocket traffic recorded."""

    def __init__(self, proc: subprocess.Popen, port: int, profile: Path) -> None:
        self.proc, self.port, self.profile = proc, port, profile
        self.pages: list[Page] = []

    @classmethod
    @contextlib.asynccontextmanager
    async def launch(cls, tmp: Path, size: tuple[int, int] = (1280, 800)):
        import aiohttp

        binary = chromium_path()
        if binary is None:
            raise RuntimeError("chromium is not installed")
        profile = Path(tmp) / "chromium-profile"
        profile.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                 f"--window-size={size[0]},{size[1]}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            port_file = profile / "DevToolsActivePort"
            deadline = time.monotonic() + 30
            while not (port_file.is_file() and port_file.read_text().strip()):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("chromium did not start its DevTools endpoint")
                await asyncio.sleep(0.1)
            browser = cls(proc, int(port_file.read_text().split()[0]), profile)
            browser.http = aiohttp.ClientSession()
            try:
                yield browser
            finally:
                for page in browser.pages:
                    with contextlib.suppress(Exception):
                        await page.close()
                await browser.http.close()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

    async def open(self, url: str) -> Page:
        async with self.http.put(f"http://127.0.0.1:{self.port}/json/new?about:blank") as r:
            target: Any = await r.json(content_type=None)
        ws = await self.http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        page = Page(ws, self.http)
        self.pages.append(page)
        await page.send("Network.enable")
        await page.send("Page.enable")
        await page.send("Page.navigate", {"url": url})
        return page
