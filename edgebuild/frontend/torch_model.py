"""Build the recipe's PyTorch model: call the factory, load weights safely, eval()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgebuild.errors import EdgebuildError
from edgebuild.recipe.files import load_callable, resolve_file
from edgebuild.recipe.models import ModelSource


def build_torch_model(source: dict[str, Any], base_dir: Path) -> Any:
    import torch

    spec = ModelSource.model_validate(source)
    assert spec.factory is not None  # the planner only sends factory sources here
    factory = load_callable(spec.factory, base_dir)
    if not callable(factory):
        raise EdgebuildError(f"model.factory '{spec.factory}' is not callable")
    model = factory(*spec.args, **spec.kwargs)
    if not isinstance(model, torch.nn.Module):
        raise EdgebuildError(f"model.factory '{spec.factory}' returned "
                             f"{type(model).__name__}, not a torch.nn.Module")
    if spec.weights is not None:
        path = resolve_file(spec.weights, base_dir)
        # weights_only=True: a checkpoint is data, never code to execute.
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch reports a bad file as whatever its parser hits
            raise EdgebuildError(
                f"model.weights {path.name} is not a checkpoint torch.load(weights_only=True) "
                f"can read ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})",
                "weights are a state_dict saved with torch.save; files that would run "
                "pickled code are refused on purpose") from None
        if isinstance(state, dict) and "state_dict" in state:
            state = state["state_dict"]
        if isinstance(state, dict) and spec.weights_prefix:
            state = renamed(state, spec.weights_prefix)
        result = model.load_state_dict(state, strict=False)
        if result.missing_keys or result.unexpected_keys:
            raise EdgebuildError(
                f"weights {path.name} do not fit the model: "
                f"missing {result.missing_keys[:5]}, unexpected {result.unexpected_keys[:5]}",
                _mismatch_hint(result.missing_keys, result.unexpected_keys))
    if spec.prepost is not None:
        from edgebuild.frontend.prepost_torch import wrap

        model = wrap(model, spec.prepost)
    return model.eval()


def renamed(state: dict[str, Any], prefixes: dict[str, str]) -> dict[str, Any]:
    """The checkpoint's keys with each prefix of `prefixes` replaced (the first that fits)."""
    out = {}
    for key, value in state.items():
        for old, new in prefixes.items():
            if key.startswith(old):
                key = new + key[len(old):]
                break
        out[key] = value
    return out


def _mismatch_hint(missing: list[str], unexpected: list[str]) -> str:
    """DataParallel's `module.` prefix is the usual cause of a checkpoint that fits no key."""
    for prefix in ("module.", "model.", "_orig_mod."):
        stripped = {k[len(prefix):] for k in unexpected if k.startswith(prefix)}
        if stripped and set(missing) <= stripped:
            origin = {"module.": "a DataParallel / DistributedDataParallel wrapper",
                      "model.": "a wrapper module holding it as `model`",
                      "_orig_mod.": "torch.compile"}[prefix]
            return (f"the checkpoint's keys start with '{prefix}' (saved from {origin}): add "
                    f'`weights_prefix: {{"{prefix}": ""}}` under `model:`')
    return "check that model.factory builds the architecture the weights were saved from"
