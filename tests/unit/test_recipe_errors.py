"""Every recipe mistake names file:line:column and the key, with a hint where one exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.errors import RecipeError
from edgebuild.recipe.loader import load_recipe
from edgebuild.recipe.yaml_loader import parse_yaml

BASE = """\
name: demo
model: {onnx: m.onnx}
inputs:
  - {name: x, shape: [1, 4]}
datasets:
  calib: {kind: npz, path: d.npz}
targets:
  host-cpu:
    gates:
      latency: {budget_ms: 5}
"""


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    return [str(p) for p in info.value.problems]


def test_valid_recipe_loads(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(BASE)
    loaded = load_recipe(path)
    assert loaded.recipe.name == "demo"
    assert loaded.targets["host-cpu"].backend == "onnxruntime"


def test_misspelled_top_level_key_names_line_and_suggests(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, BASE.replace("datasets:", "datasetz:"))
    assert "r.yaml:5:1" in problem
    assert "unknown key 'datasetz'" in problem
    assert "did you mean 'datasets'?" in problem


def test_misspelled_nested_key(tmp_path: Path) -> None:
    missing, problem = sorted(problems_of(tmp_path, BASE.replace("budget_ms", "budget_msec")),
                              key=lambda p: "unknown" in p)
    assert "missing required key 'budget_ms'" in missing
    assert "r.yaml:10:" in problem
    assert "targets.host-cpu.gates.latency.budget_msec" in problem
    assert "did you mean 'budget_ms'?" in problem


def test_unknown_target_suggests_profile(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, BASE.replace("host-cpu:", "host-cpo:"))
    assert "r.yaml:8:" in problem
    assert "no target profile named 'host-cpo'" in problem
    assert "did you mean 'host-cpu'?" in problem


def test_unknown_pass_suggests(tmp_path: Path) -> None:
    text = BASE + "passes:\n  - onnx-optimise\n"
    (problem,) = problems_of(tmp_path, text)
    assert "r.yaml:12:" in problem
    assert "did you mean 'onnx-optimize'?" in problem


def test_bad_pass_param_points_into_the_pass(tmp_path: Path) -> None:
    text = BASE + "passes:\n  - onnx-optimize: {simplifer: onnxslim}\n"
    (problem,) = problems_of(tmp_path, text)
    assert "r.yaml:12:" in problem
    assert "did you mean 'simplifier'?" in problem


def test_wrong_type_names_value(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, BASE.replace("budget_ms: 5", "budget_ms: fast"))
    assert "r.yaml:10:" in problem
    assert "'fast'" in problem


def test_fraction_in_percent_field_gets_hint(tmp_path: Path) -> None:
    text = BASE.replace("latency: {budget_ms: 5}",
                        "accuracy: {dataset: calib, min_top1_agreement: 0.99}")
    (problem,) = problems_of(tmp_path, text)
    assert "in percent" in problem


def test_unknown_dataset_in_gate(tmp_path: Path) -> None:
    text = BASE.replace("latency: {budget_ms: 5}", "accuracy: {dataset: calb, min_top1: 50}")
    (problem,) = problems_of(tmp_path, text)
    assert "no dataset named 'calb'" in problem
    assert "did you mean 'calib'?" in problem


def test_unknown_dataset_kind(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, BASE.replace("kind: npz", "kind: npy"))
    assert "r.yaml:6:" in problem
    assert "unknown kind 'npy'" in problem


def test_several_problems_reported_together(tmp_path: Path) -> None:
    text = BASE.replace("datasets:", "datasetz:").replace("name: demo", "nme: demo")
    assert len(problems_of(tmp_path, text)) == 2


def test_duplicate_key_is_an_error() -> None:
    with pytest.raises(RecipeError, match=r"f.yaml:2:1.*duplicate key 'a'"):
        parse_yaml("a: 1\na: 2\n", "f.yaml")


def test_yaml_syntax_error_has_position() -> None:
    with pytest.raises(RecipeError, match=r"f.yaml:2:\d+"):
        parse_yaml("a: [1,\nb: }\n", "f.yaml")


def test_missing_file() -> None:
    with pytest.raises(RecipeError, match="file not found"):
        load_recipe(Path("/nonexistent/recipe.yaml"))


def test_bad_backend_option_override(tmp_path: Path) -> None:
    text = BASE.replace("    gates:", "    options: {graph_level: all}\n    gates:")
    (problem,) = problems_of(tmp_path, text)
    assert "unknown key 'graph_level'" in problem
    assert "did you mean 'graph_optimization_level'?" in problem


def test_yaml_merge_keys_are_applied_and_explicit_keys_win() -> None:
    doc = parse_yaml("base: &b {a: 1, b: 2}\nchild:\n  <<: *b\n  b: 3\n", "x.yaml")
    assert doc.data["child"] == {"a": 1, "b": 3}


def test_merging_a_scalar_is_a_clear_error() -> None:
    with pytest.raises(RecipeError, match="merges mappings only"):
        parse_yaml("s: &s 1\nchild:\n  <<: *s\n", "x.yaml")


# Mistakes that used to validate and plan, then fail a stage (issue 27, item 8).


@pytest.mark.parametrize(("factory", "message", "hint"), [
    ("no_such_module_xyz:build", "'no_such_module_xyz:build': no module named "
     "'no_such_module_xyz' is installed", "pip install"),
    ("no_such_module_xyz.sub:Net.build", "no module named 'no_such_module_xyz'", "pip install"),
    ("models/nope.py:build", "'models/nope.py:build': file ", "relative to the recipe file"),
    ("beside:build", "no module named 'beside'", "write `beside.py:build`"),
])
def test_factory_that_names_no_module_or_file_is_refused(tmp_path: Path, factory: str,
                                                         message: str, hint: str) -> None:
    (tmp_path / "beside.py").write_text("raise SystemExit('validation imported me')\n")
    (problem,) = problems_of(tmp_path, BASE.replace("{onnx: m.onnx}",
                                                    f"{{factory: '{factory}'}}"))
    assert "r.yaml:2:" in problem and "model.factory" in problem
    assert message in problem and hint in problem


def test_factory_of_an_installed_package_or_a_file_is_checked_without_importing(
        tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text("raise SystemExit('validation imported me')\n")
    for factory in ("net.py:build", "pydantic.main:BaseModel", f"{tmp_path}/net.py:build"):
        path = tmp_path / "ok.yaml"
        path.write_text(BASE.replace("{onnx: m.onnx}", f"{{factory: '{factory}'}}"))
        load_recipe(path)


def test_callable_dataset_that_names_no_file_is_refused(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, BASE.replace(
        "{kind: npz, path: d.npz}", "{kind: callable, function: gone.py:data}"))
    assert "r.yaml:6:" in problem and "datasets.calib.function" in problem
    assert "file " in problem and "gone.py not found" in problem


def test_detection_gate_naming_one_output_twice_is_a_recipe_error(tmp_path: Path) -> None:
    text = BASE.replace("inputs:", "outputs: [boxes, scores]\ninputs:").replace(
        "      latency: {budget_ms: 5}\n",
        "      accuracy: {dataset: calib, task: detection, boxes: boxes, scores: boxes, "
        "min_map50: 90}\n")
    (problem,) = problems_of(tmp_path, text)
    assert "r.yaml:11:" in problem and "targets.host-cpu.gates.accuracy" in problem
    assert "`boxes:` and `scores:` both name output 'boxes'" in problem


def test_empty_labels_path_is_a_recipe_error(tmp_path: Path) -> None:
    text = BASE.replace("{kind: npz, path: d.npz}",
                        "{kind: images, path: img, labels: {format: yolo, path: ''}}")
    (problem,) = problems_of(tmp_path, text)
    assert "r.yaml:6:" in problem and "labels.path is empty" in problem


SEARCH = BASE.replace("      latency: {budget_ms: 5}\n", """\
      accuracy: {dataset: calib, min_cosine: 0.9}
    search:
      candidates:
        fp32: {}
        NAME
""")


def test_a_5000_character_candidate_name_is_refused(tmp_path: Path) -> None:
    """It validated, then failed its stage with `Errno 36 File name too long`."""
    long = "c" * 5000
    (problem,) = problems_of(tmp_path, SEARCH.replace(
        "NAME", f"? {long}\n        : {{options: {{graph_optimization_level: basic}}}}"))
    assert "r.yaml:14:" in problem and "has 5000 characters; at most 100" in problem
    assert long not in problem


def test_a_grid_value_cannot_make_a_candidate_name_too_long(tmp_path: Path) -> None:
    long = "b" * 300
    (problem,) = problems_of(tmp_path, SEARCH.replace(
        "NAME", f"ort: {{grid: {{options.graph_optimization_level: [basic, {long}]}}}}"))
    assert "r.yaml:14:" in problem and "candidates.ort.grid" in problem
    assert "has 304 characters; at most 100" in problem


def test_libyaml_and_pure_python_agree_on_every_shipped_file(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """The C composer (fast) gives the values and the line/column of every key that the
    pure-Python one gives, on every recipe and profile the project ships."""
    import yaml

    from edgebuild.recipe import yaml_loader

    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML built without libyaml: only the pure-Python composer is used")
    root = Path(__file__).resolve().parents[2]
    files = sorted([*root.glob("recipes/**/*.yaml"), *root.glob("targets/*.yaml")])
    assert len(files) > 5
    for file in files:
        text = file.read_text()
        monkeypatch.setattr(yaml_loader, "LOADER", yaml.CSafeLoader)
        fast = parse_yaml(text, str(file))
        monkeypatch.setattr(yaml_loader, "LOADER", yaml.SafeLoader)
        assert parse_yaml(text, str(file)) == fast, file
