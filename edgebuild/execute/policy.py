"""What the executor does after a stage fails."""

from enum import StrEnum


class FailurePolicy(StrEnum):
    FAIL_FAST = "fail-fast"  # start nothing new; finish what is running
    KEEP_GOING = "keep-going"  # run everything that does not depend on the failure
