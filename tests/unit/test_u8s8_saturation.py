"""reduce_range auto's overflow count: the bound that skips most weight pairs must count
exactly what summing every pair counts."""

from __future__ import annotations

import numpy as np
import pytest

from edgebuild.quant.qdq_graph import INT16, _pair_overflow


def every_pair(columns: np.ndarray, rows: np.ndarray) -> float:
    """The definition: every adjacent-pair sum of every column with every row."""
    k = rows.shape[1] - rows.shape[1] % 2
    sums = columns[:, None, 0:k:2] * rows[None, :, 0:k:2] + \
        columns[:, None, 1:k:2] * rows[None, :, 1:k:2]
    return int(np.count_nonzero((sums < INT16[0]) | (sums > INT16[1]))) / sums.size


@pytest.mark.parametrize("seed", range(6))
def test_the_bound_counts_what_every_pair_counts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 40))  # odd K too: the last element has no pair
    columns = rng.integers(0, 256, (300, k)).astype(np.int32)
    rows = rng.integers(-128, 128, (17, k)).astype(np.int32)
    rows[rng.random(rows.shape) < 0.5] //= 4  # a mix of small and large weights
    expected = every_pair(columns, rows)
    assert _pair_overflow(columns, rows, chunk=64) == expected
    assert _pair_overflow(columns, rows) == expected


def test_pairs_that_cannot_overflow_count_in_the_total() -> None:
    columns = np.full((4, 4), 255, np.int32)
    rows = np.array([[127, 127, 1, 1], [-128, -128, 0, 0]], np.int32)
    # Row 0: pair (127, 127) overflows up, (1, 1) not; row 1: (-128, -128) down, (0, 0) not.
    assert _pair_overflow(columns, rows) == every_pair(columns, rows) == 0.5
    assert _pair_overflow(np.zeros((3, 4), np.int32), rows) == 0.0
