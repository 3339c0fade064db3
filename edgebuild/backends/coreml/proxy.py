"""The accuracy proxy: what Core ML's compression does to the weights, run in PyTorch.

Core ML predictions need macOS, and there is no MIL interpreter on Linux. What can
be measured here is what the build does to the *weights*: the same compression
(fp16 rounding, int8 linear symmetric per output channel, or a k-means palette)
applied to the PyTorch model's weights, which then runs in PyTorch, at fp16 when
the program computes in fp16. It is labelled "weight-compression proxy, not Core
ML numerics" wherever its figures appear.

How close it is: int8 per-channel is the same arithmetic as coremltools' (and
invariant to the batch-norm folding coremltools does first: folding scales whole
output channels); a palette is k-means over the unfolded weights here and over the
folded ones in Core ML, so the proxy's clusters are close, not identical.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta
from edgebuild.passes.torch_capture import Capture, capture

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.coreml.options import CoreMlOptions

PROXY_DIR = "proxy"
PROXY_FILE = "model.ts"


def compress_like_coreml(model: Any, options: CoreMlOptions) -> tuple[Any, dict[str, Any]]:
    """A copy of `model` whose conv/linear weights went through `options.weights`."""
    import numpy as np
    import torch

    proxy = copy.deepcopy(model).eval()
    compressed = 0
    if options.weights != "none":
        for module in proxy.modules():
            weight = getattr(module, "weight", None)
            if not isinstance(weight, torch.nn.Parameter) or weight.dim() < 2:
                continue  # norms' scales stay fp16 consts in Core ML too
            if weight.numel() <= options.weight_threshold:
                continue
            values = weight.detach().numpy().astype(np.float32)
            if options.weights == "int8":
                values = _int8_per_channel(values)
            else:
                values = _palette(values, options.palettize_bits)
            with torch.no_grad():
                weight.copy_(torch.from_numpy(values))
            compressed += 1
    return proxy, {"compressed_weights": compressed, "weights": options.weights,
                   "compute": options.compute_precision}


def _int8_per_channel(w: np.ndarray) -> np.ndarray:
    """coremltools' linear_symmetric int8 per output channel: scale = max|w| / 127."""
    import numpy as np

    axes = tuple(range(1, w.ndim))
    scale = np.abs(w).max(axis=axes, keepdims=True) / 127.0
    scale = np.where(scale == 0, 1.0, scale)
    return (np.clip(np.round(w / scale), -127, 127) * scale).astype(np.float32)


def _palette(w: np.ndarray, bits: int) -> np.ndarray:
    """k-means of the whole tensor into 2**bits values (coremltools' kmeans mode)."""
    import numpy as np
    from sklearn.cluster import KMeans

    flat = w.reshape(-1, 1).astype(np.float64)
    clusters = min(2**bits, len(np.unique(flat)))
    fit = KMeans(n_clusters=clusters, n_init=1, random_state=0).fit(flat)
    palette: np.ndarray = fit.cluster_centers_[fit.labels_].reshape(w.shape)
    return palette.astype(np.float32)


def save_proxy(model: Any, tensors: list[dict[str, Any]], options: CoreMlOptions,
               folder: Path) -> Path:
    """Save the compressed model as TorchScript, in half precision when the program
    computes in fp16 (the runner casts the float32 I/O, as Core ML does): scripted when
    the build scripted it (its control flow), else traced — safe, because the build's
    capture already proved the model has no data-dependent control flow."""
    if options.compute_precision == "fp16":
        model = model.half()
        tensors = [{**t, "dtype": "float16"} if t["dtype"].startswith("float") else t
                   for t in tensors]
    mode = Capture.SCRIPT if options.capture is Capture.SCRIPT else Capture.TRACE
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / PROXY_FILE
    capture(model, tensors, mode).save(str(path))
    return path


def tensor_meta(tensors: list[dict[str, Any]]) -> TensorMeta:
    """The recipe's inputs as runner metadata: a dynamic axis is named, not sized."""
    found: TensorMeta = {}
    for t in tensors:
        names = {int(a): str(n) for a, n in (t.get("dynamic_axes") or {}).items()}
        found[t["name"]] = (tuple(names.get(i, d) for i, d in enumerate(t["shape"])),
                            t["dtype"])
    return found


class ProxyRunner(Runner):
    """The saved proxy in PyTorch (this machine's stand-in for Core ML's numerics)."""

    def __init__(self, path: Path, tensors: list[dict[str, Any]], outputs: list[str],
                 threads: int | None, half: bool) -> None:
        super().__init__()
        self.path, self.tensors, self.outputs, self.threads = path, tensors, outputs, threads
        self.half = half  # the proxy computes in fp16: float inputs are cast to it
        self._module: Any = None

    def _activate(self) -> None:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        self._module = torch.jit.load(  # type: ignore[no-untyped-call]
            str(self.path), map_location="cpu")

    def _input_metadata(self) -> TensorMeta:
        return tensor_meta(self.tensors)

    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        inputs = [torch.from_numpy(feeds[t["name"]]) for t in self.tensors]
        if self.half:
            inputs = [x.half() if x.is_floating_point() else x for x in inputs]
        with torch.no_grad():
            result = self._module(*inputs)
        values = [result] if isinstance(result, torch.Tensor) else list(result)
        return {n: v.detach().float().numpy() for n, v in zip(self.outputs, values,
                                                              strict=True)}

    def _deactivate(self) -> None:
        self._module = None
