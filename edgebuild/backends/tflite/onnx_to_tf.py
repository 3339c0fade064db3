"""onnx-to-tf: ONNX (NCHW) -> TensorFlow SavedModel (NHWC) with onnx2tf.

This is the layout transformation every TFLite build starts with, so it is a
stage of its own: the float32, float16 and INT8 builds of one model share one
conversion (the TFLite backend then quantizes the SavedModel with
`tf.lite.TFLiteConverter`). The planner inserts it implicitly when an ONNX model
meets a backend that takes a SavedModel.

Two things onnx2tf does by itself are taken over here:

- For any 4-D, 3-channel input it downloads a sample-image `.npy` from GitHub
  to run a validation inference — even for a float32 conversion. Offline that
  fails, so the download function is replaced by seeded data in the same range
  (it only feeds onnx2tf's own shape/value checks, never calibration: INT8
  calibration uses the recipe's dataset in the backend).
- Its NonMaxSuppression converter reads the thresholds only from initializers
  (a `Constant` node's output makes it fail with "Cannot convert '' to
  EagerTensor"), so Constant nodes are made initializers on the private copy it
  converts (all of them: left as Constants, an `Expand` of a constant makes it
  fail on MTCNN's anchor grid). That also keeps onnx2tf from fusing GELU's
  Div/Erf/Add/Mul/Mul into TFLite's GELU — its matcher only fires when the 1.4142
  divisor is a TensorFlow tensor, i.e. a Constant node — and that fusion gave wrong
  numbers (max error 1.0 after one BERT layer). TFLite has no builtin Erf, so the
  bare Erf is converted with
  `replace_to_pseudo_operators=["erf"]` — lowercase: onnx2tf's Erf converter looks
  for "erf" (its CLI lowercases the names, its Python API does not; "Erf" is
  silently ignored) — which writes Abramowitz-Stegun 7.1.26 in plain arithmetic,
  |error| <= 1.5e-7. all-MiniLM-L6-v2 then comes out at cosine 1 - 5e-13 and max
  absolute error 2.7e-7 of FP32 PyTorch's embedding at 16 and at 128 tokens.
- It infers shapes with ONNX's plain shape inference, which leaves a Reshape to
  `Concat(Shape(x)[0], Shape(x)[1], 12, 32)` (a transformer's head split) with
  unknown dimensions even when the inputs are pinned; its Add then "fixes" the
  static [1, 16, 384] operand of a residual Add by transposing it to [1, 384, 16].
  The pinned copy is given shapes inferred with data propagation (every such
  Reshape becomes [1, 16, 12, 32]), and onnx2tf's own renaming pass — which
  re-infers shapes without it — is replaced by naming unnamed nodes here.
- It pads NMS's selected indices with index 0 by default — a real
  box — where ONNX returns only the boxes kept; `output_nms_with_dynamic_tensor`
  keeps ONNX's semantics (a dynamic-length tensor inside the model; a fixed-size
  output such as `model.prepost`'s padding stays fixed).
- It names its Keras layers after TensorFlow ops (`tf.math.sigmoid_1`), not after
  the ONNX nodes, so the TFLite backend could not find an ONNX node in the model it
  quantizes. The layers each ONNX node became are recorded (`onnx2tf_layers.json`,
  read from onnx2tf's own node table), and the ONNX graph it converted is kept as
  `converted.onnx` (same node names, pinned shapes): full-integer INT8 runs the
  shared INT8 rules (quant/safety.py) on it and keeps those layers float
  (tflite/keep_float.py). That copy costs the ONNX model's size in the cache.
- It transposes every input of rank >= 3 as if it were channels-first, also a recurrent
  state (`batch_axis: null`, kept as it is: `unbatched_inputs`), and applies a Slice that
  lists all axes (onnxslim writes `x[:, 129:, :]` so) to the channels-last tensor's axes
  unchanged: such Slices keep only the axes they cut (`drop_full_slice_axes`). Both
  together made Silero VAD convert (its outputs had come out empty).
- It reports an op it cannot convert as a long TensorFlow trace and exits. The
  model is checked first against the ops onnx2tf has converters for, and a
  failure during conversion is turned into a StageError that names the op and
  the node, with the shapes around it.

Which inputs keep their layout and the rewrites of the private copy (the Constants, the
shapes, the Slices above) are prepare_onnx.py; running onnx2tf, reading its layer table
and turning its failures into StageErrors are here.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.backends.tflite.prepare_onnx import (
    channels_last_inputs,
    constants_to_initializers,
    drop_full_slice_axes,
    name_nodes_and_infer_shapes,
    unbatched_inputs,
)
from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.errors import StageError
from edgebuild.passes.onnx_shapes import pin_input_shapes, pinned_shapes

if TYPE_CHECKING:
    import numpy as np
    import onnx


CONVERTED_ONNX = "converted.onnx"  # the graph onnx2tf converted, node names as it saw them
LAYERS_FILE = "onnx2tf_layers.json"  # ONNX node name -> the Keras layers it became


class OnnxToTfParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    keep_nchw_inputs: bool = Field(
        False, description="Keep the model's NCHW inputs (onnx2tf inserts a transpose "
        "inside the model); default: inputs become NHWC, as TFLite delegates prefer.")


class OnnxToTf(Op):
    name = "onnx-to-tf"
    # 10: Slice's full-range axes dropped, inputs without a sample axis kept as they are;
    # 9: static models constant-folded too; 8: metadata `layers_file` (was `layers`, which
    # the quantize pass's per-layer report also is); 7: converted.onnx + onnx2tf_layers.json
    # (INT8 float nodes); 6: pseudo Erf,
    # data-propagated shapes; 4: Constants as initializers
    version = 10
    Params = OnnxToTfParams
    accepts = ("onnx",)
    produces = "tf-savedmodel"
    tools: ClassVar[tuple[str, ...]] = ("onnx2tf", "tensorflow-cpu", "tf-keras", "onnx")
    fixes_shapes: ClassVar[bool] = True
    summary = "ONNX (NCHW) -> TensorFlow SavedModel (NHWC) with onnx2tf"
    extra = "tflite"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import onnx

        from edgebuild.passes.fold_inputs import with_fold_hint

        source = ctx.input().main
        model = onnx.load(str(source))
        try:
            check_convertible(model)
        except StageError as exc:  # an `If` on a declared constant: fold-inputs removes it
            raise with_fold_hint(exc, model, ctx.io.inputs) from None
        inputs = [i.name for i in model.graph.input]
        pinned = pinned_shapes(model, ctx.io.inputs, "a TFLite model")
        saved_model = ctx.out / "saved_model"
        started = time.perf_counter()
        keep = inputs if params.keep_nchw_inputs else channels_last_inputs(model)
        as_is = unbatched_inputs(model, ctx.io.inputs)
        log = _convert(source, saved_model, keep_nchw=keep, pinned=pinned, keep_onnx=ctx.out,
                       keep_shape=as_is)
        seconds = time.perf_counter() - started
        if not (saved_model / "saved_model.pb").is_file():
            raise with_fold_hint(conversion_error(converted_or(ctx.out, model), log), model,
                                 ctx.io.inputs)
        (ctx.out / "onnx2tf.log").write_text(log)
        return OpResult(
            main="saved_model/saved_model.pb", format="tf-savedmodel",
            metadata={"onnx2tf": _version(), "seconds": round(seconds, 2),
                      "layout": "NCHW" if params.keep_nchw_inputs else "NHWC",
                      "kept_inputs": keep, "kept_shape_inputs": as_is,
                      "onnx_inputs": _tensor_shapes(model.graph.input),
                      "pinned_inputs": pinned,
                      "onnx_outputs": _tensor_shapes(model.graph.output),
                      "converted_onnx": CONVERTED_ONNX, "layers_file": LAYERS_FILE})


def _version() -> str:
    from importlib.metadata import version

    return version("onnx2tf")


def _offline_sample_images() -> np.ndarray:
    """Stands in for onnx2tf's download: 20 seeded 128x128 RGB images in [0, 1)."""
    import numpy as np

    return np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32)


def _convert(source: Path, destination: Path, keep_nchw: list[str],
             pinned: dict[str, list[int]] | None = None, keep_onnx: Path | None = None,
             keep_shape: list[str] | None = None) -> str:
    """Run onnx2tf in this process on a private copy of `source`; returns what it printed.

    The copy matters: onnx2tf rewrites the ONNX file it is given (it names
    unnamed nodes in place), and `source` is a cache entry that must not change.
    With `keep_onnx` (a folder), the copy (nodes named, before onnx2tf's own edits)
    and the layers each node became are written there (CONVERTED_ONNX, LAYERS_FILE).
    """
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="onnx2tf-") as scratch:
        private = Path(scratch) / source.name
        if pinned is not None:
            # Also with nothing left to pin: the fold is what onnx2tf needs (an
            # Ultralytics export's static decode failed to convert unfolded, at a Mul).
            pin_input_shapes(source, private, pinned)
        else:
            shutil.copyfile(source, private)
        drop_full_slice_axes(private)
        name_nodes_and_infer_shapes(private)
        if keep_onnx is not None:
            shutil.copyfile(private, keep_onnx / CONVERTED_ONNX)
        constants_to_initializers(private)
        layers: dict[str, list[str]] = {}
        log = _convert_file(private, destination, keep_nchw, layers, keep_shape)
        if keep_onnx is not None:
            (keep_onnx / LAYERS_FILE).write_text(json.dumps(layers, indent=1))
        return log


def _convert_file(source: Path, destination: Path, keep_nchw: list[str],
                  layers: dict[str, list[str]] | None = None,
                  keep_shape: list[str] | None = None) -> str:
    """onnx2tf on `source` into a SavedModel at `destination`; returns what it printed.
    `layers` (filled in): ONNX node name -> the Keras layers it became."""
    import onnx
    import onnx2tf
    from onnx2tf import onnx2tf as onnx2tf_main
    from onnx2tf.utils import common_functions

    onnx2tf_main.download_test_image_data = _offline_sample_images
    common_functions.download_test_image_data = _offline_sample_images
    table: dict[str, Any] = {}
    outputs_of = common_functions.get_tf_model_outputs

    def get_tf_model_outputs(*, tf_layers_dict: dict[str, Any], output_names: list[str]
                             ) -> list[Any]:
        # onnx2tf's node table (ONNX tensor name -> its Keras tensor) is a local of its
        # convert(); it passes it here once, when it collects the model's outputs.
        table.update(tf_layers_dict)
        return list(outputs_of(tf_layers_dict=tf_layers_dict, output_names=output_names))

    onnx2tf_main.get_tf_model_outputs = get_tf_model_outputs
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        try:
            model = onnx2tf.convert(
                input_onnx_file_path=str(source),
                # Its default, `saved_model` in the current directory, is made even with
                # disable_model_save: beside the private copy, nothing outside --out.
                output_folder_path=str(source.parent / "onnx2tf_output"),
                keep_ncw_or_nchw_or_ncdhw_input_names=keep_nchw or None,
                keep_shape_absolutely_input_names=keep_shape or None,
                not_use_onnxsim=True,  # onnx-optimize has simplified the graph already
                # its renaming re-infers shapes without data propagation; named above
                not_use_opname_auto_generate=True,
                replace_to_pseudo_operators=["erf"],  # TFLite has no Erf (see top); lowercase
                output_nms_with_dynamic_tensor=True,  # ONNX's NMS output, not index-0 padding
                # onnx2tf would also write float32 and float16 .tflite files, which
                # the backend builds itself at the precision asked for: 90 % of its
                # time on EfficientNet-Lite0. Return the Keras model, save it below.
                disable_model_save=True,
                non_verbose=True,
                verbosity="error",
            )
            _save(model, destination)
            if layers is not None:
                layers.update(keras_layers(onnx.load(str(source), load_external_data=False),
                                           table))
        except SystemExit:
            pass  # onnx2tf exits on a failed conversion; the missing output says so
        except Exception as exc:  # a TensorFlow trace becomes a StageError below
            print(f"{type(exc).__name__}: {exc}", file=captured)
        finally:
            onnx2tf_main.get_tf_model_outputs = outputs_of
    return captured.getvalue()


def keras_layers(model: onnx.ModelProto, table: dict[str, Any]) -> dict[str, list[str]]:
    """ONNX node name -> the names of the Keras layers onnx2tf built for it.

    A node's layers are those behind its output tensors back to the tensors of other
    nodes (a Reshape on NHWC data is a transpose and a reshape). The TFLite
    converter names each op's output tensor `<model>/<layer>/<op>` (';'-joined when
    it fuses ops), which is how tflite/keep_float.py finds the node again.

        Sigmoid_1 ─▶ tf.math.sigmoid_1     Reshape_1 ─▶ tf.compat.v1.transpose_7, tf.reshape_5
    """
    tensors = {name: entry["tf_node"] for name, entry in table.items()
               if isinstance(entry, dict) and "tf_node" in entry}
    known = {id(t) for t in tensors.values()}
    found: dict[str, list[str]] = {}
    for node in model.graph.node:
        stack = [tensors[o] for o in node.output if o in tensors]
        own, seen, names = {id(t) for t in stack}, set(), []
        while stack:
            tensor = stack.pop()
            history = getattr(tensor, "_keras_history", None)
            if id(tensor) in seen or history is None:
                continue
            seen.add(id(tensor))
            layer = history.layer
            if layer.name not in names:
                names.append(layer.name)
            inbound = layer._inbound_nodes[history.node_index]
            stack.extend(t for t in inbound.keras_inputs
                         if id(t) not in known or id(t) in own)
        if node.name and names:
            found[node.name] = names
    return found


def _save(model: Any, destination: Path) -> None:
    """A SavedModel with one `serving_default` signature, as onnx2tf itself writes it."""
    import tensorflow as tf
    import tf_keras

    archive = tf_keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        name="serving_default", fn=lambda *inputs: model(inputs),
        input_signature=[tf.TensorSpec(t.shape, t.dtype, t.name) for t in model.inputs])
    archive.write_out(str(destination))


def _tensor_shapes(values: Any) -> dict[str, list[int | str]]:
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in values}


def convertible_ops() -> set[str]:
    """ONNX op types onnx2tf has a converter for (one module per op in onnx2tf.ops)."""
    import onnx2tf.ops

    folder = Path(onnx2tf.ops.__file__).parent
    return {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}


def check_convertible(model: onnx.ModelProto) -> None:
    """StageError for the first node whose op onnx2tf cannot convert."""
    known = convertible_ops()
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in known:
            op = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
            if node.domain not in ("", "ai.onnx"):  # a custom node: onnx2tf has no hook
                raise StageError(
                    f"onnx2tf cannot convert custom op '{op}' (node "
                    f"'{node.name or '(unnamed)'}'): TFLite builds need it decomposed",
                    f"set `kernels.tflite: decompose` on custom op '{node.op_type}' with a "
                    "`decomposition:` (docs/custom-ops.md)")
            raise StageError(
                f"onnx2tf cannot convert op '{op}' (node '{node.name or '(unnamed)'}'): "
                f"it has no converter for it",
                f"{_node_shapes(model, node)}; replace the op in the model (e.g. with "
                "ops onnx2tf supports) or export with a different opset")


def converted_or(folder: Path, model: onnx.ModelProto) -> onnx.ModelProto:
    """The model onnx2tf was given (shapes pinned, folded, nodes named as its log names
    them), kept in `folder` before it ran; else `model`. An error's shapes come from it:
    the source's `sequence_length` is not what failed, the pinned 4 is."""
    import onnx

    converted = folder / CONVERTED_ONNX
    return onnx.load(str(converted)) if converted.is_file() else model


def conversion_error(model: onnx.ModelProto, log: str) -> StageError:
    """The failing node named in onnx2tf's output, with its shapes; else the log's tail."""
    names = re.findall(r"onnx_op_name:\s*(\S+)", log)
    nodes = {n.name: n for n in model.graph.node}
    node = next((nodes[n] for n in reversed(names) if n in nodes), None)
    last_lines = "\n".join(line for line in log.strip().splitlines()[-6:])
    raised = onnx2tf_exception(log)
    if raised:  # its words, not its advice or the Keras layer's arguments after them
        last_lines = raised
    if node is None:
        return StageError("onnx2tf could not convert the model" + (
                              f": {raised.splitlines()[0]}" if raised else ""),
                          f"its last output:\n{last_lines}")
    if node.op_type == "NonMaxSuppression":
        return StageError(
            f"onnx2tf cannot convert NonMaxSuppression node '{node.name}' to TFLite",
            f"{_node_shapes(model, node)}. onnx2tf needs a fixed batch size and constant "
            "max_output_boxes_per_class / iou_threshold / score_threshold inputs; build "
            "this target without NMS in the graph (drop `model.prepost.detection`) and run "
            "NMS in the app, or see onnx-to-tf.log for onnx2tf's own message")
    return StageError(
        f"onnx2tf failed on op '{node.op_type}' (node '{node.name}')"
        + (f": {_one_line(raised)}" if raised else ""),
        f"{_node_shapes(model, node)}\nonnx2tf's " + (
            "exception:" if raised else "last output:") + f"\n{last_lines}")


# A traceback's last line: `ValueError: …`, `tensorflow.python…InvalidArgumentError: …`.
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit)(?::|$)")
# What follows a Keras layer's exception: the layer's arguments, and onnx2tf's advice.
_AFTER = ("Call arguments received", "ERROR:", "INFO:", "WARNING:", "  •")


def onnx2tf_exception(log: str) -> str:
    """The exception onnx2tf's conversion raised, as its output ends with it (the last one,
    with the lines of its message; a Keras layer's arguments after it are left out);
    '' when the output holds none."""
    lines = re.sub(r"\x1b\[[0-9;]*m", "", log).splitlines()
    starts = [i for i, line in enumerate(lines) if _EXCEPTION.match(line)]
    if not starts:
        return ""
    block: list[str] = []
    for line in lines[starts[-1]:]:
        if block and line.startswith(_AFTER):
            break
        if line.strip():  # Keras leaves a blank line after its first
            block.append(line.rstrip())
    return "\n".join(block)[:1000]


def _one_line(text: str) -> str:
    """An exception for a one-line message: Keras's `Exception encountered when calling
    layer …` wrapper line dropped where the cause follows it."""
    lines = text.splitlines()
    if len(lines) > 1 and "Exception encountered when calling layer" in lines[0]:
        lines = [f"{lines[0].split(':', 1)[0]}: {lines[1]}", *lines[2:]]
    text = " ".join(line.strip() for line in lines)
    return re.sub(r" for '\{\{node [^']*'", "", text)[:400]  # TensorFlow's node dump


def _node_shapes(model: onnx.ModelProto, node: onnx.NodeProto) -> str:
    """'inputs a [1, 3, 224, 224], outputs b [1, 8, 112, 112]' from shape inference."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # shapes are a courtesy in an error message
        inferred = model.graph
    dims: dict[str, list[int | str]] = {i.name: list(i.dims) for i in model.graph.initializer}
    dims.update(_tensor_shapes((*inferred.input, *inferred.value_info, *inferred.output)))

    def describe(names: Any) -> str:
        return ", ".join(f"{name} {dims.get(name, '?')}" for name in names if name) or "none"

    return f"inputs: {describe(node.input)}; outputs: {describe(node.output)}"
