"""The TFLite tests need tensorflow, ai-edge-litert and onnx2tf (`edgebuild[tflite]`)."""

from __future__ import annotations

import importlib.util

import pytest

MISSING = [name for name in ("tensorflow", "ai_edge_litert", "onnx2tf")
           if importlib.util.find_spec(name) is None]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not MISSING:
        return
    skip = pytest.mark.skip(reason=f"TFLite tests need {', '.join(MISSING)}: "
                            "install with EDGEBUILD_EXTRAS=dev,tflite bash scripts/setup.sh")
    for item in items:
        if "integration/tflite" in str(item.fspath):
            item.add_marker(skip)
