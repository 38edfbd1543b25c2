"""Builders for contract events, shared by the state-machine tests."""

from __future__ import annotations

from dataclasses import replace

from streaming.core.contract import FindingRecord, GroupMetrics, StepOutput
from streaming.core.state.codec import decode, encode
from streaming.core.state.events import parse_event
from streaming.core.step import StepConfig, step

T0 = 1_700_000_000_000


def hb(client_id: str, topics, ts: int = T0, strategy: str = "AVG", group: str = "g",
       **extra) -> dict:
    return {"type": "heartbeat", "ts": ts, "group": group, "client_id": client_id,
            "topics": list(topics), "strategy": strategy, **extra}


def route(topic: str, ts: int = T0, group: str = "g", **spec) -> dict:
    return {"type": "route", "ts": ts, "group": group, "topic": topic, **spec}


def group_metrics(group: str = "g", system: str = "rocketmq", **values) -> GroupMetrics:
    """A GroupMetrics with every value zero (or empty) but those given."""
    zero = dict(event_time_ms=0, members=0, queues={}, double_assigned={}, orphaned={},
                conflict_since_ms=None, skew_ratio=1.0, idle_clients=0,
                subscription_inconsistent=0, strategy_inconsistent=0, client_id_collisions=0,
                view_divergent_clients=0, broker_view_divergent=0,
                allocation_mismatch_clients=0, rebalances_total=0, queue_moves_total=0,
                late_events_total=0, client_queues={})
    return GroupMetrics(system=system, group=group, **{**zero, **values})


def without_view(blob: bytes | None) -> bytes | None:
    """The blob with its stored view dropped: a step from it replays the window."""
    if blob is None:
        return None
    return encode(replace(decode(blob), view=None))


def queues(broker: str, ids) -> list:
    return [[broker, i] for i in ids]


def parsed(raws, first_offset: int = 0) -> list:
    """[(Event, offset)] with consecutive offsets; every raw must be valid."""
    out = []
    for offset, raw in enumerate(raws, start=first_offset):
        events = parse_event(raw)
        assert isinstance(events, list), events
        out.extend((event, offset) for event in events)
    return out


class Run:
    """Feeds batches through step() with encode/decode in between, as the Spark job does."""

    def __init__(self, config: StepConfig | None = None):
        self.config = config or StepConfig()
        self.blob: bytes | None = None
        self.offset = 0
        self.findings: list[FindingRecord] = []
        self.out: StepOutput | None = None

    def batch(self, raws, watermark_ms: int | None = None) -> StepOutput:
        items = parsed(raws, self.offset)
        self.offset += len(raws)
        self.out = step(self.blob, items, watermark_ms=watermark_ms, config=self.config)
        self.blob = self.out.blob
        self.findings.extend(self.out.findings)
        return self.out

    @property
    def metrics(self) -> GroupMetrics | None:
        return self.out.metrics


def open_findings(out: StepOutput | None, run: Run) -> dict[tuple, FindingRecord]:
    """The currently open findings, replayed from every started / ended record so far."""
    current: dict[tuple, FindingRecord] = {}
    for rec in run.findings:
        key = rec.identity
        if rec.status == "started":
            current[key] = rec
        else:
            current.pop(key, None)
    return current


def kinds(run: Run) -> dict[str, list]:
    """kind -> sorted [(topic, queue, clients)] of the open findings."""
    out: dict[str, list] = {}
    for kind, topic, queue, clients, _address, brokers in open_findings(run.out, run):
        out.setdefault(kind, []).append((topic, queue or (), clients) if not brokers
                                        else (brokers, clients))
    return {k: sorted(v) for k, v in out.items()}
