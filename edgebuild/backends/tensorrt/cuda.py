"""The few CUDA driver calls the TensorRT stages need, through ctypes on libcuda.so.1.

Why not a CUDA Python package: every NVIDIA driver (a Jetson's too) ships
libcuda.so.1, so asking it which GPU is here and moving buffers needs nothing
installed beside TensorRT. TensorRT uses the CUDA runtime, which runs on the
device's primary context; the buffers below are allocated in that same context.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

# CUdevice_attribute values (cuda.h)
COMPUTE_CAPABILITY_MAJOR = 75
COMPUTE_CAPABILITY_MINOR = 76


class CudaError(RuntimeError):
    pass


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: str  # "8.7"


def _library() -> Any:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise CudaError(f"no NVIDIA driver here (libcuda.so.1: {exc})") from None


def _check(result: int, call: str) -> None:
    if result != 0:
        raise CudaError(f"{call} failed with CUDA error {result}")


class Driver:
    """Device 0 and its primary context, made current in this thread."""

    def __init__(self) -> None:
        self.cuda = _library()
        _check(self.cuda.cuInit(0), "cuInit")
        device = ctypes.c_int()
        _check(self.cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
        self.device = device.value
        context = ctypes.c_void_p()
        _check(self.cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), self.device),
               "cuDevicePrimaryCtxRetain")
        self.context = context
        _check(self.cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")

    def gpu(self) -> Gpu:
        name = ctypes.create_string_buffer(256)
        _check(self.cuda.cuDeviceGetName(name, 256, self.device), "cuDeviceGetName")
        major, minor = ctypes.c_int(), ctypes.c_int()
        for value, attribute in ((major, COMPUTE_CAPABILITY_MAJOR),
                                 (minor, COMPUTE_CAPABILITY_MINOR)):
            _check(self.cuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, self.device),
                   "cuDeviceGetAttribute")
        return Gpu(name.value.decode(), f"{major.value}.{minor.value}")

    def alloc(self, size: int) -> int:
        pointer = ctypes.c_uint64()
        _check(self.cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(max(size, 1))),
               "cuMemAlloc")
        return pointer.value

    def free(self, pointer: int) -> None:
        self.cuda.cuMemFree_v2(ctypes.c_uint64(pointer))

    def to_device(self, pointer: int, host: Any) -> None:  # host: a C-contiguous ndarray
        _check(self.cuda.cuMemcpyHtoD_v2(ctypes.c_uint64(pointer), ctypes.c_void_p(
            host.ctypes.data), ctypes.c_size_t(host.nbytes)), "cuMemcpyHtoD")

    def to_host(self, host: Any, pointer: int) -> None:
        _check(self.cuda.cuMemcpyDtoH_v2(ctypes.c_void_p(host.ctypes.data),
                                         ctypes.c_uint64(pointer),
                                         ctypes.c_size_t(host.nbytes)), "cuMemcpyDtoH")

    def stream(self) -> int:
        stream = ctypes.c_void_p()
        _check(self.cuda.cuStreamCreate(ctypes.byref(stream), 0), "cuStreamCreate")
        return int(stream.value or 0)

    def synchronize(self, stream: int) -> None:
        _check(self.cuda.cuStreamSynchronize(ctypes.c_void_p(stream)), "cuStreamSynchronize")

    def close(self) -> None:
        self.cuda.cuDevicePrimaryCtxRelease(self.device)


def gpu_here() -> Gpu | str:
    """The GPU of this machine, or why there is none usable."""
    try:
        driver = Driver()
    except CudaError as exc:
        return str(exc)
    try:
        return driver.gpu()
    except CudaError as exc:
        return str(exc)
    finally:
        driver.close()


__all__ = ["CudaError", "Driver", "Gpu", "gpu_here"]
