"""Whether a missed latency budget can be blamed on a loaded machine (`on_noisy: undecided`).

Two signals are recorded by measure-latency (`conditions`):

- the 1-minute load average before and after timing (`load_average`,
  `load_average_after`): the larger of the two. It lags by tens of seconds and
  counts the measuring threads too, so it is coarse;
- the share of all cores other processes used *while* timing
  (`others_busy_share`, from /proc/stat): precise, where it exists.

A missed budget is only *undecided* when the machine was loaded (load per core
over `max_load`, or others over `NOISY_SHARE` of the CPU) **and** the load could
explain the miss. How much can load slow a CPU-bound measurement? With N other
runnable tasks and our T threads on C cores, a fair scheduler gives our threads
C·T/(N + T) cores' worth of CPU instead of T, so the timing stretches by at most

    contention = max(1, (N + T) / C)

N is estimated from both signals, taking the larger (the generous reading):
the load average itself (counting our own threads as foreign too), and the CPU
share s others took while we ran: under fair sharing s = N / (N + T), so
N = s·T / (1 − s) (and at least s·C). Shared caches, memory bandwidth, SMT
siblings and clock changes can cost more than the CPU share says, so

    plausible slowdown = min(MAX_SLOWDOWN, HEADROOM × contention)

and a tail percentile (above p50) may also have waited once behind every other
runnable task's time slice: + ceil(N) × SLICE_MS. A miss is noise-explainable
when the percentile's 95 % lower bound (the point value without one) is at most
budget × slowdown + that allowance, and the fastest run is at most budget ×
slowdown (it waited behind no slice, so the allowance cannot cover it).
Anything beyond is a **failure** at any load: a budget missed 3.5 million
times over is a regression, not a busy browser. benchmarks/noisy_latency.py
measures the false-alarm and false-pass rates of this rule (docs/performance.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

NOISY_SHARE = 0.25  # others' share of all cores past which a figure is not a quiet one
HEADROOM = 2.0  # what caches, memory bandwidth and SMT add to a fair-share slowdown
MAX_SLOWDOWN = 10.0  # no load explains a miss by more than this
SLICE_MS = 3.0  # a scheduler time slice a tail run may wait behind, per other task
_MAX_SHARE = 0.95  # s -> 1 would mean infinitely many others; the cap bounds N


@dataclass(frozen=True)
class MachineLoad:
    load: float | None  # 1-minute load average, the larger of before and after timing
    cores: int
    threads: int = 0  # the timing's threads (0: not recorded; the cores then)
    busy_share: float | None = None  # others' share of all cores while timing

    @property
    def per_core(self) -> float:
        return (self.load or 0.0) / self.cores

    @property
    def others(self) -> float:
        """N, the estimated number of other runnable tasks (module docstring)."""
        threads = self.threads or self.cores
        from_load = self.load or 0.0
        share = min(self.busy_share or 0.0, _MAX_SHARE)
        from_share = max(share * self.cores, share * threads / (1.0 - share))
        return max(from_load, from_share)

    @property
    def contention(self) -> float:
        return max(1.0, (self.others + (self.threads or self.cores)) / self.cores)

    @property
    def slowdown(self) -> float:
        """The largest slowdown this load plausibly explains."""
        return min(MAX_SLOWDOWN, HEADROOM * self.contention)

    def allowance_ms(self, percentile: float) -> float:
        """What a tail run may add by waiting behind every other task's slice once."""
        return math.ceil(self.others) * SLICE_MS if percentile > 50 else 0.0

    def explains(self, lower_ms: float, budget_ms: float, percentile: float,
                 fastest_ms: float | None = None) -> bool:
        """Whether this load could have pushed a figure within the budget up to `lower_ms`.

        `fastest_ms`, the fastest timed run, is asked first: it waited behind no other
        task's time slice (else another run would be faster), so only the fair-share
        slowdown can have stretched it, never the tail allowance. A fastest run over
        budget × slowdown proves the percentile missed on a quiet machine too (a
        percentile is never below the minimum): a sub-millisecond model against a
        budget of 1e-6 ms fails under any load, although one slice would cover its p90.
        """
        if fastest_ms is not None and fastest_ms > budget_ms * self.slowdown:
            return False
        return lower_ms <= budget_ms * self.slowdown + self.allowance_ms(percentile)

    def sentence(self) -> str:
        parts = []
        if self.load is not None:
            parts.append(f"load {self.load:.1f} on {self.cores} "
                         f"core{'s' if self.cores > 1 else ''}")
        if self.busy_share is not None and (self.load is None
                                            or self.busy_share > NOISY_SHARE):
            parts.append(f"other processes used {self.busy_share:.0%} of the CPU")
        return ", ".join(parts)

    def to_json(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {"load": self.load, "cores": self.cores,
                                        "per_core": round(self.per_core, 3)}
        if self.busy_share is not None:
            out["others_busy_share"] = round(self.busy_share, 3)
        out["explains_up_to"] = round(self.slowdown, 2)
        return out


def machine_load(conditions: dict[str, Any]) -> MachineLoad | None:
    """The load the figure was timed under; None when it was not recorded (no
    getloadavg or /proc/stat on the measuring machine, a device's own tool)."""
    cores = conditions.get("cores")
    ones = [float(values[0]) for values in (conditions.get("load_average"),
                                            conditions.get("load_average_after"))
            if isinstance(values, list | tuple) and values]
    share = conditions.get("others_busy_share")
    share = float(share) if isinstance(share, int | float) else None
    if (not ones and share is None) or not isinstance(cores, int) or cores < 1:
        return None
    threads = conditions.get("threads")
    return MachineLoad(max(ones) if ones else None, cores,
                       threads if isinstance(threads, int) and threads > 0 else 0, share)


def too_noisy(conditions: dict[str, Any], max_load: float) -> MachineLoad | None:
    """The load, when its share per core exceeded `max_load` or other processes took
    more than NOISY_SHARE of the CPU while timing; else None."""
    load = machine_load(conditions)
    if load is None:
        return None
    busy = load.busy_share is not None and load.busy_share > NOISY_SHARE
    return load if load.per_core > max_load or busy else None


def beyond_noise(load: MachineLoad, lowest_ms: float, budget_ms: float,
                 fastest_ms: float | None = None) -> str:
    """Why a miss is a failure however loaded the machine was (`fastest_ms`: the
    fastest run, named when it is what proves the miss)."""
    proof = lowest_ms
    said = ""
    if fastest_ms is not None and fastest_ms > budget_ms * load.slowdown:
        proof, said = fastest_ms, f"even the fastest run ({fastest_ms:.3g} ms) is "
    ratio = proof / budget_ms
    times = f"{float(f'{ratio:.3g}'):,.0f}" if ratio >= 100 else f"{ratio:.3g}"
    return (f"{said}{times}× the budget, more than the {load.slowdown:.1f}× that load "
            f"({load.sentence()}) can explain "
            "(docs/gates.md#a-budget-missed-on-a-loaded-machine-on_noisy)")


def untrusted(conditions: dict[str, Any]) -> str:
    """Why a figure timed under these conditions must not be cached ('' if it may).

    Whatever the gate's settings (`max_busy_share: null`, `on_noisy: fail`): a figure
    others took more than NOISY_SHARE of the CPU from times them, and a cached one would
    be judged again on every later run, quiet or not. The busy share decides where it
    was recorded (it is precise and immediate); otherwise the load average per core
    over 1.0 does (it lags, so it decides only when there is nothing better).
    """
    load = machine_load(conditions)
    if load is None:
        return ""
    if load.busy_share is not None:
        if load.busy_share > NOISY_SHARE:
            return (f"other processes used {load.busy_share:.0%} of the CPU while timing "
                    f"(over {NOISY_SHARE:.0%})")
        return ""
    if load.per_core > 1.0:
        return f"{load.sentence()} while timing (over 1.0 a core)"
    return ""
