"""Seeded model inputs of the declared shapes and dtypes (latency runs, exports, captures).

In core because the passes and the gates both need them, and they need nothing but numpy.
"""

from __future__ import annotations

from typing import Any


def sample_inputs(tensors: list[dict[str, Any]], seed: int, count: int,
                  shapes: dict[str, list[int]] | None = None) -> list[dict[str, Any]]:
    """Seeded inputs of the declared shapes and dtypes, as numpy arrays; `shapes` (a
    shape profile, input -> shape) replaces the declared shapes.

    An input that declares `value` takes it everywhere (a sample rate selecting a
    branch, a recurrent state's first step); one that declares `value_range` is drawn
    uniformly from it; otherwise integers are drawn from 0..9 and floats are standard
    normal.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        feeds = {}
        for t in tensors:
            shape = list((shapes or {}).get(t["name"], t["shape"]))
            feeds[t["name"]] = _generated(t, shape, rng)
        out.append(feeds)
    return out


def _generated(tensor: dict[str, Any], shape: list[int], rng: Any) -> Any:
    import numpy as np

    dtype = tensor["dtype"]
    if tensor.get("value") is not None:
        return np.full(shape, tensor["value"], dtype=dtype)
    floating = dtype.startswith("float")
    drawn = tensor.get("value_range")
    if drawn is not None and floating:
        return np.asarray(rng.uniform(drawn[0], drawn[1], shape), dtype=dtype)
    if drawn is not None:
        low, high = drawn
        return np.asarray(rng.integers(int(low), int(high), shape, endpoint=True), dtype=dtype)
    if floating:
        return np.asarray(rng.standard_normal(shape), dtype=dtype)
    return np.asarray(rng.integers(0, 10, shape), dtype=dtype)
