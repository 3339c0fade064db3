"""Frames of recipes/data/speech/speech.wav as Silero VAD takes them, for voice-activity.yaml.

Silero VAD (the `silero_vad.onnx` of the PyPI package silero-vad, MIT) is a streaming
model: each step takes 512 new samples at 16 kHz after the previous step's last 64
(`input` [1, 576]), the recurrent `state` [2, 1, 128] the previous step returned, and
the sample rate `sr` (a scalar; it selects the 16 kHz branch of an `If`). It returns
the speech probability `output` [1, 1] and the next state `stateN`.

`recording` gives the file as one sample, a sequence the recipe's `stream:` cuts into
steps, each build carrying its own state (docs/recipes.md#streams). `windows` gives
single steps, each with the state FP32 ONNX Runtime carried to it over the whole file
(teacher forcing): data of single steps, for what cannot take a stream (calibration).
"""

from __future__ import annotations

import wave
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
WINDOW, CONTEXT, RATE = 512, 64, 16000


def read_wav(path: Path) -> np.ndarray:
    """16-bit mono PCM at 16 kHz as float32 in [-1, 1]."""
    with wave.open(str(path)) as reader:
        if (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) != (1, 2, RATE):
            raise ValueError(f"{path.name}: expected 16-bit mono PCM at {RATE} Hz")
        pcm = np.frombuffer(reader.readframes(reader.getnframes()), dtype="<i2")
    audio: np.ndarray = pcm.astype(np.float32) / 32768.0
    return audio


def recording(wav: str = "../data/speech/speech.wav") -> dict[str, Any]:
    """{input: 1×T float32}: the whole file as one sample, which the recipe's `stream:`
    cuts into steps (512 new samples after the previous step's last 64)."""
    return {"input": read_wav(HERE / wav)[None]}


def windows(wav: str = "../data/speech/speech.wav") -> dict[str, Any]:
    """{input: N×576 float32 (64 samples of context, then 512 new), state: N×2×1×128
    float32 (the state FP32 carries into each step)}."""
    import onnxruntime as ort

    audio = read_wav(HERE / wav)
    steps = len(audio) // WINDOW
    padded = np.concatenate([np.zeros(CONTEXT, np.float32), audio[:steps * WINDOW]])
    frames = np.stack([padded[i * WINDOW:i * WINDOW + CONTEXT + WINDOW] for i in range(steps)])
    model = resources.files("silero_vad") / "data" / "silero_vad.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    states = []
    for frame in frames:
        states.append(state)
        _, state = session.run(None, {"input": frame[None], "state": state,
                                      "sr": np.array(RATE, np.int64)})
    return {"input": frames.astype(np.float32), "state": np.stack(states).astype(np.float32)}
