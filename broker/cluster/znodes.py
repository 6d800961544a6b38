"""Kafka's ZooKeeper layout for what this slice writes and reads: broker registrations and the controller.

The JSON is what Kafka's ``BrokerIdZNode`` (version 4) and ``ControllerZNode`` hold, so Kafka's tools
(``zookeeper-shell``, ``kafka-broker-api-versions``' operators) read it as they would Kafka's.
"""

from __future__ import annotations

import json
import time
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
