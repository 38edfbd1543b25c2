"""Bad configuration is found before anything starts: each case below, found by running the
commands as an operator would (issue: "A service an on-call engineer trusts"), is one line
`rebalance-monitor CMD: error: ...` naming the option or variable, exit status 2, no traceback,
within 5 s, run as the real command in a process of its own."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

COMMAND = str(Path(sys.executable).with_name("rebalance-monitor"))

CASES = [
    (["run", "--bootstrap-servers", "host with spaces:xx"], {}, "--bootstrap-servers"),
    (["run"], {"REBALANCE_MONITOR_BOOTSTRAP_SERVERS": "host with spaces:xx"},
     "REBALANCE_MONITOR_BOOTSTRAP_SERVERS"),
    (["run", "--bootstrap-servers", "b:9092", "--watermark-delay-ms", "1e23"], {},
     "--watermark-delay-ms"),
    (["run", "--bootstrap-servers", "b:9092", "--cluster-silence-ms", "600000",
      "--session-timeout-ms", "1000"], {}, "--cluster-silence-ms"),
    (["run"], {}, "--bootstrap-servers"),
    (["observe-kafka", "--bootstrap-servers", "::::", "--once", "--stdout"], {},
     "--bootstrap-servers"),
    (["observe-rocketmq", "--namesrv", "a:9876", "--access-key", "AK", "--stdout", "--once"],
     {}, "--access-key"),
    (["simulate", "--cluster", "bad\x07name", "--stdout"], {}, "--cluster"),
    (["simulate", "--stdout"], {"REBALANCE_MONITOR_BOOTSTRAP_SERVERS": ":::"},
     "REBALANCE_MONITOR_BOOTSTRAP_SERVERS"),
    (["simulate", "--groups", "999999999999", "--stdout"], {}, "--groups"),
    (["simulate", "--groups", "1000000", "--clients", "10000", "--stdout"], {}, "--groups"),
    (["alert-rules", "--group-page-base-url", "http://host:notaport"], {},
     "--group-page-base-url"),
    (["run", "--bootstrap-servers", "b:9092", "--kafka-option", "foo.bar=1"], {},
     "--kafka-option"),
    (["observe-kafka", "--bootstrap-servers", "b:9092", "--kafka-option", "linger.ms=soon"], {},
     "--kafka-option"),
    (["simulate", "--bootstrap-servers", "b:9092"],
     {"REBALANCE_MONITOR_KAFKA_OPTION": "foo.bar=1"}, "REBALANCE_MONITOR_KAFKA_OPTION"),
    (["run", "--bootstrap-servers", "b:9092", "--checkpoint", "/proc/ck"], {}, "--checkpoint"),
    (["run", "--bootstrap-servers", "b:9092", "--checkpoint", "/etc/passwd/ck"], {},
     "--checkpoint"),
    # A metrics port in use ({busy}: one this test holds), before any broker or Spark starts.
    (["run", "--bootstrap-servers", "b:9092", "--metrics-port", "{busy}"], {}, "--metrics-port"),
    (["demo", "--metrics-port", "{busy}"], {}, "--metrics-port"),
    (["demo", "--runbook-base-url", "http://host:notaport"], {}, "--runbook-base-url"),
    (["observe-kafka", "--bootstrap-servers", "b:9092", "--metrics-port", "{busy}"], {},
     "--metrics-port"),
    (["observe-rocketmq", "--namesrv", "a:9876", "--stdout", "--metrics-port", "{busy}"], {},
     "--metrics-port"),
    (["simulate", "--bootstrap-servers", "b:9092", "--metrics-port", "{busy}"], {},
     "--metrics-port"),
]


@pytest.mark.parametrize(("argv", "environment", "named"), CASES,
                         ids=[" ".join(argv)[:60] for argv, _, _ in CASES])
def test_a_bad_value_is_one_line_and_exit_2_before_anything_starts(argv, environment, named,
                                                                    busy_port, tmp_path):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("REBALANCE_MONITOR_") and key != "KAFKA_BOOTSTRAP_SERVERS"}
    argv = [arg.replace("{busy}", str(busy_port)) for arg in argv]
    started = time.monotonic()
    done = subprocess.run([COMMAND, *argv], env={**env, **environment}, capture_output=True,
                          text=True, timeout=30, cwd=tmp_path)
    elapsed = time.monotonic() - started
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2, lines
    assert len(lines) == 1 and lines[0].startswith(f"rebalance-monitor {argv[0]}: error: "), lines
    assert named in lines[0]
    assert elapsed < 5, elapsed
    # Nothing started: no checkpoint (run's default is under the working directory), no Spark
    # warehouse or metastore, no demo directory.
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def busy_port():
    """A port in use the whole module long, as another exporter would hold 9108."""
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        yield sock.getsockname()[1]
