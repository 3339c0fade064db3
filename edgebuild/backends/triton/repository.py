"""Write a Triton model repository from the recipe's ONNX and the target's options.

    repository/
      model/config.pbtxt        backend "onnxruntime", inputs/outputs and dtypes read from
      model/1/model.onnx        the artifact, max_batch_size, dynamic_batching, instance_group
      preprocess/config.pbtxt   backend "python" (with `preprocess:`): RGB uint8 pixels ->
      preprocess/1/model.py       the model's input, by a copy of edgebuild/data/pixels.py,
      preprocess/1/pixels.py      the code the dataset loader prepares gated images with
      postprocess/config.pbtxt  backend "python" (with `postprocess:`): softmax, top-k
      postprocess/1/model.py
      ensemble/config.pbtxt     platform "ensemble": preprocess -> model [-> postprocess]
      ensemble/1/README.txt     (the version folder must exist)

Nothing in it is specific to the server bundled here: a full Triton with its C++
onnxruntime backend loads the same folder unchanged (docs/backends-triton.md). The
Python models import numpy, Pillow (preprocess) and Triton's `triton_python_backend_utils`.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.backends.triton.options import Postprocess, TritonOptions
from edgebuild.errors import StageError

MODEL, PRE, POST, ENSEMBLE = "model", "preprocess", "postprocess", "ensemble"
RAW = "raw"  # the ensemble's (and the pre model's) uint8 image input
SCORES, CLASSES = "scores", "classes"

# ONNX TensorProto element types -> (Triton data type, numpy dtype name)
_TYPES = {1: ("TYPE_FP32", "float32"), 2: ("TYPE_UINT8", "uint8"), 3: ("TYPE_INT8", "int8"),
          5: ("TYPE_INT16", "int16"), 6: ("TYPE_INT32", "int32"), 7: ("TYPE_INT64", "int64"),
          9: ("TYPE_BOOL", "bool"), 10: ("TYPE_FP16", "float16"), 11: ("TYPE_FP64", "float64")}


@dataclass(frozen=True)
class Tensor:
    name: str
    dims: list[int]  # as served: without the batch axis when max_batch_size > 0; -1 dynamic
    triton: str  # TYPE_FP32
    dtype: str  # float32

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "dims": self.dims, "triton": self.triton, "dtype": self.dtype}


def _tensors(values: Any) -> list[tuple[str, list[int | str], int]]:
    found = []
    for value in values:
        kind = value.type.tensor_type
        dims: list[int | str] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                                 for d in kind.shape.dim]
        found.append((value.name, dims, kind.elem_type))
    return found


def batch_size(onnx_path: Path, io_inputs: list[dict[str, Any]], options: TritonOptions) -> int:
    """max_batch_size: the option, else 8 when the recipe declares axis 0 of every input
    dynamic and the artifact keeps axis 0 symbolic on every input and output, else 0."""
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    every = [*_tensors(i for i in graph.input if i.name not in initializers),
             *_tensors(graph.output)]
    symbolic = all(dims and isinstance(dims[0], str) for _, dims, _ in every)
    declared = all(0 in {int(k) for k in t.get("dynamic_axes", {})} for t in io_inputs)
    if options.max_batch_size is not None:
        if options.max_batch_size > 0 and not symbolic:
            raise StageError(f"max_batch_size {options.max_batch_size}: the model's axis 0 is "
                             "fixed in the artifact, Triton could not batch it",
                             "declare `dynamic_axes: {0: batch}` on the recipe's inputs, or "
                             "set max_batch_size: 0")
        return options.max_batch_size
    return 8 if symbolic and declared else 0


def model_io(onnx_path: Path, batched: bool) -> tuple[list[Tensor], list[Tensor]]:
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}

    def served(items: list[tuple[str, list[int | str], int]]) -> list[Tensor]:
        out = []
        for name, dims, elem in items:
            if elem not in _TYPES:
                raise StageError(f"tensor '{name}' has ONNX element type {elem}, which this "
                                 "repository writer does not map to a Triton type")
            shown = [d if isinstance(d, int) and d > 0 else -1 for d in dims]
            out.append(Tensor(name, shown[1:] if batched else shown, *_TYPES[elem]))
        return out

    return (served(_tensors(i for i in graph.input if i.name not in initializers)),
            served(_tensors(graph.output)))


def _io_block(kind: str, tensors: list[Tensor]) -> str:
    rows = ",\n".join(f'  {{ name: {json.dumps(t.name)} data_type: {t.triton} '
                      f'dims: [ {", ".join(str(d) for d in t.dims) or "1"} ] }}'
                      for t in tensors)
    return f"{kind} [\n{rows}\n]\n"


def _header(name: str, max_batch: int, *, backend: str | None = None,
            platform: str | None = None) -> str:
    head = f"name: {json.dumps(name)}\n"
    head += (f"backend: {json.dumps(backend)}\n" if backend
             else f"platform: {json.dumps(platform)}\n")
    return head + f"max_batch_size: {max_batch}\n"


def _instances(count: int, kind: str) -> str:
    return f"instance_group [ {{ count: {count} kind: {kind} }} ]\n"


def model_config(options: TritonOptions, max_batch: int, inputs: list[Tensor],
                 outputs: list[Tensor]) -> str:
    text = _header(MODEL, max_batch, backend=options.backend.value)
    text += _io_block("input", inputs) + _io_block("output", outputs)
    text += _instances(options.instance_count, options.instance_kind.value)
    if options.dynamic_batching and max_batch > 0:
        text += "dynamic_batching {\n"
        sizes = [b for b in options.preferred_batch_sizes if b <= max_batch]
        if sizes:
            text += f"  preferred_batch_size: [ {', '.join(map(str, sizes))} ]\n"
        text += f"  max_queue_delay_microseconds: {options.max_queue_delay_microseconds}\n}}\n"
    return text


PRE_SOURCE = '''"""Generated by edgebuild: the recipe's image preprocessing. `pixels.py` beside
this file is a copy of edgebuild/data/pixels.py, the code the recipe's dataset loader
prepares every gated image with: decoded RGB (or L) uint8 pixels (N, H, W, C) in ->
resize, letterbox, centre crop, channel order, normalization and layout as PRE says."""

import triton_python_backend_utils as pb_utils  # first: a server's own site set-up may run here
import importlib.util
import json
import os
import types

import numpy as np
from PIL import Image

_found = importlib.util.spec_from_file_location(
    "edgebuild_pixels", os.path.join(os.path.dirname(os.path.abspath(__file__)), "pixels.py"))
pixels = importlib.util.module_from_spec(_found)
_found.loader.exec_module(pixels)
PRE = types.SimpleNamespace(**json.loads({pre!r}))


def prepared(raw):
    image = Image.fromarray(np.ascontiguousarray(raw[:, :, 0] if raw.shape[-1] == 1 else raw))
    return pixels.model_input(pixels.placed(image, PRE)[0], PRE)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, {raw!r}).as_numpy()
            x = np.stack([prepared(one) for one in raw])
            out = pb_utils.Tensor({output!r}, np.ascontiguousarray(x))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
'''

POST_SOURCE = '''"""Generated by edgebuild: softmax over the model's last axis, then the top_k
classes, best first (ties: the lower class index first)."""

import triton_python_backend_utils as pb_utils  # first: a server's own site set-up may run here
import numpy as np

TOP_K = {top_k!r}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            logits = pb_utils.get_input_tensor_by_name(request, {logits!r}).as_numpy()
            logits = logits.astype(np.float32).reshape(logits.shape[0], -1)
            e = np.exp(logits - logits.max(axis=-1, keepdims=True))
            p = e / e.sum(axis=-1, keepdims=True)
            order = np.argsort(-p, axis=-1, kind="stable")[:, :TOP_K]
            scores = np.take_along_axis(p, order, axis=-1).astype(np.float32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor({scores!r}, scores),
                pb_utils.Tensor({classes!r}, order.astype(np.int64))]))
        return responses
'''


def _python_model(root: Path, name: str, max_batch: int, inputs: list[Tensor],
                  outputs: list[Tensor], source: str, *beside: Path) -> None:
    (root / name / "1").mkdir(parents=True)
    text = _header(name, max_batch, backend="python") + _io_block("input", inputs)
    text += _io_block("output", outputs) + _instances(1, "KIND_CPU")
    (root / name / "config.pbtxt").write_text(text)
    (root / name / "1" / "model.py").write_text(source)
    for path in beside:
        shutil.copyfile(path, root / name / "1" / path.name)


def _ensemble(root: Path, max_batch: int, raw: Tensor, outputs: list[Tensor],
              steps: list[tuple[str, dict[str, str], dict[str, str]]]) -> None:
    (root / ENSEMBLE / "1").mkdir(parents=True)
    # Triton needs the version folder; caches and exports keep files, not empty folders.
    (root / ENSEMBLE / "1" / "README.txt").write_text(
        "An ensemble has no model file: this folder is its version 1.\n")
    text = _header(ENSEMBLE, max_batch, platform="ensemble") + _io_block("input", [raw])
    text += _io_block("output", outputs) + "ensemble_scheduling {\n  step [\n"
    blocks = []
    for model, inputs, outs in steps:
        lines = [f"    {{\n      model_name: {json.dumps(model)}\n      model_version: -1"]
        lines += [f"      input_map {{ key: {json.dumps(k)} value: {json.dumps(v)} }}"
                  for k, v in inputs.items()]
        lines += [f"      output_map {{ key: {json.dumps(k)} value: {json.dumps(v)} }}"
                  for k, v in outs.items()]
        blocks.append("\n".join(lines) + "\n    }")
    text += ",\n".join(blocks) + "\n  ]\n}\n"
    (root / ENSEMBLE / "config.pbtxt").write_text(text)


def _perf_shapes(inputs: list[Tensor], io_inputs: list[dict[str, Any]],
                 batched: bool) -> list[str]:
    """perf_analyzer's `--shape name:dims` for each served input with a -1 dimension (a
    dynamic sequence, say): the recipe's declared example shape (without the batch axis
    when Triton batches). perf_analyzer refuses to start without them."""
    declared = {t["name"]: list(t.get("shape") or []) for t in io_inputs}
    shapes = []
    for tensor in inputs:
        if -1 not in tensor.dims:
            continue
        example = declared.get(tensor.name, [])
        example = example[1:] if batched else example
        if len(example) != len(tensor.dims):
            raise StageError(f"input '{tensor.name}' is served with dims {tensor.dims}, and "
                             f"the recipe declares no example shape for it to time",
                             "declare the input's `shape:` in the recipe")
        shapes.append(f"{tensor.name}:{','.join(str(d) for d in example)}")
    return shapes


def resizes(options: TritonOptions) -> bool:
    """Whether the ensemble takes images of any size (the preprocess model resizes)."""
    pre = options.preprocess
    return pre is not None and bool(pre.resize or pre.letterbox or pre.center_crop)


def write(onnx_path: Path, root: Path, io_inputs: list[dict[str, Any]],
          options: TritonOptions) -> dict[str, Any]:
    """The repository under `root`; returns what the runner and the report need: the
    served models, their tensors and max_batch_size."""
    max_batch = batch_size(onnx_path, io_inputs, options)
    inputs, outputs = model_io(onnx_path, max_batch > 0)
    (root / MODEL / "1").mkdir(parents=True)
    shutil.copyfile(onnx_path, root / MODEL / "1" / "model.onnx")
    (root / MODEL / "config.pbtxt").write_text(model_config(options, max_batch, inputs, outputs))
    info: dict[str, Any] = {"max_batch_size": max_batch, "model": MODEL,
                            "inputs": [t.as_json() for t in inputs],
                            "outputs": [t.as_json() for t in outputs], "ensemble": None,
                            "perf_shapes": _perf_shapes(inputs, io_inputs, max_batch > 0),
                            # token ids, indices, lengths: random int64 values index out of
                            # range (an embedding's Gather fails); perf_analyzer sends zeros
                            "perf_zeros": any(t.dtype.startswith(("int", "bool"))
                                              for t in inputs)}
    if options.preprocess is None:
        return info
    if len(inputs) != 1 or len(inputs[0].dims) != (3 if max_batch else 4):
        raise StageError("`preprocess:` builds an image pre-processing model: the model must "
                         f"have one image input (C, H, W or H, W, C); it has "
                         f"{[(t.name, t.dims) for t in inputs]}",
                         "remove `preprocess:` to serve the model alone")
    image = inputs[0]
    pre_options = options.preprocess
    spatial = image.dims if max_batch else image.dims[1:]
    nchw = pre_options.layout == "NCHW"
    h, w, c = (spatial[1], spatial[2], spatial[0]) if nchw else spatial
    # The client sends what the loader decodes: RGB (3 channels) or L (1), as the model has.
    channels = c if c > 0 else 1 if pre_options.color == "gray" else 3
    if resizes(options):  # any photo size in; the server resizes as the loader does
        h, w = -1, -1
    raw = Tensor(RAW, [h, w, channels] if max_batch else [image.dims[0], h, w, channels],
                 "TYPE_UINT8", "uint8")
    from edgebuild.data import pixels

    pre = PRE_SOURCE.format(pre=json.dumps(pre_options.model_dump(mode="json")), raw=RAW,
                            output=image.name)
    _python_model(root, PRE, max_batch, [raw], [image], pre, Path(pixels.__file__))
    steps = [(PRE, {RAW: RAW}, {image.name: "normalized"}),
             (MODEL, {image.name: "normalized"}, {t.name: t.name for t in outputs})]
    served = outputs
    if options.postprocess is Postprocess.CLASSIFICATION:
        logits = outputs[0]
        post_out = [Tensor(SCORES, [options.top_k] if max_batch else [1, options.top_k],
                           "TYPE_FP32", "float32"),
                    Tensor(CLASSES, [options.top_k] if max_batch else [1, options.top_k],
                           "TYPE_INT64", "int64")]
        post = POST_SOURCE.format(top_k=options.top_k, logits=logits.name, scores=SCORES,
                                  classes=CLASSES)
        _python_model(root, POST, max_batch, [logits], post_out, post)
        steps[-1] = (MODEL, {image.name: "normalized"}, {logits.name: "model_output"})
        steps.append((POST, {logits.name: "model_output"}, {SCORES: SCORES, CLASSES: CLASSES}))
        served = post_out
    _ensemble(root, max_batch, raw, served, steps)
    # perf_analyzer fills a -1 dimension only when told: photos of `perf_image` size.
    sizes = iter(options.perf_image)
    perf_dims = [d if d > 0 else next(sizes) for d in raw.dims]
    info["perf_shapes"] = [f"{RAW}:{','.join(map(str, perf_dims))}"] if -1 in raw.dims else []
    info["perf_zeros"] = False  # random pixels are pixels
    info["ensemble"] = {"name": ENSEMBLE, "input": raw.as_json(),
                        "outputs": [t.as_json() for t in served],
                        "steps": [s[0] for s in steps]}
    return info
