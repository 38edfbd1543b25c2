"""Bad configuration is found before anything starts: each case below, found by running the
commands as an operator would (issue: "A service an on-call engineer trusts"), is one line
`rebalance-monitor CMD: error: ...` naming the option or variable, exit status 2, no traceback,
within 5 s, run as the real command in a process of its own."""

from __future__ import annotations

import os
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
]


@pytest.mark.parametrize(("argv", "environment", "named"), CASES,
                         ids=[" ".join(argv)[:60] for argv, _, _ in CASES])
def test_a_bad_value_is_one_line_and_exit_2_before_anything_starts(argv, environment, named):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("REBALANCE_MONITOR_") and key != "KAFKA_BOOTSTRAP_SERVERS"}
    started = time.monotonic()
    done = subprocess.run([COMMAND, *argv], env={**env, **environment}, capture_output=True,
                          text=True, timeout=30)
    elapsed = time.monotonic() - started
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2, lines
    assert len(lines) == 1 and lines[0].startswith(f"rebalance-monitor {argv[0]}: error: "), lines
    assert named in lines[0]
    assert elapsed < 5, elapsed
