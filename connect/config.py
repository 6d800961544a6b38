"""Worker configuration: Kafka Connect's worker property names, validated by pydantic."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from headwater.properties import ConfigError, format_validation_error, load_properties, parse_overrides

from .api.errors import ConfigException
from .api.exactly_once import choice
from .kafka.security import client_security, is_security_key
from .rest.listeners import RestListener, parse_listeners
from .rest.signature import digest_of
from .unhonoured import unhonoured_problem

__all__ = ["CLIENT_KINDS", "WORKER_SUPPORT_LEVELS", "WorkerConfig", "WorkerConfigError", "load_worker_config",
           "resolve_placeholders"]

CLIENT_KINDS = ("producer", "consumer", "admin")
#: ``exactly.once.source.support`` (KIP-618; Kafka's DistributedConfig, default disabled)
WORKER_SUPPORT_LEVELS = ("disabled", "preparing", "enabled")
# ssl.* keys only a server reads: the REST listener's, never passed to the Kafka clients
REST_ONLY_KEYS = frozenset({"ssl.client.auth"})


class WorkerConfigError(ConfigException, ConfigError):
    """A worker property is missing or invalid (the message names it); a ConfigError as the other rooms'
    configuration problems are, and one of Connect's exceptions."""


class WorkerConfig(BaseModel):
    """Keys common to standalone and distributed workers, plus the distributed ones.

    Unknown keys are kept (``producer.*``, ``consumer.*``, converter settings such as
    ``value.converter.schemas.enable``) and read through ``prefixed``.
    """

    model_config = ConfigDict(populate_by_name=True, extra="allow", frozen=True)

    bootstrap_servers: str = Field("localhost:9092", alias="bootstrap.servers", min_length=1)
    key_converter: str = Field("org.apache.kafka.connect.json.JsonConverter", alias="key.converter")
    value_converter: str = Field("org.apache.kafka.connect.json.JsonConverter", alias="value.converter")
    header_converter: str = Field("org.apache.kafka.connect.storage.SimpleHeaderConverter", alias="header.converter")
    offset_flush_interval_ms: int = Field(60000, alias="offset.flush.interval.ms", ge=1)
    offset_flush_timeout_ms: int = Field(5000, alias="offset.flush.timeout.ms", ge=1)
    offset_storage_file_filename: str | None = Field(None, alias="offset.storage.file.filename")
    plugin_path: str = Field("", alias="plugin.path")
    listeners: str = Field("http://127.0.0.1:8083", alias="listeners")
    rest_advertised_host_name: str | None = Field(None, alias="rest.advertised.host.name")
    rest_advertised_port: int | None = Field(None, alias="rest.advertised.port", ge=0, le=65535)
    # REST listeners, TLS, extensions, Host/Origin checks and CORS (connect/rest/server.py).
    # TLS: listeners.https.ssl.* (all or nothing) or the worker's ssl.*; admin.listeners.https.ssl.* likewise.
    rest_advertised_listener: Literal["http", "https"] | None = Field(None, alias="rest.advertised.listener")
    admin_listeners: str | None = Field(None, alias="admin.listeners")  # None: /admin/* on listeners; "": off
    rest_extension_classes: str = Field("", alias="rest.extension.classes")
    rest_allowed_hosts: str = Field("", alias="rest.allowed.hosts")  # Host names beyond the listeners' own
    access_control_allow_origin: str = Field("", alias="access.control.allow.origin")
    access_control_allow_methods: str = Field("", alias="access.control.allow.methods")
    # Config providers (connect/config_providers/).
    # ``config.providers=file,dir,env`` with ``config.providers.<name>.class`` and ``.param.*`` (kept as extra keys):
    # ``${file:/run/secrets/db.properties:password}`` in connector configs is resolved by the worker starting the
    # connector or task; the worker's own properties are resolved at start (``load_worker_config``).
    config_providers: str = Field("", alias="config.providers")
    task_shutdown_graceful_timeout_ms: int = Field(5000, alias="task.shutdown.graceful.timeout.ms", ge=0)
    topic_creation_enable: bool = Field(True, alias="topic.creation.enable")
    # Distributed mode.
    group_id: str = Field("connect-cluster", alias="group.id", min_length=1)
    config_storage_topic: str = Field("connect-configs", alias="config.storage.topic", min_length=1)
    offset_storage_topic: str = Field("connect-offsets", alias="offset.storage.topic", min_length=1)
    status_storage_topic: str = Field("connect-status", alias="status.storage.topic", min_length=1)
    config_storage_replication_factor: int = Field(-1, alias="config.storage.replication.factor")
    offset_storage_replication_factor: int = Field(-1, alias="offset.storage.replication.factor")
    status_storage_replication_factor: int = Field(-1, alias="status.storage.replication.factor")
    offset_storage_partitions: int = Field(25, alias="offset.storage.partitions", ge=1)
    status_storage_partitions: int = Field(5, alias="status.storage.partitions", ge=1)
    heartbeat_interval_ms: int = Field(3000, alias="heartbeat.interval.ms", ge=1)
    session_timeout_ms: int = Field(10000, alias="session.timeout.ms", ge=1)
    rebalance_timeout_ms: int = Field(60000, alias="rebalance.timeout.ms", ge=1)
    scheduled_rebalance_max_delay_ms: int = Field(300000, alias="scheduled.rebalance.max.delay.ms", ge=0)
    connect_protocol: str = Field("sessioned", alias="connect.protocol")
    # KIP-618 (distributed mode only): ``enabled`` runs source tasks with transactional producers, records and
    # offsets committed together; ``preparing`` is the first step of a rolling upgrade (connect/runtime/exactly_once.py)
    exactly_once_source_support: str = Field("disabled", alias="exactly.once.source.support")
    # Signed internal requests, KIP-507 (connect/herder/session_key.py).
    inter_worker_key_generation_algorithm: str = Field("HmacSHA256", alias="inter.worker.key.generation.algorithm")
    inter_worker_key_size: int | None = Field(None, alias="inter.worker.key.size", ge=40)
    inter_worker_key_ttl_ms: int = Field(3600000, alias="inter.worker.key.ttl.ms", ge=1, le=2**31 - 1)
    inter_worker_signature_algorithm: str = Field("HmacSHA256", alias="inter.worker.signature.algorithm")
    inter_worker_verification_algorithms: list[str] = Field(["HmacSHA256"],
                                                            alias="inter.worker.verification.algorithms")
    # What connectors may touch: file system paths and Spark settings (connect/runtime/sandbox.py).
    connector_allowed_paths: str = Field("", alias="connector.allowed.paths")
    spark_conf_allowed: str = Field("", alias="spark.conf.allowed")

    @field_validator("connector_allowed_paths")
    @classmethod
    def _allowed_paths(cls, v: str) -> str:
        for path in _listed(v):
            if not Path(path).is_dir():
                raise ValueError(f"{path!r} is not an existing directory")
        return v

    @model_validator(mode="after")
    def _honoured(self) -> WorkerConfig:
        """A Kafka key Headwater would accept and ignore fails the start naming it (connect/unhonoured.py)."""
        problem = unhonoured_problem(self.model_extra or {})
        if problem:
            raise ValueError(problem)
        return self

    def allowed_paths(self) -> list[str]:
        return _listed(self.connector_allowed_paths)

    @field_validator("listeners")
    @classmethod
    def _listeners(cls, v: str) -> str:
        try:
            found = parse_listeners(v, "listeners")
        except ValueError as exc:
            raise ValueError(str(exc).removeprefix("listeners: ")) from None
        if not found:
            raise ValueError("at least one http:// or https:// listener")
        return v

    @field_validator("admin_listeners")
    @classmethod
    def _admin_listeners(cls, v: str | None) -> str | None:
        try:
            parse_listeners(v or "", "admin.listeners")
        except ValueError as exc:
            raise ValueError(str(exc).removeprefix("admin.listeners: ")) from None
        return v

    @model_validator(mode="after")
    def _advertised(self) -> WorkerConfig:
        self.advertised_listener()  # a rest.advertised.listener with no listener of its scheme
        return self

    @field_validator("connect_protocol")
    @classmethod
    def _protocol(cls, v: str) -> str:
        if v not in ("eager", "compatible", "sessioned"):
            raise ValueError("must be eager, compatible or sessioned")
        return v

    @field_validator("exactly_once_source_support")
    @classmethod
    def _exactly_once_source_support(cls, v: str) -> str:
        return choice(v, WORKER_SUPPORT_LEVELS)

    @field_validator("inter_worker_key_generation_algorithm", "inter_worker_signature_algorithm")
    @classmethod
    def _mac_algorithm(cls, v: str) -> str:
        digest_of(v)  # its ValueError names the supported ones
        return v

    @field_validator("inter_worker_verification_algorithms", mode="before")
    @classmethod
    def _verification_algorithms(cls, v: Any) -> Any:
        names = [a.strip() for a in v.split(",") if a.strip()] if isinstance(v, str) else v
        if isinstance(names, list):
            if not names:
                raise ValueError("at least one signature verification algorithm must be provided")
            for name in names:
                digest_of(str(name))
        return names

    @model_validator(mode="after")
    def _signature_verifiable(self) -> WorkerConfig:
        if self.inter_worker_signature_algorithm not in self.inter_worker_verification_algorithms:
            raise ValueError(f"inter.worker.signature.algorithm: {self.inter_worker_signature_algorithm} must be "
                             f"present in the inter.worker.verification.algorithms list "
                             f"({','.join(self.inter_worker_verification_algorithms)})")
        return self

    @model_validator(mode="after")
    def _security(self) -> WorkerConfig:
        """Every client's security settings are checked at start (a GSSAPI login or a JKS store is refused
        here, naming the key with its prefix), not when a task first connects."""
        for kind in ("", *CLIENT_KINDS):
            try:
                client_security(self.client(kind) if kind else self.security())
            except ValueError as exc:
                raise ValueError(f"{kind}.{exc}" if kind else str(exc)) from None
        return self

    def security(self) -> dict[str, str]:
        """The top level's ``security.protocol``, ``sasl.*`` and ``ssl.*``: how the internal stores, the group
        membership and the worker's admin client connect."""
        extra = self.model_extra or {}
        keys = {k: str(v) for k, v in extra.items() if is_security_key(k) and k not in REST_ONLY_KEYS}
        if not keys.get("security.protocol", "PLAINTEXT").strip().upper().endswith("SSL") and any(
                listener.scheme == "https" for listener in self.rest_listeners()):
            # Kafka's worker: a plaintext client ignores ssl.*, which are then the HTTPS listener's settings
            keys = {k: v for k, v in keys.items() if not k.startswith("ssl.")}
        return keys

    def client(self, kind: str) -> dict[str, str]:
        """The tasks' ``producer.*``, ``consumer.*`` or ``admin.*`` properties over the top level's security keys,
        key by key: the tasks' clients connect as the worker does unless ``<kind>.*`` says otherwise (Kafka's
        would connect in plaintext without ``<kind>.security.protocol``, which no secured cluster accepts)."""
        return {**self.security(), **self.prefixed(kind + ".")}

    def prefixed(self, prefix: str) -> dict[str, str]:
        return {k[len(prefix):]: str(v) for k, v in (self.model_extra or {}).items() if k.startswith(prefix)}

    def plugin_paths(self) -> list[str]:
        return _listed(self.plugin_path)

    def rest_listeners(self) -> list[RestListener]:
        return parse_listeners(self.listeners, "listeners")

    def rest_admin_listeners(self) -> list[RestListener] | None:
        """KIP-495: None when unset (``/admin/*`` on the main listeners), [] when empty (not served)."""
        return None if self.admin_listeners is None else parse_listeners(self.admin_listeners, "admin.listeners")

    def advertised_listener(self) -> RestListener:
        """The listener whose scheme other workers use (``rest.advertised.listener``; Kafka's default: http when
        there is an http listener, else https)."""
        listeners = self.rest_listeners()
        scheme = self.rest_advertised_listener or ("http" if any(x.scheme == "http" for x in listeners) else "https")
        for listener in listeners:
            if listener.scheme == scheme:
                return listener
        raise ValueError(f"rest.advertised.listener: {scheme}, but listeners has no {scheme}:// listener")

    def rest_ssl(self, prefix: str = "listeners.https.") -> tuple[dict[str, str], str]:
        """A REST listener's ``ssl.*`` settings, all or nothing as Kafka reads them: the ``prefix``ed keys when any
        is set, else the worker's own ``ssl.*``; and the prefix the keys were written with ("" for the latter)."""
        extra = {k: str(v) for k, v in (self.model_extra or {}).items()}
        prefixed = {k[len(prefix):]: v for k, v in extra.items() if k.startswith(prefix)}
        if prefixed:
            return prefixed, prefix
        return {k: v for k, v in extra.items() if k.startswith("ssl.")}, ""

    def rest_host_port(self) -> tuple[str, int]:
        first = self.rest_listeners()[0]
        return first.bind_host, first.port

    def properties(self) -> dict[str, str]:
        """Every property as given (None left out), keyed by its Kafka name; a list as Kafka writes one."""
        return {k: _property(v) for k, v in self.model_dump(by_alias=True).items() if v is not None}

    def get(self, key: str, default: Any = None) -> Any:
        data = self.model_dump(by_alias=True)
        return data.get(key, default)


def _listed(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


def load_worker_config(path: str | None, overrides: list[str] | None = None,
                       base: dict[str, str] | None = None) -> WorkerConfig:
    props = dict(base or {})
    if path:
        props.update(load_properties(path))
    props.update(parse_overrides(overrides or []))
    try:
        config = WorkerConfig.model_validate(props)
    except ValidationError as exc:
        raise WorkerConfigError(format_validation_error(exc)) from None
    return resolve_placeholders(config)


def _property(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def resolve_placeholders(config: WorkerConfig) -> WorkerConfig:
    """``config`` with its own ``${provider:path:key}`` placeholders resolved through its ``config.providers``
    (Kafka resolves a WorkerConfig's originals so): a provider class that is not installed, a parameter it
    refuses or a placeholder it cannot resolve stops the start, naming the key."""
    if not config.config_providers.strip():
        return config
    from .config_providers import resolve_worker_properties
    from .plugins import PluginRegistry

    registry = PluginRegistry(config.plugin_paths())
    try:
        props = resolve_worker_properties(config.properties(), registry)
        return WorkerConfig.model_validate(props)
    except ConfigException as exc:
        raise WorkerConfigError(str(exc)) from None
    except ValidationError as exc:
        raise WorkerConfigError(format_validation_error(exc)) from None
    finally:
        registry.close()
