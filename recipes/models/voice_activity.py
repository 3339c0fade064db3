"""Frames of recipes/data/speech/speech.wav as Silero VAD takes them, for voice-activity.yaml.

Silero VAD (the `silero_vad.onnx` of the PyPI package silero-vad, MIT) is a streaming
model: each step takes 512 new samples at 16 kHz after the previous step's last 64
(`input` [1, 576]), the recurrent `state` [2, 1, 128] the previous step returned, and
the sample rate `sr` (a scalar; it selects the 16 kHz branch of an `If`). It returns
the speech probability `output` [1, 1] and the next state `stateN`.

`recording` gives the file as one sample, a sequence the recipe's `stream:` cuts into
steps, each build carrying its own state (docs/recipes.md#streams).
"""

from __future__ import annotations

import wave
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RATE = 16000


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


def steps(wav: str = "../data/speech/speech.wav", limit: int | None = None) -> dict[str, Any]:
    """{input: N×576, state: N×2×1×128}: the recording's steps one by one, each with the
    state FP32 (ONNX Runtime, the package's own model) carries into it: single steps as
    a static quantizer calibrates on them (a stream dataset is evaluated, not calibrated
    on). `limit`: the first steps only."""
    import onnxruntime as ort
    import silero_vad

    model = Path(silero_vad.__file__).parent / "data" / "silero_vad.onnx"
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    audio = np.concatenate([np.zeros(64, np.float32), read_wav(HERE / wav)])  # as `stream:`
    count = (len(audio) - 64) // 512
    count = count if limit is None else min(count, limit)
    frames = np.stack([audio[i * 512 : i * 512 + 576] for i in range(count)])
    states = np.zeros((count, 2, 1, 128), np.float32)
    state = states[0]
    for i in range(count):
        states[i] = state
        _, state = session.run(None, {"input": frames[i : i + 1], "state": state,
                                      "sr": np.array(16000, np.int64)})
    return {"input": frames, "state": states}
