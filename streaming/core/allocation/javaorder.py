"""Java `String` semantics that the upstream allocation code depends on.

Python compares strings by code point; Java compares UTF-16 code units. They disagree when a
character above U+FFFF (a surrogate pair, 0xD800..0xDBFF first) meets one in U+E000..U+FFFF:

>>> sorted(["\\uff21", "\\U00010000"]) == ["\\uff21", "\\U00010000"]
True
>>> java_sorted(["\\uff21", "\\U00010000"]) == ["\\U00010000", "\\uff21"]
True
"""

from __future__ import annotations

from collections.abc import Iterable

_INT_MASK = 0xFFFFFFFF
_SURROGATE_MIN = "\ud800"


def java_order_key(s: str) -> bytes:
    """Sort key giving Java `String.compareTo` order.

    Big-endian UTF-16 bytes compare exactly like UTF-16 code units, and a proper prefix sorts
    first in both. `surrogatepass` keeps lone surrogates (possible in Java strings) encodable.
    """
    return s.encode("utf-16-be", "surrogatepass")


def is_code_point_order_safe(strings: Iterable[str]) -> bool:
    """True when plain Python order equals Java order for these strings.

    Both orders agree as long as no string contains a code point >= U+D800 (surrogates,
    U+E000..U+FFFF and supplementary characters are the only ones whose orders differ).
    """
    strings = strings if isinstance(strings, list | tuple | set | frozenset) else list(strings)
    if all(map(str.isascii, strings)):
        return True
    return all(s.isascii() or max(s) < _SURROGATE_MIN for s in strings if s)


def java_sorted(strings: Iterable[str]) -> list[str]:
    """`Collections.sort` of a `List<String>`: Java order, duplicates kept."""
    items = list(strings)
    if is_code_point_order_safe(items):
        return sorted(items)
    return sorted(items, key=java_order_key)


def java_split(s: str, separator: str) -> list[str]:
    """`String.split(separator)` for a literal one-character separator (limit 0).

    Java drops trailing empty strings, and a string without the separator splits into [s]:

    >>> java_split("idc1@broker-x@", "@"), java_split("@@", "@"), java_split("", "@")
    (['idc1', 'broker-x'], [], [''])
    """
    if len(separator) != 1:
        raise ValueError("java_split supports a one-character literal separator only")
    if separator not in s:
        return [s]
    parts = s.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def utf16_code_units(s: str) -> list[int]:
    """The UTF-16 code units Java stores for `s` (a supplementary character counts twice)."""
    data = java_order_key(s)
    return [(data[i] << 8) | data[i + 1] for i in range(0, len(data), 2)]


def java_string_hash(s: str) -> int:
    """`String.hashCode()`: h = 31*h + c over UTF-16 code units, as a signed 32-bit int.

    >>> java_string_hash("hello"), java_string_hash("polygenelubricants")
    (99162322, -2147483648)
    """
    h = 0
    for unit in utf16_code_units(s):
        h = (31 * h + unit) & _INT_MASK
    return h - (1 << 32) if h & 0x80000000 else h


def java_utf8(s: str) -> bytes:
    """`String.getBytes(UTF_8)`: an unpaired surrogate becomes '?' as Java's encoder does."""
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        # Re-pair surrogates that Python holds as two code points, then replace lone ones.
        normalised = java_order_key(s).decode("utf-16-be", "surrogatepass")
        return normalised.encode("utf-8", "replace")
