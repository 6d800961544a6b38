"""The handlers' request views (broker/protocol/requests.py) name fields the requests really have: each
field of each view, nested views included, is a field of the API's request schema (some version of it).
A misspelt field in a view would type-check and then fail on the first request that reaches it."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

import pytest

from headwater.broker import apis
from headwater.broker.protocol.codec import request_class


def _views_in(hint: Any) -> Iterator[type]:
    """The request views inside an annotation such as ``Sequence[FetchTopic] | None``."""
    if isinstance(hint, type) and getattr(hint, "_is_protocol", False):
        yield hint
    for arg in typing.get_args(hint):
        yield from _views_in(arg)


def _unknown_fields(view: type, struct: Any, path: str) -> list[str]:
    unknown = []
    for name, hint in typing.get_type_hints(view).items():
        field = struct.fields.get(name)
        if field is None:
            unknown.append(f"{path}{name}")
            continue
        for nested in _views_in(hint):
            unknown += _unknown_fields(nested, field, f"{path}{name}.")
    return unknown


@pytest.mark.parametrize("key", sorted(apis.REGISTRY))
def test_every_field_of_the_view_is_in_the_schema(key: int) -> None:
    view = typing.get_type_hints(apis.REGISTRY[key].handler)["req"]
    cls = request_class(key)
    assert cls is not None
    assert view.__name__ == cls.__name__  # the view of this API, named as Kafka names the request
    assert _unknown_fields(view, cls._struct, "") == []


def test_a_misspelt_field_is_found() -> None:
    class Misspelt(typing.Protocol):
        partition_indices: list[int]  # the schema says partition_indexes

    topics = request_class(9)._struct.fields["topics"]  # type: ignore[union-attr]
    assert _unknown_fields(Misspelt, topics, "topics.") == ["topics.partition_indices"]
