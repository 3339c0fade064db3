"""The reference stage evaluates BATCH samples a call where the model takes a batch axis,
and falls back to one sample a call where it does not (data/stream.evaluate_batched)."""

from __future__ import annotations

import numpy as np

from edgebuild.data.loaders import Samples
from edgebuild.data.stream import BATCH, evaluate, evaluate_batched


def samples(count: int) -> Samples:
    x = np.arange(count * 3, dtype=np.float32).reshape(count, 3)
    return Samples({"x": x}, None, [str(i) for i in range(count)])


def test_batched_rows_equal_one_sample_a_call_with_fewer_calls() -> None:
    calls: list[int] = []

    def infer(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        calls.append(len(feeds["x"]))
        return {"y": feeds["x"] * 2.0, "top": feeds["x"].argmax(axis=1)}

    data = samples(2 * BATCH + 5)
    batched = evaluate_batched(data, infer, batch_axis=True)
    calls.clear()
    single = evaluate(data, [], infer)
    assert len(batched) == len(single) == 2 * BATCH + 5
    for a, b in zip(batched, single, strict=True):
        assert a.keys() == b.keys()
        assert all(np.array_equal(a[k], b[k]) and a[k].shape == b[k].shape for k in a)
    assert len(calls) == 2 * BATCH + 5  # one sample a call without the batch axis


def test_outputs_without_a_sample_axis_are_evaluated_one_sample_a_call() -> None:
    """A detector's boxes ([k, 4], k the boxes found) have no sample axis: splitting a
    batch's boxes into rows would be wrong, so nothing is batched."""
    def boxes(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"boxes": np.ones((len(feeds["x"]) + 2, 4), np.float32)}

    rows = evaluate_batched(samples(40), boxes, batch_axis=True)
    assert [r["boxes"].shape for r in rows] == [(3, 4)] * 40


def test_a_model_that_mixes_the_rows_of_a_batch_is_not_batched() -> None:
    def mixes(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = feeds["x"]
        return {"y": x - x.mean(axis=0, keepdims=True)}  # depends on the other rows

    data = samples(40)
    assert all(np.array_equal(a["y"], b["y"]) for a, b in zip(
        evaluate_batched(data, mixes, batch_axis=True), evaluate(data, [], mixes),
        strict=True))


def test_a_model_that_refuses_a_batch_is_evaluated_one_sample_a_call() -> None:
    def fixed(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if len(feeds["x"]) != 1:
            raise ValueError("Got invalid dimensions for input: x")
        return {"y": feeds["x"] + 1}

    rows = evaluate_batched(samples(40), fixed, batch_axis=True)
    assert len(rows) == 40 and rows[39]["y"].tolist() == [[118.0, 119.0, 120.0]]
