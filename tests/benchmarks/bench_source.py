"""Read rate of Spark's Kafka source and of the project's embedded reader, each against a
plain confluent-kafka consumer of the same topic in the same run.

    python -m tests.benchmarks.bench_source [--events 200000] [--partitions 4]
        [--value-bytes 200] [--max-offsets-per-trigger 50000] [--rounds 3]

Each round reads the whole topic three ways: the plain consumer (the baseline), then a Spark
count query over format("kafka") (Spark's own source, from the jar cache), then the same over
format("rebalance_kafka") (the embedded reader), each with Trigger.AvailableNow on a fresh
checkpoint, after a small warm-up query of each so JVM and Python-worker start-up are not
counted. Medians are reported. "sustained" divides by the summed micro-batch durations, "wall"
by the whole query run including its start. The broker: tests/benchmarks/machine.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from streaming.common.topics import create_topic
from streaming.jars import spark_kafka_conf
from streaming.spark.source_embedded import SOURCE_NAME, register
from tests.benchmarks.machine import describe_machine, start_broker

READERS = {"spark kafka source": "kafka", "embedded reader": SOURCE_NAME}


def produce(bootstrap: str, topic: str, events: int, value_bytes: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000})
    padding = b"x" * max(0, value_bytes - 60)
    started = time.perf_counter()
    for index in range(events):
        value = b'{"type":"heartbeat","group":"g%05d","seq":%d,"p":"' % (index % 1000, index)
        producer.produce(topic, key=b"g%05d" % (index % 1000), value=value + padding + b'"}')
        if index % 50_000 == 49_999:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("the producer did not deliver every event")
    return time.perf_counter() - started


def raw_read(bootstrap: str, topic: str, partitions: int, events: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-raw",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, started = 0, time.perf_counter()
    deadline = started + 300
    while seen < events:
        wanted = min(10_000, events - seen)  # consume() waits for all it is asked for
        for message in consumer.consume(num_messages=wanted, timeout=0.5):
            error = message.error()
            if error is None:
                message.value()  # touch the payload, as a real reader does
                seen += 1
            elif error.code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(error)
        if time.perf_counter() > deadline:
            raise TimeoutError(f"raw read saw {seen} of {events} events")
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def spark_session():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("bench-source")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.adaptive.enabled", "false")
             .config(map=spark_kafka_conf()).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def spark_count(spark, data_format: str, bootstrap: str, topic: str,
                max_per_trigger: int | None):
    counted = []
    reader = (spark.readStream.format(data_format).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    checkpoint = tempfile.mkdtemp(prefix="bench-source-")
    started = time.perf_counter()
    query = (reader.load().writeStream
             .foreachBatch(lambda frame, _batch: counted.append(frame.count()))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(query.exception())
    batch_ms = [p["durationMs"]["triggerExecution"] for p in query.recentProgress
                if p["numInputRows"]]
    return sum(counted), elapsed, batch_ms


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=200)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=50_000,
                        help="0 = unset: one batch")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"machine: {describe_machine()}")
    with start_broker() as bootstrap:
        suffix = int(time.time())
        topic, warmup = f"bench.source.{suffix}", f"bench.warmup.{suffix}"
        create_topic(bootstrap, topic, args.partitions)
        create_topic(bootstrap, warmup, args.partitions)
        produce(bootstrap, warmup, 2_000, args.value_bytes)
        produce_s = produce(bootstrap, topic, args.events, args.value_bytes)
        print(f"{args.events} events of {args.value_bytes} B in {args.partitions} partitions, "
              f"produced in {produce_s:.2f}s")
        spark = spark_session()
        rates = measure(spark, bootstrap, topic, warmup, args)
        report(rates, args)
        spark.stop()


def measure(spark, bootstrap: str, topic: str, warmup: str, args) -> dict[str, list[float]]:
    for data_format in READERS.values():
        spark_count(spark, data_format, bootstrap, warmup, None)
    rates: dict[str, list[float]] = {"raw": []}
    for round_number in range(1, args.rounds + 1):
        rates["raw"].append(args.events / raw_read(bootstrap, topic, args.partitions,
                                                   args.events))
        line = [f"round {round_number}: raw {rates['raw'][-1]:,.0f}/s"]
        for name, data_format in READERS.items():
            counted, spark_s, batch_ms = spark_count(
                spark, data_format, bootstrap, topic, args.max_offsets_per_trigger)
            if counted != args.events:
                raise AssertionError(f"{name} counted {counted}, not {args.events}")
            rates.setdefault(f"{name} wall", []).append(counted / spark_s)
            rates.setdefault(f"{name} sustained", []).append(counted / (sum(batch_ms) / 1000))
            line.append(f"{name} wall {counted / spark_s:,.0f}/s, sustained "
                        f"{rates[f'{name} sustained'][-1]:,.0f}/s (batch ms {batch_ms})")
        print("; ".join(line))
    return rates


def report(rates: dict[str, list[float]], args) -> None:
    medians = {name: statistics.median(values) for name, values in rates.items()}
    raw = medians["raw"]
    print(f"median of {args.rounds} rounds, load average {os.getloadavg()[0]:.1f}, "
          f"maxOffsetsPerTrigger {args.max_offsets_per_trigger or 'unset'}:")
    print(f"  raw confluent-kafka consumer: {raw:,.0f} events/s")
    for name, rate in medians.items():
        if name != "raw":
            print(f"  {name}: {rate:,.0f} events/s, ratio {rate / raw:.3f}")


if __name__ == "__main__":
    main()
