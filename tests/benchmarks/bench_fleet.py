"""Benchmark: a fleet at its real rate against the job as an operator runs it; detection as a
scrape of /metrics sees it.

    python -m tests.benchmarks.bench_fleet --groups 10000 --clients 10 [--runs 3]
        [--seconds 180] [--collisions 12] [--form member|alive]

Each run, on one broker (tests/benchmarks/machine.py), with nothing of the project's simulator:

1. the job: `rebalance-monitor run` with its defaults (the default path: Spark's Kafka source,
   trigger 2 s), a process of its own on a new topic and checkpoint;
2. the fleet, from a process of its own, stamped with the wall clock from the moment the job is
   started (a monitor started beside a fleet that is starting too): each member (client id
   IP@PID, AVG, --topics topics of --queues queues on two brokers) heartbeats every 30 s at a
   phase of its own, so the joins are spread over the first 30 s as a real fleet's are, and
   each group's route of each topic is sent again every 30 s at the group's phase. `--form
   alive` sends what the observers send instead: at the group's phase, its members in full at
   its join and once every 600 s, and one `alive` naming them every 30 s;
3. warm-up, until /metrics tracks every group and its input lag is under 3 triggers (the cold
   start's time is printed);
4. the measured phase (`--seconds`): `--collisions` clientId collisions spread through it, each a
   second process of an existing member's client id (another address) that heartbeats on from
   then on; detection runs from the broker's ack of its first heartbeat to the first answer of
   /metrics?name[]=rebalance_double_assigned_queues (asked every 0.1 s from a process of its
   own, as a fast Prometheus would) that shows that group's double assignment. Every 10 s: the
   job's own input-lag gauge and the events the broker has acknowledged. At the end: CPU (share
   of one core) and peak resident memory of each of the job's processes (driver, JVM, Python
   workers) and of the fleet's, over the phase; any group shown double-assigned that had no
   collision (a false finding).

Kept up means the input lag shows no upward trend over the phase (the mean of its last third
of 10 s marks within a trigger of the first third's) and ends under 3 triggers. The baseline, measured in the same run: the trigger interval (the least a detection can take is
about one trigger plus one batch).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer

from producers import events
from streaming.common.topics import create_topic
from streaming.embedded_broker import free_port
from tests.benchmarks.bench_job import p50_p99
from tests.benchmarks.machine import describe_machine, start_broker

CYCLE_MS = 30_000            # each member's heartbeat, each group's routes and alive
RESTATE_CYCLES = 20          # --form alive: each member in full every 600 s
SLOT_MS = 100                # the fleet's schedule is kept to this
SCRAPE_EVERY_S = 0.1
LAG_EVERY_S = 10.0
PRODUCER = {"linger.ms": 5, "delivery.report.only.error": True, "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 2_097_152}


# -- The fleet --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fleet:
    groups: int
    clients: int
    topics: int
    queues: int
    form: str
    seed: int = 1

    def group(self, g: int) -> str:
        return f"fleet-{g:05d}"

    def topic_names(self) -> list[str]:
        return [f"T{t}" for t in range(self.topics)]

    def client(self, g: int, c: int) -> tuple[str, str]:
        """(client id, address) of client c of group g: IP@PID, as RocketMQ names a client."""
        ip = f"10.{g // 250 % 250}.{g % 250}.{c % 250}"
        return f"{ip}@{1000 + c}", f"{ip}:{20000 + c}"

    def route(self, ts: int, g: int, topic: str) -> dict:
        half = self.queues // 2
        return events.route(ts, topic, group=self.group(g),
                            brokers={"broker-a": self.queues - half, "broker-b": half})

    def heartbeat(self, ts: int, g: int, c: int, address: str | None = None) -> dict:
        client_id, own_address = self.client(g, c)
        return events.heartbeat(ts, self.group(g), client_id, self.topic_names(), "AVG",
                                address=address or own_address)

    def alive(self, ts: int, g: int) -> dict:
        return events.alive(ts, self.group(g), [self.client(g, c) for c in range(self.clients)])


def _template(event: dict) -> tuple[bytes, bytes]:
    """The event's JSON split around its ts, so the fleet stamps it with a join, not a dump."""
    text = json.dumps({**event, "ts": 0}, separators=(",", ":"))
    at = text.index('"ts":0') + len('"ts":')
    return text[:at].encode(), text[at + 1:].encode()


@dataclass
class Schedule:
    """Per 100 ms slot of the 30 s cycle: (key, ts template, offset ms in the slot, restate
    cycle or None) of each event sent in it. A restate cycle r: sent in cycles k with
    k % RESTATE_CYCLES == r (and at the first cycle, the join); None: every cycle."""

    slots: list[list[tuple[bytes, tuple[bytes, bytes], int, int | None]]] = field(
        default_factory=lambda: [[] for _ in range(CYCLE_MS // SLOT_MS)])

    def add(self, phase_ms: int, key: bytes, event: dict, restate: int | None = None) -> None:
        self.slots[phase_ms // SLOT_MS].append((key, _template(event), phase_ms % SLOT_MS,
                                                restate))

    @property
    def per_cycle(self) -> int:
        return sum(len(slot) for slot in self.slots)


def schedule(fleet: Fleet) -> Schedule:
    """The member form: each member at a phase of its own. The alive form, as an observer's
    poll sends a group: its routes, then its members in full at its join and every 600 s, then
    one `alive` naming them all (a millisecond later, so it never names a member not yet
    heard), all at the group's phase."""
    rng = random.Random(fleet.seed)
    plan = Schedule()
    for g in range(fleet.groups):
        key = fleet.group(g).encode()
        group_phase = rng.randrange(CYCLE_MS)
        for topic in fleet.topic_names():
            plan.add(group_phase, key, fleet.route(0, g, topic))
        if fleet.form == "alive":
            restate = rng.randrange(RESTATE_CYCLES)
            for c in range(fleet.clients):
                plan.add(group_phase, key, fleet.heartbeat(0, g, c), restate)
            plan.add((group_phase + 1) % CYCLE_MS, key, fleet.alive(0, g))
            continue
        for c in range(fleet.clients):
            plan.add(rng.randrange(CYCLE_MS), key, fleet.heartbeat(0, g, c))
    return plan


def run_fleet(bootstrap: str, topic: str, fleet: Fleet, start_ms, produced, failed, behind_ms,
              ready, stop) -> None:
    """The fleet's process: its schedule from start_ms on, cycle after cycle, until stopped."""
    plan = schedule(fleet)
    errors = [0]

    def on_delivery(error, _message) -> None:
        if error is not None:
            errors[0] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "on_delivery": on_delivery, **PRODUCER})
    ready.set()
    while start_ms.value == 0 and not stop.is_set():
        time.sleep(0.05)
    base = start_ms.value
    count, cycle = 0, 0
    while not stop.is_set():
        for index, slot in enumerate(plan.slots):
            slot_ms = base + cycle * CYCLE_MS + index * SLOT_MS
            ahead = slot_ms / 1000 - time.time()
            if ahead > 0:
                time.sleep(ahead)  # the fleet's own schedule, not a wait for a condition
            behind_ms.value = max(behind_ms.value, int(time.time() * 1000) - slot_ms - SLOT_MS)
            for key, (head, tail), offset, restate in slot:
                if restate is not None and cycle and cycle % RESTATE_CYCLES != restate:
                    continue
                value = head + str(slot_ms + offset).encode() + tail
                while True:
                    try:
                        producer.produce(topic, value, key)
                        break
                    except BufferError:
                        producer.poll(0.05)
                count += 1
            producer.poll(0)
            produced.value, failed.value = count, errors[0]
            if stop.is_set():
                break
        cycle += 1
    producer.flush(60)
    produced.value, failed.value = count, errors[0] + len(producer)


class FleetProcess:
    def __init__(self, bootstrap: str, topic: str, fleet: Fleet) -> None:
        context = multiprocessing.get_context("spawn")
        self.start_ms = context.Value("q", 0, lock=False)
        self.produced = context.Value("q", 0, lock=False)
        self.failed = context.Value("q", 0, lock=False)
        self.behind_ms = context.Value("q", 0, lock=False)
        self._ready, self._stop = context.Event(), context.Event()
        self.process = context.Process(target=run_fleet, name="fleet", daemon=True, args=(
            bootstrap, topic, fleet, self.start_ms, self.produced, self.failed, self.behind_ms,
            self._ready, self._stop))

    def prepare(self) -> FleetProcess:
        self.process.start()
        if not self._ready.wait(600):
            raise TimeoutError("the fleet's schedule was not built in 600 s")
        return self

    def go(self) -> None:
        self.start_ms.value = int(time.time() * 1000)

    def stop(self) -> tuple[int, int]:
        """(events produced, events the broker did not acknowledge)."""
        self._stop.set()
        self.process.join(120)
        return self.produced.value, self.failed.value


# -- The job, and what /metrics shows ---------------------------------------------------------

VENV_BIN = Path(sys.executable).parent


class Job:
    """`rebalance-monitor run` with its defaults, in a session of its own (driver, JVM and
    Python workers are one process group)."""

    def __init__(self, bootstrap: str, topic: str, workdir: Path,
                 options: Sequence[str] = ()) -> None:
        self.port = free_port()
        suffix = topic.rsplit(".", 1)[-1]
        self.args = [str(VENV_BIN / "rebalance-monitor"), "run", "--bootstrap-servers", bootstrap,
                     "--topic", topic, "--checkpoint", str(workdir / "checkpoint"),
                     "--metrics-host", "127.0.0.1", "--metrics-port", str(self.port),
                     "--findings-topic", f"bench.fleet.findings.{suffix}",
                     "--dead-letter-topic", f"bench.fleet.dlq.{suffix}",
                     "--log-level", "WARNING", *options]
        self.log_path = workdir / "job.log"
        self.unanswered: Counter[str] = Counter()    # failed scrapes by _why_unanswered
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def start(self) -> Job:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                            env=env, start_new_session=True)
        return self

    def family(self, name: str) -> dict[str, float] | None:
        """group (or "" for a family without one) -> the sum of its samples; None when the
        endpoint does not answer within 10 s."""
        if self.process.poll() is not None:
            raise RuntimeError(f"the job exited with {self.process.returncode}: "
                               f"{self.log_path.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"{self.url}?name[]={name}", timeout=10) as answer:
                return family_values(answer.read().decode(), name)
        except OSError as error:
            self.unanswered[_why_unanswered(error)] += 1
            return None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


def _why_unanswered(error: OSError) -> str:
    """"refused" (nothing listens yet: the job is starting), "timed out" (it listens and did not
    answer within 10 s) or the error's class.

    >>> [_why_unanswered(error) for error in (urllib.error.URLError(ConnectionRefusedError()),
    ...                                       TimeoutError(), urllib.error.URLError("gone"))]
    ['refused', 'timed out', 'str']
    """
    reason = getattr(error, "reason", error)
    if isinstance(reason, ConnectionRefusedError):
        return "refused"
    if isinstance(reason, TimeoutError):
        return "timed out"
    return type(reason).__name__


def family_values(text: str, name: str) -> dict[str, float]:
    """group -> the sum of `name`'s samples of that group (key "" for unlabelled samples).

    >>> family_values('# TYPE x gauge\\nx{group="a",topic="T"} 1.0\\nx{group="a",topic="U"} 2.0\\n'
    ...               'x 3.0\\n', "x")
    {'a': 3.0, '': 3.0}
    """
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(name) or line[len(name):len(name) + 1] not in ("{", " "):
            continue
        labels, _, value = line.rpartition(" ")
        group = ""
        if '{' in labels:
            at = labels.find('group="')
            if at >= 0:
                group = labels[at + 7:labels.index('"', at + 7)]
        values[group] = values.get(group, 0.0) + float(value)
    return values


WATCHED = ("rebalance_double_assigned_queues", "rebalance_monitor_last_batch_timestamp_seconds",
           "rebalance_monitor_batch_duration_seconds")


def watch_doubles(url: str, seen, stop) -> None:
    """The scraper's process: every 0.1 s, the double-assigned queues of every group, and the
    job's last batch. Put in `seen` at the end: {"first": {group: [monotonic time of the first
    answer of each spell of a double assignment]}, "batches": [seconds each batch took],
    "slowest_answer": seconds, "failed": answers that did not come}."""
    first: dict[str, list[float]] = {}
    shown: set[str] = set()
    batches: dict[float, float] = {}
    slowest, failed = 0.0, 0
    query = "&".join(f"name[]={name}" for name in WATCHED)
    while not stop.wait(SCRAPE_EVERY_S):
        asked = time.monotonic()
        try:
            with urllib.request.urlopen(f"{url}?{query}", timeout=10) as answer:
                text = answer.read().decode()
        except OSError:
            failed += 1
            continue
        at = time.monotonic()
        slowest = max(slowest, at - asked)
        now = {g for g, v in family_values(text, WATCHED[0]).items() if v > 0}
        for group in now - shown:
            first.setdefault(group, []).append(at)
        shown = now
        last = family_values(text, WATCHED[1]).get("")
        if last:
            batches[last] = family_values(text, WATCHED[2]).get("", 0.0)
    seen.put({"first": first, "batches": list(batches.values()), "slowest_answer": slowest,
              "failed": failed})


# -- Processes' CPU and memory ----------------------------------------------------------------

TICKS = os.sysconf("SC_CLK_TCK")


def session_processes(session: int) -> dict[int, str]:
    """pid -> role of every process in the session: driver, JVM, Python worker."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) != session or not command or fields[0] == "Z":
            continue
        role = ("JVM" if "java" in command.split(" ", 1)[0] else
                "driver" if "rebalance-monitor" in command else
                "Python worker" if "pyspark" in command else command.split(" ", 1)[0])
        found[int(entry.name)] = role
    return found


def cpu_seconds(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def resident_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Usage:
    """Each process's CPU over the phase and its peak resident memory, sampled every 10 s."""

    def __init__(self, processes: dict[int, str]) -> None:
        self.processes = processes
        self.cpu0 = {pid: cpu_seconds(pid) for pid in processes}
        self.peak = {pid: resident_mb(pid) for pid in processes}
        self.started = time.monotonic()

    def sample(self) -> None:
        for pid in self.processes:
            self.peak[pid] = max(self.peak[pid], resident_mb(pid))

    def report(self) -> list[str]:
        elapsed = time.monotonic() - self.started
        return [f"{role} (pid {pid}): CPU {(cpu_seconds(pid) - self.cpu0[pid]) / elapsed:.2f} "
                f"of a core, peak resident {self.peak[pid]:,.0f} MB"
                for pid, role in sorted(self.processes.items(), key=lambda item: item[1])]


# -- Where the Python time goes (--profile) ----------------------------------------------------

def start_profiles(processes: dict[int, str], seconds: float, directory: Path
                   ) -> list[tuple[str, int, Path, subprocess.Popen]]:
    """py-spy (PyPI) records the driver and each Python worker for the phase, in collapsed
    stacks; it samples from outside, without stopping them (--nonblocking)."""
    directory.mkdir(parents=True, exist_ok=True)
    started = []
    for pid, role in processes.items():
        if role not in ("driver", "Python worker"):
            continue
        out = directory / f"{role.replace(' ', '-')}-{pid}.txt"
        command = [str(VENV_BIN / "py-spy"), "record", "--pid", str(pid), "--duration",
                   str(int(seconds)), "--rate", "50", "--format", "raw", "--nonblocking",
                   "--output", str(out)]
        started.append((role, pid, out, subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    return started


def start_jvm_profile(processes: dict[int, str], seconds: float, directory: Path
                      ) -> list[tuple[str, int, Path, subprocess.Popen]]:
    """Java Flight Recorder (the JDK's own) records the JVM for the phase, started on the
    running process with jcmd: the JVM's own samples of each thread's Java stack every 10 ms
    (the `profile` settings), which `jfr print` reads back."""
    directory.mkdir(parents=True, exist_ok=True)
    started = []
    for pid, role in processes.items():
        if role != "JVM":
            continue
        out = directory / f"JVM-{pid}.jfr"
        command = ["jcmd", str(pid), "JFR.start", "name=bench_fleet", "settings=profile",
                   f"duration={int(seconds)}s", f"filename={out}"]
        started.append((role, pid, out, subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    return started


# Where a JVM sample's time goes: the first frame from the executing one down (toward the
# thread's root) whose class starts with one of these names; else Spark SQL's own work, told
# apart by the thread (an executor's task, or the driver's).
JVM_PARTS = (
    ("py4j calls from Python (the progress listener's among them)", ("py4j.",)),
    ("Kafka read", ("org.apache.kafka.", "org.apache.spark.sql.kafka010.")),
    ("JSON routing", ("com.fasterxml.jackson.", "org.apache.spark.sql.catalyst.json.")),
    ("Arrow and the Python exchange", ("org.apache.arrow.", "org.apache.spark.sql.execution.python.",
                                       "org.apache.spark.api.python.",
                                       "org.apache.spark.sql.execution.arrow.")),
    ("state store", ("org.apache.spark.sql.execution.streaming.state.",)),
    ("shuffle and block storage", ("org.apache.spark.shuffle.", "org.apache.spark.storage.",
                                   "org.apache.spark.io.", "net.jpountz.", "com.github.luben.",
                                   "org.xerial.snappy.")),
    ("checkpoint and offset logs", ("org.apache.spark.sql.execution.streaming.checkpointing.",
                                    "org.apache.hadoop.")),
    ("RPC and networking", ("org.apache.spark.rpc.", "org.apache.spark.network.", "io.netty.")),
)


def jvm_part(thread: str, frames: list[str]) -> str:
    for frame in frames:
        for part, prefixes in JVM_PARTS:
            if frame.startswith(prefixes):
                return part
    if thread.startswith("Executor task"):
        return "Spark SQL in tasks (rows, sort, hash, generated code)"
    return "the driver: planning, scheduling and the query's loop"


def jvm_samples(path: Path) -> list[tuple[str, list[str]]]:
    """(thread, frames from the executing one down) of each execution sample in the
    recording."""
    text = subprocess.run(["jfr", "print", "--events", "jdk.ExecutionSample", "--stack-depth",
                           "96", str(path)], capture_output=True, text=True, check=True).stdout
    samples, thread, frames = [], "", None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("sampledThread = "):
            thread = line.split('"')[1]
        elif line.startswith("stackTrace = ["):
            frames = []
        elif frames is not None and line.startswith("]"):
            samples.append((thread, frames))
            frames = None
        elif frames is not None and line and line != "...":
            frames.append(line)
    return samples


def summarize_jvm_profile(path: Path) -> list[str]:
    samples = jvm_samples(path)
    if not samples:
        return [f"JVM: no execution samples in {path}"]
    parts = Counter(jvm_part(thread, frames) for thread, frames in samples)
    threads = Counter(_thread_kind(thread) for thread, _ in samples)
    lines = [f"JVM: {len(samples)} execution samples (Java code running), by part:"]
    lines += [f"    {n / len(samples):6.1%}  {part}" for part, n in parts.most_common()]
    lines += ["  by thread:"]
    lines += [f"    {n / len(samples):6.1%}  {kind}" for kind, n in threads.most_common(8)]
    return lines


def _thread_kind(thread: str) -> str:
    """A thread's name without its numbers (task ids, pool indexes)."""
    return " ".join(word for word in thread.split() if not any(c.isdigit() for c in word))


def summarize_profiles(profiles, top: int = 12) -> list[str]:
    lines = []
    for role, pid, path, process in profiles:
        process.wait(60)
        if role == "JVM":
            deadline = time.monotonic() + 60     # JFR writes the file when its duration ends
            while not path.exists() and time.monotonic() < deadline:
                time.sleep(0.5)
            if path.exists():
                time.sleep(2)
                lines += summarize_jvm_profile(path)
            continue
        if not path.exists():
            continue
        inclusive: dict[str, int] = {}
        own: dict[str, int] = {}
        total = 0
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            samples = int(count)
            total += samples
            for frame in set(frames):
                inclusive[frame] = inclusive.get(frame, 0) + samples
            own[frames[-1]] = own.get(frames[-1], 0) + samples
        if not total:
            continue
        idle = sum(n for f, n in own.items() if _idle(f))
        lines.append(f"{role} {pid}: {total} samples, {1 - idle / total:.0%} not idle; "
                     f"the most inclusive of our functions, then the most own time:")
        ours = sorted(((n, f) for f, n in inclusive.items()
                       if "streaming/" in f or "producers/" in f), reverse=True)[:top]
        lines += [f"    {n / total:6.1%}  {f}" for n, f in ours]
        busy = sorted(((n, f) for f, n in own.items() if not _idle(f)), reverse=True)[:top]
        lines += [f"    own {n / total:6.1%}  {f}" for n, f in busy]
    return lines


def _idle(frame: str) -> bool:
    return any(word in frame for word in ("select", "poll (", "wait (", "accept", "_recv_into",
                                          "readinto", "sleep", "read (socket", "recv_into"))


# -- One run ----------------------------------------------------------------------------------

@dataclass
class Result:
    cold_start_s: float
    detections: list[float]
    missed: int
    lags: list[float]
    false_groups: list[str]

    @property
    def kept_up(self) -> bool:
        """No upward trend in the input lag over the phase (the last third of the marks within
        a trigger of the first third), and under 3 triggers at its end."""
        if not self.lags:
            return False
        third = max(len(self.lags) // 3, 1)
        first, last = self.lags[:third], self.lags[-third:]
        return (statistics.mean(last) <= statistics.mean(first) + TRIGGER_S
                and self.lags[-1] < 3 * TRIGGER_S)


TRIGGER_S = 2.0   # the job's default trigger interval


def one_run(bootstrap: str, fleet: Fleet, args, number: int) -> Result:
    topic = f"bench.fleet.{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=args.partitions)
    workdir = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    load = FleetProcess(bootstrap, topic, fleet).prepare()
    print(f"-- run {number}: {fleet.groups:,} groups x {fleet.clients} clients, form {fleet.form},"
          f" {load_rate(fleet):,.0f} events/s, topic {topic} ({args.partitions} partitions)",
          flush=True)
    job = Job(bootstrap, topic, workdir, shlex.split(args.job_options)).start()
    load.go()
    started = time.monotonic()
    try:
        cold = warm_up(job, fleet, started, args.warm_up_timeout)
        print(f"cold start: every group tracked and input lag under {3 * TRIGGER_S:.0f} s "
              f"{cold:.0f} s after the job and the fleet started", flush=True)
        return measured_phase(bootstrap, topic, job, load, fleet, args, cold)
    finally:
        produced, failed = load.stop()
        job.stop()
        print(f"events produced {produced:,}, not acknowledged by the broker {failed:,}; "
              f"the fleet was at most {load.behind_ms.value / 1000:.1f} s behind its schedule")
        log = job.log_path.read_text(errors="replace")
        print(f"the job's log: {len(log.splitlines())} lines, kept in {job.log_path}")
        print(log[-4000:] if args.show_log else "", end="")
        shutil.rmtree(workdir / "checkpoint", ignore_errors=True)


def load_rate(fleet: Fleet) -> float:
    per_cycle = fleet.groups * fleet.topics
    if fleet.form == "alive":
        per_cycle += fleet.groups + fleet.groups * fleet.clients / RESTATE_CYCLES
    else:
        per_cycle += fleet.groups * fleet.clients
    return per_cycle / (CYCLE_MS / 1000)


def warm_up(job: Job, fleet: Fleet, started: float, timeout_s: float) -> float:
    deadline = started + timeout_s
    last_print = started
    while time.monotonic() < deadline:
        groups = job.family("rebalance_monitor_groups")
        lag = job.family("rebalance_monitor_input_lag_seconds")
        if groups is not None and lag is not None and (
                groups.get("", 0) >= fleet.groups and lag.get("", 1e9) < 3 * TRIGGER_S):
            if job.unanswered:
                told = ", ".join(f"{why} {count}" for why, count in sorted(job.unanswered.items()))
                print(f"  /metrics unanswered in the warm-up: {told}")
            return time.monotonic() - started
        if time.monotonic() - last_print >= 30:
            last_print = time.monotonic()
            shown = ("no answer" if groups is None or lag is None else
                     f"groups {groups.get('', 0):,.0f}, input lag {lag.get('', 0):.1f} s")
            print(f"  warm-up t={last_print - started:.0f} s: {shown}", flush=True)
        time.sleep(1)
    raise TimeoutError(f"not warm after {timeout_s} s")


def measured_phase(bootstrap: str, topic: str, job: Job, load: FleetProcess, fleet: Fleet,
                   args, cold: float) -> Result:
    context = multiprocessing.get_context("spawn")
    seen, stop_scraper = context.Queue(), context.Event()
    scraper = context.Process(target=watch_doubles, args=(job.url, seen, stop_scraper),
                              daemon=True, name="scraper")
    scraper.start()
    usage = Usage({**session_processes(job.process.pid), load.process.pid: "fleet",
                   scraper.pid: "scraper"})
    profiles = ([*start_profiles(usage.processes, args.seconds, Path(args.profile)),
                 *start_jvm_profile(usage.processes, args.seconds, Path(args.profile))]
                if args.profile else [])
    collisions = Collisions(bootstrap, topic, fleet, args.collisions, args.seconds)
    injector = threading.Thread(target=collisions.run, daemon=True)
    injector.start()
    lags = []
    ends = time.monotonic() + args.seconds
    next_mark = time.monotonic() + LAG_EVERY_S
    while time.monotonic() < ends:
        time.sleep(max(0.0, min(next_mark, ends) - time.monotonic()))
        if time.monotonic() >= next_mark:
            answer = job.family("rebalance_monitor_input_lag_seconds")
            lag = float("inf") if answer is None else answer.get("", float("inf"))
            lags.append(lag)
            usage.sample()
            print(f"  t={len(lags) * LAG_EVERY_S:4.0f} s  input lag {lag:5.1f} s  produced "
                  f"{load.produced.value:,}", flush=True)
            next_mark += LAG_EVERY_S
    collisions.wait_shown(job, timeout_s=60)
    collisions.stop.set()
    injector.join(60)
    stop_scraper.set()
    watched = seen.get(timeout=60)
    scraper.join(10)
    first, batches = watched["first"], sorted(watched["batches"])
    if batches:
        print(f"  batches: {len(batches)}, p50 {batches[len(batches) // 2]:.2f} s, p90 "
              f"{batches[int(len(batches) * 0.9)]:.2f} s, max {batches[-1]:.2f} s; /metrics "
              f"answers: slowest {watched['slowest_answer']:.2f} s, {watched['failed']} not "
              f"answered within 10 s")
    for line in usage.report():
        print("  " + line)
    for line in summarize_profiles(profiles):
        print("  " + line)
    detections, missed = [], 0
    for group, acked in collisions.acked.items():
        after = [t for t in first.get(group, []) if t >= acked]
        if after:
            detections.append(after[0] - acked)
        else:
            missed += 1
    false_groups = sorted(set(first) - set(collisions.acked))
    return Result(cold, detections, missed, lags, false_groups)


class Collisions:
    """Client id collisions at known times: a second process of client 0 of a group (another
    address), heartbeating every 30 s from then on. `acked` holds the monotonic time the broker
    acknowledged each collision's first heartbeat."""

    def __init__(self, bootstrap: str, topic: str, fleet: Fleet, count: int,
                 seconds: float) -> None:
        self.topic, self.fleet = topic, fleet
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        rng = random.Random(fleet.seed + 1)
        self.groups = rng.sample(range(fleet.groups), count)
        self.send_at = [(k + 1) * seconds / (count + 1) for k in range(count)]
        self.acked: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        due = [(started + at, g) for at, g in zip(self.send_at, self.groups, strict=True)]
        while due and not self.stop.is_set():
            due.sort()
            at, g = due[0]
            if self.stop.wait(max(0.0, at - time.monotonic())):
                return
            due.pop(0)
            self._send(g)
            due.append((at + CYCLE_MS / 1000, g))

    def _send(self, g: int) -> None:
        address = f"10.255.{g // 250 % 250}.{g % 250}:30000"
        event = self.fleet.heartbeat(int(time.time() * 1000), g, 0, address=address)
        group = self.fleet.group(g)

        def acked(error, _message) -> None:
            if error is None:
                self.acked.setdefault(group, time.monotonic())

        self.producer.produce(self.topic, json.dumps(event).encode(), group.encode(),
                              on_delivery=acked)
        self.producer.flush(30)

    def wait_shown(self, job: Job, timeout_s: float) -> None:
        """Until every collision is shown on /metrics, or timeout_s (the rest count missed)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            shown = job.family("rebalance_double_assigned_queues") or {}
            if all(shown.get(group, 0) > 0 for group in self.acked):
                return
            time.sleep(0.5)


# -- Report -----------------------------------------------------------------------------------

def report(result: Result) -> None:
    if result.detections:
        p50, p99 = p50_p99(result.detections)
        detections = ", ".join(f"{d:.1f}" for d in result.detections)
        print(f"detection over {len(result.detections)} collisions: p50 {p50:.2f} s, p99 "
              f"{p99:.2f} s, max {max(result.detections):.2f} s ({detections}); the trigger "
              f"(baseline) {TRIGGER_S:.0f} s: p99 / trigger {p99 / TRIGGER_S:.1f}")
    print(f"collisions never shown: {result.missed}; groups shown double-assigned without a "
          f"collision: {len(result.false_groups)} {result.false_groups[:10]}")
    print(f"input lag at the 10 s marks: max {max(result.lags, default=0):.1f} s, last "
          f"{result.lags[-1] if result.lags else 0:.1f} s; kept up: "
          f"{'yes' if result.kept_up else 'no'}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--topics", type=int, default=2)
    parser.add_argument("--queues", type=int, default=8, help="queues per topic")
    parser.add_argument("--form", choices=("member", "alive"), default="member")
    parser.add_argument("--seconds", type=float, default=180.0, help="the measured phase")
    parser.add_argument("--collisions", type=int, default=12)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--warm-up-timeout", type=float, default=900.0)
    parser.add_argument("--profile", metavar="DIR", default=None,
                        help="record the driver and the Python workers with py-spy, and the "
                             "JVM with Java Flight Recorder, during the phase, into DIR, and "
                             "print where their time goes")
    parser.add_argument("--show-log", action="store_true", help="print the job's log tail")
    parser.add_argument("--job-options", default="",
                        help="more options for `rebalance-monitor run`, as one string "
                             "(e.g. \"--state-store hdfs\"); the job's defaults otherwise")
    args = parser.parse_args()
    fleet = Fleet(args.groups, args.clients, args.topics, args.queues, args.form)
    print("machine:", describe_machine())
    results = []
    with start_broker() as bootstrap:
        for number in range(1, args.runs + 1):
            results.append(one_run(bootstrap, fleet, args, number))
            report(results[-1])
    every = [d for r in results for d in r.detections]
    if every:
        p50, p99 = p50_p99(every)
        print(f"== {len(results)} runs: detection p50 {p50:.2f} s, p99 {p99:.2f} s over "
              f"{len(every)} collisions; p99 per run "
              f"{', '.join(f'{p50_p99(r.detections)[1]:.2f}' for r in results if r.detections)};"
              f" kept up in {sum(r.kept_up for r in results)} of {len(results)}; cold start "
              f"{', '.join(f'{r.cold_start_s:.0f}' for r in results)} s")


if __name__ == "__main__":
    main()
