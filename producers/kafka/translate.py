"""A described Kafka group as monitor events (pure): description in, events out.

For every group (system "kafka", key = group): one heartbeat per member (client_id = member id,
address = client host, topics = subscription, strategy = the group's assignor, owned = the
member's assignment, group_instance_id, generation when the subscription carries it), one route
per topic (`partitions`), and an unregister for each member gone since the previous poll.

A classic group comes as DescribeGroups gives it (kafka-python 3 dicts or 2.x tuples,
`translate_group`). A KIP-848 consumer group comes as ConsumerGroupDescribe gives it
(`translate_consumer_group`): each heartbeat adds the group type, the member's target assignment
and the member, group and target-assignment epochs; `owned` is then the member's current
assignment (with the partitions it still has to revoke) and `strategy` the broker's assignor.
A share group (KIP-932) comes as ShareGroupDescribe gives it (`translate_share_group`). A streams
group (KIP-1071, a Kafka Streams application run with `group.protocol=streams`) comes as
StreamsGroupDescribe gives it (`translate_streams_group`): the broker assigns it tasks, not
partitions, and a task is a queue of its subtopology's task space (`task_space`).

Some brokers answer DescribeGroups without members, or with members whose subscription and
assignment are empty (the embedded tansu broker does). The translation then says so in its
warnings, naming the group, and still reports the group's topics (from its committed offsets)
and their partition counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from producers import events
from producers.kafka.protocol import (
    ConsumerGroupDescription,
    ShareGroupDescription,
    StreamsGroupDescription,
)

KAFKA_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


@dataclass
class Translation:
    events: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    members: tuple[str, ...] = ()   # member ids seen, for the next poll's unregisters
    topics: tuple[str, ...] = ()
    group: str | None = None


def field_of(description, name: str, default=None):
    """A field of a kafka-python description: a dict in kafka-python 3, a namedtuple in 2.x."""
    if isinstance(description, Mapping):
        return description.get(name, default)
    return getattr(description, name, default)


def _subscription(metadata) -> tuple[list[str], int | None]:
    """(topics, generation) from a decoded subscription: kafka-python 3 dicts or 2.x tuples."""
    if not metadata or isinstance(metadata, bytes | str):
        return [], None
    topics = field_of(metadata, "topics")
    if topics is None:
        topics = field_of(metadata, "subscription") or []
    generation = field_of(metadata, "generation_id")
    return sorted(set(topics)), generation if isinstance(generation, int) else None


def _assignment(assignment) -> list[list]:
    if not assignment or isinstance(assignment, bytes | str):
        return []
    parts = field_of(assignment, "assigned_partitions")
    if parts is None:
        parts = field_of(assignment, "assignment") or []
    owned = set()
    for entry in parts:
        if isinstance(entry, Mapping):
            topic, partitions = entry["topic"], entry["partitions"]
        else:
            topic, partitions = entry[0], entry[1]
        owned.update((topic, int(p)) for p in partitions)
    return [[t, p] for t, p in sorted(owned)]


def _heartbeat(group: str, member, assignor: str, ts_ms: int) -> dict | None:
    topics, generation = _subscription(field_of(member, "member_metadata"))
    if not topics:
        return None
    return events.heartbeat(
        ts_ms, group, field_of(member, "member_id"), topics, assignor, system="kafka",
        owned=_assignment(field_of(member, "member_assignment")),
        address=(field_of(member, "client_host") or "").lstrip("/") or None,
        group_instance_id=field_of(member, "group_instance_id") or None,
        generation=generation if generation is not None and generation >= 0 else None)


def translate_group(description, partitions: Mapping[str, int], ts_ms: int, *,
                    committed_topics: Iterable[str] = (),
                    previous_members: Iterable[str] = ()) -> Translation:
    """Events for one described group.

    >>> d = {"group_id": "g", "group_state": "Stable", "protocol_type": "consumer",
    ...      "protocol_data": "range", "members": [{"member_id": "m1", "client_host": "/10.0.0.1",
    ...      "member_metadata": {"topics": ["A"]},
    ...      "member_assignment": {"assigned_partitions": [{"topic": "A", "partitions": [1, 0]}]}}]}
    >>> [(e["type"], e.get("owned"), e.get("partitions")) for e in
    ...  translate_group(d, {"A": 2}, 1_700_000_000_000).events]
    [('heartbeat', [['A', 0], ['A', 1]], None), ('route', None, 2)]
    """
    group = field_of(description, "group_id") or field_of(description, "group")
    assignor = (field_of(description, "protocol_data") or field_of(description, "protocol") or "")
    members = list(field_of(description, "members") or [])
    out = Translation(group=group)
    beats = [_heartbeat(group, m, assignor, ts_ms) for m in members]
    unread = bool(members) and any(b is None for b in beats)
    if not members or unread:
        out.warnings.append(
            f"group {group}: the broker's DescribeGroups returned "
            + ("no members" if not members else "members without subscription or assignment")
            + "; reporting the group's topics and partition counts only")
    if unread:
        # A classic group is described with its members' subscriptions and assignments only
        # while it is Stable: mid-rebalance, or on a broker that never gives them, the members
        # are there but unreadable, and they stay as last reported (none is unregistered).
        beats = []
    elif members and assignor not in KAFKA_ASSIGNORS:
        out.warnings.append(f"group {group}: assignor {assignor!r} is not one of "
                            f"{', '.join(KAFKA_ASSIGNORS)}; members not reported")
        beats = []
    out.events.extend(b for b in beats if b is not None)
    topics = {t for m in members for t in _subscription(field_of(m, "member_metadata"))[0]}
    return _leavers_and_routes(out, topics | set(committed_topics), partitions, ts_ms,
                               previous_members, keep_previous=unread)


def translate_consumer_group(description: ConsumerGroupDescription,
                             partitions: Mapping[str, int], ts_ms: int, *,
                             previous_members: Iterable[str] = ()) -> Translation:
    """Events for one KIP-848 group as ConsumerGroupDescribe gives it: per member, its current
    assignment (`owned`), its target, and the epochs. Members that still speak the classic
    protocol inside it (a group being migrated) are described the same way by the broker."""
    beats = []
    for member in description.members:
        beat = _broker_assigned_heartbeat(description, member, "consumer", ts_ms)
        beat["target"] = [[t, p] for t, p in member.target_assignment]
        if member.instance_id:
            beat["group_instance_id"] = member.instance_id
        beats.append(beat)
    return _translation(description.group_id, beats, partitions, ts_ms, previous_members)


def translate_share_group(description: ShareGroupDescription,
                          partitions: Mapping[str, int], ts_ms: int, *,
                          previous_members: Iterable[str] = ()) -> Translation:
    """Events for one share group (KIP-932): members share partitions by design."""
    beats = [_broker_assigned_heartbeat(description, member, "share", ts_ms)
             for member in description.members]
    return _translation(description.group_id, beats, partitions, ts_ms, previous_members)


def task_space(subtopology_id: str) -> str:
    """The topic a streams group's tasks of one subtopology are events of: task 0_3 (subtopology
    "0", partition 3) is queue 3 of "subtopology 0". No Kafka topic has a space in its name, so
    it never meets a real topic.

    >>> task_space("0")
    'subtopology 0'
    """
    return f"subtopology {subtopology_id}"


def translate_streams_group(description: StreamsGroupDescription,
                            partitions: Mapping[str, int], ts_ms: int, *,
                            previous_members: Iterable[str] = (),
                            standby_replicas: int | None = None) -> Translation:
    """Events for one streams group as StreamsGroupDescribe gives it: per member (a stream
    thread), its process, its current active tasks (`owned`), standby and warm-up tasks, its
    target active tasks and the epochs; a route per subtopology whose task count the topology
    gives (its largest source topic). An active task is processed by one member only, as a
    partition is in a consumer group; a standby or warm-up task only copies its state.
    `standby_replicas`: the group's num.standby.replicas (None: unknown), the copies each task
    of a subtopology with state is to have."""
    spaces = {task_space(sub.subtopology_id): _task_count(sub, partitions)
              for sub in description.subtopologies or ()}
    wanted = None if standby_replicas is None or description.subtopologies is None else {
        task_space(sub.subtopology_id): standby_replicas if sub.changelog_topics else 0
        for sub in description.subtopologies}
    beats = []
    for member in description.members:
        current, target = _tasks(member.assignment), _tasks(member.target_assignment)
        topics = sorted(set(spaces) | {t for t, _ in current["owned"]}
                        | {t for t, _ in target["owned"]})
        beats.append(events.heartbeat(
            ts_ms, description.group_id, member.member_id, topics, description.assignor_name,
            system="kafka", group_type="streams", **current, target=target["owned"],
            process_id=member.process_id or None, group_state=description.group_state,
            standby_replicas=wanted,
            member_epoch=member.member_epoch, group_epoch=description.group_epoch,
            assignment_epoch=description.assignment_epoch,
            address=(member.client_host or "").lstrip("/") or None))
    counts = {space: count for space, count in spaces.items() if count is not None}
    out = _translation(description.group_id, beats, counts, ts_ms, previous_members)
    if description.subtopologies is None:
        out.warnings.append(
            f"group {description.group_id}: the broker has no configured topology for it "
            f"(state {description.group_state}: source or internal topics missing, or not "
            "initialized); its task counts are unknown")
    return out


def _tasks(assignment) -> dict[str, list[list]]:
    """A streams assignment as heartbeat fields: each task s_p as [task_space(s), p]."""
    return {field: [[task_space(s), p] for s, p in tasks] for field, tasks in (
        ("owned", assignment.active), ("standby", assignment.standby),
        ("warmup", assignment.warmup))}


def _task_count(subtopology, partitions: Mapping[str, int]) -> int | None:
    """A subtopology's tasks: as many as the partitions of its largest source topic (Kafka
    Streams makes one task per partition of co-partitioned inputs); None when one's count is
    unknown. A repartition topic's count is the cluster's, or before the topic exists the one
    the broker decided: Kafka 4.3.1 describes 0 for one it did not create itself (made
    beforehand, as a migration from the classic protocol leaves them), though it assigns its
    tasks."""
    counts = [partitions.get(topic) for topic in subtopology.source_topics]
    counts += [partitions.get(topic) or count or None
               for topic, count in subtopology.repartition_source_topics]
    if not counts or any(count is None for count in counts):
        return None
    return max(counts)


def translate_gone_group(group: str, ts_ms: int, previous_members: Iterable[str]) -> Translation:
    """Events for a group the cluster no longer has: an unregister for each member it had.

    >>> [(e["type"], e["client_id"]) for e in
    ...  translate_gone_group("g", 1_700_000_000_000, ["m2", "m1"]).events]
    [('unregister', 'm1'), ('unregister', 'm2')]
    """
    return _translation(group, [], {}, ts_ms, previous_members)


def _broker_assigned_heartbeat(description, member, group_type: str, ts_ms: int) -> dict:
    assigned = {t for t, _ in member.assignment}
    if group_type == "consumer":
        assigned |= {t for t, _ in member.target_assignment}
    return events.heartbeat(
        ts_ms, description.group_id, member.member_id,
        sorted(set(member.subscribed_topics) | assigned), description.assignor_name or "unknown",
        system="kafka", group_type=group_type, owned=[[t, p] for t, p in member.assignment],
        member_epoch=member.member_epoch, group_epoch=description.group_epoch,
        assignment_epoch=description.assignment_epoch,
        address=(member.client_host or "").lstrip("/") or None)


def _translation(group: str, beats: list[dict], partitions: Mapping[str, int], ts_ms: int,
                 previous_members: Iterable[str]) -> Translation:
    out = Translation(group=group, events=list(beats))
    return _leavers_and_routes(out, {t for b in beats for t in b["topics"]}, partitions, ts_ms,
                               previous_members)


def _leavers_and_routes(out: Translation, topics: Iterable[str], partitions: Mapping[str, int],
                        ts_ms: int, previous_members: Iterable[str], *,
                        keep_previous: bool = False) -> Translation:
    """After a group's heartbeats: an unregister for each member gone since the previous poll
    (none when the members could not be read, `keep_previous`), and a route per topic (a
    warning for a topic the cluster metadata lacks)."""
    group = out.group
    out.members = (tuple(previous_members) if keep_previous else
                   tuple(e["client_id"] for e in out.events if e["type"] == "heartbeat"))
    gone = sorted(set(previous_members) - set(out.members))
    out.events.extend(events.unregister(ts_ms, group, m, system="kafka") for m in gone)
    out.topics = tuple(sorted(topics))
    for topic in out.topics:
        if topic in partitions:
            out.events.append(events.route(ts_ms, topic, system="kafka", group=group,
                                           partitions=partitions[topic]))
        else:
            out.warnings.append(f"group {group}: topic {topic} is not in the cluster metadata")
    return out
