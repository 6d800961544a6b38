"""Debezium's ExtractNewRecordState: a change event's ``after`` row as the record's value, for sinks that
want rows rather than envelopes. Records that are not change events pass unchanged."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from headwater.connect.api import Header, Transformation, TransformConfig
from headwater.connect.api.data import Schema, SchemaBuilder, SchemaType, Struct

__all__ = ["ExtractNewRecordState"]

_OPTIONAL_STRING = Schema(SchemaType.STRING, True)


class ExtractNewRecordStateConfig(TransformConfig):
    drop_tombstones: bool = Field(True, alias="drop.tombstones",
                                  description="Drop tombstones (the records that follow deletes).")
    delete_handling_mode: str = Field("drop", alias="delete.handling.mode",
                                      description="drop: drop deletes; rewrite: the old row with __deleted=true; "
                                                  "none: a record with a null value.")
    delete_tombstone_handling_mode: str = Field("", alias="delete.tombstone.handling.mode",
                                                description="Debezium 2.5+: drop, tombstone, rewrite, "
                                                            "rewrite-with-tombstone, delete (wins over the two "
                                                            "keys above).")
    add_fields: str = Field("", alias="add.fields", description="Envelope fields to add to the row, e.g. "
                                                                "op,table,lsn,source.ts_ms.")
    add_fields_prefix: str = Field("__", alias="add.fields.prefix")
    add_headers: str = Field("", alias="add.headers", description="Envelope fields to add as headers.")
    add_headers_prefix: str = Field("__", alias="add.headers.prefix")

    @field_validator("delete_handling_mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        if value not in ("drop", "rewrite", "none"):
            raise ValueError("must be drop, rewrite or none")
        return value

    @field_validator("delete_tombstone_handling_mode")
    @classmethod
    def _tombstone_mode(cls, value: str) -> str:
        if value and value not in ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete"):
            raise ValueError("must be drop, tombstone, rewrite, rewrite-with-tombstone or delete")
        return value


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


class ExtractNewRecordState(Transformation):
    config_class: ClassVar[type[TransformConfig]] = ExtractNewRecordStateConfig
    aliases: ClassVar[tuple[str, ...]] = ("io.debezium.transforms.ExtractNewRecordState",)

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        c = self.config
        mode = c.delete_tombstone_handling_mode
        # Debezium 2.5+'s single key, in terms of the two older ones.
        self.deletes = {"drop": "drop", "tombstone": "none", "rewrite": "rewrite",
                        "rewrite-with-tombstone": "rewrite", "delete": "none"}.get(mode, c.delete_handling_mode)
        self.keep_tombstones = (mode in ("rewrite-with-tombstone", "delete", "tombstone")
                                if mode else not c.drop_tombstones)
        self.fields, self.headers = _names(c.add_fields), _names(c.add_headers)
        self.schemas: dict[tuple[int, bool], Schema] = {}

    def apply(self, record: Any) -> Any:
        value = record.value
        if value is None:
            return record if self.keep_tombstones else None
        if not isinstance(value, Struct) or value.schema.field("op") is None or value.schema.field("after") is None:
            return record
        op = value.values.get("op")
        headers = list(record.headers) + [Header(self.config.add_headers_prefix + n.replace(".", "_"),
                                                 _envelope_value(value, n), _OPTIONAL_STRING) for n in self.headers]
        if op == "d":
            if self.deletes == "drop":
                return None
            if self.deletes == "none":
                return record.new_record(value=None, value_schema=None, headers=headers)
            row = value.values.get("before")
            deleted = "true"
        else:
            row = value.values.get("after")
            deleted = "false"
        if row is None:
            return record.new_record(value=None, value_schema=None, headers=headers)
        rewrite = self.deletes == "rewrite"
        schema = self._schema(row.schema, rewrite)
        values = dict(row.values)
        for n in self.fields:
            values[self.config.add_fields_prefix + n.replace(".", "_")] = _envelope_value(value, n)
        if rewrite:
            values["__deleted"] = deleted
        out = object.__new__(Struct)
        out.schema, out.values = schema, values
        return record.new_record(value=out, value_schema=schema, headers=headers)

    def _schema(self, row: Schema, rewrite: bool) -> Schema:
        key = (id(row), rewrite)
        schema = self.schemas.get(key)
        if schema is None:
            builder = SchemaBuilder.struct()
            if row.name:
                builder.name(row.name)
            builder.optional()
            for f in row.fields:
                builder.field(f.name, f.schema)
            for n in self.fields:
                builder.field(self.config.add_fields_prefix + n.replace(".", "_"), _OPTIONAL_STRING)
            if rewrite:
                builder.field("__deleted", _OPTIONAL_STRING)
            schema = self.schemas[key] = builder.build()
        return schema


def _envelope_value(envelope: Struct, name: str) -> str | None:
    """``op``, ``ts_ms`` (the envelope's) or a source field (``table``, ``lsn``, ``source.ts_ms``), as text."""
    values = envelope.values
    if name.startswith("source."):
        source, name = values.get("source"), name[len("source."):]
    elif name in values and name != "source":
        source = None
    else:
        source = values.get("source")
    found = (source.values if isinstance(source, Struct) else {}).get(name) if source is not None else values.get(name)
    return None if found is None else str(found)
