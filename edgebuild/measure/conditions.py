"""The conditions a latency figure was measured under: CPU, threads, load."""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def conditions(threads: int | None) -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": threads,
        "machine": platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


@dataclass(frozen=True)
class CpuMeter:
    """How busy the rest of the machine was while this process timed something.

    The load average lags by a minute and counts our own threads; this reads the
    machine's busy CPU seconds from /proc/stat (steal included: a hypervisor's
    other guests slow us just the same) and subtracts this process's own.
    """

    wall: float
    busy: float
    own: float

    @classmethod
    def start(cls) -> CpuMeter | None:
        """None where /proc/stat cannot be read (not Linux): nothing to judge by."""
        try:
            fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        except OSError:
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
        busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
        return cls(time.monotonic(), busy, time.process_time())

    def others_share(self) -> float | None:
        """Share of all cores that other processes (or the hypervisor) used since start."""
        end = CpuMeter.start()
        if end is None or end.wall <= self.wall:
            return None
        used = (end.busy - self.busy) - (end.own - self.own)
        return max(0.0, used / ((end.wall - self.wall) * (os.cpu_count() or 1)))
