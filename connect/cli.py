"""The ``headwater`` command."""

from __future__ import annotations

import argparse
import logging
import sys

__all__ = ["main"]


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _broker(args: argparse.Namespace) -> int:
    from headwater.broker.config import ConfigError, load_broker_config
    from headwater.broker.main import run_broker

    try:
        config = load_broker_config(args.config, args.set)
    except (ConfigError, OSError) as exc:
        print(f"headwater broker: invalid configuration: {exc}", file=sys.stderr)
        return 2
    run_broker(config)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headwater", description="Headwater: a Kafka-protocol broker and Connect workers")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    sub = parser.add_subparsers(dest="command", required=True)
    broker = sub.add_parser("broker", help="run a Kafka-protocol broker")
    broker.add_argument("--config", help="broker .properties file (e.g. configs/broker.properties)")
    broker.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one property, e.g. --set log.dirs=data/broker (repeatable)")
    broker.set_defaults(func=_broker)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
