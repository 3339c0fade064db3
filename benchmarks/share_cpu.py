"""Do idle runtime threads that sleep make stages faster beside other work?

    python benchmarks/share_cpu.py [--rounds 2] [--calls 30]

EfficientNet-Lite0 (the quickstart's model), 2 threads, quiet and then beside one
busy-loop process, interleaved: ONNX Runtime with `session.intra_op.allow_spinning`
1 (its default) and 0, and PyTorch at fp16 (the Core ML proxy's arithmetic) in a
fresh process with the OpenMP wait policy unset (spinning) and `PASSIVE` — what
`edgebuild/core/share_cpu.py` gives a stage that times nothing. Prints a Markdown
table of seconds for `--calls` inferences (ONNX Runtime) or 4 (PyTorch fp16).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noisy_latency import export_efficientnet, isa

TORCH_FP16 = """
import time, torch
from efficientnet_lite_pytorch import EfficientNet
torch.set_num_threads(2)
model = EfficientNet.from_name("efficientnet-lite0").eval().half()
x = torch.randn(1, 3, 224, 224).half()
with torch.no_grad():
    model(x)
    started = time.perf_counter()
    for _ in range(4):
        model(x)
print(time.perf_counter() - started)
"""


def ort_seconds(path: Path, spin: str, calls: int) -> float:
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 2, 1
    so.add_session_config_entry("session.intra_op.allow_spinning", spin)
    session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    session.run(None, {"image": x})
    started = time.perf_counter()
    for _ in range(calls):
        session.run(None, {"image": x})
    return time.perf_counter() - started


def torch_seconds(policy: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    out = subprocess.run([sys.executable, "-c", TORCH_FP16], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    rows: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model.onnx"
        export_efficientnet(model)
        for phase in ("quiet", "one busy loop"):
            hog = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
                   if phase != "quiet" else None)
            try:
                for _ in range(args.rounds):
                    for spin, label in (("1", "spinning"), ("0", "sleeping")):
                        rows.setdefault((phase, f"ONNX Runtime, {label}"), []).append(
                            ort_seconds(model, spin, args.calls))
                    for policy, label in ((None, "spinning"), ("PASSIVE", "sleeping")):
                        rows.setdefault((phase, f"PyTorch fp16, {label}"), []).append(
                            torch_seconds(policy))
            finally:
                if hog is not None:
                    hog.kill()
    print(f"\nEfficientNet-Lite0, 2 threads; {isa()}, {os.cpu_count()} cores\n")
    print("| conditions | runtime, idle threads | seconds per round |")
    print("|---|---|---|")
    for (phase, what), seconds in rows.items():
        print(f"| {phase} | {what} | {', '.join(f'{s:.3f}' for s in seconds)} |")


if __name__ == "__main__":
    main()
