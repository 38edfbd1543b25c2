"""`rebalance-monitor` command line: one subcommand per module, each owning its arguments.

Every subcommand module exposes `add_arguments(parser)` and `main(args) -> int`. Modules are
imported only when their subcommand runs, so `allocate` never pays for importing Spark.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "allocate": ("streaming.allocate_cli", "preview an allocation, or run conformance cases"),
    "run": ("streaming.spark.job", "run the streaming job"),
    "demo": ("streaming.demo", "embedded broker + scenario + job + /metrics on one machine"),
    "simulate": ("producers.simulator.cli", "RocketMQ fleet simulator with ground truth"),
    "observe-kafka": ("producers.kafka_observer", "emit events for a Kafka cluster's groups"),
    "observe-rocketmq": ("producers.rocketmq.cli",
                         "emit events for a RocketMQ cluster's groups (from its NameServer)"),
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rebalance-monitor", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        # Only the chosen subcommand's module is imported (and may add arguments).
        if argv and argv[0] == name:
            module = importlib.import_module(module_name)
            module.add_arguments(sub_parser)
            sub_parser.set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
