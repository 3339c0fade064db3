"""The ONNX side of `model.prepost`: the same pre- and post-processing, composed onto an
ONNX source with ONNX GraphSurgeon.

    uint8 image ─ Cast ─ Transpose ─ ·scale ─ −mean ─ /std ─▶ [the file's graph] ─▶ head(s)
        ─ split head ─ (×[W,H,W,H]) ─ (cxcywh→xyxy) ─ best class per box ─ shift by class
        ─ NonMaxSuppression ─ Gather ─ pad (Concat + Slice) ─▶ boxes, scores, classes

The function is the one `prepost_torch.py` builds around a PyTorch model, written as ONNX
nodes so the FP32 reference (ONNX Runtime on the composed file) and every backend run
the same deployed graph. Only ops whose signature is stable from opset 11 up are used
(Slice and NonMaxSuppression take their numbers as inputs; ReduceMax's axes follow the
opset), so the nodes join the file at its own opset; constants are initializers, which
onnx2tf needs for NMS thresholds (docs/passes.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.errors import StageError
from edgebuild.passes.onnx_stats import graph_stats
from edgebuild.recipe.models import ModelSource
from edgebuild.recipe.prepost import DetectionPost, Head, InputPrep, PrePost

if TYPE_CHECKING:
    import onnx

MIN_OPSET = 11  # NonMaxSuppression and Slice with their numbers as inputs
_END = 2**63 - 1  # Slice to the end of an axis


def compose(model: onnx.ModelProto, spec: PrePost, inputs: list[dict[str, Any]],
            outputs: list[str]) -> onnx.ModelProto:
    """`model` with `spec`'s pre-processing in front and NMS behind.

    `inputs` and `outputs` are the recipe's declarations (the raw image input, and the
    names of boxes, scores and classes): the composed graph carries those names.
    """
    import onnx
    import onnx_graphsurgeon as gs

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < MIN_OPSET:
        raise StageError(f"model.prepost on an ONNX source needs opset >= {MIN_OPSET}; the "
                         f"file has opset {opset}",
                         "convert it first: onnx.version_converter.convert_version(model, 17)")
    graph = gs.import_onnx(model)
    # The tensor the source model reads: its input, or after `_prepend` the normalised image.
    model_input = graph.inputs[0] if graph.inputs else None
    if spec.input is not None:
        model_input = _prepend(graph, spec.input, inputs)
    if spec.detection is not None:
        _append(graph, spec.detection, outputs, model_input, opset)
    graph.cleanup().toposort()
    composed: onnx.ModelProto = gs.export_onnx(graph)
    composed.ir_version = model.ir_version
    del composed.metadata_props[:]  # the model's own metadata (names, stride) stays
    composed.metadata_props.extend(model.metadata_props)
    onnx.checker.check_model(composed)
    return composed


def _unique(graph: Any, prefix: str) -> str:
    """A tensor name not yet in `graph`: `prefix_<n>`."""
    return str(graph._generate_name(prefix, set(graph.tensors())))


def _const(graph: Any, name: str, values: Any) -> Any:
    """An initializer named after what it holds (`prepost/iou_threshold_7`)."""
    import onnx_graphsurgeon as gs

    return gs.Constant(_unique(graph, f"prepost/{name}"), values)


def _op(graph: Any, op: str, inputs: list[Any], attrs: dict[str, Any] | None = None,
        outputs: list[Any] | None = None, count: int = 1) -> Any:
    """Add one node named `prepost/<Op>_<n>`; return its output (or outputs, `count` > 1).
    gs makes the output variables; their names are unique in the graph."""
    names = {node.name for node in graph.nodes}
    made = graph.layer(op=op, inputs=inputs, attrs=attrs or {},
                       name=graph._generate_name(f"prepost/{op}", names),
                       outputs=outputs or [f"prepost/{op}_out"] * count)
    return made if count > 1 else made[0]


def _prepend(graph: Any, spec: InputPrep, inputs: list[dict[str, Any]]) -> Any:
    """Make the raw uint8 image the graph input, normalised into the old input (returned)."""
    import numpy as np
    import onnx
    import onnx_graphsurgeon as gs

    if len(graph.inputs) != 1 or len(inputs) != 1:
        raise StageError(f"model.prepost.input normalises one image, but the ONNX file has "
                         f"{len(graph.inputs)} input(s) and the recipe declares {len(inputs)}",
                         "drop `prepost.input` and normalise in the dataset's `preprocess`")
    old = graph.inputs[0]
    declared = inputs[0]
    if declared["name"] == old.name:
        old.name = _unique(graph, f"{old.name}_normalized")
    axes = {int(k): v for k, v in declared.get("dynamic_axes", {}).items()}
    raw = gs.Variable(declared["name"], dtype=np.uint8,
                      shape=[axes.get(i, d) for i, d in enumerate(declared["shape"])])
    steps: list[tuple[str, list[Any], dict[str, Any]]] = [
        ("Cast", [], {"to": onnx.TensorProto.FLOAT})]
    if spec.layout == "NHWC":
        steps.append(("Transpose", [], {"perm": [0, 3, 1, 2]}))
    if spec.scale != 1.0:
        steps.append(("Mul", [_const(graph, "scale", np.array(spec.scale, np.float32))], {}))
    if any(m != 0 for m in spec.mean):
        mean = np.array(spec.mean, np.float32).reshape(1, -1, 1, 1)
        steps.append(("Sub", [_const(graph, "mean", mean)], {}))
    if any(s != 1 for s in spec.std):
        std = np.array(spec.std, np.float32).reshape(1, -1, 1, 1)
        steps.append(("Div", [_const(graph, "std", std)], {}))
    x = raw
    for i, (op, extra, attrs) in enumerate(steps):
        last = i == len(steps) - 1
        x = _op(graph, op, [x, *extra], attrs, outputs=[old] if last else None)
    graph.inputs = [raw]
    return old


def _append(graph: Any, spec: DetectionPost, names: list[str], model_input: Any,
            opset: int) -> None:
    """Replace the graph outputs with the detections after NMS."""
    import numpy as np
    import onnx_graphsurgeon as gs

    if len(names) != 3:
        raise StageError(f"model.prepost.detection gives 3 outputs (boxes, scores, classes) "
                         f"but the recipe's `outputs:` names {len(names)}",
                         "write `outputs: [boxes, scores, classes]`")
    if max(spec.model_outputs) >= len(graph.outputs):
        raise StageError(f"model.prepost.detection names output {max(spec.model_outputs)} "
                         f"but the ONNX file has {len(graph.outputs)} output(s): "
                         f"{', '.join(o.name for o in graph.outputs)}",
                         "outputs are counted from 0 in the file's order")
    tensors = graph.tensors()
    for name in names:  # free the recipe's names for the new outputs
        if name in tensors:
            tensors[name].name = _unique(graph, f"{name}_raw")
    i64 = np.int64

    def const(name: str, values: Any, dtype: Any = i64) -> Any:
        return _const(graph, name, np.array(values, dtype))

    def cut(x: Any, start: int, end: int, axis: int) -> Any:
        return _op(graph, "Slice", [x, const("start", [start]), const("end", [end]),
                                    const("axis", [axis])])

    boxes, scores = _boxes_and_scores(graph, spec, model_input, const, cut)
    best, classes, keep = _nms(graph, spec, boxes, scores, const, opset)
    d = spec.max_detections

    def padded(values: Any, fill: float, shape: list[int], name: str) -> Any:
        kept = _op(graph, "Gather", [values, keep], {"axis": 0})
        block = const("padding", np.full(shape, fill), np.float32)
        rows = cut(_op(graph, "Concat", [kept, block], {"axis": 0}), 0, d, 0)
        out = gs.Variable(name, dtype=np.float32, shape=[1, *shape])
        return _op(graph, "Reshape", [rows, const("shape", [1, *shape])], outputs=[out])

    graph.outputs = [padded(boxes, 0.0, [d, 4], names[0]), padded(best, 0.0, [d], names[1]),
                     padded(classes, -1.0, [d], names[2])]


def _boxes_and_scores(graph: Any, spec: DetectionPost, model_input: Any, const: Any,
                      cut: Any) -> tuple[Any, Any]:
    """The head's outputs as boxes [N, 4] (pixel corners) and class scores [.., N, C]."""
    import numpy as np

    heads = [graph.outputs[i] for i in spec.model_outputs]
    if spec.head is Head.GFL:
        boxes, scores = _gfl(graph, spec, model_input, const, cut)
    elif spec.head is Head.BOXES_SCORES:
        boxes, scores = heads
    elif spec.head is Head.YOLOV8:  # [1, 4 + C, N] -> rows [1, N, 4 + C]
        rows = _op(graph, "Transpose", [heads[0]], {"perm": [0, 2, 1]})
        boxes, scores = cut(rows, 0, 4, -1), cut(rows, 4, _END, -1)
    else:  # YOLOV5 [1, N, 5 + C]: score = objectness x class score
        (rows,) = heads
        boxes = cut(rows, 0, 4, -1)
        scores = _op(graph, "Mul", [cut(rows, 4, 5, -1), cut(rows, 5, _END, -1)])
    boxes = _op(graph, "Reshape", [boxes, const("shape", [-1, 4])])  # [N, 4]
    if spec.normalized:
        if model_input is None:
            raise StageError("`normalized: true` scales by the model input's size, but the "
                             "ONNX file has no input", "give pixel boxes")
        shape = _op(graph, "Shape", [model_input])
        size = _op(graph, "Gather", [shape, const("whwh", [3, 2, 3, 2])], {"axis": 0})
        size = _op(graph, "Cast", [size], {"to": 1})  # float
        boxes = _op(graph, "Mul", [boxes, size])
    if not spec.corners:
        centre, extent = cut(boxes, 0, 2, 1), cut(boxes, 2, 4, 1)
        half = _op(graph, "Mul", [extent, const("half", 0.5, np.float32)])
        boxes = _op(graph, "Concat", [_op(graph, "Sub", [centre, half]),
                                      _op(graph, "Add", [centre, half])], {"axis": 1})
    return boxes, scores


def _nms(graph: Any, spec: DetectionPost, boxes: Any, scores: Any, const: Any,
         opset: int) -> tuple[Any, Any, Any]:
    """Best score and class per box, and the indices NMS keeps [K]."""
    import numpy as np

    # Best class per box: ReduceMax + ArgMax, as torch exports `max(dim)` (onnx2tf
    # cannot convert a TopK whose k is ONNX's 1-element tensor). ReduceMax takes its
    # axes as an input from opset 18, as an attribute before.
    if opset >= 18:
        best = _op(graph, "ReduceMax", [scores, const("axes", [-1])], {"keepdims": 0})
    else:
        best = _op(graph, "ReduceMax", [scores], {"axes": [-1], "keepdims": 0})
    index = _op(graph, "ArgMax", [scores], {"axis": -1, "keepdims": 0})
    best = _op(graph, "Reshape", [best, const("shape", [-1])])  # [N]
    classes = _op(graph, "Cast", [_op(graph, "Reshape", [index, const("shape", [-1])])],
                  {"to": 1})
    # Per-class NMS as one NMS: boxes of class k moved k·(largest coordinate + 1) away
    # (torchvision's batched_nms), as the PyTorch wrapper does.
    largest = _op(graph, "ReduceMax", [boxes], {"keepdims": 0})
    step = _op(graph, "Add", [largest, const("one", 1.0, np.float32)])
    offset = _op(graph, "Reshape", [_op(graph, "Mul", [classes, step]),
                                    const("shape", [-1, 1])])
    shifted = _op(graph, "Add", [boxes, offset])
    selected = _op(graph, "NonMaxSuppression", [
        _op(graph, "Reshape", [shifted, const("shape", [1, -1, 4])]),
        _op(graph, "Reshape", [best, const("shape", [1, 1, -1])]),
        const("max_detections", [spec.max_detections]),
        const("iou_threshold", [spec.iou_threshold], np.float32),
        const("score_threshold", [spec.score_threshold], np.float32)],
        {"center_point_box": 0})
    keep = _op(graph, "Gather", [selected, const("box_column", 2)], {"axis": 1})  # [K]
    return best, classes, keep


def _static(shape: Any) -> list[int] | None:
    """A tensor's shape when every dimension is a number."""
    dims = list(shape or [])
    return dims if dims and all(isinstance(d, int) and d > 0 for d in dims) else None


def _gfl(graph: Any, spec: DetectionPost, model_input: Any, const: Any, cut: Any
         ) -> tuple[Any, Any]:
    """A GFL head decoded: boxes `[N, 4]` (x1, y1, x2, y2 pixels), scores `[1, N, C]`.

    Each box side is the expectation of a softmax over `reg_max + 1` bins, in strides,
    from its anchor point (PP-PicoDet's and NanoDet's distribution focal loss head).
    The file has either the class scores per stride and then the distributions per
    stride (PaddleDetection's export) or one `[1, N, C + 4 (reg_max + 1)]` output."""
    import numpy as np

    from edgebuild.recipe.prepost import gfl_priors

    strides = spec.strides or []
    size = _static(getattr(model_input, "shape", None))
    if size is None or len(size) != 4:
        raise StageError("`head: gfl` places anchor points by the model input's height and "
                         "width, but the ONNX file's input has no fixed NCHW shape "
                         f"({getattr(model_input, 'shape', None)})",
                         "export at a fixed input size, or pin it with the recipe's inputs")
    centres, scale = gfl_priors(strides, size[2], size[3], spec.grid_offset)
    points, bins = len(centres), spec.reg_max + 1
    outputs = list(graph.outputs)
    if len(outputs) == 2 * len(strides):
        score_maps, dist_maps = outputs[:len(strides)], outputs[len(strides):]
        scores = _op(graph, "Concat", score_maps, {"axis": 1})
        dists = _op(graph, "Concat", dist_maps, {"axis": 1})
        expected = [[1, -(-size[2] // s) * -(-size[3] // s)] for s in strides]
        for name, maps in (("class scores", score_maps), ("box distributions", dist_maps)):
            for tensor, (batch, count), stride in zip(maps, expected, strides, strict=True):
                shape = _static(tensor.shape)
                if shape is not None and shape[:2] != [batch, count]:
                    raise StageError(
                        f"`head: gfl`: output {tensor.name!r} ({name} at stride {stride}) is "
                        f"{shape}, but a {size[2]}x{size[3]} input has {count} points at "
                        f"stride {stride}", "check `strides` and their order, and the input")
    elif len(outputs) == 1:
        shape = _static(outputs[0].shape)
        classes = shape[-1] - 4 * bins if shape is not None else 0
        if shape is None or classes < 1 or shape[-2] != points:
            raise StageError(f"`head: gfl` with one output needs it [1, {points}, C + "
                             f"{4 * bins}] for these strides and reg_max, not {shape}",
                             "check `strides`, `reg_max` and the input size")
        scores = cut(outputs[0], 0, classes, -1)
        dists = cut(outputs[0], classes, _END, -1)
    else:
        raise StageError(f"`head: gfl` reads the class scores and box distributions of "
                         f"{len(strides)} strides: {2 * len(strides)} outputs (or one "
                         f"combined), but the file has {len(outputs)}",
                         "check `strides` against the file's outputs")
    probs = _op(graph, "Softmax", [_op(graph, "Reshape", [dists, const("shape", [-1, bins])])],
                {"axis": 1})  # [4 N, bins]; a 2-D softmax means the same in every opset
    expect = _op(graph, "MatMul", [probs, const("bins", np.arange(bins).reshape(bins, 1),
                                                np.float32)])
    sides = _op(graph, "Reshape", [expect, const("shape", [-1, 4])])  # l, t, r, b in strides
    sides = _op(graph, "Mul", [sides, const("strides", scale, np.float32)])
    boxes = _op(graph, "Add", [const("anchor_points", centres, np.float32),
                               _op(graph, "Mul", [sides, const("sides", [-1, -1, 1, 1],
                                                               np.float32)])])
    return boxes, scores


class PrepostOnnx(Op):
    """The planner puts this right after `import-onnx` when an ONNX source declares
    `model.prepost`; the FP32 reference and every target start from its output."""

    name = "prepost-onnx"
    version = 1
    accepts = ("onnx",)
    produces = "onnx"
    tools: ClassVar[tuple[str, ...]] = ("onnx", "onnx-graphsurgeon")
    summary = "compose model.prepost (normalisation in front, decode + NMS behind)"
    reads_source = True  # the declaration is the recipe's `model.prepost`

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import onnx

        spec = ModelSource.model_validate(ctx.model_source).prepost
        assert spec is not None
        model = onnx.load(str(ctx.input().main))
        composed = compose(model, spec, list(ctx.io.inputs), list(ctx.io.outputs))
        onnx.save(composed, str(ctx.out / "model.onnx"))
        return OpResult(main="model.onnx", format="onnx",
                        metadata={"graph": graph_stats(ctx.out / "model.onnx")})
