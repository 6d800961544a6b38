"""Kafka Connect worker keys Headwater accepts in no form but Kafka's default: one list, a reason per key.

An operator coming from Kafka writes these believing they take effect; a worker that kept them and did
nothing would leave them believing an override policy or extra HTTP headers are on. So
the worker refuses to start naming the key, unless the value is what Headwater does anyway. Keys other
parts of the worker honour (``listeners`` schemes, ``rest.extension.classes``, ``config.providers``,
``admin.listeners``, the REST ``ssl.*`` and the KIP-507 keys) are checked where they are honoured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["UNHONOURED", "unhonoured_problem"]


@dataclass(frozen=True)
class Unhonoured:
    reason: str
    #: values that mean what Headwater does anyway (compared lower-case, trimmed); other values are refused
    accepted: Callable[[str], bool] = lambda value: False


def _one_of(*values: str) -> Callable[[str], bool]:
    return lambda value: value.strip().lower() in values


def _empty(value: str) -> bool:
    return not value.strip()


UNHONOURED: dict[str, Unhonoured] = {
    "connector.client.config.override.policy": Unhonoured(
        "a connector's producer.override.*, consumer.override.* and admin.override.* are always applied, as "
        "Kafka's All policy does; no other policy (None, Principal, a class of your own) is offered",
        _one_of("all", "org.apache.kafka.connect.connector.policy.allconnectorclientconfigoverridepolicy")),
    "metric.reporters": Unhonoured(
        "Java metric reporters cannot run here; the worker's metrics are served at /metrics (Prometheus) and "
        "/admin/metrics", _empty),
    "response.http.headers.config": Unhonoured(
        "extra REST response headers (Jetty's set/add/setDate/addDate rules) are not applied", _empty),
    "rest.servlet.initializor.classes": Unhonoured("Jetty servlet initializers cannot run here", _empty),
    "topic.tracking.enable": Unhonoured(
        "the topics each connector uses are always tracked (GET /connectors/{name}/topics)", _one_of("true")),
    "topic.tracking.allow.reset": Unhonoured(
        "PUT /connectors/{name}/topics/reset is always allowed", _one_of("true")),
    "rest.host.name": Unhonoured("removed in Kafka 3.0: set listeners=http://<host>:<port> instead"),
    "rest.port": Unhonoured("removed in Kafka 3.0: set listeners=http://<host>:<port> instead"),
}


def unhonoured_problem(props: Mapping[str, object]) -> str | None:
    """The first key of ``props`` the worker cannot honour, as "<key>: <problem>"; None when there is none."""
    for key, entry in UNHONOURED.items():
        if key in props and not entry.accepted(str(props[key])):
            return f"{key}: {props[key]!r} cannot be honoured: {entry.reason}"
    return None
