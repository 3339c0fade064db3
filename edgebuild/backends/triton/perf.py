"""Serving latency and throughput from NVIDIA's perf_analyzer, over a concurrency sweep,
with the server's own statistics per composing model.

For each concurrency level perf_analyzer (tritonclient 2.51.0's binary, over HTTP, from
the server's venv) measures until its windows are stable (`--stability-percentage 100`:
a shared 2-core machine never gets the default 10 %) and writes a CSV row: throughput
and the client's p50/p90/p95/p99. Around each level the server's cumulative
`/v2/models/stats` are read, and their difference per model (queue, compute input,
compute infer, compute output, divided by the requests it executed) says where the time
went: pre-processing, the model or post-processing.
"""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from edgebuild.backends.triton import client
from edgebuild.backends.triton.env import ServerEnv
from edgebuild.errors import StageError

PERF_SECONDS = 600  # one level may not take longer
STEPS = ("queue", "compute_input", "compute_infer", "compute_output")


def perf_command(env: ServerEnv, url: str, model: str, concurrency: int,
                 interval_ms: int, csv_path: Path, shapes: list[str] | None = None,
                 zeros: bool = False) -> list[str]:
    """`shapes` (["raw:480,640,3"]): the size of each input whose dimensions are -1;
    `zeros`: send zeros, not random values (integer inputs: ids, indices)."""
    return [str(env.perf_analyzer), "-m", model, "-u", url.removeprefix("http://"), "-i",
            "http", "--concurrency-range", f"{concurrency}:{concurrency}",
            "--measurement-interval", str(interval_ms), "--stability-percentage", "100",
            "--max-trials", "10", "--percentile", "99", "-f", str(csv_path),
            *(a for shape in shapes or [] for a in ("--shape", shape)),
            *(["--input-data", "zero"] if zeros else [])]


def _delta(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for model in sorted(after):
        new, old = after[model], before.get(model, {})

        def spent(step: str, n: dict[str, Any] = new, o: dict[str, Any] = old) -> tuple[int, int]:
            a, b = n.get(step, {}), o.get(step, {})
            return (int(a.get("count", 0)) - int(b.get("count", 0)),
                    int(a.get("ns", 0)) - int(b.get("ns", 0)))

        count, _ = spent("success")
        if count <= 0:
            continue
        row: dict[str, Any] = {"model": model, "requests": count}
        for step in STEPS:
            executed, ns = spent(step)
            row[f"{step}_us"] = round(ns / max(executed, 1) / 1000, 1)
        rows.append(row)
    return rows


def sweep(env: ServerEnv, url: str, model: str, levels: list[int], interval_ms: int,
          work: Path, shapes: list[str] | None = None, zeros: bool = False
          ) -> dict[str, Any]:
    """Every level's throughput and client percentiles (ms), and the per-model server
    breakdown at each level (µs per request)."""
    found: list[dict[str, Any]] = []
    environ = dict(os.environ, LD_LIBRARY_PATH=env.library_path())
    command: list[str] = []
    for level in levels:
        path = work / f"perf_c{level}.csv"
        command = perf_command(env, url, model, level, interval_ms, path, shapes, zeros)
        before = client.statistics(url)
        try:
            done = subprocess.run(command, env=environ, capture_output=True, text=True,
                                  timeout=PERF_SECONDS)
        except subprocess.TimeoutExpired as error:
            raise StageError(f"perf_analyzer ran past {PERF_SECONDS} s at concurrency "
                             f"{level}") from error
        (work / f"perf_c{level}.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0 or not path.is_file():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-8:])
            raise StageError(f"perf_analyzer failed at concurrency {level} (code "
                             f"{done.returncode}):\n{tail}",
                             "perf_analyzer's own words above say why (on a busy machine: a "
                             "window that was never stable)")
        after = client.statistics(url)
        (row,) = [r for r in csv.DictReader(io.StringIO(path.read_text()))
                  if int(r["Concurrency"]) == level]
        requests = re.search(r"Request count:\s*(\d+)", done.stdout)
        found.append({
            "concurrency": level, "fps": float(row["Inferences/Second"]),
            "requests": int(requests.group(1)) if requests else None,
            **{f"p{p}": int(row[f"p{p} latency"]) / 1000 for p in (50, 90, 95, 99)},
            "steps": _delta(before, after)})
    return {"model": model, "levels": found, "command": " ".join(command[:1] + [
        a if not a.startswith(str(work)) else Path(a).name for a in command[1:]])}
