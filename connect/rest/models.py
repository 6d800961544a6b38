"""Request and response bodies of the REST API, as pydantic models.

The OpenAPI document (``openapi.py``) is generated from these and from the route table, so the
document and the checks the server makes cannot drift apart. Shapes follow Kafka Connect's
REST entities (CreateConnectorRequest, ConnectorInfo, ConnectorStateInfo, ...).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, RootModel, StringConstraints, model_validator
from pydantic.json_schema import JsonDict, JsonSchemaValue
from pydantic_core import CoreSchema

__all__ = [
    "ActiveTopics", "CONNECTOR_CLASS", "ConfigChanges", "ConnectorClass", "ConfigInfos", "ConfigPatch", "ConfigValue",
    "ConnectorConfig", "ConnectorInfo",
    "ConnectorOffsets", "ConnectorState", "ConnectorStatus", "CreateConnector", "ErrorMessage", "Health",
    "LoggerLevel", "LoggerLevels", "LoggerNames", "Message", "OffsetsAlter", "PluginConfigDefs", "PluginInfos",
    "ServerInfo", "TaskConfigs", "TaskInfos", "TaskState", "ConnectorNames", "ConnectorsExpanded",
    "GroupDetail", "GroupSummaries", "TopicDetail", "TopicRecords", "TopicSummaries", "connector_class_schema",
]

# A connector name: not blank, no ``/`` (it is a path segment) and no control characters (Java's
# isISOControl, as Kafka Connect's name validator). Spelled without ``\s``, whose meaning differs
# between the regex engines that read the pattern (ECMA-262 in the document, Rust in pydantic, Python).
_NOT_IN_NAME = r"/\x00-\x1f\x7f-\x9f"
_BLANK = r" \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"  # what str.strip() removes, less controls
NAME_PATTERN = rf"^[^{_NOT_IN_NAME}]*[^{_NOT_IN_NAME}{_BLANK}][^{_NOT_IN_NAME}]*$"
NAME_RULE = "a connector name must not be blank and must not contain '/' or control characters"
ConnectorName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]

# Kafka Connect's own example (docs: "REST API"): a file sink writing what topic connect-test holds.
_EXAMPLE_CONFIG: JsonDict = {"connector.class": "FileStreamSinkConnector", "tasks.max": "1", "file": "test.sink.txt",
                   "topics": "connect-test"}

#: Kafka Connect configs are string maps; as there, numbers and booleans are taken as their text.
ConfigValue = str | int | float | bool

_CONNECTOR_CLASS_DOC = ("An installed connector plugin: its Python path, class name, class name without the "
                        "Connector suffix, or an alias (GET /connector-plugins lists them)")


class ConnectorClass(RootModel[Annotated[str, Field(min_length=1)]]):
    """The schema of ``connector.class``. Which names it takes (the installed connector plugins')
    only the running worker knows, so the document served replaces this component with
    ``connector_class_schema`` of them."""

    model_config = ConfigDict(json_schema_extra={"description": _CONNECTOR_CLASS_DOC})


CONNECTOR_CLASS = ConnectorClass.__name__


def connector_class_schema(names: list[str]) -> JsonDict:
    """``connector.class``: one of ``names``, every name an installed connector plugin answers to."""
    if not names:  # nothing installed: no value is valid
        return {"description": _CONNECTOR_CLASS_DOC, "not": {}}
    return {"type": "string", "enum": list(names), "description": _CONNECTOR_CLASS_DOC}


class _ClassKey(BaseModel):
    """Only for its schema: ``connector.class`` as a field, so that it refers to ``ConnectorClass``."""

    connector_class: ConnectorClass = Field(alias="connector.class")


def _with_connector_class(schema: JsonSchemaValue, handler: GetJsonSchemaHandler, *, required: bool) -> JsonSchemaValue:
    """A config map's schema whose ``connector.class`` is a ``ConnectorClass`` (by reference)."""
    out = handler.resolve_ref_schema(schema)
    out["properties"] = handler.resolve_ref_schema(handler(_ClassKey.__pydantic_core_schema__))["properties"]
    if required:
        out["required"] = ["connector.class"]
    return schema


class _Open(BaseModel):
    """A response body: unknown fields are allowed, as clients must ignore them."""

    model_config = ConfigDict(extra="allow")


# -- requests --------------------------------------------------------------------------------------


class ConnectorConfig(RootModel[dict[str, ConfigValue]]):
    """A connector config: ``connector.class`` and the connector's own keys. Which keys a connector
    needs depends on the plugin: a config of the right shape may still be refused (400, naming the
    key), as Kafka Connect refuses it."""

    model_config = ConfigDict(json_schema_extra={"examples": [_EXAMPLE_CONFIG]})

    @classmethod
    def __get_pydantic_json_schema__(cls, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return _with_connector_class(handler(core), handler, required=True)

    @model_validator(mode="after")
    def _has_class(self) -> ConnectorConfig:
        cls = self.root.get("connector.class")
        if not isinstance(cls, str) or not cls:
            raise ValueError("connector.class must be set to a connector plugin's class name")
        return self

    def as_strings(self) -> dict[str, str]:
        return {k: _text(v) for k, v in self.root.items()}


class ConfigPatch(RootModel[dict[str, ConfigValue | None]]):
    """Keys to set; a null value removes the key."""


class ConfigChanges(ConfigPatch):
    """Keys to set in a connector's config; a null value removes the key (``connector.class``, which
    the connector needs, can be changed to another installed plugin but not removed)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"tasks.max": "2", "file": None}]})

    @classmethod
    def __get_pydantic_json_schema__(cls, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return _with_connector_class(handler(core), handler, required=False)


class CreateConnector(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra={
        "examples": [{"name": "local-file-sink", "config": _EXAMPLE_CONFIG}]})

    name: ConnectorName
    config: ConnectorConfig
    initial_state: Literal["RUNNING", "PAUSED", "STOPPED"] | None = None


class TaskConfigs(RootModel[list[dict[str, ConfigValue]]]):
    """Internal: task configs a follower hands to the leader."""


class LoggerLevel(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [{"level": "DEBUG"}]})

    level: Literal["OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"]


class OffsetEntry(BaseModel):
    """A source connector's offset: its own partition and offset maps (null resets the partition)."""

    partition: dict[str, Any]
    offset: dict[str, Any] | None


class SinkPartition(BaseModel):
    """A sink connector's partition: a topic partition of its consumer group."""

    model_config = ConfigDict(extra="allow", strict=True)

    kafka_topic: Annotated[str, Field(min_length=1)]
    kafka_partition: Annotated[int, Field(ge=0, lt=1 << 31)]


class SinkOffset(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    kafka_offset: Annotated[int, Field(ge=0, lt=1 << 63)]


class SinkOffsetEntry(BaseModel):
    """A sink connector's offset: the consumer group's committed offset (null deletes it)."""

    partition: SinkPartition
    offset: SinkOffset | None


class SinkOffsets(BaseModel):
    """The offsets of a sink connector: every entry in the sink form (Kafka's KIP-875)."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"offsets": [{"partition": {"kafka_topic": "connect-test", "kafka_partition": 0},
                      "offset": {"kafka_offset": 5}}]}]})

    offsets: Annotated[list[SinkOffsetEntry], Field(min_length=1)]


class SourceOffsets(BaseModel):
    """The offsets of a source connector: partition and offset maps of the connector's own keys."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"offsets": [{"partition": {"filename": "test.txt"}, "offset": {"position": 30}}]}]})

    offsets: Annotated[list[OffsetEntry], Field(min_length=1)]


class OffsetsAlter(RootModel[Annotated[SourceOffsets | SinkOffsets, Field(union_mode="left_to_right")]]):
    """The sink form for a sink connector, the source form for a source connector: which one the
    connector takes depends on its type, so a body of the other form is refused (400, naming the
    field). The sink form is a source form too, so the body is read as one, its maps as they were
    sent; the herder checks a sink connector's entries."""

    def entries(self) -> list[dict[str, Any]]:
        return [e.model_dump() for e in self.root.offsets]


# -- responses -------------------------------------------------------------------------------------


class ErrorMessage(BaseModel):
    error_code: int
    message: str


class Message(_Open):
    message: str


class ServerInfo(_Open):
    version: str
    commit: str
    kafka_cluster_id: str


class Health(_Open):
    status: str
    message: str


class TaskRef(_Open):
    connector: str
    task: int


class ConnectorInfo(_Open):
    name: str
    config: dict[str, str]
    tasks: list[TaskRef]
    type: Literal["source", "sink", "unknown"]


class ConnectorState(_Open):
    state: str
    worker_id: str
    trace: str | None = None


class TaskState(ConnectorState):
    id: int


class TaskMetrics(_Open):
    id: int
    state: str
    worker_id: str
    metrics: dict[str, Any]
    #: What the runtime measures of the task, under Kafka's task metric names
    runtime: dict[str, Any] = {}


class ConnectorStatus(_Open):
    name: str
    connector: ConnectorState
    tasks: list[TaskState]
    type: Literal["source", "sink", "unknown"]


class ConnectorNames(RootModel[list[str]]):
    pass


class ConnectorsExpanded(RootModel[dict[str, dict[str, Any]]]):
    """``?expand=status`` / ``?expand=info``: name -> {"status": ..., "info": ...}."""


class TaskInfo(_Open):
    id: TaskRef
    config: dict[str, str]


class TaskInfos(RootModel[list[TaskInfo]]):
    pass


class TasksConfig(RootModel[dict[str, dict[str, str]]]):
    pass


class ActiveTopics(RootModel[dict[str, dict[str, list[str]]]]):
    pass


class ConnectorOffsets(_Open):
    offsets: list[OffsetEntry]


class PluginInfo(_Open):
    class_: str = Field(alias="class")
    type: str
    version: str


class PluginInfos(RootModel[list[PluginInfo]]):
    pass


class PluginConfigDefs(RootModel[list[dict[str, Any]]]):
    pass


class ConfigInfos(_Open):
    name: str
    error_count: int
    groups: list[str]
    configs: list[dict[str, Any]]


class LoggerLevels(RootModel[dict[str, dict[str, Any]]]):
    pass


class LoggerNames(RootModel[list[str]]):
    pass


class LoggerState(_Open):
    level: str
    last_modified: int | None = None


# -- Headwater's /admin extensions: topics and groups ----------------------------------------------


class TopicSummary(_Open):
    topic: str
    internal: bool = Field(description="Kafka's own (__consumer_offsets) or the workers' config, offset and "
                                       "status topics")
    partitions: int
    start_offset: int = Field(description="The partitions' start offsets, summed")
    end_offset: int = Field(description="The partitions' end offsets, summed")
    records: int = Field(description="Records held: end minus start offsets, summed")


class TopicSummaries(RootModel[list[TopicSummary]]):
    pass


class PartitionInfo(_Open):
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    start_offset: int
    end_offset: int
    records: int


class TopicDetail(_Open):
    topic: str
    internal: bool
    partitions: list[PartitionInfo]
    configs: dict[str, str] = Field(description="The topic's own config overrides")


class Base64Data(BaseModel):
    base64: str


#: A key, value or header value: UTF-8 text as a string, other bytes as {"base64": ...}, or null.
RecordData = str | Base64Data | None


class RecordHeader(_Open):
    key: str
    value: RecordData


class TopicRecord(_Open):
    partition: int
    offset: int
    timestamp: int
    timestamp_type: Literal["CreateTime", "LogAppendTime"]
    key: RecordData
    value: RecordData
    headers: list[RecordHeader]
    truncated: bool = Field(description="A key, value or header was cut to its first bytes")


class TopicRecords(_Open):
    topic: str
    records: list[TopicRecord] = Field(description="Newest first")


class GroupSummary(_Open):
    group: str
    state: str
    protocol_type: str
    members: int


class GroupSummaries(RootModel[list[GroupSummary]]):
    pass


class GroupPartition(_Open):
    topic: str
    partition: int


class GroupMember(_Open):
    member_id: str
    client_id: str
    host: str
    assignment: list[GroupPartition]


class GroupLag(_Open):
    topic: str
    partition: int
    committed_offset: int | None
    end_offset: int | None
    lag: int | None
    member_id: str | None


class GroupDetail(_Open):
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]
    offsets: list[GroupLag]
    lag: int = Field(description="The partitions' lags, summed")


def _text(value: ConfigValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def config_strings(config: dict[str, Any]) -> dict[str, str]:
    """A validated config's values as Kafka Connect keeps them: text."""
    return {k: _text(v) for k, v in config.items()}
