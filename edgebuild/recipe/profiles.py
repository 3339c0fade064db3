"""Target profiles as files: where they are looked up (`$EDGEBUILD_TARGETS`, a project's
own `targets/` folder, the built-in ones; first match wins) and how each is loaded and
validated (its models are core/profile.py, named in recipe/targets.py).

Below the recipe loader, which checks a recipe against the profiles it names
(loader.py), and read alone by the CLI's `targets` and `worker` commands.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from edgebuild.errors import Problem, RecipeError
from edgebuild.recipe.targets import TargetProfile
from edgebuild.recipe.validate import validate
from edgebuild.recipe.yaml_loader import LoadedYaml, load_yaml

BUILTIN_TARGETS = Path(__file__).resolve().parents[2] / "targets"
TARGETS_ENV = "EDGEBUILD_TARGETS"


@dataclass(frozen=True)
class LoadedProfile:
    profile: TargetProfile
    doc: LoadedYaml


def profile_dirs(recipe_path: Path | None = None) -> list[Path]:
    """Where profiles are looked up, first match wins.

    `$EDGEBUILD_TARGETS` (path list), then a `targets/` folder beside the recipe
    or in any parent folder (a project's own profiles), then the built-in ones.
    """
    dirs = [Path(p) for p in os.environ.get(TARGETS_ENV, "").split(os.pathsep) if p]
    if recipe_path is not None:
        for parent in recipe_path.resolve().parents:
            if (parent / "targets").is_dir():
                dirs.append(parent / "targets")
                break
    dirs.append(BUILTIN_TARGETS)
    unique: list[Path] = []
    for d in dirs:
        if d.resolve() not in [u.resolve() for u in unique]:
            unique.append(d)
    return unique


def load_profiles(dirs: list[Path]) -> dict[str, LoadedProfile]:
    profiles: dict[str, LoadedProfile] = {}
    problems: list[Problem] = []
    for folder in dirs:
        if not folder.is_dir():
            continue
        for file in sorted(folder.glob("*.yaml")):
            if file.stem in profiles:
                continue
            doc = load_yaml(file)
            profile, found = validate(TargetProfile, doc)
            problems.extend(found)
            if profile is None:
                continue
            if profile.name != file.stem:
                location, _ = doc.locate(("name",))
                problems.append(Problem(location, "name",
                                        f"profile name '{profile.name}' differs from the file name",
                                        f"rename the file to {profile.name}.yaml"))
                continue
            profiles[profile.name] = LoadedProfile(profile, doc)
    if problems:
        raise RecipeError(problems)
    return profiles
