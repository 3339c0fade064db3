"""The ONNX side of onnx-to-tf (onnx_to_tf.py): which inputs onnx2tf must leave as they
are, and the rewrites of the private copy it converts, each for a way onnx2tf misreads a
graph (onnx_to_tf.py's docstring tells the cases).

    channels_last_inputs, unbatched_inputs     ──▶ onnx2tf's keep-as-is input lists
    source ──pin──▶ drop_full_slice_axes ──▶ name_nodes_and_infer_shapes
           ──(kept as converted.onnx)──▶ constants_to_initializers ──▶ onnx2tf

Each rewrite reads and rewrites one file, never the cache entry it came from. onnx and
numpy are imported inside the functions, as in onnx_to_tf.py: `plan` loads the op's module.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx


def channels_last_inputs(model: onnx.ModelProto) -> list[str]:
    """Inputs that are NHWC already: the graph itself transposes them to NCHW.

        image [1, H, W, 3] ──▶ (Cast) ──▶ Transpose perm [0, 3, 1, 2] ──▶ conv…

    (`model.prepost` with `layout: NHWC`). onnx2tf would read such an input as NCHW
    and transpose it again, mixing up H, W and C, so it keeps these as they are.
    """
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    kept = []
    for value in model.graph.input:
        name = value.name
        while len(consumers.get(name, [])) == 1 and consumers[name][0].op_type == "Cast":
            name = consumers[name][0].output[0]
        users = consumers.get(name, [])
        if users and all(n.op_type == "Transpose" and
                         [list(a.ints) for a in n.attribute if a.name == "perm"] == [[0, 3, 1, 2]]
                         for n in users):
            kept.append(value.name)
    return kept


def unbatched_inputs(model: onnx.ModelProto, declared: list[dict[str, Any]]) -> list[str]:
    """Inputs of rank >= 3 the recipe declares without a sample axis (`batch_axis: null`).

    Such an input is a recurrent state (Silero VAD's `[layers, batch, hidden]`), not a
    channels-first image; onnx2tf would transpose it to `[2, 128, 1]` and every slice of
    it after (an LSTM's initial state reached Keras as `(128, 1)`). These keep their
    shape exactly (onnx2tf's `keep_shape_absolutely_input_names`).
    """
    unbatched = {t["name"] for t in declared if "batch_axis" in t and t["batch_axis"] is None}
    return [v.name for v in model.graph.input
            if v.name in unbatched and len(v.type.tensor_type.shape.dim) >= 3]


def name_nodes_and_infer_shapes(path: Path) -> None:
    """Name unnamed nodes as onnx2tf would (`sng_<op>_<n>`), make every node name one
    TensorFlow takes as a scope (`tf_scope_name`), and store shapes inferred with data
    propagation, so a Reshape whose target is computed from `Shape` gets static
    dimensions on a pinned model (the graph still computes them at run time)."""
    import onnx

    model = onnx.load(str(path))
    taken = {node.name for node in model.graph.node}
    for index, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"sng_{node.op_type}_{index}"
        elif not TF_SCOPE.fullmatch(node.name):
            node.name = tf_scope_name(node.name, taken)
    del model.graph.value_info[:]
    # onnx2tf converts without stored shapes too; shapes are a help
    with contextlib.suppress(Exception):
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    onnx.save(model, str(path))


# TensorFlow's scope names (tensorflow/python/framework/ops.py, as its error quotes it);
# onnx2tf names each layer after its ONNX node, and a name outside this set is a
# ValueError. PyTorch's `/features/features.0/Conv` is inside it and is kept as it is.
TF_SCOPE = re.compile(r"[A-Za-z0-9_.\\/>-]*")


def tf_scope_name(name: str, taken: set[str]) -> str:
    """`name` as TensorFlow takes it, unique among `taken` (which it joins). PaddlePaddle's
    exports name nodes `Softmax@0`, `conv2d_0.tmp_0@relu`: onnx2tf failed on PP-OCR's
    text-direction classifier with "'Softmax@0' is not a valid scope name"."""
    safe = re.sub(r"[^A-Za-z0-9_.\\/>-]", "_", name)
    unique, count = safe, 1
    while unique in taken:
        unique, count = f"{safe}_{count}", count + 1
    taken.add(unique)
    return unique


def drop_full_slice_axes(path: Path) -> None:
    """Rewrite `path` with each constant Slice listing only the axes it cuts.

    onnxslim writes Silero VAD's STFT split `x[:, :129, :]` as a Slice over all three
    axes (starts [0, 0, 0], ends [INT64_MAX, 129, INT64_MAX]). onnx2tf moves the
    tensor to channels-last but not such a Slice's axes: it cut the time axis (length
    4) at 129, so the imaginary half came out empty (`(1, 0, 258)`) and with it every
    output of the model (`(0, 1)`). With only axis 1 listed, it maps the axis as it
    does for any Slice. An axis is dropped when it starts at 0, steps by 1 and ends at
    or past INT64_MAX / 2 (the whole axis, as exporters write "to the end").
    """
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    changed = False
    for node in graph.node:
        if node.op_type != "Slice" or len(node.input) < 4 or not all(
                name in constants for name in node.input[1:5]):
            continue
        arrays = [numpy_helper.to_array(constants[name]) for name in node.input[1:5]]
        starts, ends, _axes, *rest = arrays
        steps = rest[0] if rest else np.ones_like(starts)
        whole = (starts == 0) & (steps == 1) & (ends >= np.iinfo(np.int64).max // 2)
        if not whole.any() or whole.all():
            continue
        names = []
        for role, array in zip(("starts", "ends", "axes", "steps"), arrays, strict=False):
            tensor = numpy_helper.from_array(array[~whole], f"{node.output[0]}/cut_{role}")
            graph.initializer.append(tensor)
            names.append(tensor.name)
        node.input[1:1 + len(names)] = names
        changed = True
    if changed:
        onnx.save(model, str(path))


def constants_to_initializers(path: Path) -> None:
    """Rewrite `path` with each tensor-valued `Constant` node as an initializer.

    onnx2tf turns a Constant node into a TensorFlow tensor, and some of its converters
    (NonMaxSuppression's thresholds, Expand) only handle an initializer's NumPy value.
    """
    import onnx

    model = onnx.load(str(path))
    graph = model.graph
    kept = []
    for node in graph.node:
        if (node.op_type == "Constant" and node.domain in ("", "ai.onnx")
                and [a.name for a in node.attribute] == ["value"]):
            tensor = onnx.helper.get_attribute_value(node.attribute[0])
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
        else:
            kept.append(node)
    if len(kept) == len(graph.node):
        return
    del graph.node[:]
    graph.node.extend(kept)
    onnx.save(model, str(path))
