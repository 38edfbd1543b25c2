"""Many groups' blobs in one stored value: the state of one shard of groups.

Spark's per-key cost in applyInPandasWithState (a pandas frame in and out, a state-store row, a
Python round trip: about 1 ms) was paid once per group and micro-batch; with thousands of
groups that cost, not the events, set the batch's duration. The job therefore keys its state by
a shard of groups and keeps each group's own blob (streaming.core.state.codec) inside the
shard's value, with the group's timeout and the refreshes waiting for its next step
(streaming.core.state.refresh) beside it. A group's blob is copied as bytes, never re-encoded,
when the group does not step in a batch: its base64 text as it was read is written back.

    >>> from streaming.core.contract import DEFAULT_CLUSTER, GroupKey
    >>> from streaming.core.state.refresh import Kept, pack_kept
    >>> entries = {GroupKey("kafka", "orders"): ShardEntry.of(b"blob-1", 5_000),
    ...            GroupKey("rocketmq", "orders"): ShardEntry.of(b"blob-2", NO_TIMEOUT,
    ...                                                          pack_kept([Kept(3, 7_000, 41)]))}
    >>> decode_shard(encode_shard(entries)) == entries
    True
    >>> earliest_timeout(entries)
    5000
"""

from __future__ import annotations

import binascii
import struct
from collections.abc import Mapping
from typing import NamedTuple

from streaming.core.contract import DEFAULT_CLUSTER, GroupKey
from streaming.core.state.codec import CodecError
from streaming.core.state.refresh import KeptFormatError, repack_fixed_kept, unpack_kept
from streaming.core.times import NO_TIMEOUT

# 1: entries without kept refreshes (read as having none); 2: with them; 3: with the group's
# cluster (1 and 2 are read as the default cluster); 4: the kept refreshes as varint deltas
# (streaming.core.state.refresh; 2 and 3 stored fixed records, repacked when read), and the
# entries in base64 after the format byte. Spark hands each shard's state to the Python worker
# pickled as a latin-1 string that it encodes as UTF-8: a plain copy when every byte is ASCII,
# a loop over the bytes otherwise, and that loop was a fifth of the JVM's time at 10,000 groups
# (docs/benchmarks.md, "The state's bytes"). A third more bytes cost less than that.
# 5: one line per entry, its other fields in base64, a space, then its blob in base64: a group
# that did not step is written back as the text it was read as. Decoding and encoding every
# shard's whole value took a sixth of the Python workers' time at a million members
# (docs/benchmarks.md), though most groups' blobs had not changed. 6: with the digests of the
# stems the group's view knows (streaming.core.state.refresh.stem_digest) among the fields;
# format 5 is read as knowing none.
SHARD_VERSION = 6
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)

# Per entry: the lengths of system, group and blob, then the timeout (event time, ms).
# 32-bit lengths: a group's name is bounded only by --max-event-bytes, and a name over 64 KiB
# must not stop the job. Format 3: then the length of the cluster and the cluster.
_ENTRY = struct.Struct(">IIIq")
_CLUSTER_LENGTH = struct.Struct(">I")
_KEPT_LENGTH = struct.Struct(">I")   # format 2: then the kept refreshes, packed
# Format 5, the fields before the blob: the lengths of system, group, cluster and kept
# refreshes, the timeout, then those four. Format 6: the length of the stems' digests too
# (before the timeout), and the digests last.
_FIELDS_5 = struct.Struct(">IIIIq")
_FIELDS = struct.Struct(">IIIIIq")


class ShardEntry(NamedTuple):
    """One group inside a shard: its blob in base64 (as the shard stores it), the event time
    after which the watermark wakes it (as Spark's EventTimeTimeout would the group's own key:
    woken when timeout < watermark), and the refreshes kept for its next step, in arrival
    order."""

    armoured: bytes                  # base64 of the group's blob (streaming.core.state.codec)
    timeout_ms: int
    kept: bytes = b""                # refresh.pack_kept's records
    stems: bytes = b""               # Refreshes.digests() of the blob's view

    @classmethod
    def of(cls, blob: bytes, timeout_ms: int, kept: bytes = b"") -> ShardEntry:
        return cls(binascii.b2a_base64(blob, newline=False), timeout_ms, kept)

    @property
    def blob(self) -> bytes:
        """The group's blob; CodecError when its text is not base64 (the group is reset)."""
        try:
            return binascii.a2b_base64(self.armoured, strict_mode=True)
        except binascii.Error as error:
            raise CodecError(f"blob unreadable: {error}") from None

    @property
    def kept_count(self) -> int:
        return len(unpack_kept(self.kept))


class ShardFormatError(ValueError):
    """Bytes that are not a shard of a version this build reads."""


def encode_shard(entries: Mapping[GroupKey, ShardEntry]) -> bytes:
    """Entries in key order, so the same groups give the same bytes."""
    parts: list[bytes] = [bytes((SHARD_VERSION,))]
    for key in sorted(entries):
        entry = entries[key]
        system, group, cluster = key.system.encode(), key.group.encode(), key.cluster.encode()
        fields = b"".join((_FIELDS.pack(len(system), len(group), len(cluster), len(entry.kept),
                                        len(entry.stems), entry.timeout_ms),
                           system, group, cluster, entry.kept, entry.stems))
        parts += (binascii.b2a_base64(fields, newline=False), b" ", entry.armoured, b"\n")
    return b"".join(parts)


class Salvaged(NamedTuple):
    """What a shard's value still gives: every entry before the first unreadable byte, and
    whether it had one (its groups after that are lost, and rebuilt from their next events)."""

    entries: dict[GroupKey, ShardEntry]
    broken: bool


def salvage_shard(value: bytes) -> Salvaged:
    """`decode_shard`, keeping what precedes a break instead of refusing the whole value.

        >>> from streaming.core.contract import GroupKey
        >>> value = encode_shard({GroupKey("kafka", "a"): ShardEntry.of(b"1", 5),
        ...                       GroupKey("kafka", "b"): ShardEntry.of(b"2", 5)})
        >>> [key.group for key in salvage_shard(value[:-3]).entries], salvage_shard(value[:-3]).broken
        (['a'], True)
    """
    entries: dict[GroupKey, ShardEntry] = {}
    try:
        _decode_into(value, entries)
    except ShardFormatError:
        return Salvaged(entries, True)
    return Salvaged(entries, False)


def decode_shard(value: bytes) -> dict[GroupKey, ShardEntry]:
    """The shard's entries; ShardFormatError if any byte of it is unreadable."""
    entries: dict[GroupKey, ShardEntry] = {}
    _decode_into(value, entries)
    return entries


def _decode_into(value: bytes, entries: dict[GroupKey, ShardEntry]) -> None:
    if not value or value[0] not in READABLE_VERSIONS:
        found = value[0] if value else "nothing"
        raise ShardFormatError(f"shard format {found}, expected one of {READABLE_VERSIONS}")
    version = value[0]
    if version >= 5:
        _decode_lines(value, entries, with_stems=version >= 6)
        return
    with_kept, with_cluster, fixed_kept = version >= 2, version >= 3, version in (2, 3)
    entries_bytes, cut = _unarmoured(value) if version >= 4 else (memoryview(value)[1:], False)
    view, at = memoryview(entries_bytes), 0
    try:
        while at < len(view):
            system_len, group_len, blob_len, timeout_ms = _ENTRY.unpack_from(view, at)
            at += _ENTRY.size
            if at + system_len + group_len + blob_len > len(view):
                raise ShardFormatError("shard cut short")
            system = bytes(view[at:at + system_len]).decode()
            at += system_len
            group = bytes(view[at:at + group_len]).decode()
            at += group_len
            blob = bytes(view[at:at + blob_len])
            at += blob_len
            kept = b""
            if with_kept:
                (kept_len,) = _KEPT_LENGTH.unpack_from(view, at)
                at += _KEPT_LENGTH.size
                if at + kept_len > len(view):
                    raise ShardFormatError("shard cut short")
                kept = bytes(view[at:at + kept_len])
                at += kept_len
                if fixed_kept:
                    kept = repack_fixed_kept(kept)
                elif kept and kept[-1] & 0x80:
                    raise ShardFormatError("kept refreshes cut short")
            cluster = DEFAULT_CLUSTER
            if with_cluster:
                (cluster_len,) = _CLUSTER_LENGTH.unpack_from(view, at)
                at += _CLUSTER_LENGTH.size
                if at + cluster_len > len(view):
                    raise ShardFormatError("shard cut short")
                cluster = bytes(view[at:at + cluster_len]).decode()
                at += cluster_len
            entries[GroupKey(system, group, cluster)] = ShardEntry.of(blob, timeout_ms, kept)
    except (struct.error, UnicodeDecodeError, KeptFormatError) as error:
        raise ShardFormatError(f"shard unreadable: {error}") from None
    if cut:
        raise ShardFormatError("shard cut short")


def _decode_lines(value: bytes, entries: dict[GroupKey, ShardEntry], with_stems: bool) -> None:
    """Formats 5 and 6. A blob's text is taken as it is: one that is not base64 resets its
    group when it is read (ShardEntry.blob), not the shard."""
    layout = _FIELDS if with_stems else _FIELDS_5
    *lines, rest = bytes(memoryview(value)[1:]).split(b"\n")
    for line in lines:
        text, space, armoured = line.partition(b" ")
        if not space:
            raise ShardFormatError("shard entry without its blob")
        try:
            fields = binascii.a2b_base64(text, strict_mode=True)
            *lengths, timeout_ms = layout.unpack_from(fields)
            if not with_stems:
                lengths.append(0)
            system_len, group_len, cluster_len, kept_len, stems_len = lengths
            at = layout.size
            if at + system_len + group_len + cluster_len + kept_len + stems_len != len(fields):
                raise ShardFormatError("shard entry's fields of the wrong length")
            system = fields[at:at + system_len].decode()
            at += system_len
            group = fields[at:at + group_len].decode()
            at += group_len
            cluster = fields[at:at + cluster_len].decode()
            at += cluster_len
            kept = fields[at:at + kept_len]
            stems = fields[at + kept_len:]
        except (binascii.Error, struct.error, UnicodeDecodeError) as error:
            raise ShardFormatError(f"shard unreadable: {error}") from None
        if kept and kept[-1] & 0x80:
            raise ShardFormatError("kept refreshes cut short")
        entries[GroupKey(system, group, cluster)] = ShardEntry(armoured, timeout_ms, kept, stems)
    if rest:
        raise ShardFormatError("shard cut short")


def _unarmoured(value: bytes) -> tuple[bytes, bool]:
    """A base64 value's (format 4) entries, and whether its text was cut inside a quantum (the
    entries before the cut still read)."""
    text = memoryview(value)[1:]
    whole = len(text) - len(text) % 4
    try:
        return binascii.a2b_base64(text[:whole], strict_mode=True), whole != len(text)
    except binascii.Error as error:
        raise ShardFormatError(f"shard unreadable: {error}") from None


def earliest_timeout(entries: Mapping[GroupKey, ShardEntry]) -> int | None:
    """When the shard's own key must be woken: its earliest group timeout (None: never)."""
    timeouts = [entry.timeout_ms for entry in entries.values() if entry.timeout_ms != NO_TIMEOUT]
    return min(timeouts) if timeouts else None


def is_due(entry: ShardEntry, watermark_ms: int | None) -> bool:
    """Spark's test for an event-time timeout (FlatMapGroupsWithStateExec): timeout < watermark."""
    return (watermark_ms is not None and entry.timeout_ms != NO_TIMEOUT
            and entry.timeout_ms < watermark_ms)
