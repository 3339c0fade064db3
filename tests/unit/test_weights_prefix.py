"""A checkpoint saved from DataParallel (keys `module.…`): the error names the cause and
the fix, and `weights_prefix` loads it (issue 30, the CRNN text recognizer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.errors import EdgebuildError

torch = pytest.importorskip("torch")

MODELS = Path(__file__).resolve().parents[2] / "recipes" / "models"


def test_a_data_parallel_checkpoint_is_named_and_loads_with_weights_prefix(
        tmp_path: Path) -> None:
    from edgebuild.passes.torch_model import build_torch_model

    source = {"factory": "fashion_mnist_cnn.py:build", "weights": "fashion_mnist_cnn.pt"}
    model = build_torch_model(source, MODELS)
    wrapped = torch.nn.DataParallel(model)  # what a multi-GPU training script saves
    assert all(k.startswith("module.") for k in wrapped.state_dict())
    torch.save(wrapped.state_dict(), tmp_path / "dp.pt")
    saved = {**source, "weights": str(tmp_path / "dp.pt")}
    with pytest.raises(EdgebuildError) as refused:
        build_torch_model(saved, MODELS)
    assert "DataParallel" in refused.value.hint and 'weights_prefix: {"module.": ""}' in \
        refused.value.hint
    loaded = build_torch_model({**saved, "weights_prefix": {"module.": ""}}, MODELS)
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value)


def test_terminal_colours_never_reach_a_message() -> None:
    from edgebuild.errors import plain

    # What torch's dynamo exporter printed into the CRNN's stage message (issue 30).
    coloured = ("\x1b[1m\x1b[31mConstraints violated (width)!\x1b[0m 2 not in VR[4, int_oo]"
                " \x1b]8;;https://pytorch.org\x07docs\x1b]8;;\x07")
    assert plain(coloured) == "Constraints violated (width)! 2 not in VR[4, int_oo] docs"
    assert plain("no escapes: 50% [1, 3]") == "no escapes: 50% [1, 3]"


def test_recipes_md_shows_weights_prefix_where_model_sources_are_described() -> None:
    """Issue 40: a user with a `module.` checkpoint reads docs/recipes.md's "Model
    sources", not the reference table; its example is a model source that validates."""
    import re

    import yaml

    from edgebuild.recipe.models import ModelSource
    from tests.conftest import REPO

    text = (REPO / "docs" / "recipes.md").read_text()
    section = text.partition("## Model sources")[2].partition("\n## ")[0]
    assert "weights_prefix" in section and "DataParallel" in section
    example = next(block for block in re.findall(r"```yaml\n(.*?)```", section, re.S)
                   if "weights_prefix" in block)
    source = ModelSource.model_validate(yaml.safe_load(example)["model"])
    assert source.weights_prefix == {"module.": ""}
