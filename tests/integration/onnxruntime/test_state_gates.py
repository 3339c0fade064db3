"""Gating a recurrent state that mixes ranges (issue 40, item 2): tests/models/mixed_state.py,
an LSTM step whose state stacks h (≤ 1) on c (≤ 27), built FP32 and INT8 (the LSTM's weights,
ONNX Runtime's DynamicQuantizeLSTM) and streamed, each build carrying its own state.

A whole-state `min_cosine: 0.99` is refused (FP32 with h zeroed keeps 0.994). Each fix the
refusal names is applied, as written in its message, to the recipe that produced it:
validate accepts it and the gate it makes measures the part (or channel) it names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.fidelity.verdict import judge
from edgebuild.recipe.loader import load_recipe
from tests.models import mixed_state

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.onnxruntime

WHOLE = "{dataset: feats, output: stateN, task: regression, min_cosine: 0.99}"
TARGETS = """\
targets:
  host-cpu-int8:
    profile: host-cpu
    passes: [quantize: {mode: dynamic, op_types: [LSTM]}]
    gates:
      accuracy:
GATES"""


def recipe(folder: Path, gates: list[str]) -> Path:
    """The mixed-state recipe in `folder` (its model and features written once) with
    these accuracy gates on its INT8 target."""
    if not (folder / "step.onnx").is_file():
        mixed_state.write_model(folder / "step.onnx")
        mixed_state.write_features(folder / "feats.npz")
    path = folder / "state.yaml"
    path.write_text(mixed_state.RECIPE + TARGETS.replace(
        "GATES", "".join(f"        - {g}\n" for g in gates)))
    return path


def applied(message: str, gate: str) -> list[list[str]]:
    """Every fix the refusal names, applied to `gate`: the part slices (one gate each)
    together, then each `channel_axis:` on its own."""
    snippets = re.findall(r"`((?:slice|channel_axis): [^`]+)`", message)
    slices = [s for s in snippets if s.startswith("slice")]
    assert len(slices) == 2 and all("…" not in s for s in slices), message  # concrete
    fixes = [[gate[:-1] + f", {s}}}" for s in slices]]
    fixes += [[gate[:-1] + f", {s}}}"] for s in snippets if s.startswith("channel_axis")]
    assert len(fixes) == 3, snippets  # the parts, channel_axis: 1, channel_axis: whole
    return fixes


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """FP32 and INT8 outputs files of the two sequences, streamed as reference and infer
    store them: one row per step, each build carrying its own state."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder = tmp_path_factory.mktemp("streamed")
    model = mixed_state.write_model(folder / "step.onnx")
    quantize_dynamic(str(model), str(folder / "int8.onnx"), op_types_to_quantize=["LSTM"],
                     weight_type=QuantType.QInt8)
    features = np.load(mixed_state.write_features(folder / "feats.npz"))["x"]
    found = {}
    for name in ("step", "int8"):
        run = ort.InferenceSession(str(folder / f"{name}.onnx"),
                                   providers=["CPUExecutionProvider"]).run
        probabilities, states = [], []
        for sequence in features:
            state = np.zeros((2, 1, mixed_state.HIDDEN), np.float32)
            for k in range(mixed_state.STEPS):
                window = sequence[None, k * mixed_state.FEATURES:(k + 1) * mixed_state.FEATURES]
                p, state = run(None, {"x": window, "state": state})
                probabilities.append(p)
                states.append(state)
        found[name] = folder / f"{name}.npz"
        np.savez(found[name], **{"output:p": np.concatenate(probabilities),  # type: ignore[arg-type]
                                 "output:stateN": np.stack(states)})
    return found


def judged(path: Path, streamed: dict[str, Path], got: Path | None = None) -> list[Any]:
    gates = load_recipe(path).recipe.targets["host-cpu-int8"].gates.accuracy_gates
    return [judge(g, got or streamed["int8"], streamed["step"]) for g in gates]


def test_every_fix_the_refusal_names_is_accepted_and_gates_its_part(
        tmp_path: Path, streamed: dict[str, Path]) -> None:
    (refused,) = judged(recipe(tmp_path, [WHOLE]), streamed)
    assert not refused and "refused: this output mixes ranges along axis 1" in refused.message
    for fix in applied(refused.message, WHOLE):
        results = judged(recipe(tmp_path, fix), streamed)  # validate accepts it
        assert results and all(results), [r.message for r in results]
        assert all(r.measured["cosine"] > 0.999 for r in results)  # a faithful INT8 build
    parts = judged(recipe(tmp_path, applied(refused.message, WHOLE)[0]), streamed)
    assert [r.measured["samples"] for r in parts] == [80, 80]  # 2 sequences of 40 steps


def test_per_part_limits_catch_a_state_whose_h_is_lost(
        tmp_path: Path, streamed: dict[str, Path]) -> None:
    """h zeroed at every step (c intact): the whole-state cosine keeps 0.994 and passes
    0.99 when knowingly kept whole; h's own gate, and the per-channel one, fail it."""
    with np.load(streamed["step"]) as archive:
        broken = {k: archive[k] for k in archive.files}
    broken["output:stateN"] = broken["output:stateN"].copy()
    broken["output:stateN"][:, 0] = 0
    np.savez(tmp_path / "broken.npz", **broken)  # type: ignore[arg-type]
    (refused,) = judged(recipe(tmp_path, [WHOLE]), streamed, tmp_path / "broken.npz")
    parts, channels, whole = applied(refused.message, WHOLE)
    h, c = judged(recipe(tmp_path, parts), streamed, tmp_path / "broken.npz")
    assert not h and h.measured["cosine"] == 0.0 and c
    (per_channel,) = judged(recipe(tmp_path, channels), streamed, tmp_path / "broken.npz")
    assert not per_channel and "worst channel 0 of axis 1" in per_channel.message
    (kept,) = judged(recipe(tmp_path, whole), streamed, tmp_path / "broken.npz")
    assert kept  # what `channel_axis: whole` knowingly keeps: the blind figure


def test_state_parts_with_their_own_limits(tmp_path: Path, streamed: dict[str, Path]) -> None:
    """h and c of one state gated with limits of their own, each largest error in its own
    units: h within 0.1 (it spans ±1; INT8 moves it 0.016), c within 2 (it reaches 27;
    INT8 moves it 0.89)."""
    h, c = judged(recipe(tmp_path, [
        "{dataset: feats, output: stateN, task: regression, slice: {axis: 1, stop: 1}, "
        "max_abs_error: 0.1, min_cosine: 0.999}",
        "{dataset: feats, output: stateN, task: regression, slice: {axis: 1, start: 1}, "
        "max_abs_error: 2, min_cosine: 0.999}"]), streamed)
    assert h and c, (h.message, c.message)
    assert "output 'stateN[:, :1]'" in h.message and "output 'stateN[:, 1:]'" in c.message


@pytest.mark.slow
def test_the_fixes_through_the_pipeline(tmp_path: Path) -> None:
    """The refusal as `edgebuild run` gives it, and each fix it names re-run: reference and
    infer come from the cache, and the gates the fix makes pass the faithful INT8 build."""
    from edgebuild import api

    options = api.RunOptions(out=tmp_path / "out", cache_dir=tmp_path / "cache")
    report = api.run(recipe(tmp_path, [WHOLE]), options)
    (refused,) = [g for t in report.targets for g in t.gates]
    assert report.exit_code == 1 and "mixes ranges along axis 1" in refused.message
    for fix in applied(refused.message, WHOLE):
        report = api.run(recipe(tmp_path, fix), options)
        gates = [g for t in report.targets for g in t.gates]
        assert report.exit_code == 0, [g.message for g in gates]
        assert len(gates) == len(fix) and all(g.measured["cosine"] > 0.999 for g in gates)
