"""The conditions a latency figure was measured under: CPU, threads, load."""

from __future__ import annotations

import os
import platform
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
