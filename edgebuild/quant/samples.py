"""Our samples as the feeds a float ONNX model takes, and what it computes on them.

What every part of the quantizer reads its calibration and evaluation data through:
the first N samples (or a stream's first windows), one feed dict per sample, the
first output of a model over them, and the values of intermediate tensors (an
unoptimized session that exposes them). Imported only inside the worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgebuild.data.loaders import Samples


def first(samples: Samples, count: int) -> Samples:
    return Samples({k: v[:count] for k, v in samples.inputs.items()},
                   None if samples.labels is None else samples.labels[:count],
                   samples.names[:count],
                   None if samples.boxes is None else samples.boxes[:count],
                   samples.unbatched, samples.steps)


def feeds(samples: Samples) -> list[dict[str, np.ndarray]]:
    return [samples.feed(i) for i in range(len(samples))]


def first_steps(samples: Samples, count: int) -> list[dict[str, np.ndarray]]:
    """The first `count` calls' inputs: samples, or a stream's first windows, each with
    its sequence's own state inputs (the initial state: a probe, not an evaluation)."""
    if samples.steps is None:
        return feeds(first(samples, count))
    found: list[dict[str, np.ndarray]] = []
    for index in range(len(samples)):
        whole = samples.sequence(index)
        for window in samples.steps.windows(whole[samples.steps.input]):
            found.append({**whole, samples.steps.input: window})
            if len(found) == count:
                return found
    return found


def not_channel(x: np.ndarray) -> tuple[int, ...]:
    """Every axis but 1 (N C ...), or but the last for N×F inputs."""
    return tuple(i for i in range(x.ndim) if i != (1 if x.ndim > 2 else x.ndim - 1))


def exposing_session(model: Any, tensors: list[str]) -> Any:
    """An unoptimized ONNX Runtime session of `model` that also outputs `tensors`
    (optimizations would fuse some of them away)."""
    import onnx
    import onnxruntime as ort

    for name in tensors:
        model.graph.output.append(onnx.helper.make_tensor_value_info(
            name, onnx.TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])


def observed_maxima(path: Path, tensors: list[str], samples: Samples) -> dict[str, np.ndarray]:
    """Per-channel largest value of each of `tensors` over `samples` (FP32 model)."""
    import onnx

    session = exposing_session(onnx.load(str(path)), tensors)
    maxima: dict[str, np.ndarray] = {}
    for feed in feeds(samples):
        for name, value in zip(tensors, session.run(tensors, feed), strict=True):
            channel_max = np.asarray(value).max(axis=not_channel(np.asarray(value)))
            maxima[name] = np.maximum(maxima[name], channel_max) if name in maxima \
                else channel_max
    return maxima


def tensor_values(path: Path, names: list[str], samples: Samples) -> dict[str, np.ndarray]:
    """Float values of the graph inputs and intermediate tensors `names` over `samples`."""
    import onnx

    model = onnx.load(str(path))
    produced = {o for n in model.graph.node for o in n.output}
    inner = [n for n in dict.fromkeys(names) if n in produced]
    session = exposing_session(model, inner)
    runs = [session.run(inner, feed) for feed in feeds(samples)]
    # atleast_1d: a scalar tensor (a constant folded to rank 0) concatenates as one value
    values = {name: np.concatenate([np.atleast_1d(run[i]) for run in runs])
              for i, name in enumerate(inner)}
    values.update({k: v for k, v in samples.inputs.items() if k in names})
    return values


def outputs(path: Path, samples: Samples) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    first_output = session.get_outputs()[0].name
    rows = [session.run([first_output], f)[0].reshape(1, -1) for f in feeds(samples)]
    return np.concatenate(rows).astype(np.float64)


