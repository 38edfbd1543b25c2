"""`rebalance-monitor allocate`: preview an allocation, or run conformance cases in batch.

Interactive (like `mqadmin allocateMQ`, but faithful to the client code):

    rebalance-monitor allocate --strategy AVG --topic T:broker-a=4,broker-b=4 --clients c1,c2,c3

prints client -> queues per topic, totals, and the unassigned / doubly-assigned queues (a
duplicated client id in --clients is two processes sharing one id). Batch:

    rebalance-monitor allocate --cases tests/data/conformance/rocketmq_allocate.jsonl

reads cases in the conformance format and writes them back with `results` (+ `errors`) or, for
Kafka cases (those with an `assignor`), `assignment` computed by this engine.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from streaming.common import option_values as values
from streaming.common.options import add_arguments as add_options
from streaming.common.options import option
from streaming.core.allocation import (
    STRATEGIES,
    GroupAllocation,
    InvalidAllocationInput,
    Queue,
    allocate_group,
    allocate_group_topics,
    sort_client_ids,
)
from streaming.core.allocation.javaorder import java_sorted


class CaseError(ValueError):
    """A batch line or interactive argument that cannot be run; the message says why."""


def main(args: AllocateOptions) -> int:
    if args.cases is not None:
        if args.strategy or args.topic or args.clients:
            print("allocate: --cases cannot be combined with the interactive options",
                  file=sys.stderr)
            return 2
        return run_batch(args.cases)
    try:
        print(render_interactive(args), end="")
    except CaseError as error:
        print(f"allocate: {error}", file=sys.stderr)
        return 2
    return 0


# ---------------------------------------------------------------- batch form


def run_batch(path: str) -> int:
    failures = 0
    handle = sys.stdin if path == "-" else None
    try:
        handle = handle or open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as error:
        print(f"allocate: cannot read {path}: {error}", file=sys.stderr)
        return 2
    try:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                sys.stdout.write(_dump(run_case(json.loads(line))) + "\n")
            except (CaseError, ValueError, KeyError, TypeError) as error:
                failures += 1
                print(f"allocate: line {number}: {_describe(error)}", file=sys.stderr)
            except Exception as error:  # noqa: BLE001 - one bad line must not end the batch
                failures += 1
                print(f"allocate: line {number}: cannot run this case "
                      f"({type(error).__name__}: {error})", file=sys.stderr)
    finally:
        if handle is not sys.stdin:
            handle.close()
    sys.stdout.flush()
    return 1 if failures else 0


def _describe(error: Exception) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"not JSON ({error.msg} at column {error.colno})"
    if isinstance(error, KeyError):
        return f"missing field {error.args[0]!r}"
    return str(error) or type(error).__name__


def _dump(case: dict) -> str:
    try:
        text = json.dumps(case, ensure_ascii=False, separators=(",", ":"))
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:  # lone surrogates cannot be written as UTF-8: escape them
        return json.dumps(case, ensure_ascii=True, separators=(",", ":"))


def run_case(case) -> dict:
    """The case with its expected fields replaced by this engine's answer."""
    if not isinstance(case, dict):
        raise CaseError("a case must be a JSON object")
    if "assignor" in case:
        return _with_fields(case, "assignment", {"assignment": _kafka_assignment(case)})
    if "strategy" in case:
        return _with_fields(case, "results", _rocketmq_fields(case))
    raise CaseError("a case needs a 'strategy' (RocketMQ) or an 'assignor' (Kafka) field")


def _with_fields(case: dict, anchor: str, fields: dict) -> dict:
    """Replace the expected fields in place (same key order); append them if absent."""
    stale = {anchor, "errors"} if anchor == "results" else {anchor}
    out: dict = {}
    for key, value in case.items():
        if key == anchor:
            out.update(fields)
        elif key not in stale:
            out[key] = value
    if anchor not in case:
        tags = out.pop("tags", None)
        out.update(fields)
        if tags is not None:
            out["tags"] = tags
    return out


def _queue_of(item) -> Queue:
    if not isinstance(item, dict):
        raise CaseError(f"a queue must be an object with topic, broker, queue_id: {item!r}")
    return (item["topic"], item["broker"], item["queue_id"])


def _rocketmq_fields(case: dict) -> dict:
    clients = case["clients"]
    if not isinstance(clients, list) or not isinstance(case["queues"], list):
        raise CaseError("'clients' and 'queues' must be lists")
    queues = [_queue_of(item) for item in case["queues"]]
    expected = case.get("results")
    if expected is not None and not isinstance(expected, dict):
        raise CaseError("'results' must be an object")
    wanted = list(expected) if expected is not None else None
    if wanted is None and all(isinstance(c, str) for c in clients):
        wanted = list(dict.fromkeys(sort_client_ids(clients)))
    try:
        group = allocate_group(case["strategy"], case.get("params") or {}, queues, clients,
                               for_clients=wanted)
    except InvalidAllocationInput as error:
        raise CaseError(error.reason) from None
    fields: dict = {"results": {cid: None if share is None else [list(q) for q in share]
                                for cid, share in group.results.items()}}
    if group.errors:
        fields["errors"] = group.errors
    return fields


def _kafka_assignment(case: dict) -> dict:
    try:
        from streaming.core.allocation import kafka
    except ImportError as error:  # the Kafka assignors are a separate subpackage
        raise CaseError(f"Kafka assignors unavailable: {error}") from None
    if not isinstance(case["partitions_per_topic"], dict):
        raise CaseError("'partitions_per_topic' must be an object of topic -> partition count")
    if not isinstance(case["members"], list):
        raise CaseError("'members' must be a list")
    members = []
    for item in case["members"]:
        if not isinstance(item, dict):
            raise CaseError(f"a member must be an object: {item!r}")
        topics, owned = item.get("topics") or [], item.get("owned") or []
        if not isinstance(topics, list) or not isinstance(owned, list) or not all(
                isinstance(tp, list) and len(tp) == 2 for tp in owned):
            raise CaseError(f"member {item.get('member_id')!r}: topics must be a list, owned a "
                            "list of [topic, partition]")
        members.append(kafka.KafkaMember(
            member_id=item["member_id"],
            group_instance_id=item.get("group_instance_id"),
            topics=tuple(topics),
            owned=tuple(tuple(tp) for tp in owned),
            generation=item.get("generation", -1),
        ))
    assignment = kafka.assign(case["assignor"], case["partitions_per_topic"], members)
    # Members in Java String order, as the conformance files list them; each list as returned.
    return {member: [list(tp) for tp in assignment[member]]
            for member in java_sorted(assignment)}


# ---------------------------------------------------------------- interactive form


def _pairs(values: Iterable[str], what: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, target = value.rpartition("=")
        if not sep or not name:
            raise CaseError(f"{what} must look like NAME=VALUE, got {value!r}")
        pairs[name] = target
    return pairs


# The interactive preview's size: it prints a row per client, and its input is typed by hand.
MAX_PREVIEW_QUEUES = 100_000
MAX_PREVIEW_CLIENTS = 10_000


def _topic_spec(spec: str) -> str:
    """--topic, checked where it is parsed: its form and its size."""
    try:
        _, queues = parse_topic(spec)
    except CaseError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if not queues:
        raise argparse.ArgumentTypeError(f"topic {spec!r} has no queue")
    return spec


def _client_ids(text: str) -> str:
    ids = [c.strip() for c in str(text).split(",")]
    if not all(ids):
        raise argparse.ArgumentTypeError(f"expected C1,C2,... with no empty id, got {text!r}")
    if len(ids) > MAX_PREVIEW_CLIENTS:
        raise argparse.ArgumentTypeError(
            f"{len(ids):,} clients; the preview takes at most {MAX_PREVIEW_CLIENTS:,}")
    return text


_strategy = values.one_of(*sorted(STRATEGIES), case_insensitive=True)


def _repeated(help: str, parse, metavar: str) -> Any:
    return option(help + " (repeatable; the variable holds one a line)", parse, default=(),
                  repeated=True, metavar=metavar, shown_default="none")


@dataclass(frozen=True)
class AllocateOptions:
    cases: str | None = option("batch form: conformance-format cases ('-' = stdin)",
                               values.not_empty, default=None, metavar="FILE.jsonl",
                               shown_default="none")
    strategy: str | None = option(f"RocketMQ strategy, any case: {', '.join(sorted(STRATEGIES))}",
                                  _strategy, default=None, metavar="STRATEGY",
                                  shown_default="none")
    topic: tuple[str, ...] = _repeated(
        f"a topic and its queue count per broker, at most {MAX_PREVIEW_QUEUES:,} queues in all",
        _topic_spec, "T:BROKER=N,...")
    clients: str | None = option(
        "client ids, duplicates kept (a duplicate = two processes, one id; at most "
        f"{MAX_PREVIEW_CLIENTS:,})", _client_ids, default=None, metavar="C1,C2,...",
        shown_default="none")
    virtual_nodes: int = option("CONSISTENT_HASH virtual nodes per client",
                                values.whole(minimum=1, maximum=10_000), default=10, metavar="N")
    consumer_idcs: str | None = option(
        "MACHINE_ROOM: the consumer's idcs (brokers are named idc@broker)", values.names,
        default=None, metavar="IDC1,IDC2", shown_default="none")
    inner: str = option("MACHINE_ROOM_NEARBY: the strategy used inside a room", _strategy,
                        default="AVG", metavar="STRATEGY")
    broker_room: tuple[str, ...] = _repeated("MACHINE_ROOM_NEARBY: a broker's machine room",
                                             values.key_value, "BROKER=ROOM")
    client_room: tuple[str, ...] = _repeated("MACHINE_ROOM_NEARBY: a client's machine room",
                                             values.key_value, "CLIENT=ROOM")
    config_queue: tuple[str, ...] = _repeated("CONFIG: one queue of a client's configured list",
                                              values.key_value, "CLIENT=TOPIC:BROKER:ID")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, AllocateOptions)


def parse_topic(spec: str) -> tuple[str, list[Queue]]:
    """`T:broker-a=4,broker-b=2` -> ("T", queues 0..3 on broker-a and 0..1 on broker-b)."""
    topic, sep, brokers = spec.partition(":")
    if not sep or not topic or not brokers:
        raise CaseError(f"--topic must look like T:broker-a=4,broker-b=4, got {spec!r}")
    queues: list[Queue] = []
    counts = _pairs(brokers.split(","), "a broker's queue count")
    for broker, count in counts.items():
        if not count.isdigit():
            raise CaseError(f"queue count of {broker!r} must be a number, got {count!r}")
    total = sum(int(count) for count in counts.values())
    if total > MAX_PREVIEW_QUEUES:
        raise CaseError(f"{total:,} queues in {spec[:60]!r}; the preview takes at most "
                        f"{MAX_PREVIEW_QUEUES:,}")
    for broker, count in counts.items():
        queues.extend((topic, broker, queue_id) for queue_id in range(int(count)))
    return topic, queues


def _interactive_params(args: AllocateOptions) -> tuple[dict, dict[str, dict]]:
    params: dict = {}
    if args.strategy == "CONSISTENT_HASH":
        params["virtual_nodes"] = args.virtual_nodes
    elif args.strategy == "MACHINE_ROOM":
        params["consumer_idcs"] = [i for i in (args.consumer_idcs or "").split(",") if i]
    elif args.strategy == "MACHINE_ROOM_NEARBY":
        params.update(inner=args.inner, broker_rooms=_pairs(args.broker_room, "--broker-room"),
                      client_rooms=_pairs(args.client_room, "--client-room"))
    client_params: dict[str, dict] = {}
    for value in args.config_queue:
        cid, sep, queue = value.partition("=")
        parts = queue.rsplit(":", 2)
        if not sep or len(parts) != 3 or not parts[2].lstrip("-").isdigit():
            raise CaseError(f"--config-queue must look like C=TOPIC:BROKER:ID, got {value!r}")
        entry = (parts[0], parts[1], int(parts[2]))
        client_params.setdefault(cid, {"queues": []})["queues"].append(entry)
    return params, client_params


def render_interactive(args: AllocateOptions) -> str:
    if not args.strategy or not args.topic or args.clients is None:
        raise CaseError("give --strategy, at least one --topic and --clients (or --cases FILE)")
    topics = dict(parse_topic(spec) for spec in args.topic)
    clients = [c.strip() for c in args.clients.split(",")]
    params, client_params = _interactive_params(args)
    try:
        groups = allocate_group_topics(args.strategy, params, topics, clients,
                                       client_params=client_params or None)
    except InvalidAllocationInput as error:
        raise CaseError(error.reason) from None
    return render_table(args.strategy, topics, clients, groups)


def compact(queues: Sequence[Queue]) -> str:
    """Queues in Java's order, consecutive ids of a broker folded: `broker-a:0-2 broker-b:5`."""
    runs: list[list] = []
    for _, broker, queue_id in queues:
        if runs and runs[-1][0] == broker and runs[-1][2] == queue_id - 1:
            runs[-1][2] = queue_id
        else:
            runs.append([broker, queue_id, queue_id])
    return " ".join(f"{b}:{lo}" if lo == hi else f"{b}:{lo}-{hi}" for b, lo, hi in runs) or "-"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def render_table(strategy: str, topics: dict[str, list[Queue]], clients: list[str],
                 groups: dict[str, GroupAllocation]) -> str:
    processes = Counter(clients)
    header = ["client", *[f"{t} ({len(topics[t])})" for t in topics], "total"]
    rows = [header]
    for cid in dict.fromkeys(sort_client_ids(clients)):
        label = cid if processes[cid] == 1 else f"{cid} (x{processes[cid]} processes)"
        shares = [groups[t].results[cid] for t in topics]
        cells = [compact(s) if s is not None else "error" for s in shares]
        total = sum(len(s) for s in shares if s is not None)
        rows.append([label, *cells, str(total)])
    lines = [f"strategy {strategy}: {len(clients)} processes, {len(processes)} client ids", ""]
    lines += _table(rows)
    lines += _problems(topics, processes, groups)
    return "\n".join(lines) + "\n"


def _problems(topics: dict[str, list[Queue]], processes: Counter,
              groups: dict[str, GroupAllocation]) -> list[str]:
    lines = []
    for topic, queues in topics.items():
        held: Counter = Counter()
        for cid, count in processes.items():
            for queue in groups[topic].results.get(cid) or ():
                held[queue] += count
        unassigned = [q for q in dict.fromkeys(queues) if held[q] == 0]
        doubled = [q for q in dict.fromkeys(queues) if held[q] > 1]
        if unassigned:
            lines.append(f"{topic}: unassigned {len(unassigned)}: {compact(unassigned)}")
        if doubled:
            lines.append(f"{topic}: doubly assigned {len(doubled)}: {compact(doubled)}")
        for cid, error in groups[topic].errors.items():
            lines.append(f"{topic}: {cid}: {error}")
    return [""] + lines if lines else ["", "every queue has exactly one consumer process"]
