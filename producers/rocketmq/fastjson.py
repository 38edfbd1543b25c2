"""Parse the JSON that RocketMQ's servers and clients write with fastjson. Pure.

fastjson's output is not always JSON:
- a map keyed by numbers writes them unquoted: `{"brokerAddrs":{0:"10.0.0.1:10911"}}`;
- a map keyed by objects writes the object in key position:
  `{"mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"droped":false}}}`;
- the C++ client writes an empty `mqTable` as `"mqTable":}` (it builds the text by hand and, with
  nothing in the table, its "erase the last comma" erases the opening brace instead):
  `{"mqTable":},"jstack":"","properties":{...}}`.

`loads` accepts all of these (and plain JSON, through the standard parser first). Numeric keys
become ints, object keys become `ObjectKey` (hashable, read like a mapping), the C++ client's
`"mqTable":}` an empty map. Key order is never relied on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from json.decoder import scanstring
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_LITERALS = {"true": True, "false": False, "null": None}


class FastjsonError(ValueError):
    """Text that is neither JSON nor what fastjson writes."""


class ObjectKey(Mapping):
    """An object in key position (a MessageQueue in `mqTable`), usable as a dict key."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields
        self._hash = hash(_frozen(fields))

    def __getitem__(self, name: str) -> Any:
        return self._fields[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectKey) and _frozen(self._fields) == _frozen(other._fields)

    def __repr__(self) -> str:
        return f"ObjectKey({self._fields!r})"


def loads(text: str | bytes) -> Any:
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")
    try:
        return json.loads(text)
    except ValueError:
        pass  # not plain JSON: fastjson's dialect
    parser = _Parser(text)
    value = parser.value()
    parser.skip()
    if parser.at != len(text):
        raise FastjsonError(f"unexpected {text[parser.at:parser.at + 20]!r} at {parser.at}")
    return value


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def skip(self) -> None:
        self.at = _WHITESPACE.match(self.text, self.at).end()

    def peek(self) -> str:
        self.skip()
        return self.text[self.at] if self.at < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise FastjsonError(f"expected {char!r} at {self.at}, got {self.peek()!r}")
        self.at += 1

    def value(self) -> Any:
        char = self.peek()
        if char == "{":
            return self.object()
        if char == "[":
            return self.array()
        if char == '"':
            text, self.at = scanstring(self.text, self.at + 1)
            return text
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.at):
                self.at += len(word)
                return literal
        match = _NUMBER.match(self.text, self.at)
        if match is None:
            raise FastjsonError(f"unexpected {self.text[self.at:self.at + 20]!r} at {self.at}")
        self.at = match.end()
        return float(match.group()) if match.group(1) or match.group(2) else int(match.group())

    def object(self) -> dict:
        self.expect("{")
        result: dict = {}
        if self.peek() == "}":
            self.at += 1
            return result
        while True:
            key = self.key()
            self.expect(":")
            if self.peek() == "}":  # the C++ client's empty map, its "{" erased (see above)
                self.at += 1
                result[key] = {}
            else:
                result[key] = self.value()
            if self.peek() == ",":
                self.at += 1
                continue
            self.expect("}")
            return result

    def key(self) -> Any:
        char = self.peek()
        if char == "{":
            return ObjectKey(self.object())
        key = self.value()
        if isinstance(key, list | dict):
            raise FastjsonError(f"unsupported key at {self.at}")
        return key

    def array(self) -> list:
        self.expect("[")
        result = []
        if self.peek() == "]":
            self.at += 1
            return result
        while True:
            result.append(self.value())
            if self.peek() == ",":
                self.at += 1
                continue
            self.expect("]")
            return result
