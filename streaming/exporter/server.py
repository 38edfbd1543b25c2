"""The job's HTTP server, /metrics and the group API: configure, start, stop (in that order,
Burrow-style).

A scrape is answered in Prometheus' text format (0.0.4) without compression: the text kept
rendered for the groups (exposition.GroupFamiliesText.chunks, given as `rendered`), then
what the registry's collectors give. `?name[]=` restricts both, as prometheus_client does.
The group API and pages (api.py, given as `groups`) answer under /api and /groups."""

from __future__ import annotations

import socket
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from streaming.common.listener import listen, serve_wsgi
from streaming.exporter.api import serves

RenderedText = Callable[[Collection[str] | None], Sequence[bytes]]   # parts, written in order


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
        # Parts, not one text: joining them would copy the whole text once more.
        parts = [*rendered(names), generate_latest(collectors)]
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4),
                                  ("Content-Length", str(sum(map(len, parts))))])
        return parts

    return app


class MetricsServer:
    """Serves on `sock` when given (taken at start: streaming.common.listener.listen), else
    on a socket it takes from `config` when started."""

    def __init__(self, config: MetricsServerConfig, registry: CollectorRegistry,
                 rendered: RenderedText | None = None, groups=None,
                 sock: socket.socket | None = None) -> None:
        self._config = config
        self._app = metrics_app(registry, rendered, groups)
        self._sock = sock
        self._server = None

    def start(self) -> None:
        sock = self._sock or listen(self._config.host, self._config.port)
        self._server = serve_wsgi(sock, self._app)

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return self._server.server_address[1] if self._server else self._config.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
