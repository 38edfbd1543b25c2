"""The seed scenarios as events: five groups (skew, an uneven 4/3/3 split, a subscription gap, a
shared client id, mixed strategies), for the tests that run them through a real job (local mode,
test_job_seeds.py; a standalone cluster, test_standalone_cluster.py)."""

from tests.unit.state_helpers import hb, route


def seed_events() -> list[dict]:
    skew = [route("TopicX", group="g-skew", brokers={"broker-a": 2}),
            route("TopicY", group="g-skew", brokers={"broker-a": 2})]
    skew += [hb(c, ["TopicX", "TopicY"], group="g-skew") for c in ("c1", "c2", "c3", "c4")]
    even = [route("T", group="g-433", brokers={"broker-a": 10})]
    even += [hb(c, ["T"], group="g-433") for c in ("c1", "c2", "c3")]
    gap = [route("TopicA", group="g-gap", brokers={"broker-a": 4}),
           route("TopicB", group="g-gap", brokers={"broker-a": 4}),
           hb("c1", ["TopicA", "TopicB"], group="g-gap"), hb("c2", ["TopicA", "TopicB"], group="g-gap"),
           hb("c3", ["TopicA"], group="g-gap")]
    shared = [route("T", group="g-shared", brokers={"broker-a": 6}),
              hb("c1", ["T"], group="g-shared", address="10.0.0.1:5000"),
              hb("c1", ["T"], group="g-shared", address="10.0.0.2:5000"),
              hb("c2", ["T"], group="g-shared", address="10.0.0.3:5000")]
    mixed = [route("T", group="g-mixed", brokers={"broker-a": 6}), hb("c1", ["T"], group="g-mixed"),
             hb("c2", ["T"], group="g-mixed"), hb("c3", ["T"], group="g-mixed", strategy="AVG_BY_CIRCLE")]
    return skew + even + gap + shared + mixed
