"""Kafka Connect's built-in single message transforms and predicates.

Each class carries Kafka's Java class name and its short form (``InsertField$Value``) in
``aliases``, so connector configs copied from Kafka work unchanged. This module is a
plugin like any other: the runtime registers it and reads the two hooks below.
"""

from __future__ import annotations

from ..api.transforms import Predicate, Transformation
from .cast import CastKey, CastValue
from .fields import (
    ExtractFieldKey,
    ExtractFieldValue,
    HoistFieldKey,
    HoistFieldValue,
    InsertFieldKey,
    InsertFieldValue,
    ValueToKey,
)
from .headers import DropHeaders, HeaderFromKey, HeaderFromValue, InsertHeader
from .predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from .reshape import (
    FlattenKey,
    FlattenValue,
    MaskFieldKey,
    MaskFieldValue,
    ReplaceFieldKey,
    ReplaceFieldValue,
    SetSchemaMetadataKey,
    SetSchemaMetadataValue,
)
from .routing import Filter, RegexRouter
from .timestamps import TimestampConverterKey, TimestampConverterValue, TimestampRouter

TRANSFORMS: list[type[Transformation]] = [
    CastKey,
    CastValue,
    DropHeaders,
    ExtractFieldKey,
    ExtractFieldValue,
    Filter,
    FlattenKey,
    FlattenValue,
    HeaderFromKey,
    HeaderFromValue,
    HoistFieldKey,
    HoistFieldValue,
    InsertFieldKey,
    InsertFieldValue,
    InsertHeader,
    MaskFieldKey,
    MaskFieldValue,
    RegexRouter,
    ReplaceFieldKey,
    ReplaceFieldValue,
    SetSchemaMetadataKey,
    SetSchemaMetadataValue,
    TimestampConverterKey,
    TimestampConverterValue,
    TimestampRouter,
    ValueToKey,
]

PREDICATES: list[type[Predicate]] = [HasHeaderKey, RecordIsTombstone, TopicNameMatches]


__all__ = [
    "PREDICATES",
    "TRANSFORMS",
    "CastKey",
    "CastValue",
    "DropHeaders",
    "ExtractFieldKey",
    "ExtractFieldValue",
    "Filter",
    "FlattenKey",
    "FlattenValue",
    "HasHeaderKey",
    "HeaderFromKey",
    "HeaderFromValue",
    "HoistFieldKey",
    "HoistFieldValue",
    "InsertFieldKey",
    "InsertFieldValue",
    "InsertHeader",
    "MaskFieldKey",
    "MaskFieldValue",
    "RecordIsTombstone",
    "RegexRouter",
    "ReplaceFieldKey",
    "ReplaceFieldValue",
    "SetSchemaMetadataKey",
    "SetSchemaMetadataValue",
    "TimestampConverterKey",
    "TimestampConverterValue",
    "TimestampRouter",
    "TopicNameMatches",
    "ValueToKey",
]
