"""The admin clients observe-kafka asks a Kafka cluster with, built from one set of settings.

    admin = kafka_python_admin("kafka:9092", timeout_s=10.0)     # groups: list, describe, offsets
    metadata = confluent_admin("kafka:9092", timeout_s=10.0)      # topics' partition counts

kafka-python's KafkaAdminClient decodes each classic member's subscription and assignment
(DescribeGroups), and here also describes KIP-848 consumer groups, share groups and KIP-1071
streams groups (producers/kafka/protocol.py). confluent-kafka's AdminClient reads the cluster's
topics.
Both reconnect after an outage within MAX_RECONNECT_BACKOFF_S, and every request of kafka-python's
lasts at most the timeout, connecting included.
"""

from __future__ import annotations

import re

from producers.kafka import protocol
from streaming.common.kafka_options import KafkaClientOptions, for_kafka_python

# Reconnect attempts back off up to this, so the first poll after an outage finds the
# connection up (the clients' defaults, 30 s and 10 s, would cost several polls).
MAX_RECONNECT_BACKOFF_S = 2.0
NO_OPTIONS = KafkaClientOptions()


def _admin_class():
    from kafka.admin import KafkaAdminClient

    class TolerantAdmin(KafkaAdminClient):
        """kafka-python 3 raises on authorized-operation bits it does not know (tansu sends
        them); the observer does not need them. Its connection-setup timeouts (10 s growing to
        30 s by default) are accepted as settings, so a poll in an outage lasts --timeout-seconds."""

        DEFAULT_CONFIG = {"socket_connection_setup_timeout_ms": 10_000,
                          "socket_connection_setup_timeout_max_ms": 30_000,
                          **KafkaAdminClient.DEFAULT_CONFIG}

        # A private method, overridden because no public setting avoids it: describe_groups
        # asks for the authorized operations whatever its include_authorized_operations says
        # (kafka-python 3.0), and decodes them with this method, which raises on unknown bits.
        def _process_acl_operations(self, obj):
            try:
                return super()._process_acl_operations(obj)
            except ValueError:
                obj.pop("authorized_operations", None)
                return obj

        def describe_consumer_groups(self, group_ids):
            return protocol.describe_consumer_groups(self, group_ids, self._timeout_s())

        def describe_share_groups(self, group_ids):
            return protocol.describe_share_groups(self, group_ids, self._timeout_s())

        def describe_streams_groups(self, group_ids):
            return protocol.describe_streams_groups(self, group_ids, self._timeout_s())

        def unsupported_group_types(self) -> tuple[str, ...]:
            return protocol.unsupported_group_types(self)

        def _timeout_s(self) -> float:
            return self.config["request_timeout_ms"] / 1000

    return TolerantAdmin


def kafka_python_admin(bootstrap_servers: str, timeout_s: float,
                       options: KafkaClientOptions = NO_OPTIONS):
    ms = int(timeout_s * 1000)
    return _admin_class()(bootstrap_servers=bootstrap_servers, **for_kafka_python(options),
                          request_timeout_ms=ms,
                          bootstrap_timeout_ms=ms, socket_connection_setup_timeout_ms=ms,
                          socket_connection_setup_timeout_max_ms=ms,
                          reconnect_backoff_max_ms=int(MAX_RECONNECT_BACKOFF_S * 1000))


def confluent_admin(bootstrap_servers: str, timeout_s: float,
                    options: KafkaClientOptions = NO_OPTIONS):
    from confluent_kafka.admin import AdminClient

    # Failures are raised to the poll, counted and logged there: not librdkafka's own log lines.
    return AdminClient({**options.for_librdkafka(),
                        "bootstrap.servers": bootstrap_servers, "log_level": 0,
                        "reconnect.backoff.max.ms": int(MAX_RECONNECT_BACKOFF_S * 1000)})


def described_error(error) -> tuple[str, str]:
    """kafka-python's per-group error, "[Error 30] GroupAuthorizationFailedError: msg", as
    (name, message).

    >>> described_error("[Error 30] GroupAuthorizationFailedError: not allowed")
    ('GroupAuthorizationFailedError', 'not allowed')
    """
    match = re.match(r"^(?:\[Error -?\d+\] )?(\w+)(?:: ?(.*))?$", str(error), re.DOTALL)
    if match is None:
        return "describe_error", str(error)
    return match.group(1), match.group(2) or ""
