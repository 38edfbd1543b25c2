"""What the group API and page tests share: a group stored as the sink stores it, two fleets
to store, and the rows of a page's tables."""

from dataclasses import replace
from html.parser import HTMLParser

from streaming.core.contract import GroupKey
from streaming.core.step import step
from streaming.exporter import SnapshotStore
from tests.unit.state_helpers import hb, parsed, route


def put_stepped(store: SnapshotStore, raws, key: GroupKey) -> None:
    """A group as the sink stores it: the step's metrics and detail under the group's key."""
    out = step(None, parsed(raws))
    names = {"system": key.system, "group": key.group, "cluster": key.cluster}
    store.replace_group(replace(out.metrics, **names))
    store.details.put(replace(out.detail, **names).to_json())


def collision() -> list[dict]:
    """Two processes share client id c1: both take queues 0 and 1 of T (the first slot's
    share), c2 takes 3 (the third slot's), and the second slot's, queue 2, is orphaned."""
    return [route("T", brokers={"b": 4}), hb("c1", ["T"], address="10.0.0.1:1"),
            hb("c1", ["T"], address="10.0.0.2:1"), hb("c2", ["T"], address="10.0.0.3:1")]


def fine() -> list[dict]:
    return [route("T", brokers={"b": 2}), hb("c1", ["T"]), hb("c2", ["T"])]


class Rows(HTMLParser):
    """The rows of the page's tables: (class of the tr, texts of its cells)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.rows: list[tuple[str, list[str]]] = []
        self._cell: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append((dict(attrs).get("class") or "", []))
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1][1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
