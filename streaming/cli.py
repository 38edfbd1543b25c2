"""`rebalance-monitor` command line: one subcommand per module, each owning its arguments.

Every subcommand module exposes `add_arguments(parser)`, which declares its options dataclass
(streaming/common/options.py), and `main(config) -> int`, which receives that dataclass built.
Modules are imported only when their subcommand runs, so `allocate` never pays for importing
Spark.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from streaming.common import options
from streaming.common.logs import LogOptions, configure_logging
from streaming.common.options import OneLineParser, OptionError

SUBCOMMANDS = {
    "allocate": ("streaming.allocate_cli", "preview an allocation, or run conformance cases"),
    "run": ("streaming.spark.job", "run the streaming job"),
    "demo": ("streaming.demo",
             "Apache Kafka + simulated RocketMQ fleet + the job + /metrics on one machine"),
    "simulate": ("producers.simulator.cli", "RocketMQ fleet simulator with ground truth"),
    "observe-kafka": ("producers.kafka.cli", "emit events for a Kafka cluster's groups"),
    "observe-rocketmq": ("producers.rocketmq.cli",
                         "emit events for a RocketMQ cluster's groups (from its NameServer)"),
    "alert-rules": ("streaming.alert_rules",
                    "print the alert rules with runbook links to your copy of the docs"),
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = OneLineParser(prog="rebalance-monitor", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=OneLineParser)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        options.add_arguments(sub_parser, LogOptions, dest="logging")
        # Only the chosen subcommand's module is imported (and may add arguments).
        if argv and argv[0] == name:
            module = _import(name, module_name)
            module.add_arguments(sub_parser)
            sub_parser.set_defaults(handler=module.main)
    return parser


# The commands that run the streaming job, and what the `job` extra installs for them
# (pyproject.toml); the base install runs the producers only.
JOB_COMMANDS = frozenset({"run", "demo"})
JOB_MODULES = ("pyspark", "pandas", "pyarrow")


def _import(command: str, module_name: str):
    missing = [m for m in JOB_MODULES if importlib.util.find_spec(m) is None] \
        if command in JOB_COMMANDS else []
    if missing:
        print(f"rebalance-monitor {command}: needs the streaming job's packages (missing "
              f"{', '.join(missing)}): pip install 'rebalance-monitor[job]'", file=sys.stderr)
        sys.exit(2)
    return importlib.import_module(module_name)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    logs = args.logging
    configure_logging(logs.level("WARNING" if args.command == "demo" else "INFO"), logs.log_format)
    try:
        return int(args.handler(args.config) or 0)
    except OptionError as error:     # a value judged when the command starts: a port in use
        print(f"rebalance-monitor {args.command}: error: {error}", file=sys.stderr)
        return 2


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("rebalance-monitor")
    except PackageNotFoundError:       # run from a source tree (spark-submit with the zip)
        return "unknown (not installed)"


if __name__ == "__main__":
    sys.exit(main())
