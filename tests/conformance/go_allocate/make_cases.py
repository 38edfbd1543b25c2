"""Seeded cases for the Go allocation program (main.go next to this file), as JSON lines.

    python tests/conformance/go_allocate/make_cases.py --seed 20250601 --count 400 \\
        | (cd tests/conformance/go_allocate && go run -buildvcs=false .) \\
        > tests/data/conformance/rocketmq_go_allocate.jsonl

Each case: id, strategy (GO_*), params, group, queues (0..64, unsorted, some duplicated),
clients (0..12, some duplicated or empty), for_clients (every distinct client, sometimes a
stranger and ""), tags. The `--count` seeded cases are followed by 2 fixed consistent-hash
ring edge cases (a queue hash equal to a ring hash; two clients on one ring hash). Names mix
ASCII, unicode and the characters whose order differs between Java (UTF-16) and Go (UTF-8
bytes). Only the standard library; the same seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from zlib import crc32

MAX_QUEUES = 64
MAX_CLIENTS = 12
STRATEGIES = ("GO_AVG", "GO_AVG_BY_CIRCLE", "GO_CONSISTENT_HASH", "GO_MACHINE_ROOM",
              "GO_MACHINE_ROOM_NEARBY")
# Weights: the two strategies with their own code get more cases.
STRATEGY_WEIGHTS = (2, 2, 3, 3, 1)

# U+E000 / U+FF21 sort after a supplementary character in Java, before it in Go.
TOPICS = ["TopicTest", "%RETRY%cg-orders", "orders", "Orders", "topic-9", "topic-10", "订单",
          "topic-\ue000", "topic-\U0001f600", "topic-\uff21", "topic-é", "t", "T", "a b"]
BROKERS = ["broker-a", "broker-b", "broker-c", "Broker-A", "broker-\uff21", "broker-\U00010000",
           "broker-ä", "broker-10", "broker-9"]
IDCS = ["IDC1", "IDC2", "idc1", "IDC\ue000", "IDC\U0001f600", "", "SH"]
ROOM_BROKERS = ["IDC1@broker-a", "IDC1@broker-b", "IDC2@broker-a", "idc1@broker-c",
                "IDC\ue000@broker-x", "IDC\U0001f600@broker-y", "SH@broker-z", "IDC1@",
                "@broker-d", "@", "IDC1@b@c", "IDC1", "", "broker-plain"]
CLIENT_STYLES = ("{ip}@{port}", "{ip}@{port}#{n}", "{ip}@DEFAULT", "host-{h}@{port}")
ODD_CLIENTS = ["客户端@1", "c-\ue000@1", "c-\U0001f600@1", "c-\uff21@1", "C@1", "c@1", "c@10",
               "c@9", "10.0.0.1@1 "]
STRANGER = "10.0.0.99@99999#1"


def client_id(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(ODD_CLIENTS)
    return rng.choice(CLIENT_STYLES).format(
        ip=f"10.0.{rng.randrange(3)}.{rng.randrange(1, 21)}", port=rng.choice(
            [9876, 12345, 20480, rng.randrange(1, 65536)]),
        n=rng.randrange(1, 10**12), h=rng.randrange(1, 11))


def queue_ids(rng: random.Random, count: int, start: int) -> list[int]:
    style = rng.random()
    if style < 0.7:
        return list(range(start, start + count))
    if style < 0.85:
        return rng.sample(range(start, start + count * 3 + 1), count)
    # Far apart and negative: an int comparison in Go, no overflow (Java's subtraction overflows).
    extremes = [-(2**31), -(2**31) + 1, -1, 2**31 - 2, 2**31 - 1]
    return rng.sample([*extremes, *range(start - 1000, start + 1000)], count)


def make_queues(rng: random.Random, strategy: str, tags: list[str]) -> list[dict]:
    total = rng.choice([0, 1, 2, 3, 4, 7, 8, 12, 16, 24, 32, 48, MAX_QUEUES,
                        rng.randrange(MAX_QUEUES + 1)])
    topics = [rng.choice(TOPICS)]
    if rng.random() < 0.15:
        topics.append(rng.choice(TOPICS))
        if topics[1] != topics[0]:
            tags.append("multi_topic")
    pool = ROOM_BROKERS if strategy == "GO_MACHINE_ROOM" or rng.random() < 0.1 else BROKERS
    brokers = list(dict.fromkeys(rng.choice(pool) for _ in range(rng.randrange(1, 5))))
    queues, next_id = [], {}
    while len(queues) < total:
        topic, broker = rng.choice(topics), rng.choice(brokers)
        start = next_id.get((topic, broker), 0)
        ids = queue_ids(rng, min(total - len(queues), rng.randrange(1, 17)), start)
        next_id[topic, broker] = start + 3 * len(ids) + 1
        queues += [{"topic": topic, "broker": broker, "queue_id": i} for i in ids]
    if queues and rng.random() < 0.1:
        extra = min(rng.randrange(1, min(4, len(queues)) + 1), MAX_QUEUES - len(queues))
        queues += rng.sample(queues, extra)
    if len({tuple(q.values()) for q in queues}) < len(queues):
        tags.append("duplicate_queues")  # Go keeps them; Java's RebalanceImpl uses a set
    rng.shuffle(queues)
    if not queues:
        tags.append("no_queues")
    return queues


def make_clients(rng: random.Random, tags: list[str]) -> tuple[list[str], list[str]]:
    clients = [client_id(rng) for _ in range(rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 10, 11]))]
    if clients and rng.random() < 0.15:
        clients.append(rng.choice(clients))
        tags.append("duplicate_clients")
    if len(clients) < MAX_CLIENTS and rng.random() < 0.05:
        clients.append("")
        tags.append("empty_client_id")
    rng.shuffle(clients)
    for_clients = list(dict.fromkeys(clients))
    if rng.random() < 0.3:
        for_clients.append(STRANGER)
        tags.append("client_not_in_list")
    if "" not in for_clients and rng.random() < 0.05:
        for_clients.append("")
        tags.append("empty_current_cid")
    if not clients:
        tags.append("no_clients")
    return clients, for_clients


def make_params(rng: random.Random, strategy: str, queues: list[dict]) -> dict:
    if strategy == "GO_CONSISTENT_HASH":
        return {"virtual_nodes": rng.choice([10, 10, 10, 1, 2, 3, 5, 20, 64, 0, -1])}
    if strategy == "GO_MACHINE_ROOM":
        # Mostly idcs of the case's own brokers, so that queues qualify.
        own = [q["broker"].split("@")[0] for q in queues]
        idcs = [rng.choice(own if own and rng.random() < 0.8 else IDCS)
                for _ in range(rng.choice([0, 1, 1, 1, 2, 3]))]
        if idcs and rng.random() < 0.2:
            idcs.append(idcs[0])  # Go loops over a list: a repeated idc counts twice
        return {"consumer_idcs": idcs}
    return {}


def make_case(rng: random.Random, number: int) -> dict:
    strategy = rng.choices(STRATEGIES, STRATEGY_WEIGHTS)[0]
    tags: list[str] = []
    queues = make_queues(rng, strategy, tags)
    params = make_params(rng, strategy, queues)
    clients, for_clients = make_clients(rng, tags)
    names = [q["topic"] for q in queues] + [q["broker"] for q in queues] + clients
    if any(not name.isascii() for name in names):
        tags.append("unicode")
    return {"id": f"rmq-go-{number:05d}", "strategy": strategy, "params": params,
            "group": rng.choice(["cg-orders", "please_rename_unique_group_name_4", "组"]),
            "queues": queues, "clients": clients, "for_clients": for_clients,
            "tags": sorted(tags)}


def forge_crc(prefix: str, target: int, length: int = 40) -> str:
    """prefix + `length` letters 'a'/'c' whose CRC-32 is `target`.

    CRC-32 is affine in the message bits, so the letters to flip solve a linear system over
    GF(2): random cases practically never put a queue's hash exactly on a ring hash.
    """
    base = prefix + "a" * length
    base_crc = crc32(base.encode())
    rows = [[crc32((prefix + "a" * j + "c" + "a" * (length - j - 1)).encode()) ^ base_crc, 1 << j]
            for j in range(length)]
    want, chosen = base_crc ^ target, 0
    for bit in range(32):
        pivot = next((row for row in rows if row[0] >> bit & 1), None)
        if pivot is None:
            continue
        rows.remove(pivot)
        for row in rows:
            if row[0] >> bit & 1:
                row[0], row[1] = row[0] ^ pivot[0], row[1] ^ pivot[1]
        if want >> bit & 1:
            want, chosen = want ^ pivot[0], chosen ^ pivot[1]
    forged = prefix + "".join("c" if chosen >> j & 1 else "a" for j in range(length))
    if want or crc32(forged.encode()) != target:
        raise ValueError(f"no CRC-32 {target:#x} from {prefix!r} + {length} letters")
    return forged


def ring_edge_cases() -> list[dict]:
    """Two fixed GO_CONSISTENT_HASH cases (1 virtual node): a queue hashing exactly onto a ring
    entry (Get takes the next entry: `>`, not `>=`), and two clients on one ring hash (the
    client added later, in sorted order, owns it)."""
    queues = [{"topic": "TopicTest", "broker": "broker-a", "queue_id": i} for i in range(4)]
    key = "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]"
    tie = forge_crc("0tie-", crc32(key.encode()))[1:]  # ring key = strconv.Itoa(0) + client id
    other = "10.0.0.1@9876"
    twin = forge_crc("0twin-", crc32(("0" + other).encode()))[1:]
    common = {"strategy": "GO_CONSISTENT_HASH", "params": {"virtual_nodes": 1},
              "group": "cg-orders", "queues": queues}
    return [
        {"id": "rmq-go-ring-tie", **common, "clients": [tie, other],
         "for_clients": [tie, other], "tags": ["ring_tie"]},
        {"id": "rmq-go-ring-collision", **common, "clients": [twin, other],
         "for_clients": [twin, other], "tags": ["ring_collision"]},
    ]


def make_cases(seed: int, count: int) -> list[dict]:
    """`count` seeded cases, then the fixed `ring_edge_cases`."""
    rng = random.Random(seed)
    return [make_case(rng, number) for number in range(1, count + 1)] + ring_edge_cases()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, default=400)
    args = parser.parse_args(argv)
    for case in make_cases(args.seed, args.count):
        sys.stdout.buffer.write(json.dumps(case, ensure_ascii=False).encode() + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
