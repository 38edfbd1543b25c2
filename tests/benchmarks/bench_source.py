"""Read rate of the embedded Spark Kafka reader against a plain confluent-kafka consumer.

    python -m tests.benchmarks.bench_source [--events 200000] [--partitions 4]
        [--value-bytes 200] [--max-offsets-per-trigger 50000] [--rounds 3]

Both read the same topic in the same run: first the plain consumer (the baseline), then a
Spark count query over format("rebalance_kafka") with Trigger.AvailableNow, after a small
warm-up query so JVM and Python-worker start-up are not counted. The broker is the embedded
one unless KAFKA_BOOTSTRAP_SERVERS is set. Each round reads the whole topic both ways (the
Spark query on a fresh checkpoint); medians are reported. "sustained" divides by the summed
micro-batch durations, "wall" by the whole query run including its start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import nullcontext

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from streaming.embedded_broker import EmbeddedBroker, create_topic
from streaming.spark.source_embedded import SOURCE_NAME, register
from tests.benchmarks.machine import describe_machine


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
             .config("spark.sql.adaptive.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def spark_count(spark, bootstrap: str, topic: str, max_per_trigger: int | None):
    counted = []
    reader = (spark.readStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
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
    explicit = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    with nullcontext(explicit) if explicit else EmbeddedBroker() as broker:
        bootstrap = explicit or broker.bootstrap_servers
        suffix = int(time.time())
        topic, warmup = f"bench.source.{suffix}", f"bench.warmup.{suffix}"
        create_topic(bootstrap, topic, args.partitions)
        create_topic(bootstrap, warmup, args.partitions)
        produce(bootstrap, warmup, 2_000, args.value_bytes)
        produce_s = produce(bootstrap, topic, args.events, args.value_bytes)
        print(f"broker: {'KAFKA_BOOTSTRAP_SERVERS' if explicit else 'embedded tansu'}; "
              f"{args.events} events of {args.value_bytes} B in {args.partitions} partitions, "
              f"produced in {produce_s:.2f}s")
        spark = spark_session()
        spark_count(spark, bootstrap, warmup, None)
        raw_rates, wall_rates, batch_rates = [], [], []
        for round_number in range(1, args.rounds + 1):
            raw_s = raw_read(bootstrap, topic, args.partitions, args.events)
            counted, spark_s, batch_ms = spark_count(
                spark, bootstrap, topic, args.max_offsets_per_trigger)
            if counted != args.events:
                raise AssertionError(f"the Spark reader counted {counted}, not {args.events}")
            raw_rates.append(args.events / raw_s)
            wall_rates.append(counted / spark_s)
            batch_rates.append(counted / (sum(batch_ms) / 1000))
            print(f"round {round_number}: raw {raw_rates[-1]:,.0f}/s; spark wall "
                  f"{wall_rates[-1]:,.0f}/s, sustained {batch_rates[-1]:,.0f}/s "
                  f"(batch ms {batch_ms})")
        raw, wall, sustained = map(statistics.median, (raw_rates, wall_rates, batch_rates))
        print(f"median of {args.rounds} rounds, load average {os.getloadavg()[0]:.1f}:")
        print(f"  raw confluent-kafka consumer:        {raw:,.0f} events/s")
        print(f"  spark reader, wall incl. query start: {wall:,.0f} events/s, ratio {wall / raw:.3f}")
        print(f"  spark reader, sustained (batches):    {sustained:,.0f} events/s, "
              f"ratio {sustained / raw:.3f}")
        print(f"  (rebalance_kafka, Trigger.AvailableNow, maxOffsetsPerTrigger "
              f"{args.max_offsets_per_trigger or 'unset'})")
        spark.stop()


if __name__ == "__main__":
    main()
