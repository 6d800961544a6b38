"""SparkParquetSink's configuration: the keys of Confluent's S3/HDFS sinks, plus the lake's own."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from headwater.connect.api import SinkConnectorConfig, check_path, check_spark_conf
from headwater.connect.api.sandbox import local_path
from headwater.connectors.envelope import UNAVAILABLE, PlaceholderSetting

__all__ = ["PARTITIONERS", "EXTRACTORS", "SparkSinkConfig"]

_STORAGE = "io.confluent.connect.storage.partitioner."
_HDFS = "io.confluent.connect.hdfs.partitioner."

#: partitioner.class values, Confluent's Java names included, to the partitioner they mean
PARTITIONERS = {
    **{n: "default" for n in ("DefaultPartitioner", _STORAGE + "DefaultPartitioner", _HDFS + "DefaultPartitioner")},
    **{n: "field" for n in ("FieldPartitioner", _STORAGE + "FieldPartitioner", _HDFS + "FieldPartitioner")},
    **{n: "time" for n in ("TimeBasedPartitioner", _STORAGE + "TimeBasedPartitioner", _HDFS + "TimeBasedPartitioner")},
    **{n: "daily" for n in ("DailyPartitioner", _STORAGE + "DailyPartitioner", _HDFS + "DailyPartitioner")},
    **{n: "hourly" for n in ("HourlyPartitioner", _STORAGE + "HourlyPartitioner", _HDFS + "HourlyPartitioner")},
}

#: timestamp.extractor values to the extractor they mean
EXTRACTORS = {
    **{n: "Record" for n in ("Record", _STORAGE + "TimeBasedPartitioner$RecordTimestampExtractor")},
    **{n: "RecordField" for n in ("RecordField", _STORAGE + "TimeBasedPartitioner$RecordFieldTimestampExtractor")},
    **{n: "Wallclock" for n in ("Wallclock", _STORAGE + "TimeBasedPartitioner$WallclockTimestampExtractor")},
}

_CODECS = {"snappy": "snappy", "gzip": "gzip", "zstd": "zstd", "lz4": "lz4", "none": "none",
           "uncompressed": "none", "brotli": "brotli", "lz4_raw": "lz4_raw"}


class SparkSinkConfig(SinkConnectorConfig):
    lake_path: str = Field(alias="lake.path", min_length=1,
                           description="Where the lake lives: a local path or any Hadoop URI Spark can write "
                                       "(file:/, hdfs://, s3a:// with the jars on Spark's classpath).")
    topics_dir: str = Field("topics", alias="topics.dir",
                            description="Folder under lake.path that holds one folder per table.")
    table_name_format: str = Field("${topic}", alias="table.name.format",
                                   description="The table folder of a topic: ${topic} is replaced.")
    flush_size: int = Field(100000, alias="flush.size", ge=1,
                            description="Commit a topic-partition's file(s) once this many records are buffered "
                                        "(each flush is a Spark job or a merge: large flushes keep its cost per "
                                        "record low; rotate.schedule.interval.ms bounds how long records wait).")
    rotate_interval_ms: int = Field(-1, alias="rotate.interval.ms", ge=-1,
                                    description="Commit when the buffered records' timestamps (timestamp.extractor) "
                                                "span this long; -1 off.")
    rotate_schedule_interval_ms: int = Field(1000, alias="rotate.schedule.interval.ms", ge=-1,
                                             description="Commit on the wall clock, at multiples of this interval "
                                                         "in timezone, whether or not more records come; -1 off "
                                                         "(Confluent's default: records short of flush.size then "
                                                         "wait for more).")
    partitioner_class: str = Field("DefaultPartitioner", alias="partitioner.class",
                                   description="DefaultPartitioner, FieldPartitioner, TimeBasedPartitioner, "
                                               "DailyPartitioner, HourlyPartitioner (Confluent's Java names too).")
    partition_field_name: str = Field("", alias="partition.field.name",
                                      description="FieldPartitioner: the value fields that name the folders.")
    path_format: str = Field("", alias="path.format",
                             description="TimeBasedPartitioner: a Joda-Time pattern, e.g. "
                                         "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH.")
    partition_duration_ms: int = Field(-1, alias="partition.duration.ms", ge=-1,
                                       description="TimeBasedPartitioner: the span of one folder.")
    locale: str = Field("en-US", alias="locale", description="TimeBasedPartitioner: accepted for compatibility.")
    timezone: str = Field("UTC", alias="timezone", description="TimeBasedPartitioner and scheduled rotation.")
    timestamp_extractor: str = Field("Wallclock", alias="timestamp.extractor",
                                     description="Record, RecordField or Wallclock.")
    timestamp_field: str = Field("timestamp", alias="timestamp.field",
                                 description="RecordField: the value field (a.b for nested) holding the time.")
    parquet_codec: str = Field("snappy", alias="parquet.codec",
                               description="snappy, gzip, zstd, lz4, lz4_raw, brotli or none.")
    cdc_mode: Literal["append", "changelog", "upsert"] = Field(
        "append", alias="cdc.mode",
        description="append: values as they arrive; changelog: Debezium envelopes flattened to the row plus "
                    "_op, _lsn, _ts_ms, _deleted; upsert: changes merged into a current-state table by key.")
    cdc_buckets: int = Field(16, alias="cdc.buckets", ge=1, le=4096,
                             description="upsert: key buckets per Kafka partition (the _bucket folders).")
    unavailable_value_placeholder: PlaceholderSetting = Field(
        UNAVAILABLE, alias="unavailable.value.placeholder", min_length=1,
        description="upsert: the source's placeholder for values it did not have (Debezium's unchanged TOAST "
                    "values); a column holding it keeps the value the table had.")
    lake_writer: Literal["auto", "spark"] = Field(
        "auto", alias="lake.writer",
        description="auto: when lake.path is a local folder and spark.master is local[N], the task writes each "
                    "flush's Parquet files (append files, rewritten upsert buckets) itself with pyarrow, the files "
                    "Spark writes for the same types, without a Spark job per flush; spark: every flush is a Spark "
                    "job, whatever the lake and master (what a cluster master or a remote lake always gets).")
    spark_master: str = Field("local[2]", alias="spark.master",
                              description="Spark master of the worker's session (local[N], spark://host:port).")
    spark_app_name: str = Field("headwater-spark", alias="spark.app.name")

    @field_validator("partitioner_class")
    @classmethod
    def _partitioner(cls, v: str) -> str:
        if v not in PARTITIONERS:
            raise ValueError(f"unknown partitioner {v!r}: use DefaultPartitioner, FieldPartitioner, "
                             f"TimeBasedPartitioner, DailyPartitioner or HourlyPartitioner")
        return v

    @field_validator("timestamp_extractor")
    @classmethod
    def _extractor(cls, v: str) -> str:
        if v not in EXTRACTORS:
            raise ValueError(f"unknown timestamp extractor {v!r}: use Record, RecordField or Wallclock")
        return v

    @field_validator("parquet_codec")
    @classmethod
    def _codec(cls, v: str) -> str:
        if v.lower() not in _CODECS:
            raise ValueError(f"unknown codec {v!r}: use one of {', '.join(sorted(_CODECS))}")
        return _CODECS[v.lower()]

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        from zoneinfo import ZoneInfo

        try:
            ZoneInfo(v)
        except Exception as exc:
            raise ValueError(f"unknown time zone {v!r}") from exc
        return v

    @model_validator(mode="after")
    def _consistent(self) -> SparkSinkConfig:
        kind = self.partitioner()
        if kind == "field" and not self.partition_fields():
            raise ValueError("partition.field.name: FieldPartitioner needs at least one field")
        if kind == "time":
            if not self.path_format:
                raise ValueError("path.format: TimeBasedPartitioner needs a pattern, e.g. "
                                 "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH")
            if self.partition_duration_ms <= 0:
                raise ValueError("partition.duration.ms: TimeBasedPartitioner needs a positive duration")
        if self.rotate_interval_ms > 0 and EXTRACTORS[self.timestamp_extractor] == "Wallclock" \
                and kind in ("time", "daily", "hourly"):
            # Confluent's rule: rotation by record time needs record times
            raise ValueError("rotate.interval.ms needs timestamp.extractor Record or RecordField "
                             "(use rotate.schedule.interval.ms for wall-clock rotation)")
        if self.spark_master and not (self.spark_master.startswith(("local", "spark://", "yarn", "k8s://"))):
            raise ValueError(f"spark.master {self.spark_master!r} is not local[N], spark://host:port, yarn or "
                             f"k8s://...")
        return self

    @model_validator(mode="after")
    def _bounded(self) -> SparkSinkConfig:
        """A local lake, every table folder under it (topics.dir and table.name.format may hold '..'), and the
        Spark settings passed on stay within what the worker lets connectors touch."""
        local = local_path(self.lake_path)
        if local:
            check_path("lake.path", local, "write")
            tables = os.path.join(local, self.topics_dir)
            check_path("topics.dir", tables, "write")
            check_path("table.name.format", os.path.join(tables, self.table_name_format.replace("${topic}", "t")),
                       "write")
        check_spark_conf(self.spark_conf())
        return self

    def partitioner(self) -> str:
        return PARTITIONERS[self.partitioner_class]

    def extractor(self) -> str:
        return EXTRACTORS[self.timestamp_extractor]

    def partition_fields(self) -> list[str]:
        return [f.strip() for f in self.partition_field_name.split(",") if f.strip()]

    def spark_conf(self) -> dict[str, str]:
        """``spark.conf.<key>`` settings, passed to the session as ``<key>``."""
        extra: dict[str, Any] = self.model_extra or {}
        return {k[len("spark.conf."):]: str(v) for k, v in extra.items() if k.startswith("spark.conf.")}
