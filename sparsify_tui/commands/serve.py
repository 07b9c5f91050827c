"""CLI: ``sparsify-tui serve [--port 8000] [--host ADDRESS] [--public-url URL]``: the same TUI in a web browser.

The app runs through textual-serve (the optional extra ``serve``: ``pip install 'sparsify-tui[serve]'``): each
browser tab that opens the page starts its own ``sparsify-tui`` process, drawn by xterm.js in the page. It is
bound to 127.0.0.1 only, so it is reached from another machine through an SSH tunnel
(``ssh -L 8000:localhost:8000 server``, then http://localhost:8000). There is no login: whoever reaches the
port can do what the TUI does (create projects, start jobs, write files), which is why a non-loopback address
is refused unless ``--host`` names it, and then comes with a warning.

**Only its own page.** A web page open in the user's browser can reach ``127.0.0.1:PORT`` too (or the tunnel's
port): every HTTP request and WebSocket handshake is refused (403) unless its ``Host`` header names the served URL
(``--public-url``, and for a loopback bind ``localhost``/``127.0.0.1``/``[::1]`` at the port) and its ``Origin``
header, when there is one (a browser always sends it on a WebSocket), is that URL's origin (:func:`refusal`).
A foreign page (``Origin: http://evil.example``) and DNS rebinding (``Host: evil.example:PORT``) are so refused.

**Its children end with it.** Each browser tab's ``sparsify-tui`` runs in its own process group; on SIGINT or
SIGTERM the server ends every one it started (SIGTERM, then SIGKILL after :data:`CHILD_GRACE_S`) and closes the
browsers' WebSockets before it exits. Jobs the TUI started are detached by design (their own sessions) and go on.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import os
import shlex
import signal
import socket
import sys
from typing import Iterable, List, Optional, Set, Tuple
from urllib.parse import urlsplit

LOOPBACK = "127.0.0.1"
CHILD_GRACE_S = 3.0
"""Seconds a browser session's process gets to end after SIGTERM before SIGKILL (on the server's shutdown)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def register(sub) -> None:
    p = sub.add_parser(
        "serve", help="serve the TUI to a web browser (textual-serve, 127.0.0.1 only)",
        description="Serve the TUI to a web browser through textual-serve, bound to 127.0.0.1: from another "
                    "machine, tunnel the port over SSH (ssh -L 8000:localhost:8000 THIS_SERVER) and open "
                    "http://localhost:8000. Each browser tab runs its own sparsify-tui. Needs the serve extra: "
                    "pip install 'sparsify-tui[serve]'.")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--host", default=None, metavar="ADDRESS",
                   help="address to bind (default 127.0.0.1); anything but loopback lets every machine that can "
                        "reach it use sparsify-tui without a login, so it is only done when given here, with a "
                        "warning")
    p.add_argument("--public-url", default=None, metavar="URL",
                   help="the URL the browser uses (default http://localhost:PORT); set it when the tunnel's "
                        "local port differs, e.g. http://localhost:9000")
    p.set_defaults(handler=cmd_serve)


def serve_command(no_mouse: bool = False) -> str:
    """The shell command textual-serve runs for each browser session: this Python, this package's TUI (on the
    Projects screen)."""
    parts = [sys.executable, "-m", "sparsify_tui"] + (["--no-mouse"] if no_mouse else [])
    return " ".join(shlex.quote(p) for p in parts)


def _origin(url: str) -> Tuple[str, str, int]:
    """``(scheme, host, port)`` of an http(s) URL, host lower-case without brackets; ValueError otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(url)
    return parts.scheme, parts.hostname.lower(), parts.port or _DEFAULT_PORTS[parts.scheme]


def allowed_origins(host: str, port: int, public_url: str) -> Set[Tuple[str, str, int]]:
    """The origins of the served page: ``public_url``'s, the bound address's (unless a wildcard such as 0.0.0.0),
    and for a loopback bind ``localhost``, ``127.0.0.1`` and ``::1`` at ``port``."""
    out = {_origin(public_url)}
    bound = host.strip("[]").lower()
    if is_loopback(host):
        out |= {("http", h, port) for h in ("localhost", "127.0.0.1", "::1", bound)}
    elif bound not in ("0.0.0.0", "::", ""):
        out.add(("http", bound, port))
    return out


def _host_header(value: str) -> Optional[Tuple[str, Optional[int]]]:
    try:
        parts = urlsplit("//" + value.strip())
        return (parts.hostname or "").lower(), parts.port
    except ValueError:
        return None


def refusal(host_header: Optional[str], origin_header: Optional[str],
            allowed: Iterable[Tuple[str, str, int]]) -> Optional[str]:
    """Why a request must be refused (403), or None when it comes from the served page: the ``Host`` header must
    name one of the ``allowed`` origins (its port, or the scheme's default port when it has none), and the
    ``Origin`` header, when present, must be one of them exactly (``null`` never is)."""
    allowed = set(allowed)
    parsed = _host_header(host_header or "")
    if not host_header or parsed is None or not any(
            parsed[0] == h and (parsed[1] or _DEFAULT_PORTS[s]) == p for s, h, p in allowed):
        return f"Host {host_header!r} is not this server's URL"
    if origin_header is not None:
        try:
            if _origin(origin_header) in allowed:
                return None
        except ValueError:
            pass
        return f"Origin {origin_header!r} is not this server's page"
    return None


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port``; ``SparsifyError`` (one line) when the address does not resolve,
    is not this machine's, or the port is taken or privileged."""
    from sparsify_tui.errors import SparsifyError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise SparsifyError(f"--host {host!r} is not an address this machine can listen on ({reason}): give an IP "
                            "address or host name of this machine, e.g. --host 127.0.0.1 (the default)") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise SparsifyError(f"port {port} on {host} is in use (another program, or another sparsify-tui serve): "
                                f"pick a free one, e.g. --port {port + 1 if port < 65535 else 8000}") from None
        if err.errno == errno.EADDRNOTAVAIL:
            raise SparsifyError(f"--host {host!r} is not an address of this machine: give one of its addresses, "
                                "e.g. --host 127.0.0.1 (the default)") from None
        if err.errno == errno.EACCES:
            raise SparsifyError(f"port {port} needs more privileges than this user has: use a port above 1023, "
                                "e.g. --port 8000") from None
        raise SparsifyError(f"cannot listen on {host}:{port} ({err.strerror}): pick another --host or --port") from None
    return sock


def make_server(command: str, host: str, port: int, public_url: str):
    """The textual-serve ``Server`` of ``sparsify-tui serve`` (module docstring): it admits only its own page and
    ends every child it started when it stops."""
    from aiohttp import WSCloseCode, web
    from textual_serve.app_service import AppService
    from textual_serve.server import Server, to_int

    log = logging.getLogger("textual-serve")

    class ChildAppService(AppService):
        """A browser session's ``sparsify-tui`` in its own process group, registered with the server."""

        def __init__(self, *a, children: Set[asyncio.subprocess.Process], **k) -> None:
            super().__init__(*a, **k)
            self._children = children

        async def _open_app_process(self, width: int = 80, height: int = 24):
            environment = self._build_environment(width=width, height=height)
            self._process = process = await asyncio.create_subprocess_shell(
                self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=environment, start_new_session=True)
            self._stdin = process.stdin
            self._children.add(process)
            return process

    class GuardedServer(Server):
        def __init__(self) -> None:
            super().__init__(command, host=host, port=port, title="sparsify-tui", public_url=public_url)
            self.allowed = allowed_origins(host, port, public_url)
            self.children: Set[asyncio.subprocess.Process] = set()
            self.sockets: Set[web.WebSocketResponse] = set()
            self.sock: Optional[socket.socket] = None

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(self._guard)
            return app

        @web.middleware
        async def _guard(self, request: web.Request, handler):
            why = refusal(request.headers.get("Host"), request.headers.get("Origin"), self.allowed)
            if why is not None:
                log.warning("refused %s %s: %s", request.method, request.path, why)
                return web.Response(status=403, text=f"sparsify-tui serve: refused: {why}. It answers only its own "
                                                     f"page, {public_url} (--public-url sets it).\n")
            return await handler(request)

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            # textual-serve's handler, with the session's process registered (ChildAppService) and the socket kept
            # so that shutdown can close it
            websocket = web.WebSocketResponse(heartbeat=15)
            width = to_int(request.query.get("width", "80"), 80)
            height = to_int(request.query.get("height", "24"), 24)
            app_service = None
            try:
                await websocket.prepare(request)
                self.sockets.add(websocket)
                app_service = ChildAppService(self.command, write_bytes=websocket.send_bytes,
                                              write_str=websocket.send_str, close=websocket.close,
                                              download_manager=self.download_manager, debug=self.debug,
                                              children=self.children)
                await app_service.start(width, height)
                try:
                    await self._process_messages(websocket, app_service)
                finally:
                    await app_service.stop()
            except asyncio.CancelledError:
                await websocket.close()
            except Exception as error:  # noqa: BLE001 - textual-serve logs a session's failure and serves on
                log.exception(error)
            finally:
                self.sockets.discard(websocket)
                if app_service is not None:
                    await app_service.stop()
            return websocket

        async def on_shutdown(self, app: web.Application) -> None:
            await end_children(self.children)
            for ws in list(self.sockets):
                await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")

        def serve(self, debug: bool = False) -> None:
            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.request_exit)
            web.run_app(self._make_app(), sock=self.sock, handle_signals=False, loop=loop,
                        print=lambda *args: None, shutdown_timeout=CHILD_GRACE_S)

    return GuardedServer()


async def end_children(children: Set["asyncio.subprocess.Process"], grace_s: float = CHILD_GRACE_S) -> List[int]:
    """End every live child (its whole process group): SIGTERM, then SIGKILL for those still alive after
    ``grace_s`` seconds. Returns the pids that needed SIGKILL."""
    live = [p for p in children if p.returncode is None]

    def signal_all(procs, sig) -> None:
        for proc in procs:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            except PermissionError:  # pragma: no cover
                proc.send_signal(sig)

    signal_all(live, signal.SIGTERM)
    if live:
        await asyncio.wait([asyncio.ensure_future(p.wait()) for p in live], timeout=grace_s)
    stubborn = [p for p in live if p.returncode is None]
    signal_all(stubborn, signal.SIGKILL)
    for proc in stubborn:
        try:
            await asyncio.wait_for(proc.wait(), timeout=grace_s)
        except asyncio.TimeoutError:  # pragma: no cover - SIGKILL cannot be ignored
            pass
    return [p.pid for p in stubborn]


def cmd_serve(args) -> int:
    from sparsify_tui.errors import SparsifyError

    if not 0 < args.port < 65536:
        raise SparsifyError(f"--port {args.port} is not a TCP port: give 1-65535, e.g. --port 8000")
    host = args.host or LOOPBACK
    try:
        import textual_serve.server  # noqa: F401
    except ImportError:
        raise SparsifyError("serve needs textual-serve: pip install 'sparsify-tui[serve]' "
                            "(or pip install textual-serve)") from None
    url_host = "localhost" if is_loopback(host) else (f"[{host}]" if ":" in host else host)
    public_url = args.public_url or f"http://{url_host}:{args.port}"
    try:
        _origin(public_url)
    except ValueError:
        raise SparsifyError(f"--public-url {public_url!r} is not an http(s) URL: give the address the browser opens, "
                            f"e.g. http://localhost:{args.port}") from None
    sock = bind_socket(host, args.port)
    if not is_loopback(host):
        print(f"sparsify-tui: warning: serving on {host}, not loopback: anyone who can reach {host}:{args.port} "
              "can use sparsify-tui without a login (create projects, run jobs, write files). Prefer the "
              "default 127.0.0.1 and an SSH tunnel.", file=sys.stderr)
    server = make_server(serve_command(getattr(args, "no_mouse", False)), host, args.port, public_url)
    server.sock = sock
    print(f"sparsify-tui: serving on http://{host}:{args.port} (browser URL {public_url}); from another machine: "
          f"ssh -L {args.port}:localhost:{args.port} <this server>, then open http://localhost:{args.port}. "
          "Ctrl+C stops.", file=sys.stderr, flush=True)
    server.serve()
    return 0
