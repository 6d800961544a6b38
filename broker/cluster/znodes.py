"""Kafka's ZooKeeper layout for what the cluster writes and reads: broker registrations, the controller, topics
(their assignment, configs, partition states) and topic deletions.

The JSON is what Kafka's ``BrokerIdZNode`` (version 4) and ``ControllerZNode`` hold, so Kafka's tools
(``zookeeper-shell``, ``kafka-broker-api-versions``' operators) read it as they would Kafka's.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..config.broker_config import Listener

BROKER_IDS = "/brokers/ids"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


@dataclass(frozen=True)
class RegisteredBroker:
    """A live broker as its /brokers/ids/<id> znode describes it."""

    broker_id: int
    endpoints: dict[str, tuple[str, int]]  # listener name -> advertised (host, port)
    rack: str | None = None
    epoch: int = -1  # the znode's czxid, Kafka's broker epoch: a new registration has a higher one (-1: not read)


@dataclass(frozen=True)
class ClusterView:
    """The live brokers (by id) and the controller's id (-1 while none is elected), as ZooKeeper last said."""

    brokers: dict[int, RegisteredBroker] = field(default_factory=dict)
    controller_id: int = -1


def now_ms() -> str:
    return str(int(time.time() * 1000))


def broker_registration(endpoints: list[Listener], protocols: dict[str, str], rack: str | None) -> bytes:
    """Kafka's BrokerIdZNode v4: ``host``/``port`` are the PLAINTEXT endpoint's (null and -1 without one)."""
    plain = next((e for e in endpoints if protocols.get(e.name) == "PLAINTEXT"), None)
    data: dict[str, Any] = {
        "version": 4,
        "host": plain.host if plain else None,
        "port": plain.port if plain else -1,
        "endpoints": [f"{e.name}://{e.host}:{e.port}" for e in endpoints],
        "listener_security_protocol_map": {e.name: protocols[e.name] for e in endpoints},
        "jmx_port": -1,
        "timestamp": now_ms(),
    }
    if rack is not None:
        data["rack"] = rack
    return json.dumps(data).encode()


def parse_registration(broker_id: int, raw: bytes) -> RegisteredBroker:
    """A /brokers/ids/<id> znode's data; ValueError when it is not Kafka's JSON."""
    try:
        data = json.loads(raw)
        endpoints = {}
        for url in data.get("endpoints") or []:
            name, _, rest = url.partition("://")
            host, _, port = rest.rpartition(":")
            endpoints[name] = (host.strip("[]"), int(port))
        if not endpoints and data.get("host"):
            endpoints["PLAINTEXT"] = (data["host"], int(data["port"]))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"{broker_path(broker_id)} is not a broker registration: {exc}") from None
    return RegisteredBroker(broker_id, endpoints, data.get("rack"))


def controller_data(broker_id: int) -> bytes:
    return json.dumps({"version": 1, "brokerid": broker_id, "timestamp": now_ms()}).encode()


def parse_controller(raw: bytes) -> int:
    """The controller's broker id from /controller's data; ValueError when it is not Kafka's JSON."""
    try:
        return int(json.loads(raw)["brokerid"])
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"{CONTROLLER} does not name a broker: {exc}") from None


# -- topics (Kafka's TopicZNode, TopicPartitionStateZNode, ConfigEntityZNode, DeleteTopicsTopicZNode) --------------

BROKER_TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, index: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{index}"


def state_path(topic: str, index: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{index}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


Assignment = dict[int, tuple[int, ...]]  # partition index -> replica broker ids, the preferred leader first


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: the 16 bytes in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def topic_data(topic_id: uuid.UUID, assignment: Assignment, adding: Assignment | None = None,
               removing: Assignment | None = None) -> bytes:
    """Kafka's TopicZNode (version 3, as Kafka 2.8+ writes it: the topic id beside the assignment, and the
    replicas being added and removed by a reassignment, only for the partitions that have some)."""
    return json.dumps({"version": 3, "topic_id": kafka_uuid(topic_id),
                       "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
                       "adding_replicas": {str(p): list(r) for p, r in sorted((adding or {}).items()) if r},
                       "removing_replicas": {str(p): list(r) for p, r in sorted((removing or {}).items()) if r},
                       }).encode()


def parse_topic(topic: str, raw: bytes) -> tuple[uuid.UUID, Assignment]:
    """(topic id, assignment) from /brokers/topics/<t>; ValueError naming the znode when it is not Kafka's JSON.
    A topic written without an id (versions 1 and 2) gets one derived from its name, the same on every broker."""
    try:
        data = json.loads(raw)
        assignment = {int(p): tuple(int(b) for b in replicas) for p, replicas in data["partitions"].items()}
        raw_id = data.get("topic_id")
        topic_id = parse_kafka_uuid(raw_id) if raw_id else uuid.uuid5(uuid.NAMESPACE_URL, f"kafka-topic:{topic}")
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{topic_path(topic)} is not a topic assignment: {exc!r}") from None
    return topic_id, assignment


def topic_config_data(overrides: dict[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": overrides}).encode()


def parse_topic_config(topic: str, raw: bytes | None) -> dict[str, str]:
    """The overrides in /config/topics/<t> (none when the znode is missing or empty)."""
    return parse_entity_config(topic_config_path(topic), raw)


# -- entity configs and their change notifications (Kafka's ConfigEntityZNode,
# ConfigEntityChangeNotificationZNode and ConfigEntityChangeNotificationSequenceZNode) ---------------------------

CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"  # + ZooKeeper's 10-digit sequence number
DEFAULT_ENTITY = "<default>"  # Kafka's ZooKeeperInternals.DEFAULT_STRING: /config/brokers/<default> and the like


entity_config_data = topic_config_data  # Kafka's ConfigEntityZNode.encode, for every entity type


def entity_config_path(entity_type: str, name: str) -> str:
    """/config/<entity type>/<sanitized name>; ``name`` may be a path (``<user>/clients/<client id>``)."""
    return f"{CONFIG}/{entity_type}/{name}"


def config_change_data(entity_path: str) -> bytes:
    """A notification's data: version 2, ``entity_path`` = ``<entity type>/<sanitized name>``."""
    return json.dumps({"version": 2, "entity_path": entity_path}).encode()


def parse_config_change(raw: bytes) -> tuple[str, str]:
    """(entity type, sanitized name) of a change notification, version 2 (``entity_path``) or version 1
    (``entity_type``, ``entity_name``); ValueError saying what is wrong, as Kafka's DynamicConfigManager."""
    try:
        data = json.loads(raw)
        version = data["version"]
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"config change notification is not Kafka's JSON: {exc!r}") from None
    if version == 1:
        entity_type, name = data.get("entity_type"), data.get("entity_name")
        if entity_type not in ("topics", "clients") or not isinstance(name, str):
            raise ValueError("version 1 config change notification must have 'entity_type' 'clients' or 'topics' "
                             f"and an 'entity_name': {raw!r}")
        return entity_type, name
    if version == 2:
        path = data.get("entity_path")
        entity_type, slash, name = path.partition("/") if isinstance(path, str) else ("", "", "")
        if not slash or not entity_type or not name:
            raise ValueError(f"version 2 config change notification must have 'entity_path' <type>/<name>: {raw!r}")
        return entity_type, name
    raise ValueError(f"config change notification has unsupported version {version!r}, supported versions are 1 "
                     "and 2")


def parse_entity_config(path: str, raw: bytes | None) -> dict[str, str]:
    """The ``config`` of an entity config znode ({"version":1,"config":{...}}); none when missing or empty;
    ValueError naming the znode when it is not Kafka's JSON."""
    if not raw:
        return {}
    try:
        return {str(k): str(v) for k, v in json.loads(raw)["config"].items()}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{path} is not an entity config: {exc!r}") from None


# -- the security state: ACLs (Kafka's ZkAclStore/ZkAclChangeStore); SCRAM credentials and client quotas are
# entity configs (/config/users/<user>[/clients/<client id>], /config/clients/<id>, /config/ips/<ip>) ------------

ACL_LITERAL = "/kafka-acl"  # /kafka-acl/<ResourceType>/<name>
ACL_EXTENDED = "/kafka-acl-extended"  # /kafka-acl-extended/prefixed/<ResourceType>/<name>
ACL_LITERAL_CHANGES = "/kafka-acl-changes"  # acl_changes_<seq>: "TOPIC:name"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"  # acl_changes_<seq>: {"version":1,"resourceType",...}
ACL_CHANGE_PREFIX = "acl_changes_"


# -- replica reassignment and leader elections on request (Kafka's TopicZNode's
# adding_replicas/removing_replicas, ReassignPartitionsZNode, PreferredReplicaElectionZNode) ---------------------

REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"


def parse_reassigning(topic: str, raw: bytes) -> tuple[Assignment, Assignment]:
    """(adding replicas, removing replicas) by partition from /brokers/topics/<t> (empty for versions 1 and 2,
    which have none); ValueError naming the znode when they are not Kafka's JSON."""
    def replicas(key: str) -> Assignment:
        return {int(p): tuple(int(b) for b in r) for p, r in (data.get(key) or {}).items() if r}
    try:
        data = json.loads(raw)
        return replicas("adding_replicas"), replicas("removing_replicas")
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"{topic_path(topic)} is not a topic assignment: {exc!r}") from None


def reassign_partitions_data(targets: dict[tuple[str, int], tuple[int, ...]]) -> bytes:
    """Kafka's ReassignPartitionsZNode (the legacy way to ask for a reassignment, kafka-reassign-partitions
    --zookeeper): ``{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}``."""
    return json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                                    for (t, p), r in sorted(targets.items())]}).encode()


def parse_reassign_partitions(raw: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    """The target replicas by (topic, partition) in /admin/reassign_partitions; ValueError naming the znode
    and the problem when it is not Kafka's JSON."""
    try:
        return {(str(e["topic"]), int(e["partition"])): tuple(int(b) for b in e["replicas"])
                for e in json.loads(raw)["partitions"]}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{REASSIGN_PARTITIONS} is not a partition reassignment: {exc!r}") from None


def preferred_replica_election_data(partitions: set[tuple[str, int]]) -> bytes:
    """Kafka's PreferredReplicaElectionZNode: ``{"version":1,"partitions":[{"topic":..,"partition":..}]}``."""
    return json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p}
                                                    for t, p in sorted(partitions)]}).encode()


def parse_preferred_replica_election(raw: bytes) -> set[tuple[str, int]]:
    """The partitions named in /admin/preferred_replica_election; ValueError naming the znode and the problem
    when it is not Kafka's JSON."""
    try:
        return {(str(e["topic"]), int(e["partition"])) for e in json.loads(raw)["partitions"]}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{PREFERRED_REPLICA_ELECTION} is not a preferred replica election: {exc!r}") from None
