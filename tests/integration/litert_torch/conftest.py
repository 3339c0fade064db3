"""The LiteRT-Torch tests need litert-torch and ai-edge-quantizer, which scripts/setup.sh
installs with --no-deps (their declared pins would downgrade pydantic) when the tflite and
executorch extras are installed, as in CI. An install without them
(EDGEBUILD_LITERT_TORCH=0) skips these; the backend's "not buildable here" without them is
tested in tests/unit."""

from __future__ import annotations

import importlib.util

import pytest

MISSING = [name for name in ("litert_torch", "ai_edge_quantizer")
           if importlib.util.find_spec(name) is None]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = pytest.mark.skip(reason=f"LiteRT-Torch is not installed ({', '.join(MISSING)}): "
                               "EDGEBUILD_LITERT_TORCH=1 bash scripts/setup.sh adds it")
    for item in items:
        if MISSING and "integration/litert_torch" in str(item.fspath):
            item.add_marker(missing)
