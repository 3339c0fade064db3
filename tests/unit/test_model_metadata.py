"""A model's own metadata from its ONNX file's `metadata_props`: read as data, never as
code, bounded, and text wherever a report shows it (issue 29, "Robust on real exports")."""

from __future__ import annotations

import pytest

from edgebuild.passes.onnx_metadata import (
    MAX_CLASSES,
    MAX_NAME_CHARS,
    MAX_VALUE_CHARS,
    ModelMetadata,
    read_metadata,
)
from edgebuild.report.html import html_page
from edgebuild.report.model import Report, TargetReport
from edgebuild.report.render import markdown

COCO = "{0: 'person', 1: 'bicycle', 2: 'car', 3: 'motorcycle', 4: 'airplane'}"


def test_ultralytics_values_are_read() -> None:
    found = read_metadata({"task": "detect", "stride": "32", "imgsz": "[640, 640]",
                           "names": COCO, "args": "{'batch': 1}", "author": "Ultralytics"})
    assert found == ModelMetadata(task="detect", stride=32, imgsz=[640, 640],
                                  names=["person", "bicycle", "car", "motorcycle", "airplane"])
    assert found.summary() == ("task detect, 5 classes (person, bicycle, car, motorcycle, …), "
                               "stride 32, input 640×640")


@pytest.mark.parametrize("names", ['{"0": "a", "1": "b"}', "['a', 'b']", "('a', 'b')"])
def test_json_dicts_and_lists_of_names(names: str) -> None:
    assert read_metadata({"names": names}).names == ["a", "b"]


def test_nothing_known_is_empty() -> None:
    assert read_metadata({"author": "someone"}).empty
    assert read_metadata({"stride": "[8, 16, 32]", "imgsz": "320"}) == ModelMetadata(
        stride=32, imgsz=[320])


@pytest.mark.parametrize(("key", "value", "why"), [
    ("names", "__import__('os').system('touch /tmp/pwned')", "not a plain literal"),
    ("names", "{0: 'a', 1: open('/etc/passwd').read()}", "not a plain literal"),
    ("names", "{**x}", "not a plain literal"),
    ("names", "{0: 'a', 2: 'b'}", "keys are not the class indices"),
    ("names", "{0: 'a', 1: 2}", "a class name is not a string"),
    ("names", "{0: b'a'}", "not a plain literal"),
    ("names", "[" * 300 + "]" * 300, "not a literal"),
    ("names", "x" * (MAX_VALUE_CHARS + 1), "KiB"),
    ("names", str(list(map(str, range(MAX_CLASSES + 1)))), "classes"),
    ("stride", "True", "not an integer"),
    ("stride", "-32", "not a plain literal"),
    ("stride", "9" * 5000, "not a literal"),
    ("imgsz", "[640, 640, 3, 1, 1]", "not 1 to 4 sizes"),
    ("task", "<script>alert(1)</script>", "not a short word"),
])
def test_unreadable_values_are_ignored_and_named(key: str, value: str, why: str) -> None:
    found = read_metadata({key: value})
    assert getattr(found, key) is None
    assert len(found.ignored) == 1 and found.ignored[0].startswith(f"{key}: ")
    assert why in found.ignored[0]


def test_long_names_are_cut() -> None:
    found = read_metadata({"names": str(["n" * 1000])})
    assert found.names == ["n" * MAX_NAME_CHARS]


def test_the_file_never_writes_markup_into_the_reports() -> None:
    hostile = "<img src=x onerror=alert(1)>|[x](javascript:alert(2))`"
    model = read_metadata({"names": repr({0: hostile, 1: "ok\n## fake heading"}),
                           "task": "detect"})
    assert model.names is not None and model.names[0] == hostile
    target = TargetReport(name="host-cpu", profile="host-cpu", backend="onnxruntime",
                          model=model)
    report = Report(recipe="demo", recipe_file="r.yaml", edgebuild_version="0", started="",
                    seconds=1.0, exit_code=0, stages=[], targets=[target], counts={})
    summary = markdown(report)
    line = next(x for x in summary.splitlines() if x.startswith("Model metadata"))
    assert "task detect, 2 classes (" in line
    assert "<img" not in line and "](javascript" not in line and "|" not in line
    assert "\n## fake" not in summary
    html = html_page(report)
    assert "<img src=x" not in html and "&lt;img src=x" in html
