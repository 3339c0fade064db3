"""Streams (issue 30): the recipe's `state:` pairs and a dataset's `stream:` — checked at
validate time at their lines, cut into steps in order, evaluated with the state carried,
and stored one row per step (a state output has no sample axis)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgebuild.core.samples import Steps
from edgebuild.data.loaders import Samples, as_declared, check_matches_inputs
from edgebuild.data.stream import evaluate, first_feeds
from edgebuild.errors import DataError, RecipeError
from edgebuild.fidelity.outputs import save_outputs
from edgebuild.recipe.loader import load_recipe

RECIPE = """\
name: vad
model: {onnx: missing.onnx}
inputs:
  - {name: input, shape: [1, 576], dtype: float32}
  - {name: state, shape: [2, 1, 128], dtype: float32, batch_axis: null}
outputs: [output, stateN]
state:
  - {input: state, output: STATE_OUT, initial: zeros}
datasets:
  speech:
    kind: callable
    function: numpy:zeros
    stream: STREAM
targets:
  host-cpu:
    passes: PASSES
    gates:
      accuracy:
        - {dataset: speech, output: output, task: regression, max_abs_error: 0.001}
        - GATE
"""
GOOD = {"STATE_OUT": "stateN", "STREAM": "{axis: 1, hop: 512}", "PASSES": "[]",
        "GATE": "{dataset: speech, output: stateN, task: regression, min_cosine: 0.99}"}


def recipe(tmp_path: Path, **changes: str) -> Path:
    text = RECIPE
    for key, value in {**GOOD, **changes}.items():
        text = text.replace(key, value)
    path = tmp_path / "vad.yaml"
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    return [str(p) for p in caught.value.problems]


def test_a_stream_recipe_validates_and_tells_stages_its_state(tmp_path: Path) -> None:
    loaded = load_recipe(recipe(tmp_path))
    io = loaded.recipe.io_declarations()
    assert io["state"] == [{"input": "state", "output": "stateN", "initial": 0.0}]
    # latency and generated inputs start the state where a stream does
    assert next(t for t in io["inputs"] if t["name"] == "state")["value"] == 0.0


def test_a_recipe_without_state_keeps_its_declarations(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    """`state` and `stream` are left out of what stages are keyed on when not written, so
    every recipe written before streams keeps its cache keys."""
    import edgebuild.data.digest as digest_module
    from edgebuild.recipe.datasets import CallableDataset

    loaded = load_recipe(Path(__file__).parents[2] / "recipes" / "quickstart.yaml")
    assert "state" not in loaded.recipe.io_declarations()
    hashed: list[dict[str, object]] = []
    monkeypatch.setattr(digest_module, "digest_json", lambda value: hashed.append(value) or "")

    class Stats:
        def digest(self, path: Path) -> str:
            return ""

    spec = CallableDataset(kind="callable", function="numpy:zeros")
    digest_module.dataset_digest(spec, Path(), Stats())  # type: ignore[arg-type]
    assert hashed[0]["spec"] == {k: v for k, v in spec.model_dump(mode="json").items()
                                 if k != "stream"}


@pytest.mark.parametrize(("change", "where", "says"), [
    ({"STATE_OUT": "stateX"}, "state.0.output", "no model output 'stateX'"),
    ({"STREAM": "{input: state, axis: 1, hop: 512}"}, "datasets.speech.stream.input",
     "'state' is a state"),
    ({"STREAM": "{axis: 1, hop: 600}"}, "datasets.speech.stream.hop",
     "hop 600 is longer than the window"),
    ({"STREAM": "{axis: 2, hop: 512}"}, "datasets.speech.stream.axis", "has no axis 2"),
    ({"GATE": "{dataset: speech, output: stateN, task: regression, min_cosine: 0.99, "
              "channel_axis: 4}"},
     "targets.host-cpu.gates.accuracy.1.channel_axis",
     "'stateN' has no axis 4: to a gate it is [steps, 2, 1, 128]"),
    ({"GATE": "{dataset: speech, output: stateN, task: regression, min_cosine: 0.99, "
              "slice: {axis: 1, start: 2}}"},
     "targets.host-cpu.gates.accuracy.1.slice", "is empty: axis 1 has 2 value(s)"),
    ({"GATE": "{dataset: speech, output: stateN, min_top1_agreement: 99}"},
     "targets.host-cpu.gates.accuracy.1", "not class scores"),
    ({"PASSES": "[quantize: {mode: static, calibration: speech}]"},
     "targets.host-cpu.passes.0.quantize.calibration", "is a stream"),
])
def test_stream_mistakes_are_recipe_errors_at_their_line(
        tmp_path: Path, change: dict[str, str], where: str, says: str) -> None:
    found = problems(recipe(tmp_path, **change))
    assert any(where in p and says in p and "vad.yaml:" in p for p in found), found


def test_a_state_input_value_and_initial_must_agree(tmp_path: Path) -> None:
    path = recipe(tmp_path)
    path.write_text(path.read_text().replace("batch_axis: null}", "batch_axis: null, value: 1}"))
    found = problems(path)
    assert any("state.0.initial" in p and "declares `value: 1`" in p for p in found), found


def steps(window: int = 4, hop: int = 3, reset: str = "sample") -> Steps:
    return Steps("speech", "input", 1, window, hop, reset)


def test_a_sequence_is_cut_into_consecutive_windows_in_order() -> None:
    """Each window: `hop` new values after the previous window's last window - hop, zeros
    before the first; a tail shorter than a hop is dropped."""
    values = np.arange(1, 11, dtype=np.float32)[None]  # [1, 10]
    windows = [w.tolist() for w in steps().windows(values)]
    assert windows == [[[0, 1, 2, 3]], [[3, 4, 5, 6]], [[6, 7, 8, 9]]]


TENSORS = [{"name": "input", "shape": [1, 4], "dtype": "float32", "dynamic_axes": {}},
           {"name": "state", "shape": [2], "dtype": "float32", "dynamic_axes": {},
            "batch_axis": None, "value": 0.0}]
PAIRS = [{"input": "state", "output": "next", "initial": 0.0}]


def accumulate(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A step whose output depends on every earlier step: the running sum of the new
    values, in both elements of the state."""
    new = feeds["input"][0, 1:].sum()  # the hop's new values (window 4, hop 3)
    following = feeds["state"] + np.float32(new)
    return {"out": following[None, :1], "next": following}


def stream_samples(reset: str) -> Samples:
    audio = np.stack([np.ones((1, 9), np.float32), 2 * np.ones((1, 9), np.float32)])
    samples = Samples({"input": audio[:, 0]}, None, ["#0", "#1"])
    check_matches_inputs(samples, TENSORS, "speech", steps(reset=reset))
    return as_declared(samples, TENSORS, steps(reset=reset))


def test_the_state_is_carried_step_to_step_and_reset_per_sample() -> None:
    samples = stream_samples("sample")
    outputs = evaluate(samples, PAIRS, accumulate)
    # 3 steps of 3 new values each, per sample; the state starts at zeros for each sample
    assert [float(o["out"][0, 0]) for o in outputs] == [3, 6, 9, 6, 12, 18]
    carried = evaluate(stream_samples("never"), PAIRS, accumulate)
    assert [float(o["out"][0, 0]) for o in carried] == [3, 6, 9, 15, 21, 27]
    assert first_feeds(samples)["input"].shape == (1, 4)
    with pytest.raises(DataError, match="is a stream"):
        samples.feed(0)  # a stage that is not stream-aware cannot take whole sequences


def test_a_state_output_of_another_shape_is_named() -> None:
    def wrong(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"out": feeds["input"][:, :1], "next": np.zeros(3, np.float32)}

    with pytest.raises(DataError, match=r"state output 'next' has shape \[3\]"):
        evaluate(stream_samples("sample"), PAIRS, wrong)


def test_a_sequence_shorter_than_a_step_is_refused() -> None:
    samples = Samples({"input": np.ones((1, 2), np.float32)}, None, ["#0"])
    with pytest.raises(DataError, match="shorter than one step"):
        check_matches_inputs(samples, TENSORS, "speech", steps())


def test_state_outputs_are_stored_one_row_per_step(tmp_path: Path) -> None:
    """Not concatenated along their first axis ([2, 1, 128] x 487 steps was 974 rows):
    each step's state is one row, so a gate compares it step by step."""
    samples = stream_samples("sample")
    outputs = [{"out": np.zeros((1, 1)), "stateN": np.zeros((2, 1, 128))}] * 5
    save_outputs(tmp_path / "o.npz", outputs, samples, {"stateN"})
    with np.load(tmp_path / "o.npz") as stored:
        assert stored["output:out"].shape == (5, 1)
        assert stored["output:stateN"].shape == (5, 2, 1, 128)


def test_an_output_without_a_sample_axis_is_not_compared_as_if_it_had_one(
        tmp_path: Path) -> None:
    """Without `state:`, a state output [2, 1, 128] concatenates to 2 rows a sample: the
    gate fails naming the cause and the fix, instead of counting 974 "samples"."""
    from edgebuild.fidelity.verdict import judge
    from edgebuild.recipe.accuracy import AccuracyGate

    samples = Samples({"input": np.zeros((3, 4), np.float32)}, None, ["#0", "#1", "#2"])
    outputs = [{"stateN": np.full((2, 1, 128), i, np.float32)} for i in range(3)]
    save_outputs(tmp_path / "a.npz", outputs, samples)
    gate = AccuracyGate(dataset="speech", output="stateN", task="regression",
                        min_cosine=0.99)
    result = judge(gate, tmp_path / "a.npz", tmp_path / "a.npz", rows=3)
    assert not result and "has 6 rows for 3 samples" in result.message
    assert "Declare it in `state:`" in result.message
    save_outputs(tmp_path / "b.npz", outputs, samples, {"stateN"})  # declared: one row each
    assert judge(gate, tmp_path / "b.npz", tmp_path / "b.npz", rows=3)
