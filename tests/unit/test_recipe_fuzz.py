"""Hundreds of malformed recipes through `validate` and `plan`: every one ends with a
documented exit code, no traceback, and a file:line for every recipe problem.

The recipes are mutations of a valid one (seeded, so a failure reproduces): lines
deleted, duplicated, swapped, re-indented or truncated; values replaced with wrong
types, YAML tags, anchors, control characters, path-like names; random bytes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from edgebuild.cli import main

VALID = """\
name: fuzz
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4], dtype: float32}]
outputs: [y]
datasets:
  samples: {kind: npz, path: samples.npz, labels: y}
passes:
  - onnx-optimize
  - quantize: {mode: static, calibration: samples, method: minmax}
targets:
  host-cpu:
    measure: {warmup_iterations: 1, min_iterations: 5, min_seconds: 0, max_busy_share: null}
    gates:
      accuracy: {dataset: samples, min_top1_agreement: 90, min_cosine: 0.99}
      latency: {budget_ms: 100, percentile: 90}
      size: {max_mb: 1}
  intel-cpu:
    options: {precision: f32}
    gates: {accuracy: {dataset: samples, output: y, max_abs_error: 0.5}}
policy: {unmeasurable: warn}
"""

JUNK = ["", "~", "null", "0", "-1", "1e9", "nan", "[]", "{}", "[1, [2, [3]]]", "'..'",
        "../../etc", "/tmp/x", "!!int abc", "!!bool maybe", "!!timestamp never", "!!set {a}",
        "&a [1]", "*missing", "\"\\x00\"", "\"\\u0090\"", "{a: &b {c: *b}}", "x" * 300,
        "!!python/name:os.system", "'x: y'", "[", "{", "- a", "yes", "0x1F", "2026-01-01",
        "{kind: nope}", "{onnx: nope.onnx}", "[{name: x, shape: [0]}]", "host-cpu"]
KEYS = ["nmae", "target", "passes", "gates", "accuracy", "measure", "options", "profile",
        "search", "inherit_passes", "dataset", "../x", "\x7f"]


def mutate(rng: random.Random, text: str) -> str | bytes:
    lines = text.splitlines()
    kind = rng.randrange(9)
    i = rng.randrange(len(lines))
    if kind == 0:
        del lines[i]
    elif kind == 1:
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif kind == 2:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 3:
        lines[i] = " " * rng.choice([1, 3, 5]) + lines[i]
    elif kind == 4:
        return text[:rng.randrange(len(text))]
    elif kind == 5:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
    elif kind == 6:
        indent = len(lines[i]) - len(lines[i].lstrip())
        lines.insert(i, " " * indent + f"{rng.choice(KEYS)}: {rng.choice(JUNK)}")
    else:  # replace a value after a colon
        matches = list(re.finditer(r":\s*([^,{}\[\]\n]+)", lines[i]))
        if matches:
            m = rng.choice(matches)
            lines[i] = lines[i][:m.start(1)] + rng.choice(JUNK) + lines[i][m.end(1):]
        else:
            lines[i] = rng.choice(JUNK)
    if rng.random() < 0.3:
        return mutate(rng, "\n".join(lines) + "\n")
    return "\n".join(lines) + "\n"


CASES = 400


def test_malformed_recipes(tiny_project: Callable[..., Path],
                           capsys: pytest.CaptureFixture[str]) -> None:
    project = tiny_project(VALID, name="valid.yaml").parent
    cache = project / "cache"
    rng = random.Random(20261123)
    codes: dict[int, int] = {}
    for case in range(CASES):
        path = project / f"case{case}.yaml"
        text = mutate(rng, VALID)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, errors="surrogateescape")
        for command in (["validate", str(path)], ["plan", str(path), "--cache-dir", str(cache)]):
            code = main(command)
            captured = capsys.readouterr()
            output = captured.out + captured.err
            where = f"case {case} ({command[0]}):\n{text!r}\n{output}"
            codes[code] = codes.get(code, 0) + 1
            assert code in (0, 1, 2, 3), where
            assert "Traceback" not in output and "internal error" not in output, where
            for line in output.splitlines():
                if line.startswith(f"  {path}"):  # one problem of a RecipeError
                    assert re.match(rf"  {re.escape(str(path))}:\d+:\d+: ", line), where
            if code == 2 and "invalid configuration" not in output and output.startswith(
                    "error:") and str(path) in output:
                assert re.search(rf"{re.escape(str(path))}:\d+", output), where
    assert codes.get(0, 0) > 0 and codes.get(2, 0) > CASES // 2  # both kinds were exercised
