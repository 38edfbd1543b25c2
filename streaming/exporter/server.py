"""The job's HTTP server, /metrics and the group API: configure, start, stop (in that order,
Burrow-style).

A scrape is answered in Prometheus' text format (0.0.4) without compression: the text kept
rendered for the groups (exposition.GroupFamiliesText.exposition, given as `rendered`), then
what the registry's collectors give. `?name[]=` restricts both, as prometheus_client does.
The group API and pages (api.py, given as `groups`) answer under /api and /groups."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, ThreadingWSGIServer

from streaming.exporter.api import serves

RenderedText = Callable[[Collection[str] | None], bytes]


@dataclass(frozen=True)
class MetricsServerConfig:
    host: str = "0.0.0.0"
    port: int = 9108


def metrics_app(registry: CollectorRegistry, rendered: RenderedText | None = None,
                groups=None):
    """The WSGI app: prometheus_client's own, with the rendered text put first on a scrape;
    the `groups` WSGI app (api.group_api) for its paths."""
    metrics = _scrape_app(registry, rendered)
    if groups is None:
        return metrics

    def app(environ, start_response):
        if serves(environ.get("PATH_INFO", "")):
            return groups(environ, start_response)
        return metrics(environ, start_response)

    return app


def _scrape_app(registry: CollectorRegistry, rendered: RenderedText | None):
    plain = make_wsgi_app(registry)
    if rendered is None:
        return plain

    def app(environ, start_response):
        if environ["REQUEST_METHOD"] != "GET" or environ["PATH_INFO"] == "/favicon.ico":
            return plain(environ, start_response)
        names = parse_qs(environ.get("QUERY_STRING", "")).get("name[]")
        collectors = registry.restricted_registry(names) if names else registry
        # Two parts, not one: joining them would copy the whole text once more.
        parts = [rendered(names), generate_latest(collectors)]
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4),
                                  ("Content-Length", str(sum(map(len, parts))))])
        return parts

    return app


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


class QuietHandler(WSGIRequestHandler):
    """A request handler that logs nothing: a scrape every few seconds is not news."""

    def log_message(self, format, *args) -> None:
        pass


class MetricsServer:
    def __init__(self, config: MetricsServerConfig, registry: CollectorRegistry,
                 rendered: RenderedText | None = None, groups=None) -> None:
        self._config = config
        self._app = metrics_app(registry, rendered, groups)
        self._server = None
        self._thread = None

    def start(self) -> None:
        class Server(ThreadingWSGIServer):
            pass

        Server.address_family, host = bind_family(self._config.host, self._config.port)
        self._server = make_server(host, self._config.port, self._app, Server,
                                   handler_class=QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics",
                                        daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return self._server.server_address[1] if self._server else self._config.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None
