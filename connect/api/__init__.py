"""What plugin authors import: connectors, tasks, records, contexts, converters, transforms.

A source connector in about 30 lines::

    from headwater.connect.api import SourceConnector, SourceTask, SourceRecord, hookimpl

    class TickTask(SourceTask):
        def start(self, config):
            self.topic, self.n = config["topic"], 0
        def poll(self):
            self.n += 1
            return [SourceRecord(topic=self.topic, value=str(self.n),
                                 source_partition={"tick": 0}, source_offset={"n": self.n})]

    class TickConnector(SourceConnector):
        def start(self, config):
            self.topic = config.model_extra["topic"]
        def task_class(self):
            return TickTask
        def task_configs(self, max_tasks):
            return [{"topic": self.topic}]

    @hookimpl
    def headwater_connectors():
        return [TickConnector]
"""

from .batch import EncodedBatch, EncodedSinkBatch, EncodedValues, RecordBatches, SinkBatch, SourceBatch
from .config import ConnectorConfig, SinkConnectorConfig, SourceConnectorConfig
from .connector import Connector, ConnectorContext, SinkConnector, SourceConnector
from .converters import Converter, HeaderConverter, SchemaAndValue
from .data import Field, Schema, SchemaBuilder, SchemaType, Struct
from .errors import ConfigException, ConnectException, DataException, RetriableException
from .exactly_once import ConnectorTransactionBoundaries, ExactlyOnceSupport
from .hookspecs import hookimpl
from .metrics import MetricSample
from .records import ConnectRecord, Header, SinkRecord, SourceRecord, TopicPartition
from .sandbox import PathRefused, check_path, check_spark_conf
from .sink import SinkTask, SinkTaskContext
from .source import OffsetStorageReader, RecordMetadata, SourceTask, SourceTaskContext, TransactionContext
from .transforms import Predicate, Transformation, TransformConfig

__all__ = [
    "ConfigException", "ConnectException", "ConnectRecord", "Connector", "ConnectorConfig", "ConnectorContext",
    "ConnectorTransactionBoundaries", "ExactlyOnceSupport",
    "Converter", "DataException", "EncodedBatch", "EncodedSinkBatch", "EncodedValues", "Field", "Header",
    "HeaderConverter",
    "MetricSample", "OffsetStorageReader", "PathRefused",
    "Predicate", "RecordBatches", "RecordMetadata", "RetriableException", "Schema", "SchemaAndValue", "SchemaBuilder",
    "SchemaType",
    "SinkBatch", "SinkConnector", "SinkConnectorConfig", "SinkRecord", "SinkTask", "SinkTaskContext", "SourceConnector",
    "SourceBatch", "SourceConnectorConfig", "SourceRecord", "SourceTask", "SourceTaskContext", "Struct",
    "TopicPartition", "TransactionContext",
    "TransformConfig", "Transformation", "check_path", "check_spark_conf", "hookimpl",
]
