"""The serving environment: a venv of its own holding NVIDIA's bundled Triton server.

`nvidia-pytriton` pins `numpy<2`, which must not touch the project's environment, so the
server, its Python backend's interpreter and `perf_analyzer` live in a separate venv,
made once per machine and reused:

    $EDGEBUILD_TRITON_DIR (else ~/.cache/edgebuild-triton)/env-<PINS key>/
        bin/python, bin/perf_analyzer          (tritonclient's wheel)
        lib/python3.X/site-packages/pytriton/tritonserver/bin/tritonserver  (2.51.0)
        edgebuild-backends/python/             the Python backend + the stub for 3.X
        edgebuild-backends/onnxruntime/model.py  a Python-based stand-in for the C++ backend
        edgebuild-libs/libb64.so.0d, libcudart.so.12  unhashed names perf_analyzer asks for
        edgebuild-env.json                     written last: the env is complete

It is made by `python -m edgebuild.backends.triton.env` (or `make_env()`), never as a
side effect of planning; a run without it is "not measurable here" with that command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

# Pillow as in edgebuild's own environment: the preprocess model resizes with the very
# release the dataset loader resized the gated images with.
PILLOW = version("pillow")
PINS = ("nvidia-pytriton==0.7.0", "tritonclient[http]==2.51.0", "onnxruntime==1.20.1",
        "numpy<2", f"pillow=={PILLOW}")
KEY = f"pytriton0.7.0-tc2.51.0-ort1.20.1-pil{PILLOW}"
MARKER = "edgebuild-env.json"
DIR_ENV = "EDGEBUILD_TRITON_DIR"
SETUP_COMMAND = "python -m edgebuild.backends.triton.env"

# The Python-based stand-in for Triton's C++ onnxruntime backend: the server bundled here
# has only the Python backend, and Triton loads `<backend-dir>/<name>/model.py` for a
# model whose config says `backend: "<name>"`. A full Triton uses its C++ backend for the
# same config.pbtxt instead: the repository does not change.
ONNXRUNTIME_STANDIN = '''"""edgebuild's stand-in for Triton's onnxruntime backend (Python-based)."""

import json
import os
import sys

sys.path.insert(0, {site!r})  # the stub's interpreter is isolated: the venv's packages

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(os.environ.get("EDGEBUILD_TRITON_THREADS", "0"))
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [o["name"] for o in config["output"]]

    def execute(self, requests):
        responses = []
        for request in requests:
            feeds = {n: pb_utils.get_input_tensor_by_name(request, n).as_numpy()
                     for n in self.inputs}
            values = self.session.run(self.outputs, feeds)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor(n, np.ascontiguousarray(v))
                for n, v in zip(self.outputs, values)]))
        return responses
'''


@dataclass(frozen=True)
class ServerEnv:
    root: Path
    python: Path
    site_packages: Path
    tritonserver: Path
    backends: Path
    caches: Path
    server_libs: Path
    libdir: Path  # the interpreter's LIBDIR: the stub loads this libpython, not the system's
    perf_analyzer: Path
    tool_libs: Path

    def library_path(self) -> str:
        old = os.environ.get("LD_LIBRARY_PATH", "")
        return ":".join(p for p in (str(self.server_libs), str(self.tool_libs),
                                    str(self.libdir), old) if p)


def base_dir() -> Path:
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV])
    import platformdirs

    return Path(platformdirs.user_cache_dir("edgebuild-triton"))


def env_dir() -> Path:
    return base_dir() / f"env-{KEY}-py{sys.version_info[0]}{sys.version_info[1]}"


def find_env() -> ServerEnv | str:
    """The ready environment, or why there is none ("not measurable here: ...")."""
    root = env_dir()
    marker = root / MARKER
    if not marker.is_file():
        return (f"not measurable here: the Triton server environment is not set up "
                f"({root} has no {MARKER}); make it with `{SETUP_COMMAND}` (pip: "
                f"{', '.join(PINS)}, in a venv of its own)")
    try:
        env = ServerEnv(**{k: Path(v) for k, v in json.loads(marker.read_text()).items()})
    except (ValueError, TypeError) as error:
        return (f"not measurable here: the Triton environment's {marker} is unreadable "
                f"({error}); remove {root} and make it again with `{SETUP_COMMAND}`")
    missing = [p for p in (env.tritonserver, env.python, env.perf_analyzer) if not p.exists()]
    if missing:
        return f"not measurable here: the Triton environment at {root} lacks {missing[0]}"
    return env


def make_env(log: Path | None = None) -> ServerEnv:
    """Create the environment (pip, from PyPI) and return it; a no-op when it exists."""
    import fcntl

    found = find_env()
    if isinstance(found, ServerEnv):
        return found
    base_dir().mkdir(parents=True, exist_ok=True)
    # Two test workers may ask at once: one builds, the other waits and finds it made.
    with (base_dir() / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = find_env()
        return found if isinstance(found, ServerEnv) else _make(log)


def _make(log: Path | None) -> ServerEnv:
    root = env_dir()
    building = root.with_name(root.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    sink = log.open("w") if log else subprocess.DEVNULL
    try:
        subprocess.run([sys.executable, "-m", "venv", str(building)], check=True,
                       stdout=sink, stderr=sink)
        subprocess.run([str(building / "bin" / "python"), "-m", "pip", "install", "-q", *PINS],
                       check=True, stdout=sink, stderr=sink)
    finally:
        if log:
            sink.close()  # type: ignore[union-attr]
    if root.exists():
        shutil.rmtree(root)
    building.rename(root)  # venv scripts keep their build path; we call bin/python directly
    _prepare(root)
    found = find_env()
    if not isinstance(found, ServerEnv):
        raise RuntimeError(found)
    return found


def _prepare(root: Path) -> None:
    python = root / "bin" / "python"
    probe = ("import sys, sysconfig, site; print(sysconfig.get_config_var('LIBDIR')); "
             "print(site.getsitepackages()[0]); "
             "print(f'{sys.version_info[0]}.{sys.version_info[1]}')")
    libdir, site, version = subprocess.run([str(python), "-c", probe], check=True,
                                           capture_output=True, text=True).stdout.split()
    dist = Path(site) / "pytriton" / "tritonserver"
    backends = root / "edgebuild-backends"
    shutil.rmtree(backends, ignore_errors=True)
    shutil.copytree(dist / "backends" / "python", backends / "python")
    shutil.copy(dist / "python_backend_stubs" / version / "triton_python_backend_stub",
                backends / "python" / "triton_python_backend_stub")
    # The stub runs its interpreter isolated (-E: PYTHONPATH ignored), but it imports the
    # backend's utilities from this folder before any model: they put the venv's packages
    # first, so the models see its numpy and onnxruntime, not the base interpreter's.
    utils = backends / "python" / "triton_python_backend_utils.py"
    utils.write_text(f"import sys\nsys.path.insert(0, {str(site)!r})\n" + utils.read_text())
    (backends / "onnxruntime").mkdir()
    (backends / "onnxruntime" / "model.py").write_text(ONNXRUNTIME_STANDIN.replace(
        "{site!r}", repr(site)))
    libs = Path(site) / "nvidia_pytriton.libs"
    tool_libs = root / "edgebuild-libs"
    tool_libs.mkdir(exist_ok=True)
    for wanted, prefix in (("libb64.so.0d", "libb64-"), ("libcudart.so.12", "libcudart-")):
        (hit,) = [p for p in libs.iterdir() if p.name.startswith(prefix)]
        link = tool_libs / wanted
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(hit)
    data = {"root": root, "python": python, "site_packages": Path(site),
            "tritonserver": dist / "bin" / "tritonserver", "backends": backends,
            "caches": dist / "caches", "server_libs": libs, "libdir": Path(libdir),
            "perf_analyzer": root / "bin" / "perf_analyzer", "tool_libs": tool_libs}
    (root / MARKER).write_text(json.dumps({k: str(v) for k, v in data.items()}, indent=1))


if __name__ == "__main__":
    print(f"making the Triton server environment in {env_dir()} (pip: {', '.join(PINS)})")
    made = make_env()
    print(f"ready: {made.tritonserver}")
