"""The Core ML tests need coremltools (`edgebuild[coreml]`); conversion and weight
compression run on Linux, prediction only on macOS (those tests are marked `macos`)."""

from __future__ import annotations

import importlib.util
import platform

import pytest

MISSING = importlib.util.find_spec("coremltools") is None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = pytest.mark.skip(reason="Core ML tests need coremltools: pip install "
                               "'edgebuild[coreml]' (scripts/setup.sh installs it)")
    not_mac = pytest.mark.skip(reason="Core ML prediction runs only on macOS; this machine "
                               f"is {platform.system()}")
    for item in items:
        if "integration/coreml" not in str(item.fspath):
            continue
        if MISSING:
            item.add_marker(missing)
        elif "needs_macos" in item.keywords and platform.system() != "Darwin":
            item.add_marker(not_mac)
