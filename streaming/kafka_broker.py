"""Start and stop a real Apache Kafka broker: one KRaft node that is broker and controller,
on 127.0.0.1, from the jars scripts/fetch_jars.py puts in the cache (streaming/jars.py).

    with ApacheKafkaBroker(workdir) as broker:
        create_topic(broker.bootstrap_servers, "rebalance.events", partitions=4)
        broker.sasl_bootstrap_servers     # the SASL_PLAINTEXT listener (PLAIN and SCRAM)
        broker.ssl_bootstrap_servers      # the SSL listener; broker.ca_location signed its cert

Each start formats a fresh log directory under `workdir`, so topics live as long as the
process. The SASL listener knows the users in `sasl_users`: PLAIN checks them against the
listener's JAAS line, SCRAM-SHA-256/512 against credentials written at format time. The SSL
listener's certificate (for IP 127.0.0.1) is signed by a private CA made at start with openssl;
without openssl there is no SSL listener.
"""

from __future__ import annotations

import base64
import logging
import shutil
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from streaming import jars
from streaming.broker_process import BrokerUnavailable, stop_process, wait_until_ready
from streaming.embedded_broker import _answers_metadata, free_port

log = logging.getLogger(__name__)

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_SASL_USERS = {"rebalance-monitor": "rebalance-monitor-secret"}
# Replication 1 everywhere: one node. No initial rebalance delay: tests wait for what they
# assert, and a classic group would otherwise sit 3 s in PreparingRebalance. No time-based
# retention: tests write records stamped with their events' times, years ago, which the default
# 7 days would delete under a running job (Spark's source then reports the loss and stops).
# KIP-848 and KIP-1071 streams groups drop a killed member after 6 s (not 45 s) and heartbeat
# every 1 s (not 5 s); a streams group's first assignment does not wait 3 s either.
SINGLE_NODE_SETTINGS = {
    "log.retention.ms": "-1",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.heartbeat.interval.ms": "1000",
    "group.streams.heartbeat.interval.ms": "1000",
    "group.streams.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
}
LOG4J2 = """\
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
logger.kafka.name = kafka
logger.kafka.level = INFO
"""


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _jaas_plain_users(users: Mapping[str, str]) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


def server_properties(ports: Mapping[str, int], log_dir: Path, users: Mapping[str, str],
                      keystore: Path | None = None) -> dict[str, str]:
    """One node's settings. `ports` names a port per listener (PLAINTEXT, SASL_PLAINTEXT,
    CONTROLLER, and SSL when a PEM `keystore` of the server's key and certificate is given)."""
    clients = [name for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL") if name in ports]
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{ports['CONTROLLER']}",
        "listeners": _addresses([*clients, "CONTROLLER"], ports),
        "advertised.listeners": _addresses(clients, ports),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(
            f"{name}:{'PLAINTEXT' if name == 'CONTROLLER' else name}"
            for name in [*clients, "CONTROLLER"]),
        "sasl.enabled.mechanisms": ",".join(("PLAIN", *SCRAM_MECHANISMS)),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": _jaas_plain_users(users),
        "log.dirs": str(log_dir),
        **SINGLE_NODE_SETTINGS,
    }
    for mechanism in SCRAM_MECHANISMS:
        settings[f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    if "SSL" in ports:
        settings["listener.name.ssl.ssl.keystore.type"] = "PEM"
        settings["listener.name.ssl.ssl.keystore.location"] = str(keystore)
    return settings


def _addresses(listeners: list[str], ports: Mapping[str, int]) -> str:
    return ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in listeners)


def make_private_ca(folder: Path) -> tuple[Path, Path] | None:
    """(the CA's certificate, the server's PEM keystore: key and certificate for IP 127.0.0.1,
    signed by that CA), made with openssl; None where openssl is not installed."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    for arguments in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-keyout", "ca.key",
             "-out", "ca.pem", "-subj", "/CN=rebalance-monitor test CA"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
             "server.csr", "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-out", "server.pem", "-extfile", "san.cnf"]):
        subprocess.run([openssl, *arguments], cwd=folder, check=True, capture_output=True)
    keystore = folder / "server-keystore.pem"
    keystore.write_text((folder / "server.key").read_text() + (folder / "server.pem").read_text())
    return folder / "ca.pem", keystore


class ApacheKafkaBroker:
    """One Apache Kafka JVM; start() formats its storage, launches it and waits until it
    answers a metadata request."""

    def __init__(self, workdir: Path, sasl_users: Mapping[str, str] = DEFAULT_SASL_USERS,
                 heap: str = "512m", start_timeout_s: float = 60.0,
                 stop_timeout_s: float = 15.0, tls: bool = True,
                 version: str = jars.KAFKA_VERSION, settings: Mapping[str, str] | None = None,
                 classpath: Sequence[Path] = ()) -> None:
        """`settings`: server.properties entries over the defaults; `classpath`: more jars or
        class folders (a plugin the settings name, such as an assignor)."""
        self.workdir = Path(workdir)
        self.settings = dict(settings or {})
        self.extra_classpath = tuple(Path(p) for p in classpath)
        self.version = version
        self.sasl_users = dict(sasl_users)
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.tls = tls
        self.ca_location: Path | None = None
        self.ports: dict[str, int] = {}
        self.log_path = self.workdir / "server.log"
        self._process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return self._address("PLAINTEXT")

    @property
    def sasl_bootstrap_servers(self) -> str:
        return self._address("SASL_PLAINTEXT")

    @property
    def ssl_bootstrap_servers(self) -> str | None:
        """The SSL listener, whose certificate ca_location's CA signed; None without openssl."""
        return self._address("SSL") if "SSL" in self.ports else None

    def _address(self, listener: str) -> str:
        if self._process is None:
            raise BrokerUnavailable("the Kafka broker is not started")
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        if self._process is None:
            raise BrokerUnavailable("the Kafka broker is not started")
        return self._process.pid

    def _classpath(self) -> str:
        found = jars.kafka_broker_jars(self.version)
        if not found:
            raise BrokerUnavailable(
                f"no Apache Kafka {self.version} jars in {jars.kafka_broker_dir(self.version)}: "
                "run `make jars` (or python scripts/fetch_jars.py)")
        return ":".join(str(path) for path in (*self.extra_classpath, *found))

    def _java(self, main_class: str, *arguments: str) -> list[str]:
        return ["java", f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseG1GC",
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                "-cp", self._classpath(), main_class, *arguments]

    def _write_config(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        listeners = ["PLAINTEXT", "SASL_PLAINTEXT", "CONTROLLER"]
        made = make_private_ca(self.workdir / "tls") if self.tls else None
        keystore = None
        if made is not None:
            self.ca_location, keystore = made
            listeners.append("SSL")
        self.ports = {name: free_port() for name in listeners}
        settings = {**server_properties(self.ports, self.workdir / "data", self.sasl_users,
                                        keystore), **self.settings}
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        (self.workdir / "log4j2.properties").write_text(LOG4J2.format(log_path=self.log_path))
        return config

    def _format(self, config: Path) -> None:
        scram = [argument for name, password in self.sasl_users.items()
                 for mechanism in SCRAM_MECHANISMS
                 for argument in ("--add-scram", f"{mechanism}=[name={name},password={password}]")]
        # "=": a base64 cluster id may start with "-", which would read as an option.
        command = self._java("kafka.tools.StorageTool", "format", f"--cluster-id={_cluster_id()}",
                             f"--config={config}", "--standalone", *scram)
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise BrokerUnavailable(f"formatting Kafka's storage failed: {done.stdout[-800:]}"
                                    f"{done.stderr[-800:]}")

    def start(self) -> ApacheKafkaBroker:
        if self._process is not None:
            raise BrokerUnavailable("the Kafka broker is already started")
        config = self._write_config()
        self._format(config)
        return self._launch(config)

    def restart(self) -> ApacheKafkaBroker:
        """Start again after stop(): the same ports, log directory and topics (an outage ends,
        rather than a new broker starting)."""
        if self._process is not None or not self.ports:
            raise BrokerUnavailable("restart() follows a start() and a stop()")
        return self._launch(self.workdir / "server.properties")

    def _launch(self, config: Path) -> ApacheKafkaBroker:
        with (self.workdir / "stdout.log").open("ab") as output:
            self._process = subprocess.Popen(
                self._java("kafka.Kafka", str(config)), stdin=subprocess.DEVNULL,
                stdout=output, stderr=subprocess.STDOUT,
                # Its own session: a terminal's Ctrl-C reaches the demo, which stops the job first.
                start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        log.info("Apache Kafka %s ready at %s (log %s)", self.version,
                 self.bootstrap_servers, self.log_path)
        return self

    def _wait_ready(self) -> None:
        wait_until_ready(self._process, "Kafka", self._log_tail, timeout_s=self.start_timeout_s,
                         ready=lambda: _answers_metadata(self.bootstrap_servers, timeout_s=1.0),
                         interval_s=0.2)

    def _log_tail(self, size: int = 2000) -> str:
        tails = [path.read_bytes()[-size:].decode("utf-8", "replace")
                 for path in (self.workdir / "stdout.log", self.log_path) if path.exists()]
        return "\n".join(tails) or "(no log)"

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after stop_timeout_s."""
        process, self._process = self._process, None
        stop_process(process, "Kafka", self.stop_timeout_s)

    def __enter__(self) -> ApacheKafkaBroker:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
