"""The latency protocol: one loop for one artifact or several timed against each other.

Warm-up runs are discarded; then the loop runs *rounds*. In each round every
artifact is timed for one block of BLOCK consecutive runs, and who goes first
rotates from round to round::

    round 1:  A A A … | B B B … | C C C …
    round 2:  B B B … | C C C … | A A A …

It stops when every artifact has `min_iterations` runs, at least `min_rounds`
rounds are done and `min_seconds` per artifact have passed, or at
`max_iterations` runs each. For one artifact (the latency gate) the blocks are
simply its samples in time order; for several (`run --baseline`, a search's
`select`) a block is the unit of the paired statistics in gates/regression.py:
the members of a round share the machine's state, so drift cancels in their
ratio. On a shared machine, numbers from separate runs compare two machine
states as much as two models; that is why comparisons use this loop, never two
separate measurements.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from edgebuild.core.profile import MeasureSettings

if TYPE_CHECKING:
    import numpy as np

BLOCK = 10  # runs per block: short enough to share a machine state, long enough for a median
PAIRED_MIN_ROUNDS = 8  # fewer paired rounds cannot support a bootstrap interval
SETTLE_S = 0.05  # a runtime's worker threads spin for tens of ms after a run


def time_blocks(runs: list[Callable[[], Any]], settings: MeasureSettings,
                min_rounds: int | None = None) -> np.ndarray:
    """Milliseconds per run, shaped (artifacts × rounds × BLOCK).

    `min_rounds` defaults to what `min_iterations` needs alone for one artifact and
    to PAIRED_MIN_ROUNDS for a comparison.
    """
    import numpy as np

    count = len(runs)
    for run in runs:
        for _ in range(settings.warmup_iterations):
            run()
    needed = -(-settings.min_iterations // BLOCK)
    if min_rounds is None:
        min_rounds = needed if count == 1 else max(PAIRED_MIN_ROUNDS, needed)
    max_rounds = max(min_rounds, needed, settings.max_iterations // BLOCK)
    timed: list[list[list[float]]] = [[] for _ in runs]
    started = time.perf_counter()
    for round_index in range(max_rounds):
        for offset in range(count):
            which = (round_index + offset) % count
            if count > 1:
                # Let the previous runtime's threads go idle, so one model's spinning
                # threads do not slow the other's block.
                time.sleep(SETTLE_S)
            block = []
            for _ in range(BLOCK):
                t0 = time.perf_counter_ns()
                runs[which]()
                block.append((time.perf_counter_ns() - t0) / 1e6)
            timed[which].append(block)
        rounds = round_index + 1
        if rounds >= max(min_rounds, needed) and \
                time.perf_counter() - started >= settings.min_seconds * count:
            break
    return np.asarray(timed)


def time_one(run: Callable[[], Any], settings: MeasureSettings) -> np.ndarray:
    """The samples of one artifact, in time order (ms)."""
    return time_blocks([run], settings).reshape(-1)


def time_pair(baseline: Callable[[], Any], candidate: Callable[[], Any],
              settings: MeasureSettings) -> tuple[np.ndarray, np.ndarray]:
    """Two artifacts timed against each other: two (rounds × BLOCK) arrays."""
    blocks = time_blocks([baseline, candidate], settings)
    return blocks[0], blocks[1]
