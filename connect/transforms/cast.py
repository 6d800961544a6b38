"""Cast: fields, or the whole key/value, to another primitive type (Kafka's ``Cast$Key``/``$Value``)."""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
import struct as _struct
from decimal import Decimal
from typing import Any

from pydantic import Field as ConfigField
from pydantic import field_validator

from ..api.data import Schema, SchemaType, Struct
from ..api.errors import DataException
from ..api.transforms import TransformConfig
from .dateformat import JavaDateFormat
from .util import (
    DATE_NAME,
    LOGICAL_NAMES,
    MS_PER_DAY,
    TIME_NAME,
    TIMESTAMP_NAME,
    CsvList,
    KeySide,
    ReplaceNullWithDefault,
    SchemaCache,
    SideTransformation,
    ValueSide,
    copy_schema_basics,
    invalid,
    java_class,
    kafka_aliases,
    require_map,
    require_struct,
    schema_type_of,
    struct_schema,
    struct_values,
    to_epoch_ms,
)

__all__ = ["CastKey", "CastValue", "cast_value", "java_float_str", "parse_spec"]

T = SchemaType
INPUT_TYPES = (T.INT8, T.INT16, T.INT32, T.INT64, T.FLOAT32, T.FLOAT64, T.BOOLEAN, T.STRING, T.BYTES)
OUTPUT_TYPES = (T.INT8, T.INT16, T.INT32, T.INT64, T.FLOAT32, T.FLOAT64, T.BOOLEAN, T.STRING)
_BITS = {T.INT8: 8, T.INT16: 16, T.INT32: 32, T.INT64: 64}
_TYPE_NAMES = {
    "int8": T.INT8,
    "int16": T.INT16,
    "int32": T.INT32,
    "int64": T.INT64,
    "float32": T.FLOAT32,
    "float64": T.FLOAT64,
    "boolean": T.BOOLEAN,
    "string": T.STRING,
    "bytes": T.BYTES,
    "array": T.ARRAY,
    "map": T.MAP,
    "struct": T.STRUCT,
}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_ISO_TIMESTAMP = JavaDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
_ISO_DATE = JavaDateFormat("yyyy-MM-dd")
_ISO_TIME = JavaDateFormat("HH:mm:ss.SSS'Z'")


def _names(types: tuple[SchemaType, ...]) -> str:
    return "[" + ", ".join(t.name for t in types) + "]"


def parse_spec(mappings: list[str]) -> dict[str | None, SchemaType]:
    """``field:type,...`` or a single ``type`` for the whole value (key None)."""
    if not mappings:
        raise invalid("Must specify at least one field to cast.")
    out: dict[str | None, SchemaType] = {}
    whole = False
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) > 2:
            raise invalid(f"Invalid cast mapping: {mapping}")
        field, type_name = (None, parts[0]) if len(parts) == 1 else (parts[0].strip(), parts[1])
        whole = whole or field is None
        target = _TYPE_NAMES.get(type_name.strip().lower())
        if target is None:
            raise invalid(f"Invalid type found in casting spec: {type_name.strip()}")
        if target not in OUTPUT_TYPES:
            raise invalid(
                f"Cast transformation does not support casting to {target.name}; supported types are "
                f"{_names(OUTPUT_TYPES)}"
            )
        out[field] = target
    if whole and len(mappings) > 1:
        raise invalid(
            "Cast transformations that specify a type to cast the entire value to may ony specify a "
            "single cast in their spec"
        )
    return out


# -- value casts ---------------------------------------------------------------------------------------------


def _wrap(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _to_int(value: Any, bits: int) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return _wrap(value, bits)
    if isinstance(value, float):  # Java: (int) d saturates, then narrows
        if math.isnan(value):
            return 0
        width = 64 if bits == 64 else 32
        lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
        truncated = lo if value <= lo else hi if value >= hi else int(value)
        return _wrap(truncated, bits)
    if isinstance(value, Decimal):
        return _wrap(int(value), bits)
    if isinstance(value, str):
        if not _INTEGER.fullmatch(value):
            raise ValueError(value)
        number = int(value)
        if _wrap(number, bits) != number:
            raise ValueError(value)
        return number
    raise DataException(f"Unexpected type in Cast transformation: {java_class(value)}")


def _f32(value: float) -> float:
    try:
        return _struct.unpack(">f", _struct.pack(">f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def _to_float(value: Any, f32: bool) -> float:
    if isinstance(value, bool):
        result = 1.0 if value else 0.0
    elif isinstance(value, (int, float, Decimal)):
        result = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if text[-1:] in ("f", "F", "d", "D") and not text.lower().endswith("inf"):
            text = text[:-1]
        result = float(text)
    else:
        raise DataException(f"Unexpected type in Cast transformation: {java_class(value)}")
    return _f32(result) if f32 else result


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return not math.isnan(value) and _to_int(value, 64) != 0
    if isinstance(value, (int, Decimal)):
        return int(value) != 0
    if isinstance(value, str):
        return value.lower() == "true"
    raise DataException(f"Unexpected type in Cast transformation: {java_class(value)}")


def java_float_str(value: float, f32: bool = False) -> str:
    """Java's ``Double.toString`` (or ``Float.toString``): shortest digits, ``1.0E10`` outside [1e-3, 1e7)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    text = repr(value)
    if f32:
        value = _f32(value)
        text = next((s for p in range(1, 10) if _f32(float(s := f"{value:.{p}g}")) == value), repr(value))
    sign, digits, exponent = Decimal(text).as_tuple()
    digits_str = "".join(map(str, digits)).rstrip("0") or "0"
    sci = len(digits) + int(exponent) - 1
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        whole, _, fraction = f"{Decimal(text).copy_abs():f}".partition(".")
        return f"{prefix}{whole}.{fraction.rstrip('0') or '0'}"
    return f"{prefix}{digits_str[0]}.{digits_str[1:] or '0'}E{sci}"


def _to_string(value: Any, schema: Schema | None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_float_str(value, f32=schema is not None and schema.type == T.FLOAT32)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.datetime):
        return _ISO_TIMESTAMP.format(to_epoch_ms(value))
    if isinstance(value, dt.date):
        return _ISO_DATE.format(to_epoch_ms(value))
    if isinstance(value, dt.time):
        return _ISO_TIME.format(to_epoch_ms(value))
    return str(value)


def _encode_logical(schema: Schema, value: Any) -> Any:
    """Logical values as their underlying numbers (days, ms of day, epoch ms) before a non-string cast."""
    if schema.name == DATE_NAME and isinstance(value, (dt.date, dt.datetime)):
        return to_epoch_ms(value) // MS_PER_DAY
    if schema.name == TIME_NAME and isinstance(value, (dt.time, dt.datetime)):
        return to_epoch_ms(value) % MS_PER_DAY
    if schema.name == TIMESTAMP_NAME and isinstance(value, (dt.date, dt.datetime)):
        return to_epoch_ms(value)
    return value


def cast_value(schema: Schema | None, value: Any, target: SchemaType) -> Any:
    """Kafka's ``Cast.castValueToType``: DataException for unsupported input types or unparsable strings."""
    if value is None:
        return None
    inferred = schema.type if schema is not None else schema_type_of(value)
    if inferred is None:
        raise DataException(
            f"Cast transformation was passed a value of type {java_class(value)} which is not "
            "supported by Connect's data API"
        )
    if inferred not in INPUT_TYPES:
        raise DataException(
            f"Cast transformation does not support casting from {inferred.name}; supported types "
            f"are {_names(INPUT_TYPES)}"
        )
    if schema is not None and schema.name in LOGICAL_NAMES and target != T.STRING:
        value = _encode_logical(schema, value)
    try:
        if target in _BITS:
            return _to_int(value, _BITS[target])
        if target in (T.FLOAT32, T.FLOAT64):
            return _to_float(value, target == T.FLOAT32)
        if target == T.BOOLEAN:
            return _to_bool(value)
        if target == T.STRING:
            return _to_string(value, schema)
    except (ValueError, OverflowError):
        raise DataException(f"Value ({value}) was out of range for requested data type") from None
    raise DataException(f"{target.name} is not supported in the Cast transformation.")


# -- the transform -------------------------------------------------------------------------------------------


class CastConfig(TransformConfig):
    spec: CsvList = ConfigField(
        alias="spec",
        description="List of fields and the type to cast them to of the form "
        "field1:type,field2:type to cast fields of Maps or Structs. A single "
        "type to cast the entire value. Valid types are int8, int16, int32, "
        "int64, float32, float64, boolean, and string.",
    )
    replace_null_with_default: ReplaceNullWithDefault = True

    @field_validator("spec")
    @classmethod
    def _spec(cls, value: list[str]) -> list[str]:
        parse_spec(value)
        return value


class Cast(SideTransformation):
    """Cast fields (``age:int64,score:float32``) or the whole key/value (``int32``) to int8, int16,
    int32, int64, float32, float64, boolean or string. Null keys/values pass through.

    Keys: ``spec``, ``replace.null.with.default``."""

    config_class = CastConfig
    PURPOSE = "cast types"

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.casts = parse_spec(self.config.spec)
        self.whole = self.casts.get(None)
        self.cache = SchemaCache()

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            if self.whole is not None:
                return self.new_record(record, None, cast_value(None, value, self.whole))
            mapping = require_map(value, self.PURPOSE)
            updated = dict(mapping)
            for name, target in self.casts.items():
                if name is not None:  # None (the whole value) was handled above
                    updated[name] = cast_value(None, mapping.get(name), target)
            return self.new_record(record, None, updated)
        if self.whole is not None:
            updated_schema = self.cache.get(schema, self._updated_schema)
            return self.new_record(record, updated_schema, cast_value(schema, value, self.whole))
        struct = require_struct(value, self.PURPOSE)
        updated_schema = self.cache.get(schema, self._updated_schema)
        values = struct_values(struct, self.config.replace_null_with_default)
        for f in struct.schema.fields:
            field_target = self.casts.get(f.name)
            if field_target is not None:
                values[f.name] = cast_value(f.schema, values[f.name], field_target)
        return self.new_record(record, updated_schema, Struct(updated_schema, values))

    def _updated_schema(self, schema: Schema) -> Schema:
        if self.whole is not None:
            basics = copy_schema_basics(
                schema,
                self.whole,
                optional=schema.optional,
                default=cast_value(schema, schema.default, self.whole),
            )
            if schema.name in LOGICAL_NAMES:  # a cast Timestamp is no longer a Timestamp
                basics.update(name=None, version=None, parameters=None)
            return Schema(**basics)
        if schema.type != T.STRUCT:
            raise DataException(f"Cannot list fields on non-struct type {schema.type.name}")
        fields = []
        for f in schema.fields:
            target = self.casts.get(f.name)
            if target is None:
                fields.append((f.name, f.schema))
            else:
                fields.append(
                    (
                        f.name,
                        Schema(
                            target, f.schema.optional, default=cast_value(f.schema, f.schema.default, target)
                        ),
                    )
                )
        return struct_schema(schema, fields, optional=schema.optional)


class CastKey(KeySide, Cast):
    aliases = kafka_aliases("Cast$Key")


class CastValue(ValueSide, Cast):
    aliases = kafka_aliases("Cast$Value")
