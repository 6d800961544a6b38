"""``headwater topics list|describe|create|alter|delete`` (Kafka's kafka-topics.sh)."""

from __future__ import annotations

import argparse
from typing import Any

from aiokafka.admin import NewPartitions
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from headwater.connect.kafka.cluster_view import ClusterView
from headwater.connect.kafka.topics import TopicCreationFailed, create_topic, topic_overrides
from headwater.kafka.errors import ErrorCode

from .common import add_bootstrap, admin, client_settings, configs, run_async
from .output import fail, print_json, table

__all__ = ["add_parser", "describe_topics"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("topics", help="list, describe, create, alter and delete topics")
    actions = parser.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every topic with its partition count")
    listing.add_argument("--exclude-internal", action="store_true", help="leave out __consumer_offsets and the like")
    describe = actions.add_parser("describe", help="partitions (leader, replicas, offsets) and configs")
    describe.add_argument("--topic", "-t", action="append", default=[], help="a topic (repeatable; default: all)")
    create = actions.add_parser("create", help="create a topic")
    create.add_argument("--topic", "-t", required=True)
    create.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=int, default=-1, help="default: the broker's")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config")
    alter = actions.add_parser("alter", help="add partitions, set or delete configs")
    alter.add_argument("--topic", "-t", required=True)
    alter.add_argument("--partitions", type=int, help="the new partition count (only ever more)")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="set a topic config")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="back to the broker's default")
    delete = actions.add_parser("delete", help="delete a topic")
    delete.add_argument("--topic", "-t", required=True, action="append")
    for p in (listing, describe, create, alter, delete):
        add_bootstrap(p)
    parser.set_defaults(func=lambda args: run_async(f"headwater topics {args.action}",
                                                    lambda: _ACTIONS[args.action](args)))


async def _list(args: argparse.Namespace) -> int:
    async with admin(args.bootstrap_server, client_settings(args)) as a:
        topics = await a.describe_topics()
    rows = sorted((t["topic"], len(t["partitions"])) for t in topics
                  if not (args.exclude_internal and (t.get("is_internal") or t["topic"].startswith("__"))))
    if args.json:
        print_json([{"topic": t, "partitions": n} for t, n in rows])
    else:
        table(["TOPIC", "PARTITIONS"], rows)
    return 0


async def describe_topics(bootstrap: str, names: list[str],
                          settings: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each topic's partitions (leader, replicas, in-sync replicas, start and end offsets) and its own configs."""
    async with ClusterView(bootstrap, settings=settings) as view:
        topics = await view.topics(names or None)
        missing = [t for t in names if t not in {found.topic for found in topics}]
        if missing:
            raise ValueError(f"--topic: no topic {', '.join(missing)}")
        overrides = await topic_overrides(await view.admin(), [t.topic for t in topics])
    return [{"topic": t.topic, "configs": overrides.get(t.topic, {}),
             "partitions": [{"partition": p.partition, "leader": p.leader, "replicas": p.replicas, "isr": p.isr,
                             "start_offset": p.start_offset, "end_offset": p.end_offset} for p in t.partitions]}
            for t in topics]


async def _describe(args: argparse.Namespace) -> int:
    described = await describe_topics(args.bootstrap_server, args.topic, client_settings(args))
    if args.json:
        print_json(described)
        return 0
    for i, t in enumerate(described):
        if i:
            print()
        configs_text = ",".join(f"{k}={v}" for k, v in sorted(t["configs"].items())) or "-"
        print(f"Topic: {t['topic']}\tPartitionCount: {len(t['partitions'])}\tConfigs: {configs_text}")
        table(["PARTITION", "LEADER", "REPLICAS", "ISR", "START", "END"],
              [(p["partition"], p["leader"], ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])),
                p["start_offset"], p["end_offset"]) for p in t["partitions"]])
    return 0


async def _create(args: argparse.Namespace) -> int:
    settings = configs(args.config, "--config")
    async with admin(args.bootstrap_server, client_settings(args)) as a:
        try:
            created = await create_topic(a, args.topic, args.partitions, args.replication_factor, settings)
        except TopicCreationFailed as exc:
            return fail(f"headwater topics create: {exc}")
    if not created:
        return fail(f"headwater topics create: Topic '{args.topic}' already exists.")
    print(f"Created topic {args.topic}.")
    return 0


async def _alter(args: argparse.Namespace) -> int:
    settings = configs(args.config, "--config")
    if args.partitions is None and not settings and not args.delete_config:
        raise ValueError("nothing to change: give --partitions, --config or --delete-config")
    async with admin(args.bootstrap_server, client_settings(args)) as a:
        if args.partitions is not None:
            response = await a.create_partitions({args.topic: NewPartitions(total_count=args.partitions)})
            del response  # errors are raised by the client
            print(f"{args.topic}: {args.partitions} partitions.")
        if settings or args.delete_config:
            current = (await topic_overrides(a, [args.topic])).get(args.topic, {})
            unknown = [k for k in args.delete_config if k not in current]
            if unknown:
                raise ValueError(f"--delete-config: {', '.join(unknown)} not set on {args.topic}")
            wanted = {k: v for k, v in {**current, **settings}.items() if k not in args.delete_config}
            responses = await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, args.topic, configs=wanted)])
            for response in responses:
                for code, message, *_ in response.resources:
                    if code:
                        return fail(f"headwater topics alter: {ErrorCode(code).name}: {message}")
            print(f"{args.topic}: configs {','.join(f'{k}={v}' for k, v in sorted(wanted.items())) or '(defaults)'}.")
    return 0


async def _delete(args: argparse.Namespace) -> int:
    async with admin(args.bootstrap_server, client_settings(args)) as a:
        response = await a.delete_topics(args.topic)
    failed = [(topic, code) for topic, code, *_ in response.topic_error_codes if code]
    for topic, code in failed:
        print(f"headwater topics delete: {topic}: {ErrorCode(code).name}", flush=True)
    for topic in args.topic:
        if topic not in {t for t, _ in failed}:
            print(f"Deleted topic {topic}.")
    return 1 if failed else 0


_ACTIONS = {"list": _list, "describe": _describe, "create": _create, "alter": _alter, "delete": _delete}
