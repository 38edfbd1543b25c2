"""Batches of raw records of several groups, as a shard's state function receives them: the
strategy that the shard-state tests and the known-stems twin share."""

import json

from hypothesis import strategies as st

from streaming.core.contract import GroupKey
from streaming.spark.parse import UNROUTABLE_KEY
from tests.unit.state_helpers import T0
from tests.unit.step_strategies import kafka_event, rocketmq_event

KEYS = [GroupKey("rocketmq", "g"), GroupKey("kafka", "g"), GroupKey("rocketmq", "h"),
        GroupKey("kafka", "k")]
UNROUTABLE = GroupKey(UNROUTABLE_KEY, UNROUTABLE_KEY)


@st.composite
def fleet_batches(draw):
    """Batches of raw records (key, bytes) of several groups in arrival order, each batch with
    its watermark (non-decreasing; None before the first); batches may be empty."""
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True))
    nominal, records, heartbeats = T0, [], {}
    for _ in range(draw(st.integers(1, 50))):
        nominal += draw(st.sampled_from([0, 5, 50, 200, 700, 1_500]))
        key = draw(st.sampled_from(keys))
        lag = draw(st.sampled_from([0, 0, 10, 250]))
        if key in heartbeats and draw(st.booleans()):   # a refresh: a client's facts again
            event = {**draw(st.sampled_from(sorted(heartbeats[key].values(), key=str))),
                     "ts": nominal - lag}
        else:
            event = draw((kafka_event if key.system == "kafka" else rocketmq_event)(nominal - lag))
            event["group"] = key.group
            if event["type"] == "heartbeat":
                client = (event["client_id"], event.get("address"))
                heartbeats.setdefault(key, {})[client] = event
        choice = draw(st.integers(0, 14))
        if choice == 0:     # valid envelope, invalid event: a dead letter under the group's key
            event = {"type": "heartbeat", "ts": nominal, "group": key.group, "system": key.system}
        records.append((key, json.dumps(event).encode()))
        if choice == 1:
            records.append((UNROUTABLE, b"{not json"))
    cuts = sorted(draw(st.sets(st.integers(0, len(records)), max_size=8)))
    bounds = [0, *cuts, len(records)]
    batches, watermark = [], None
    for start, end in zip(bounds, bounds[1:], strict=False):
        if draw(st.booleans()):
            watermark = max(watermark or T0, nominal - draw(st.sampled_from([5_000, 900, 0]))
                            + draw(st.sampled_from([0, 2_000, 10_000])))
        batches.append((records[start:end], watermark))
    return batches


# Kafka timestamps of the records: no event here is stamped ahead of its arrival.
ARRIVAL_MS = 4_000_000_000_000
