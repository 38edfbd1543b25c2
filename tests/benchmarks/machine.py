"""What every benchmark prints first: the machine it ran on; and the broker it runs against."""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Iterator


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
    """KAFKA_BOOTSTRAP_SERVERS when set, else the embedded broker."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield os.environ["KAFKA_BOOTSTRAP_SERVERS"]
        return
    from streaming.embedded_broker import EmbeddedBroker

    with EmbeddedBroker(port=0) as broker:
        yield broker.bootstrap_servers
