"""The runtime's peak resident memory for load + inference, read in a fresh process.

Why a process of its own: the measure-latency stage's process already holds what it
timed (a session, an arena, the runtime's threads) and, under a Dask worker or a search,
other models; its high-water mark (VmHWM) is the most it ever held, whatever held it. So
the parent writes the inputs and a spec to a scratch folder and starts
`python -m edgebuild.measuring.footprint spec.json`, which:

    import numpy, edgebuild, the backend class; read the inputs   ─┐ baseline: VmRSS
    reset the high-water mark (`5` > /proc/self/clear_refs)        │
    runner: import the runtime, load, reshape ── init: VmRSS       │ the runtime's part
    RUNS inferences                           ── peak: VmHWM      ─┘

`peak_mb` = VmHWM − baseline: the runtime library, the loaded model, its arena and its
output buffers, not the interpreter, numpy or edgebuild (which a deployment in C++ or
Kotlin does not carry, and which are in `baseline_mb` for whoever wants them). It is RSS:
shared-library and mmapped model pages count as they are resident. Where
/proc/self/clear_refs cannot be written the high-water mark includes the imports' own
transient peak (`method` says so). Linux only (/proc); elsewhere "not measurable here".
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.errors import StageError
from edgebuild.measure.record import Memory

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.core.artifact import Artifact
    from edgebuild.core.target import Target

RUNS = 5  # inferences after the load: an arena grows on the first, not after
TIMEOUT_S = 600
STATUS = Path("/proc/self/status")


def measure_memory(artifact: Artifact, target: Target, threads: int | None,
                   feeds: dict[str, np.ndarray], shapes: dict[str, list[int]]) -> Memory:
    """The runtime's memory for `artifact` on this host, measured in a fresh process; a
    Memory with `unmeasurable` where this backend or host cannot tell."""
    import numpy as np

    from edgebuild.customops.declared import active
    from edgebuild.registry import load_backend

    backend = load_backend(target.backend)
    if not backend.memory_measurable(target):
        return Memory(unmeasurable=f"not measurable here: backend {backend.name} does not "
                      "run its runtime in this process (a device's or emulator's memory is "
                      "not read on this host)")
    if not STATUS.is_file():
        return Memory(unmeasurable="not measurable here: needs Linux /proc/self/status")
    if active().ops:
        return Memory(unmeasurable="not measured: a recipe with custom_ops (the memory "
                      "process does not load their kernels)")
    with tempfile.TemporaryDirectory(prefix="edgebuild-memory-") as scratch:
        folder = Path(scratch)
        np.savez(folder / "feeds.npz", **feeds)  # type: ignore[arg-type]
        spec = {"artifact": artifact.to_json(), "target": target.model_dump(mode="json"),
                "threads": threads, "shapes": shapes, "feeds": str(folder / "feeds.npz")}
        (folder / "spec.json").write_text(json.dumps(spec))
        try:
            done = subprocess.run(
                [sys.executable, "-m", "edgebuild.measuring.footprint", str(folder / "spec.json")],
                capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise StageError(f"the memory measurement took over {TIMEOUT_S} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise StageError(f"the memory measurement's process failed: {last[:300]}",
                         "the same artifact ran in the timed runs; a crash here is the "
                         "runtime's (its log is the stage's log)")
    lines = done.stdout.strip().splitlines()
    try:
        return Memory.model_validate_json(lines[-1] if lines else "")
    except ValueError as exc:
        raise StageError(f"the memory measurement printed no Memory record ({exc})") from None


def status_mb() -> dict[str, float]:
    """VmRSS and VmHWM of this process, MB (10^6 bytes)."""
    found = {}
    for line in STATUS.read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * 1024 / 1e6  # kB -> MB
    return found


def reset_peak() -> bool:
    """Reset this process's VmHWM to its VmRSS (Linux ≥ 4.0); False when refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _measure(spec: dict[str, Any]) -> Memory:
    import numpy as np

    from edgebuild.core.artifact import Artifact
    from edgebuild.core.target import Target
    from edgebuild.registry import load_backend

    target = Target.model_validate(spec["target"])
    artifact = Artifact.from_json(spec["artifact"])
    with np.load(spec["feeds"], allow_pickle=False) as stored:
        feeds = {name: stored[name] for name in stored.files}
    backend = load_backend(target.backend)
    baseline = status_mb()["VmRSS"]
    reset = reset_peak()
    with backend.runner(artifact, target, spec["threads"]) as runner:
        runner.reshape(spec["shapes"])
        init = status_mb()["VmRSS"]
        for _ in range(RUNS):
            runner.infer(feeds)
        after = status_mb()
    method = ("VmHWM after load + inference, reset to VmRSS before the runtime was "
              "imported (/proc/self/clear_refs), minus that VmRSS" if reset else
              "VmHWM after load + inference minus VmRSS before the runtime was imported "
              "(clear_refs refused: the peak may include the imports' own)")
    return Memory(peak_mb=round(after["VmHWM"] - baseline, 2), init_mb=round(init - baseline, 2),
                  baseline_mb=round(baseline, 2), process_peak_mb=round(after["VmHWM"], 2),
                  runs=RUNS, method=method)


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    print(json.dumps(_measure(spec).to_json()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
