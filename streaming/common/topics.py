"""Creating a topic and waiting until its metadata shows every partition: the job's demo, the
simulator's --create-topic and the tests do it the same way."""

from __future__ import annotations

import time


def create_topic(
    bootstrap_servers: str, name: str, partitions: int = 1, timeout_s: float = 15.0,
    config: dict[str, str] | None = None, client_settings: dict[str, str] | None = None,
) -> None:
    """Create a topic with `partitions` partitions and wait until metadata shows all of them.

    An existing topic with the same partition count is accepted; a different count is an error.
    `client_settings`: librdkafka settings of the admin client (security, for example).
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    # Its failures are the caller's to report (an exception); librdkafka's lines are not needed.
    admin = AdminClient({"log_level": 0, **(client_settings or {}),
                         "bootstrap.servers": bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        request_timeout=timeout_s,
    )
    try:
        futures[name].result(timeout=timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        topic = admin.list_topics(topic=name, timeout=timeout_s).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) > 0:
            if len(topic.partitions) != partitions:
                raise ValueError(
                    f"topic {name} exists with {len(topic.partitions)} partitions, "
                    f"not {partitions}"
                )
            return
        time.sleep(0.05)  # poll interval while metadata propagates, bounded by deadline
    raise TimeoutError(f"topic {name} did not appear in metadata within {timeout_s}s")
