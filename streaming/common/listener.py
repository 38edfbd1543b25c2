"""The /metrics port of every command, taken before anything else starts and kept.

A port already in use is then one line at start (`rebalance-monitor run: error: --metrics-port
9108: ...`, exit 2), not a traceback after Spark or a broker connection started, and no other
process can take the port while the command starts up. The HTTP server serves on the socket it
is given (`serve_wsgi`).

    >>> sock = listen("127.0.0.1", 0)
    >>> sock.getsockname()[1] > 0
    True
    >>> sock.close()
"""

from __future__ import annotations

import socket
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client.exposition import ThreadingWSGIServer

from streaming.common.options import OptionError

BACKLOG = 64


def bind_family(host: str, port: int) -> tuple[socket.AddressFamily, str]:
    """The address family to bind host:port with, and the address: the first passive address
    getaddrinfo gives, so an IPv6 host ("::", "::1", a name resolving to IPv6 first) binds IPv6
    (wsgiref's server would bind IPv4 only).

    >>> bind_family("127.0.0.1", 0) == (socket.AF_INET, "127.0.0.1")
    True
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    return family, address[0]


def listen(host: str, port: int, flag: str = "--metrics-port") -> socket.socket:
    """A socket listening on host:port. Raises OptionError naming `flag` when the host does
    not resolve or the port cannot be taken (in use, or privileged)."""
    try:
        family, address = bind_family(host, port)
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as error:
        raise OptionError(f"{flag} {port}: cannot listen on {host}: {_reason(error)}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(BACKLOG)
    except OSError as error:
        sock.close()
        raise OptionError(f"{flag} {port}: cannot listen on {host}:{port}: "
                          f"{_reason(error)}") from None
    return sock


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


class QuietHandler(WSGIRequestHandler):
    """A request handler that logs nothing: a scrape every few seconds is not news."""

    def log_message(self, format, *args) -> None:
        pass


def serve_wsgi(sock: socket.socket, app, name: str = "metrics") -> WSGIServer:
    """Serve `app` on the listening `sock` from a daemon thread; `shutdown()` and
    `server_close()` end it (and close the socket)."""

    class Server(ThreadingWSGIServer):
        address_family = sock.family

        def server_bind(self) -> None:
            self.socket.close()             # the one TCPServer made: `sock` is used instead
            self.socket = sock
            self.server_address = sock.getsockname()
            self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]
            self.setup_environ()

        def server_activate(self) -> None:
            pass                            # `sock` listens already

    server = Server(sock.getsockname(), QuietHandler)
    server.set_app(app)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server
