"""The one table of accuracy limits (fidelity/limits.py): what each gate key bounds, from
which side, how a measured value meets it and how much room it leaves."""

from __future__ import annotations

import math

import pytest

from edgebuild.fidelity.judgement import Judgement
from edgebuild.fidelity.limits import LIMITS, Limit
from edgebuild.recipe.accuracy import (
    CLASS_LIMITS,
    DETECTION_KEYS,
    DETECTION_LIMITS,
    SELECTION_KEYS,
    SEQUENCE_LIMITS,
    VALUE_LIMITS,
    AccuracyGate,
)

COSINE = LIMITS["min_cosine"]
ERROR = LIMITS["max_relative_error"]


def test_every_limit_of_the_gate_schema_has_exactly_one_entry() -> None:
    # Every key of the gate is what it compares (selection, detection outputs) or a limit.
    limits = [k for k in AccuracyGate.model_fields if k not in (*SELECTION_KEYS, *DETECTION_KEYS)]
    assert sorted(limits) == sorted(LIMITS)
    assert sorted({*CLASS_LIMITS, *VALUE_LIMITS, *SEQUENCE_LIMITS, *DETECTION_LIMITS}) \
        == sorted(LIMITS)
    metrics = [limit.metric for limit in LIMITS.values()]
    assert len(set(metrics)) == len(metrics), "two keys bound one metric"
    for key, limit in LIMITS.items():
        assert key.startswith("min_" if limit.at_least else "max_"), key


def test_an_at_least_limit_is_met_at_or_above_it() -> None:
    assert COSINE.met(0.995, 0.995) and COSINE.met(0.999, 0.995)
    assert not COSINE.met(0.99, 0.995)
    assert COSINE.missed(0.99, 0.995) == "cosine 0.99 < 0.995"


def test_an_at_most_limit_is_met_at_or_below_it() -> None:
    assert ERROR.met(0.1, 0.1) and ERROR.met(0.0, 0.1)
    assert not ERROR.met(0.2, 0.1)
    assert ERROR.missed(0.2, 0.1) == "relative_error 0.2 > 0.1"


@pytest.mark.parametrize("limit", [COSINE, ERROR, LIMITS["min_psnr"]])
def test_a_value_not_measured_or_nan_never_meets_a_limit(limit: Limit) -> None:
    for value in (None, math.nan):
        assert not limit.met(value, 0.5)
        assert limit.headroom(value, 0.5) == float("-inf")


def test_headroom_puts_every_limit_on_one_scale() -> None:
    # 1 is the best the metric can be, 0 the limit, -1 twice the allowed error
    assert COSINE.headroom(1.0, 0.995) == pytest.approx(1.0)
    assert COSINE.headroom(0.9975, 0.995) == pytest.approx(0.5)
    assert COSINE.headroom(0.995, 0.995) == pytest.approx(0.0)
    assert COSINE.headroom(0.990, 0.995) == pytest.approx(-1.0)
    agreement = LIMITS["min_decided_agreement"]
    assert agreement.best == 100.0
    assert agreement.headroom(95.0, 99.0) == pytest.approx(-4.0)
    # an at-most limit's best is 0
    assert ERROR.best == 0.0
    assert ERROR.headroom(0.05, 0.1) == pytest.approx(0.5)
    assert ERROR.headroom(0.3, 0.1) == pytest.approx(-2.0)
    assert LIMITS["max_abs_error"].headroom(0.0, 0.0) == 0.0  # a zero limit: no division by 0


def test_a_percent_metric_is_best_at_100_and_psnr_has_no_best() -> None:
    for key in ("min_decision_agreement", "min_region_recall", "min_region_iou",
                "min_sequence_match", "min_sequence_match_labels"):
        assert LIMITS[key].headroom(100.0, 95.0) == pytest.approx(1.0), key
    psnr = LIMITS["min_psnr"]
    assert psnr.best is None
    assert psnr.headroom(60.0, 40.0) == pytest.approx(0.5)  # against twice the limit


def test_a_judgement_s_headroom_is_its_smallest_and_unmeasured_fails() -> None:
    limits = {"min_cosine": 0.995, "min_decided_agreement": 99.0}

    def judged(**measured: float) -> Judgement:
        return Judgement(False, "", measured, limits)

    assert judged(cosine=0.990, decided_agreement=100.0).headroom == pytest.approx(-1.0)
    assert judged(cosine=1.0, decided_agreement=95.0).headroom == pytest.approx(-4.0)
    assert judged(cosine=0.9975, decided_agreement=100.0).headroom == pytest.approx(0.5)
    assert judged(cosine=1.0).headroom == float("-inf"), "unmeasured fails"
    assert Judgement(False, "cannot compare").headroom == float("-inf")
