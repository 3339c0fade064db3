"""Turn pydantic errors into problems that name file:line:column, key and a hint."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from edgebuild.errors import Problem, did_you_mean
from edgebuild.recipe.models import SAFE_NAME
from edgebuild.recipe.yaml_loader import LoadedYaml


def validate(model: type[BaseModel], doc: LoadedYaml, data: Any = None,
             prefix: tuple[str, ...] = ()) -> tuple[Any, list[Problem]]:
    """Validate `data` (default: the whole document) against `model`.

    `prefix` is the key path of `data` inside the document, so that errors in
    a nested piece (a pass's params) still point at the right line.
    """
    try:
        value = model.model_validate(doc.data if data is None else data)
    except ValidationError as exc:
        return None, [to_problem(err, model, doc, prefix) for err in exc.errors()]
    return value, []


def to_problem(err: Any, model: type[BaseModel], doc: LoadedYaml,
               prefix: tuple[str, ...]) -> Problem:
    loc = (*prefix, *(str(p) for p in err["loc"]))
    location, found = doc.locate(loc)
    key = ".".join(found) if found else ".".join(loc)
    kind = err["type"]
    message = str(err["msg"])
    hint = ""
    if kind == "extra_forbidden":
        bad = str(err["loc"][-1])
        allowed = allowed_keys(model, tuple(err["loc"][:-1]))
        message = f"unknown key '{bad}'"
        hint = did_you_mean(bad, allowed) if allowed else ""
        if not hint and allowed:
            hint = "valid keys here: " + ", ".join(sorted(allowed))
    elif kind == "missing":
        message = f"missing required key '{err['loc'][-1]}'"
        key = ".".join(loc)
    elif kind == "union_tag_invalid":
        tag = err.get("ctx", {}).get("tag", "")
        expected = str(err.get("ctx", {}).get("expected_tags", ""))
        message = f"unknown kind '{tag}'"
        hint = did_you_mean(str(tag), [t.strip(" '") for t in expected.split(",")]) or \
            f"valid kinds: {expected}"
    elif kind == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == SAFE_NAME:
        message = "not a name that can be a folder name"
        hint = "use letters, digits and _ . , = + -, starting with a letter or digit"
    elif message.startswith("Value error, "):
        message = message.removeprefix("Value error, ")
    if kind not in ("extra_forbidden", "missing") and "input" in err and \
            not isinstance(err["input"], (dict, list)):
        message = f"{message} (got {err['input']!r})"
    return Problem(location, key, message, hint)


def allowed_keys(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The field names valid at `loc` inside `model`, following dicts, lists and unions."""
    current: Any = model
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        current = _step(current, part)
        if current is None:
            return []
    fields = _fields(current)
    return fields or []


def _unwrap(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(tp):
            out.extend(_unwrap(arg))
        return out
    return [tp]


def _fields(tp: Any) -> list[str] | None:
    for candidate in _unwrap(tp):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return list(candidate.model_fields)
    return None


def _step(tp: Any, part: Any) -> Any:
    for candidate in _unwrap(tp):
        origin = typing.get_origin(candidate)
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            if str(part) in candidate.model_fields:
                return candidate.model_fields[str(part)].annotation
            # A discriminated union puts the tag value into the location.
            kind = candidate.model_fields.get("kind")
            if kind is not None and str(part) in typing.get_args(kind.annotation):
                return candidate
        elif origin is dict:
            return typing.get_args(candidate)[1]
        elif origin is list and str(part).isdigit():
            return typing.get_args(candidate)[0]
    return None
