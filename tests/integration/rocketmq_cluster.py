"""A real Apache RocketMQ 4.9.8 cluster for integration tests, from the kit ROCKETMQ_KIT names.

    kit, reason = RocketMQKit.from_env()           # None and why, when the kit is not there
    with RocketMQCluster(kit, tmp_path / "rmq", ["broker-a", "broker-b"]) as cluster:
        cluster.create_topic("T", queues=8)         # 8 queues on each broker
        with RealConsumer(kit, cluster.namesrv, "g", ["T"], "c1", tmp_path / "c1") as c1:
            c1.wait_for(lambda c: len(c.holds("T")) == 16)
            cluster.produce("T", 10)
            c1.wait_for(lambda c: len(c.consumed) == 10)
            cluster.pause_broker("broker-b")        # SIGSTOP: the broker hangs, its sockets stay
            cluster.resume_broker("broker-b")

Every process is a JVM (the kit's scripts exec java) in its own session, so a signal to its
process group reaches all of it (a GoConsumer, a rocketmq-client-go push consumer built from
./go_consumer, is one process in its own session). Each has its own RUN_DIR under the work
directory; a server's output goes to RUN_DIR/stdout.log, a consumer's is read line by line
into typed state.

What ends a consumer, as the broker sees it (RocketMQ's client registers no shutdown hook of its
own, so SIGTERM runs none of the client's shutdown):
- `stop()` (SIGTERM): the JVM exits without UNREGISTER_CLIENT and without persisting offsets
  consumed since the last 5 s auto-commit; the broker drops it when the TCP connection closes
  and tells the group's other members at once. So the member leaves right away either way.
- `stop(graceful=True)`: waits for the program to end on its own at RUN_SECONDS; it then calls
  `shutdown()`, which persists offsets and sends UNREGISTER_CLIENT.
- `pause()` (SIGSTOP): the connection stays open, so the broker keeps the member until it has
  sent no heartbeat for 120 s (its 10 s scan then drops it, measured after 127 s) and tells no
  one: the others drop it from their view and take its queues at their own 20 s rebalance
  (measured after 140 s).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from streaming import jars
from tests.integration.java_programs import build_once, compile_java
from tests.support import wait_until

KIT_ENV = "ROCKETMQ_KIT"
LOOPBACK = "127.0.0.1"
BOOT_SUCCESS = "boot success"
# Ports below Linux's ephemeral range (32768+), so an outgoing connection elsewhere on the
# machine cannot take one between our check and the JVM's bind.
PORT_RANGE = range(21000, 32000)


KIT5_ROOT = Path(__file__).parent / "rocketmq5_kit"


@dataclass(frozen=True)
class RocketMQKit:
    """A kit's folder: bin/namesrv, bin/broker, bin/mqadmin, bin/consumer, bin/produce, each
    run with `env` added (the 5.x kit finds its jars through it)."""

    root: Path
    version: str = "4.9.8"
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> tuple[RocketMQKit | None, str]:
        """(kit, "") or (None, why not): the reason a test skips with."""
        value = environ.get(KIT_ENV, "")
        if not value:
            return None, f"{KIT_ENV} is not set (the folder of the Apache RocketMQ 4.9.8 test kit)"
        root = Path(value).resolve()
        if not (root / "bin" / "namesrv").is_file():
            return None, f"{KIT_ENV}={value} has no bin/namesrv: not the RocketMQ test kit"
        return cls(root), ""

    @classmethod
    def from_maven(cls, version: str) -> tuple[RocketMQKit | None, str]:
        """The 5.x kit of `version`: KIT5_ROOT's scripts on the jars scripts/fetch_jars.py
        rocketmq-<version> fetched, with its two programs compiled against them; (None, why
        not) without them."""
        found = jars.rocketmq5_jars(version)
        if not found:
            return None, (f"no RocketMQ {version} jars in {jars.rocketmq5_dir(version)}: "
                          f"run `make jars` (or python scripts/fetch_jars.py rocketmq-{version})")
        programs = compile_java(sorted((KIT5_ROOT / "programs").glob("*.java")), found,
                                "rocketmq5-kit-programs", f"rocketmq-{version}")
        env = {"RMQ5_JARS": str(jars.rocketmq5_dir(version)), "RMQ5_PROGRAMS": str(programs)}
        grpc = jars.rocketmq_grpc_client_jars()
        if grpc:
            env["RMQ5_GRPC_JARS"] = str(jars.rocketmq_grpc_client_dir())
            env["RMQ5_GRPC_PROGRAMS"] = str(compile_java(
                sorted((KIT5_ROOT / "programs-grpc").glob("*.java")), grpc,
                "rocketmq5-kit-grpc-programs", f"client-java-{jars.ROCKETMQ_GRPC_CLIENT_VERSION}"))
        return cls(KIT5_ROOT, version, env), ""

    def script(self, name: str) -> Path:
        return self.root / "bin" / name

    def spawn(self, script: str, args: Sequence[str], run_dir: Path,
              env: Mapping[str, str] | None = None, **popen) -> subprocess.Popen:
        """Start bin/<script> in its own session with its own RUN_DIR."""
        run_dir.mkdir(parents=True, exist_ok=True)
        return subprocess.Popen([str(self.script(script)), *args], cwd=run_dir,
                                env={**os.environ, **self.env, **(env or {}),
                                     "RUN_DIR": str(run_dir)},
                                start_new_session=True, **popen)

    def run(self, script: str, args: Sequence[str], run_dir: Path,
            timeout: float = 60.0) -> str:
        """Run bin/<script> to its end; its output (stdout and stderr), or AssertionError."""
        process = self.spawn(script, args, run_dir, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_process_group(process, timeout=5)
            output, _ = process.communicate()
            raise AssertionError(f"bin/{script} {' '.join(args)}: no end within {timeout}s:\n"
                                 f"{tail(output)}") from None
        if process.returncode != 0:
            raise AssertionError(f"bin/{script} {' '.join(args)} exited with "
                                 f"{process.returncode}:\n{tail(output)}")
        return output


class SentMessage(NamedTuple):
    body: str
    queue_id: int


def produce(kit: RocketMQKit, namesrv: str, topic: str, count: int, run_dir: Path,
            timeout: float = 60.0) -> list[SentMessage]:
    """Send "msg-0".."msg-{count-1}" to topic with bin/produce (one JVM); what was sent where.
    A topic the brokers do not know yet is auto-created with 4 queues: create it first."""
    output = kit.run("produce", [namesrv, topic, str(count)], run_dir, timeout)
    sent = [SentMessage(m[1], int(m[2]))
            for m in re.finditer(r"^SENT (\S+) SEND_OK queue=(\d+)$", output, re.MULTILINE)]
    if len(sent) != count:
        raise AssertionError(f"bin/produce sent {len(sent)} of {count} with SEND_OK:\n"
                             f"{tail(output)}")
    return sent


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def stop_process_group(process: subprocess.Popen, timeout: float = 10.0) -> int:
    """SIGTERM to the process group, SIGKILL if it has not ended within timeout."""
    return stop_process_groups([process], timeout)[0]


def stop_process_groups(processes: Sequence[subprocess.Popen], timeout: float) -> list[int]:
    """Stop several at once: one shared grace period, not one per process."""
    for process in processes:
        if process.poll() is None:
            _signal_group(process, signal.SIGTERM)
            _signal_group(process, signal.SIGCONT)   # a paused JVM acts on SIGTERM only once resumed
    deadline = time.monotonic() + timeout
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()
    return [process.returncode for process in processes]


def process_state(pid: int) -> str:
    """The one-letter state in /proc/<pid>/stat: "T" while stopped by a signal."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


def pause(process: subprocess.Popen, timeout: float = 5.0) -> None:
    """SIGSTOP to the process group; returns once the kernel has stopped it (delivery is
    asynchronous: right after kill() it may still be running)."""
    os.killpg(process.pid, signal.SIGSTOP)
    _wait_state(process, lambda state: state == "T", "stopped", timeout)


def resume(process: subprocess.Popen, timeout: float = 5.0) -> None:
    os.killpg(process.pid, signal.SIGCONT)
    _wait_state(process, lambda state: state != "T", "resumed", timeout)


def _wait_state(process: subprocess.Popen, wanted: Callable[[str], bool], what: str,
                timeout: float) -> None:
    wait_until(lambda: wanted(process_state(process.pid)), timeout, f"pid {process.pid} {what}",
               interval=0.01)


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def free_port_with_neighbours(offsets: Iterable[int] = (0,), taken: Iterable[int] = ()) -> int:
    """A loopback port p such that p+offset is free for every offset (a broker: -2, 0, +1)."""
    offsets, taken = tuple(offsets), set(taken)
    for _ in range(200):
        port = random.choice(PORT_RANGE)
        wanted = {port + offset for offset in offsets}
        if not wanted & taken and all(_port_free(p) for p in wanted):
            return port
    raise AssertionError(f"no free loopback ports at offsets {offsets} in {PORT_RANGE}")


class ServerProcess:
    """A NameServer or broker JVM whose output goes to RUN_DIR/stdout.log."""

    def __init__(self, kit: RocketMQKit, script: str, run_dir: Path,
                 env: Mapping[str, str]) -> None:
        self.kit, self.script, self.run_dir, self.env = kit, script, run_dir, dict(env)
        self.log_path = run_dir / "stdout.log"
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def start(self) -> ServerProcess:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.process = self.kit.spawn(self.script, [], self.run_dir, self.env,
                                          stdout=log, stderr=subprocess.STDOUT)
        return self

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_booted(self, timeout: float, ready: str = BOOT_SUCCESS) -> None:
        """Until `ready` is printed; AssertionError with the output tail if it exits or takes
        longer. (A NameServer whose port is taken prints a BindException and exits.)"""
        def booted() -> bool:
            if ready in self.output():
                return True
            if self.process.poll() is not None:
                raise AssertionError(f"bin/{self.script} ({self.run_dir}) exited with "
                                     f"{self.process.returncode} before booting:\n"
                                     f"{tail(self.output())}")
            return False

        wait_until(booted, timeout, f"bin/{self.script} ({self.run_dir}): {BOOT_SUCCESS!r}",
                   interval=0.05, details=lambda: tail(self.output()))

    def address_in_use(self) -> bool:
        return "Address already in use" in self.output()


    def stop(self, timeout: float = 10.0) -> int:
        if self.process is None:
            return 0
        return stop_process_group(self.process, timeout)


class RocketMQCluster:
    """One NameServer and one master broker per name, all on free loopback ports.

    Brokers are in cluster `DefaultCluster`. Stop sends SIGTERM to every process at once and
    SIGKILL to whatever has not ended within stop_timeout (a broker's own shutdown takes
    seconds, and the work directory is thrown away anyway).
    """

    BROKER_PORT_OFFSETS = (-2, 0, 1)   # fast channel, listen port, HA
    CLUSTER_NAME = "DefaultCluster"

    def __init__(self, kit: RocketMQKit, workdir: Path, brokers: Sequence[str] = ("broker-a",),
                 *, boot_timeout: float = 60.0, stop_timeout: float = 10.0,
                 broker_extra_conf: str = "", second_namesrv_for: Sequence[str] = ()) -> None:
        if len(set(brokers)) != len(brokers) or not brokers:
            raise ValueError(f"broker names must be distinct and at least one: {brokers}")
        self.kit, self.workdir = kit, Path(workdir)
        self.broker_names = tuple(brokers)
        self.boot_timeout, self.stop_timeout = boot_timeout, stop_timeout
        self.broker_extra_conf = broker_extra_conf
        # Brokers that also register with a second NameServer: a client given only that one
        # knows only them (it heartbeats and asks no other broker).
        self.second_namesrv_for = tuple(second_namesrv_for)
        if not set(self.second_namesrv_for) <= set(brokers):
            raise ValueError(f"second_namesrv_for names no broker of {brokers}")
        self._namesrv: ServerProcess | None = None
        self._namesrv_port = 0
        self._namesrv2: ServerProcess | None = None
        self._namesrv2_port = 0
        self._brokers: dict[str, ServerProcess] = {}
        self._broker_ports: dict[str, int] = {}
        self._extra: list[ServerProcess] = []     # proxies
        self._runs = 0

    @property
    def namesrv(self) -> str:
        """"127.0.0.1:port" of the NameServer."""
        return f"{LOOPBACK}:{self._namesrv_port}"

    @property
    def second_namesrv(self) -> str:
        """"127.0.0.1:port" of the second NameServer (second_namesrv_for's brokers only)."""
        if not self._namesrv2_port:
            raise AssertionError("the cluster has no second NameServer")
        return f"{LOOPBACK}:{self._namesrv2_port}"

    def broker_addr(self, name: str) -> str:
        return f"{LOOPBACK}:{self._broker_ports[name]}"

    def broker_pid(self, name: str) -> int:
        return self._brokers[name].pid

    def start_proxy(self) -> tuple[str, str]:
        """A 5.x proxy in cluster mode: ("127.0.0.1:remoting port", "127.0.0.1:gRPC port").
        Stopped with the cluster."""
        port = free_port_with_neighbours((0, 1), {self._namesrv_port, *self._broker_ports.values()})
        proxy = ServerProcess(self.kit, "proxy", self.workdir / "proxy", {
            "NAMESRV_ADDR": self.namesrv, "CLUSTER_NAME": self.CLUSTER_NAME,
            "PROXY_GRPC_PORT": str(port), "PROXY_REMOTING_PORT": str(port + 1)}).start()
        self._extra.append(proxy)
        proxy.wait_booted(self.boot_timeout, "rocketmq-proxy startup successfully")
        return f"{LOOPBACK}:{port + 1}", f"{LOOPBACK}:{port}"

    def kill_broker(self, name: str) -> None:
        """SIGKILL: the broker is gone at once, its connections reset; the NameServer drops it
        as its connection closes, clients learn the route within 30 s."""
        process = self._brokers[name].process
        _signal_group(process, signal.SIGKILL)
        process.wait()

    def pause_broker(self, name: str) -> None:
        """SIGSTOP, returning once it is stopped: the broker answers nothing, but its
        connections and its registration with the NameServer stay."""
        pause(self._brokers[name].process)

    def resume_broker(self, name: str) -> None:
        resume(self._brokers[name].process)

    def start(self) -> RocketMQCluster:
        try:
            self._namesrv, self._namesrv_port = self._start_with_free_ports(
                "namesrv", self.workdir / "namesrv", (0,),
                lambda port: {"NAMESRV_PORT": str(port)})
            if self.second_namesrv_for:
                self._namesrv2, self._namesrv2_port = self._start_with_free_ports(
                    "namesrv", self.workdir / "namesrv-2", (0,),
                    lambda port: {"NAMESRV_PORT": str(port)})
            # Brokers boot one after the other: two JVMs starting together on 2 cores take as
            # long as two in a row, and a broker must never register with another NameServer.
            for name in self.broker_names:
                self._brokers[name], self._broker_ports[name] = self._start_with_free_ports(
                    "broker", self.workdir / name, self.BROKER_PORT_OFFSETS,
                    lambda port, name=name: {
                        "NAMESRV_ADDR": self._namesrvs_of(name), "BROKER_NAME": name,
                        "BROKER_PORT": str(port), "CLUSTER_NAME": self.CLUSTER_NAME,
                        "BROKER_EXTRA_CONF": self.broker_extra_conf})
            self._wait_registered()
        except BaseException:
            self.stop()
            raise
        return self

    def _namesrvs_of(self, broker: str) -> str:
        return (f"{self.namesrv};{self.second_namesrv}" if broker in self.second_namesrv_for
                else self.namesrv)

    def _wait_registered(self) -> None:
        """Until the NameServer lists every broker at its address. A 4.9.8 broker registers
        before it prints "boot success"; a 5.x broker prints it first and registers within
        seconds (measured up to 15 s), and until then updateTopic -c finds no cluster."""
        from producers.rocketmq.admin import RocketMQAdmin
        from producers.rocketmq.remoting import RemotingClient, RemotingError

        wanted = {name: self.broker_addr(name) for name in self.broker_names}
        wanted_2 = {name: self.broker_addr(name) for name in self.second_namesrv_for}
        client = RemotingClient()

        def registered() -> bool:
            try:
                return (RocketMQAdmin(client, [self.namesrv]).cluster_info() == wanted
                        and (not wanted_2 or RocketMQAdmin(
                            client, [self.second_namesrv]).cluster_info() == wanted_2))
            except RemotingError:
                return False

        try:
            wait_until(registered, self.boot_timeout,
                       f"brokers {sorted(wanted)} registered with the NameServer", interval=0.1)
        finally:
            client.close()

    def _start_with_free_ports(self, script: str, run_dir: Path, offsets: Sequence[int],
                               env: Callable[[int], dict[str, str]],
                               attempts: int = 3) -> tuple[ServerProcess, int]:
        # A port found free may be taken before the JVM binds it: then try other ports.
        taken = {self._namesrv_port, self._namesrv2_port, *self._broker_ports.values()}
        for attempt in range(1, attempts + 1):
            port = free_port_with_neighbours(offsets, taken)
            where = run_dir if attempt == 1 else run_dir.with_name(f"{run_dir.name}-{attempt}")
            server = ServerProcess(self.kit, script, where, env(port)).start()
            try:
                server.wait_booted(self.boot_timeout)
                return server, port
            except AssertionError:
                server.stop(timeout=5)
                if attempt == attempts or not server.address_in_use():
                    raise
        raise AssertionError("unreachable")

    def stop(self, timeout: float | None = None) -> None:
        """Every process at once: SIGTERM, then SIGKILL after `timeout` (stop_timeout)."""
        servers = [*self._extra, *self._brokers.values(),
                   *(n for n in (self._namesrv, self._namesrv2) if n)]
        stop_process_groups([s.process for s in servers if s.process],
                            self.stop_timeout if timeout is None else timeout)

    def mqadmin(self, *args: str, timeout: float = 60.0) -> str:
        """bin/mqadmin with these arguments (add "-n", cluster.namesrv yourself); its output.
        Each call runs in a fresh folder: some commands write a ./<timestamp>/ folder."""
        self._runs += 1
        return self.kit.run("mqadmin", args, self.workdir / "tools" / f"mqadmin-{self._runs}",
                            timeout)

    def create_topic(self, topic: str, queues: int, brokers: Sequence[str] | None = None) -> None:
        """updateTopic: `queues` read and write queues on each named broker (default: all, in one
        mqadmin run). A broker registers the topic with the NameServer before it answers."""
        targets = (["-b", self.broker_addr(name)] for name in brokers) if brokers else [
            ["-c", self.CLUSTER_NAME]]
        for target in targets:
            output = self.mqadmin("updateTopic", "-n", self.namesrv, *target, "-t", topic,
                                  "-r", str(queues), "-w", str(queues))
            created = output.count("success.")
            if created != (1 if brokers else len(self.broker_names)):
                raise AssertionError(f"updateTopic {topic} {' '.join(target)}:\n{tail(output)}")

    def produce(self, topic: str, count: int, timeout: float = 60.0) -> list[SentMessage]:
        self._runs += 1
        return produce(self.kit, self.namesrv, topic, count,
                       self.workdir / "tools" / f"produce-{self._runs}", timeout)

    def __enter__(self) -> RocketMQCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop(timeout=0)   # thrown away: no need to wait for the brokers' own shutdown


Queue = tuple[str, int]   # (broker name, queue id)


class Consumed(NamedTuple):
    topic: str
    broker: str
    queue_id: int
    body: str


_LINE = re.compile(r"^\[(?P<instance>\S+) pid=(?P<pid>\d+)\] (?P<kind>[A-Z]+) ?(?P<rest>.*)$")
_STARTED = re.compile(r"clientId=(?P<client_id>\S+) strategy=(?P<strategy>\S+)")
_HOLDS = re.compile(r"topic=(?P<topic>\S+) \[(?P<queues>.*)\]$")
_VIEW = re.compile(r"topic=(?P<topic>\S+) cidAll=\[(?P<cids>.*)\]$")
_CONSUMED = re.compile(r"topic=(?P<topic>\S+) queue=(?P<broker>\S+):(?P<queue>\d+) body=(?P<body>.*)$")


def _queues(text: str) -> frozenset[Queue]:
    queues = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        broker, _, queue_id = item.rpartition(":")
        queues.add((broker, int(queue_id)))
    return frozenset(queues)


class RealConsumer:
    """One bin/consumer JVM: a real DefaultMQPushConsumer, its rebalance state read from its
    output. `client_ip=None` lets the client pick its own address ("-")."""

    def __init__(self, kit: RocketMQKit, namesrv: str, group: str, topics: str | Sequence[str],
                 instance_name: str, run_dir: Path, *, client_ip: str | None = None,
                 run_seconds: int = 600, strategy: str = "AVG",
                 client_rebalance: bool = True) -> None:
        self.kit, self.namesrv, self.group = kit, namesrv, group
        self.client_rebalance = client_rebalance
        self.topics = (topics,) if isinstance(topics, str) else tuple(topics)
        self.instance_name, self.run_dir = instance_name, Path(run_dir)
        self.client_ip, self.run_seconds, self.requested_strategy = client_ip, run_seconds, strategy
        self.process: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._client_id: str | None = None
        self._strategy: str | None = None
        self._holds: dict[str, frozenset[Queue]] = {}
        self._holds_history: list[tuple[float, str, frozenset[Queue]]] = []
        self._views: dict[str, tuple[str, ...]] = {}
        self._consumed: list[Consumed] = []
        self._done: str | None = None
        self._reader: threading.Thread | None = None
        self._started_at = 0.0
        self._holds_changed_at = 0.0

    def start(self) -> RealConsumer:
        args = [self.namesrv, self.group, ",".join(self.topics), self.instance_name,
                self.client_ip or "-", str(self.run_seconds), self.requested_strategy]
        self._started_at = time.monotonic()
        self.process = self._spawn(args)
        self._reader = threading.Thread(target=self._read, name=f"consumer-{self.instance_name}",
                                        daemon=True)
        self._reader.start()
        return self

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        env = {} if self.client_rebalance else {"CLIENT_REBALANCE": "false"}
        return self.kit.spawn("consumer", args, self.run_dir, env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, bufsize=1)

    def _read(self) -> None:
        with open(self.run_dir / "stdout.log", "w") as log:
            for line in self.process.stdout:
                log.write(line)
                log.flush()
                self._parse(line.rstrip("\n"))

    def _parse(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)
            match = _LINE.match(line)
            if match is None:
                return
            kind, rest = match["kind"], match["rest"]
            if kind == "STARTED" and (m := _STARTED.search(rest)):
                self._client_id, self._strategy = m["client_id"], m["strategy"]
            elif kind == "HOLDS" and (m := _HOLDS.match(rest)):
                self._holds[m["topic"]] = _queues(m["queues"])
                self._holds_changed_at = time.monotonic()
                self._holds_history.append((self._holds_changed_at, m["topic"],
                                            self._holds[m["topic"]]))
            elif kind == "VIEW" and (m := _VIEW.match(rest)):
                self._views[m["topic"]] = tuple(c.strip() for c in m["cids"].split(",") if c.strip())
            elif kind == "CONSUMED" and (m := _CONSUMED.match(rest)):
                self._consumed.append(Consumed(m["topic"], m["broker"], int(m["queue"]), m["body"]))
            elif kind == "DONE":
                self._done = rest

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def client_id(self) -> str | None:
        """As the client reports it ("ip@instance"), once STARTED was printed."""
        with self._lock:
            return self._client_id

    @property
    def strategy(self) -> str | None:
        with self._lock:
            return self._strategy

    @property
    def holds_changed_at(self) -> float:
        """time.monotonic() of the last HOLDS line: when what it pulls last changed."""
        with self._lock:
            return self._holds_changed_at

    def holds(self, topic: str) -> frozenset[Queue]:
        """The queues of topic it pulls now (its process queue table), as (broker, queue id)."""
        with self._lock:
            return self._holds.get(topic, frozenset())

    def holds_history(self, topic: str) -> list[tuple[float, frozenset[Queue]]]:
        """Every HOLDS line of topic so far: (time.monotonic() it was read, what it held)."""
        with self._lock:
            return [(at, held) for at, t, held in self._holds_history if t == topic]

    def view(self, topic: str) -> tuple[str, ...] | None:
        """The sorted client ids it allocates topic among, or None before the first VIEW."""
        with self._lock:
            return self._views.get(topic)

    @property
    def consumed(self) -> list[Consumed]:
        with self._lock:
            return list(self._consumed)

    @property
    def done(self) -> str | None:
        """The DONE line's text once the program ended on its own at RUN_SECONDS."""
        with self._lock:
            return self._done

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def output_tail(self, lines: int = 40) -> str:
        with self._lock:
            return "\n".join(self._lines[-lines:])

    def wait_for(self, predicate: Callable[[RealConsumer], bool], timeout: float = 60.0,
                 what: str = "condition", poll: float = 0.05) -> RealConsumer:
        """Poll until predicate(self) holds; AssertionError with the output tail if the JVM
        exits first or timeout passes."""
        def reached() -> bool:
            if predicate(self):
                return True
            if not self.running:
                self._reader.join(5)   # the last lines may still be in the pipe
                if predicate(self):
                    return True
                raise AssertionError(f"consumer {self.instance_name} exited "
                                     f"({self.process.returncode}) before {what}:\n"
                                     f"{self.output_tail()}")
            return False

        wait_until(reached, timeout, f"consumer {self.instance_name}: {what}", interval=poll,
                   details=self.output_tail)
        return self

    def wait_started(self, timeout: float = 60.0) -> str:
        """Its client id, once the consumer has started."""
        self.wait_for(lambda c: c.client_id is not None, timeout, "STARTED")
        return self.client_id

    def wait_holds(self, topic: str, count: int, timeout: float = 60.0) -> frozenset[Queue]:
        """Until it holds exactly `count` queues of topic; those queues."""
        self.wait_for(lambda c: len(c.holds(topic)) == count, timeout,
                      f"HOLDS of {count} queues of {topic}")
        return self.holds(topic)

    def wait_view(self, topic: str, members: int, timeout: float = 60.0) -> tuple[str, ...]:
        """Until its client list for topic has `members` entries; that list."""
        self.wait_for(lambda c: len(c.view(topic) or ()) == members, timeout,
                      f"VIEW of {members} clients on {topic}")
        return self.view(topic)

    def pause(self) -> None:
        """SIGSTOP, returning once it is stopped: no heartbeats, pulls or rebalances; its
        connections stay open, so the broker keeps it as a member (see the module docstring)."""
        pause(self.process)

    def resume(self) -> None:
        resume(self.process)

    def stop(self, graceful: bool = False, timeout: float = 10.0) -> int:
        """End the JVM; its exit status. Default: SIGTERM (the client does not unregister; the
        broker drops it when its connection closes), SIGKILL after timeout. graceful=True waits
        for the program's own end at RUN_SECONDS (offsets persisted, UNREGISTER_CLIENT sent),
        at most the rest of RUN_SECONDS plus timeout, then stops it as above."""
        if self.process is None:
            return 0
        if graceful and self.running:
            remaining = self._started_at + self.run_seconds - time.monotonic()
            try:
                self.process.wait(max(0.0, remaining) + timeout)
            except subprocess.TimeoutExpired:
                pass
        code = stop_process_group(self.process, timeout)
        self._reader.join(5)
        return code

    def __enter__(self) -> RealConsumer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


GO_CONSUMER = Path(__file__).parent / "go_consumer"


class GoUnavailable(RuntimeError):
    """The Go consumer cannot be built: no `go` on PATH, or `go build` failed."""


def build_go_consumer(timeout: float = 600.0) -> Path:
    """The go_consumer binary (tests/integration/go_consumer: rocketmq-client-go at the version
    its go.mod pins), built once per main.go, go.mod and go.sum. The first build fetches the
    modules go.sum lists through the Go module proxy (Go's own GOMODCACHE and GOCACHE)."""
    go = shutil.which("go")
    if go is None:
        raise GoUnavailable(f"`go` is not on PATH: a Go toolchain (https://go.dev/dl/) is needed "
                            f"to build {GO_CONSUMER}")

    def go_build(folder: Path) -> None:
        # -buildvcs=false: the module sits inside the project's git checkout.
        done = subprocess.run([go, "build", "-buildvcs=false", "-o", str(folder / "go_consumer"),
                               "."], cwd=GO_CONSUMER, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise GoUnavailable(f"go build in {GO_CONSUMER} failed:\n{done.stdout}{done.stderr}")

    inputs = b"".join((GO_CONSUMER / name).read_bytes() for name in ("main.go", "go.mod", "go.sum"))
    return build_once("go_consumer", inputs, go_build) / "go_consumer"


class GoConsumer(RealConsumer):
    """One go_consumer process (build_go_consumer()): a real rocketmq-client-go push consumer
    with an upstream strategy, printing the lines RealConsumer parses. Its client logs go to
    RUN_DIR/stderr.log; HOME is RUN_DIR (the client keeps files under $HOME). `virtual_nodes`
    is CONSISTENT_HASH's count (Java's default, 10, unless told).

    As the broker sees it, Go differs from Java only in what the program's own end does: at
    RUN_SECONDS it calls Shutdown, which persists offsets but sends no UNREGISTER_CLIENT
    (v2.1.2), so the broker drops the member when the connection closes. VIEW is the cidAll
    of its last rebalance (see main.go)."""

    def __init__(self, namesrv: str, group: str, topics: str | Sequence[str],
                 instance_name: str, run_dir: Path, *, program: Path | None = None,
                 virtual_nodes: int = 10, **options) -> None:
        super().__init__(None, namesrv, group, topics, instance_name, run_dir, **options)
        self.program, self.virtual_nodes = program, virtual_nodes

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        program = self.program or build_go_consumer()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / "stderr.log", "wb") as stderr:
            return subprocess.Popen([str(program), *args, str(self.virtual_nodes)],
                                    cwd=self.run_dir, stdout=subprocess.PIPE, stderr=stderr,
                                    text=True, bufsize=1, start_new_session=True,
                                    env={**os.environ, "HOME": str(self.run_dir),
                                         "RUN_DIR": str(self.run_dir)})

    def output_tail(self, lines: int = 40) -> str:
        stderr = self.run_dir / "stderr.log"
        logs = tail(stderr.read_text(errors="replace"), lines) if stderr.exists() else ""
        return super().output_tail(lines) + (f"\n--- stderr.log:\n{logs}" if logs else "")
