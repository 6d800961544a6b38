"""The ``headwater`` command: every subcommand of the product.

``broker`` runs a broker, ``connect standalone|distributed`` a Connect worker, ``up`` both in
one process, ``mirror`` MirrorMaker 2's dedicated mode (and ``mirror translate-offsets``).
Subcommands import their room lazily, so ``headwater broker`` never loads Connect.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from .process import run
from .properties import ConfigError

if TYPE_CHECKING:
    from headwater.broker.config.broker_config import BrokerConfig
    from headwater.connect.config import WorkerConfig

__all__ = ["main"]

T = TypeVar("T")


def _setup_logging(level: str, fmt: str = "text") -> None:
    from .logs import setup

    setup(level, fmt)


def _load(invalid: str, load: Callable[[], T], errors: tuple[type[Exception], ...]) -> T | None:
    """``load()``'s configuration, or None once stderr has the ``invalid`` line and the reason."""
    try:
        return load()
    except errors as exc:
        print(f"{invalid}: {exc}", file=sys.stderr)
        return None


def _checked_broker_config(config: BrokerConfig) -> BrokerConfig:
    """``config`` once each listener's keystores and SASL settings are read, and in a cluster the inter-broker
    listener's client side (ConfigError naming the key)."""
    from headwater.broker.security.settings import BadSetting

    try:
        config.listener_security()
    except BadSetting as exc:
        raise ConfigError(str(exc)) from None
    if config.zookeeper_connect:  # a cluster's brokers connect to each other: their client side too
        from headwater.broker.security.inter_broker import inter_broker_security

        inter_broker_security(config)
    return config


def _broker(args: argparse.Namespace) -> int:
    from headwater.broker.config.broker_config import load_broker_config
    from headwater.broker.server import serve

    config = _load("headwater broker: invalid configuration",
                   lambda: _checked_broker_config(load_broker_config(args.config, args.set)), (ConfigError, OSError))
    if config is None:
        return 2
    users = []
    if args.add_scram:
        from headwater.broker.security.credentials import ScramCredentialStore, parse_add_scram

        try:
            users = [parse_add_scram(spec) for spec in args.add_scram]
        except ValueError as exc:
            print(f"headwater broker: {exc}", file=sys.stderr)
            return 2
        if not config.zookeeper_connect:  # a cluster's go to ZooKeeper once the broker has joined
            ScramCredentialStore(config.log_dir).bootstrap(users)
    try:
        run(lambda stop: serve(config, stop, users), record_heavy=False)
    except ConfigError as exc:  # what only starting finds: e.g. broker.id taken in ZooKeeper
        print(f"headwater broker: {exc}", file=sys.stderr)
        return 2
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
    except ConfigError as exc:  # what only starting finds: a keystore, a REST extension
        print(f"headwater connect standalone: invalid worker configuration: {exc}", file=sys.stderr)
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
    except ConfigError as exc:  # what only starting finds: a keystore, a REST extension
        print(f"headwater connect distributed: invalid worker configuration: {exc}", file=sys.stderr)
        return 2
    return 0


def _up(args: argparse.Namespace) -> int:
    from .up import serve_up

    try:
        run(lambda stop: serve_up(args.data_dir, args.kafka_listener, args.rest_listener, args.connectors, stop,
                                  args.plugin_path, args.set, args.broker_set))
    except ConfigError as exc:  # a --set or --broker-set the broker or the worker refuses, named
        print(f"headwater up: invalid configuration: {exc}", file=sys.stderr)
        return 2
    return 0


def _mirror(args: argparse.Namespace) -> int:
    if args.properties == "translate-offsets":
        return _translate_offsets(args)
    given = [flag for flag, value in (("--cluster", args.cluster), ("--source", args.source),
                                      ("--group", args.group), ("--bootstrap-server", args.bootstrap_server),
                                      ("--config", args.config), ("--json", args.json)) if value]
    if args.properties is None or given:
        print("headwater mirror: give the mm2.properties file (headwater mirror mm2.properties [--clusters B ...]); "
              + (f"{', '.join(given)} belong to headwater mirror translate-offsets" if given else
                 "with --clusters, name the file first"), file=sys.stderr)
        return 2
    from aiokafka.errors import KafkaError

    from headwater.connect.herder.membership import MembershipFailed
    from headwater.connect.storage.kafka_log import InternalTopicError
    from headwater.connectors.mirror.dedicated import MirrorConfigError
    from headwater.connectors.mirror.runner import describe, plan_mirror, serve_mirror

    plans = _load("headwater mirror: invalid configuration", lambda: plan_mirror(args.properties, args.clusters),
                  (MirrorConfigError, ConfigError, OSError))
    if plans is None:
        return 2
    try:
        run(lambda stop: serve_mirror(plans, args.clusters, stop))
    except (InternalTopicError, MembershipFailed) as exc:
        print(f"headwater mirror: {exc}", file=sys.stderr)
        return 2
    except (KafkaError, TimeoutError, OSError) as exc:  # a cluster out of reach: the log names the flow
        print(f"headwater mirror: {describe(exc)}", file=sys.stderr)
        return 1
    return 0


def _translate_offsets(args: argparse.Namespace) -> int:
    import json

    from headwater.connectors.mirror.client import RemoteClusterUtils
    from headwater.connectors.mirror.dedicated import MirrorConfigError, cluster_client_settings
    from headwater.connectors.mirror.runner import describe
    from headwater.properties import load_properties

    me = "headwater mirror translate-offsets"
    missing = [flag for flag, value in (("--cluster", args.cluster), ("--source", args.source),
                                        ("--group", args.group)) if not value]
    if missing or args.clusters:
        print(f"{me}: " + (f"{', '.join(missing)} required" if missing else "--clusters is for running flows; "
                           "name the cluster with --cluster"), file=sys.stderr)
        return 2
    props: dict[str, str] = {}
    if args.config:
        loaded = _load(f"{me}: invalid configuration",
                       lambda: cluster_client_settings(load_properties(args.config), args.cluster, args.source),
                       (MirrorConfigError, ConfigError, OSError))
        if loaded is None:
            return 2
        props = loaded
    if args.bootstrap_server:
        props["bootstrap.servers"] = args.bootstrap_server
    if not props.get("bootstrap.servers"):
        print(f"{me}: no bootstrap servers for {args.cluster}: give --bootstrap-server HOST:PORT, or --config "
              f"mm2.properties with {args.cluster}.bootstrap.servers", file=sys.stderr)
        return 2
    try:
        offsets = RemoteClusterUtils.translate_offsets(props, args.source, args.group, args.timeout)
    except Exception as exc:  # unreachable cluster, timeout, unreadable topic: say which and stop
        print(f"{me}: could not read the checkpoints of {args.source} on {args.cluster} "
              f"({props['bootstrap.servers']}): {describe(exc)}", file=sys.stderr)
        return 1
    if not offsets:
        print(f"{me}: no checkpoints of group {args.group!r} from {args.source} on {args.cluster} "
              f"({props['bootstrap.servers']}): is the flow {args.source}->{args.cluster} running with "
              f"MirrorCheckpointConnector, and has the group committed offsets on {args.source}?", file=sys.stderr)
        return 1
    rows = sorted((tp.topic, tp.partition, offset) for tp, offset in offsets.items())
    if args.json:
        print(json.dumps([{"topic": t, "partition": p, "offset": o} for t, p, o in rows], indent=2))
        return 0
    width = max(len("TOPIC"), *(len(t) for t, _, _ in rows))
    print(f"{'TOPIC':<{width}}  {'PARTITION':>9}  {'OFFSET':>12}")
    for topic, partition, offset in rows:
        print(f"{topic:<{width}}  {partition:>9}  {offset:>12}")
    return 0


def _add_set(parser: argparse.ArgumentParser, text: str, flag: str = "--set") -> None:
    """A repeatable ``--set KEY=VALUE`` (or ``flag``) property override."""
    parser.add_argument(flag, action="append", default=[], metavar="KEY=VALUE", help=text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headwater",
                                     description="Headwater: a Kafka-protocol broker and Connect workers")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    parser.add_argument("--log-format", default="text", choices=("text", "json"),
                        help="text lines, or one JSON object a line for log shippers (default text)")
    sub = parser.add_subparsers(dest="command", required=True)
    broker = sub.add_parser("broker", help="run a Kafka-protocol broker")
    broker.add_argument("--config", help="broker .properties file (e.g. configs/broker.properties)")
    _add_set(broker, "override one property, e.g. --set log.dirs=data/broker (repeatable)")
    broker.add_argument("--add-scram", action="append", default=[], metavar="'SCRAM-SHA-512=[name=U,password=P]'",
                        help="a SCRAM user to create if it has none yet, as kafka-storage.sh format --add-scram "
                             "(the first admin of a broker whose listeners all take SCRAM; repeatable)")
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

    # One subcommand for both of MM2's commands: the first word is the mm2.properties file, or
    # translate-offsets (a file name cannot be told from a sub-subcommand by argparse itself).
    mirror = sub.add_parser(
        "mirror", help="MirrorMaker 2's dedicated mode, and translate-offsets",
        usage="headwater mirror mm2.properties [--clusters B [C ...]]\n"
              "       headwater mirror translate-offsets --cluster B --source A --group G "
              "[--bootstrap-server HOST:PORT] [--config mm2.properties] [--json]",
        description="Run the flows of an mm2.properties file (as connect-mirror-maker.sh), or print the offsets a "
                    "consumer group may resume from on a cluster, from the checkpoints mirrored into it.")
    mirror.add_argument("properties", nargs="?", metavar="mm2.properties|translate-offsets",
                        help="MirrorMaker 2 properties file, or translate-offsets")
    mirror.add_argument("--clusters", nargs="+", metavar="ALIAS",
                        help="run only the flows into these clusters (default: every enabled flow)")
    offsets = mirror.add_argument_group("translate-offsets")
    offsets.add_argument("--cluster", help="the cluster the group moves to (checkpoints are read there)")
    offsets.add_argument("--source", help="the cluster the group comes from")
    offsets.add_argument("--group", help="the consumer group")
    offsets.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the --cluster's brokers")
    offsets.add_argument("--config", metavar="mm2.properties",
                         help="read the --cluster's client settings (<cluster>.bootstrap.servers, ...) from here")
    offsets.add_argument("--json", action="store_true", help="print JSON instead of a table")
    offsets.add_argument("--timeout", type=float, default=30.0, help="seconds to read the checkpoints (default 30)")
    mirror.set_defaults(func=_mirror)

    from .commands import add_commands

    add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level, args.log_format)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
