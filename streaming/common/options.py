"""Every command's options, declared one way: each command's options are one frozen dataclass
whose fields are made by `option(...)` (or `switch(...)` for a flag without a value).

From one declaration come the flag (`--<field-name>` with dashes, or the declared `flag`), its
environment default `REBALANCE_MONITOR_<FLAG>` (then any declared `fallback_env`, such as
KAFKA_BOOTSTRAP_SERVERS), its `--help` line (with its default and its variable) and the parse
of its text by its value parser (streaming/common/option_values.py), the only check of its
values. A flag wins over its variable; a repeated option's variable holds one value a line, and
its flags come after those lines.

    >>> from dataclasses import dataclass
    >>> from streaming.common import option_values as values
    >>> @dataclass(frozen=True)
    ... class Greet:
    ...     name: str = option("who to greet", default="world")
    ...     times: int = option("how often", values.positive, default=1, metavar="N")
    >>> parser = OneLineParser(prog="rebalance-monitor greet")
    >>> add_arguments(parser, Greet)
    >>> parser.parse_args(["--times", "2"], environ={"REBALANCE_MONITOR_NAME": "you"}).config
    Greet(name='you', times=2)

`OneLineParser` builds each declared dataclass while it parses (`args.config`, and any other
`dest`), so every refusal, of a flag, of a variable or of a combination (a class's
`check_options`), is one line `rebalance-monitor CMD: error: ...` on stderr naming the flag or
the variable, with exit status 2: never a usage block nor a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from functools import partial
from typing import Any

ENV_PREFIX = "REBALANCE_MONITOR_"


class OptionError(ValueError):
    """An option (flag, variable or combination) that cannot be taken; one line naming it."""


@dataclass(frozen=True)
class Option:
    """What the command line knows about one field of an options dataclass."""

    help: str
    parse: Callable[[str], Any] = str  # text -> value; raises ValueError/ArgumentTypeError
    metavar: str | None = None
    flag: str | None = None       # default: the field name with dashes
    required: bool = False        # no default: the flag or a variable must be set
    repeated: bool = False        # the flag may be given many times; the variable has one a line
    combine: Callable[[list], Any] = tuple  # a repeated option's values -> the field's value
    switch: bool = False          # a flag without a value; its variable says on or off
    shown_default: str | None = None  # the default as --help shows it
    fallback_env: tuple[str, ...] = ()  # read after REBALANCE_MONITOR_<FLAG>, in this order
    group: str | None = None      # the --help section it is listed in


def option(help: str, parse: Callable[[str], Any] = str, *, default: Any = MISSING,
           default_factory: Any = MISSING, **details: Any) -> Any:
    """A dataclass field declared together with its command-line option."""
    return field(default=default, default_factory=default_factory,
                 metadata={"option": Option(help=help, parse=parse, **details)})


def declared_in(cls, name: str) -> Any:
    """The field `name` as the options dataclass `cls` declares it (its option and default),
    for another command that takes the same option: one declaration for both."""
    source = next(each for each in fields(cls) if each.name == name)
    return field(default=source.default, default_factory=source.default_factory,
                 metadata=source.metadata)


def switch(help: str, on_off: Callable[[str, str, bool], bool], **details: Any) -> Any:
    """A flag without a value (off unless given); its variable holds on or off, read by `on_off`
    (streaming.core.switches.parse_bool, the project's one on/off parser)."""
    return option(help, partial(_switch_value, on_off), default=False, switch=True,
                  metavar="ON|OFF", shown_default="off", **details)


def _switch_value(on_off: Callable[[str, str, bool], bool], text: str) -> bool:
    return on_off(text, "the value", False)


def options(cls) -> Iterator[tuple[Field, Option]]:
    """Every field of an options dataclass with its option, in declaration order."""
    for each in fields(cls):
        yield each, each.metadata["option"]


def flag_of(each: Field) -> str:
    return "--" + (each.metadata["option"].flag or each.name.replace("_", "-"))


def refused(config: Any, name: str, why: str) -> OptionError:
    """The error for option `name` of the built `config`, whose value only the command's start
    could judge (a port in use, a directory it cannot write): `--flag VALUE: why`."""
    each = next(f for f in fields(config) if f.name == name)
    return OptionError(f"{flag_of(each)} {getattr(config, name)}: {why}")


def env_of(each: Field) -> str:
    return ENV_PREFIX + flag_of(each).removeprefix("--").upper().replace("-", "_")


def variables_of(each: Field) -> tuple[str, ...]:
    """The variables read for the option, first wins: its own, then its fallbacks."""
    return (env_of(each), *each.metadata["option"].fallback_env)


def default_of(each: Field) -> Any:
    if each.default_factory is not MISSING:
        return each.default_factory()
    return None if each.default is MISSING else each.default


def help_of(each: Field, opt: Option) -> str:
    env = "env " + ", else ".join(variables_of(each))
    if opt.required:
        where = f"required; {env}"
    else:
        shown = opt.shown_default if opt.shown_default is not None else each.default
        where = f"default: {shown}; {env}"
    return f"{opt.help} ({where})".replace("%", "%%")  # argparse %-formats help


def _argument_type(opt: Option) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return opt.parse(text)
        except (TypeError, ValueError) as error:  # argparse reports ArgumentTypeError itself
            raise argparse.ArgumentTypeError(str(error)) from None
    parse.__name__ = getattr(opt.parse, "__name__", "value")
    return parse


# Not given on the command line (a flag's value may be None, e.g. --shuffle-partitions auto).
_UNSET = object()


def add_arguments(parser: argparse.ArgumentParser, cls, dest: str = "config") -> None:
    """The flags of every field of `cls`; a OneLineParser sets `dest` to the built `cls`."""
    groups: dict[str | None, Any] = {None: parser}
    for each, opt in options(cls):
        if opt.group not in groups:
            groups[opt.group] = parser.add_argument_group(opt.group)
        if opt.switch:
            kind: dict[str, Any] = {"action": "store_const", "const": True}
        else:
            kind = {"type": _argument_type(opt), "metavar": opt.metavar,
                    "action": "append" if opt.repeated else "store"}
        groups[opt.group].add_argument(flag_of(each), dest=each.name, help=help_of(each, opt),
                                       default=None if opt.repeated else _UNSET, **kind)
    parser.set_defaults(**{_CLASSES: {**(parser.get_default(_CLASSES) or {}), dest: cls}})


_CLASSES = "_option_classes"
_PROG = "_options_prog"     # the prog of the parser that built them, for its errors


def config_from_args(cls, args: argparse.Namespace,
                     environ: Mapping[str, str] = os.environ) -> Any:
    """Each option's flag (parsed by argparse), else its variable, else its default; a repeated
    option's values are its variable's lines, then its flags'. Raises OptionError."""
    given: dict[str, Any] = {}
    for each, opt in options(cls):
        flag = getattr(args, each.name, _UNSET)
        if opt.repeated:
            lines = _from_env(each, opt, environ)
            items = [*(lines if lines is not _UNSET else []),
                     *(flag if flag not in (_UNSET, None) else [])]
            try:
                value = opt.combine(items)
            except (TypeError, ValueError) as error:
                raise OptionError(f"{_given_as(each, flag, environ)}: {error}") from None
        elif flag is not _UNSET:
            value = flag
        elif (from_env := _from_env(each, opt, environ)) is not _UNSET:
            value = from_env
        elif opt.required:
            raise OptionError(f"{flag_of(each)} (or {' or '.join(variables_of(each))}) is "
                              "required")
        else:
            value = default_of(each)
        given[each.name] = value
    config = cls(**given)
    check = getattr(config, "check_options", None)
    return check() or config if check is not None else config


def _given_as(each: Field, flag: Any, environ: Mapping[str, str]) -> str:
    """How a repeated option's values were given: its flag, its variable, or both."""
    variable = next((name for name in variables_of(each) if name in environ), None)
    if variable is None:
        return flag_of(each)
    return variable if flag in (_UNSET, None) else f"{flag_of(each)} (with {variable})"


def _from_env(each: Field, opt: Option, environ: Mapping[str, str]) -> Any:
    """The parsed value of the option's first set variable (a repeated option's: the list of
    its lines' values), or _UNSET when none is set."""
    name = next((name for name in variables_of(each) if name in environ), None)
    if name is None:
        return _UNSET
    text = environ[name]
    try:
        if opt.repeated:  # one value a line
            return [opt.parse(line.strip()) for line in text.splitlines() if line.strip()]
        return opt.parse(text)
    except (TypeError, ValueError, argparse.ArgumentTypeError) as error:
        # A repeated option's error quotes its bad line only: the others may hold secrets.
        shown = name if opt.repeated else f"{name}={text!r}"
        raise OptionError(f"{shown} (the default of {flag_of(each)}): {error}") from None


class OneLineParser(argparse.ArgumentParser):
    """argparse, with every error one line and exit status 2, that builds the options
    dataclasses added with `add_arguments` while it parses."""

    def __init__(self, *args: Any, environ: Mapping[str, str] | None = None,
                 **kwargs: Any) -> None:
        # No abbreviations: a renamed flag (--interval, now --interval-seconds) must be refused,
        # not taken as the start of its new name.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.environ = environ

    def error(self, message: str):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)

    def parse_args(self, args=None, namespace=None, *, environ: Mapping[str, str] | None = None):
        if environ is not None:
            self.environ = environ
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:  # said by the subcommand that was given them: `rebalance-monitor run: ...`
            print(f"{getattr(namespace, _PROG, self.prog)}: error: unrecognized arguments: "
                  f"{' '.join(extras)}", file=sys.stderr)
            sys.exit(2)
        return namespace

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        for dest, cls in (getattr(namespace, _CLASSES, None) or {}).items():
            if isinstance(getattr(namespace, dest, None), cls):
                continue            # built by the subcommand's parser
            try:
                built = config_from_args(cls, namespace, self._environ())
            except OptionError as error:
                self.error(str(error))
            setattr(namespace, dest, built)
            setattr(namespace, _PROG, self.prog)
        return namespace, extras

    def _environ(self) -> Mapping[str, str]:
        return os.environ if self.environ is None else self.environ
