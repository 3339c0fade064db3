"""Whether a missed latency budget can be blamed on a loaded machine (`on_noisy: undecided`).

The judge is the 1-minute load average the measure-latency stage records before
and after timing (`conditions.load_average`, `load_average_after`): the larger of
the two, per core. Before says what was running as timing started, after what
ran while it did (weighted by the minute's decay). It lags by tens of seconds and
counts the measuring threads too (at most threads x (1 - e^(-t/60)) for t seconds
of timing: ~0.03 a thread for the default 2 s), so it is a coarse signal; it only
ever turns a *missed* budget into "undecided", never a met one into anything.
The stage's own busy-CPU check (measure.max_busy_share) is the sharp one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MachineLoad:
    load: float  # 1-minute load average, the larger of before and after timing
    cores: int

    @property
    def per_core(self) -> float:
        return self.load / self.cores

    def sentence(self) -> str:
        return f"load {self.load:.1f} on {self.cores} core{'s' if self.cores > 1 else ''}"

    def to_json(self) -> dict[str, float]:
        return {"load": self.load, "cores": self.cores, "per_core": round(self.per_core, 3)}


def machine_load(conditions: dict[str, Any]) -> MachineLoad | None:
    """The load the figure was timed under; None when it was not recorded (no
    getloadavg on the measuring machine, a device's own tool)."""
    cores = conditions.get("cores")
    ones = [float(values[0]) for values in (conditions.get("load_average"),
                                            conditions.get("load_average_after"))
            if isinstance(values, list | tuple) and values]
    if not ones or not isinstance(cores, int) or cores < 1:
        return None
    return MachineLoad(max(ones), cores)


def too_noisy(conditions: dict[str, Any], max_load: float) -> MachineLoad | None:
    """The load, when its share per core exceeded `max_load`; else None."""
    load = machine_load(conditions)
    return load if load is not None and load.per_core > max_load else None
