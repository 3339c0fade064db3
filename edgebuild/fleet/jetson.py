"""The Jetson rule: a TensorRT engine runs only with the TensorRT version and GPU it was
built for, so the agent checks a shipped engine against the device before activating it.

    variant (backend tensorrt) ─► device facts (TensorRT version, compute capability)
        ├─ engine shipped, built for these        ─► use it
        ├─ engine shipped, built for others       ─► refuse it; build from model.onnx
        ├─ no engine (the TensorRT-ready ONNX)    ─► build from model.onnx
        └─ no TensorRT / GPU here, or no ONNX     ─► refused: nothing is activated

The build runs `trtexec` with the line compile wrote (backends/tensorrt/options.py:
trtexec_command) in `releases/<hex>/engine/`, next to an `engine.json` tag the engine
runner checks (backends/tensorrt/engine.py). The device's facts come from the real
sources (the `tensorrt` module, dpkg, NvInferVersion.h; libcuda through
backends/tensorrt/cuda.py, nvidia-smi, the Jetson's device tree), or from
`--device-facts FILE` / $EDGEBUILD_DEVICE_FACTS (a JSON DeviceFacts) when testing.
Imports: the standard library and pydantic; TensorRT is never imported here in-process
beyond asking its version.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edgebuild.core.manifest import ArtifactManifest
from edgebuild.core.untrusted import loads, read_regular
from edgebuild.errors import EdgebuildError

ENGINE_FORMAT: Final = "tensorrt-engine"  # backends/tensorrt/backend.py (not imported: light)
ONNX: Final = "model.onnx"  # the TensorRT-ready ONNX compile writes
ENGINE: Final = "model.engine"
TAG: Final = "engine.json"
ENGINE_DIR: Final = "engine"  # releases/<hex>/engine/: what the device built
FACTS_ENV: Final = "EDGEBUILD_DEVICE_FACTS"
BUILD_TIMEOUT_S = 3600.0
MAX_FACTS = 1 << 20  # a device facts file or an engine.json tag: small JSON, read bounded
NV_INFER_VERSION: Final = Path("/usr/include/aarch64-linux-gnu/NvInferVersion.h")
DEVICE_TREE: Final = Path("/proc/device-tree/compatible")
# Jetson modules' device-tree `compatible` strings -> their GPU's compute capability
# (NVIDIA's CUDA GPU list; L4T's tegra*.dtsi): Orin 8.7, Xavier 7.2, TX2 6.2, Nano/TX1 5.3.
TEGRA_SM: Final = {"tegra234": "8.7", "tegra194": "7.2", "tegra186": "6.2",
                   "tegra210": "5.3"}

Action = Literal["not-tensorrt", "use-shipped", "build", "refuse"]


class DeviceFacts(BaseModel):
    """What this device has; None = not found (`sources` says where it was looked for)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tensorrt_version: str | None = Field(None, pattern=r"^\d+(\.\d+){1,3}$")
    compute_capability: str | None = Field(None, pattern=r"^\d+\.\d+$")
    sources: dict[str, str] = Field(default_factory=dict)


class EngineDecision(BaseModel):
    model_config = ConfigDict(frozen=True)
    action: Action
    reason: str


def same_version(shipped: str, device: str) -> bool:
    """Equal to the precision of the shipped one: "10.3" matches 10.3.0.30; "10.3.0.30"
    does not match 10.3.0.26 (an engine is tied to the exact TensorRT it was built with)."""
    want = shipped.split(".")
    return device.split(".")[:len(want)] == want


def shipped_for(manifest: ArtifactManifest, files: Path) -> tuple[str, str] | None:
    """(TensorRT version, compute capability) a shipped engine was built for: its
    engine.json tag (what the device that built it had), else the profile's options."""
    if manifest.format != ENGINE_FORMAT:
        return None
    tag: dict[str, object] = {}
    if any(f.name == TAG for f in manifest.files):
        try:
            loaded = loads(read_regular(files / TAG, MAX_FACTS))
            tag = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            tag = {}
    options = manifest.profile.options
    return (str(tag.get("tensorrt") or options.get("tensorrt_version", "?")),
            str(tag.get("compute_capability") or options.get("compute_capability", "?")))


def decide(manifest: ArtifactManifest, files: Path, facts: DeviceFacts) -> EngineDecision:
    """What to do with a variant on this device (files: its verified files/ folder)."""
    if manifest.backend != "tensorrt":
        return EngineDecision(action="not-tensorrt", reason="")
    has_onnx = any(f.name == ONNX for f in manifest.files)
    here = f"TensorRT {facts.tensorrt_version}, sm {facts.compute_capability}"
    missing = [f"{what} ({facts.sources.get(key, 'not found')})" for key, what in
               (("tensorrt_version", "TensorRT"), ("compute_capability", "NVIDIA GPU"))
               if getattr(facts, key) is None]
    if missing:
        return EngineDecision(action="refuse", reason=(
            f"the {manifest.target} variant needs TensorRT on an NVIDIA GPU; this device "
            f"has no {' and no '.join(missing)}"))
    assert facts.tensorrt_version is not None and facts.compute_capability is not None
    built = shipped_for(manifest, files)
    if built is not None:
        version, sm = built
        if same_version(version, facts.tensorrt_version) and sm == facts.compute_capability:
            return EngineDecision(action="use-shipped", reason=(
                f"shipped engine built for TensorRT {version}, sm {sm}: matches this "
                f"device ({here})"))
        refused = (f"shipped engine refused: built for TensorRT {version}, sm {sm}; this "
                   f"device has {here}")
        if not has_onnx:
            return EngineDecision(action="refuse", reason=(
                f"{refused}, and the variant has no {ONNX} to build it from"))
        return EngineDecision(action="build", reason=f"{refused}: building it from {ONNX}")
    if not has_onnx:
        return EngineDecision(action="refuse", reason=(
            f"the {manifest.target} variant ships neither an engine nor {ONNX}"))
    return EngineDecision(action="build", reason=(
        f"no engine shipped: building it from {ONNX} on this device ({here})"))


# --- the device's facts --------------------------------------------------------------

def read_facts(path: Path) -> DeviceFacts:
    """A DeviceFacts JSON file (--device-facts / $EDGEBUILD_DEVICE_FACTS)."""
    try:
        facts = DeviceFacts.model_validate(loads(path.read_bytes()))  # depth-limited
    except (OSError, ValueError) as exc:
        detail = exc.errors()[0] if isinstance(exc, ValidationError) else None
        where = f"key {'.'.join(str(p) for p in detail['loc'])}: {detail['msg']}" \
            if detail else str(exc)
        raise EdgebuildError(f"{path}: not a device facts file ({where})",
                             '{"tensorrt_version": "10.3.0", "compute_capability": '
                             '"8.7"}') from None
    return facts.model_copy(update={"sources": {
        "tensorrt_version": f"from {path}", "compute_capability": f"from {path}",
        **facts.sources}})


def device_facts(override: Path | None = None) -> DeviceFacts:
    """--device-facts FILE, else $EDGEBUILD_DEVICE_FACTS, else this device's own."""
    given = override or (Path(os.environ[FACTS_ENV]) if os.environ.get(FACTS_ENV) else None)
    if given is not None:
        return read_facts(given)
    version, version_from = tensorrt_version()
    sm, sm_from = compute_capability()
    return DeviceFacts(tensorrt_version=version, compute_capability=sm,
                       sources={"tensorrt_version": version_from,
                                "compute_capability": sm_from})


def tensorrt_version() -> tuple[str | None, str]:
    """(version, where from or why none): the `tensorrt` module, else the `tensorrt`
    Debian package (JetPack), else NvInferVersion.h."""
    tried = []
    try:
        import tensorrt  # asked only for a TensorRT variant

        found = version_prefix(str(tensorrt.__version__))
        if found:
            return found, "python tensorrt.__version__"
    except Exception as exc:  # a broken install raises more than ImportError
        tried.append(f"python tensorrt: {type(exc).__name__}")
    if shutil.which("dpkg-query"):
        done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "tensorrt"],
                              capture_output=True, text=True, check=False, timeout=30)
        found = version_prefix(done.stdout) if done.returncode == 0 else None
        if found:
            return found, "dpkg-query -W tensorrt"
        tried.append("dpkg: no tensorrt package")
    try:
        found = header_version(NV_INFER_VERSION.read_text())
        if found:
            return found, str(NV_INFER_VERSION)
    except OSError:
        tried.append(f"no {NV_INFER_VERSION}")
    return None, "; ".join(tried) or "not found"


def version_prefix(text: str) -> str | None:
    """"10.3.0.30-1+cuda12.5" (dpkg) or "10.3.0.post1" -> "10.3.0.30" / "10.3.0"."""
    match = re.match(r"\s*(?:\d+:)?(\d+(?:\.\d+){1,3})", text)
    return match.group(1) if match else None


def header_version(text: str) -> str | None:
    """MAJOR.MINOR.PATCH from NvInferVersion.h (TensorRT 10 defines NV_TENSORRT_MAJOR as
    TRT_MAJOR_ENTERPRISE: one level of indirection is followed)."""
    defines: dict[str, str] = dict(re.findall(r"^\s*#define\s+(\w+)\s+(\w+)", text,
                                              re.MULTILINE))
    parts: list[str] = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        value = defines.get(f"NV_TENSORRT_{part}", "")
        value = defines.get(value, value)
        if not value.isdigit():
            return None
        parts.append(value)
    return ".".join(parts)


def compute_capability() -> tuple[str | None, str]:
    """(major.minor, where from or why none): libcuda (backends/tensorrt/cuda.py), else
    `nvidia-smi --query-gpu=compute_cap`, else a Jetson's device tree."""
    from edgebuild.backends.tensorrt.cuda import gpu_here

    tried = []
    gpu = gpu_here()
    if not isinstance(gpu, str):
        return gpu.compute_capability, f"libcuda: {gpu.name}"
    tried.append(gpu)
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              check=False, timeout=30)
        lines = done.stdout.split() if done.returncode == 0 else []
        if lines and re.fullmatch(r"\d+\.\d+", lines[0]):
            return lines[0], "nvidia-smi"
        tried.append(f"nvidia-smi exited {done.returncode}")
    try:
        found = tegra_sm(DEVICE_TREE.read_bytes())
        if found:
            return found, str(DEVICE_TREE)
        tried.append(f"{DEVICE_TREE}: not a known Jetson")
    except OSError:
        tried.append(f"no {DEVICE_TREE}")
    return None, "; ".join(tried)


def tegra_sm(compatible: bytes) -> str | None:
    """The compute capability for a device tree's NUL-separated `compatible` list."""
    for entry in compatible.split(b"\0"):
        name = entry.decode("ascii", "replace").split(",")[-1]
        if name in TEGRA_SM:
            return TEGRA_SM[name]
    return None


# --- the build on the device ---------------------------------------------------------

def find_trtexec() -> str | None:
    """trtexec on PATH, else where JetPack installs it (not on PATH)."""
    found = shutil.which("trtexec")
    if found:
        return found
    jetpack = Path("/usr/src/tensorrt/bin/trtexec")
    return str(jetpack) if os.access(jetpack, os.X_OK) else None


def build_command(manifest: ArtifactManifest, onnx: Path, trtexec: str) -> list[str]:
    """compile's own trtexec line (the target's options and the optimization profiles
    it derived), with the device's trtexec and the release's ONNX."""
    from edgebuild.backends.tensorrt.options import (  # light, on demand
        ShapeProfile,
        TensorRtOptions,
        trtexec_command,
    )

    options = TensorRtOptions.model_validate(manifest.profile.options)
    profiles = {name: ShapeProfile.model_validate(shape) for name, shape in
                dict(manifest.runner_metadata.get("profiles") or {}).items()}
    command = trtexec_command(options, str(onnx), profiles)
    return [trtexec, *command[1:]]


def build_engine(release: Path, manifest: ArtifactManifest, facts: DeviceFacts) -> str:
    """Build releases/<hex>/engine/model.engine from files/model.onnx with trtexec; the
    tag engine.json says with what. An EdgebuildError says why it could not."""
    trtexec = find_trtexec()
    if trtexec is None:
        raise EdgebuildError("trtexec is not on PATH nor in /usr/src/tensorrt/bin: the "
                             "engine cannot be built on this device",
                             "install TensorRT's samples (JetPack: tensorrt, "
                             "libnvinfer-bin)")
    out = release / ENGINE_DIR
    out.mkdir(exist_ok=True)
    command = build_command(manifest, (release / "files" / ONNX).absolute(), trtexec)
    try:
        done = subprocess.run(command, cwd=out, capture_output=True, text=True,
                              check=False, timeout=BUILD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EdgebuildError(f"trtexec could not build the engine: {exc}") from None
    if done.returncode != 0 or not (out / ENGINE).is_file():
        last = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
        raise EdgebuildError(f"trtexec exited {done.returncode} building the engine: "
                             f"{last[0][:300]}")
    tag = {"tensorrt": facts.tensorrt_version, "compute_capability":
           facts.compute_capability, "built_by": "edgebuild agent (trtexec)",
           "trtexec": command, "profiles": manifest.runner_metadata.get("profiles", {})}
    (out / TAG).write_text(json.dumps(tag, indent=1))
    return f"engine built on this device with trtexec ({facts.tensorrt_version}, sm " \
           f"{facts.compute_capability})"


def built_here(release: Path, facts: DeviceFacts) -> bool:
    """releases/<hex>/engine/ holds an engine this device built with these facts."""
    try:
        tag = loads(read_regular(release / ENGINE_DIR / TAG, MAX_FACTS))
    except (OSError, ValueError):
        return False
    return isinstance(tag, dict) and (release / ENGINE_DIR / ENGINE).is_file() and \
        (tag.get("tensorrt"), tag.get("compute_capability")) == (
            facts.tensorrt_version, facts.compute_capability)
