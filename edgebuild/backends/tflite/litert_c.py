"""LiteRT's C API profiler, run in a process of its own (`python -m` this module).

ai-edge-litert's Python Interpreter and CompiledModel expose no profiler (CompiledModel's
Options carry no runtime options), but the `libLiteRt.so` it ships exports the C API's:

    LiteRtCreateEnvironment ─ LiteRtCreateModelFromFile ─ LiteRtCreateOptions
      + opaque options "runtime_options_string" = "enable_profiling = true"  (TOML)
      + opaque options "xnnpack" = "num_threads = N" (kernel_mode = 2: builtin kernels)
    LiteRtCreateCompiledModel ─ LiteRtCompiledModelGetProfiler
    warm-up runs ─ LiteRtResetProfiler ─ LiteRtStartProfiler ─ runs ─ LiteRtStopProfiler
    LiteRtGetNumProfilerEvents ─ LiteRtGetProfilerEvents (ProfiledEventData[])

Signatures, option identifiers, payload keys and struct layouts: google-ai-edge/LiteRT
at 2911db74a14654bd6038deae76177383e54f2cc1 (2026-07-10) — litert/c/litert_profiler.h,
litert_profiler_event.h (ProfiledEventData), litert_compiled_model.h, litert_model.h,
litert_tensor_buffer{,_types}.h, litert_opaque_options.h, litert_layout.h,
litert/runtime/litert_runtime_options.{h,cc} ("runtime_options_string", TOML keys),
litert/runtime/litert_cpu_options.{h,cc} ("xnnpack", TOML `num_threads`, `kernel_mode`).
Why that commit and not the one that set the SDK version to 2.3.0 (19a1585ff7c6): the
`libLiteRt.so` in the ai-edge-litert 2.3.0 wheel reads its CPU options under "xnnpack"
(tested: 4 threads there make 4 threads, under the later name "cpu_delegate" it stays on
one) and honours `kernel_mode` (2: builtin kernels, no XNNPACK), so it was built from
between 6cb44b5726ba (kernel modes, 2026-03-16) and 5724bf4a2e48 (the rename,
2026-07-10); it also takes an environment in LiteRtCreateModelFromFile (1ac2a58ffb6e,
2026-06-01). The Python wrappers link a runtime of their own (libpywrap_litert_common).

A struct that does not match the library can crash the process, hence a process of its
own (profile.py starts it); the parent gets one JSON line, a `LiteRtProfile` record.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import StrictStr

from edgebuild.measure.record import Record

RUNTIME_OPTIONS = b"runtime_options_string"  # LiteRtRuntimeOptionsT::Identifier()
CPU_OPTIONS = b"xnnpack"  # LiteRtCpuOptionsT::Identifier() in this libLiteRt.so
KERNEL_MODE_BUILTIN = 2  # kLiteRtCpuKernelModeBuiltin
HW_CPU = 1  # kLiteRtHwAcceleratorCpu
ALIGNMENT = 64  # LITERT_HOST_MEMORY_BUFFER_ALIGNMENT: an unaligned host buffer is refused
SPARE = 1 << 20  # bytes an output buffer has at least
MAX_RANK = 8  # LITERT_TENSOR_MAX_RANK


class LiteRtEvent(Record):
    """One ProfiledEventData: tag, event type (tflite::Profiler::EventType bits),
    metadata1 (a TFLite node index, or a delegate's own operator index), elapsed µs."""

    tag: StrictStr
    type: int
    index: int
    us: int


class LiteRtProfile(Record):
    """What the profiling process returns: every event of the profiled runs, in the
    order the profiler recorded them, and each run's wall time around the C call."""

    events: list[LiteRtEvent]
    walls_ms: list[float]
    threads: int
    kernels: StrictStr  # "xnnpack" or "builtin"
    tasks: int | None = None  # this process's OS threads after the runs (Linux): XNNPACK's
    # pool of `threads` - 1 workers shows the thread count was read


class _Memory(ctypes.Structure):  # LiteRtMemoryUsage
    _fields_ = [("total", ctypes.c_size_t), ("in_use", ctypes.c_size_t),
                ("private", ctypes.c_size_t)]


class _Event(ctypes.Structure):  # ProfiledEventData (C definition)
    _fields_ = [("tag", ctypes.c_char_p), ("event_type", ctypes.c_int),
                ("start_us", ctypes.c_uint64), ("elapsed_us", ctypes.c_uint64),
                ("begin_mem", _Memory), ("end_mem", _Memory),
                ("metadata1", ctypes.c_uint64), ("metadata2", ctypes.c_uint64),
                ("source", ctypes.c_int)]


class _Layout(ctypes.Structure):  # LiteRtLayout: rank:7 and has_strides:1 in one uint
    _fields_ = [("bits", ctypes.c_uint), ("dimensions", ctypes.c_int32 * MAX_RANK),
                ("strides", ctypes.c_uint32 * MAX_RANK)]


class _RankedType(ctypes.Structure):  # LiteRtRankedTensorType
    _fields_ = [("element_type", ctypes.c_int), ("layout", _Layout)]


assert ctypes.sizeof(_Layout) == 68  # litert_layout.h's static_assert


class LiteRtError(RuntimeError):
    pass


class _Api:
    """The library and a status check around each call."""

    def __init__(self) -> None:
        import ai_edge_litert

        self.lib = ctypes.CDLL(str(Path(ai_edge_litert.__file__).parent / "libLiteRt.so"))

    def __call__(self, name: str, *args: Any) -> None:
        status = getattr(self.lib, name)(*args)
        if status != 0:
            raise LiteRtError(f"{name} returned LiteRtStatus {status}")


def profile(model: Path, feeds: dict[str, Any], threads: int, builtin: bool,
            warmup: int, runs: int) -> LiteRtProfile:
    """`warmup` runs, then `runs` profiled ones of signature 0 with `feeds` (by signature
    input name, already in the model's layout and dtype)."""
    api = _Api()
    ptr = ctypes.c_void_p
    size = ctypes.c_size_t
    env, model_h, options, compiled = ptr(), ptr(), ptr(), ptr()
    api("LiteRtCreateEnvironment", 0, None, ctypes.byref(env))
    api("LiteRtCreateModelFromFile", env, str(model).encode(), ctypes.byref(model_h))
    api("LiteRtCreateOptions", ctypes.byref(options))
    api("LiteRtSetOptionsHardwareAccelerators", options, HW_CPU)
    keep: list[Any] = []  # payloads the options point at, alive until the end
    no_destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: None)
    cpu = f"num_threads = {threads}\n" + (f"kernel_mode = {KERNEL_MODE_BUILTIN}\n"
                                          if builtin else "")
    for identifier, toml in ((RUNTIME_OPTIONS, "enable_profiling = true\n"),
                             (CPU_OPTIONS, cpu)):
        payload = ctypes.create_string_buffer(toml.encode())
        opaque = ptr()
        api("LiteRtCreateOpaqueOptions", ctypes.c_char_p(identifier),
            ctypes.cast(payload, ptr), no_destructor, ctypes.byref(opaque))
        api("LiteRtAddOpaqueOptions", options, opaque)
        keep.append(payload)
    api("LiteRtCreateCompiledModel", env, model_h, options, ctypes.byref(compiled))
    signature = ptr()
    api("LiteRtGetModelSignature", model_h, size(0), ctypes.byref(signature))
    inputs = _buffers(api, compiled, signature, "Input", feeds, keep)
    outputs = _buffers(api, compiled, signature, "Output", None, keep)
    in_array = (ptr * len(inputs))(*inputs)
    out_array = (ptr * len(outputs))(*outputs)

    def run() -> None:
        api("LiteRtRunCompiledModel", compiled, size(0), size(len(inputs)), in_array,
            size(len(outputs)), out_array)

    profiler = ptr()
    api("LiteRtCompiledModelGetProfiler", compiled, ctypes.byref(profiler))
    if not profiler.value:
        raise LiteRtError("LiteRtCompiledModelGetProfiler gave no profiler: the runtime "
                          "options' enable_profiling was not read")
    for _ in range(warmup):
        run()
    api("LiteRtResetProfiler", profiler)
    api("LiteRtStartProfiler", profiler)
    walls = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        run()
        walls.append((time.perf_counter_ns() - start) / 1e6)
    api("LiteRtStopProfiler", profiler)
    tasks = Path("/proc/self/task")
    seen = len(list(tasks.iterdir())) if tasks.is_dir() else None
    count = ctypes.c_int()
    api("LiteRtGetNumProfilerEvents", profiler, ctypes.byref(count))
    events = (_Event * count.value)()
    api("LiteRtGetProfilerEvents", profiler, count, events)
    found = [LiteRtEvent(tag=(e.tag or b"").decode(errors="replace"), type=e.event_type,
                         index=ctypes.c_int64(e.metadata1).value, us=int(e.elapsed_us))
             for e in events]
    for buffer in inputs + outputs:
        api.lib.LiteRtDestroyTensorBuffer(buffer)
    api.lib.LiteRtDestroyCompiledModel(compiled)
    api.lib.LiteRtDestroyOptions(options)
    api.lib.LiteRtDestroyModel(model_h)
    api.lib.LiteRtDestroyEnvironment(env)
    return LiteRtProfile(events=found, walls_ms=walls, threads=threads,
                         kernels="builtin" if builtin else "xnnpack", tasks=seen)


def _buffers(api: _Api, compiled: Any, signature: Any, kind: str,
             feeds: dict[str, Any] | None, keep: list[Any]) -> list[Any]:
    """Host-memory buffers (ALIGNMENT-aligned, kept alive in `keep`) for the signature's
    inputs, filled with `feeds`, or for its outputs. An output's layout is the compiled
    model's after allocation: a dynamic output (an NMS's box count) is -1 in the model,
    and a buffer the runtime manages for it cannot be locked ("Unexpected tensor buffer
    type"); the buffer is at least SPARE bytes, room for an output that grows."""
    import numpy as np

    size = ctypes.c_size_t
    count = size()
    api(f"LiteRtGetNumSignature{kind}s", signature, ctypes.byref(count))
    layouts = (_Layout * count.value)()
    if kind == "Output":
        api("LiteRtGetCompiledModelOutputTensorLayouts", compiled, size(0), count, layouts,
            ctypes.c_bool(True))
    found = []
    for i in range(count.value):
        tensor, requirements, buffer = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        ranked = _RankedType()
        api(f"LiteRtGetSignature{kind}TensorByIndex", signature, size(i), ctypes.byref(tensor))
        api("LiteRtGetRankedTensorType", tensor, ctypes.byref(ranked))
        if kind == "Output":
            ranked.layout = layouts[i]
        api(f"LiteRtGetCompiledModel{kind}BufferRequirements", compiled, size(0), size(i),
            ctypes.byref(requirements))
        needed = size()
        api("LiteRtGetTensorBufferRequirementsBufferSize", requirements, ctypes.byref(needed))
        data = b""
        if feeds is not None:
            name = ctypes.c_char_p()
            api("LiteRtGetSignatureInputName", signature, size(i), ctypes.byref(name))
            data = np.ascontiguousarray(feeds[(name.value or b"").decode()]).tobytes()
        nbytes = max(needed.value, len(data), SPARE)
        raw = np.zeros(nbytes + ALIGNMENT, np.uint8)
        keep.append(raw)
        address = raw.ctypes.data + (-raw.ctypes.data) % ALIGNMENT
        ctypes.memmove(address, data, len(data))
        api("LiteRtCreateTensorBufferFromHostMemory", ctypes.byref(ranked),
            ctypes.c_void_p(address), size(nbytes), None, ctypes.byref(buffer))
        found.append(buffer)
    return found


def main(argv: list[str]) -> int:
    import numpy as np

    spec = json.loads(Path(argv[0]).read_text())
    with np.load(spec["feeds"], allow_pickle=False) as stored:
        feeds = {name: stored[key] for name, key in spec["inputs"].items()}
    found = profile(Path(spec["model"]), feeds, int(spec["threads"]), bool(spec["builtin"]),
                    int(spec["warmup"]), int(spec["runs"]))
    sys.stdout.write("\n" + json.dumps(found.to_json()) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
