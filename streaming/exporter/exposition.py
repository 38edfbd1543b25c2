"""The per-group families as exposition text kept rendered, so that a scrape writes kept text
instead of formatting every sample again.

prometheus_client formats each sample on every scrape. A fleet of 10,000 groups of 10 clients is
about 250,000 series, and one scrape took 2.87 s (docs/benchmarks.md). Here a group's lines
are rendered when what they show changes (the sink writes each batch's metrics), from the
families RebalanceCollector yields, each sample line as generate_latest writes it but with the
group's labels escaped once for all its families (`_sample_lines`). A scrape writes the
groups' lines family by family, in the order RebalanceCollector yields them, in blocks joined
again when one of their groups changed. Only the ages (of a
conflict, of a KIP-848 hand-off) depend on the job's clock, so only the blocks with an open one
are rendered at the scrape. The text is byte for byte what a registry with RebalanceCollector
gives (tests/unit/test_exposition.py).

    text = GroupFamiliesText(ClientSeriesPolicy())
    store = SnapshotStore(text)          # replace_group / remove_group keep the text up to date
    text.render(store.health())          # every per-group family
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Collection
from dataclasses import dataclass, replace

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.utils import floatToGoString

from streaming.core.contract import GroupKey, GroupMetrics
from streaming.exporter.collector import AGE_FAMILIES, ClientSeriesPolicy, JobHealth, group_families


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


BLOCK_GROUPS = 64     # groups per kept block of a family's text

# Per family, in the order a scrape writes them: its sample name (what `name[]` asks for) and
# its parts, the HELP and TYPE lines then the blocks that have samples.
FamilyParts = tuple[tuple[str, tuple[bytes, ...]], ...]


def asked(families: FamilyParts, names: Collection[str] | None) -> tuple[bytes, ...]:
    """The parts of the families `names` asks for (None: every family), one after another; a
    family asked for by name is left out without samples, as prometheus_client answers
    `?name[]=`."""
    return tuple(part for name, parts in families
                 if names is None or (name in names and len(parts) > 1) for part in parts)


def _exposition_of(families: list[Metric]) -> str:
    return generate_latest(_Families(families)).decode()


def _exposition(family: Metric) -> str:
    return _exposition_of([family])


def _sample_lines(family: Metric, escaped: dict | None = None) -> str:
    """prometheus_client's text for a family's samples, without its HELP and TYPE lines:
    generate_latest's own sample line, with each name and set of labels escaped once (by
    prometheus_client's functions) and not for every sample. A group's labels recur in every
    family of it, so `escaped` may be shared across them. A sample that generate_latest would
    move into a family of its own (`_created`, `_gsum`, `_gcount`), or that carries a timestamp,
    is refused: the group families have none (tests/unit/test_exposition.py)."""
    if escaped is None:
        escaped = {}
    moved = _moved(family.name)
    lines = []
    for sample in family.samples:
        if sample.timestamp is not None or sample.name in moved:
            raise ValueError(f"{sample.name}: not a plain sample of {family.name}")
        labels = tuple(sample.labels.items())
        text = escaped.get(labels)
        if text is None:
            text = escaped[labels] = _label_text(sample.labels, escaped)
        lines.append(f"{_metric_name(sample.name)}{text} {floatToGoString(sample.value)}\n")
    return "".join(lines)


# generate_latest's default escaping of names, and the samples it moves into families of their
# own (prometheus_client.exposition.generate_latest). The names are the families' own: few.
OPENMETRICS_SUFFIXES = ("_created", "_gsum", "_gcount")


@functools.cache
def _moved(name: str) -> frozenset[str]:
    return frozenset(name + suffix for suffix in OPENMETRICS_SUFFIXES)


@functools.cache
def _metric_name(name: str) -> str:
    return openmetrics.escape_metric_name(name, openmetrics.UNDERSCORES)


@functools.cache
def _label_name(name: str) -> str:
    return openmetrics.escape_label_name(name, openmetrics.UNDERSCORES)


def _label_text(labels: dict[str, str], escaped: dict) -> str:
    """The `{...}` of a sample's line (empty without labels)."""
    if not labels:
        return ""
    pairs = ",".join(f'{_label_name(key)}="{_label_value(value, escaped)}"'
                     for key, value in sorted(labels.items()))
    return f"{{{pairs}}}"


def _label_value(value: str, escaped: dict) -> str:
    text = escaped.get(value)
    if text is None:
        text = escaped[value] = openmetrics._escape(value, openmetrics.ALLOWUTF8, False)
    return text


@dataclass(frozen=True)
class _Family:
    name: str
    sample_name: str           # what `name[]` asks for: a counter's samples end in `_total`
    header: str                # its HELP and TYPE lines


@dataclass(frozen=True)
class _GroupLines:
    shown: GroupMetrics        # the metrics with what only the ages read cleared
    metrics: GroupMetrics
    lines: tuple[str, ...]     # one text per family; the ages' as if none were open


def _shown(metrics: GroupMetrics) -> GroupMetrics:
    return replace(metrics, event_time_ms=0, conflict_since_ms=None, handoff_since_ms=None)


class GroupFamiliesText:
    """Each group's rendered lines, and the families' text as kept blocks of them.

    A family's text is kept in blocks of `block_groups` groups in key order, as bytes: a group
    whose lines change marks its block to be joined again, so the text after a batch costs what
    changed, not the fleet (a million per-client series are 128 MB: joining them all after each
    batch took the driver 0.3 to 0.6 s, docs/benchmarks.md). A group that comes or goes moves
    the others' places, so every block is joined again then. A scrape is served the blocks as
    they are, without joining them into one text."""

    def __init__(self, clients: ClientSeriesPolicy, block_groups: int = BLOCK_GROUPS) -> None:
        if block_groups < 1:
            raise ValueError(f"block_groups must be at least 1, not {block_groups}")
        self._clients = clients
        self._block_groups = block_groups
        self._lock = threading.Lock()
        self._groups: dict[GroupKey, _GroupLines] = {}
        self._order: list[GroupKey] | None = None    # None: to sort again (a group came or went)
        self._at: dict[GroupKey, int] = {}           # each group's place in _order
        self._blocks: list[list[bytes | None]] = []  # per family, per block (None: to join)
        self._version = 0                             # moves on at every put and remove
        # The full text's parts, by family and joined, for (version, event time).
        self._full: tuple[tuple[int, int], FamilyParts, tuple[bytes, ...]] | None = None
        self._families = tuple(
            _Family(f.name, f.name + ("_total" if f.type == "counter" else ""), _exposition(f))
            for f in group_families([], JobHealth(), clients))
        self._headers = tuple(family.header.encode() for family in self._families)
        names = [f.name for f in self._families]
        self._ages_at = {names.index(name): (since_of, family_of)
                         for name, since_of, family_of in AGE_FAMILIES}
        self._open_ages: dict[int, set[GroupKey]] = {index: set() for index in self._ages_at}

    def put(self, metrics: GroupMetrics) -> None:
        """Keep the group's lines; render them again only when what they show changed."""
        shown = _shown(metrics)
        with self._lock:
            known = self._groups.get(metrics.key)
        if known is not None and known.shown == shown:
            lines = known.lines
        else:
            lines = self._render(shown)
        with self._lock:
            self._version += 1
            if metrics.key not in self._groups:
                self._order = None
            elif known is None or known.lines is not lines:
                self._to_join(metrics.key)
            self._groups[metrics.key] = _GroupLines(shown, metrics, lines)
            for index, (since_of, _) in self._ages_at.items():
                if since_of(metrics) is None:
                    self._open_ages[index].discard(metrics.key)
                else:
                    self._open_ages[index].add(metrics.key)

    def _render(self, shown: GroupMetrics) -> tuple[str, ...]:
        """The group's lines, family by family, as prometheus_client writes them."""
        escaped: dict = {}
        return tuple(_sample_lines(family, escaped)
                     for family in group_families([shown], JobHealth(), self._clients))

    def remove(self, key: GroupKey) -> None:
        with self._lock:
            self._version += 1
            if self._groups.pop(key, None) is not None:
                self._order = None
            for keys in self._open_ages.values():
                keys.discard(key)

    def render(self, health: JobHealth, names: Collection[str] | None = None) -> str:
        """The families, or only those whose samples `names` asks for (as prometheus_client
        answers `?name[]=`: a family without samples is then left out)."""
        return self.exposition(health, names).decode()

    def exposition(self, health: JobHealth, names: Collection[str] | None = None) -> bytes:
        """render() as bytes."""
        return b"".join(self.chunks(health, names))

    def chunks(self, health: JobHealth, names: Collection[str] | None = None) -> tuple[bytes, ...]:
        """The text as the parts a scrape writes one after another. The full text's parts are
        kept until a group changes or the job's event time moves (only an open conflict's age
        reads it): a scrape after `chunks(health)` has run, as the job runs it after each batch
        (Prerender), serves kept parts."""
        with self._lock:
            if names is not None:
                return asked(self._render_families(health, names), names)
            return self._kept_full(health)[2]

    def family_parts(self, health: JobHealth) -> FamilyParts:
        """The full text's parts family by family (kept as `chunks(health)` keeps them), from
        which `asked` gives any `name[]` scrape's."""
        with self._lock:
            return self._kept_full(health)[1]

    def _kept_full(self, health: JobHealth
                   ) -> tuple[tuple[int, int], FamilyParts, tuple[bytes, ...]]:
        key = (self._version, health.max_event_time_ms)
        if self._full is None or self._full[0] != key:
            families = self._render_families(health, None)
            self._full = (key, families, asked(families, None))
        return self._full

    def _to_join(self, key: GroupKey) -> None:
        if self._order is not None:
            block = self._at[key] // self._block_groups
            for blocks in self._blocks:
                blocks[block] = None

    def _render_families(self, health: JobHealth,
                         names: Collection[str] | None) -> FamilyParts:
        if self._order is None:
            self._order = sorted(self._groups)
            self._at = {key: at for at, key in enumerate(self._order)}
            count = -(-len(self._order) // self._block_groups)
            self._blocks = [[None] * count for _ in self._families]
        return tuple(
            (family.sample_name, (self._headers[index],
                                  *(block for block in self._family_blocks(health, index)
                                    if block)))
            for index, family in enumerate(self._families)
            if names is None or family.sample_name in names)

    def _family_blocks(self, health: JobHealth, index: int) -> list[bytes]:
        aged = ({self._at[key] // self._block_groups for key in self._open_ages[index]}
                if index in self._ages_at else set())
        return [self._aged_block(health, index, block) if block in aged
                else self._block(index, block) for block in range(len(self._blocks[index]))]

    def _block(self, index: int, block: int) -> bytes:
        kept = self._blocks[index][block]
        if kept is None:
            kept = "".join(self._groups[key].lines[index]
                           for key in self._block_keys(block)).encode()
            self._blocks[index][block] = kept
        return kept

    def _aged_block(self, health: JobHealth, index: int, block: int) -> bytes:
        # Where none is open the age is 0 whatever the clock, as rendered at put().
        since_of, family_of = self._ages_at[index]
        lines = []
        for key in self._block_keys(block):
            group = self._groups[key]
            if since_of(group.metrics) is None:
                lines.append(group.lines[index])
            else:
                lines.append(_sample_lines(family_of([group.metrics], health)))
        return "".join(lines).encode()

    def _block_keys(self, block: int) -> list[GroupKey]:
        assert self._order is not None
        return self._order[block * self._block_groups:(block + 1) * self._block_groups]
