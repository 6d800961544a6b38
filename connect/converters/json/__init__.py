"""Kafka Connect's ``JsonConverter`` (``org.apache.kafka.connect.json.JsonConverter``)."""

from .common import ENVELOPE_ERROR
from .converter import JsonConverter

__all__ = ["ENVELOPE_ERROR", "JsonConverter"]
