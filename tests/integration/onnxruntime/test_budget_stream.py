"""A fidelity budget judged on a stream (issue 40, items 6 and 7): validate accepts a
streamed dataset as a budget gate's, each trial is evaluated as the gates evaluate it
(step by step, carrying the state it returns), and a budget that nothing passes leaves
its trials in report.json, where a user reads them next."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgebuild import api
from edgebuild.execute.policy import FailurePolicy
from tests.integration.stream_models import FEATURES, GRU_HEAD, HIDDEN, STEPS, gru_step

pytest.importorskip("onnxruntime")
pytestmark = [pytest.mark.onnxruntime, pytest.mark.slow]

RECIPE = "name: gru-budget\n" + GRU_HEAD + """\
  steps: {kind: npz, path: steps.npz, arrays: {x: x, h: h}}
targets:
  met:
    profile: host-cpu
    passes:
      - quantize:
          mode: static
          calibration: steps
          budget:
            gate: &loose {dataset: feats, output: p, task: regression, max_abs_error: 0.5}
            steps: [percentile]
    gates: {accuracy: *loose}
  missed:
    profile: host-cpu
    passes:
      - quantize:
          mode: static
          calibration: steps
          budget:
            gate: {dataset: feats, output: hn, task: regression, min_cosine: 0.9999999}
            steps: [percentile]
"""


def test_a_budget_runs_its_trials_on_a_stream_and_a_missed_one_reports_them(
        tmp_path: Path) -> None:
    gru_step(tmp_path / "gru.onnx")
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "feats.npz",
             x=rng.standard_normal((2, FEATURES * STEPS)).astype(np.float32))
    np.savez(tmp_path / "steps.npz", x=rng.standard_normal((32, FEATURES)).astype(np.float32),
             h=np.tanh(rng.standard_normal((32, 1, HIDDEN))).astype(np.float32))
    (tmp_path / "gru.yaml").write_text(RECIPE)
    report = api.run(tmp_path / "gru.yaml", api.RunOptions(
        out=tmp_path / "out", cache_dir=tmp_path / "cache", policy=FailurePolicy.KEEP_GOING))
    assert report.exit_code != 0  # `missed` fails its quantize stage
    stages = {s["id"]: s for s in json.loads((tmp_path / "out" / "report.json")
                                             .read_text())["stages"]}
    budgets = {s["metadata"]["budget"]["gate"]["output"]: s for i, s in stages.items()
               if i.startswith("quantize")}
    met, missed = budgets["p"], budgets["hn"]
    budget = met["metadata"]["budget"]
    assert budget["samples"] == 2 and budget["steps"] == 2 * STEPS  # judged step by step
    assert budget["chosen"] == "as written"
    assert missed["outcome"] == "failed"
    assert "no INT8 configuration passed" in missed["message"]
    budget = missed["metadata"]["budget"]
    assert budget["chosen"] is None and budget["steps"] == 2 * STEPS
    assert [t["step"] for t in budget["trials"]] == ["as written", "percentile"]
    assert all(0.99 < t["metrics"]["cosine"] < 0.9999999 for t in budget["trials"])
