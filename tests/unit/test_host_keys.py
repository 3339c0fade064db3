"""A stage whose result depends on the CPU it runs on keys the host CPU: a latency timed on
an AVX2 EPYC is not served from the cache on a Xeon with AMX (the CPU of one machine name
changes between sessions here), while a pure conversion keeps its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.cache import keys
from edgebuild.cache.store import Store
from edgebuild.plan.planner import build_plan
from edgebuild.plan.resolve import KeyResolver
from edgebuild.recipe.loader import load_recipe

RECIPE = """\
name: hosted
model: {onnx: m.onnx}
inputs: [{name: x, shape: [1, 4]}]
datasets: {d: {kind: npz, path: d.npz}}
targets:
  host-cpu:
    passes: [quantize: {mode: dynamic}]
    gates: {accuracy: [{dataset: d, min_cosine: 0.9}], latency: {budget_ms: 5}}
  host-cpu-budget:
    profile: host-cpu
    passes:
      - quantize: {mode: static, calibration: d, budget: {gate: {dataset: d, min_cosine: 0.99}}}
"""


def keys_on(cpu: str, project: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setattr(keys, "host_cpu", lambda: cpu)
    plan = build_plan(load_recipe(project / "r.yaml"))
    resolver = KeyResolver(plan, Store(project / "cache"))
    return {s.id: resolver.key(s, {}) for s in plan.order()}


def test_only_host_bound_stages_key_the_cpu(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from tests.conftest import make_tiny_onnx

    make_tiny_onnx(tmp_path / "m.onnx")
    np.savez(tmp_path / "d.npz", x=np.zeros((2, 4), np.float32))
    (tmp_path / "r.yaml").write_text(RECIPE)
    avx2 = keys_on("AMD EPYC [avx avx2 fma]", tmp_path, monkeypatch)
    amx = keys_on("Intel Xeon [amx_int8 avx2 avx512_vnni]", tmp_path, monkeypatch)
    changed = {sid for sid in avx2 if avx2[sid] != amx[sid]}
    # The latency, the host inference, and the quantize whose budget judges INT8 outputs
    # computed here; the dynamic quantize (no measurement) and every conversion keep theirs.
    assert changed == {"measure-latency@host-cpu", "infer@host-cpu", "quantize#2"}, changed
    assert {"import-onnx", "quantize", "compile@host-cpu"} <= set(avx2) - changed, avx2


def test_the_host_cpu_names_its_isa_extensions() -> None:
    cpu = keys.host_cpu()
    assert cpu.endswith("]") and "[" in cpu
    assert set(cpu.rsplit("[", 1)[1].rstrip("]").split()) <= keys.ISA_FLAGS
