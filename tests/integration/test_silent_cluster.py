"""A producer that dies does not turn a firing alert into "resolved".

Two real `rebalance-monitor simulate` processes feed the real job, each naming its own cluster:
fleet-a a steady fleet, fleet-b two processes sharing a client id (a lasting double assignment).
A real Prometheus scrapes the job and both producers with the shipped scrape jobs and rules. Then
fleet-b is killed (SIGKILL) while fleet-a goes on, and event time runs well past fleet-b's
session timeout: without the stale state the core would expire fleet-b's members, the group
would vanish and its double-assignment alert would resolve. Both simulators run at 10x real
time, so a session timeout of event time passes in about 15 s.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.integration.job_process import SPARK_SUBMIT_ARGS, JobProcess
from tests.integration.producer_process import ProducerProcess
from tests.integration.prometheus_harness import HarnessConfig, PrometheusHarness, poll

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEED = "10"
FAST_FOR = {"RebalanceDoubleAssignment": "2s", "RebalanceProducerDown": "2s",
            "RebalanceClusterSilent": "2s"}
# RocketMQ's session timeout (120 s) plus the watermark delay (30 s), and a margin.
PAST_EXPIRY_S = 200
COLLIDED = {"system": "rocketmq", "group": "collide-group", "topic": "TopicX"}


def simulate(bootstrap: str, topic: str, cluster: str, scenario: list[str], log_dir: Path):
    return ProducerProcess(["simulate", "--bootstrap-servers", bootstrap, "--topic", topic,
                            *scenario, "--realtime", "--speed", SPEED, "--simulated-seconds", "100000",
                            "--cluster", cluster], log_dir)


def require_prometheus() -> None:
    if shutil.which("prometheus") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus not installed (Debian package prometheus)")
        pytest.skip("prometheus not installed")


def firing(prometheus: PrometheusHarness, name: str, **labels: str) -> list[dict]:
    return [a for a in prometheus.alerts() if a["labels"]["alertname"] == name
            and a["state"] == "firing"
            and all(a["labels"].get(k) == v for k, v in labels.items())]


def test_a_dead_producers_groups_stay_stale_and_their_alerts_keep_firing(
        kafka_bootstrap, make_topic, tmp_path):
    require_prometheus()
    topic = make_topic(partitions=2)
    job = JobProcess(kafka_bootstrap, topic, tmp_path / "checkpoint", tmp_path,
                     findings_topic=f"{topic}.findings", dead_letter_topic=f"{topic}.dlq",
                     env={"PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS},
                     # Simulated time runs ahead of the Kafka timestamps at 10x.
                     # The fleets are RocketMQ's: the Kafka session timeout only has to stay
                     # above the silence, as run requires.
                     extra_args=("--max-clock-skew-ms", "36000000",
                                 "--cluster-silence-ms", "60000",
                                 "--kafka-session-timeout-ms", "120000"))
    fleet_a = simulate(kafka_bootstrap, topic, "fleet-a",
                       ["--scenario", "steady", "--groups", "2", "--clients", "2"], tmp_path)
    fleet_b = simulate(kafka_bootstrap, topic, "fleet-b", ["--scenario", "client-id-collision"],
                       tmp_path)
    with job, fleet_a, fleet_b:
        config = HarnessConfig(target="self", for_overrides=FAST_FOR, shipped_jobs={
            "rebalance-monitor": (f"127.0.0.1:{job.port}",),
            "rebalance-simulator": (f"127.0.0.1:{fleet_a.port}", f"127.0.0.1:{fleet_b.port}")})
        with PrometheusHarness(config, tmp_path / "prometheus") as prometheus:
            before = job.wait_for(
                lambda m: m.value("rebalance_double_assigned_queues", **COLLIDED) == 2,
                timeout=120)
            members = before.value("rebalance_group_members", group="collide-group")
            poll(lambda: firing(prometheus, "RebalanceDoubleAssignment", group="collide-group"),
                 timeout=60)

            fleet_b.process.kill()
            fleet_b.process.wait()
            silent = job.wait_for(lambda m: m.value("rebalance_cluster_silent",
                                                    cluster="fleet-b") == 1, timeout=60)
            last_b = silent.value("rebalance_cluster_last_event_time_seconds", cluster="fleet-b")
            after = job.wait_for(lambda m: m.value(
                "rebalance_cluster_last_event_time_seconds", cluster="fleet-a")
                > last_b + PAST_EXPIRY_S, timeout=120)

            # The group is kept as it was and marked stale, not expired into an all-clear.
            assert after.value("rebalance_double_assigned_queues", **COLLIDED) == 2
            assert after.value("rebalance_group_members", group="collide-group") == members
            assert after.value("rebalance_group_stale", group="collide-group",
                               cluster="fleet-b") == 1
            assert after.value("rebalance_cluster_silent", cluster="fleet-a") == 0
            assert after.value("rebalance_group_stale", cluster="fleet-a") is None
            poll(lambda: firing(prometheus, "RebalanceClusterSilent", cluster="fleet-b"),
                 timeout=60)
            poll(lambda: firing(prometheus, "RebalanceProducerDown", job="rebalance-simulator",
                                instance=f"127.0.0.1:{fleet_b.port}"), timeout=60)
            assert firing(prometheus, "RebalanceDoubleAssignment", group="collide-group")
            assert not firing(prometheus, "RebalanceProducerDown",
                              instance=f"127.0.0.1:{fleet_a.port}")
