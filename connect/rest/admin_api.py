"""Headwater's extensions to the REST API: topics and consumer groups, under ``/admin`` beside Kafka
Connect's ``/admin/loggers`` (Kafka Connect has no such endpoints). The web console reads them; so
can scripts.

The operations are declared in a table of their own (``ADMIN``) that ``app.py`` includes in its own,
so they are served and documented in ``/openapi.json`` like every other route. They read the
cluster through one ``ClusterView`` per application, closed with it. An unknown topic or group is a
404 (a topic is looked up by listing them all: naming it in a Metadata request could create it); a
cluster that cannot be reached is a 503.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web
from aiokafka import errors as kafka_errors

from ..herder.errors import NotFound
from ..kafka.cluster_view import ClusterView, NewestRecord, TopicOffsets
from ..kafka.security import client_security
from . import models as m
from .openapi import Api, Query

__all__ = ["ADMIN", "install"]

#: Bytes of a key, value or header value shown in a record (the rest is cut: ``truncated``).
SHOWN_BYTES = 4096
#: The longest an answer waits for the cluster.
KAFKA_SECONDS = 30.0
_UNREACHABLE = (503,)

ADMIN = Api()
T = TypeVar("T")


@dataclass
class _Cluster:
    view: ClusterView
    connect_topics: frozenset[str]  # the workers' config, offset and status topics: internal too


CLUSTER: web.AppKey[_Cluster] = web.AppKey("cluster", _Cluster)


def install(app: web.Application, bootstrap: str, connect_topics: set[str],
            security: Mapping[str, str] | None = None) -> None:
    """Give ``app`` the cluster view the handlers read through, closed when the app is cleaned up; ``security``:
    the worker's client security properties."""
    cluster = _Cluster(ClusterView(bootstrap, settings=client_security(security or {})), frozenset(connect_topics))
    app[CLUSTER] = cluster

    async def close(_: web.Application) -> None:
        await cluster.view.close()

    app.on_cleanup.append(close)


async def _ask(request: web.Request, work: Awaitable[T]) -> T:
    """The cluster's answer; a Kafka error, a connection refused or a timeout is a 503 naming it."""
    try:
        return await asyncio.wait_for(work, KAFKA_SECONDS)
    except (kafka_errors.KafkaError, OSError, TimeoutError) as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line: it is an HTTP reason phrase
        raise web.HTTPServiceUnavailable(reason=f"Kafka cannot be reached at {request.app[CLUSTER].view.bootstrap}"
                                                f" ({detail})"[:500]) from None


def _internal(request: web.Request, topic: TopicOffsets) -> bool:
    return topic.internal or topic.topic.startswith("__") or topic.topic in request.app[CLUSTER].connect_topics


def _readable(data: bytes | None) -> tuple[Any, bool]:
    """Bytes as UTF-8 text, or ``{"base64": ...}`` when they are not text; cut to ``SHOWN_BYTES`` (a
    character split by the cut is left out). Returns (the data, whether it was cut)."""
    if data is None:
        return None, False
    cut = len(data) > SHOWN_BYTES
    shown = data[:SHOWN_BYTES]
    try:
        return shown.decode(), cut
    except UnicodeDecodeError as exc:
        if cut and exc.start >= len(shown) - 3 and exc.reason == "unexpected end of data":
            return shown[:exc.start].decode(), cut
        return {"base64": base64.b64encode(shown).decode()}, cut


def _record(r: NewestRecord) -> dict[str, Any]:
    key, key_cut = _readable(r.key)
    value, value_cut = _readable(r.value)
    headers, cuts = [], [key_cut, value_cut]
    for name, data in r.headers:
        shown, cut = _readable(data)
        headers.append({"key": name, "value": shown})
        cuts.append(cut)
    return {"partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
            "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
            "key": key, "value": value, "headers": headers, "truncated": any(cuts)}


@ADMIN.route("GET", "/admin/topics", "Headwater: every topic with its partition count and offsets",
             response=m.TopicSummaries, errors=_UNREACHABLE)
async def list_topics(request: web.Request) -> web.Response:
    topics = await _ask(request, request.app[CLUSTER].view.topics())
    return web.json_response([
        {"topic": t.topic, "internal": _internal(request, t), "partitions": len(t.partitions),
         "start_offset": sum(p.start_offset for p in t.partitions),
         "end_offset": sum(p.end_offset for p in t.partitions), "records": sum(p.records for p in t.partitions)}
        for t in topics])


def _topic_name(request: web.Request) -> str:
    return request.match_info["topic"]


@ADMIN.route("GET", "/admin/topics/{topic}", "Headwater: a topic's partitions with their start and end offsets, "
             "and its config overrides", response=m.TopicDetail, errors=_UNREACHABLE)
async def get_topic(request: web.Request) -> web.Response:
    name = _topic_name(request)
    view = request.app[CLUSTER].view
    topic = await _ask(request, view.topic(name))
    if topic is None:
        raise NotFound(f"Topic {name} not found")
    configs = await _ask(request, view.configs(name))
    return web.json_response({
        "topic": topic.topic, "internal": _internal(request, topic), "configs": configs,
        "partitions": [{"partition": p.partition, "leader": p.leader, "replicas": p.replicas, "isr": p.isr,
                        "start_offset": p.start_offset, "end_offset": p.end_offset, "records": p.records}
                       for p in topic.partitions]})


@ADMIN.route("GET", "/admin/topics/{topic}/records", "Headwater: a topic's newest records, newest first (keys, "
             "values and headers as UTF-8 text, or base64 when they are not text); not those of internal topics "
             "(the workers' configs, offsets and statuses, the broker's __ topics)", response=m.TopicRecords,
             query=(Query("limit", "How many records (default 20)", integer=True, minimum=1, maximum=500),),
             errors=_UNREACHABLE, refusals={403: "an internal topic: the workers' configs, offsets and statuses, or "
                                                 "one of the broker's __ topics"})
async def topic_records(request: web.Request) -> web.Response:
    name = _topic_name(request)
    limit = int(request.query.get("limit", "20"))  # checked against the declared range already
    if name.startswith("__") or name in request.app[CLUSTER].connect_topics:
        # connector configs (with whatever secrets were written in clear), offsets, statuses: not for a browser
        raise web.HTTPForbidden(reason=f"Records of the internal topic {name} are not served: it holds the "
                                       f"workers' state (connector configs among it)")
    records = await _ask(request, request.app[CLUSTER].view.newest_records(name, limit))
    if records is None:
        raise NotFound(f"Topic {name} not found")
    return web.json_response({"topic": name, "records": [_record(r) for r in records]})


@ADMIN.route("GET", "/admin/groups", "Headwater: every consumer group (sink connectors' and workers' included) "
             "with its state and member count", response=m.GroupSummaries, errors=_UNREACHABLE)
async def list_groups(request: web.Request) -> web.Response:
    groups = await _ask(request, request.app[CLUSTER].view.groups())
    return web.json_response([{"group": g.group, "state": g.state or "Dead", "protocol_type": g.protocol_type,
                               "members": len(g.members)} for g in groups])


@ADMIN.route("GET", "/admin/groups/{group}", "Headwater: a group's members, and per partition its committed "
             "offset, the end offset and the lag", response=m.GroupDetail, errors=_UNREACHABLE)
async def get_group(request: web.Request) -> web.Response:
    name = request.match_info["group"]
    found = await _ask(request, request.app[CLUSTER].view.group(name))
    if found is None:
        raise NotFound(f"Group {name} not found")
    d = found.description
    return web.json_response({
        "group": d.group, "state": d.state or "Dead", "protocol_type": d.protocol_type, "protocol": d.protocol,
        "members": [{"member_id": member, "client_id": client, "host": host,
                     "assignment": [{"topic": t, "partition": p} for t, p in found.assignment(member)]}
                    for member, client, host, _ in d.members],
        "offsets": [{"topic": p.topic, "partition": p.partition, "committed_offset": p.committed_offset,
                     "end_offset": p.end_offset, "lag": p.lag, "member_id": p.member_id} for p in found.partitions],
        "lag": sum(p.lag or 0 for p in found.partitions)})
