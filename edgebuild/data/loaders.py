"""Load a declared dataset into arrays, with deterministic sampling.

Every kind returns `Samples` (core/samples.py; named from here too): one array per
model input (first axis = sample) and optional integer labels; an image dataset with
label files also gives each image's boxes (ragged), in the model's input pixels
(`edgebuild.data.boxes`).
Which samples are kept depends only on the dataset's content, `limit` and `seed`,
so a cached stage stays valid.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np

from edgebuild.core.samples import ImageBoxes, Steps
from edgebuild.core.samples import Samples as Samples
from edgebuild.data import pixels
from edgebuild.data.boxes import BoxTransform, read_coco, read_yolo
from edgebuild.data.digest import image_files
from edgebuild.errors import DataError, EdgebuildError
from edgebuild.recipe.datasets import (
    CallableDataset,
    DatasetSpec,
    IdxFiles,
    ImageFolder,
    Normalize,
    NpzFile,
)
from edgebuild.recipe.files import load_callable, resolve_file


def choose(count: int, limit: int | None, seed: int) -> np.ndarray:
    """Indices of the samples to keep: all, or `limit` chosen with `seed`, in order."""
    if limit is None or limit >= count:
        return np.arange(count)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(count, size=limit, replace=False))


def load_dataset(spec: DatasetSpec, base_dir: Path, input_names: list[str],
                 name: str = "dataset") -> Samples:
    """Load and sample a dataset; DataError names the dataset on any problem."""
    try:
        samples = _load(spec, base_dir, spec.input or input_names[0])
    except EdgebuildError as exc:
        raise DataError(f"dataset '{name}': {exc.message}", exc.hint) from exc
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(f"dataset '{name}': {exc}") from exc
    if len(samples) == 0:
        raise DataError(f"dataset '{name}' is empty")
    return samples


def _load(spec: DatasetSpec, base_dir: Path, input_name: str) -> Samples:
    if isinstance(spec, ImageFolder):
        files = image_files(spec, base_dir)
        keep = choose(len(files), spec.limit, spec.seed)
        chosen = [files[i] for i in keep]
        read = [_read_image(f.path, spec) for f in chosen]
        images = np.stack([array for array, _, _ in read])
        labels = None
        if spec.labels == "folders":  # the same class folder name in two sources is one class
            classes = sorted({f.path.parent.name for f in files})
            labels = np.array([classes.index(f.path.parent.name) for f in chosen],
                              dtype=np.int64)
        boxes = None
        if spec.box_labels is not None:
            where = resolve_file(spec.box_labels.path, base_dir)
            reader = read_yolo if spec.box_labels.format == "yolo" else read_coco
            photo = reader(where, chosen, [size for _, size, _ in read])
            boxes = [ImageBoxes(*transform.apply(found.boxes, found.classes))
                     for found, (_, _, transform) in zip(photo, read, strict=True)]
        return Samples({input_name: images}, labels, [f.name for f in chosen], boxes)
    if isinstance(spec, IdxFiles):
        raw = read_idx(resolve_file(spec.images, base_dir))
        keep = choose(len(raw), spec.limit, spec.seed)
        x = raw[keep].astype(np.float32)
        if x.ndim == 3:
            x = x[:, :, :, None]  # N×H×W -> N×H×W×1
        x = _normalize(x, spec.preprocess)
        labels = None
        if spec.labels is not None:
            labels = read_idx(resolve_file(spec.labels, base_dir))[keep].astype(np.int64)
        return Samples({input_name: x}, labels, [f"#{i}" for i in keep])
    if isinstance(spec, NpzFile):
        with np.load(resolve_file(spec.path, base_dir)) as archive:
            mapping = spec.arrays or {input_name: "x"}
            absent = [a for a in [*mapping.values(), spec.labels] if a and a not in archive]
            if absent:
                raise DataError(f"array '{absent[0]}' not in the file; it has {archive.files}")
            arrays = {k: archive[v] for k, v in mapping.items()}
            count = len(next(iter(arrays.values())))
            keep = choose(count, spec.limit, spec.seed)
            labels = archive[spec.labels][keep] if spec.labels else None
        return Samples({k: v[keep] for k, v in arrays.items()}, labels, [f"#{i}" for i in keep])
    return _load_callable(spec, base_dir, input_name)


def _load_callable(spec: CallableDataset, base_dir: Path, input_name: str) -> Samples:
    function = load_callable(spec.function, base_dir)
    if not callable(function):
        raise DataError(f"'{spec.function}' is not callable")
    result: Any = function(**spec.kwargs)
    inputs, labels = result if isinstance(result, tuple) and len(result) == 2 else (result, None)
    if not isinstance(inputs, dict):
        inputs = {input_name: inputs}
    arrays = {k: np.asarray(v) for k, v in inputs.items()}
    shapes = {k: a.shape for k, a in arrays.items()}
    if not arrays or any(a.ndim == 0 or a.dtype == object for a in arrays.values()):
        raise DataError(
            f"'{spec.function}' returned {type(result).__name__} ({shapes or 'no arrays'})",
            "a callable dataset returns `inputs` or `(inputs, labels)`: inputs an array of "
            "samples (N×…) or {input name: array}, labels an array of N class indices")
    count = len(next(iter(arrays.values())))
    keep = choose(count, spec.limit, spec.seed)
    return Samples({k: v[keep] for k, v in arrays.items()},
                   None if labels is None else np.asarray(labels)[keep],
                   [f"#{i}" for i in keep])


def _normalize(x: np.ndarray, spec: Normalize) -> np.ndarray:
    """x is N×H×W×C float32 of raw values; returns normalized in the declared layout."""
    _check_channels(spec, x.shape[-1])
    return pixels.normalized(x, spec)


def _check_channels(spec: Normalize, channels: int) -> None:
    for field, values in (("mean", spec.mean), ("std", spec.std)):
        if len(values) not in (1, channels):
            raise DataError(f"preprocess.{field} has {len(values)} values for "
                            f"{channels}-channel images")


def _read_image(path: Path, spec: ImageFolder
                ) -> tuple[np.ndarray, tuple[int, int], BoxTransform]:
    """The preprocessed pixels, the photo's width×height, and where its pixels went
    (data/pixels.py: the same code a served Triton preprocess model runs)."""
    from PIL import Image

    pre = spec.preprocess
    with Image.open(path) as opened:
        # Grayscale, palette, RGBA/LA (alpha dropped) and CMYK convert as PIL does;
        # 16-bit grayscale would clip to white, so it is brought to 0..255 first.
        source: Image.Image = opened
        if opened.mode.startswith("I;16"):
            wide = np.asarray(opened, dtype=np.float32) / 257.0
            source = Image.fromarray(np.round(wide).astype(np.uint8))  # mode L
        image = source.convert("L" if pre.color == "gray" else "RGB")
    size = image.size
    try:
        image, moves = pixels.placed(image, pre)
    except ValueError as error:
        raise DataError(f"{path.name}: {error}",
                        "set preprocess.resize to at least the crop size") from error
    moved = BoxTransform(1.0, 1.0, 0.0, 0.0, *size)
    for move in moves:
        moved = moved.then(*move)
    if pre.dtype != "uint8":
        _check_channels(pre, 1 if pre.color == "gray" else 3)
    return pixels.model_input(image, pre), size, moved


def letterbox(image: Any, height: int, width: int, pad_value: int) -> Any:
    """Scale a PIL image to fit height×width keeping its aspect ratio; pad the rest, centred
    (pixels.letterbox_placed)."""
    return pixels.letterbox_placed(image, height, width, pad_value)[0]


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzip-compressed or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        data = handle.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DataError(f"{path} is not an IDX file (bad magic number)")
    dtypes: dict[int, Any] = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4",
                              0x0D: ">f4", 0x0E: ">f8"}
    if data[2] not in dtypes:
        raise DataError(f"{path}: unknown IDX element type 0x{data[2]:02x}")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    array = np.frombuffer(data, dtype=dtypes[data[2]], offset=4 + 4 * ndim)
    if array.size != int(np.prod(shape)):
        raise DataError(f"{path}: header says {shape} but the file holds {array.size} values")
    reshaped: np.ndarray = array.reshape(shape)
    return reshaped


def check_matches_inputs(samples: Samples, tensors: list[dict[str, Any]], name: str,
                         steps: Steps | None = None) -> None:
    """A DataError naming the dataset and input when a sample cannot feed the model
    (with `steps`, a stream's input any length along its axis, at least one hop)."""
    declared = {t["name"]: t for t in tensors}
    for input_name, array in samples.inputs.items():
        if input_name not in declared:
            raise DataError(f"dataset '{name}' feeds '{input_name}', which is not a model input",
                            f"model inputs: {', '.join(declared)}")
        tensor = declared[input_name]
        want = list(tensor["shape"])
        batched = tensor.get("batch_axis", 0) is not None
        # One sample: with a batch axis, a batch of 1; without, the entry as it is.
        got = [1, *array.shape[1:]] if batched else list(array.shape[1:])
        free = {int(k) for k in tensor["dynamic_axes"]} | ({0} if batched else set())
        if steps is not None and input_name == steps.input:
            free.add(steps.axis)
            if len(got) > steps.axis and got[steps.axis] < steps.hop:
                raise DataError(f"dataset '{name}' gives sequences of {got[steps.axis]} "
                                f"values along axis {steps.axis} of '{input_name}', shorter "
                                f"than one step ({steps.hop})")
        same_rank = len(got) == len(want)
        if not same_rank or any(g != w for i, (g, w) in enumerate(zip(got, want, strict=False))
                                if i not in free):
            raise DataError(f"dataset '{name}' gives input '{input_name}' samples of shape "
                            f"{got}, the model declares {want}",
                            _shape_hint(input_name, got, want, list(array.shape), batched))
        if str(array.dtype) != tensor["dtype"]:
            raise DataError(f"dataset '{name}' gives input '{input_name}' dtype {array.dtype}, "
                            f"the model declares {tensor['dtype']}")
    missing = [t["name"] for t in tensors
               if t["name"] not in samples.inputs and t.get("value") is None]
    if missing:
        raise DataError(f"dataset '{name}' gives no input '{missing[0]}', and the model "
                        f"needs it (it gives {', '.join(samples.inputs)})",
                        f"add '{missing[0]}' to the dataset (a callable dataset returns "
                        "{input name: array}; an npz dataset names it in `arrays:`), or "
                        f"declare the value to feed on the input: `value: 0`")


def _shape_hint(input_name: str, got: list[int], want: list[int], whole: list[int],
                batched: bool) -> str:
    """What most likely went wrong, from how the shapes differ."""
    if batched and got[1:] == want:
        return (f"each of the {whole[0]} entries already has the declared shape {want}: if "
                f"'{input_name}' has no sample axis (a recurrent state, a scalar), declare "
                "`batch_axis: null` on it, and each entry is fed as it is")
    if not batched and got == [1, *want]:
        return (f"'{input_name}' is declared without a sample axis (`batch_axis: null`), so "
                f"each entry is fed as it is: give entries of shape {want}, i.e. an array "
                f"of shape {[whole[0], *want]}")
    if len(got) == len(want) and sorted(got) == sorted(want):
        return "the channel order looks swapped: set preprocess.layout"
    if len(got) != len(want):
        return (f"the dataset's array is {whole} (entries first); the model's input has "
                f"{len(want)} dimensions and the sample would have {len(got)}")
    return "check the dataset's preprocessing (resize, crop, layout)"


def as_declared(samples: Samples, tensors: list[dict[str, Any]],
                steps: Steps | None = None) -> Samples:
    """The samples as the model takes them, in the declared input order: inputs
    without a sample axis marked, and every input the dataset leaves out filled with
    its declared `value` (check_matches_inputs has checked that each has one)."""
    count = len(samples)
    inputs: dict[str, np.ndarray] = {}
    for tensor in tensors:
        name = tensor["name"]
        batched = tensor.get("batch_axis", 0) is not None
        if name in samples.inputs:
            inputs[name] = samples.inputs[name]
        elif tensor.get("value") is not None:
            shape = list(tensor["shape"])[1:] if batched else list(tensor["shape"])
            inputs[name] = np.full([count, *shape], tensor["value"], dtype=tensor["dtype"])
    unbatched = frozenset(t["name"] for t in tensors if t.get("batch_axis", 0) is None)
    return Samples(inputs, samples.labels, samples.names, samples.boxes, unbatched, steps)


def without_folded(samples: Samples, folded: dict[str, Any], name: str) -> Samples:
    """The samples without the inputs a `fold-inputs` stage bound into the graph: the
    model no longer has them. A dataset that gives one must give the value bound, or
    the build would be evaluated on data it can no longer take."""
    given = [n for n in folded if n in samples.inputs]
    if not given:
        return samples
    for input_name in given:
        values = np.unique(samples.inputs[input_name])
        if values.size != 1 or values[0] != folded[input_name]:
            shown = ", ".join(str(v) for v in values[:5])
            raise DataError(f"dataset '{name}' gives input '{input_name}' the value(s) "
                            f"{shown}, but `fold-inputs` bound it to {folded[input_name]}",
                            f"the build computes with {input_name} = {folded[input_name]} "
                            "only: evaluate it on data at that value, or do not fold the "
                            "input for this target")
    kept = {k: v for k, v in samples.inputs.items() if k not in folded}
    return Samples(kept, samples.labels, samples.names, samples.boxes, samples.unbatched,
                   samples.steps)
