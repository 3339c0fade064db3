"""JSON Schema export (for editors; docs/recipe.schema.json is a generated copy)."""

from __future__ import annotations

from typing import Any

from edgebuild.recipe.models import Recipe
from edgebuild.recipe.targets import TargetProfile


def json_schema(kind: str = "recipe") -> dict[str, Any]:
    model = Recipe if kind == "recipe" else TargetProfile
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"edgebuild {kind}"
    return schema
