"""A group's metrics (docs/metrics.md) from its state and its findings: what /metrics shows of
it, counted from the findings streaming.core.findings detects."""

from __future__ import annotations

from typing import Any

from streaming.core.contract import BROKER_ASSIGNED, GroupMetrics
from streaming.core.findings import (
    CONFLICT_KINDS,
    GroupFindings,
    active_members,
    group_type,
    wanted_copies,
)
from streaming.core.state.group import GroupState


def group_metrics(state: GroupState, result: GroupFindings) -> GroupMetrics:
    """The group's metrics (docs/metrics.md) from its state and findings."""
    conflicts = [state.since[f.identity] for f in result.findings
                 if f.kind in CONFLICT_KINDS and f.identity in state.since]
    client_queues: dict[str, int] = {}
    for (client_id, _), load in sorted(result.loads.items()):
        client_queues[client_id] = client_queues.get(client_id, 0) + load
    return GroupMetrics(
        **_common_metrics(state, result, conflicts, client_queues), **_assignment_metrics(state, result))


def _assignment_metrics(state: GroupState, result: GroupFindings) -> dict[str, Any]:
    kind = group_type(state)
    out = {"group_type": kind, "assignor": state.assignor or "",
           "assignor_changes_total": state.assignor_changes,
           "share_readers": dict(result.share_readers)}
    protocols = [m.protocol for m in state.members.values() if m.protocol is not None]
    if kind not in BROKER_ASSIGNED:
        return out
    pending = [state.since[f.identity] for f in result.findings
               if f.kind == "handoff_pending" and f.identity in state.since]
    epochs = [p.group_epoch for p in protocols if p.group_epoch is not None]
    targets = [p.assignment_epoch for p in protocols if p.assignment_epoch is not None]
    return {**out, "reconciling_members": result.count("handoff_pending"),
            "streams_not_ready": min(1, result.count("streams_not_ready")),
            **_standby_counts(state, result, kind),
            "handoff_since_ms": min(pending) if pending else None,
            "max_epoch_lag": max((p.epoch_lag for p in protocols), default=0),
            "group_epoch": max(epochs) if epochs else None,
            "assignment_epoch": max(targets) if targets else None,
            "target_skew_ratio": result.target_skew_ratio,
            "target_unassigned": {t: result.count("target_unassigned", t) for t in result.queues}
            if kind != "share" else {},
            "share_readers": dict(result.share_readers)}


def _standby_counts(state: GroupState, result: GroupFindings,
                    kind: str) -> dict[str, dict[str, int]]:
    """A streams group's tasks in each finding about its standby copies, by task space (the
    GroupMetrics fields named as the findings). Copies missing are counted only where the
    copies wanted are known: unknown is no series, not 0."""
    if kind != "streams":
        return {"standby_with_active": {}, "standby_missing": {}}
    judged = wanted_copies(active_members(state))
    return {"standby_with_active": {t: result.count("standby_with_active", t)
                                    for t in result.queues},
            "standby_missing": {t: result.count("standby_missing", t) for t in result.queues
                                if t in judged}}


def _common_metrics(state: GroupState, result: GroupFindings, conflicts: list[int],
                    client_queues: dict[str, int]) -> dict[str, Any]:
    return dict(
        system=state.system, group=state.group, event_time_ms=state.clock,
        members=len(state.members), queues=dict(result.queues),
        double_assigned={t: result.count("double_assignment", t) for t in result.queues},
        orphaned={t: result.count("orphaned_queue", t) for t in result.queues},
        conflict_since_ms=min(conflicts) if conflicts else None,
        skew_ratio=result.skew_ratio,
        idle_clients=result.count("idle_client"),
        subscription_inconsistent=min(1, result.count("subscription_inconsistent")),
        strategy_inconsistent=min(1, result.count("strategy_inconsistent")),
        client_id_collisions=result.count("client_id_collision"),
        view_divergent_clients=result.count("view_divergent"),
        broker_view_divergent=min(1, result.count("broker_view_divergent")),
        allocation_mismatch_clients=result.count("allocation_mismatch"),
        holdings_pending_clients=result.count("holdings_pending"),
        strategy_unknown_clients=result.count("strategy_unknown"),
        broker_split={t: result.count("broker_split_view", t) for t in result.queues}
        if state.system == "rocketmq" else {},
        rebalances_total=state.rebalances, queue_moves_total=state.queue_moves,
        late_events_total=state.late_events, client_queues=client_queues,
        alive_unknown_members_total=state.alive_unknown,
    )
