"""The ``headwater`` command: every subcommand of the product.

``broker`` runs a broker, ``connect standalone|distributed`` a Connect worker, ``up`` both in
one process. Subcommands import their room lazily, so ``headwater broker`` never loads Connect.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from .process import run
from .properties import ConfigError

if TYPE_CHECKING:
    from headwater.connect.config import WorkerConfig

__all__ = ["main"]

T = TypeVar("T")


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _load(invalid: str, load: Callable[[], T], errors: tuple[type[Exception], ...]) -> T | None:
    """``load()``'s configuration, or None once stderr has the ``invalid`` line and the reason."""
    try:
        return load()
    except errors as exc:
        print(f"{invalid}: {exc}", file=sys.stderr)
        return None


def _broker(args: argparse.Namespace) -> int:
    from headwater.broker.config import load_broker_config
    from headwater.broker.main import serve

    config = _load("headwater broker: invalid configuration",
                   lambda: load_broker_config(args.config, args.set), (ConfigError, OSError))
    if config is None:
        return 2
    run(lambda stop: serve(config, stop), record_heavy=False)
    return 0


def _worker_config(args: argparse.Namespace) -> WorkerConfig | None:
    from headwater.connect.config import load_worker_config

    return _load(f"headwater connect {args.mode}: invalid worker configuration",
                 lambda: load_worker_config(args.worker_properties, args.set), (ConfigError, OSError))


def _standalone(args: argparse.Namespace) -> int:
    from headwater.connect.main import serve_standalone
    from headwater.connect.storage import OffsetStoreError

    config = _worker_config(args)
    if config is None:
        return 2
    try:
        run(lambda stop: serve_standalone(config, args.connectors, stop))
    except OffsetStoreError as exc:
        print(f"headwater connect standalone: {exc}", file=sys.stderr)
        return 2
    return 0


def _distributed(args: argparse.Namespace) -> int:
    from headwater.connect.herder.membership import MembershipFailed
    from headwater.connect.main import serve_distributed
    from headwater.connect.storage.kafka_log import InternalTopicError

    config = _worker_config(args)
    if config is None:
        return 2
    try:
        run(lambda stop: serve_distributed(config, stop))
    except (InternalTopicError, MembershipFailed) as exc:
        print(f"headwater connect distributed: {exc}", file=sys.stderr)
        return 2
    return 0


def _up(args: argparse.Namespace) -> int:
    from .up import serve_up

    run(lambda stop: serve_up(args.data_dir, args.kafka_listener, args.rest_listener, args.connectors, stop,
                              args.plugin_path, args.set, args.broker_set))
    return 0


def _add_set(parser: argparse.ArgumentParser, text: str, flag: str = "--set") -> None:
    """A repeatable ``--set KEY=VALUE`` (or ``flag``) property override."""
    parser.add_argument(flag, action="append", default=[], metavar="KEY=VALUE", help=text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headwater",
                                     description="Headwater: a Kafka-protocol broker and Connect workers")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    sub = parser.add_subparsers(dest="command", required=True)
    broker = sub.add_parser("broker", help="run a Kafka-protocol broker")
    broker.add_argument("--config", help="broker .properties file (e.g. configs/broker.properties)")
    _add_set(broker, "override one property, e.g. --set log.dirs=data/broker (repeatable)")
    broker.set_defaults(func=_broker)

    connect = sub.add_parser("connect", help="run a Connect worker")
    modes = connect.add_subparsers(dest="mode", required=True)
    standalone = modes.add_parser("standalone", help="one worker; offsets in offset.storage.file.filename")
    standalone.add_argument("worker_properties", help="worker .properties file")
    standalone.add_argument("connectors", nargs="*", help="connector configs (.json or .properties)")
    _add_set(standalone, "override one worker property (repeatable)")
    standalone.set_defaults(func=_standalone)

    distributed = modes.add_parser("distributed", help="a worker of a cluster sharing group.id")
    distributed.add_argument("worker_properties", help="worker .properties file")
    _add_set(distributed, "override one worker property (repeatable)")
    distributed.set_defaults(func=_distributed)

    up = sub.add_parser("up", help="a broker, a worker and the REST API in one process")
    up.add_argument("connectors", nargs="*", help="connector configs to create (.json or .properties)")
    up.add_argument("--data-dir", default="data", help="where logs and offsets live (default ./data)")
    up.add_argument("--kafka-listener", default="127.0.0.1:9092", help="HOST:PORT of the broker (default %(default)s)")
    up.add_argument("--rest-listener", default="127.0.0.1:8083", help="HOST:PORT of the REST API (default %(default)s)")
    up.add_argument("--plugin-path", default="plugins", help="folder of plugins (default ./plugins)")
    _add_set(up, "override one worker property, e.g. --set offset.flush.interval.ms=1000 (repeatable)")
    _add_set(up, "override one broker property, e.g. --broker-set num.partitions=6 (repeatable)",
             "--broker-set")
    up.set_defaults(func=_up)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
