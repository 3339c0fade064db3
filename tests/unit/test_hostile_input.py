"""Recipes from people CI should not trust: no escape from --out, no YAML bomb, no
traceback, the documented exit codes (issue: hostile recipes, broken disks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from edgebuild.cli import main
from edgebuild.core.paths import inside, writable_dir
from edgebuild.errors import EdgebuildError
from tests.conftest import REPO

HEAD = """\
name: r
model: {onnx: m.onnx}
inputs: [{name: x, shape: [1, 4]}]
"""
TARGETS = "targets: {host-cpu: {}}\n"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def recipe(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "r.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("target", ["../../victim", "/etc", "a/b", "..", ".", "x\x00y",
                                    "-rf", " spaced"])
def test_target_names_cannot_become_paths(tmp_path: Path, target: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    quoted = target.replace("\\", "\\\\").replace('"', '\\"').replace("\x00", "\\0")
    path = recipe(tmp_path, HEAD + f'targets: {{"{quoted}": {{profile: host-cpu}}}}\n')
    code, output = run_cli(capsys, "validate", str(path))
    assert code == 2 and "Traceback" not in output
    assert f"{path}:4:" in output and "cannot be a folder name" in output


def test_recipe_name_dotdot_is_refused_at_its_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = recipe(tmp_path, HEAD.replace("name: r", "name: '..'") + TARGETS)
    code, output = run_cli(capsys, "validate", str(path))
    assert code == 2 and f"{path}:1:" in output and "folder name" in output


def test_inside_refuses_every_escape(tmp_path: Path) -> None:
    assert inside(tmp_path, "artifacts", "host-cpu") == (tmp_path / "artifacts" /
                                                          "host-cpu").resolve()
    for parts in (("..",), ("artifacts", "../../x"), ("/etc",), ("a", "..", ".."), (".",)):
        with pytest.raises(EdgebuildError, match="not inside"):
            inside(tmp_path, *parts)


@pytest.mark.parametrize("name,text,expect", [
    ("alias bomb", HEAD + TARGETS + "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 10)}]\n"
        for i in range(9)), "alias bomb"),
    ("cycle", HEAD + TARGETS + "a: &x {b: *x}\n", "refers to itself"),
    # Either guard trips first: the parser's recursion guard, or the 50-level limit
    # (when an in-process onnx2tf import has raised the recursion limit); both locate it.
    ("deep", HEAD + TARGETS + "a: " + "[" * 5000 + "]" * 5000 + "\n", "nested"),
    ("!!int", HEAD.replace("[1, 4]", "[1, !!int abc]") + TARGETS, "not a valid int"),
    ("!!bool", HEAD + TARGETS + "description: !!bool maybe\n", "not a valid bool"),
    ("!!timestamp", HEAD + TARGETS + "description: !!timestamp yesterday\n",
     "not a valid timestamp"),
    ("NUL", HEAD + TARGETS + "description: a\x00b\n", "is not allowed in YAML"),
    ("DEL", HEAD + TARGETS + "description: a\x7fb\n", "is not allowed in YAML"),
    ("C1", HEAD + TARGETS + "description: a\u0090b\n", "is not allowed in YAML"),
    ("tagged map", HEAD + TARGETS + "datasets: !!omap [{a: 1}]\n", "is not read"),
    ("python tag", HEAD + TARGETS + "description: !!python/object/apply:os.system [id]\n",
     "is not read"),
    ("factory without callable", HEAD.replace("{onnx: m.onnx}", "{factory: torchvision}")
     + TARGETS, "names no callable"),
    ("threads 1e9", HEAD + "targets: {host-cpu: {measure: {threads: 1000000000}}}\n",
     "less than or equal to 1024"),
    ("min > max iterations", HEAD + "targets: {host-cpu: {measure: {min_iterations: 1000, "
     "max_iterations: 5}}}\n", "more than max_iterations"),
    ("no providers", HEAD + "targets: {host-cpu: {options: {execution_providers: []}}}\n",
     "at least 1 item"),
])
def test_malformed_recipes_get_a_located_error(tmp_path: Path, name: str, text: str,
                                               expect: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, output = run_cli(capsys, "validate", str(recipe(tmp_path, text)))
    assert code == 2, output
    assert "Traceback" not in output and expect in output, output
    assert f"{tmp_path / 'r.yaml'}" in output


def test_ten_thousand_unknown_keys_make_a_short_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = "".join(f"  k{i}: 1\n" for i in range(10_000))
    code, output = run_cli(capsys, "validate",
                           str(recipe(tmp_path, HEAD + TARGETS + "policy:\n" + keys)))
    assert code == 2 and "... and 9970 more" in output and len(output.splitlines()) < 100


@pytest.mark.parametrize("flag", ["--out", "--cache-dir"])
def test_out_or_cache_that_is_a_file_is_a_usage_error(
        tmp_path: Path, flag: str, tiny_project: object,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tiny_project()  # type: ignore[operator]
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    for target in (not_a_folder, Path("/dev/null")):
        code, output = run_cli(capsys, "run", str(path), flag, str(target))
        assert code == 2 and "is not a folder" in output and "Traceback" not in output
    with pytest.raises(EdgebuildError, match="is not a folder"):
        writable_dir(not_a_folder, "--out")


def test_an_unexpected_exception_is_exit_4_with_the_traceback_in_a_log(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from edgebuild import cli

    def broken(args: object) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setitem(cli.COMMANDS, "targets", broken)
    code, output = run_cli(capsys, "targets")
    assert code == 4 and "Traceback" not in output
    assert "internal error: ZeroDivisionError: a bug" in output
    log = Path(output.split("the traceback is in ")[1].split(";")[0])
    assert "ZeroDivisionError" in log.read_text() and "Traceback" in log.read_text()
    log.unlink()


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`edgebuild plan ... | head` used to end in a BrokenPipeError traceback."""
    done = subprocess.run(
        f"{sys.executable} -m edgebuild passes | head -c 1", shell=True, cwd=REPO,
        capture_output=True, text=True, check=False)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


def test_cache_verify_removes_an_entry_whose_manifest_is_unreadable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = tmp_path / "cache" / "objects" / "ab" / ("ab" + "0" * 62)
    entry.mkdir(parents=True)
    (entry / "artifact.json").write_text("{not json")
    code, output = run_cli(capsys, "cache", "verify", "--cache-dir", str(tmp_path / "cache"))
    assert code == 3 and "1 entries checked, 1 corrupt" in output and not entry.exists()


def test_validate_and_plan_never_run_the_recipes_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Recipes are code (a factory, a callable dataset): only `run` may execute them."""
    marker = tmp_path / "executed"
    (tmp_path / "m.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n"
        "def build():\n    raise SystemExit('called')\n"
        "def data():\n    raise SystemExit('called')\n")
    text = HEAD.replace("{onnx: m.onnx}", "{factory: m.py:build}") + (
        "datasets: {d: {kind: callable, function: m.py:data}}\n"
        "targets: {host-cpu: {gates: {accuracy: {dataset: d, min_cosine: 0.9}}}}\n")
    path = recipe(tmp_path, text)
    for command in ("validate", "plan"):
        code, output = run_cli(capsys, command, str(path), *(
            ["--cache-dir", str(tmp_path / "cache")] if command == "plan" else []))
        assert code == 0, output
    assert not marker.exists()
