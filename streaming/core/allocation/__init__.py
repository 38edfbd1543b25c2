"""Allocation engine: RocketMQ strategies and Kafka assignors, bit-exact with the Java clients
(and, as the GO_* RocketMQ strategies, with the Go client).

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
from streaming.core.allocation.rocketmq_go import GO_STRATEGIES, GoPanic

# Merged here rather than in rocketmq.py: rocketmq_go subclasses rocketmq's classes, so
# rocketmq importing it back would be a cycle. Every import of a submodule runs this first.
STRATEGIES.update(GO_STRATEGIES)

__all__ = [
    "STRATEGIES",
    "AllocationError",
    "GoPanic",
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
