"""A model's own metadata, read from its ONNX file's `metadata_props`: typed and bounded.

Exporters write what a deployment needs there: Ultralytics puts `task`, `stride`, `imgsz`
and the class `names` (a Python dict literal, `{0: 'person', 1: 'bicycle', ...}`). The
file is untrusted, so nothing is evaluated: a value is parsed only when it is a plain
literal (dicts, lists, tuples, strings, integers; checked node by node before
`ast.literal_eval`), only under a size cap, and kept only when it has the expected type
and range. What is present but unreadable is named in `ignored`, never guessed at.
The report escapes every string of it (report/render.py `md`, report/html.py `escape`).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_VALUE_CHARS = 256 * 1024  # a names literal of 4,096 long names fits
MAX_CLASSES = 4096
MAX_NAME_CHARS = 100
MAX_NAMES_CHARS = 64 * 1024  # all names together: the report carries them per target
MAX_IGNORED = 16
_TASK = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
_LITERAL_NODES = (ast.Expression, ast.Dict, ast.List, ast.Tuple, ast.Constant, ast.expr_context)


class ModelMetadata(BaseModel):
    """What edgebuild understood of a model's `metadata_props`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str | None = Field(None, pattern=_TASK.pattern, description="e.g. detect, segment.")
    names: list[str] | None = Field(None, max_length=MAX_CLASSES,
                                    description="Class names, by class index.")
    stride: int | None = Field(None, ge=1, le=4096, description="The largest feature stride.")
    imgsz: list[int] | None = Field(None, min_length=1, max_length=4,
                                    description="The input size the model was exported at.")
    ignored: list[str] = Field(default_factory=list, max_length=MAX_IGNORED,
                               description="Keys present but not readable, with why.")

    @property
    def empty(self) -> bool:
        return not any((self.task, self.names, self.stride, self.imgsz, self.ignored))

    def summary(self) -> str:
        """One line for a report: "task detect, 80 classes (person, bicycle, car, motorcycle,
        …), stride 32, input 640×640". Raw text: the renderer escapes it."""
        parts = [f"task {self.task}"] if self.task else []
        if self.names is not None:
            shown = ", ".join(self.names[:4]) + (", …" if len(self.names) > 4 else "")
            parts.append(f"{len(self.names)} classes ({shown})")
        if self.stride is not None:
            parts.append(f"stride {self.stride}")
        if self.imgsz:
            parts.append("input " + "×".join(str(n) for n in self.imgsz))
        if self.ignored:
            parts.append(f"ignored: {'; '.join(self.ignored)}")
        return ", ".join(parts)


def read_metadata(props: dict[str, str]) -> ModelMetadata:
    """The known keys of `props` (a model's `metadata_props`), parsed without evaluation."""
    found: dict[str, Any] = {}
    ignored: list[str] = []
    for key, parse in (("task", _task), ("names", _names), ("stride", _stride),
                       ("imgsz", _imgsz)):
        if key not in props:
            continue
        try:
            found[key] = parse(props[key])
        except ValueError as exc:
            ignored.append(f"{key}: {exc}")
    return ModelMetadata(**found, ignored=ignored[:MAX_IGNORED])


def _literal(text: str) -> Any:
    """A plain Python/JSON-style literal, or ValueError. Never evaluates an expression."""
    if len(text) > MAX_VALUE_CHARS:
        raise ValueError(f"over {MAX_VALUE_CHARS // 1024} KiB")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ValueError("not a literal") from None
    for node in ast.walk(tree):
        if not isinstance(node, _LITERAL_NODES):
            raise ValueError("not a plain literal")
        if isinstance(node, ast.Constant) and not isinstance(node.value, str | int):
            raise ValueError("not a plain literal")
    return ast.literal_eval(tree)


def _int(value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"not an integer in {low}..{high}")
    return value


def _task(text: str) -> str:
    if not _TASK.match(text):
        raise ValueError("not a short word")
    return text


def _stride(text: str) -> int:
    value = _literal(text)
    if isinstance(value, list | tuple) and value:  # per-level strides: the largest
        return max(_int(v, 1, 4096) for v in value)
    return _int(value, 1, 4096)


def _imgsz(text: str) -> list[int]:
    value = _literal(text)
    sizes = list(value) if isinstance(value, list | tuple) else [value]
    if not 1 <= len(sizes) <= 4:
        raise ValueError("not 1 to 4 sizes")
    return [_int(v, 1, 65536) for v in sizes]


def _names(text: str) -> list[str]:
    """`{0: 'person', ...}` (Ultralytics), `{"0": "person"}` (JSON) or `['person', ...]`."""
    value = _literal(text)
    if isinstance(value, dict):
        try:
            by_index = {int(k): v for k, v in value.items()
                        if isinstance(k, int) or (isinstance(k, str) and k.isdigit())}
        except ValueError:
            raise ValueError("keys are not class indices") from None
        if len(by_index) != len(value) or set(by_index) != set(range(len(value))):
            raise ValueError("keys are not the class indices 0..n-1")
        value = [by_index[i] for i in range(len(by_index))]
    if not isinstance(value, list | tuple) or not value:
        raise ValueError("not a dict or list of class names")
    if len(value) > MAX_CLASSES:
        raise ValueError(f"over {MAX_CLASSES} classes")
    if not all(isinstance(v, str) for v in value):
        raise ValueError("a class name is not a string")
    names = [v[:MAX_NAME_CHARS] for v in value]
    if sum(len(n) for n in names) > MAX_NAMES_CHARS:
        raise ValueError(f"names over {MAX_NAMES_CHARS // 1024} KiB in all")
    return names


__all__ = ["ModelMetadata", "read_metadata"]
