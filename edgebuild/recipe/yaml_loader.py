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


# libyaml's composer when PyYAML was built with it: the same nodes and marks, 15x faster
# than the pure-Python one (a cached run parses the recipe and every target profile).
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MERGE_TAG = "tag:yaml.org,2002:merge"
PLAIN_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}

# Limits for files that arrive in pull requests: a 1.2 KB alias bomb ("billion laughs")
# expands to gigabytes, a cyclic anchor never ends, 5,000 nested brackets overflow
# the parser's recursion. Real recipes are a few hundred values, a few levels deep.
MAX_BYTES = 1_000_000
MAX_VALUES = 100_000  # values built, aliases expanded
MAX_DEPTH = 50
TOO_DEEP = f"nested too deeply to parse (more than {MAX_DEPTH} levels are never needed)"


class _TooLarge(Exception):
    """Building stopped at a limit; the problem is already recorded."""


class _Builder:
    def __init__(self, file: str) -> None:
        self.file = file
        self.positions: dict[KeyPath, tuple[int, int]] = {}
        self.problems: list[Problem] = []
        self._constructor = yaml.SafeLoader("")
        self._built = 0
        self._open: set[int] = set()  # nodes being built: an alias back to one is a cycle

    def build(self, node: yaml.Node, path: KeyPath) -> Any:
        self._built += 1
        if self._built > MAX_VALUES:
            self._problem(node, path, f"more than {MAX_VALUES:,} values once aliases are "
                          "expanded (an alias bomb?)", "write the values out; a recipe "
                          "needs far fewer")
            raise _TooLarge
        if len(path) > MAX_DEPTH:
            self._problem(node, path, f"nested more than {MAX_DEPTH} levels deep")
            raise _TooLarge
        if id(node) in self._open:
            self._problem(node, path, "an anchor refers to itself (a cycle)",
                          "an alias must point at a finished value")
            raise _TooLarge
        self.positions.setdefault(path, _position(node))
        if not isinstance(node, yaml.ScalarNode) and node.tag not in PLAIN_TAGS:
            self._problem(node, path, f"tag {node.tag} on a mapping or list is not read",
                          "edgebuild recipes use plain YAML: remove the tag")
        self._open.add(id(node))
        try:
            return self._build(node, path)
        finally:
            self._open.discard(id(node))

    def _build(self, node: yaml.Node, path: KeyPath) -> Any:
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
        except Exception as exc:
            # PyYAML's constructors fail with whatever their parsing raises (ValueError,
            # KeyError, AttributeError): any of them means this value is not of its tag.
            tag = node.tag.rsplit(":", 1)[-1]
            self._problem(node, path, f"'{node.value}' is not a valid {tag} "
                          f"({type(exc).__name__}: {exc})",
                          f"remove the `!!{tag}` tag or fix the value")
            return None

    def _problem(self, node: yaml.Node, path: KeyPath, message: str, hint: str = "") -> None:
        line, column = _position(node)
        self.problems.append(
            Problem(Location(self.file, line, column), ".".join(path), message, hint)
        )


def _too_deep_at(text: str) -> tuple[int, int]:
    """Where flow brackets first nest deeper than MAX_DEPTH (the parser could not say)."""
    depth = 0
    for offset, char in enumerate(text):
        depth += 1 if char in "[{" else -1 if char in "]}" else 0
        if depth > MAX_DEPTH:
            return _line_column(text, offset)
    return 1, 1


def _line_column(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def _position(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def load_yaml(path: Path) -> LoadedYaml:
    """Read one YAML file; raise RecipeError naming file:line:column on any problem."""
    display = str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RecipeError(
            [Problem(Location(display), "", "file not found", "check the path")]
        ) from None
    except OSError as exc:
        raise RecipeError([Problem(Location(display), "", f"cannot read: {exc.strerror}")]
                          ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise RecipeError([Problem(Location(display, line, column), "",
                                   f"not UTF-8 text: {exc.reason} (byte {data[exc.start]:#04x})",
                                   "a recipe is a UTF-8 YAML file")]) from None
    return parse_yaml(text, display)


def parse_yaml(text: str, file: str) -> LoadedYaml:
    """Parse YAML text that came from `file` (used for messages only)."""
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise RecipeError([Problem(Location(file), "", f"larger than {MAX_BYTES:,} bytes",
                                   "a recipe is a short, reviewable file")])
    try:
        node = yaml.compose(text, Loader=LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        if "nesting depth" in str(exc.problem):  # libyaml's own guard (1,000 levels)
            raise RecipeError([Problem(Location(file, *_too_deep_at(text)), "", TOO_DEEP)]
                              ) from None
        raise RecipeError(
            [Problem(Location(file, line, column), "", f"not valid YAML: {exc.problem}")]
        ) from None
    except yaml.reader.ReaderError as exc:  # NUL, DEL, C1 controls: not YAML characters
        line, column = _line_column(text, exc.position)
        raise RecipeError([Problem(Location(file, line, column), "",
                                   f"character {exc.character!r} is not allowed in YAML",
                                   "remove control characters from the file")]) from None
    except RecursionError:
        raise RecipeError([Problem(Location(file, *_too_deep_at(text)), "", TOO_DEEP)]
                          ) from None
    except yaml.YAMLError as exc:
        raise RecipeError([Problem(Location(file, 1, 1), "", f"not valid YAML: {exc}")]
                          ) from None
    if node is None:
        return LoadedYaml(file, {}, {(): (1, 1)})
    builder = _Builder(file)
    try:
        data = builder.build(node, ())
    except _TooLarge:
        data = None
    if builder.problems:
        raise RecipeError(builder.problems)
    return LoadedYaml(file, data, builder.positions)
