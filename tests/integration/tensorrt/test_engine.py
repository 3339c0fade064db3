"""The engine build and runner with the real TensorRT API: only on a machine with an NVIDIA
GPU and TensorRT (a Jetson, or an x86 box with NVIDIA's wheels). Skipped here, with why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgebuild.backends.tensorrt.cuda import gpu_here
from tests.conftest import make_tiny_onnx
from tests.integration.tensorrt.test_onnx_side import compile_for_trt, run, samples

pytest.importorskip("tensorrt", reason="TensorRT is not installed (it needs NVIDIA's wheels or "
                    "JetPack; docs/backends-tensorrt.md)")
GPU = gpu_here()
pytestmark = [pytest.mark.tensorrt,
              pytest.mark.skipif(isinstance(GPU, str), reason=f"needs an NVIDIA GPU: {GPU}")]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_engine_builds_runs_and_matches_onnx_runtime(tmp_path: Path, precision: str) -> None:
    from edgebuild.backends.tensorrt import engine
    from edgebuild.backends.tensorrt.options import TensorRtOptions

    assert not isinstance(GPU, str)
    version = engine.major_minor(engine.trt_version())
    source = make_tiny_onnx(tmp_path / "tiny.onnx")
    compile_for_trt(source, tmp_path / "onnx", precision=precision, tensorrt_version=version)
    options = TensorRtOptions(precision=precision, tensorrt_version=version,  # type: ignore[arg-type]
                              compute_capability=GPU.compute_capability,
                              timing_cache_dir=str(tmp_path / "timing"))
    built = tmp_path / "engine"
    built.mkdir()
    tag = engine.build(tmp_path / "onnx" / "model.onnx", built, options, {}, GPU)
    assert tag["compute_capability"] == GPU.compute_capability
    assert not tag["timing_cache"]["reused"]
    again = tmp_path / "again"
    again.mkdir()
    assert engine.build(tmp_path / "onnx" / "model.onnx", again, options, {}, GPU
                        )["timing_cache"]["reused"]  # the device-kept cache warmed it
    x = samples().inputs["x"][:1]
    with engine.EngineRunner(built) as runner:
        (out,) = runner.infer({"x": x}).values()
    np.testing.assert_allclose(out, run(source, x), rtol=1e-2, atol=1e-2)
    stale = json.loads((built / engine.TAG).read_text())
    (built / engine.TAG).write_text(json.dumps({**stale, "tensorrt": "0.0"}))
    with pytest.raises(Exception, match=r"was built with TensorRT 0\.0"), \
            engine.EngineRunner(built):
        pass
