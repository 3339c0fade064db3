"""Target: the resolved hardware profile one target-specific stage builds for.

A typed value (a profile with the recipe's overrides applied), never a dict read
by string keys; it is serialised into a worker's stage spec with
`model_dump(mode="json")` and read back with `model_validate`.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict

from edgebuild.core.profile import MeasureSettings, RunnerKind, RunsOn, TargetProfile

# Set by a Dask worker for the stages it runs: its resource tags, comma-separated.
# A target `runs_on: {kind: dask, resource: R}` runs *here* on a worker holding R.
WORKER_RESOURCES_ENV = "EDGEBUILD_WORKER_RESOURCES"


def ssh_tag(host: str) -> str:
    """The resource an SSH host's stage process holds (in WORKER_RESOURCES_ENV)."""
    return f"ssh:{host}"


def emulated_tag(arch: str) -> str:
    """The resource an emulated board's stage process holds (execute/remote/emulated.py)."""
    return f"emulated:{arch}"


def worker_resources() -> set[str]:
    return {r for r in os.environ.get(WORKER_RESOURCES_ENV, "").split(",") if r}


class Target(BaseModel):
    """A recipe target (or search candidate, `name[candidate]`) and its resolved profile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    profile: TargetProfile

    @property
    def backend(self) -> str:
        return self.profile.backend

    @property
    def options(self) -> dict[str, Any]:
        """The backend options, unvalidated: the backend's `Options` model checks them."""
        return dict(self.profile.options)

    @property
    def measure(self) -> MeasureSettings:
        return self.profile.measure

    @property
    def runs_on(self) -> RunsOn:
        return self.profile.runs_on

    def phone_serial(self, option: str | None = None) -> str | None:
        """The adb serial of this target's phone: `runs_on.serial`, the one place a device
        is named, else a backend's deprecated `device_serial` option (the loader refuses
        the two naming different phones); None: the only phone attached."""
        return self.runs_on.serial or option

    @property
    def runs_here(self) -> bool:
        """Whether this process is on the target's device: the build host for `host`,
        a Dask worker holding the target's resource tag for `dask`, the SSH host's
        stage process for `ssh` (execute/remote/ssh.py), the emulated board's for
        `emulated` (execute/remote/emulated.py)."""
        kind, held = self.runs_on.kind, worker_resources()
        return kind is RunnerKind.HOST or (
            kind is RunnerKind.DASK and self.runs_on.resource in held) or (
            kind is RunnerKind.SSH and ssh_tag(str(self.runs_on.host)) in held) or (
            kind is RunnerKind.EMULATED and emulated_tag(str(self.runs_on.arch)) in held)

    def emulated_reason(self, purpose: str) -> str:
        """Why an emulated board cannot measure `purpose` ('' for accuracy: its kernels are
        the device's, its numerics real); what it times is the emulator, never the device."""
        if self.runs_on.kind is not RunnerKind.EMULATED or purpose != "latency":
            return ""
        cpu = f" -cpu {self.runs_on.cpu}" if self.runs_on.cpu else ""
        return (f"not measurable here: on emulated {self.runs_on.arch} (qemu-user{cpu}) time "
                f"and memory are the emulator's, not the {self.profile.device.name}'s; "
                "accuracy there runs the device's kernels")

    def digest_data(self) -> dict[str, Any]:
        """The profile as plain data: what enters a target-specific stage's key."""
        return self.profile.model_dump(mode="json")

    def variant(self, name: str, options: dict[str, Any] | None = None,
                measure: MeasureSettings | None = None) -> Target:
        """This target with other backend options or measurement settings (a candidate)."""
        update: dict[str, Any] = {}
        if options is not None:
            update["options"] = {**self.profile.options, **options}
        if measure is not None:
            update["measure"] = measure
        return Target(name=name, profile=self.profile.model_copy(update=update))
