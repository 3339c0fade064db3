"""StageResult: what running one stage produced, as it crosses a process boundary.

A worker process (execute/worker.py) writes it as JSON; a Dask worker (execute/remote/far_side.py)
and an SSH board (execute/remote/ssh.py) send it back; every executor hands it to the scheduler
inside a TaskOutcome. Wherever it came from another process it is read with
`StageResult.parse`, so a malformed one is a one-line stage error, never a traceback:

    status ok            main, format, metadata, seconds: the artifact to publish
    status unmeasurable  reason (and a hint): "not measurable here: …", never cached
    status error         message and hint: the stage failed
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, model_validator

FORMAT_PATTERN = r"^[a-z0-9][a-z0-9_.+-]{0,63}$"


class StageResult(BaseModel):
    """One stage's result (status ok | unmeasurable | error)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Literal["ok", "unmeasurable", "error"]
    reason: StrictStr = ""  # unmeasurable: why
    message: StrictStr = ""  # error: what happened
    hint: StrictStr = ""
    main: StrictStr | None = None  # ok: the artifact's main file, a name inside its folder
    format: StrictStr | None = Field(None, pattern=FORMAT_PATTERN)
    metadata: dict[StrictStr, Any] = Field(default_factory=dict)
    seconds: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _complete(self) -> StageResult:
        if self.status == "ok" and (self.main is None or self.format is None
                                    or self.seconds is None):
            raise ValueError("a result with status ok needs main, format and seconds")
        return self

    @classmethod
    def ok(cls, main: str, format: str, metadata: dict[str, Any],
           seconds: float) -> StageResult:
        return cls(status="ok", main=main, format=format, metadata=metadata, seconds=seconds)

    @classmethod
    def error(cls, message: str, hint: str = "",
              metadata: dict[str, Any] | None = None) -> StageResult:
        """`metadata`: what the stage measured before it failed (StageError.metadata)."""
        return cls(status="error", message=message, hint=hint, metadata=metadata or {})

    @classmethod
    def unmeasurable(cls, reason: str, hint: str = "") -> StageResult:
        return cls(status="unmeasurable", reason=reason, hint=hint)

    @property
    def why(self) -> str:
        """The sentence a stage that did not succeed reports: its reason or its message."""
        return self.reason or self.message

    @classmethod
    def parse(cls, raw: object, who: str) -> StageResult:
        """`raw` (plain data, or JSON text or bytes) from another process as a
        StageResult; a malformed one becomes an error result naming `who` sent it and
        the first field that is wrong."""
        try:
            if isinstance(raw, str | bytes):
                return cls.model_validate_json(raw)
            return cls.model_validate(raw)
        except ValidationError as exc:
            return cls.error(f"the result {who} sent is malformed: {first_error(exc)}",
                             "the worker runs another edgebuild version, or broke while "
                             "writing its result; its log says more")

    def to_json(self) -> str:
        return self.model_dump_json()


def first_error(exc: ValidationError) -> str:
    """`where: what` of a validation error's first problem, on one line (at most 300
    characters: what is quoted came from outside)."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the record"
    text = " ".join(f"{where}: {first['msg']}".split())
    return text if len(text) <= 300 else text[:297] + "..."
