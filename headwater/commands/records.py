"""``headwater produce`` and ``headwater consume``: records from stdin and to stdout, as kcat -P / -C."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from typing import Any

from aiokafka import TopicPartition

from headwater.connect.kafka import clients

from .common import add_bootstrap, admin, client_settings, configs, run_async

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    produce = sub.add_parser("produce", help="send stdin's lines as records (kcat -P)")
    produce.add_argument("--topic", "-t", required=True)
    produce.add_argument("--partition", "-p", type=int, help="default: by key, as Kafka's default partitioner")
    produce.add_argument("--key-delimiter", "-K", metavar="DELIM",
                         help="split each line into key DELIM value (the first DELIM)")
    produce.add_argument("--header", "-H", action="append", default=[], metavar="KEY=VALUE",
                         help="a header on every record (repeatable)")
    add_bootstrap(produce)
    produce.set_defaults(func=lambda args: run_async("headwater produce", lambda: _produce(args)))

    consume = sub.add_parser("consume", help="print records to stdout, one a line (kcat -C)")
    consume.add_argument("--topic", "-t", required=True)
    consume.add_argument("--partition", "-p", type=int, action="append", help="only this partition (repeatable)")
    consume.add_argument("--group", "-g", help="consume in this group, committing as it goes")
    consume.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    consume.add_argument("--exit", "-e", action="store_true", help="stop at the end offsets seen at start")
    consume.add_argument("--max-messages", "-c", type=int, help="stop after this many records")
    consume.add_argument("--key-delimiter", "-K", metavar="DELIM", help="print key DELIM value")
    consume.add_argument("--timeout", type=float, default=0, help="stop after this many seconds without a record")
    add_bootstrap(consume)
    consume.set_defaults(func=lambda args: run_async("headwater consume", lambda: _consume(args)))


async def _produce(args: argparse.Namespace) -> int:
    headers = [(k, v.encode()) for k, v in configs(args.header, "--header").items()] or None
    producer = clients.producer(args.bootstrap_server, {}, acks="all", linger_ms=5, **client_settings(args))
    await producer.start()
    sent = 0
    try:
        futures = []
        for line in sys.stdin.buffer:
            line = line.rstrip(b"\n")
            key: bytes | None = None
            if args.key_delimiter is not None:
                head, sep, tail = line.partition(args.key_delimiter.encode())
                key, line = (head, tail) if sep else (None, line)
            futures.append(await producer.send(args.topic, value=line, key=key, partition=args.partition,
                                               headers=headers))
            sent += 1
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    print(f"{sent} records sent to {args.topic}", file=sys.stderr)
    return 0


def _text(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


async def _consume(args: argparse.Namespace) -> int:
    settings = client_settings(args)
    consumer = clients.consumer(args.bootstrap_server, {}, group_id=args.group, enable_auto_commit=bool(args.group),
                                auto_offset_reset="earliest" if args.from_beginning else "latest", **settings)
    await consumer.start()
    count = 0
    out = sys.stdout
    try:
        partitions = await _partitions(args.bootstrap_server, args.topic, settings)
        tps = [TopicPartition(args.topic, p) for p in (args.partition or partitions)]
        if args.group and not args.partition:
            consumer.subscribe([args.topic])
        else:
            consumer.assign(tps)
            if args.from_beginning:
                await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps) if args.exit else {}
        if args.exit and not any(ends.values()):
            return 0  # empty: nothing to wait for
        idle_since = asyncio.get_running_loop().time()
        while True:
            if args.exit and await _at_end(consumer, ends):
                break
            batch = await consumer.getmany(timeout_ms=200)
            now = asyncio.get_running_loop().time()
            if not batch:
                if args.timeout and now - idle_since >= args.timeout:
                    break
                continue
            idle_since = now
            for records in batch.values():
                for r in records:
                    if args.json:
                        line = json.dumps({"topic": r.topic, "partition": r.partition, "offset": r.offset,
                                           "timestamp": r.timestamp, "key": _text(r.key), "value": _text(r.value),
                                           "headers": [[k, _text(v)] for k, v in r.headers]})
                    elif args.key_delimiter is not None:
                        line = f"{_text(r.key) or ''}{args.key_delimiter}{_text(r.value) or ''}"
                    else:
                        line = str(_text(r.value) or "")
                    print(line, file=out)
                    count += 1
                    if args.max_messages and count >= args.max_messages:
                        return 0
            out.flush()
    finally:
        out.flush()
        await consumer.stop()
    return 0


async def _partitions(bootstrap: str, topic: str, settings: dict[str, Any]) -> list[int]:
    async with admin(bootstrap, settings) as a:
        for t in await a.describe_topics():  # all of them: a Metadata request naming a topic may create it
            if t["topic"] == topic and t["error_code"] == 0:
                return sorted(p["partition"] for p in t["partitions"])
    raise ValueError(f"--topic: no topic {topic}")


async def _at_end(consumer: Any, ends: dict[TopicPartition, int]) -> bool:
    """Whether every assigned partition's position reached its end offset seen at start."""
    assigned = consumer.assignment()
    if not assigned:
        return False
    for tp in assigned:
        if await consumer.position(tp) < ends.get(tp, 0):
            return False
    return True
