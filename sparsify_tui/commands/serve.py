"""CLI: ``sparsify-tui serve [--port 8000] [--host ADDRESS] [--public-url URL]``: the same TUI in a web browser.

The app runs through textual-serve (the optional extra ``serve``: ``pip install 'sparsify-tui[serve]'``): each
browser tab that opens the page starts its own ``sparsify-tui`` process, drawn by xterm.js in the page. It is
bound to 127.0.0.1 only, so it is reached from another machine through an SSH tunnel
(``ssh -L 8000:localhost:8000 server``, then http://localhost:8000). There is no login: whoever reaches the
port can do what the TUI does (create projects, start jobs, write files), which is why a non-loopback address
is refused unless ``--host`` names it, and then comes with a warning.
"""

from __future__ import annotations

import ipaddress
import shlex
import sys

LOOPBACK = "127.0.0.1"


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


def cmd_serve(args) -> int:
    from sparsify_tui.errors import SparsifyError

    if not 0 < args.port < 65536:
        raise SparsifyError(f"--port {args.port} is not a TCP port: give 1-65535, e.g. --port 8000")
    host = args.host or LOOPBACK
    if not is_loopback(host):
        print(f"sparsify-tui: warning: serving on {host}, not loopback: anyone who can reach {host}:{args.port} "
              "can use sparsify-tui without a login (create projects, run jobs, write files). Prefer the "
              "default 127.0.0.1 and an SSH tunnel.", file=sys.stderr)
    try:
        from textual_serve.server import Server
    except ImportError:
        raise SparsifyError("serve needs textual-serve: pip install 'sparsify-tui[serve]' "
                            "(or pip install textual-serve)") from None
    public_url = args.public_url or f"http://{'localhost' if is_loopback(host) else host}:{args.port}"
    print(f"sparsify-tui: serving on http://{host}:{args.port} (browser URL {public_url}); from another machine: "
          f"ssh -L {args.port}:localhost:{args.port} <this server>, then open http://localhost:{args.port}. "
          "Ctrl+C stops.", file=sys.stderr, flush=True)
    server = Server(serve_command(getattr(args, "no_mouse", False)), host=host, port=args.port,
                    title="sparsify-tui", public_url=public_url)
    server.serve()
    return 0
