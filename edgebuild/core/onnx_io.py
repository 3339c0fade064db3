"""The inputs and outputs an ONNX file declares, read without the `onnx` package.

`edgebuild validate` and `plan` compare a recipe's `inputs:` with its ONNX
source's, and must stay light (no framework import, tests/unit/test_light_imports.py),
so this reads the few protobuf fields it needs straight from the wire format::

    ModelProto.graph(7) ─▶ GraphProto.input(11) / output(12) ─▶ ValueInfoProto
        name(1), type(2).tensor_type(1) ─▶ elem_type(1), shape(2).dim(1)
                                            ─▶ dim_value(1) | dim_param(2)
    GraphProto.initializer(5).name(8)   (old IR versions list weights as inputs too)

Every other field, weights included, is skipped by its length without being read;
the file is memory-mapped, so a large model costs no more than a small one. A
malformed file raises `OnnxReadError`, never an IndexError or a hang.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# TensorProto.DataType -> numpy-style name (the recipe's `dtype:` spelling where it has one).
ELEM_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
              7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32",
              13: "uint64", 14: "complex64", 15: "complex128", 16: "bfloat16"}

Dim = int | str  # a fixed size, or a symbolic name ("" when the file names none)


class OnnxReadError(ValueError):
    """The file is not an ONNX model this reader understands."""


@dataclass(frozen=True)
class OnnxTensor:
    name: str
    dtype: str  # ELEM_TYPES' name, or "type <n>" / "non-tensor"
    dims: tuple[Dim, ...] | None  # None: the file declares no shape (any rank)

    def describe(self) -> str:
        shape = "any shape" if self.dims is None else \
            "[" + ", ".join(str(d) if isinstance(d, int) else (d or "?") for d in self.dims) + "]"
        return f"{self.name} {self.dtype} {shape}"


@dataclass(frozen=True)
class OnnxSignature:
    inputs: list[OnnxTensor]  # initializers listed as inputs left out
    outputs: list[OnnxTensor]


def read_signature(path: Path) -> OnnxSignature:
    """The graph inputs (without initializers) and outputs of the ONNX file at `path`."""
    with path.open("rb") as handle:
        if path.stat().st_size == 0:
            raise OnnxReadError(f"{path.name} is empty")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            problem = _parse(mapped)
    if isinstance(problem, str):
        raise OnnxReadError(problem)
    return problem


def _parse(mapped: mmap.mmap) -> OnnxSignature | str:
    """The signature, or what is wrong as text: an exception's traceback would keep
    views of the map alive past its closing (BufferError)."""
    with memoryview(mapped) as view:
        try:
            return _signature(view)
        except OnnxReadError as exc:
            return str(exc)


def _signature(data: memoryview) -> OnnxSignature:
    inputs: list[OnnxTensor] = []
    outputs: list[OnnxTensor] = []
    initializers: set[str] = set()
    graphs = 0
    for field, _, graph in _fields(data):
        if field != 7 or not isinstance(graph, memoryview):
            continue
        graphs += 1
        for gfield, _, value in _fields(graph):
            if not isinstance(value, memoryview):
                continue
            if gfield == 11:
                inputs.append(_value_info(value))
            elif gfield == 12:
                outputs.append(_value_info(value))
            elif gfield == 5:
                initializers.add(_string(value, 8))
    if not graphs:
        raise OnnxReadError("no graph in the file (is it an ONNX model?)")
    return OnnxSignature([t for t in inputs if t.name not in initializers], outputs)


def _value_info(data: memoryview) -> OnnxTensor:
    name, dtype, dims = "", "non-tensor", None
    for field, _, value in _fields(data):
        if field == 1 and isinstance(value, memoryview):
            name = _text(value)
        elif field == 2 and isinstance(value, memoryview):
            for tfield, _, tensor in _fields(value):
                if tfield == 1 and isinstance(tensor, memoryview):
                    dtype, dims = _tensor_type(tensor)
    return OnnxTensor(name, dtype, dims)


def _tensor_type(data: memoryview) -> tuple[str, tuple[Dim, ...] | None]:
    dtype, dims = "type 0", None
    for field, _, value in _fields(data):
        if field == 1 and isinstance(value, int):
            dtype = ELEM_TYPES.get(value, f"type {value}")
        elif field == 2 and isinstance(value, memoryview):
            found: list[Dim] = []
            for dfield, _, dim in _fields(value):
                if dfield == 1 and isinstance(dim, memoryview):
                    found.append(_dim(dim))
            dims = tuple(found)
    return dtype, dims


def _dim(data: memoryview) -> Dim:
    for field, _, value in _fields(data):
        if field == 1 and isinstance(value, int):
            return value if value > 0 else ""  # 0 or negative: unknown
        if field == 2 and isinstance(value, memoryview):
            return _text(value)
    return ""


def _string(data: memoryview, wanted: int) -> str:
    for field, _, value in _fields(data):
        if field == wanted and isinstance(value, memoryview):
            return _text(value)
    return ""


def _text(value: memoryview) -> str:
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OnnxReadError("a name is not UTF-8 text") from exc


def _fields(data: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of one message: an int for varints and fixed
    widths, a memoryview for length-delimited fields (submessages, strings, bytes)."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise OnnxReadError("field number 0 (not a protobuf message)")
        if wire == 0:
            value, pos = _varint(data, pos)
            yield field, wire, value
        elif wire == 2:
            size, pos = _varint(data, pos)
            if not 0 <= size <= end - pos:
                raise OnnxReadError("a field runs past the end of the file (truncated?)")
            yield field, wire, data[pos:pos + size]
            pos += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if width > end - pos:
                raise OnnxReadError("a field runs past the end of the file (truncated?)")
            yield field, wire, int.from_bytes(data[pos:pos + width], "little")
            pos += width
        else:
            raise OnnxReadError(f"wire type {wire} (not an ONNX model)")


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    for _ in range(10):
        if pos >= len(data):
            raise OnnxReadError("the file ends inside a number (truncated?)")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result >= 1 << 63:  # int64 fields are two's complement
                result -= 1 << 64
            return result, pos
        shift += 7
    raise OnnxReadError("a number longer than 10 bytes (not a protobuf message)")
