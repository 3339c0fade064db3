"""Target profiles: one YAML file per kind of hardware (the models live in core/profile.py)."""

from edgebuild.core.profile import Device, RunnerKind, RunsOn, TargetProfile

__all__ = ["Device", "RunnerKind", "RunsOn", "TargetProfile"]
