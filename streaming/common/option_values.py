"""The value checks every command's options use: each turns an option's text into its value or
refuses it with a one-line reason (argparse.ArgumentTypeError), where the option is parsed.

    >>> port("9108"), host_ports(default_port=9876, separators=";")("10.0.0.1;10.0.0.2:9877")
    (9108, '10.0.0.1:9876;10.0.0.2:9877')
    >>> try:
    ...     whole(minimum=1)("0")
    ... except argparse.ArgumentTypeError as refused:
    ...     print(refused)
    expected a positive whole number, got '0'

Options are declared with them in streaming/common/options.py, which reports a refusal as one
line on stderr (`rebalance-monitor run: error: argument --metrics-port: ...`), exit status 2.
"""

from __future__ import annotations

import argparse
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path

MAX_PORT = 65_535


def _named(function: Callable, name: str) -> Callable:
    function.__name__ = name          # argparse names the type in its own messages
    return function


def whole(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    """A whole number within [minimum, maximum] (either open)."""
    if minimum == 1 and maximum is None:
        wanted = "a positive whole number"
    else:
        wanted = " ".join(filter(None, [
            "a whole number", f"of at least {minimum}" if minimum is not None else "",
            ("and " if minimum is not None else "") + f"at most {maximum}"
            if maximum is not None else ""]))

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            value = None
        if value is None or (minimum is not None and value < minimum) or (
                maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        return value
    return _named(parse, "whole number")


def number(minimum: float | None = None, maximum: float | None = None, *,
           above: float | None = None) -> Callable[[str], float]:
    """A finite number within [minimum, maximum], or above `above` (exclusive)."""
    parts = [f"above {above:g}" if above is not None else "",
             f"of at least {minimum:g}" if minimum is not None else "",
             f"at most {maximum:g}" if maximum is not None else ""]
    bounds = " ".join(filter(None, parts))

    def parse(text: str) -> float:
        try:
            value = float(str(text).strip())
        except ValueError:
            value = float("nan")
        if value != value or value in (float("inf"), float("-inf")) or (
                minimum is not None and value < minimum) or (
                maximum is not None and value > maximum) or (
                above is not None and value <= above):
            raise argparse.ArgumentTypeError(
                f"expected a number{' ' + bounds if bounds else ''}, got {text!r}")
        return value
    return _named(parse, "number")


port = whole(minimum=0, maximum=MAX_PORT)
positive = whole(minimum=1)
non_negative = whole(minimum=0)


def not_empty(text: str) -> str:
    if not str(text).strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return str(text)


def one_of(*choices: str, case_insensitive: bool = False) -> Callable[[str], str]:
    def parse(text: str) -> str:
        for choice in choices:
            if text == choice or (case_insensitive and text.lower() == choice.lower()):
                return choice
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(choices)}, got {text!r}")
    return _named(parse, "choice")


def host_ports(default_port: int | None = None, separators: str = ",") -> Callable[[str], str]:
    """HOST:PORT[,HOST:PORT...]; with a default port, a bare HOST takes it (RocketMQ's
    NameServer: 9876). IPv6 hosts go in brackets: [::1]:9092."""
    split = re.compile("[" + re.escape(separators) + "]")

    def parse(text: str) -> str:
        addresses = [a.strip() for a in split.split(str(text)) if a.strip()]
        if not addresses:
            raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
        out = [_host_port(address, default_port) for address in addresses]
        return separators[0].join(out)
    return _named(parse, "host:port")


def _host_port(address: str, default_port: int | None) -> str:
    match = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]/]+)(?::(\d+))?", address)
    if match is None or (match.group(2) is None and default_port is None):
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {address!r}")
    number_ = int(match.group(2)) if match.group(2) is not None else default_port
    if not 1 <= number_ <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"port {number_} of {address!r} is outside 1-{MAX_PORT}")
    return f"{match.group(1)}:{number_}"


def pattern(text: str) -> re.Pattern:
    """A regular expression, compiled."""
    try:
        return re.compile(text)
    except re.error as error:
        raise argparse.ArgumentTypeError(f"not a regular expression ({error}): {text!r}") from None


def key_value(text: str) -> str:
    """KEY=VALUE (a client setting); what the setting means is checked where it is used."""
    key, sep, _ = str(text).partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return str(text)


# What RFC 3986 allows in a URL, less the fragment (the command appends one) and whatever would
# end a plain YAML value or open a Prometheus template.
_URL_CHARACTERS = re.compile(r"[A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=%]+")


def absolute_url(text: str) -> str:
    """An absolute http(s) URL without a fragment: https://wiki.example.com/rebalance/metrics.md"""
    url = str(text).strip()
    try:
        parts = urllib.parse.urlsplit(url) if _URL_CHARACTERS.fullmatch(url) else None
        _ = parts and parts.port        # urlsplit reads a port only when asked
    except ValueError:                  # a bracketed host that is no IPv6 address, a bad port
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(
            f"expected an absolute http(s) URL without '#', got {text!r}")
    return url


def readable_file(text: str) -> Path:
    path = Path(str(text))
    if not str(text).strip() or not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text!r}")
    return path


def names(text: str) -> str:
    """A comma-separated list of non-empty names."""
    items = [item.strip() for item in str(text).split(",")]
    if not items or not all(items):
        raise argparse.ArgumentTypeError(f"expected NAME[,NAME...], got {text!r}")
    return ",".join(items)


_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f]")


def name(text: str) -> str:
    """A name an event carries (a cluster): non-empty, no control character, as the event
    contract's names (docs/events.md)."""
    value = str(text)
    if not value.strip() or _CONTROL_CHARACTER.search(value):
        raise argparse.ArgumentTypeError(
            f"expected a non-empty name without control characters, got {text!r}")
    return value
