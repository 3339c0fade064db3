"""cache/memo.py: a pure function's result kept by its inputs' digest, typed on reading,
never trusted when it does not read, and kept only when it reads back equal."""

from __future__ import annotations

import os
import time
from pathlib import Path

from edgebuild.cache.memo import Memo, clean_memo, remembered
from edgebuild.fidelity.judgement import Judgement

JUDGED = Judgement(False, "on 26 samples of 'photos': cosine 0.99", {"cosine": 0.99},
                   {"min_cosine": 0.995}, ["cosine 0.99 < 0.995"],
                   {"flips": [{"sample": 3, "margin": 0.14}], "where": ""})


def counting(value: object) -> tuple[list[int], object]:
    calls: list[int] = []

    def compute() -> object:
        calls.append(1)
        return value
    return calls, compute


def test_a_judgement_is_computed_once_then_read_back_equal(tmp_path: Path) -> None:
    calls, compute = counting(JUDGED)
    inputs = {"build": {"outputs.npz": "a" * 64}, "gate": {"min_cosine": 0.995}}
    first = remembered(tmp_path, "judgements", Judgement, compute, inputs)
    again = remembered(tmp_path, "judgements", Judgement, compute, inputs)
    assert first == again == JUDGED and again is not JUDGED
    assert isinstance(again, Judgement) and not again
    assert len(calls) == 1
    # Other inputs (another build's outputs) are another key.
    remembered(tmp_path, "judgements", Judgement, compute, {**inputs, "build": {}})
    assert len(calls) == 2


def test_without_a_cache_folder_it_simply_computes(tmp_path: Path) -> None:
    calls, compute = counting([1.5, 2.0])
    for _ in range(2):
        assert remembered(None, "latency-samples", list[float], compute, {"x": 1}) == [1.5, 2.0]
    assert len(calls) == 2


def test_a_value_json_cannot_carry_exactly_is_not_kept(tmp_path: Path) -> None:
    """A tuple reads back as a list, an int key as a string, NaN as null: recomputed each
    time rather than returned changed."""
    for value in (Judgement(True, "m", details={"ci95": (1.0, 2.0)}),
                  Judgement(True, "m", details={3: "flip"}),
                  Judgement(True, "m", measured={"cosine": float("nan")})):
        memo: Memo[Judgement] = Memo(tmp_path, "judgements", Judgement)
        key = memo.key({"v": repr(value)})
        memo.put(key, value)
        assert memo.get(key) is None


def test_a_record_that_does_not_read_is_recomputed(tmp_path: Path) -> None:
    memo: Memo[Judgement] = Memo(tmp_path, "judgements", Judgement)
    key = memo.key({"v": 1})
    memo.put(key, JUDGED)
    record = next((tmp_path / "memo" / "judgements").glob("*/*.json"))
    for damaged in (b"{not json", b'{"passed": "maybe"}', b"[]"):
        record.write_bytes(damaged)
        assert memo.get(key) is None
    calls, compute = counting(JUDGED)
    assert remembered(tmp_path, "judgements", Judgement, compute, {"v": 1}) == JUDGED
    assert calls == [1]


def test_cache_clean_removes_old_records(tmp_path: Path) -> None:
    memo: Memo[list[float]] = Memo(tmp_path, "latency-samples", list[float])
    old, new = memo.key({"v": "old"}), memo.key({"v": "new"})
    memo.put(old, [1.0])
    memo.put(new, [2.0])
    stale = next(p for p in (tmp_path / "memo").rglob("*.json") if p.stem == old)
    os.utime(stale, (time.time() - 10 * 86400,) * 2)
    assert clean_memo(tmp_path, time.time() - 86400) == 1
    assert memo.get(old) is None and memo.get(new) == [2.0]
