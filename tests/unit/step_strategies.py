"""The hypothesis strategies of the step property tests (test_step_properties.py) and of the
tests built on them (group detail, shard state, refresh deferral and fold), and the config
they all step with: events of one group ("g") of either system, and whole scenarios cut into
batches."""

from dataclasses import replace

from hypothesis import strategies as st

from streaming.core.step import StepConfig
from tests.unit.state_helpers import T0, parsed

CONFIG = StepConfig(session_timeout_ms=1_000, kafka_session_timeout_ms=1_000,
                    reorder_window_ms=300)
# Instants of 100 ms: most scenarios then have several events in one instant.
CONFIGS = (CONFIG, replace(CONFIG, instant_ms=100))
CLIENTS = ("c1", "c2", "c3", "c4")
TOPICS = ("T1", "T2")


@st.composite
def rocketmq_event(draw, ts: int) -> dict:
    kind = draw(st.sampled_from(["heartbeat"] * 6 + ["unregister", "route", "route"]))
    if kind == "route":
        brokers = draw(st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 5),
                                       min_size=1))
        route = {"type": "route", "ts": ts, "group": "g", "topic": draw(st.sampled_from(TOPICS))}
        if draw(st.integers(0, 3)) == 0:   # the same queues, listed one by one
            return {**route, "queues": [[b, q] for b, n in brokers.items() for q in range(n)]}
        return {**route, "brokers": brokers}
    client = draw(st.sampled_from(CLIENTS))
    address = draw(st.sampled_from([None, None, "h1:1", "h2:1"]))
    if kind == "unregister":
        return {"type": "unregister", "ts": ts, "group": "g", "client_id": client}
    event = {"type": "heartbeat", "ts": ts, "group": "g", "client_id": client,
             "topics": draw(st.lists(st.sampled_from(TOPICS), max_size=2, unique=True)),
             "strategy": draw(st.sampled_from(["AVG", "AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"])),
             "broker": draw(st.sampled_from([None, "a", "b"]))}
    if address:
        event["address"] = address
    if draw(st.integers(0, 4)) == 0:
        event["view"] = {"queues": {"T1": [["a", q] for q in range(draw(st.integers(0, 4)))]}}
    if draw(st.integers(0, 5)) == 0:
        event["owned"] = [["T1", "a", q] for q in draw(st.lists(st.integers(0, 4), max_size=3))]
    if draw(st.integers(0, 5)) == 0:       # a POP reader: shares queues by design
        event["shared"] = True
        event.setdefault("owned", [["T1", "a", q] for q in range(draw(st.integers(0, 3)))])
    elif draw(st.integers(0, 9)) == 0:     # a 5.5 lite consumer: its parent topic's reader
        event["shared"] = True
        event["lite_topics"] = draw(st.lists(st.sampled_from(["L1", "L2", "L3"]), unique=True))
    if "owned" in event and draw(st.booleans()):   # holdings asked earlier (observe-rocketmq)
        event["owned_ts"] = ts - draw(st.sampled_from([0, 100, 2_000]))
    if draw(st.integers(0, 7)) == 0:       # clientRebalance=false: what each broker answers
        event["broker_assignments"] = {
            broker: {"T1": [[broker, q] for q in draw(st.lists(st.integers(0, 4), max_size=2))]
                     if draw(st.integers(0, 4)) else None}
            for broker in draw(st.lists(st.sampled_from(["a", "b"]), min_size=1, unique=True))}
    if draw(st.integers(0, 9)) == 0:
        event["message_model"] = "BROADCASTING"
    if event["strategy"] == "CONSISTENT_HASH" and draw(st.booleans()):
        event["strategy_params"] = {"virtual_nodes": draw(st.sampled_from([3, 10]))}
    basis = draw(st.sampled_from([None] * 5 + ["assumed", "assumed", "inferred", "named"]))
    if basis == "inferred":
        event["strategy_inferred"] = event["strategy"]
    elif basis:                             # a Go client's strategy, guessed or named
        event[f"strategy_{basis}"] = True
        if basis == "assumed" and draw(st.booleans()):
            event["strategy_candidates"] = draw(st.lists(
                st.sampled_from(["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"]), unique=True))
    return event


@st.composite
def kafka_event(draw, ts: int) -> dict:
    client = draw(st.sampled_from(CLIENTS))
    kind = draw(st.sampled_from(["heartbeat"] * 5 + ["unregister", "route"]))
    if kind == "route":
        return {"type": "route", "ts": ts, "group": "g", "system": "kafka",
                "topic": draw(st.sampled_from(TOPICS)), "partitions": draw(st.integers(0, 6))}
    if kind == "unregister":
        return {"type": "unregister", "ts": ts, "group": "g", "system": "kafka",
                "client_id": client}
    event = {"type": "heartbeat", "ts": ts, "group": "g", "system": "kafka", "client_id": client,
             "topics": draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=2,
                                     unique=True)),
             "strategy": draw(st.sampled_from(["range", "roundrobin", "sticky",
                                               "cooperative-sticky"])),
             "generation": draw(st.sampled_from([-1, 1, 2]))}
    if draw(st.booleans()):
        event["owned"] = [["T1", p] for p in draw(st.lists(st.integers(0, 5), max_size=3))]
    if draw(st.integers(0, 4)) == 0:
        event["group_instance_id"] = f"pod-{client}"
    if draw(st.integers(0, 2)) == 0:  # a KIP-848, share or streams member: target and epochs
        epoch = draw(st.integers(1, 3))
        event.update(group_type=draw(st.sampled_from(["consumer", "consumer", "share",
                                                      "streams"])),
                     strategy=draw(st.sampled_from(["uniform", "range", "simple", "sticky"])),
                     target=[["T1", p] for p in draw(st.lists(st.integers(0, 5), max_size=3))],
                     member_epoch=epoch - draw(st.integers(0, 1)), group_epoch=epoch,
                     assignment_epoch=epoch)
        if event["group_type"] == "streams":
            event["group_state"] = draw(st.sampled_from(["Stable", "Reconciling", "NotReady"]))
            event["process_id"] = draw(st.sampled_from(["p1", "p2"]))   # threads share one
            if draw(st.booleans()):
                event["standby_replicas"] = {"T1": draw(st.integers(0, 2))}
            for copies in ("standby", "warmup"):
                if draw(st.booleans()):
                    event[copies] = [["T1", p] for p in draw(st.lists(st.integers(0, 5),
                                                                      max_size=2))]
    return event


@st.composite
def alive_event(draw, earlier: list[dict], like: dict) -> dict:
    """An `alive` at `like`'s time and system: the members heard so far (through the broker
    drawn, if any), as an observer lists them; sometimes one dropped or one never heard."""
    broker = draw(st.sampled_from([None, "a", "b"])) if "system" not in like else None
    members = sorted({(e["client_id"], e.get("address")) for e in earlier
                      if e["type"] == "heartbeat" and (broker is None or e.get("broker") == broker)},
                     key=repr)
    change = draw(st.integers(0, 5))
    if change == 0 and members:
        members.pop(draw(st.integers(0, len(members) - 1)))
    elif change == 1:
        members.append(("c9", None))
    event = {"type": "alive", "ts": like["ts"], "group": "g",
             "members": [[c, a] if a else [c] for c, a in members]}
    if "system" in like:
        event["system"] = like["system"]
    if broker is not None:
        event["broker"] = broker
    return event


@st.composite
def scenario(draw, reordered: bool = True):
    """Events in arrival order: nominal times never go back; each event's ts may lag its nominal
    time by less than the reorder window (if reordered); some events are delivered twice in a
    row."""
    make = kafka_event if draw(st.integers(0, 3)) == 0 else rocketmq_event
    nominal, raws = T0, []
    for _ in range(draw(st.integers(1, 40))):
        nominal += draw(st.sampled_from([0, 0, 5, 50, 200, 700, 1_500]))
        lag = draw(st.sampled_from([0, 0, 0, 10, 120, 250])) if reordered else 0
        event = draw(make(nominal - lag))
        if draw(st.integers(0, 5)) == 0:
            event = draw(alive_event(raws, event))
        raws.append(event)
        if draw(st.integers(0, 9)) == 0:
            raws.append(dict(event))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(raws) - 1)), max_size=6)))
    final_watermark = draw(st.sampled_from([None, nominal, nominal + 900, nominal + 5_000]))
    return raws, cuts, final_watermark


def batches_of(case, watermark_shifts):
    """A scenario's events cut into its batches, each with its watermark: a shift from the
    batch's newest event time, or None."""
    raws, cuts, _ = case
    items = parsed(raws)
    bounds = [0, *cuts, len(items)]
    for index, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        batch = items[start:end]
        shift = watermark_shifts[index]
        yield batch, None if shift is None or not batch else max(e.ts for e, _ in batch) + shift


@st.composite
def steady_group(draw, reordered: bool = True, instant_ms: int = 1):
    """Events of one group in arrival order, most of them refreshes (a client's or a route's
    last facts again), the rest as step_strategies draws them; the cuts into batches, each
    batch's watermark (at most the next batch's oldest event, or none) and a final watermark."""
    make = kafka_event if draw(st.integers(0, 3)) == 0 else rocketmq_event
    nominal, raws, last_facts = T0, [], {}
    for _ in range(draw(st.integers(1, 60))):
        nominal += draw(st.sampled_from([0, 0, 5, 50, 100, 200, 400]))
        ts = nominal - (draw(st.sampled_from([0, 0, 0, 10, 120, 250])) if reordered else 0)
        restated = draw(st.integers(0, 9)) if last_facts else 9
        if restated < 2:      # an observer's alive: every member heard through one broker
            event = _alive(draw, last_facts, ts, make is kafka_event)
        elif restated < 7:
            event = {**draw(st.sampled_from(sorted(last_facts.values(), key=str))), "ts": ts}
        else:
            event = draw(make(ts))
            if event["type"] == "heartbeat":
                last_facts[(event["client_id"], event.get("address"), event.get("broker"))] = event
            elif event["type"] == "route":
                last_facts[event["topic"]] = event
        raws.append(event)
    items = parsed(raws)
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(items) - 1)), max_size=12)))
    if not reordered:   # no cut inside one instant (step's documented condition)
        cuts = [c for c in cuts if c < len(items)
                and items[c][0].ts // instant_ms > items[c - 1][0].ts // instant_ms]
    bounds = [0, *cuts, len(items)]
    batches = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        later = [event.ts for event, _ in items[end:]]
        behind = draw(st.sampled_from([None, 1, 1, 200, 900]))
        watermark = None if behind is None or not later else min(later) - behind
        batches.append((items[start:end], watermark))
    final = draw(st.sampled_from([None, nominal, nominal + 900, nominal + 5_000]))
    batches[-1] = (batches[-1][0], final)
    return batches


def _alive(draw, last_facts: dict, ts: int, kafka: bool) -> dict:
    heard = [e for e in last_facts.values() if e["type"] == "heartbeat"]
    broker = draw(st.sampled_from(sorted({e.get("broker") for e in heard}, key=str) or [None]))
    members = sorted({(e["client_id"], e.get("address")) for e in heard
                      if broker is None or e.get("broker") == broker}, key=repr)
    if members and draw(st.integers(0, 5)) == 0:      # one left out: not the view's alive
        members.pop(draw(st.integers(0, len(members) - 1)))
    event = {"type": "alive", "ts": ts, "group": "g",
             "members": [[c, a] if a else [c] for c, a in members]}
    if kafka:
        event["system"] = "kafka"
    return {**event, "broker": broker} if broker else event
