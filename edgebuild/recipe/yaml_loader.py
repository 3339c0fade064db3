"""YAML loading that remembers where every key and value was written.

PyYAML's `safe_load` forgets positions, and errors without a line number are
useless in a 200-line recipe. We compose the node tree once, build plain Python
values from it, and keep a map from key path to (line, column) so that any
later validation error can point at the exact spot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from edgebuild.errors import Location, Problem, RecipeError

KeyPath = tuple[str, ...]


@dataclass
class LoadedYaml:
    """A YAML document's values plus the position of every key path in it."""

    file: str
    data: Any
    positions: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)

    def locate(self, loc: tuple[int | str, ...]) -> tuple[Location, KeyPath]:
        """The deepest written position along `loc` and the key path that reached it.

        Validation locations may contain parts that are not written in the file
        (a union's tag, a pydantic wrapper): those are skipped, not fatal.
        """
        path: KeyPath = ()
        for part in loc:
            candidate = (*path, str(part))
            if candidate in self.positions:
                path = candidate
        line, column = self.positions.get(path, (1, 1))
        return Location(self.file, line, column), path


MERGE_TAG = "tag:yaml.org,2002:merge"


class _Builder:
    def __init__(self, file: str) -> None:
        self.file = file
        self.positions: dict[KeyPath, tuple[int, int]] = {}
        self.problems: list[Problem] = []
        self._constructor = yaml.SafeLoader("")

    def build(self, node: yaml.Node, path: KeyPath) -> Any:
        self.positions.setdefault(path, _position(node))
        if isinstance(node, yaml.MappingNode):
            result: dict[Any, Any] = self._merged(node, path)
            explicit: set[Any] = set()
            for key_node, value_node in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self._scalar(key_node, path)
                if not isinstance(key, (str, int, float, bool)):
                    self._problem(key_node, path, "mapping keys must be plain scalars")
                    continue
                if key in explicit:
                    self._problem(
                        key_node, (*path, str(key)), f"duplicate key '{key}'",
                        "YAML keeps only the last value; remove one of them",
                    )
                explicit.add(key)
                child = (*path, str(key))
                self.positions[child] = _position(key_node)
                result[key] = self.build(value_node, child)
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, str(i))) for i, item in enumerate(node.value)]
        return self._scalar(node, path)

    def _merged(self, node: yaml.MappingNode, path: KeyPath) -> dict[Any, Any]:
        """The entries of `<<: *anchor` (or a list of anchors); explicit keys override them."""
        merged: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag != MERGE_TAG:
                continue
            sources = (value_node.value if isinstance(value_node, yaml.SequenceNode)
                       else [value_node])
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    self._problem(key_node, path, "'<<' merges mappings only",
                                  "write `<<: *anchor` where the anchor is a mapping")
                    continue
                for key, value in self.build(source, path).items():
                    merged.setdefault(key, value)  # the first source wins, as in YAML 1.1
        return merged

    def _scalar(self, node: yaml.Node, path: KeyPath) -> Any:
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            self._problem(node, path, f"cannot read this value: {exc.problem}",
                          "edgebuild recipes use plain YAML: no custom tags")
            return None

    def _problem(self, node: yaml.Node, path: KeyPath, message: str, hint: str = "") -> None:
        line, column = _position(node)
        self.problems.append(
            Problem(Location(self.file, line, column), ".".join(path), message, hint)
        )


def _position(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def load_yaml(path: Path) -> LoadedYaml:
    """Read one YAML file; raise RecipeError naming file:line:column on any problem."""
    display = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError(
            [Problem(Location(display), "", "file not found", "check the path")]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError([Problem(Location(display), "", f"cannot read: {exc}")]) from exc
    return parse_yaml(text, display)


def parse_yaml(text: str, file: str) -> LoadedYaml:
    """Parse YAML text that came from `file` (used for messages only)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise RecipeError(
            [Problem(Location(file, line, column), "", f"not valid YAML: {exc.problem}")]
        ) from None
    if node is None:
        return LoadedYaml(file, {}, {(): (1, 1)})
    builder = _Builder(file)
    data = builder.build(node, ())
    if builder.problems:
        raise RecipeError(builder.problems)
    return LoadedYaml(file, data, builder.positions)
