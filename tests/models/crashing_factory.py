"""A factory that crashes the process the way a converter's native code does (SIGSEGV)."""

import ctypes


def build() -> object:
    print("converting node /encoder.0/Conv", flush=True)  # what a converter logs first
    return ctypes.string_at(0)  # reads address 0: a segmentation fault
