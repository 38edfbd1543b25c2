"""A client that reports no strategy (the Go SDK) gets the one its holdings give, from its own
view; several or none: not known, said so; an operator's --sdk-strategy is never second-guessed.
Holdings here are the core's Go ports' shares (bit-exact with the Go client: conformance
vectors); tests/integration/test_go_consumer.py does it with real Go and Java clients."""

import json

import pytest

from producers.rocketmq import inference
from producers.rocketmq.bridge import (
    AssumedStrategies,
    Holdings,
    Listing,
    PollResult,
    heartbeat,
    members_of,
)
from streaming.core.allocation import allocate_group
from streaming.core.state.events import Invalid, parse_event

pytestmark = pytest.mark.unit

ROUTES = {"T": {"broker-a": 4, "broker-b": 4}}
JAVA_CH = "AllocateMessageQueueConsistentHash"    # as the admin client parses it
GO, JAVA = ("go-1",), ("java-1", "java-2")


def share(strategy: str, client_id: str, clients, params=None) -> tuple:
    queues = [("T", broker, q) for broker, n in ROUTES["T"].items() for q in range(n)]
    return tuple(allocate_group(strategy, params or {}, queues, list(clients),
                                for_clients=[client_id]).results[client_id])


DEFAULTS = AssumedStrategies()


def poll(holds: dict, clients=GO + JAVA, strategies=DEFAULTS, inferred=None):
    """Each client's heartbeat: `holds` client id -> owned (absent: nothing asked yet)."""
    listings = [Listing("g", "broker-a", c, f"10.0.0.{i}:5000", ("T",),
                        language="GO" if c.startswith("go") else "JAVA")
                for i, c in enumerate(clients)]
    holdings = {("g", c): Holdings(owned, ("T",), None if c.startswith("go") else JAVA_CH)
                for c, owned in holds.items()}
    result = PollResult(1_700_000_000_000, tuple(listings), frozenset({("broker-a", "g")}),
                        holdings, ROUTES)
    beats = {m.client_id: heartbeat(m, result, strategies, inferred)
             for m in members_of(listings)}
    assert not any(isinstance(parse_event(json.dumps(b)), Invalid) for b in beats.values())
    return beats


def test_the_one_strategy_that_gives_a_go_clients_holdings_is_its_strategy():
    clients = GO + JAVA
    holds = share("GO_CONSISTENT_HASH", "go-1", clients, {"virtual_nodes": 10})
    others = {share(s, "go-1", clients) for s in ("GO_AVG", "GO_AVG_BY_CIRCLE")}
    assert holds not in others          # the case is not ambiguous
    beats = poll({"go-1": holds, "java-1": share("CONSISTENT_HASH", "java-1", clients)})
    go = beats["go-1"]
    assert (go["strategy"], go["strategy_params"], go["strategy_inferred"]) == (
        "GO_CONSISTENT_HASH", {"virtual_nodes": 10}, "CONSISTENT_HASH")
    assert "strategy_assumed" not in go and "strategy_candidates" not in go
    # A client that reports its strategy is taken at its word.
    assert beats["java-1"]["strategy"] == "CONSISTENT_HASH"
    assert "strategy_inferred" not in beats["java-1"]


def test_a_go_client_on_avg_is_inferred_as_the_go_clients_avg():
    holds = share("GO_AVG", "go-1", GO + JAVA)
    go = poll({"go-1": holds})["go-1"]
    assert (go["strategy"], go["strategy_inferred"]) == ("GO_AVG", "AVG")


def test_a_client_alone_holds_every_queue_under_every_strategy_so_none_is_inferred():
    every = share("GO_AVG", "go-1", GO)
    go = poll({"go-1": every}, clients=GO)["go-1"]
    assert (go["strategy"], go["strategy_assumed"]) == ("GO_AVG", True)
    assert go["strategy_candidates"] == list(inference.INFERABLE)
    assert "strategy_inferred" not in go


def test_holdings_no_strategy_gives_are_said_and_the_strategy_is_assumed():
    go = poll({"go-1": (("T", "broker-b", 3),)})["go-1"]
    assert (go["strategy"], go["strategy_assumed"], go["strategy_candidates"]) == (
        "GO_AVG", True, [])


def test_nothing_is_inferred_before_the_client_was_asked_what_it_holds():
    go = poll({})["go-1"]
    assert (go["strategy"], go["strategy_assumed"]) == ("GO_AVG", True)
    assert "strategy_candidates" not in go


def test_the_operators_strategy_for_an_sdk_is_never_second_guessed():
    holds = share("GO_AVG", "go-1", GO + JAVA)
    go = poll({"go-1": holds},
              strategies=AssumedStrategies(by_language={"GO": "AVG_BY_CIRCLE"}))["go-1"]
    assert (go["strategy"], go["strategy_named"]) == ("GO_AVG_BY_CIRCLE", True)
    assert not {"strategy_assumed", "strategy_inferred", "strategy_candidates"} & set(go)


def test_an_inferred_strategy_is_kept_while_the_client_moves_and_changes_when_it_must():
    before = {("g", "go-1"): "CONSISTENT_HASH"}
    moving = poll({"go-1": ()}, inferred=before)["go-1"]   # between two views: nothing matches
    assert moving["strategy_inferred"] == "CONSISTENT_HASH"
    avg = poll({"go-1": share("GO_AVG", "go-1", GO + JAVA)}, inferred=before)["go-1"]
    assert avg["strategy_inferred"] == "AVG"


@pytest.mark.parametrize("matching, previous, expected", [
    (("AVG",), None, "AVG"), (("AVG",), "CONSISTENT_HASH", "AVG"),
    (("AVG", "CONSISTENT_HASH"), "CONSISTENT_HASH", "CONSISTENT_HASH"),
    (("AVG", "AVG_BY_CIRCLE"), "CONSISTENT_HASH", None), (("AVG", "AVG_BY_CIRCLE"), None, None),
    ((), "AVG", "AVG"), ((), None, None), (None, "AVG", "AVG"), (None, None, None)])
def test_the_choice_of_an_inference(matching, previous, expected):
    assert inference.chosen(matching, previous) == expected
