"""CLI behaviour that needs no model: usage errors, listings, cache maintenance."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgebuild.cache.store import Store
from edgebuild.cli import main
from tests.conftest import REPO


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2


def test_missing_recipe_exits_2_without_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "nope.yaml"]) == 2
    err = capsys.readouterr().err
    assert "nope.yaml: file not found" in err and "Traceback" not in err


def test_targets_lists_every_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    for name in ("host-cpu", "rpi4", "intel-cpu", "jetson-orin-nano", "android", "iphone",
                 "snapdragon"):
        assert name in out


def test_schema_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--kind", "target"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "backend" in schema["properties"]


def test_cache_verify_removes_corrupt_entries(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    store = Store(tmp_path)
    for key, payload in (("a" * 64, b"good"), ("b" * 64, b"bad!")):
        work = store.begin(key)
        (work / "m.bin").write_bytes(payload)
        store.commit(key, work, "onnx", {})
    (store.entry_dir("b" * 64) / "m.bin").write_bytes(b"BAD!")
    assert main(["cache", "ls", "--cache-dir", str(tmp_path)]) == 0
    assert main(["cache", "verify", "--cache-dir", str(tmp_path)]) == 3
    assert "2 entries checked, 1 corrupt" in capsys.readouterr().out
    assert [a.key for a in store.entries()] == ["a" * 64]
    from edgebuild.cache.memo import Memo

    memo: Memo[list[float]] = Memo(tmp_path, "latency-samples", list[float])
    memo.put(memo.key({"samples": "c" * 64}), [1.0])
    assert main(["cache", "gc", "--older-than-days", "0", "--cache-dir", str(tmp_path)]) == 0
    assert list(store.entries()) == []
    assert not list((tmp_path / "memo").rglob("*.json"))  # gates' memo records go too


def test_generated_docs_are_up_to_date() -> None:
    """docs/*-reference.md and the JSON Schemas follow the classes (`make docs`)."""
    result = subprocess.run([sys.executable, "scripts/gen_docs.py", "--check"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("flag", "env", "expected"), [
    (None, "true", True), (None, "TRUE", True), (None, "1", True), (None, "false", False),
    (None, None, False), (False, "true", False), (True, None, True)])
def test_ci_mode_flag_wins_over_the_environment(flag: bool | None, env: str | None,
                                                expected: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from edgebuild.cli import ci_mode

    if env is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", env)
    assert ci_mode(flag) is expected


def test_stage_messages_lose_carriage_returns() -> None:
    from edgebuild.cli import one_line

    assert one_line("converting 10%\r50%\r100%\r\ndone\nok") == "converting 10% 50% 100% done ok"
