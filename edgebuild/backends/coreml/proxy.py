"""The accuracy proxy: what Core ML's compression does to the weights, run in PyTorch.

Core ML predictions need macOS, and there is no MIL interpreter on Linux. What can
be measured here is what the build does to the *weights*: the same compression
(fp16 rounding, int8 linear symmetric or affine per output channel or per block, or
a k-means palette, the `keep_float` layers left float16)
applied to the PyTorch model's weights, which then runs in PyTorch, at fp16 when
the program computes in fp16. It is labelled "weight-compression proxy, not Core
ML numerics" wherever its figures appear.

How close it is: int8 is the same arithmetic as coremltools' (and invariant to the
batch-norm folding coremltools does first: folding scales whole output channels, and
a block never spans two; an affine range's zero point may round the other way where
a negative batch-norm scale mirrors it: within one int8 step); a palette is k-means
over the unfolded weights here and over the folded ones in Core ML, so the proxy's
clusters are close, not identical.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta
from edgebuild.errors import PlanError, did_you_mean
from edgebuild.passes.torch_capture import Capture, capture
from edgebuild.passes.torch_names import module_name

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.coreml.options import CoreMlOptions

PROXY_DIR = "proxy"
PROXY_FILE = "model.ts"


def compress_like_coreml(model: Any, options: CoreMlOptions) -> tuple[Any, dict[str, Any]]:
    """A copy of `model` whose conv/linear weights went through `options.weights`, but
    for the layers `options.keep_float` names (their weights stay float16)."""
    import numpy as np
    import torch

    proxy = copy.deepcopy(model).eval()
    compressed, kept = 0, 0
    skip = set(float_modules(proxy, options.keep_float))
    if options.weights != "none":
        for name, module in proxy.named_modules():
            weight = getattr(module, "weight", None)
            if not isinstance(weight, torch.nn.Parameter) or weight.dim() < 2:
                continue  # norms' scales stay fp16 consts in Core ML too
            if weight.numel() <= options.weight_threshold:
                continue
            if name in skip:
                kept += 1
                continue
            values = weight.detach().numpy().astype(np.float32)
            if options.weights == "int8":
                block = options.block_size if options.granularity == "per_block" else 0
                quantized = int8_like_coreml(values, options.int8_mode, block)
                if quantized is None:
                    continue  # coremltools skips it too: float16
                values = quantized
            else:
                values = _palette(values, options.palettize_bits)
            with torch.no_grad():
                weight.copy_(torch.from_numpy(values))
            compressed += 1
    return proxy, {"compressed_weights": compressed, "kept_float_weights": kept,
                   "weights": options.weights, "compute": options.compute_precision}


def float_modules(model: Any, names: list[str]) -> list[str]:
    """The PyTorch module names `names` mean (module names, or the ONNX node / output
    names torch.onnx gives their ops); a PlanError (exit 2) naming an unknown one."""
    import torch

    weighted = {name: m for name, m in model.named_modules()
                if isinstance(getattr(m, "weight", None), torch.nn.Parameter)
                and m.weight.dim() >= 2}
    found = []
    for name in names:
        module = module_name(name)
        if module not in weighted:
            raise PlanError(
                f"keep_float: '{name}' is not a layer with weights in this model",
                did_you_mean(module, weighted) or "name a conv / linear module as PyTorch "
                f"names it (e.g. '{next(iter(weighted), '')}') or its ONNX node "
                "(/path/to/module/Conv)")
        found.append(module)
    return found


def int8_like_coreml(w: np.ndarray, mode: str, block: int) -> np.ndarray | None:
    """coremltools' int8 weight quantization, dequantized (coremltools/optimize/_utils.py,
    quantize_weight_by_dtype): per output channel (`block` 0) or per block of `block`
    input channels of each output channel; None where coremltools skips the weight (the
    input channels not divisible by the block: it stays float16).

    linear_symmetric: scale = max|w| / 127, q in [-127, 127]. linear: the range
    [min(w, 0), max(w, 0)] / 255, zero point round((-128 max - 127 min) / range)."""
    import numpy as np

    if block and w.shape[1] % block:
        return None
    shape = ((w.shape[0], w.shape[1] // block, block, *w.shape[2:]) if block
             else w.shape)
    v = w.reshape(shape)
    axes = tuple(range(2 if block else 1, v.ndim))
    if mode == "linear_symmetric":
        scale = np.abs(v).max(axis=axes, keepdims=True) / 127.0
        scale = np.where(scale == 0, 1.0, scale)
        out = np.clip(np.round(v / scale), -127, 127) * scale
    else:
        low = np.minimum(v.min(axis=axes, keepdims=True), 0.0)
        high = np.maximum(v.max(axis=axes, keepdims=True), 0.0)
        span = np.where(high - low == 0, 1.0, high - low)
        scale = span / 255.0
        zero = np.clip(np.round((-128 * high - 127 * low) / span), -128, 127)
        out = (np.clip(np.round(v / scale) + zero, -128, 127) - zero) * scale
    return out.reshape(w.shape).astype(np.float32)


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
    """Save the compressed model as TorchScript, computing in fp16 when the program
    does (the runner casts the float32 I/O, as Core ML does): scripted when the build
    scripted it (its control flow), else traced — safe, because the build's capture
    already proved the model has no data-dependent control flow.

    Traced, fp16 is emulated (`fp16_emulated`): PyTorch's CPU convolution in float16
    has no fast kernel on x86 (68 s per 800×608 image of a VGG16 U-Net, 26× its float32
    time on a 64-channel 3×3 conv), and a scripted model keeps real float16."""
    mode = Capture.SCRIPT if options.capture is Capture.SCRIPT else Capture.TRACE
    if options.compute_precision == "fp16" and mode is Capture.TRACE:
        model = fp16_emulated(model)
    elif options.compute_precision == "fp16":
        model = model.half()
        tensors = [{**t, "dtype": "float16"} if t["dtype"].startswith("float") else t
                   for t in tensors]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / PROXY_FILE
    capture(model, tensors, mode).save(str(path))
    return path


def fp16_emulated(model: Any) -> Any:
    """A copy of `model` that stores in fp16 and computes in fp32: its parameters and
    buffers rounded to fp16, and every leaf module's output too (a forward hook the trace
    records), so each layer reads fp16 values as Core ML's fp16 program does; products
    and sums inside a layer are fp32 (as PyTorch's own float16 CPU kernels accumulate,
    within one fp16 step of them on a conv stack)."""
    import torch

    copied = copy.deepcopy(model).float().eval()
    with torch.no_grad():
        for tensor in [*copied.parameters(), *copied.buffers()]:
            if tensor.is_floating_point():
                tensor.copy_(tensor.half().float())

    def rounded(_module: Any, _inputs: Any, output: Any) -> Any:
        if isinstance(output, torch.Tensor) and output.is_floating_point():
            return output.half().float()
        return output  # a tuple (an LSTM's) as computed

    for module in copied.modules():
        if not any(True for _ in module.children()):
            module.register_forward_hook(rounded)
    return copied


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
        self._stored_half = False  # float16 parameters (scripted); else fp16 emulated

    def _activate(self) -> None:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        self._module = torch.jit.load(  # type: ignore[no-untyped-call]
            str(self.path), map_location="cpu")
        dtypes = {p.dtype for p in self._module.parameters() if p.is_floating_point()}
        self._stored_half = torch.float16 in dtypes

    def _input_metadata(self) -> TensorMeta:
        return tensor_meta(self.tensors)

    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        inputs = [torch.from_numpy(feeds[t["name"]]) for t in self.tensors]
        if self.half:  # rounded to fp16 as Core ML casts them; fed as the proxy stores
            inputs = [(x.half() if self._stored_half else x.half().float())
                      if x.is_floating_point() else x for x in inputs]
        with torch.no_grad():
            result = self._module(*inputs)
        values = [result] if isinstance(result, torch.Tensor) else list(result)
        return {n: v.detach().float().numpy() for n, v in zip(self.outputs, values,
                                                              strict=True)}

    def _deactivate(self) -> None:
        self._module = None
