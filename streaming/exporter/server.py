"""The /metrics HTTP endpoint: configure, start, stop (in that order, Burrow-style)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, start_http_server


@dataclass(frozen=True)
class MetricsServerConfig:
    host: str = "0.0.0.0"
    port: int = 9108


class MetricsServer:
    def __init__(self, config: MetricsServerConfig, registry: CollectorRegistry) -> None:
        self._config = config
        self._registry = registry
        self._server = None
        self._thread = None

    def start(self) -> None:
        self._server, self._thread = start_http_server(
            self._config.port, addr=self._config.host, registry=self._registry)

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
