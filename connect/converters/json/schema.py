"""Schemas: Connect schemas to and from their JSON form (Kafka's ``asJsonSchema``/``asConnectSchema``)."""

from __future__ import annotations

from typing import Any

from headwater.connect.api.data import Field, Schema, SchemaType
from headwater.connect.api.errors import DataException

from .common import (
    _INT_RANGES,
)
from .read import JsonReading
from .write import JsonWriting


class JsonSchemas(JsonWriting, JsonReading):
    """Schema translation; defaults are written and read with the value writers and readers."""


    def as_json_schema(self, schema: Schema | None) -> dict[str, Any] | None:
        """Kafka's ``asJsonSchema``, keys in Kafka's order."""
        if schema is None:
            return None
        t = schema.type
        out: dict[str, Any] = {"type": t.value}
        if t is SchemaType.ARRAY:
            out["items"] = self.as_json_schema(schema.value_schema)
        elif t is SchemaType.MAP:
            out["keys"] = self.as_json_schema(schema.key_schema)
            out["values"] = self.as_json_schema(schema.value_schema)
        elif t is SchemaType.STRUCT:
            fields = []
            for f in schema.fields:
                field_json = dict(self.as_json_schema(f.schema) or {})
                field_json["field"] = f.name
                fields.append(field_json)
            out["fields"] = fields
        elif t not in _INT_RANGES and t not in (SchemaType.FLOAT32, SchemaType.FLOAT64, SchemaType.BOOLEAN,
                                                 SchemaType.STRING, SchemaType.BYTES):
            raise DataException(f"Couldn't translate unsupported schema type {schema}.")
        out["optional"] = schema.optional
        if schema.name is not None:
            out["name"] = schema.name
        if schema.version is not None:
            out["version"] = schema.version
        if schema.doc is not None:
            out["doc"] = schema.doc
        if schema.parameters is not None:
            out["parameters"] = dict(schema.parameters)
        if schema.default is not None:
            out["default"] = self._writer(schema)(schema.default)
        return out

    def as_connect_schema(self, json_schema: Any) -> Schema | None:
        """Kafka's ``asConnectSchema``."""
        if json_schema is None:
            return None
        if not isinstance(json_schema, dict):
            raise DataException("Schema must contain 'type' field")
        type_name = json_schema.get("type")
        if not isinstance(type_name, str):
            raise DataException("Schema must contain 'type' field")
        kw: dict[str, Any] = {}
        if type_name == "array":
            items = json_schema.get("items")
            if items is None:
                raise DataException("Array schema did not specify the element type")
            kw["value_schema"] = self.as_connect_schema(items)
        elif type_name == "map":
            if "keys" not in json_schema:
                raise DataException("Map schema did not specify the key type")
            if "values" not in json_schema:
                raise DataException("Map schema did not specify the value type")
            kw["key_schema"] = self.as_connect_schema(json_schema["keys"])
            kw["value_schema"] = self.as_connect_schema(json_schema["values"])
        elif type_name == "struct":
            fields_json = json_schema.get("fields")
            if not isinstance(fields_json, list):
                raise DataException("Struct schema's \"fields\" argument is not an array.")
            fields = []
            for i, field_json in enumerate(fields_json):
                name = field_json.get("field") if isinstance(field_json, dict) else None
                if not isinstance(name, str):
                    raise DataException("Struct schema's field name not specified properly")
                field_schema = self.as_connect_schema(field_json)
                if field_schema is None:  # not reached: field_json is an object
                    raise DataException("Struct schema's field schema not specified properly")
                fields.append(Field(name, i, field_schema))
            kw["fields"] = tuple(fields)
        try:
            schema_type = SchemaType(type_name)
        except ValueError:
            raise DataException(f"Unknown schema type: {type_name}") from None
        kw["optional"] = json_schema.get("optional") is True
        name = json_schema.get("name")
        if isinstance(name, str):
            kw["name"] = name
        version = json_schema.get("version")
        if isinstance(version, int) and not isinstance(version, bool):
            kw["version"] = version
        doc = json_schema.get("doc")
        if isinstance(doc, str):
            kw["doc"] = doc
        params = json_schema.get("parameters")
        if isinstance(params, dict):
            if not all(isinstance(v, str) for v in params.values()):
                raise DataException("Schema parameters must have string values.")
            kw["parameters"] = tuple(params.items())
        schema = Schema(schema_type, **kw)
        if "default" in json_schema:
            default = self._reader(schema)(json_schema["default"])
            schema = Schema(schema_type, default=default, **kw)
        return schema
