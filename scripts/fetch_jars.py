"""Fetch the project's Java jars from Maven Central into the cache (streaming/jars.py says
where), once: a set already complete is left alone.

    python scripts/fetch_jars.py                 # every set: the Kafka brokers, Kafka Streams,
                                                 # Spark's Kafka source, each RocketMQ 5 and its
                                                 # gRPC client
    python scripts/fetch_jars.py spark-kafka     # only one set

Each set is a pom in scripts/jars/ resolved by `mvn dependency:copy-dependencies` into a
scratch folder, then moved into place with its COMPLETE marker. Needs mvn and java on PATH
(`make jars` installs them where they are missing).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streaming import jars  # noqa: E402


def _copy_dependencies(pom: Path, into: Path, properties: dict[str, str],
                       artifacts: tuple[str, ...] = ()) -> None:
    command = ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={into}"]
    command += [f"-D{name}={value}" for name, value in properties.items()]
    if artifacts:
        command.append(f"-DincludeArtifactIds={','.join(artifacts)}")
    subprocess.run(command, check=True)


def fetch(name: str, target: Path, pom: Path, properties: dict[str, str],
          artifacts: tuple[str, ...] = ()) -> None:
    if (target / jars.COMPLETE).is_file():
        print(f"{name}: {target} (cached)")
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        staged = Path(scratch) / "jars"
        _copy_dependencies(pom, staged, properties, artifacts)
        (staged / jars.COMPLETE).write_text(" ".join(f"{k}={v}" for k, v in properties.items()))
        shutil.rmtree(target, ignore_errors=True)
        staged.rename(target)
    print(f"{name}: {target} ({len(list(target.glob('*.jar')))} jars)")


SETS = {
    "kafka-broker": lambda: fetch(
        "kafka-broker", jars.kafka_broker_dir(), ROOT / "scripts/jars/kafka-broker/pom.xml",
        {"kafka.version": jars.KAFKA_VERSION}),
    "kafka-broker-3": lambda: fetch(
        "kafka-broker-3", jars.kafka_broker_dir(jars.KAFKA_3_VERSION),
        ROOT / "scripts/jars/kafka-broker/pom.xml", {"kafka.version": jars.KAFKA_3_VERSION}),
    "spark-kafka": lambda: fetch(
        "spark-kafka", jars.spark_kafka_dir(), ROOT / "scripts/jars/spark-kafka/pom.xml",
        {"spark.version": jars.pyspark_version()}, jars.SPARK_KAFKA_ARTIFACTS),
    **{f"rocketmq-{version}": (lambda version=version: fetch(
        f"rocketmq-{version}", jars.rocketmq5_dir(version),
        ROOT / "scripts/jars/rocketmq-5/pom.xml", {"rocketmq.version": version}))
       for version in jars.ROCKETMQ5_VERSIONS},
    "kafka-streams": lambda: fetch(
        "kafka-streams", jars.kafka_streams_dir(), ROOT / "scripts/jars/kafka-streams/pom.xml",
        {"kafka.version": jars.KAFKA_VERSION}),
    "rocketmq-grpc-client": lambda: fetch(
        "rocketmq-grpc-client", jars.rocketmq_grpc_client_dir(),
        ROOT / "scripts/jars/rocketmq-grpc-client/pom.xml",
        {"client.version": jars.ROCKETMQ_GRPC_CLIENT_VERSION}),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="*", metavar="SET",
                        help=f"one of {', '.join(SETS)} (default: all)")
    chosen = parser.parse_args().sets or list(SETS)
    unknown = sorted(set(chosen) - set(SETS))
    if unknown:
        parser.error(f"unknown set {', '.join(unknown)}: choose from {', '.join(SETS)}")
    for name in chosen:
        SETS[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
