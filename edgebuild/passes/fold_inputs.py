"""fold-inputs: bind declared-constant inputs into the graph, so control flow they decide
disappears before a converter sees it.

A streaming model often takes a setting as an input (Silero VAD's sample rate `sr`) and
branches on it with an `If`. ONNX Runtime runs both branches' graphs happily; OpenVINO,
onnx2tf and QNN convert *every* branch, and fail on the one the app never takes (the 8 kHz
branch's shapes). The recipe already says the app always feeds `sr: 16000` (`value:`), so
this pass makes that a fact of the graph::

    sr (input) ─ Equal(16000) ─ If ─┬ then: 16 kHz  ──▶  sr (initializer 16000) ─▶ onnxslim
                                    └ else:  8 kHz       ─▶ the 16 kHz branch, inlined

1. each named input becomes an initializer holding its declared `value` (at its declared
   shape) and leaves the graph's inputs;
2. the other inputs' dimensions are pinned at their declared sizes (`dynamic_axes` stay
   dynamic), so shape arithmetic folds too;
3. the simplifier folds constants: an `If` with a constant condition is replaced by the
   branch taken, a `Loop` with constant bounds may unroll;
4. ONNX Runtime runs the original (fed the value) and the result (not fed it) on seeded
   inputs and the stage fails if they differ.

Every later stage of the chain is told the model no longer has the input (the planner
moves it from `io.inputs` to `io.folded`), so no runner, dataset or latency feed gives it.
`fold_hint` is what a converter's error says when this pass would have helped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.errors import BackendUnavailable, StageError

if TYPE_CHECKING:
    import onnx

CONTROL_FLOW = ("If", "Loop")


class OutputCheck(BaseModel):
    """How a graph rewrite is checked: ONNX Runtime's outputs before and after it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    check_samples: int = Field(
        4, ge=0, description="Seeded random inputs on which ONNX Runtime must give the same "
        "outputs before and after the rewrite (0: no check).")
    atol: float = Field(1e-5, ge=0, description="Absolute tolerance of that check.")
    rtol: float = Field(1e-4, ge=0, description="Relative tolerance of that check.")


class FoldParams(OutputCheck):
    """Which declared-constant inputs to bind, and how the result is folded and checked."""

    inputs: list[str] = Field(
        min_length=1, description="Inputs to bind into the graph as constants. Each must be "
        "declared in the recipe with `value:` (the value the app always feeds); later stages "
        "no longer feed them.")
    pin_shapes: bool = Field(
        True, description="Fix the other inputs' dimensions at their declared sizes "
        "(axes in `dynamic_axes` stay dynamic), so shape arithmetic folds as well.")
    simplifier: Literal["onnxslim", "onnxsim"] = Field(
        "onnxslim", description="Constant folder that replaces an `If` on a constant by "
        "its branch.")


class FoldInputs(Op):
    name = "fold-inputs"
    version = 1
    Params = FoldParams
    accepts = ("onnx",)
    produces = "onnx"
    tools: ClassVar[tuple[str, ...]] = ("onnx", "onnxslim", "onnxruntime")
    summary = "bind declared-constant inputs as constants and fold the control flow they decide"

    def binds_inputs(self, params: BaseModel) -> tuple[str, ...]:
        assert isinstance(params, FoldParams)
        return tuple(params.inputs)

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import onnx

        from edgebuild.passes.onnx_stats import graph_stats

        p: FoldParams = params
        source = ctx.input().main
        model = onnx.load(str(source))
        declared = {t["name"]: t for t in ctx.io.inputs}
        decided = {n: sorted(s) for n, s in decided_by(model.graph).items()
                   if s & set(p.inputs)}
        bound = bind_inputs(model, [declared[n] for n in _checked(model, p.inputs, declared)])
        pinned = pin_shapes(model, list(declared.values())) if p.pin_shapes else {}
        folded = _simplify(onnx.shape_inference.infer_shapes(model), p.simplifier)
        # Control flow no input decides is what folding should have removed: an `If` on a
        # constant, or one of the nodes the bound inputs decided.
        after = decided_by(folded.graph)
        left = [name for name, sources in after.items()
                if not sources and (name in decided or _op(folded.graph, name) == "If")]
        if left:
            raise StageError(
                f"fold-inputs bound {', '.join(p.inputs)}, but {p.simplifier} left "
                f"{', '.join(left)}, whose condition no input decides any more",
                "try `simplifier: onnxsim`, or pin more shapes (`pin_shapes: true` and no "
                "`dynamic_axes` on the inputs the branch reads)")
        destination = ctx.out / "model.onnx"
        onnx.save(folded, str(destination))
        onnx.checker.check_model(str(destination))
        check = _same_outputs(source, destination, ctx.io.inputs, p)
        still = sorted(n.name for n in folded.graph.node if n.op_type in CONTROL_FLOW)
        return OpResult(main="model.onnx", format="onnx", metadata={
            "bound": bound, "pinned": pinned, "decided_by_bound": decided,
            "control_flow_left": still, "check": check,
            "before": graph_stats(source), "after": graph_stats(destination)})


def _op(graph: onnx.GraphProto, name: str) -> str:
    return next((n.op_type for n in graph.node if (n.name or n.op_type) == name), "")


def _checked(model: onnx.ModelProto, names: list[str],
             declared: dict[str, dict[str, Any]]) -> list[str]:
    """`names`, each a graph input of the model declared with a value (the planner checked
    the recipe; the file is checked here)."""
    graph_inputs = [i.name for i in model.graph.input]
    for name in names:
        if name not in graph_inputs:
            raise StageError(f"fold-inputs: the model has no input '{name}'",
                             f"its inputs: {', '.join(graph_inputs)}")
        if declared.get(name, {}).get("value") is None:
            raise StageError(f"fold-inputs: input '{name}' declares no `value:`",
                             "declare the value the app always feeds on the input")
    return names


def bind_inputs(model: onnx.ModelProto, tensors: list[dict[str, Any]]) -> dict[str, Any]:
    """Each declared tensor becomes an initializer of its `value` at its declared shape and
    leaves the graph's inputs; name -> the value bound."""
    import numpy as np
    from onnx import numpy_helper

    bound: dict[str, Any] = {}
    for tensor in tensors:
        name = tensor["name"]
        (graph_input,) = [i for i in model.graph.input if i.name == name]
        model.graph.input.remove(graph_input)
        for old in [i for i in model.graph.initializer if i.name == name]:
            model.graph.initializer.remove(old)  # a default value (IR < 4): replaced
        array = np.full(list(tensor["shape"]), tensor["value"], dtype=tensor["dtype"])
        model.graph.initializer.append(numpy_helper.from_array(array, name))
        bound[name] = tensor["value"]
    return bound


def pin_shapes(model: onnx.ModelProto, tensors: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The graph inputs' dimensions fixed at the declared sizes, except declared dynamic
    axes; name -> the shape written (a dimension name for an axis kept dynamic)."""
    declared = {t["name"]: t for t in tensors}
    pinned: dict[str, list[Any]] = {}
    for value in model.graph.input:
        tensor = declared.get(value.name)
        dims = value.type.tensor_type.shape.dim
        if tensor is None or len(dims) != len(tensor["shape"]):
            continue
        dynamic = {int(axis): str(name) for axis, name in tensor.get("dynamic_axes", {}).items()}
        for axis, (dim, size) in enumerate(zip(dims, tensor["shape"], strict=True)):
            dim.Clear()
            if axis in dynamic:
                dim.dim_param = dynamic[axis]
            else:
                dim.dim_value = int(size)
        pinned[value.name] = [dynamic.get(a, s) for a, s in enumerate(tensor["shape"])]
    return pinned


def _simplify(model: onnx.ModelProto, simplifier: str) -> onnx.ModelProto:
    if simplifier == "onnxsim":
        try:
            import onnxsim
        except ImportError as exc:
            raise BackendUnavailable("onnxsim", "onnxsim is not installed") from exc
        simplified, ok = onnxsim.simplify(model)
        if not ok:
            raise StageError("onnxsim could not validate the folded model",
                             "use `simplifier: onnxslim`")
        result: onnx.ModelProto = simplified
        return result
    import onnxslim

    slimmed: onnx.ModelProto = onnxslim.slim(model)
    return slimmed


def _same_outputs(original: Path, folded: Path, tensors: list[dict[str, Any]],
                  p: OutputCheck, what: str = "fold-inputs",
                  hint: str = "the bound value or the pinned shapes change what the model "
                              "computes; check `value:` and the declared shapes"
                  ) -> dict[str, Any]:
    """ONNX Runtime's outputs of both models on the same seeded inputs (the folded one not
    fed what it bound); StageError beyond `atol + rtol·|reference|`."""
    import numpy as np
    import onnxruntime as ort

    from edgebuild.passes.torch_model import sample_inputs

    if not p.check_samples:
        return {"samples": 0}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    before = ort.InferenceSession(str(original), options, providers=["CPUExecutionProvider"])
    after = ort.InferenceSession(str(folded), options, providers=["CPUExecutionProvider"])
    kept = {i.name for i in after.get_inputs()}
    names = [o.name for o in before.get_outputs()]
    worst: dict[str, float] = {}
    for feeds in sample_inputs(tensors, seed=0, count=p.check_samples):
        expected = before.run(names, feeds)
        got = after.run(names, {k: v for k, v in feeds.items() if k in kept})
        for name, ref, out in zip(names, expected, got, strict=True):
            ref, out = np.asarray(ref, np.float64), np.asarray(out, np.float64)
            if ref.shape != out.shape or not np.all(np.abs(out - ref)
                                                    <= p.atol + p.rtol * np.abs(ref)):
                diff = (float(np.max(np.abs(out - ref))) if ref.shape == out.shape
                        else f"shape {list(out.shape)} instead of {list(ref.shape)}")
                raise StageError(f"{what} changed output '{name}': {diff}", hint)
            worst[name] = max(worst.get(name, 0.0), float(np.max(np.abs(out - ref), initial=0)))
    return {"samples": p.check_samples, "max_abs_diff": worst}


def decided_by(graph: onnx.GraphProto) -> dict[str, set[str]]:
    """Each `If`/`Loop` of the graph (by name) -> the graph inputs its condition (a Loop's
    trip count too) depends on, following producers back through the graph. Empty: only
    constants decide it."""
    producers = {out: node for node in graph.node for out in node.output}
    inputs = {i.name for i in graph.input}
    found: dict[str, set[str]] = {}
    for node in graph.node:
        if node.op_type not in CONTROL_FLOW:
            continue
        todo = [node.input[0]] if node.op_type == "If" else [t for t in node.input[:2] if t]
        seen: set[str] = set()
        sources: set[str] = set()
        while todo:
            tensor = todo.pop()
            if tensor in seen:
                continue
            seen.add(tensor)
            if tensor in inputs:
                sources.add(tensor)
            elif tensor in producers:
                todo.extend(t for t in producers[tensor].input if t)
        found[node.name or node.op_type] = sources
    return found


def fold_hint(model: onnx.ModelProto | Path, declared: list[dict[str, Any]]) -> str:
    """What to do when a converter fails on a graph with control flow decided only by
    inputs the recipe declares a `value:` for; '' when there is none."""
    import onnx

    if isinstance(model, Path):
        model = onnx.load(str(model), load_external_data=False)
    constants = {t["name"]: t["value"] for t in declared if t.get("value") is not None}
    decided = {node: sorted(sources) for node, sources in decided_by(model.graph).items()
               if sources and sources <= set(constants)}
    if not decided:
        return ""
    names = sorted({name for sources in decided.values() for name in sources})
    nodes = ", ".join(f"'{node}'" for node in decided)
    values = ", ".join(f"{name} = {constants[name]}" for name in names)
    return (f"the graph branches ({nodes}) on {', '.join(names)}, which the recipe declares "
            f"constant ({values}): the converter takes every branch, also the one the app "
            "never runs. Bind it into the graph first, so only the branch taken is left: add "
            f"`passes: [fold-inputs: {{inputs: [{', '.join(names)}]}}]` to this target "
            "(docs/passes.md#fold-inputs)")


def with_fold_hint(error: StageError, model: onnx.ModelProto | Path,
                   declared: list[dict[str, Any]]) -> StageError:
    """`error`, its hint led by `fold_hint` when that applies (the converter's own words
    kept after it)."""
    try:
        hint = fold_hint(model, declared)
    except Exception:  # a hint is a courtesy: never hide the converter's error behind one
        return error
    if hint:
        error.hint = f"{hint}\n{error.hint}" if error.hint else hint
    return error
