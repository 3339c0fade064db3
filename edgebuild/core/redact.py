"""Secrets never reach a terminal, a log or a report: the one redaction helper.

A URL may carry a password in its user part (`ftp://user:password@host/…`,
`sftp://…`, `s3://key:secret@…`): everything edgebuild prints, logs or writes
about a URL (a warning, an error, the internal-error log's argv, a stage's
message in report.json) goes through `redact` first.
"""

from __future__ import annotations

import re

# scheme://user:password@  ->  scheme://user:***@   (the user stays: it says which account)
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):(?P<secret>[^/\s]+)@")

MASK = "***"


def redact(text: str) -> str:
    """`text` with the password of every URL in it replaced by ***."""
    return _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
