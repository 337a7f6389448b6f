"""A griffe extension for the docs build (mkdocs.yml): ezpz's docstrings use reStructuredText roles, the site Markdown.

``:func:`name```, ``:class:`~ezpz.errors.ConfigError``` and the like become inline code (``name``,
``ConfigError``: a ``~`` keeps the last dotted part, as in Sphinx), and a paragraph's closing ``::`` (the
literal-block marker) a single colon, so the indented block below it renders as code. Only the rendered text
changes: the docstrings in the source stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`(?P<tilde>~?)(?P<target>[^`]+)`")
_LITERAL = re.compile(r"(?<=\S)::$", re.M)


def _role(match: re.Match[str]) -> str:
    target = match["target"]
    return f"`{target.rsplit('.', 1)[-1] if match['tilde'] else target}`"


def markdown(text: str) -> str:
    """*text* with its reStructuredText roles and literal-block markers in Markdown."""
    return _LITERAL.sub(":", _ROLE.sub(_role, text))


def _walk(obj: griffe.Object) -> None:
    if obj.docstring is not None:
        obj.docstring.value = markdown(obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias:
            _walk(member)


class RstRoles(griffe.Extension):
    """Rewrites every docstring of a loaded package (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        _walk(pkg)
