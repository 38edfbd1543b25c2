"""Allocation engine: RocketMQ strategies and Kafka assignors, bit-exact with the Java clients.

The Kafka assignors live in the `kafka` subpackage and are imported from there
(`streaming.core.allocation.kafka`), not here, so this package imports without them.
"""

from streaming.core.allocation.group import (
    GroupAllocation,
    InvalidAllocationInput,
    allocate_group,
    allocate_group_topics,
    params_problem,
)
from streaming.core.allocation.rocketmq import (
    STRATEGIES,
    AllocationError,
    Queue,
    allocate,
    sort_client_ids,
    sort_queues,
)

__all__ = [
    "STRATEGIES",
    "AllocationError",
    "GroupAllocation",
    "InvalidAllocationInput",
    "Queue",
    "allocate",
    "allocate_group",
    "allocate_group_topics",
    "params_problem",
    "sort_client_ids",
    "sort_queues",
]
