"""Kept refreshes as a shard stores them (streaming.core.state.refresh: varint deltas).

Appending records to packed ones equals packing them all, so a group's kept refreshes can grow
batch by batch as bytes; a shard written with fixed 20-byte records (formats 2 and 3) is read as
the same references; a steady group's records take a few bytes each; bytes that do not
decode reset their group instead of failing the batch; and the sessions renewed by each source's
latest time are those renewed record by record."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.core.advance import advance
from streaming.core.contract import GroupKey
from streaming.core.state.refresh import (
    STEM_DIGEST_BYTES,
    Kept,
    KeptFormatError,
    KeptTimes,
    Renewal,
    kept_times,
    pack_digests,
    pack_kept,
    unpack_digests,
    unpack_kept,
)
from streaming.core.state.shard import decode_shard, encode_shard
from streaming.core.step import StepConfig
from tests.unit.state_helpers import T0, hb, parsed

pytestmark = pytest.mark.unit

KEPT = st.builds(Kept, st.integers(0, 2**32 - 1), st.integers(-2**63, 2**63 - 1),
                 st.integers(-2**63, 2**63 - 1))


@given(st.lists(KEPT), st.lists(KEPT))
def test_appending_packed_records_equals_packing_them_all(first, then):
    head = pack_kept(first)
    appended = head + pack_kept(then, first[-1] if first else None)
    assert appended == pack_kept([*first, *then])
    assert unpack_kept(appended) == [*first, *then]
    assert unpack_kept(appended[len(head):], first[-1] if first else None) == then


@given(st.lists(KEPT), st.one_of(st.none(), KEPT))
def test_kept_times_sum_up_the_unpacked_records(refs, after):
    packed = pack_kept(refs, after)
    records = unpack_kept(packed, after)
    latest: dict[int, int] = {}
    for source, ts, _ in records:
        latest[source] = max(ts, latest.get(source, ts))
    assert kept_times(packed, after) == KeptTimes(len(records), (records or [after])[-1], latest)


SOURCES = 5


@given(st.dictionaries(st.integers(0, 7), st.integers(0, 10**6), min_size=1),
       st.lists(st.tuples(st.integers(0, SOURCES - 1), st.integers(0, 2 * 10**6))), st.data())
def test_renewing_to_each_sources_latest_time_is_renewing_record_by_record(times, records, data):
    """Refreshes._renewed's fold: the sessions' times, and the deadline they give (which the
    oldest session's renewal makes stale), as renewing them at every record."""
    renews = [data.draw(st.lists(st.sampled_from(sorted(times)), unique=True))
              for _ in range(SOURCES)]
    one_by_one, by_latest = Renewal(dict(times), 120_000), Renewal(dict(times), 120_000)
    for source, ts in records:
        one_by_one.renew(renews[source], ts)
    packed = pack_kept(Kept(source, ts, 0) for source, ts in records)
    for source, ts in kept_times(packed).latest.items():
        by_latest.renew(renews[source], ts)
    assert by_latest.deadline() == one_by_one.deadline()
    assert by_latest._last == one_by_one._last


@given(st.lists(KEPT, min_size=1), st.data())
def test_packed_records_cut_inside_a_record_are_refused(refs, data):
    packed = pack_kept(refs)
    ends = [len(pack_kept(refs[:n])) for n in range(len(refs) + 1)]
    cut = data.draw(st.integers(1, len(packed) - 1).filter(lambda at: at not in ends))
    with pytest.raises(KeptFormatError):
        unpack_kept(packed[:cut])


def test_a_steady_groups_records_take_a_few_bytes_each():
    """The bench fleet's group of 10 on 2 brokers: 35 sources, a refresh every 3 s or so, its
    partition's offsets about 3,000 apart. Fixed records took 20 bytes each."""
    refs = [Kept(n * 7 % 35, T0 + 3_000 * n + n % 5 * 40, 1_000_000 + 2_900 * n + n % 3)
            for n in range(256)]
    assert len(pack_kept(refs)) <= 6 * len(refs)


@pytest.mark.parametrize("version", [2, 3])
def test_a_shard_with_fixed_kept_records_is_read_as_the_same_references(version):
    refs = [Kept(3, T0 + 7_000, 41), Kept(0, T0 + 6_000, 40), Kept(2**32 - 1, -5, 2**62)]
    fixed = b"".join(struct.pack(">Iqq", *ref) for ref in refs)
    system, group, blob = b"kafka", b"g", b"blob-1"
    value = (bytes((version,)) + struct.pack(">IIIq", len(system), len(group), len(blob), 5)
             + system + group + blob + struct.pack(">I", len(fixed)) + fixed
             + (struct.pack(">I", 3) + b"eu1" if version == 3 else b""))
    [(key, entry)] = decode_shard(value).items()
    assert key == GroupKey("kafka", "g", "eu1" if version == 3 else key.cluster)
    assert (entry.blob, entry.timeout_ms, unpack_kept(entry.kept)) == (blob, 5, refs)
    assert decode_shard(encode_shard({key: entry})) == {key: entry}


@pytest.mark.parametrize("kept", [b"\x80", b"\x05\x02", bytes([40, 2, 2])],
                         ids=["cut-short", "two-numbers", "source-out-of-range"])
def test_kept_bytes_that_do_not_decode_reset_the_group(kept):
    config = StepConfig(exact=False)
    [first, second] = parsed([hb("c1", ["T"], ts=T0), hb("c1", ["T"], ts=T0 + 30_000)])
    entry = advance(None, [first], None, config).entry
    advanced = advance(entry._replace(kept=kept), [second], None, config)
    assert advanced.reset == "corrupt_group"
    assert advanced.output.metrics.members == 1


DIGESTS = st.dictionaries(st.integers(0, 2**32 - 1),
                          st.binary(min_size=STEM_DIGEST_BYTES, max_size=STEM_DIGEST_BYTES))


@given(DIGESTS, st.data())
def test_stem_digests_unpack_to_what_was_packed_and_cut_ones_to_none(digests, data):
    """A shard entry's digests of stems (shard format 6): the same map back, and bytes cut
    anywhere inside give none (the worker then parses, as without them)."""
    packed = pack_digests(digests)
    assert unpack_digests(packed) == digests
    if packed:
        ends = {len(pack_digests(dict(sorted(digests.items())[:n])))
                for n in range(len(digests) + 1)}
        cut = data.draw(st.integers(1, len(packed) - 1).filter(lambda at: at not in ends))
        assert unpack_digests(packed[:cut]) is None
