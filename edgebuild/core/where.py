"""Where a stage runs: this build host, or its target's device.

A shared word, in core because three layers use it: a backend declares it
(`backends/declaration.py: Placement`), the planner writes it on each stage
(`plan/stage.py: Stage.runs_on`) and the scheduler reads it (`execute/scheduler.py`).
"""

from __future__ import annotations

from enum import StrEnum


class Where(StrEnum):
    """This build host, or the target's own device (which may be this host:
    `runs_on: {kind: host}`; the target's `runs_on` says how it is reached)."""

    HOST = "host"
    DEVICE = "device"
