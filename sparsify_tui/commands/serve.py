"""CLI: ``sparsify-tui serve [--port 8000] [--host ADDRESS] [--public-url URL] [--token-file FILE]``: the same TUI
in a web browser.

The app runs through textual-serve (the optional extra ``serve``: ``pip install 'sparsify-tui[serve]'``): each
browser tab that opens the page starts its own ``sparsify-tui`` process, drawn by xterm.js in the page. It is
bound to 127.0.0.1 only, so it is reached from another machine through an SSH tunnel
(``ssh -L 8000:localhost:8000 server``, then the printed URL). Whoever gets in can do what the TUI does (create
projects, start jobs, write files as the serving user), which is why it needs a token, and why a non-loopback
address is refused unless ``--host`` names it, and then comes with a warning.

**A token.** Every start makes a random token (:func:`new_token`), or reads it from ``--token-file``
(:func:`read_token_file`: a file only its owner can read), and prints the URL with it
(``http://localhost:8000/?token=...``). Every HTTP route (the page, its static files, downloads, unknown paths) and
the WebSocket handshake are refused with 403 unless the request carries the token as ``?token=`` or the session
cookie that a request with it sets (as Jupyter does: HttpOnly, SameSite=Strict, named per port, its value an HMAC of
the token, never the token). Tokens are compared with :func:`hmac.compare_digest`. The token is kept out of the
access log. Another user or process on this machine, or a web page, that does not have the token gets 403; anyone
who can read the printed URL (the terminal, a log of it) or the token file, and root, can get in; the traffic is not
encrypted (the SSH tunnel encrypts it).

**Only its own page.** A web page open in the user's browser can reach ``127.0.0.1:PORT`` too (or the tunnel's
port): every HTTP request and WebSocket handshake is refused (403) unless its ``Host`` header names the served URL
(``--public-url``, and for a loopback bind ``localhost``/``127.0.0.1``/``[::1]`` at the port) and its ``Origin``
header, when there is one (a browser always sends it on a WebSocket), is that URL's origin (:func:`refusal`).
A foreign page (``Origin: http://evil.example``) and DNS rebinding (``Host: evil.example:PORT``) are so refused.

**Its children end with it.** Each browser tab's ``sparsify-tui`` is started without a shell, in its own session
and process group, with the :class:`~sparsify_tui.tui.served_driver.ServedDriver` (the app quits when its stdin
closes, i.e. when this server dies). When its browser leaves (the WebSocket closes, or stops answering pings for
:data:`HEARTBEAT_S` seconds) the app is asked to quit; if its group still has a process after :data:`QUIT_WAIT_S`,
the group gets SIGTERM, then SIGKILL after :data:`CHILD_GRACE_S` (:func:`end_groups`). On SIGINT or SIGTERM the
server does the same to every group it started, then closes the browsers' WebSockets and exits. A group is judged by
its members (``/proc``), not by the process it started, so a child behind a wrapper is ended too. Jobs the TUI
started are detached by design (their own sessions) and go on.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import shlex
import signal
import socket
import stat
import sys
import time
from typing import Dict, Iterable, List, Optional, Set, Tuple
from urllib.parse import quote, urlsplit

LOOPBACK = "127.0.0.1"
CHILD_GRACE_S = 2.0
"""Seconds a browser session's process group gets to end after SIGTERM before SIGKILL."""
QUIT_WAIT_S = 2.0
"""Seconds a browser session's app gets to quit on its own after its browser left, before its group gets SIGTERM."""
HEARTBEAT_S = 5.0
"""The WebSocket ping interval: a browser that vanished without closing its connection (a dead tunnel) is noticed
after at most 1.5 times this."""
TOKEN_QUERY = "token"
"""The query parameter that carries the token: ``http://localhost:8000/?token=...``."""
TOKEN_FILE_MAX_BYTES = 4096
"""A ``--token-file`` larger than this is refused (it holds one line)."""
SHORT_TOKEN = 16
"""A ``--token-file`` token shorter than this many characters gets a warning (guessable)."""
SERVED_DRIVER = "sparsify_tui.tui.served_driver:ServedDriver"
"""The Textual driver of a browser session's app (``TEXTUAL_DRIVER``)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAKE_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


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
        "serve", help="serve the TUI to a web browser (textual-serve, 127.0.0.1 only, with a token)",
        description="Serve the TUI to a web browser through textual-serve, bound to 127.0.0.1, behind a token: open "
                    "the URL it prints (http://localhost:8000/?token=...). From another machine, tunnel the port over "
                    "SSH first (ssh -L 8000:localhost:8000 THIS_SERVER). Each browser tab runs its own sparsify-tui, "
                    "which ends when the tab closes. Needs the serve extra: pip install 'sparsify-tui[serve]'.")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--host", default=None, metavar="ADDRESS",
                   help="address to bind (default 127.0.0.1); anything but loopback sends the token and the whole "
                        "session over the network unencrypted, so it is only done when given here, with a warning")
    p.add_argument("--public-url", default=None, metavar="URL",
                   help="the URL the browser uses (default http://localhost:PORT); set it when the tunnel's "
                        "local port differs, e.g. http://localhost:9000")
    p.add_argument("--token-file", default=None, metavar="FILE",
                   help="read the token from FILE (one line; only its owner may read it: chmod 600 FILE) instead of "
                        "making a new random one at each start, so that the URL stays the same across restarts")
    p.set_defaults(handler=cmd_serve)


def serve_argv(no_mouse: bool = False) -> List[str]:
    """The command each browser session runs, without a shell: this Python, this package's TUI (on the Projects
    screen)."""
    return [sys.executable, "-m", "sparsify_tui"] + (["--no-mouse"] if no_mouse else [])


def serve_command(no_mouse: bool = False) -> str:
    """:func:`serve_argv` as one shell-quoted line (what the logs show)."""
    return shlex.join(serve_argv(no_mouse))


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



# ------------------------------------------------------------------------------------------------- the token
def new_token() -> str:
    """A random token for one start of the server: 32 bytes from :func:`secrets.token_urlsafe` (43 characters)."""
    return secrets.token_urlsafe(32)


def read_token_file(path: str) -> Tuple[str, Optional[str]]:
    """The token in ``path`` (its one line, surrounding whitespace stripped) and a warning or None.

    ``SparsifyError`` (one line) when the file cannot be opened, is not a regular file (a FIFO would block), is
    readable or writable by its group or by others (``chmod 600``), is larger than :data:`TOKEN_FILE_MAX_BYTES`, is
    not UTF-8, is empty, or holds more than one word. The warning: a token shorter than :data:`SHORT_TOKEN`
    characters can be guessed."""
    from sparsify_tui.errors import SparsifyError

    shown = repr(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise SparsifyError(f"--token-file {shown} cannot be read ({err.strerror}): give a file that holds the "
                            f"token, e.g. {_MAKE_TOKEN} > FILE; chmod 600 FILE") from None
    try:
        info = os.fstat(fd)  # of the file opened, not of a path that may change meanwhile
        if not stat.S_ISREG(info.st_mode):
            raise SparsifyError(f"--token-file {shown} is not a regular file: give a file that holds the token, "
                                f"e.g. {_MAKE_TOKEN} > FILE; chmod 600 FILE")
        if info.st_mode & 0o066:
            raise SparsifyError(f"--token-file {shown} can be read or written by other users (mode "
                                f"{stat.S_IMODE(info.st_mode):04o}): make it private with "
                                f"chmod 600 {shlex.quote(str(path))}")
        data = os.read(fd, TOKEN_FILE_MAX_BYTES + 1)
    except OSError as err:
        raise SparsifyError(f"--token-file {shown} cannot be read ({err.strerror}): give a readable file") from None
    finally:
        os.close(fd)
    if len(data) > TOKEN_FILE_MAX_BYTES:
        raise SparsifyError(f"--token-file {shown} is larger than {TOKEN_FILE_MAX_BYTES} bytes: it must hold one "
                            f"line, the token, e.g. {_MAKE_TOKEN} > FILE")
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise SparsifyError(f"--token-file {shown} is not UTF-8 text: write the token into it, e.g. "
                            f"{_MAKE_TOKEN} > FILE") from None
    if not token:
        raise SparsifyError(f"--token-file {shown} is empty: write a token into it, e.g. {_MAKE_TOKEN} > FILE")
    if not token.isprintable() or any(c.isspace() for c in token):
        raise SparsifyError(f"--token-file {shown} holds more than one word, or control characters: it must hold "
                            f"one token on one line, e.g. {_MAKE_TOKEN} > FILE")
    warning = None
    if len(token) < SHORT_TOKEN:
        warning = (f"sparsify-tui: warning: the token in {str(path)!r} has {len(token)} characters, short enough to "
                   f"be guessed: use {SHORT_TOKEN} or more, e.g. {_MAKE_TOKEN} > FILE")
    return token, warning


def token_url(public_url: str, token: str) -> str:
    """The URL to open: ``public_url`` with ``?token=`` (quoted)."""
    return f"{public_url.rstrip('/')}/?{TOKEN_QUERY}={quote(token, safe='')}"


def cookie_name(public_url: str) -> str:
    """The session cookie's name, one per browser-side port: cookies are shared by every port of a host, so two
    servers (or two tunnels) on one host keep their own."""
    return f"sparsify-tui-{_origin(public_url)[2]}"


def cookie_value(token: str) -> str:
    """The session cookie's value: HMAC-SHA256 of a fixed message under the token (hex), so the token itself is
    never stored in the browser."""
    return hmac.new(token.encode("utf-8"), b"sparsify-tui serve session", hashlib.sha256).hexdigest()


def same_secret(given: Optional[str], expected: str) -> bool:
    """``given == expected`` in constant time (:func:`hmac.compare_digest` on the UTF-8 bytes); None is False."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8"))


_TOKEN_IN_TEXT = re.compile(r"((?:^|[?&])" + TOKEN_QUERY + r"=)[^&\s\"]*")


def redact_token(text: str) -> str:
    """``text`` with the value of every ``token=`` query parameter replaced by ``...`` (for the access log)."""
    return _TOKEN_IN_TEXT.sub(r"\1...", text)


# ------------------------------------------------------------------------------------------------- process groups
def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` has a member that is not a zombie (``/proc``; elsewhere ``killpg(pgid, 0)``,
    which counts zombies too)."""
    if pgid <= 0:
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read().decode(errors="replace")
            fields = data[data.rindex(")") + 2:].split()
        except (OSError, ValueError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):  # fields: state, ppid, pgrp, session, ...
            return True
    return False


async def _wait_groups_gone(pgids: Iterable[int], timeout_s: float) -> List[int]:
    """Poll until every group in ``pgids`` is gone or ``timeout_s`` passed; the groups still alive."""
    deadline = time.monotonic() + timeout_s
    alive = [g for g in pgids if group_alive(g)]
    while alive and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        alive = [g for g in alive if group_alive(g)]
    return alive


def _signal_groups(pgids: Iterable[int], sig: int) -> None:
    for pgid in pgids:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


async def end_groups(pgids: Iterable[int], grace_s: float = CHILD_GRACE_S) -> List[int]:
    """End every process of the process groups ``pgids`` (the sessions this server started): SIGTERM to each group
    that still has a live member, then SIGKILL to each that still has one after ``grace_s`` seconds; returns the
    groups that needed SIGKILL. Members are found by their process group, so a child behind a wrapper that ends
    on SIGTERM (``/bin/sh -c``) still gets its SIGKILL."""
    live = [g for g in pgids if group_alive(g)]
    _signal_groups(live, signal.SIGTERM)
    _signal_groups(live, signal.SIGCONT)  # a stopped process handles SIGTERM only once continued
    stubborn = await _wait_groups_gone(live, grace_s)
    _signal_groups(stubborn, signal.SIGKILL)
    await _wait_groups_gone(stubborn, grace_s)
    return stubborn


# ------------------------------------------------------------------------------------------------- the server
def make_server(argv: List[str], host: str, port: int, public_url: str, token: str):
    """The textual-serve ``Server`` of ``sparsify-tui serve`` (module docstring): it admits only its own page with
    the token, runs each browser session's ``argv`` in its own process group, and ends each group when its browser
    leaves and all of them when it stops."""
    from aiohttp import WSCloseCode, web
    from aiohttp.web_log import AccessLogger
    from textual_serve.app_service import AppService
    from textual_serve.server import Server, to_int

    log = logging.getLogger("textual-serve")
    command = shlex.join(argv)
    secure = public_url.strip().lower().startswith("https:")
    cookie, session_value = cookie_name(public_url), cookie_value(token)

    class SessionAppService(AppService):
        """A browser session's ``sparsify-tui``: started without a shell, in its own session and process group
        (``pgid``), with the :data:`SERVED_DRIVER`."""

        pgid: Optional[int] = None

        def __init__(self, *a, groups: Set[int], **k) -> None:
            super().__init__(*a, **k)
            self._groups = groups

        def _build_environment(self, width: int = 80, height: int = 24) -> Dict[str, str]:
            environment = super()._build_environment(width=width, height=height)
            environment["TEXTUAL_DRIVER"] = SERVED_DRIVER
            return environment

        async def _open_app_process(self, width: int = 80, height: int = 24):
            environment = self._build_environment(width=width, height=height)
            self._process = process = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=environment, start_new_session=True)
            self._stdin = process.stdin
            self.pgid = process.pid  # start_new_session: the child leads its own session and group
            self._groups.add(process.pid)
            return process

        async def on_data(self, payload: bytes) -> None:
            try:
                await super().on_data(payload)
            except ConnectionResetError:  # the browser left: read on, so that the app is not stuck writing to a
                pass  # full pipe and can quit

        async def on_meta(self, data: bytes) -> None:
            try:
                await super().on_meta(data)
            except ConnectionResetError:
                pass

    class RedactingAccessLogger(AccessLogger):
        """aiohttp's access log with the token cut out of request lines and Referer headers."""

        def _format_line(self, request, response, time):
            return [(key, redact_token(value) if isinstance(value, str) else value)
                    for key, value in super()._format_line(request, response, time)]

    class GuardedServer(Server):
        def __init__(self) -> None:
            super().__init__(command, host=host, port=port, title="sparsify-tui", public_url=public_url)
            self.allowed = allowed_origins(host, port, public_url)
            self.groups: Set[int] = set()
            self.sockets: Set[web.WebSocketResponse] = set()
            self.sock: Optional[socket.socket] = None
            self.stopping = False

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.extend([self._guard, self._require_token])
            return app

        @web.middleware
        async def _guard(self, request: web.Request, handler):
            why = refusal(request.headers.get("Host"), request.headers.get("Origin"), self.allowed)
            if why is not None:
                log.warning("refused %s %s: %s", request.method, request.path, why)
                return web.Response(status=403, text=f"sparsify-tui serve: refused: {why}. It answers only its own "
                                                     f"page, {public_url} (--public-url sets it).\n")
            return await handler(request)

        @web.middleware
        async def _require_token(self, request: web.Request, handler):
            by_query = same_secret(request.query.get(TOKEN_QUERY), token)
            if not (by_query or same_secret(request.cookies.get(cookie), session_value)):
                log.warning("refused %s %s: no valid token", request.method, request.path)
                return web.Response(status=403, text=(
                    "sparsify-tui serve: refused: this page needs its token. Open the URL that `sparsify-tui serve` "
                    f"printed ({public_url.rstrip('/')}/?{TOKEN_QUERY}=...); after that a cookie keeps this browser "
                    "in.\n"))
            response = await handler(request)
            if by_query and not response.prepared:  # the first visit: the cookie lets the page's later requests in
                response.set_cookie(cookie, session_value, path="/", httponly=True, samesite="Strict", secure=secure)
            return response

        async def on_startup(self, app: web.Application) -> None:
            pass  # the URL, with its token, was printed by cmd_serve (textual-serve's banner would show it without)

        async def end_session(self, app_service: SessionAppService) -> None:
            """After the browser left: ask the app to quit; end its process group if anything of it is left after
            :data:`QUIT_WAIT_S`."""
            try:
                await asyncio.wait_for(app_service.stop(), QUIT_WAIT_S)
            except (asyncio.TimeoutError, OSError, RuntimeError):
                pass
            if app_service.pgid is not None:
                await end_groups([app_service.pgid])
                self.groups.discard(app_service.pgid)

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            # textual-serve's handler, with the session's process in its own group (SessionAppService), ended when
            # the browser leaves, a shorter heartbeat, and the socket kept so that shutdown can close it
            websocket = web.WebSocketResponse(heartbeat=HEARTBEAT_S)
            width = to_int(request.query.get("width", "80"), 80)
            height = to_int(request.query.get("height", "24"), 24)
            app_service = None
            try:
                await websocket.prepare(request)
                self.sockets.add(websocket)
                if self.stopping:
                    await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")
                    return websocket
                app_service = SessionAppService(self.command, write_bytes=websocket.send_bytes,
                                                write_str=websocket.send_str, close=websocket.close,
                                                download_manager=self.download_manager, debug=self.debug,
                                                groups=self.groups)
                await app_service.start(width, height)
                await self._process_messages(websocket, app_service)
            except asyncio.CancelledError:
                await websocket.close()
            except Exception as error:  # noqa: BLE001 - textual-serve logs a session's failure and serves on
                log.exception(error)
            finally:
                self.sockets.discard(websocket)
                if app_service is not None:
                    await self.end_session(app_service)
            return websocket

        async def on_shutdown(self, app: web.Application) -> None:
            self.stopping = True
            await end_groups(list(self.groups))
            for ws in list(self.sockets):
                await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")

        def request_exit(self) -> None:
            if self.stopping:  # a second Ctrl+C while the sessions end: they are being ended already
                return
            self.stopping = True
            super().request_exit()

        def serve(self, debug: bool = False) -> None:
            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.request_exit)
            web.run_app(self._make_app(), sock=self.sock, handle_signals=False, loop=loop,
                        print=lambda *args: None, shutdown_timeout=CHILD_GRACE_S,
                        access_log_class=RedactingAccessLogger)

    return GuardedServer()


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
    warning = None
    if getattr(args, "token_file", None):
        token, warning = read_token_file(args.token_file)
    else:
        token = new_token()
    sock = bind_socket(host, args.port)
    if warning:
        print(warning, file=sys.stderr)
    if not is_loopback(host):
        print(f"sparsify-tui: warning: serving on {host}, not loopback: the token and the whole session cross the "
              f"network unencrypted (no TLS), so anyone who can watch the traffic to {host}:{args.port} can take "
              "them. Prefer the default 127.0.0.1 and an SSH tunnel.", file=sys.stderr)
    server = make_server(serve_argv(getattr(args, "no_mouse", False)), host, args.port, public_url, token)
    server.sock = sock
    print(f"sparsify-tui: serving on http://{host}:{args.port}; open {token_url(public_url, token)} (from another "
          f"machine: ssh -L {args.port}:localhost:{args.port} <this server> first). The token in it is the only key: "
          "keep it private. Ctrl+C stops.", file=sys.stderr, flush=True)
    server.serve()
    return 0
