"""decompose-lstm: a one-step LSTM written out as the matrix products and gates it is.

A streaming recurrent model runs one step per call: its LSTM sees a sequence of length 1
and takes the state the previous call returned (`initial_h`, `initial_c`). Converters
handle that node worse than the dozen plain ops it stands for:

- QNN's HTP (fp16) carries Silero VAD's state over 487 streamed steps at cosine 0.9998
  of FP32's with its LSTM op, 1.0000 with the cell written out (docs/recipes.md,
  "Voice activity").
- onnx2tf handed the LSTM's initial state to Keras transposed as if it were an image
  (`state_spec (128, 1)`) before onnx-to-tf kept a state input's shape; both forms
  convert now.

For one step, with ONNX's gate order i, o, f, c and its default activations::

    g  = x·Wᵀ + h·Rᵀ + (Wb + Rb)           Gemm, Gemm, Add
    i, o, f, c̃ = σ(g_i), σ(g_o), σ(g_f), tanh(g_c)
    c' = f⊙c + i⊙c̃;   h' = o⊙tanh(c')
    Y = h' [1, 1, B, H],  Y_h = h' [1, B, H],  Y_c = c' [1, B, H]

The graph's inputs are first pinned at the recipe's declared shapes (its `dynamic_axes`
kept dynamic, as fold-inputs pins them; then folded by onnxslim where a dimension was
dynamic), so a sequence export whose length is dynamic in
the file (Silero VAD's `silero_vad_16k_sequence.onnx`, `[sequence_length, 576]`) is
decomposed when the recipe streams it one step at a time (`shape: [1, 576]`).

Only what that covers is rewritten: a forward LSTM whose sequence length is 1 once the
inputs are pinned, with constant weights, no peepholes, no `clip`, default activations, layout 0,
`input_forget` 0 and no `sequence_lens`; any other LSTM is refused by name, so a
recipe never gets a silently different model. ONNX Runtime then checks that the
outputs are the same on seeded inputs (as fold-inputs does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.errors import StageError
from edgebuild.passes.fold_inputs import OutputCheck

if TYPE_CHECKING:
    import numpy as np
    import onnx

HINT = ("decompose-lstm writes out one-step, forward LSTMs with constant weights and "
        "ONNX's default activations; leave this pass out for this model")


class DecomposeParams(OutputCheck):
    """How the decomposed graph is checked against the original."""


class DecomposeLstm(Op):
    name = "decompose-lstm"
    version = 2  # 2: the inputs pinned at their declared shapes first
    Params = DecomposeParams
    accepts = ("onnx",)
    produces = "onnx"
    tools: ClassVar[tuple[str, ...]] = ("onnx", "onnxslim", "onnxruntime")
    summary = "write one-step LSTMs out as Gemm, Sigmoid, Tanh and Mul (streaming models)"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import onnx

        from edgebuild.passes.fold_inputs import _same_outputs, pin_shapes

        p: DecomposeParams = params
        source = ctx.input().main
        model = onnx.load(str(source))
        dynamic = any(not d.HasField("dim_value") for v in model.graph.input
                      for d in v.type.tensor_type.shape.dim)
        pinned = pin_shapes(model, ctx.io.inputs)
        del model.graph.value_info[:]  # stored before the pinning: re-inferred by readers
        if dynamic:  # fold what the pinned sizes made constant (a Reshape to Shape's dims)
            import onnxslim

            model = onnxslim.slim(onnx.shape_inference.infer_shapes(model))
        done = decompose(model)
        if not done:
            raise StageError("decompose-lstm found no LSTM in the model",
                             "leave the pass out, or put it after the pass that creates it")
        destination = ctx.out / "model.onnx"
        onnx.save(model, str(destination))
        onnx.checker.check_model(str(destination))
        check = _same_outputs(source, destination, ctx.io.inputs, p, "decompose-lstm",
                              "a bug in the decomposition: report it with the model")
        return OpResult(main="model.onnx", format="onnx",
                        metadata={"decomposed": done, "pinned": pinned, "check": check})


def decompose(model: onnx.ModelProto) -> list[str]:
    """Replace every LSTM of the main graph in place; the names of those replaced."""
    from onnx import numpy_helper

    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    constants.update({n.output[0]: n.attribute[0].t for n in graph.node
                      if n.op_type == "Constant" and n.attribute
                      and n.attribute[0].name == "value"})
    shapes = _shapes(model)
    nodes, added, done = [], [], []
    for node in graph.node:
        if node.op_type != "LSTM":
            nodes.append(node)
            continue
        name = node.name or node.output[0]
        ins = [*node.input, *[""] * (8 - len(node.input))]
        weights = []
        for role, tensor in (("W", ins[1]), ("R", ins[2]), ("B", ins[3])):
            if tensor and tensor not in constants:
                raise StageError(f"LSTM '{name}': its {role} ('{tensor}') is not a constant",
                                 HINT)
            weights.append(numpy_helper.to_array(constants[tensor]) if tensor else None)
        _supported(node, name, ins, shapes)
        w, r, b = weights
        assert w is not None and r is not None  # W and R are required inputs of an LSTM
        cell, tensors = _cell(node, name, ins, w, r, b)
        nodes += cell
        added += tensors
        done.append(name)
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(added)
    return done


def _shapes(model: onnx.ModelProto) -> dict[str, list[int | str]]:
    """Every tensor's shape inferred from the graph's inputs (with data propagation: a
    Reshape to a computed shape), not the shapes the file stored before inputs were pinned."""
    import onnx

    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    del fresh.graph.value_info[:]
    for value in fresh.graph.output:
        value.type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(fresh, data_prop=True)
    found = {}
    for value in [*inferred.graph.value_info, *inferred.graph.input]:
        dims = value.type.tensor_type.shape.dim
        found[value.name] = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?"
                             for d in dims]
    return found


def _supported(node: onnx.NodeProto, name: str, ins: list[str],
               shapes: dict[str, list[int | str]]) -> None:
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    wrong = [f"{key} {attrs[key]!r}" for key in ("activations", "activation_alpha",
                                                  "activation_beta", "clip") if key in attrs]
    wrong += [f"{key} {attrs[key]!r}" for key, default in (
        ("direction", b"forward"), ("layout", 0), ("input_forget", 0))
        if key in attrs and attrs[key] != default]
    wrong += [role for role, tensor in (("sequence_lens", ins[4]), ("peepholes P", ins[7]))
              if tensor]
    steps = shapes.get(ins[0], ["?"])[0]
    if steps != 1:
        wrong.append(f"a sequence of length {steps} (not 1) in X, with the inputs at their "
                     "declared shapes (declare one step, e.g. `shape: [1, …]`, and stream it)")
    if wrong:
        raise StageError(f"LSTM '{name}' cannot be decomposed: {', '.join(wrong)}", HINT)


def _cell(node: onnx.NodeProto, name: str, ins: list[str], w: np.ndarray, r: np.ndarray,
          b: np.ndarray | None) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    import numpy as np
    from onnx import helper, numpy_helper

    hidden = int(r.shape[-1])
    bias = (np.zeros(4 * hidden, np.float32) if b is None
            else (b[0][:4 * hidden] + b[0][4 * hidden:]).astype(np.float32))

    def t(suffix: str) -> str:
        return f"{name}/decomposed/{suffix}"

    tensors = [numpy_helper.from_array(np.ascontiguousarray(w[0].T), t("W_T")),
               numpy_helper.from_array(np.ascontiguousarray(r[0].T), t("R_T")),
               numpy_helper.from_array(bias, t("bias")),
               numpy_helper.from_array(np.array([0], np.int64), t("axis0")),
               numpy_helper.from_array(np.array([0, 1], np.int64), t("axes01")),
               numpy_helper.from_array(np.array([hidden] * 4, np.int64), t("sizes")),
               numpy_helper.from_array(np.zeros((1, hidden), np.float32), t("zeros"))]
    x, h0, c0 = ins[0], ins[5], ins[6]
    make = helper.make_node
    nodes = [make("Squeeze", [x, t("axis0")], [t("x")])]
    # A missing initial state is zeros (the broadcast [1, H] row stands for every batch).
    for role, given in (("h0", h0), ("c0", c0)):
        nodes.append(make("Squeeze", [given, t("axis0")], [t(role)]) if given
                     else make("Identity", [t("zeros")], [t(role)]))
    nodes += [
        make("Gemm", [t("x"), t("W_T"), t("bias")], [t("xw")]),
        make("Gemm", [t("h0"), t("R_T")], [t("hr")]),
        make("Add", [t("xw"), t("hr")], [t("gates")]),
        make("Split", [t("gates"), t("sizes")], [t("gi"), t("go"), t("gf"), t("gc")], axis=1),
        make("Sigmoid", [t("gi")], [t("i")]),
        make("Sigmoid", [t("go")], [t("o")]),
        make("Sigmoid", [t("gf")], [t("f")]),
        make("Tanh", [t("gc")], [t("candidate")]),
        make("Mul", [t("f"), t("c0")], [t("kept")]),
        make("Mul", [t("i"), t("candidate")], [t("written")]),
        make("Add", [t("kept"), t("written")], [t("c1")]),
        make("Tanh", [t("c1")], [t("c1_tanh")]),
        make("Mul", [t("o"), t("c1_tanh")], [t("h1")]),
    ]
    outputs = [*node.output, *[""] * (3 - len(node.output))]
    for output, source, axes in ((outputs[0], "h1", "axes01"), (outputs[1], "h1", "axis0"),
                                 (outputs[2], "c1", "axis0")):
        if output:
            nodes.append(make("Unsqueeze", [t(source), t(axes)], [output]))
    return nodes, tensors
