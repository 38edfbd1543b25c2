"""Real Java Kafka consumers for the integration tests: kafka_java/ConsumerProbe.java, compiled
once with javac against the cached kafka-clients jar, run as one JVM per consumer.

    a = JavaConsumer(bootstrap, group, [topic], protocol="consumer", assignor="uniform").start()
    b = JavaConsumer(bootstrap, group, [topic], protocol="consumer", assignor="uniform").start()
    held = wait_for_partitions([a, b], topic, 4)            # [{0, 1}, {2, 3}] or the like
    a.wait_for(lambda c: c.revoking, 30, "a revocation")    # checked on each line printed
    a.pause(); a.resume(); a.kill(); b.close()

Each consumer follows its probe's stdout: member_id, generation, holds (frozenset of (topic,
partition)), revoking (inside onPartitionsRevoked), events (every line, kinds as listed in
ConsumerProbe.java, each with a "seq" that orders events across all consumers). Waits wake on
every line any probe prints; their timeout is only a failure deadline, whose AssertionError
carries the probes' stdout and stderr tails.
A probe never outlives this process: setpriv gives it SIGKILL as parent-death signal, and an
atexit hook kills what is left. Not a test module itself.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from producers.kafka.observer import KafkaGroupObserver
from streaming import jars
from streaming.core.state.events import parse_event
from streaming.core.state.group import GroupState, apply_event
from streaming.core.state.rerun import rerun
from tests.integration.java_programs import JavaUnavailable, compile_java
from tests.support import wait_until

SOURCE = Path(__file__).parent / "kafka_java" / "ConsumerProbe.java"
MAIN_CLASS = "ConsumerProbe"
JVM_FLAGS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
# What the probe loads of the broker's jar set: the client, its logging and its codecs.
RUNTIME_ARTIFACTS = ("kafka-clients", "slf4j-api", "log4j-api", "log4j-core", "log4j-slf4j-impl",
                     "lz4-java", "snappy-java", "zstd-jni")
LOG4J2 = """\
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
"""
CLOSE_TIMEOUT_S = 30.0

_changed = threading.Condition()  # notified on every line any probe prints, and on its exit
_sequence = itertools.count(1)
_names = itertools.count(1)
_live: set[JavaConsumer] = set()
_compile_lock = threading.Lock()
_compiled: Path | None = None


class ProbeUnavailable(RuntimeError):
    """The probe cannot be built: no Kafka jars in the cache, or no javac."""


def runtime_jars() -> list[Path]:
    found = jars.kafka_broker_jars()
    if not found:
        raise ProbeUnavailable(f"no Apache Kafka jars in {jars.kafka_broker_dir()}: "
                               "run `make jars` (or python scripts/fetch_jars.py kafka-broker)")
    chosen = [jar for jar in found if any(_is_artifact(jar, name) for name in RUNTIME_ARTIFACTS)]
    missing = [name for name in RUNTIME_ARTIFACTS
               if not any(_is_artifact(jar, name) for jar in chosen)]
    if missing:
        raise ProbeUnavailable(f"{jars.kafka_broker_dir()} lacks {missing}")
    return chosen


def _is_artifact(jar: Path, artifact: str) -> bool:
    try:
        return jars.jar_version(jar, artifact)[:1].isdigit()
    except ValueError:
        return False


def compile_probe() -> Path:
    """The folder holding ConsumerProbe.class and the log4j2 configuration it runs with."""
    global _compiled
    with _compile_lock:
        if _compiled is None:
            try:
                _compiled = compile_java([SOURCE], runtime_jars(), MAIN_CLASS,
                                         f"kafka-{jars.KAFKA_VERSION}",
                                         {"log4j2.properties": LOG4J2})
            except JavaUnavailable as refused:
                raise ProbeUnavailable(str(refused)) from None
        return _compiled


class JavaConsumer:
    """One ConsumerProbe JVM. start() again after close() or kill() runs a fresh process with
    the same arguments (state starts over; `seq` keeps counting)."""

    def __init__(self, bootstrap: str, group: str, topics: Sequence[str] = (), *,
                 protocol: str = "classic", assignor: str | None = None,
                 instance_id: str | None = None,
                 assign: Iterable[tuple[str, int]] | None = None,
                 revoke_delay_ms: int | None = None, name: str | None = None,
                 log_dir: Path | None = None) -> None:
        if not topics and assign is None:
            raise ValueError("a JavaConsumer wants topics to subscribe to, or partitions to assign")
        self.name = name or instance_id or f"probe-{next(_names)}"
        self.arguments = ["--bootstrap", bootstrap, "--group", group, "--protocol", protocol]
        if topics:
            self.arguments += ["--topics", ",".join(topics)]
        if assignor is not None:
            self.arguments += ["--assignor", assignor]
        if instance_id is not None:
            self.arguments += ["--instance-id", instance_id]
        if assign is not None:
            self.arguments += ["--assign", ",".join(f"{t}:{p}" for t, p in assign)]
        if revoke_delay_ms is not None:
            self.arguments += ["--revoke-delay-ms", str(revoke_delay_ms)]
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="probes-"))
        self.stderr_path = self.log_dir / f"{self.name}.stderr.log"
        self._process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._paused = False
        self._reset()

    def _reset(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._stdout_tail: deque[str] = deque(maxlen=40)
        self._member_id: str | None = None
        self._generation: int | None = None
        self._holds: frozenset[tuple[str, int]] = frozenset()
        self._revoking = False
        self._eof = False

    def __repr__(self) -> str:
        return f"JavaConsumer({self.name})"

    # -- the process ------------------------------------------------------------------------

    def java(self) -> list[str]:
        """The JVM's command line, up to and including the main class."""
        classes = compile_probe()
        classpath = os.pathsep.join([str(classes), *map(str, runtime_jars())])
        return ["java", *JVM_FLAGS, f"-Dlog4j2.configurationFile={classes / 'log4j2.properties'}",
                "-cp", classpath, MAIN_CLASS]

    def command(self) -> list[str]:
        java = [*self.java(), *self.arguments]
        setpriv = shutil.which("setpriv")
        # The JVM dies with this process, however this process ends.
        return [setpriv, "--pdeathsig", "SIGKILL", "--", *java] if setpriv else java

    def start(self) -> JavaConsumer:
        """Launches the JVM and returns at once; wait_for(lambda c: c.started) to wait."""
        if self.running:
            raise RuntimeError(f"{self.name} is running already")
        command = self.command()
        with _changed:
            self._reset()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.stderr_path.open("ab") as stderr:
            self._process = subprocess.Popen(command, stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=stderr,
                                             start_new_session=True)
        self._paused = False
        _live.add(self)
        self._reader = threading.Thread(target=self._read, args=(self._process,),
                                        name=f"{self.name}-stdout", daemon=True)
        self._reader.start()
        return self

    def _read(self, process: subprocess.Popen) -> None:
        for raw in process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with _changed:
                self._stdout_tail.append(line)
                try:
                    event = json.loads(line)
                except ValueError:
                    event = None
                if isinstance(event, dict) and "event" in event:
                    self._apply(event)
                _changed.notify_all()
        process.wait()
        with _changed:
            self._eof = True
            _changed.notify_all()

    def _apply(self, event: dict[str, Any]) -> None:
        event["seq"] = next(_sequence)
        self.events.append(event)
        kind = event["event"]
        if kind == "assignment":
            self._member_id = event["member_id"]
            self._generation = event["generation"]
            self._holds = frozenset((topic, partition) for topic, partition in event["holds"])
        elif kind == "revoking":
            self._revoking = True
        elif kind == "revoked":
            self._revoking = False

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def exited(self) -> bool:
        """The process ended and every line it printed is read."""
        return self._eof

    @property
    def returncode(self) -> int | None:
        return None if self._process is None else self._process.poll()

    # -- what it reported -------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self.saw("started")

    @property
    def closed(self) -> bool:
        return self.saw("closed")

    @property
    def member_id(self) -> str | None:
        return self._member_id

    @property
    def generation(self) -> int | None:
        return self._generation

    @property
    def holds(self) -> frozenset[tuple[str, int]]:
        return self._holds

    @property
    def revoking(self) -> bool:
        return self._revoking

    def saw(self, kind: str, after: int = 0) -> bool:
        return any(event["event"] == kind and event["seq"] > after for event in self.events)

    def of_kind(self, kind: str, after: int = 0) -> list[dict[str, Any]]:
        return [event for event in self.events if event["event"] == kind and event["seq"] > after]

    def partitions(self, topic: str) -> set[int]:
        return {partition for t, partition in self._holds if t == topic}

    def tail(self) -> str:
        stderr = (self.stderr_path.read_bytes()[-2000:].decode("utf-8", "replace")
                  if self.stderr_path.exists() else "")
        state = "running" if self.running else f"exited {self.returncode}"
        return (f"--- {self.name} ({state}) stdout:\n" + "\n".join(self._stdout_tail)
                + f"\n--- {self.name} stderr:\n{stderr or '(empty)'}")

    def wait_for(self, predicate: Callable[[JavaConsumer], Any], timeout: float = 60.0,
                 what: str = "a condition") -> Any:
        """predicate(self)'s first truthy value, checked on each line the probe prints. Fails
        at once if the process has ended without it, else after timeout seconds."""
        def check() -> Any:
            value = predicate(self)
            if not value and self._eof:
                raise AssertionError(f"{self.name} exited before {what}\n{self.tail()}")
            return value
        return wait_for_probes(check, timeout, f"{self.name}: {what}", [self])

    # -- driving it -------------------------------------------------------------------------

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> int:
        """"exit" on stdin: the probe closes its consumer (leaving the group, as close() does)
        and ends. Its exit status; SIGKILL and AssertionError if it takes over timeout."""
        process = self._process
        if process is None:
            raise RuntimeError(f"{self.name} was never started")
        if process.poll() is None:
            self.request_exit()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(
                    f"{self.name} did not close within {timeout}s\n{self.tail()}") from None
        self._finish()
        return process.returncode

    def request_exit(self) -> None:
        """Sends "exit" (resuming a paused probe) and returns at once; close() waits too."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        if self._paused:
            self.resume()
        try:
            process.stdin.write(b"exit\n")
            process.stdin.close()
        except (BrokenPipeError, ValueError):
            pass  # it is ending already

    def kill(self) -> None:
        """SIGKILL: the consumer vanishes without leaving its group."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self._finish()

    def pause(self) -> None:
        """SIGSTOP: the JVM freezes, heartbeats and all."""
        self._signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self._paused = False

    def _signal(self, signum: int) -> None:
        if not self.running:
            raise RuntimeError(f"{self.name} is not running")
        self._process.send_signal(signum)

    def _finish(self) -> None:
        if self._reader is not None:
            self._reader.join(10)
        if self._process is not None and self._process.stdin and not self._process.stdin.closed:
            try:
                self._process.stdin.close()
            except BrokenPipeError:
                pass
        _live.discard(self)

    def stop(self, timeout: float = 10.0) -> None:
        """Teardown: close() if it goes in time, else SIGKILL; never raises for a slow probe."""
        if self._process is None:
            return
        try:
            self.close(timeout)
        except AssertionError:
            pass  # close() killed it

    def __enter__(self) -> JavaConsumer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


def wait_for_probes(predicate: Callable[[], Any], timeout: float, what: str,
                    consumers: Iterable[JavaConsumer] = ()) -> Any:
    """predicate()'s first truthy value, checked now and after each line any probe prints
    (under the lock the probes' readers update under). AssertionError after timeout seconds,
    with the given consumers' output tails."""
    with _changed:
        return wait_until(predicate, timeout, what, pause=_changed.wait,
                          details=lambda: "\n".join(consumer.tail() for consumer in consumers))


def holders(consumers: Sequence[JavaConsumer], topic: str) -> Counter[int]:
    """How many of the consumers hold each partition of topic."""
    return Counter(partition for consumer in consumers for partition in consumer.partitions(topic))


def wait_for_partitions(consumers: Sequence[JavaConsumer], topic: str, partitions: int,
                        timeout: float = 60.0, *, balanced: bool = True,
                        same_generation: bool = False) -> list[set[int]]:
    """Until the consumers together hold each of topic's partitions exactly once, none is inside
    onPartitionsRevoked, and (balanced) their counts differ by at most one; (same_generation)
    all report one generation, as a settled classic group's members do. Each one's partitions."""
    consumers = list(consumers)

    def settled() -> list[set[int]] | None:
        held = [consumer.partitions(topic) for consumer in consumers]
        counts = holders(consumers, topic)
        if counts != Counter(range(partitions)) or any(c.revoking for c in consumers):
            return None
        if balanced and max(map(len, held)) - min(map(len, held)) > 1:
            return None
        if same_generation and len({c.generation for c in consumers}) != 1:
            return None
        return held

    return wait_for_probes(settled, timeout, f"{len(consumers)} consumers holding each of "
                           f"{topic}'s {partitions} partitions once", consumers)


def stop_all(consumers: Iterable[JavaConsumer] | None = None, timeout: float = 20.0) -> None:
    """Teardown for the given consumers, or every one still running: all are asked to exit at
    once (a slow onPartitionsRevoked then costs its delay once), SIGKILL for the late ones."""
    consumers = list(_live if consumers is None else consumers)
    for consumer in consumers:
        consumer.request_exit()
    deadline = time.monotonic() + timeout
    for consumer in consumers:
        consumer.stop(max(0.0, deadline - time.monotonic()))


@atexit.register
def _kill_leftovers() -> None:
    for consumer in list(_live):
        consumer.kill()


def observed_rerun(bootstrap: str, group: str) -> dict[str, set[tuple[str, int]]]:
    """One poll of the observer, its events folded into a group state, and the monitor's re-run
    of the group's assignor from the observed subscriptions: member id -> partitions."""
    observer = KafkaGroupObserver(bootstrap, timeout_s=10)
    try:
        [translation] = [t for t in observer.poll() if t.group == group]
    finally:
        observer.close()     # its clients would go on reconnecting after a broker's stop
    state = GroupState(group, "kafka", session_timeout_ms=45_000)
    for raw in translation.events:
        for event in parse_event(raw):
            apply_event(state, event)
    rerun(state)
    return {key[0]: {(topic, partition) for topic, share in computed.items()
                     for _, partition in share}
            for key, computed in state.computed.items()}
