"""On the device: build a TensorRT engine from the TensorRT-ready ONNX, and run it.

Written against TensorRT's Python API as it is in 10.x and 11.x:

- the network comes from `trt.OnnxParser`; strongly typed (`STRONGLY_TYPED`
  creation flag: the ONNX's FP16 / Q/DQ types decide) unless the profile asks for
  TensorRT 10's weakly typed FP16/INT8 builder flags, which 11 no longer has;
- workspace limit, builder optimization level, DLA core with GPU fallback, one
  optimization profile for the dynamic inputs;
- a timing cache read before and written after the build, kept on the device
  per TensorRT version and GPU, and copied into the stage's artifact;
- the engine is tagged (engine.json) with the TensorRT version and compute
  capability it was built with; the runner refuses any other.

This module is imported only on a machine where `tensorrt` imports (the build
stage checks first): nothing here runs on the build host.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta
from edgebuild.backends.tensorrt.options import ShapeProfile, TensorRtOptions, Typing
from edgebuild.errors import StageError

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.tensorrt.cuda import Gpu

ENGINE = "model.engine"
TAG = "engine.json"
TIMING_CACHE = "timing.cache"


def trt_version() -> str:
    import tensorrt as trt

    return str(trt.__version__)


def major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def build(onnx_path: Path, out: Path, options: TensorRtOptions,
          profiles: dict[str, ShapeProfile], gpu: Gpu) -> dict[str, Any]:
    """Write ENGINE, TIMING_CACHE and TAG under `out`; returns the tag."""
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0
    if options.typing is Typing.STRONG:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = [parser.get_error(i) for i in range(parser.num_errors)]
        named = "; ".join(f"node {e.node_name()} ({e.node_operator()}): {e.desc()}"
                          for e in errors[:5])
        raise StageError(f"TensorRT's ONNX parser refused the model: {named}",
                         "see tensorrt_coverage.md from compile; an op without support "
                         "needs a plugin (IPluginV3) on the device")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_mb << 20)
    config.builder_optimization_level = options.optimization_level
    if options.typing is Typing.WEAK:  # TensorRT 10 only (the options check it)
        if options.precision.value in ("fp16", "int8"):
            config.set_flag(trt.BuilderFlag.FP16)
        if options.precision.value == "int8":
            config.set_flag(trt.BuilderFlag.INT8)  # explicit Q/DQ: no calibrator
    if options.dla_core is not None:
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = options.dla_core
        config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    if profiles:
        profile = builder.create_optimization_profile()
        for name, shape in profiles.items():
            profile.set_shape(name, shape.min, shape.opt, shape.max)
        config.add_optimization_profile(profile)
    kept = _kept_timing_cache(options, gpu)
    warm = kept.is_file() and kept.stat().st_size > 0
    cache = config.create_timing_cache(kept.read_bytes() if warm else b"")
    config.set_timing_cache(cache, ignore_mismatch=False)
    started = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    seconds = time.perf_counter() - started
    if serialized is None:
        raise StageError("TensorRT could not build the engine (its log above says why)",
                         "a larger `workspace_mb`, or `unsupported: fail` to find the op")
    (out / ENGINE).write_bytes(bytes(serialized))
    timing = bytes(config.get_timing_cache().serialize())
    (out / TIMING_CACHE).write_bytes(timing)
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(out / TIMING_CACHE, kept)  # the next build on this device starts warm
    tag = {"tensorrt": trt.__version__, "compute_capability": gpu.compute_capability,
           "gpu": gpu.name, "build_seconds": round(seconds, 2),
           "timing_cache": {"reused": warm, "bytes": len(timing), "kept": str(kept)},
           "typing": options.typing.value, "dla_core": options.dla_core,
           "profiles": {n: p.model_dump() for n, p in profiles.items()}}
    (out / TAG).write_text(json.dumps(tag, indent=1))
    return tag


def _kept_timing_cache(options: TensorRtOptions, gpu: Gpu) -> Path:
    folder = Path(options.timing_cache_dir).expanduser()
    return folder / f"trt{trt_version()}-sm{gpu.compute_capability}.cache"


def check_tag(folder: Path, gpu: Gpu) -> None:
    """Refuse an engine built for another TensorRT version or GPU (it would not load, or
    worse, load and run other tactics than the ones timed)."""
    tag = json.loads((folder / TAG).read_text())
    here = (trt_version(), gpu.compute_capability)
    built = (tag["tensorrt"], tag["compute_capability"])
    if built != here:
        raise StageError(f"the engine was built with TensorRT {built[0]} for sm {built[1]}; "
                         f"this device has TensorRT {here[0]}, sm {here[1]}",
                         "set `tensorrt_version` and `compute_capability` in the target "
                         "profile to this device's, so the engine is rebuilt for it")


_DTYPES = {"FLOAT": "float32", "HALF": "float16", "INT8": "int8", "INT32": "int32",
           "INT64": "int64", "BOOL": "bool", "UINT8": "uint8"}


class EngineRunner(Runner):
    """A deserialized engine on the GPU, run synchronously with enqueueV3."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder
        self._state: dict[str, Any] = {}

    def _activate(self) -> None:
        import tensorrt as trt

        from edgebuild.backends.tensorrt.cuda import Driver

        driver = Driver()
        check_tag(self.folder, driver.gpu())
        runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        engine = runtime.deserialize_cuda_engine((self.folder / ENGINE).read_bytes())
        if engine is None:
            raise StageError("TensorRT could not deserialize the engine",
                             "rebuild it on this device")
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self._state = {"trt": trt, "driver": driver, "engine": engine,
                       "context": engine.create_execution_context(), "names": names,
                       "inputs": inputs, "stream": driver.stream(), "buffers": {}}

    def _dtype(self, name: str) -> str:
        engine = self._state["engine"]
        kind = str(engine.get_tensor_dtype(name)).rsplit(".", 1)[-1]
        return _DTYPES.get(kind, kind.lower())

    def _input_metadata(self) -> TensorMeta:
        engine = self._state["engine"]
        return {n: (tuple(d if d >= 0 else "dynamic" for d in engine.get_tensor_shape(n)),
                    self._dtype(n)) for n in self._state["inputs"]}

    def _buffer(self, name: str, nbytes: int) -> int:
        buffers = self._state["buffers"]
        pointer, size = buffers.get(name, (0, 0))
        if size < nbytes:  # grow only: a profile's shapes change from call to call
            if pointer:
                self._state["driver"].free(pointer)
            pointer, size = self._state["driver"].alloc(nbytes), nbytes
            buffers[name] = (pointer, size)
        return int(pointer)

    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import numpy as np

        state = self._state
        context, driver = state["context"], state["driver"]
        for name in state["inputs"]:
            array = np.ascontiguousarray(feeds[name])
            context.set_input_shape(name, array.shape)
            pointer = self._buffer(name, array.nbytes)
            driver.to_device(pointer, array)
            context.set_tensor_address(name, pointer)
        outputs = {}
        for name in state["names"]:
            if name in state["inputs"]:
                continue
            array = np.empty(tuple(context.get_tensor_shape(name)), self._dtype(name))
            context.set_tensor_address(name, self._buffer(name, array.nbytes))
            outputs[name] = array
        if not context.execute_async_v3(state["stream"]):
            raise StageError("TensorRT failed to run the engine (enqueueV3 returned false)")
        driver.synchronize(state["stream"])
        for name, array in outputs.items():
            driver.to_host(array, state["buffers"][name][0])
        return outputs

    def _deactivate(self) -> None:
        state, self._state = self._state, {}
        for pointer, _ in state.get("buffers", {}).values():
            state["driver"].free(pointer)
        if "driver" in state:
            state["driver"].close()


__all__ = ["ENGINE", "TAG", "TIMING_CACHE", "EngineRunner", "build", "check_tag",
           "major_minor", "trt_version"]
