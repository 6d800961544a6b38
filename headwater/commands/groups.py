"""``headwater groups list|describe|reset-offsets`` (Kafka's kafka-consumer-groups.sh)."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from aiokafka import TopicPartition

from headwater.connect.kafka import clients
from headwater.connect.kafka.admin import commit_group_offsets, describe_group
from headwater.connect.kafka.cluster_view import ClusterView

from .common import add_bootstrap, admin, client_settings, run_async
from .output import fail, print_json, progress, table

__all__ = ["add_parser"]

COMMIT_CHUNK = 100  # partitions per OffsetCommit when resetting (progress is shown between them)


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("groups", help="list and describe consumer groups, reset their offsets")
    actions = parser.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every group with its state and member count")
    describe = actions.add_parser("describe", help="members, committed offsets and lag")
    describe.add_argument("--group", "-g", required=True)
    reset = actions.add_parser("reset-offsets", help="move an inactive group's offsets (a dry run without --execute)")
    reset.add_argument("--group", "-g", required=True)
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", "-t", action="append", metavar="TOPIC[:P,P]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int)
    to.add_argument("--shift-by", type=int)
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM]")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets (else only print them)")
    for p in (listing, describe, reset):
        add_bootstrap(p)
    parser.set_defaults(func=lambda args: run_async(f"headwater groups {args.action}",
                                                    lambda: _ACTIONS[args.action](args)))


async def _list(args: argparse.Namespace) -> int:
    async with ClusterView(args.bootstrap_server, settings=client_settings(args)) as view:
        described = await view.groups()
    rows = [(d.group, d.state or "Dead", d.protocol_type, len(d.members)) for d in described]
    if args.json:
        print_json([{"group": g, "state": s, "protocol_type": p, "members": m} for g, s, p, m in rows])
    else:
        table(["GROUP", "STATE", "PROTOCOL-TYPE", "MEMBERS"], rows)
    return 0


async def _describe(args: argparse.Namespace) -> int:
    async with ClusterView(args.bootstrap_server, settings=client_settings(args)) as view:
        found = await view.group(args.group)
    if found is None:
        return fail(f"headwater groups describe: Consumer group '{args.group}' does not exist.")
    described = found.description
    members = {member: (member, client, host) for member, client, host, _ in described.members}
    rows = []
    for p in found.partitions:
        if p.committed_offset is None:  # assigned, nothing committed: kafka-consumer-groups lists committed ones
            continue
        lag = p.end_offset - p.committed_offset if p.end_offset is not None else None
        member = members.get(p.member_id or "", ("-", "-", "-"))
        rows.append((p.topic, p.partition, p.committed_offset, p.end_offset, lag, *member))
    if args.json:
        print_json({"group": args.group, "state": described.state or "Dead", "protocol": described.protocol,
                    "members": [{"member_id": m, "client_id": c, "host": h,
                                 "assignment": [f"{t}-{p}" for t, p in found.assignment(m)]}
                                for m, c, h, _ in described.members],
                    "offsets": [{"topic": r[0], "partition": r[1], "current_offset": r[2], "log_end_offset": r[3],
                                 "lag": r[4], "consumer_id": r[5], "host": r[6], "client_id": r[7]} for r in rows]})
        return 0
    print(f"Group {args.group}: {described.state or 'Dead'}, {len(described.members)} members")
    table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"], rows)
    return 0


def _scope(args: argparse.Namespace, committed: dict[TopicPartition, Any], partitions: dict[str, int]
           ) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed, key=lambda tp: (tp.topic, tp.partition))
    out = []
    for item in args.topic:
        topic, _, parts = item.partition(":")
        if topic not in partitions:
            raise ValueError(f"--topic: no topic {topic}")
        numbers = [int(p) for p in parts.split(",") if p.strip()] if parts else list(range(partitions[topic]))
        bad = [p for p in numbers if not 0 <= p < partitions[topic]]
        if bad:
            raise ValueError(f"--topic {item}: {topic} has no partition {bad[0]}")
        out += [TopicPartition(topic, p) for p in numbers]
    return out


async def _reset(args: argparse.Namespace) -> int:
    async with admin(args.bootstrap_server, client_settings(args)) as a:
        described = await describe_group(a, args.group)
        if not described.idle:
            return fail(f"headwater groups reset-offsets: Assignments can only be reset if the group '{args.group}' "
                        f"is inactive, but the current state is {described.state}.")
        committed = await a.list_consumer_group_offsets(args.group)
        partitions = {t["topic"]: len(t["partitions"]) for t in await a.describe_topics() if t["error_code"] == 0}
        tps = _scope(args, committed, partitions)
        consumer = clients.consumer(args.bootstrap_server, {}, enable_auto_commit=False, **client_settings(args))
        await consumer.start()
        try:
            starts = await consumer.beginning_offsets(tps)
            ends = await consumer.end_offsets(tps)
            targets: dict[TopicPartition, int] = {}
            if args.to_datetime:
                try:
                    when = datetime.fromisoformat(args.to_datetime)
                except ValueError:
                    raise ValueError(f"--to-datetime {args.to_datetime!r}: not an ISO date-time") from None
                if when.tzinfo is None:
                    when = when.astimezone()
                found = await consumer.offsets_for_times({tp: int(when.timestamp() * 1000) for tp in tps})
                targets = {tp: (found[tp].offset if found.get(tp) else ends[tp]) for tp in tps}
        finally:
            await consumer.stop()
        for tp in tps:
            current = committed[tp].offset if tp in committed else None
            if args.to_earliest:
                targets[tp] = starts[tp]
            elif args.to_latest:
                targets[tp] = ends[tp]
            elif args.to_offset is not None:
                targets[tp] = args.to_offset
            elif args.shift_by is not None:
                targets[tp] = (current if current is not None and current >= 0 else ends[tp]) + args.shift_by
            targets[tp] = min(max(targets[tp], starts[tp]), ends[tp])  # as Kafka: clamped to the log
        rows = [(tp.topic, tp.partition, committed[tp].offset if tp in committed else None, targets[tp])
                for tp in tps]
        if args.execute:
            items = list(targets.items())
            for i in range(0, len(items), COMMIT_CHUNK):
                chunk = items[i:i + COMMIT_CHUNK]
                await commit_group_offsets(a, args.group, {(tp.topic, tp.partition): o for tp, o in chunk})
                progress(min(i + COMMIT_CHUNK, len(items)), len(items), f"resetting {args.group}")
    if args.json:
        print_json([{"topic": t, "partition": p, "previous_offset": c, "new_offset": n} for t, p, c, n in rows])
    else:
        if not args.execute:
            print("Dry run: nothing committed (add --execute).")
        table(["TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"], rows)
    return 0


_ACTIONS = {"list": _list, "describe": _describe, "reset-offsets": _reset}
