"""ONNX Runtime sessions on Qualcomm's HTP through the onnxruntime-qnn plugin.

onnxruntime-qnn is a *plugin* execution provider for the regular onnxruntime: it is
registered from its library, then attached to a session for the devices it reports.
Asking for `providers=["QNNExecutionProvider"]` instead only warns and silently runs
everything on the CPU EP, which is why every session here is built this way, with
the CPU fallback disabled unless a recipe asks to see it. On x86-64 the HTP backend
(libQnnHtp.so) runs as an emulator: real HTP numerics, nothing like device speed.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from edgebuild.core.share_cpu import yield_when_idle
from edgebuild.errors import BackendUnavailable

EP = "QNNExecutionProvider"


@cache
def qnn_devices() -> tuple[Any, ...]:
    """The QNN EP's devices, registering the plugin library once per process."""
    try:
        import onnxruntime as ort
        import onnxruntime_qnn
    except ImportError:
        raise BackendUnavailable("qnn", "onnxruntime-qnn is not installed", "qnn") from None
    ort.register_execution_provider_library(EP, onnxruntime_qnn.get_library_path())
    devices = tuple(d for d in ort.get_ep_devices() if d.ep_name == EP)
    if not devices:
        raise BackendUnavailable("qnn", "onnxruntime-qnn registered no QNN device", "qnn")
    return devices


def htp_path() -> str:
    import onnxruntime_qnn

    return str(onnxruntime_qnn.get_qnn_htp_path())


def session(model: Path, provider_options: dict[str, str], *, cpu_fallback: bool,
            context_file: Path | None = None, threads: int | None = None) -> Any:
    """A session of `model` on the HTP; with `context_file`, it also writes the EPContext
    model (and its `_qnn.bin` context binary beside it) for the options' SoC."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.disable_cpu_ep_fallback",
                                     "0" if cpu_fallback else "1")
    if context_file is not None:
        options.add_session_config_entry("ep.context_enable", "1")
        options.add_session_config_entry("ep.context_file_path", str(context_file))
        # 0: the context binary is a file beside the ONNX, not bytes inside it.
        options.add_session_config_entry("ep.context_embed_mode", "0")
    if threads:
        options.intra_op_num_threads = threads
    options.add_provider_for_devices(list(qnn_devices()),
                                     {"backend_path": htp_path(), **provider_options})
    return ort.InferenceSession(str(model), yield_when_idle(options))
