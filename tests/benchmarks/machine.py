"""What every benchmark prints first: the machine it ran on; and the broker it runs against."""

from __future__ import annotations

import contextlib
import os
import platform
import tempfile
from collections.abc import Iterator
from pathlib import Path


def describe_machine() -> str:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as info:
            model = next(line.split(":", 1)[1].strip() for line in info
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        load = "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "load average unknown"
    return f"nproc {os.cpu_count()}, CPU {model}, Python {platform.python_version()}, {load}"


@contextlib.contextmanager
def start_broker() -> Iterator[str]:
    """KAFKA_BOOTSTRAP_SERVERS when set, else the broker REBALANCE_MONITOR_BENCH_BROKER names:
    "apache" (the default: Apache Kafka from the jar cache) or "embedded" (tansu)."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        print("broker: KAFKA_BOOTSTRAP_SERVERS")
        yield os.environ["KAFKA_BOOTSTRAP_SERVERS"]
        return
    kind = os.environ.get("REBALANCE_MONITOR_BENCH_BROKER", "apache")
    if kind == "embedded":
        from streaming.embedded_broker import EmbeddedBroker

        print("broker: embedded tansu")
        with EmbeddedBroker(port=0) as broker:
            yield broker.bootstrap_servers
        return
    from streaming.jars import KAFKA_VERSION
    from streaming.kafka_broker import ApacheKafkaBroker

    print(f"broker: Apache Kafka {KAFKA_VERSION}, one KRaft node, heap 1 GB")
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as workdir, \
            ApacheKafkaBroker(Path(workdir), heap="1g") as broker:
        yield broker.bootstrap_servers
