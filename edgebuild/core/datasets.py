"""DatasetRef: a params field that names a recipe dataset, found at any depth.

Whatever a stage reads must be in its cache key. A pass's or backend's params
model marks each field that names a recipe dataset with this type (as Olive's
`ParamCategory.DATA` marks data params), and `dataset_refs` finds every such
value by walking the validated params: top-level, nested models, lists and
dicts alike. The planner puts what it finds into the stage's key and declared
inputs; the recipe loader checks each name exists, at the line it is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, GetCoreSchemaHandler
from pydantic_core import core_schema

KeyPath = tuple[str, ...]


class DatasetRef(str):
    """The name of a dataset under the recipe's `datasets:`."""

    __slots__ = ()

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(
            cls, core_schema.str_schema(min_length=1),
            serialization=core_schema.plain_serializer_function_ser_schema(str))


def dataset_refs(value: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, str]]:
    """(key path, dataset name) for every DatasetRef inside a validated value."""
    if isinstance(value, DatasetRef):
        yield path, str(value)
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from dataset_refs(getattr(value, name), (*path, name))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from dataset_refs(item, (*path, str(key)))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from dataset_refs(item, (*path, str(index)))


def dataset_names(value: Any) -> tuple[str, ...]:
    """The distinct datasets a validated value refers to, sorted."""
    return tuple(sorted({name for _, name in dataset_refs(value)}))
