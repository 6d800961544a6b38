"""The one Kafka wire codec: primitive types, record batches (v2), compression, error codes.

The broker's protocol layer, the ``__consumer_offsets`` records, Connect's group protocol
and MirrorMaker's formats all build on it. Request and response bodies are the exception:
they use kafka-python's classes generated from Kafka's own message schemas (see
``headwater.broker.protocol.codec``).
"""

from .errors import ErrorCode, KafkaError
from .records import BatchHeader, InvalidBatch, Record, build_batch, decode_batch_records, iter_batches
from .types import DecodeError, Reader, Writer

__all__ = [
    "BatchHeader",
    "DecodeError",
    "ErrorCode",
    "InvalidBatch",
    "KafkaError",
    "Reader",
    "Record",
    "Writer",
    "build_batch",
    "decode_batch_records",
    "iter_batches",
]
