"""Dask's logs in a build: one line a record, and none for what the executor makes good.

Both sides of the cluster use it: the client (cluster.py, remote/dask.py, and the CLI's
log handler) and each worker's task (remote/far_side.py), so it sits below both.
"""

from __future__ import annotations

import logging
import os

# Dask's warnings about a worker death that the executor recovers from: it runs the stage
# again elsewhere and sends its inputs again (`_forget_lost`), so nothing is lost; a
# stage that still fails says so in its own error.
RECOVERED_BY_RETRY: tuple[str, ...] = ("Restarting worker", "lose scattered data")


def recovered(record: logging.LogRecord) -> bool:
    """A Dask record about a worker death the executor's retry makes good."""
    if not record.name.startswith("distributed"):
        return False
    text = str(record.msg)
    return any(phrase in text for phrase in RECOVERED_BY_RETRY)


class _OneLine(logging.Filter):
    """A Dask log record as one line: no traceback (a worker death logs 30 of them), and
    none of the warnings a retry makes good."""

    def filter(self, record: logging.LogRecord) -> bool:
        if recovered(record):
            return False
        if record.exc_info or record.stack_info or "\n" in str(record.msg):
            text = record.getMessage().strip().splitlines()
            extra = f": {record.exc_info[1]!r:.200}" if record.exc_info else ""
            record.msg, record.args = (text[0] if text else "") + extra, ()
            record.exc_info = record.exc_text = record.stack_info = None
        return True


def one_line_logs() -> None:
    """Dask's log handlers in this process print each record on one line."""
    for handler in logging.getLogger("distributed").handlers:
        if not any(isinstance(f, _OneLine) for f in handler.filters):
            handler.addFilter(_OneLine())


def quiet_dask() -> None:
    """Dask logs every worker's life at INFO; a build log wants only problems, one line
    each."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    logging.getLogger("distributed").setLevel(logging.WARNING)
    one_line_logs()


def one_line(exc: object) -> str:
    """An exception's text on one line, at most 300 characters (Dask's may hold a
    traceback)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."
