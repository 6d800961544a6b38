"""Kafka topics as a Spark source without the JVM Kafka connector: ``format("headwater")``.

    import headwater.spark
    headwater.spark.register(spark)
    df = (spark.readStream.format("headwater")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "orders")
          .load())

The columns and options are those of Spark's ``format("kafka")`` source (see docs/SPARK_SOURCE.md).
Written with PySpark's Python Data Source API (pyspark 4.2 or later); it speaks the Kafka wire
protocol, so it reads Apache Kafka clusters as well as Headwater brokers.
"""

from __future__ import annotations

from typing import Any

from .errors import SparkSourceError
from .options import OptionError, SourceOptions, parse_options
from .source import HeadwaterDataSource, kafka_schema

__all__ = ["HeadwaterDataSource", "OptionError", "SourceOptions", "SparkSourceError", "kafka_schema", "parse_options",
           "register"]


def register(spark: Any) -> None:
    """Make ``format("headwater")`` available in ``spark`` (a SparkSession)."""
    spark.dataSource.register(HeadwaterDataSource)
