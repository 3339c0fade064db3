"""keep_float's names for ai-edge-quantizer (backends/litert_torch/layers.py): a module's
location prefix as LiteRT-Torch writes it into tensor names, from torch.export's module
stack, and a regex that finds the module's ops and its children's, never a sibling whose
name merely starts the same. torch only (no LiteRT-Torch)."""

from __future__ import annotations

import re
from typing import Any

import pytest

torch = pytest.importorskip("torch")


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 1)

    def forward(self, x: Any) -> Any:
        return torch.relu(self.conv(x))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.stem1 = torch.nn.Conv2d(4, 4, 1)

    def forward(self, x: Any) -> Any:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.stem1(x)


def test_scopes_are_litert_torchs_module_locations() -> None:
    from edgebuild.backends.litert_torch import layers

    exported = torch.export.export(Net().eval(), (torch.zeros(1, 3, 8, 8),))
    found = layers.scopes(exported, ["stem", "blocks.1", "blocks.1.conv"])
    root = f"{__name__}.Net"
    assert found == {
        "stem": f"{root}/torch.nn.modules.conv.Conv2d_stem",
        # A ModuleList is never called: the block is the list's child, named by its index.
        "blocks.1": f"{root}/{__name__}.Block_1",
        "blocks.1.conv": f"{root}/{__name__}.Block_1/torch.nn.modules.conv.Conv2d_conv",
    }


def test_the_pattern_finds_the_module_among_fused_locations() -> None:
    from edgebuild.backends.litert_torch import layers

    scope = "m.Net/torch.nn.modules.conv.Conv2d_stem"
    regex = layers.pattern(scope)
    assert re.search(regex, f"{scope};")
    assert re.search(regex, f"m.Net/torch.nn.modules.activation.ReLU_act;;{scope};")
    assert re.search(regex, f"{scope}/torch.nn.modules.padding.ZeroPad2d_pad;")
    assert not re.search(regex, "m.Net/torch.nn.modules.conv.Conv2d_stem1;")  # a sibling
    assert not re.search(regex, f"x.{scope};")  # another root's module


def test_a_module_no_op_is_named_after_is_an_error() -> None:
    from edgebuild.backends.litert_torch import layers
    from edgebuild.errors import StageError

    layers.check({"stem": 2})
    with pytest.raises(StageError, match="keep_float fc: no op"):
        layers.check({"stem": 2, "fc": 0})


def test_a_module_computing_an_output_is_also_found_by_the_outputs_name() -> None:
    """The model's output tensor is named after the signature (serving_default_output_0_
    output), not after the module that computes it: the head's regex takes both."""
    from edgebuild.backends.litert_torch import layers

    exported = torch.export.export(Net().eval(), (torch.zeros(1, 3, 8, 8),))
    assert layers.produces(exported, ["stem", "stem1", "blocks.1"]) == {"stem1": [0]}
    regex = layers.pattern("m.Net/torch.nn.modules.conv.Conv2d_stem1",
                           ["serving_default_output_0_output"])
    assert re.search(regex, "serving_default_output_0_output;")
    assert re.search(regex, "m.Net/torch.nn.modules.conv.Conv2d_stem1;")
    assert not re.search(regex, "serving_default_output_0_output_1;")
