"""Silero VAD (a real streaming model: a scalar sample rate selecting an `If` branch, a
recurrent state without a sample axis) built, streamed step by step and gated on ONNX
Runtime, FP32 and INT8 (issue 30)."""

from __future__ import annotations

import importlib.util
import wave
from pathlib import Path

import numpy as np
import pytest

from edgebuild import api
from edgebuild.cache.store import Store
from edgebuild.passes.torch_model import sample_inputs
from edgebuild.recipe.loader import load_recipe
from tests.conftest import REPO

pytest.importorskip("onnxruntime")
pytestmark = [pytest.mark.onnxruntime,
              pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                                 reason="silero-vad is not installed (scripts/setup.sh "
                                 "installs it --no-deps)")]

RECIPE = REPO / "recipes" / "voice-activity.yaml"


def session() -> object:
    import onnxruntime as ort

    return ort.InferenceSession(str(session_path()), providers=["CPUExecutionProvider"])


def test_latency_inputs_take_the_16k_branch() -> None:
    """Drawn from 0..9, `sr` took the 8 kHz branch, which fails on 576 samples."""
    import onnxruntime as ort

    io = load_recipe(RECIPE).recipe.io_declarations()
    (feeds,) = sample_inputs(io["inputs"], seed=0, count=1)
    probability, state = session().run(None, feeds)  # type: ignore[attr-defined]
    assert probability.shape == (1, 1) and state.shape == (2, 1, 128)
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument):
        session().run(None, {**feeds, "sr": np.array(3, np.int64)})  # type: ignore[attr-defined]


def recipe_without_timing(tmp_path: Path) -> Path:
    """The project's recipe, its dataset function found from tmp_path, without the latency
    and size gates (the e2e test's)."""
    text = RECIPE.read_text()
    text = text.replace("models/voice_activity.py", str(REPO / "recipes/models/voice_activity.py"))
    text = "\n".join(line for line in text.splitlines()
                     if "latency:" not in line and "size:" not in line)
    recipe = tmp_path / "vad.yaml"
    recipe.write_text(text)
    return recipe


def steps() -> list[np.ndarray]:
    """speech.wav as Silero VAD's app feeds it, written out here: 512 new samples a step
    after the previous step's last 64, zeros before the first."""
    with wave.open(str(REPO / "recipes/data/speech/speech.wav")) as reader:
        pcm = np.frombuffer(reader.readframes(reader.getnframes()), dtype="<i2")
    audio = pcm.astype(np.float32) / 32768.0
    padded = np.concatenate([np.zeros(64, np.float32), audio])
    return [padded[i * 512:i * 512 + 576][None] for i in range(len(audio) // 512)]


def stream(model: Path, states: list[np.ndarray] | None = None,
           sr: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """A plain onnxruntime loop over the steps: the speech probability and the next state
    of each, the state carried from zeros, or each step fed `states[k]` instead."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    run = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"]).run
    state = np.zeros((2, 1, 128), np.float32)
    probabilities, returned = [], []
    for k, window in enumerate(steps()):
        feeds = {"input": window, "state": state if states is None else states[k]}
        probability, state = run(None, {**feeds, "sr": np.array(16000, np.int64)}
                                 if sr else feeds)
        probabilities.append(probability[0, 0])
        returned.append(state)
    return np.array(probabilities), np.stack(returned)


@pytest.mark.slow
def test_the_stream_is_evaluated_step_by_step_each_build_carrying_its_own_state(
        tmp_path: Path) -> None:
    """issue 30: the recipe's `state:` and its dataset's `stream:` make reference and infer
    run speech.wav step by step. FP32's probabilities are a plain loop's that carries the
    state (and far from what zero state each step gives); the INT8 build's are its own
    loop's, carrying the state *it* returns, not FP32's."""
    out, cache = tmp_path / "out", tmp_path / "cache"
    report = api.run(recipe_without_timing(tmp_path), api.RunOptions(
        out=out, cache_dir=cache, targets=["host-cpu", "host-cpu-int8"]))
    assert report.exit_code == 0, report.model_dump_json(indent=1)
    gates = {(t.name, g.gate): g for t in report.targets for g in t.gates}
    assert gates[("host-cpu", "accuracy[output]")].measured["samples"] == 487
    assert "487 steps (1 sequence" in gates[("host-cpu", "accuracy[output]")].message
    keys = {s.id: s.key for s in report.stages}
    store = Store(cache)

    def outputs(stage: str) -> tuple[np.ndarray, np.ndarray]:
        found = store.lookup(keys[stage])
        assert found is not None
        with np.load(found.main) as archive:
            return archive["output:output"][:, 0], archive["output:stateN"]

    model = session_path()
    carried, states = stream(model)
    zero_each_step, _ = stream(model, [np.zeros((2, 1, 128), np.float32)] * len(steps()))
    fp32, fp32_states = outputs("reference")
    assert fp32.shape == (487,) and fp32_states.shape == (487, 2, 1, 128)  # a row per step
    np.testing.assert_allclose(fp32, carried, atol=1e-5)
    np.testing.assert_allclose(fp32_states, states, atol=1e-4)
    assert np.abs(carried - zero_each_step).max() > 0.5  # the state matters: ~0.998 here
    # The INT8 build (the LSTM's weights in int8), loaded as built: its own state carried.
    int8 = out / "artifacts" / "host-cpu-int8" / "model.onnx"
    own, own_states = stream(int8, sr=False)  # `sr` is folded into the build
    fed_fp32 = [np.zeros((2, 1, 128), np.float32), *states[:-1]]
    teacher_forced, _ = stream(int8, fed_fp32, sr=False)
    got, got_states = outputs("infer@host-cpu-int8")
    np.testing.assert_allclose(got, own, atol=1e-5)
    np.testing.assert_allclose(got_states, own_states, atol=1e-4)
    # FP32's state would hide the error the build accumulates (0.075 here).
    assert np.abs(got - teacher_forced).max() > 0.02
    measured = gates[("host-cpu-int8", "accuracy[output]")].measured["max_abs_error"]
    assert measured == pytest.approx(float(np.abs(own - carried).max()), abs=1e-5)


def session_path() -> Path:
    model = load_recipe(RECIPE).recipe.model.onnx
    assert model is not None and not isinstance(model, str)
    spec = importlib.util.find_spec(model.package)
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / model.path


def test_a_timed_step_carries_the_state_the_previous_one_returned() -> None:
    """Latency of a stream is per step: each timed run is fed the state the run before it
    returned (from the declared initial zeros), as the deployed loop is."""
    from edgebuild.measuring.latency import _step

    io = load_recipe(RECIPE).recipe.io_declarations()
    (feeds,) = sample_inputs(io["inputs"], seed=0, count=1)
    assert not feeds["state"].any()  # `initial: zeros`

    class Session:  # the runner interface the step uses, over the real model
        def infer(self, given: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return dict(zip(["output", "stateN"], session().run(None, given),  # type: ignore[attr-defined]
                            strict=True))

    step = _step(Session(), feeds, io["state"])  # type: ignore[arg-type]
    timed = [step()["output"] for _ in range(3)]  # type: ignore[index]
    state, expected = feeds["state"], []
    for _ in range(3):
        probability, state = session().run(None, {**feeds, "state": state})  # type: ignore[attr-defined]
        expected.append(probability)
    np.testing.assert_allclose(np.concatenate(timed), np.concatenate(expected), atol=1e-6)
    assert not np.allclose(expected[0], expected[2], atol=1e-6)  # the state changed them
