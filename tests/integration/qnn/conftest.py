"""The QNN tests need onnxruntime-qnn (`edgebuild[qnn]`), whose HTP backend runs as an
emulator on x86-64."""

from __future__ import annotations

import importlib.util

import pytest

MISSING = importlib.util.find_spec("onnxruntime_qnn") is None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not MISSING:
        return
    skip = pytest.mark.skip(reason="QNN tests need onnxruntime-qnn: pip install "
                            "'edgebuild[qnn]' (scripts/setup.sh installs it)")
    for item in items:
        if "integration/qnn" in str(item.fspath):
            item.add_marker(skip)
