"""One exception tree for everything edgebuild reports to a user.

Each exception builds its own message and hint, and knows its exit code, so
the CLI can print one clear paragraph and exit without a traceback.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """The documented exit codes of `edgebuild` (docs/cli.md)."""

    OK = 0
    GATE_FAILED = 1
    USAGE = 2
    STAGE_FAILED = 3
    INTERNAL = 4  # a bug in edgebuild: never 1, which CI reads as "a gate failed"
    INTERRUPTED = 130
    BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that left


# Terminal escape sequences (colours, cursor moves) that converters print into their own
# exception texts: they must not reach a stage message, summary.md or a JUnit file.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def plain(text: str) -> str:
    """`text` without terminal escape sequences."""
    return _ANSI.sub("", text)


def printable(text: str, newlines: bool = False) -> str:
    """`text` safe to print on a terminal: every control character (an escape sequence's
    ESC, a carriage return, a bell; a newline too unless `newlines`) written as its
    Python escape, `\\x1b`, so text from outside can neither recolour nor rewrite what
    the terminal shows, nor forge a line of its own."""
    return "".join(c if c.isprintable() or (newlines and c == "\n") or c == " "
                   else c.encode("unicode_escape").decode("ascii") for c in text)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A 'did you mean ...?' hint for a misspelt name, or '' when nothing is close."""
    close = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else ""


class EdgebuildError(Exception):
    """Root of every error edgebuild raises on purpose."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.location: Location | None = None  # the recipe line that caused it, if known

    def at(self, location: Location) -> EdgebuildError:
        """This error, attributed to a recipe line (the first attribution wins)."""
        if self.location is None:
            self.location = location
        return self

    def __str__(self) -> str:
        text = f"{self.location}: {self.message}" if self.location else self.message
        return f"{text}\n  hint: {self.hint}" if self.hint else text


@dataclass(frozen=True)
class Location:
    """Where in a YAML file something was written (1-based line and column)."""

    file: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.file
        if self.column is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Problem:
    """One validation problem: where, which key, what is wrong, and a hint."""

    location: Location
    key: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        key = f" {self.key}:" if self.key else ""
        text = f"{self.location}:{key} {self.message}"
        return f"{text}\n    hint: {self.hint}" if self.hint else text


class RecipeError(EdgebuildError):
    """The recipe or a target profile is invalid. Carries every problem found."""

    SHOWN = 30  # 10,000 unknown keys made a 20,001-line message; the first ones say enough

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        noun = "problem" if len(problems) == 1 else "problems"
        body = "\n".join(f"  {p}" for p in problems[:self.SHOWN])
        if len(problems) > self.SHOWN:
            body += f"\n  ... and {len(problems) - self.SHOWN} more"
        super().__init__(f"invalid configuration ({len(problems)} {noun}):\n{body}")


class PlanError(EdgebuildError):
    """The recipe is valid on its own but cannot be turned into a build graph."""


class BackendUnavailable(EdgebuildError):
    """A backend or tool is not installed or not implemented; names the pip extra."""

    exit_code = ExitCode.STAGE_FAILED

    def __init__(self, backend: str, reason: str, extra: str | None = None) -> None:
        hint = f"pip install 'edgebuild[{extra}]'" if extra else ""
        super().__init__(f"backend '{backend}' is not available: {reason}", hint)
        self.backend = backend
        self.extra = extra


class DataError(EdgebuildError):
    """A dataset is missing, empty, or does not match the model's inputs."""


class StageError(EdgebuildError):
    """A stage failed while running; names the stage and its log file.

    `metadata`: what the stage measured before it failed (a budget's trials), kept as the
    failed stage's metadata in report.json: the figures a user needs most then."""

    exit_code = ExitCode.STAGE_FAILED

    def __init__(self, message: str, hint: str = "",
                 metadata: dict[str, Any] | None = None) -> None:
        super().__init__(message, hint)
        self.metadata: dict[str, Any] = dict(metadata or {})


class ShapeError(StageError):
    """A compiled artifact cannot run at a shape profile's input shapes (a dimension fixed
    in the artifact, a converter that baked a shape into the graph)."""


class GateFailed(EdgebuildError):
    """At least one gate did not pass."""

    exit_code = ExitCode.GATE_FAILED


class BoardError(EdgebuildError):
    """An emulated board could not be made (the mirror, pip, or the board's own check)."""

    exit_code = ExitCode.STAGE_FAILED


class CacheCorrupt(EdgebuildError):
    """A cache entry's files do not match their recorded digests."""

    exit_code = ExitCode.STAGE_FAILED
