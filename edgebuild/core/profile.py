"""Target profiles as typed values: one kind of hardware and how to build and measure for it.

The profile files in `targets/` are validated into these models (recipe/targets.py
loads them); a `Target` (core/target.py) is a profile with a recipe's overrides.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)


class Strict(BaseModel):
    """Base for every schema model: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Precision(StrEnum):
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"


class MeasureSettings(Strict):
    """The latency measurement protocol (docs/gates.md explains each step)."""

    warmup_iterations: int = Field(10, ge=0, description="Runs discarded before timing.")
    min_iterations: int = Field(100, ge=5, description="Timed runs, at least.")
    min_seconds: float = Field(2.0, ge=0, description="Timed seconds, at least.")
    max_iterations: int = Field(100_000, ge=5, description="Stop after this many timed runs.")
    threads: int | None = Field(
        None, ge=1, le=1024, description="Inference threads; default: the backend's own choice."
    )
    max_busy_share: float | None = Field(
        0.25, gt=0, le=1, description="Largest share of all cores that other processes may "
        "use while a latency is timed; beyond it the figure times them, so it is measured "
        "once more and then reported as not measurable (never cached as a clean figure). "
        "null: never judge.")
    profile: bool = Field(
        False, description="After the timed runs, take a per-operator profile in a run of "
        "its own (ONNX Runtime's profiler, OpenVINO's performance counters, LiteRT's "
        "profiler, ExecuTorch's ETDump; on a device benchmark_model's or trtexec's "
        "per-layer tables) and the runtime's peak memory in a fresh process; the report "
        "shows both "
        "(docs/profiles.md). Off: neither runs, and timing is unchanged.")

    @model_validator(mode="after")
    def _consistent(self) -> MeasureSettings:
        if self.min_iterations > self.max_iterations:
            raise ValueError(f"min_iterations {self.min_iterations} is more than "
                             f"max_iterations {self.max_iterations}")
        return self


class RunnerKind(StrEnum):
    """Where a target's measurement stages execute."""

    HOST = "host"  # this machine
    SSH = "ssh"  # a remote Linux board reached over SSH
    ADB = "adb"  # an Android device reached over adb
    DASK = "dask"  # a Dask worker holding the resource tag
    MACOS = "macos"  # a macOS host (Core ML prediction)
    EMULATED = "emulated"  # this machine, another instruction set under qemu-user


class RunsOn(Strict):
    """Where the target's artifacts run. Compilation always runs on the build host."""

    kind: RunnerKind = RunnerKind.HOST
    host: str | None = Field(
        None, description="SSH destination, for `kind: ssh`: a `~/.ssh/config` alias, "
        "`user@host` or `ssh://user@host:port` (keys and jump hosts come from your ssh config).")
    python: str = Field(
        "python3", description="For `kind: ssh`: the Python on the host that has edgebuild "
        "installed (e.g. `/opt/edgebuild/.venv/bin/python`).")
    serial: str | None = Field(None, description="adb serial, for `kind: adb`.")
    resource: str | None = Field(None, description="Dask resource tag, for `kind: dask`.")
    arch: str | None = Field(
        None, pattern="^(aarch64)$", description="For `kind: emulated`: the instruction set "
        "emulated on this machine (`edgebuild board setup ARCH` provisions its board).")
    cpu: str | None = Field(
        None, pattern="^[a-z0-9][a-z0-9-]{0,40}$", description="For `kind: emulated`: the "
        "CPU model qemu emulates, which decides the instruction set features (and so the "
        "kernels) a runtime picks: `cortex-a72` (a Raspberry Pi 4: NEON, no dot product), "
        "`cortex-a76`, `neoverse-n1`; default qemu's `max` (every feature it emulates).")

    @field_validator("host")
    @classmethod
    def _a_destination(cls, host: str | None) -> str | None:
        """edgebuild passes `host` to ssh after `--`; refusing '-' here too makes the
        mistake (or the `-oProxyCommand=…` attack) a located error, not a confusing one."""
        if host is None:
            return host
        if host.startswith("-"):
            raise ValueError("an ssh destination cannot begin with '-': ssh would read it as "
                             "an option (put ssh options in your ssh config, under a Host "
                             "alias, and name the alias here)")
        if not host or any(c.isspace() or ord(c) < 32 or c == "\x7f" for c in host):
            raise ValueError("an ssh destination is one word without spaces or control "
                             "characters: a ~/.ssh/config alias, user@host or "
                             "ssh://user@host:port")
        return host

    @model_validator(mode="after")
    def _needed_fields(self) -> RunsOn:
        if self.kind is RunnerKind.DASK and not self.resource:
            raise ValueError("`kind: dask` needs `resource:` (the worker's resource tag)")
        if self.kind is RunnerKind.SSH and not self.host:
            raise ValueError("`kind: ssh` needs `host:` (an ssh destination)")
        if self.kind is RunnerKind.EMULATED and not self.arch:
            raise ValueError("`kind: emulated` needs `arch:` (aarch64)")
        if self.kind is not RunnerKind.EMULATED and (self.arch or self.cpu):
            raise ValueError("`arch:` and `cpu:` are for `kind: emulated`")
        return self

    @model_serializer(mode="wrap")
    def _emulation_only_when_set(self, handler: SerializerFunctionWrapHandler) -> Any:
        """`arch` and `cpu` are written only where set: every other target's stage keys
        stay what they were before emulated boards, and an SSH board running an older
        edgebuild (whose RunsOn forbids unknown keys) still reads the task."""
        data = handler(self)
        if isinstance(data, dict):
            for key in ("arch", "cpu"):
                if data.get(key) is None:
                    data.pop(key, None)
        return data


class Device(Strict):
    kind: str = Field(description="cpu, gpu, npu or dsp.", pattern="^(cpu|gpu|npu|dsp)$")
    arch: str = Field(description="Instruction set: x86_64, aarch64, ...")
    os: str = Field("linux", description="linux, android, ios or macos.")
    name: str = Field(description="Human name of the hardware.")


class TargetProfile(Strict):
    """A kind of hardware and how edgebuild builds for it and measures on it."""

    name: str = Field(description="Profile name; must match the file name.")
    description: str
    backend: str = Field(description="Backend that compiles for this target (`edgebuild targets`).")
    device: Device
    precision: Precision = Field(Precision.FP32, description="Default precision of the build.")
    options: dict[str, Any] = Field(
        default_factory=dict, description="Backend options; see docs/backends.md."
    )
    runs_on: RunsOn = Field(default_factory=RunsOn)
    measure: MeasureSettings = Field(default_factory=MeasureSettings)

    @model_validator(mode="after")
    def _emulates_its_device(self) -> TargetProfile:
        if self.runs_on.kind is RunnerKind.EMULATED and self.runs_on.arch != self.device.arch:
            raise ValueError(f"runs_on.arch {self.runs_on.arch!r} is not the device's arch "
                             f"{self.device.arch!r}: an emulated board runs the device's "
                             "instruction set")
        return self
