"""Connector configuration as pydantic models whose field aliases are Connect's dotted keys.

A connector declares ``config_class = MyConfig`` where ``MyConfig`` subclasses
``ConnectorConfig`` (or ``SourceConnectorConfig`` / ``SinkConnectorConfig``) and adds its
own fields: ``file: str = Field(alias="file")``. Keys the model does not know are kept
(transforms, converters and client overrides are read by the runtime), so a config
map copied from Kafka's docs validates unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from .errors import ConfigException
from .exactly_once import EXACTLY_ONCE_LEVELS, TRANSACTION_BOUNDARIES, choice
from .secrets import HIDDEN, is_secret_key, secret_fields

__all__ = [
    "ConnectorConfig",
    "SinkConnectorConfig",
    "SourceConnectorConfig",
    "field_errors",
]


class ConnectorConfig(BaseModel):
    """Keys every connector has (Kafka's ConnectorConfig)."""

    model_config = ConfigDict(populate_by_name=True, extra="allow", str_strip_whitespace=True)

    name: str = Field(alias="name", min_length=1, description="Globally unique name of the connector.")
    connector_class: str = Field(alias="connector.class", min_length=1,
                                 description="Class of the connector: a Python path, a class name or a Kafka alias.")
    tasks_max: int = Field(1, alias="tasks.max", ge=1, description="Maximum number of tasks to create.")
    key_converter: str | None = Field(None, alias="key.converter", description="Overrides the worker's key converter.")
    value_converter: str | None = Field(None, alias="value.converter",
                                        description="Overrides the worker's value converter.")
    header_converter: str | None = Field(None, alias="header.converter",
                                         description="Overrides the worker's header converter.")
    transforms: str = Field("", alias="transforms", description="Aliases of the transformations, in order.")
    predicates: str = Field("", alias="predicates", description="Aliases of the predicates used by transforms.")
    errors_retry_timeout: int = Field(0, alias="errors.retry.timeout", ge=-1,
                                      description="Milliseconds to retry a failed operation; -1 = forever.")
    errors_retry_delay_max_ms: int = Field(60000, alias="errors.retry.delay.max.ms", ge=0,
                                           description="Maximum milliseconds between retries.")
    errors_tolerance: str = Field("none", alias="errors.tolerance", pattern="^(none|all)$",
                                  description="none: fail the task on an error; all: skip the bad record.")
    errors_log_enable: bool = Field(False, alias="errors.log.enable", description="Log each error.")
    errors_log_include_messages: bool = Field(False, alias="errors.log.include.messages",
                                              description="Include the record in error logs.")

    def originals(self) -> dict[str, str]:
        """The whole config as Connect's flat string map."""
        out: dict[str, str] = {}
        for key, value in self.model_dump(by_alias=True).items():
            if value is None:
                continue
            out[key] = _to_str(value)
        return out

    def prefixed(self, prefix: str) -> dict[str, str]:
        """Every key under ``prefix`` with the prefix removed (e.g. ``transforms.x.``)."""
        return {k[len(prefix):]: v for k, v in self.originals().items() if k.startswith(prefix)}


class SourceConnectorConfig(ConnectorConfig):
    exactly_once_support: str = Field(
        "requested", alias="exactly.once.support",
        description="KIP-618: 'required' makes validation fail unless the worker has exactly-once source support "
                    "and the connector says it supports it; 'requested' (the default) checks nothing.")
    transaction_boundary: str = Field(
        "poll", alias="transaction.boundary",
        description="KIP-618: where a source task's transactions end when the worker delivers exactly once: "
                    "'poll' (each poll's records), 'interval' (transaction.boundary.interval.ms) or 'connector'.")
    transaction_boundary_interval_ms: int | None = Field(
        None, alias="transaction.boundary.interval.ms", ge=0,
        description="KIP-618: the transaction length with transaction.boundary=interval (the worker's "
                    "offset.flush.interval.ms when unset).")

    offsets_storage_topic: str | None = Field(
        None, alias="offsets.storage.topic",
        description="KIP-618: the connector's own offsets topic when the worker delivers exactly once (its "
                    "offsets are read from it and from the worker's offset.storage.topic, its own first); "
                    "unset: the worker's topic.")

    @field_validator("exactly_once_support")
    @classmethod
    def _exactly_once(cls, v: str) -> str:
        return choice(v, EXACTLY_ONCE_LEVELS)

    @field_validator("transaction_boundary")
    @classmethod
    def _boundary(cls, v: str) -> str:
        return choice(v, TRANSACTION_BOUNDARIES)

    topic_creation_groups: str = Field(
        "", alias="topic.creation.groups",
        description="Groups of topic-creation settings besides 'default' (KIP-158): topics this connector writes "
                    "to are created with topic.creation.<group>.replication.factor, .partitions and topic configs "
                    "of the first group whose .include regexes match (and .exclude do not).")


class SinkConnectorConfig(ConnectorConfig):
    topics: str = Field("", alias="topics", description="Comma-separated topics to consume.")
    topics_regex: str = Field("", alias="topics.regex", description="Regular expression of topics to consume.")
    errors_deadletterqueue_topic_name: str = Field("", alias="errors.deadletterqueue.topic.name",
                                                   description="Topic receiving records that failed.")
    errors_deadletterqueue_topic_replication_factor: int = Field(
        3, alias="errors.deadletterqueue.topic.replication.factor", description="DLQ topic replication factor.")
    errors_deadletterqueue_context_headers_enable: bool = Field(
        False, alias="errors.deadletterqueue.context.headers.enable",
        description="Add __connect.errors.* headers to DLQ records.")

    def topic_list(self) -> list[str]:
        return [t.strip() for t in self.topics.split(",") if t.strip()]


def _to_str(value: Any) -> str:
    if isinstance(value, SecretStr):  # a password field: its value travels on in task configs, hidden elsewhere
        return value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


_KEY = re.compile(r"^[a-z][a-z0-9_.-]*$")


def field_errors(exc: ValidationError, model: type[BaseModel]) -> dict[str, list[str]]:
    """Pydantic errors keyed by Connect's dotted key (the field alias)."""
    aliases = {name: (f.alias or name) for name, f in model.model_fields.items()}
    secret = secret_fields(model)
    out: dict[str, list[str]] = {}
    for err in exc.errors():
        loc = err["loc"][0] if err["loc"] else "config"
        key = aliases.get(str(loc), str(loc))
        msg = err["msg"]
        raised = (err.get("ctx") or {}).get("error")
        if isinstance(raised, ConfigException) and raised.field:  # it names its key (any case, e.g. spark.conf.*)
            problem = str(raised).removeprefix(f"{raised.field}: ")
            out.setdefault(raised.field, []).append(f"Invalid configuration {raised.field}: {problem}")
            continue
        if not err["loc"]:
            # a check across keys names the key it is about: "Value error, <key>: <problem>"
            text = msg.removeprefix("Value error, ")
            named, sep, problem = text.partition(": ")
            if sep and _KEY.match(named):
                out.setdefault(named, []).append(f"Invalid configuration {named}: {problem}")
            else:  # the input is the whole config, passwords included: never quoted
                out.setdefault(key, []).append(f"Invalid configuration: {text}")
            continue
        if err["type"] == "missing":
            msg = f"Missing required configuration \"{key}\" which has no default value."
        else:
            value = HIDDEN if key in secret or is_secret_key(key) else repr(err.get("input"))
            msg = f"Invalid value {value} for configuration {key}: {msg}"
        out.setdefault(key, []).append(msg)
    return out

