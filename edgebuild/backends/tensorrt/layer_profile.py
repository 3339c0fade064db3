"""trtexec's per-layer profile (`--dumpProfile --exportProfile=FILE`) read as an OpProfile,
with the ONNX nodes each engine layer runs.

The file (samples/common/sampleReporting.cpp, Profiler::exportJSONProfile, in
NVIDIA/TensorRT at a892d22267d9; `medianMs` is missing from older builds' files):

    [ { "count" : N },                                  N profiled iterations
      { "name" : L, "timeMs" : T, "averageMs" : A, "medianMs" : M, "percentage" : P }, ... ]

T is the layer's time summed over the iterations, A = T / N its mean, P its share of the
summed time of every layer; so Σ A is the profiled iteration's GPU time, the "Total" row
trtexec prints under `--dumpProfile`. It is a separate run (`--separateProfileRun`): the
per-layer timing synchronizes after each layer, so Σ A exceeds the timed runs' mean.

Layer names: the builder names a fused layer by joining what it fused with " + "
(`features.0.0.weight + QuantizeLinear_7 + Conv_9 + PWN(Clip_13)`: a weight constant,
its quantize, the convolution and a pointwise activation, `PWN(...)` holding what the
pointwise fusion took, possibly nested and comma-separated); the layers it adds to convert
tensor layouts are `Reformatting CopyNode for Input|Output Tensor K to <layer>`; layers
without an ONNX name are `(Unnamed Layer* K) [Type]`. The ONNX nodes of a layer are the
parts that name a node of the TensorRT-ready model.onnx (its initializers and the
builder's own pieces are not nodes); without the model, the parts that read as node
names of the exporters (`Conv_9`, `/features/0/Conv`) — the note says which.

The file comes from a device and trtexec writes names unescaped: it is read with
as JSON nested at most 200 deep (never evaluated), its size, layer count and name
nesting capped, every field checked with JSON's own types (`"5"` and `true` are not
numbers) and finite numbers only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from edgebuild.core.untrusted import Untrusted, loads
from edgebuild.measure.record import OpProfile, OpRow

SOURCE = "trtexec --dumpProfile --exportProfile (on the device)"
MAX_BYTES = 32_000_000
MAX_LAYERS = 100_000
MAX_MS = 1e9  # a layer's summed time over the profiled runs: 11 days is not a profile
MAX_NESTING = 64  # PWN( groups inside each other in one layer name
REFORMAT = "Reformat"
_REFORMAT = re.compile(r"^Reformatting CopyNode for (?:Input|Output) Tensor \d+ to (?P<to>.+)$")
_UNNAMED = re.compile(r"\(Unnamed Layer\* \d+\)")
# Node names the ONNX exporters write: torch's legacy `<Op>_<n>`, its newer `/a/b/<Op>[_n]`.
_EXPORTER_NODE = re.compile(r"^(?:(?P<op>[A-Z][A-Za-z0-9]*)_\d+|/(?:[^/\s]+/)*(?P<op2>[A-Z]"
                            r"[A-Za-z0-9]*)(?:_\d+)?)$")


class LayerProfileError(ValueError):
    """A trtexec profile file that is not in trtexec's form."""


class _Count(BaseModel):
    # Strict: JSON's own types ("5" and true are not numbers).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    count: int = Field(ge=0, le=10**9)


class _Layer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    name: StrictStr = Field(max_length=20_000)
    timeMs: float = Field(ge=0, le=MAX_MS, allow_inf_nan=False)  # noqa: N815 (trtexec's key)
    averageMs: float = Field(ge=0, le=MAX_MS, allow_inf_nan=False)  # noqa: N815
    medianMs: float | None = Field(None, ge=0, le=MAX_MS,  # noqa: N815 (absent in older
                                   allow_inf_nan=False)    # builds)
    percentage: float = Field(ge=0, le=100.5, allow_inf_nan=False)


def read(text: str) -> tuple[int, list[_Layer]]:
    """The iteration count and the layers of an --exportProfile file; LayerProfileError
    naming the first entry that is not trtexec's."""
    if len(text) > MAX_BYTES:
        raise LayerProfileError(f"the profile is {len(text)} characters, over {MAX_BYTES}")
    try:
        data: Any = loads(text, finite=False)  # nested at most 200 deep; numbers checked below
    except Untrusted as exc:
        raise LayerProfileError(f"{exc}; trtexec writes layer names unescaped, so a name "
                                "with a quote breaks its file") from None
    if not isinstance(data, list) or not data:
        raise LayerProfileError("not a JSON list starting with {\"count\": N}")
    if len(data) > MAX_LAYERS + 1:
        raise LayerProfileError(f"{len(data) - 1} layers, over {MAX_LAYERS}")
    try:
        count = _Count.model_validate(data[0]).count
    except ValidationError:
        raise LayerProfileError("its first entry is not {\"count\": N}") from None
    layers = []
    for index, entry in enumerate(data[1:], start=1):
        try:
            layers.append(_Layer.model_validate(entry))
        except ValidationError as exc:
            where = ".".join(str(p) for p in exc.errors()[0]["loc"]) or "entry"
            raise LayerProfileError(f"entry {index} is not a trtexec layer ({where}: "
                                    f"{exc.errors()[0]['msg']})") from None
        if _nesting(layers[-1].name) > MAX_NESTING:
            raise LayerProfileError(f"entry {index}: its name nests parentheses more than "
                                    f"{MAX_NESTING} deep, not a name trtexec writes")
    return count, layers


def _nesting(name: str) -> int:
    deepest = depth = 0
    for char in name:
        depth += (char == "(") - (char == ")")
        deepest = max(deepest, depth)
    return deepest


def parts(name: str) -> list[str]:
    """What a layer's name says it fused, in order: " + "-joined pieces, `PWN(a, b)`
    opened (nested too)."""
    found: list[str] = []
    for piece in name.split(" + "):
        found.extend(_opened(piece.strip()))
    return [p for p in found if p]


def _opened(piece: str) -> list[str]:
    if not (piece.startswith("PWN(") and piece.endswith(")")):
        return [piece]
    inner, depth, start, out = piece[4:-1], 0, 0, []
    for i, char in enumerate(inner):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    out.append(inner[start:].strip())
    return [leaf for item in out for leaf in _opened(item)]


def _node_types(pieces: list[str], nodes: Mapping[str, str] | None) -> list[tuple[str, str]]:
    """(ONNX node, its op type) for the pieces that are nodes."""
    if nodes is not None:
        return [(p, nodes[p]) for p in pieces if p in nodes]
    found = []
    for piece in pieces:
        match = _EXPORTER_NODE.match(piece)
        if match and not _UNNAMED.search(piece):
            found.append((piece, match["op"] or match["op2"]))
    return found


def _op_type(typed: list[tuple[str, str]]) -> str:
    """A fused group's type: its node types, in order, without repeats and without the
    Q/DQ around them (`Conv+Clip`); a lone QuantizeLinear stays one."""
    kinds: list[str] = []
    for _, kind in typed:
        if kind not in kinds:
            kinds.append(kind)
    core = [k for k in kinds if k not in ("QuantizeLinear", "DequantizeLinear")] or kinds
    return "+".join(core) if core else "layer"


def op_profile(text: str, nodes: Mapping[str, str] | None = None) -> OpProfile:
    """An --exportProfile file as an OpProfile: each layer's mean ms an iteration, its
    ONNX nodes (`nodes`: the model's node name -> op type, when at hand) and whether it
    is a fused group; a reformat layer is typed `Reformat` and names, as its ONNX nodes,
    those of the layer it feeds."""
    count, layers = read(text)
    named = {layer.name: _node_types(parts(layer.name), nodes) for layer in layers}
    rows = []
    for layer in layers:
        reformat = _REFORMAT.match(layer.name)
        if reformat:
            fed = named.get(reformat["to"]) or _node_types(parts(reformat["to"]), nodes)
            rows.append(OpRow(node=layer.name, op_type=REFORMAT, exec="TensorRT reformat",
                              ms=layer.averageMs, share=0.0,
                              onnx_nodes=[n for n, _ in fed] or None))
            continue
        typed = named[layer.name]
        rows.append(OpRow(node=layer.name, op_type=_op_type(typed), exec="TensorRT",
                          ms=layer.averageMs, share=0.0,
                          onnx_nodes=[n for n, _ in typed] or None, fused=len(typed) > 1))
    ops_ms = sum(row.ms or 0.0 for row in rows)
    for row in rows:
        row.share = (row.ms or 0.0) / ops_ms if ops_ms else 0.0
    rows.sort(key=lambda row: -(row.ms or 0.0))
    how = ("the model.onnx beside the engine" if nodes is not None else
           "no model.onnx at hand: the parts that read as exporter node names")
    total = sum(layer.timeMs for layer in layers) / count if count else None  # "Total" row
    return OpProfile(source=SOURCE, runs=count, ops_ms=ops_ms, runtime_ms=total, rows=rows,
                     note=("trtexec's per-layer mean over a profiling run of its own (each "
                           "layer synchronized: the sum exceeds the timed mean); a layer's "
                           f"ONNX nodes from its fused name ({how}); `Reformat` rows are "
                           "layout conversions TensorRT added, with the nodes of the layer "
                           "they feed"))


def group_of(profile: OpProfile) -> dict[str, str]:
    """ONNX node -> the engine layer (fused group) it landed in."""
    return {node: row.node for row in profile.rows
            if row.op_type != REFORMAT for node in row.onnx_nodes or ()}


def onnx_node_types(path: Any) -> dict[str, str] | None:
    """A model's node name -> op type (its weights not loaded); None when unreadable."""
    try:
        import onnx

        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # a model that cannot be read leaves the names to the fallback
        return None
    return {node.name: node.op_type for node in model.graph.node if node.name}
