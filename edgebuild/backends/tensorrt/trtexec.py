"""trtexec on the device: its timing of an engine (`--exportTimes`) and its per-layer
profile (`--exportProfile`, read by layer_profile.py with the ONNX nodes beside the
engine). Runs where the engine is; scratch files go to a temporary folder, never the
cache's artifact folder."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild.backends.tensorrt.options import MODEL, TensorRtOptions, shell_line
from edgebuild.errors import BackendUnavailable, StageError

if TYPE_CHECKING:
    from edgebuild.measure.record import LatencyRecord, OpProfile
    from edgebuild.recipe.common import MeasureSettings


def trtexec_profile(folder: Path, runs: int) -> OpProfile:
    """`trtexec --loadEngine --dumpProfile --exportProfile` over `runs` iterations, read
    by layer_profile.py with the ONNX nodes of the model.onnx beside the engine."""
    with tempfile.TemporaryDirectory(prefix="edgebuild-trtexec-") as work:
        layers = Path(work) / "layers.json"
        command = ["trtexec", f"--loadEngine={folder / 'model.engine'}", "--warmUp=200",
                   f"--iterations={runs}", "--duration=0", "--dumpProfile",
                   f"--exportProfile={layers}"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise StageError(f"trtexec failed (exit {done.returncode}): "
                             f"{done.stdout[-500:]}{done.stderr[-500:]}")
        return read_layers(layers, folder)


def read_layers(layers: Path, folder: Path) -> OpProfile:
    """trtexec's --exportProfile file as an OpProfile; one saying why not when it cannot
    be read (the latency beside it stands)."""
    from edgebuild.backends.tensorrt.layer_profile import (
        SOURCE,
        LayerProfileError,
        onnx_node_types,
        op_profile,
    )
    from edgebuild.measure.record import OpProfile

    # The TensorRT-ready ONNX: beside the engine, or a release's files/ (fleet/jetson.py).
    onnx = next((p for p in (folder / MODEL, folder.parent / "files" / MODEL) if p.is_file()),
                None)
    try:
        return op_profile(layers.read_text(errors="replace"),
                          onnx_node_types(onnx) if onnx is not None else None)
    except (OSError, LayerProfileError) as exc:
        return OpProfile(source=SOURCE, unmeasurable=f"not measured: trtexec's layer profile "
                         f"{layers.name} could not be read ({exc})")


def trtexec_latency(folder: Path, options: TensorRtOptions,
                    settings: MeasureSettings) -> LatencyRecord:
    """trtexec's own timing of the engine, and its per-layer profile with `layer_timing`.
    Its files go to a scratch folder: the engine's artifact folder is the cache's."""
    import numpy as np

    from edgebuild.measure.record import LatencyRecord, read_record
    from edgebuild.measure.stats import summarize

    if shutil.which("trtexec") is None:
        raise BackendUnavailable("trtexec is not on PATH on the device",
                                 "JetPack has it in /usr/src/tensorrt/bin; add that to PATH")
    with tempfile.TemporaryDirectory(prefix="edgebuild-trtexec-") as work:
        scratch = Path(work)
        command = ["trtexec", f"--loadEngine={folder / 'model.engine'}",
                   "--warmUp=500",  # milliseconds (trtexec warms up by time, not runs)
                   f"--iterations={settings.min_iterations}",
                   f"--duration={max(settings.min_seconds, 0)}",
                   f"--exportTimes={scratch / 'times.json'}"]
        layer_timing = options.layer_timing or settings.profile
        if layer_timing:  # a profiling run of its own: the timed runs stay unperturbed
            command += ["--dumpProfile", "--separateProfileRun",
                        f"--exportProfile={scratch / 'layers.json'}"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise StageError(f"trtexec failed (exit {done.returncode}): "
                             f"{done.stdout[-500:]}{done.stderr[-500:]}")
        times = json.loads((scratch / "times.json").read_text())
        try:
            latencies = np.array([t["latencyMs"] for t in times], dtype=np.float64)
        except (TypeError, KeyError, ValueError) as exc:
            raise StageError(f"trtexec's --exportTimes file is not a list of "
                             f"{{latencyMs: …}} ({type(exc).__name__}: {exc})",
                             "a trtexec this edgebuild does not know; its log says more"
                             ) from None
        summary = {**summarize(latencies), "tool": shell_line(command)}
        if layer_timing:
            summary["profile"] = read_layers(scratch / "layers.json", folder).to_json()
    return read_record(LatencyRecord, summary, "trtexec's timing")
