"""`core/paths.confined`: the one check every name from outside passes before a write."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.core.paths import confined
from edgebuild.errors import EdgebuildError

HOSTILE = ["/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "", ".", "..", "a\\..\\b",
           "a\x00b", "a\nb", "x" * 300, "a/" * 600 + "b", "/"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_refused_before_anything_is_written(tmp_path: Path, name: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(EdgebuildError, match="refusing"):
        confined(root, name)
    assert list(tmp_path.rglob("*")) == [root]


def test_plain_relative_names_land_inside(tmp_path: Path) -> None:
    assert confined(tmp_path, "model.onnx") == (tmp_path / "model.onnx").resolve()
    assert confined(tmp_path, "a/b/c.bin") == (tmp_path / "a" / "b" / "c.bin").resolve()


def test_a_symlink_under_the_root_cannot_lead_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "up").symlink_to(tmp_path)
    with pytest.raises(EdgebuildError, match="not inside"):
        confined(root, "up/escaped.txt")


def test_a_name_that_is_not_a_string_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EdgebuildError, match="not a string"):
        confined(tmp_path, 42)  # type: ignore[arg-type]
