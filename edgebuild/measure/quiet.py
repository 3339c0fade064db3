"""Waiting, bounded, for the machine to quieten before a figure is given up on.

A latency timed while other processes take the CPU times them. Rather than
declare such a figure unmeasurable at once (a newcomer's first `make
quickstart` failed because a browser was open), the measuring stage waits for
the machine to quieten, checking the CPU other processes use once a second,
and times again. The wait is bounded **per run**: the driver hands every
measuring stage one ledger file (`EDGEBUILD_QUIET_LEDGER`) recording how long
the run has already waited, so a machine that stays busy costs at most
RUN_BUDGET_S in all, not that much per target; the measuring stages on this
machine run one at a time (the scheduler gives each every slot), so the ledger
needs no lock. A stage without a ledger (a Dask worker, a direct call) may wait
STAGE_BUDGET_S. `EDGEBUILD_QUIET_WAIT_S` sets either (0: give up at once).

What it says goes to the stage's log and, when the run shows progress, to the
terminal the run was started from (`EDGEBUILD_CONSOLE`, set by the driver).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from edgebuild.measure.conditions import CpuMeter

LEDGER_ENV = "EDGEBUILD_QUIET_LEDGER"
WAIT_ENV = "EDGEBUILD_QUIET_WAIT_S"  # overrides the budget, in seconds (0: never wait)
CONSOLE_ENV = "EDGEBUILD_CONSOLE"
RUN_BUDGET_S = 90.0  # the longest a whole run waits for quiet, all stages together
STAGE_BUDGET_S = 60.0  # without a run's ledger
CHECK_S = 1.0  # one look at the CPU others use


class WaitBudget:
    """Seconds a run may still wait for quiet: a ledger file shared by its stages."""

    def __init__(self, ledger: Path | None, budget_s: float) -> None:
        self.ledger = ledger
        self.budget_s = budget_s
        self._own = 0.0  # waited by this object, when there is no ledger

    @classmethod
    def from_env(cls) -> WaitBudget:
        path = os.environ.get(LEDGER_ENV)
        default = RUN_BUDGET_S if path else STAGE_BUDGET_S
        try:
            budget = max(0.0, float(os.environ.get(WAIT_ENV, default)))
        except ValueError:
            budget = default
        return cls(Path(path) if path else None, budget)

    @staticmethod
    def create(ledger: Path) -> None:
        """Start a run's ledger (the driver, before executing)."""
        ledger.parent.mkdir(parents=True, exist_ok=True)
        ledger.write_text(json.dumps({"waited_s": 0.0}))

    def waited(self) -> float:
        if self.ledger is None:
            return self._own
        try:
            return float(json.loads(self.ledger.read_text())["waited_s"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0.0

    def remaining(self) -> float:
        return max(0.0, self.budget_s - self.waited())

    def spend(self, seconds: float) -> None:
        if self.ledger is None:
            self._own += seconds
            return
        tmp = self.ledger.with_name(f".{self.ledger.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"waited_s": self.waited() + seconds}))
        tmp.replace(self.ledger)


def say(text: str) -> None:
    """A line for the person waiting: the stage's log, and their terminal if known."""
    print(text, file=sys.stderr, flush=True)
    console = os.environ.get(CONSOLE_ENV)
    if console:
        try:
            with Path(console).open("a") as handle:
                handle.write(text + "\n")
        except OSError:
            pass  # the run's terminal is gone or not reopenable: the log has it


def others_share(seconds: float = CHECK_S) -> float | None:
    """The share of all cores other processes used over the next `seconds`."""
    meter = CpuMeter.start()
    time.sleep(seconds)
    return meter.others_share() if meter is not None else None


def wait_for_quiet(limit: float, budget: WaitBudget, what: str,
                   look: Callable[[], float | None] = others_share) -> float | None:
    """Wait until other processes use at most `limit` of the CPU (one look at least,
    then as long as the budget allows); the share at the last look (None: unknown)."""
    started = time.monotonic()
    share = look()
    told = False
    while share is not None and share > limit and \
            budget.remaining() - (time.monotonic() - started) > 0:
        if not told:
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            say(f"waiting for the machine to quieten (load {load:.1f} on "
                f"{os.cpu_count()} cores; other processes use {share:.0%} of the CPU) "
                f"before timing {what}, up to "
                f"{budget.remaining() - (time.monotonic() - started):.0f} s…")
            told = True
        share = look()
    spent = time.monotonic() - started
    budget.spend(spent)
    if told:
        quiet = share is None or share <= limit
        say(f"{'quiet' if quiet else 'still busy'} after {spent:.0f} s "
            f"({'timing' if quiet else 'timing once more'} {what})")
    return share
