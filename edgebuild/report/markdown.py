"""Markdown escaping: a value from a recipe, a data file or a model file shown as the text
it is, never as Markup (summary.md lands in a CI step summary).

The renderer (render.py) and the sections it composes (profile.py, opcompare.py) all
escape through here, so it sits below them.
"""

from __future__ import annotations

import re

# Characters that start Markup in GitHub-flavoured Markdown, as numeric entities: a
# table cell is split at `|` before entities are decoded, and an entity never opens a
# tag, a code span or a link. `[x]` alone stays (it is no link without `(…)` after it).
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;",
             "`": "&#96;", "\\": "&#92;"}
_SPECIAL = re.compile(r"[&<>|`\\]|\](?=\()|[\x00-\x1f\x7f\u2028\u2029]+")


def _entity(match: re.Match[str]) -> str:
    text = match.group()
    if text == "]":
        return "&#93;"  # `](` would close a link's text and open its destination
    return _ENTITIES.get(text, " ")  # a newline or another control character: a space


def md(value: object) -> str:
    """`value` as inert Markdown text on one line: fit for a table cell or a list item."""
    return _SPECIAL.sub(_entity, str(value))


def md_code(value: object) -> str:
    """`value` shown as code: a plain code span when nothing in it needs escaping (inside
    one, neither entities nor backslashes work), else `<code>` around escaped text."""
    text = str(value)
    return f"`{text}`" if not _SPECIAL.search(text) else f"<code>{md(text)}</code>"


def md_block(text: str) -> str:
    """A backend's Markdown note (tables, headings) with raw HTML and links made inert:
    its cells hold node names the model file wrote (no note of edgebuild's has a link)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("](", "&#93;("))
