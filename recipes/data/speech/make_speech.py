"""Make speech.wav: English speech synthesised with espeak-ng, with silence and noise between.

    apt-get install -y espeak-ng && python recipes/data/speech/make_speech.py

Three sentences (espeak-ng 1.51, voice `en`, 160 words/min, 22050 Hz) resampled to
16 kHz mono (scipy `resample_poly`), separated by 0.8 s of silence with low white
noise (seed 0, RMS -50 dBFS), written as 16-bit PCM. The voice-activity recipe
(recipes/voice-activity.yaml) needs frames with speech and frames without. Running
it again with another espeak-ng version gives other samples: the WAV is committed,
this script says how it was made.
"""

from __future__ import annotations

import io
import subprocess
import wave
from pathlib import Path

import numpy as np
from scipy.signal import resample_poly

SENTENCES = [
    "Edge devices listen for speech before they wake up the larger model.",
    "A voice activity detector answers one question for every thirty milliseconds.",
    "Is someone talking right now, or is it only noise?",
]
RATE = 16000


def speak(text: str) -> np.ndarray:
    wav = subprocess.run(["espeak-ng", "-v", "en", "-s", "160", "--stdout", text],
                         check=True, capture_output=True).stdout
    with wave.open(io.BytesIO(wav)) as reader:
        assert reader.getframerate() == 22050 and reader.getsampwidth() == 2
        samples = np.frombuffer(reader.readframes(reader.getnframes()), dtype=np.int16)
    audio: np.ndarray = resample_poly(samples.astype(np.float64) / 32768.0, 320, 441)
    return audio


def main() -> None:
    rng = np.random.default_rng(0)
    gap = int(0.8 * RATE)
    noise_rms = 10 ** (-50 / 20)
    parts = [rng.standard_normal(gap) * noise_rms]
    for text in SENTENCES:
        parts += [speak(text), rng.standard_normal(gap) * noise_rms]
    audio = np.clip(np.concatenate(parts), -1, 1)
    out = Path(__file__).with_name("speech.wav")
    with wave.open(str(out), "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(RATE)
        writer.writeframes(np.round(audio * 32767).astype("<i2").tobytes())
    print(f"{out}: {len(audio) / RATE:.2f} s")


if __name__ == "__main__":
    main()
