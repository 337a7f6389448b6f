"""Failure signatures: a pattern in an error's text, the kind of failure it means, and why.

Plugins return these from ``ezpz_failure_signatures`` (collecting): each
vendor plugin knows its collective library's and driver's failure texts
(NCCL's "unhandled system error", an Xid, XPU's ``UR_RESULT_ERROR_OUT_OF_RESOURCES``,
a PALS shepherd kill). The core matches them against an exception's text when
its own knowledge (exception types, the store's roll call) did not decide,
and ``ezpz launch`` against log lines of ranks killed before they could write
a record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from attrs import field

from ezpz.failures.record import KINDS
from ezpz.primitives.frozen_records import frozen

__all__ = ["FailureSignature", "Match", "match_text"]

_MAX_PATTERN = 500


def _regex(_inst: Any, _attr: Any, value: str) -> None:
    if not isinstance(value, str) or not value or len(value) > _MAX_PATTERN:
        raise ValueError(f"pattern must be a regular expression of 1 to {_MAX_PATTERN} characters, not {value!r:.80}")
    try:
        re.compile(value)
    except re.error as err:
        raise ValueError(f"pattern {value!r:.80} is not a regular expression: {err}") from None


def _kind(_inst: Any, _attr: Any, value: str) -> None:
    if value not in KINDS:
        raise ValueError(f"kind {value!r} is not one of {', '.join(KINDS)}")


def _said(_inst: Any, attr: Any, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{attr.name} must be a non-empty explanation")


@frozen(kw_only=True)
class FailureSignature:
    """``pattern`` (a regular expression, searched case-insensitively) in an error's text means ``kind``.

    ``blames_host``: the failure is the host's (hardware, driver, a node the
    scheduler killed), so a retry should avoid the host where it appeared;
    False for failures that would follow the job to any host. ``source``: where
    the text is documented or was seen (a URL or a document name).
    """

    pattern: str = field(validator=_regex)
    kind: str = field(validator=_kind)
    reason: str = field(validator=_said)
    blames_host: bool = False
    source: str = ""
    plugin: str = ""


@frozen
class Match:
    """Which signature matched which line."""

    signature: FailureSignature
    line: str


def match_text(text: str, signatures: Iterable[FailureSignature]) -> Match | None:
    """The first signature (in the order given) whose pattern occurs in ``text``, with the line it matched."""
    for sig in signatures:
        found = re.search(sig.pattern, text, re.IGNORECASE | re.MULTILINE)
        if found:
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.find("\n", found.end())
            return Match(sig, text[start: end if end >= 0 else len(text)].strip()[:500])
    return None
