"""A `file.py:fn` a recipe names travels with the modules it imports from its own folder
(issue 27.4): found by reading the source (ast), never by importing it on the client."""

from __future__ import annotations

from pathlib import Path

from edgebuild.execute.remote.carry import carry, local_imports


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_siblings_it_imports_travel_beside_it(tmp_path: Path) -> None:
    models = tmp_path / "models"
    hook = write(models / "train.py", "import sys\nfrom cnn import build\n"
                 "def fit(m):\n    import helpers.more\n    return m\n")
    write(models / "cnn.py", "import numpy\nfrom layers import Conv\n")
    write(models / "layers.py", "Conv = 1\n")
    write(models / "helpers" / "__init__.py", "")
    write(models / "helpers" / "more.py", "")
    write(models / "unrelated.py", "raise SystemExit('never read as code')\n")
    write(models / "marker.py", "open('/tmp/x', 'w')\n")  # never imported: never carried
    assert [rel for rel, _ in local_imports(hook)] == [
        "cnn.py", "helpers/__init__.py", "helpers/more.py", "layers.py"]
    spec = {"recipe_dir": str(tmp_path), "datasets": {}, "source": None,
            "params": {"finetune": "models/train.py:fit"}, "callable_params": ["finetune"]}
    out = carry(spec)
    assert out.spec["params"]["finetune"] == "carried/hooks/train.py:fit"
    assert set(out.files) == {"carried/hooks/train.py", "carried/hooks/cnn.py",
                              "carried/hooks/layers.py", "carried/hooks/helpers/__init__.py",
                              "carried/hooks/helpers/more.py"}
    assert out.files["carried/hooks/cnn.py"][1] == (models / "cnn.py").resolve()


def test_a_file_that_does_not_parse_travels_alone(tmp_path: Path) -> None:
    hook = write(tmp_path / "broken.py", "from cnn import (\n")
    write(tmp_path / "cnn.py", "")
    assert local_imports(hook) == []
