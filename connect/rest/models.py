"""Request and response bodies of the REST API, as pydantic models.

The OpenAPI document (``openapi.py``) is generated from these and from the route table, so the
document and the checks the server makes cannot drift apart. Shapes follow Kafka Connect's
REST entities (CreateConnectorRequest, ConnectorInfo, ConnectorStateInfo, ...).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints, model_validator
from pydantic.json_schema import JsonDict

__all__ = [
    "ActiveTopics", "ConfigInfos", "ConfigPatch", "ConfigValue", "ConnectorConfig", "ConnectorInfo",
    "ConnectorOffsets", "ConnectorState", "ConnectorStatus", "CreateConnector", "ErrorMessage", "Health",
    "LoggerLevel", "LoggerLevels", "LoggerNames", "Message", "OffsetsAlter", "PluginConfigDefs", "PluginInfos",
    "ServerInfo", "TaskConfigs", "TaskInfos", "TaskState", "ConnectorNames", "ConnectorsExpanded",
    "GroupDetail", "GroupSummaries", "TopicDetail", "TopicRecords", "TopicSummaries",
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


class _Open(BaseModel):
    """A response body: unknown fields are allowed, as clients must ignore them."""

    model_config = ConfigDict(extra="allow")


# -- requests --------------------------------------------------------------------------------------


class ConnectorConfig(RootModel[dict[str, ConfigValue]]):
    """A connector config: ``connector.class`` and the connector's own keys. Which keys a connector
    needs depends on the plugin: a config of the right shape may still be refused (400, naming the
    key), as Kafka Connect refuses it."""

    model_config = ConfigDict(json_schema_extra={
        "required": ["connector.class"], "properties": {"connector.class": {"type": "string", "minLength": 1}},
        "examples": [_EXAMPLE_CONFIG]})

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
    partition: dict[str, Any]
    offset: dict[str, Any] | None


class OffsetsAlter(BaseModel):
    offsets: Annotated[list[OffsetEntry], Field(min_length=1)]


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
