"""One scrubber for everything ezpz prints, logs or reports: secrets are removed by value, not by name.

Applied to ``ezpz doctor`` (text and JSON), ``ezpz plugins``, ``Runtime.explain()``
(its text and ``to_dict()``), ezpz's log events (the quarantine warning among
them), the CLI's stderr lines, and plugin error messages before they are
recorded. It removes:

a. the **value of every secret-looking variable** (:func:`is_secret`: ``HF_TOKEN``,
   ``*_TOKEN``, ``*_KEY``, ``*_SECRET``, ``*PASSWORD*``, ...) and of every
   variable named in ``EZPZ_REDACT``, wherever it appears in any string (also
   JSON-escaped, repr-escaped or percent-encoded);
b. **URL user-info**: ``https://user:pass@host`` -> ``https://<redacted>@host``;
c. **secret query parameters**: any parameter whose name contains ``token``,
   ``key``, ``sig``, ``pass``, ``secret``, ``auth`` or ``credential``
   (``?token=...``, ``&access_token=...``, ``&X-Amz-Signature=...``) keeps its
   name and loses its value.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

__all__ = ["REDACTED", "ScrubFilter", "is_secret", "redacted_names", "scrub", "scrub_data"]

REDACTED = "<redacted>"
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|_KEY$|^KEY$|_PAT$|"
    r"AUTH|COOKIE|SIGNATURE|_SAS$", re.IGNORECASE)
#: Values this short (or these words) are not treated as secrets: replacing "1" or "true" everywhere helps nobody.
_MIN_SECRET_LEN = 6
_NOT_SECRET = frozenset({"false", "enable", "enabled", "disable", "disabled", "default", "unset"})
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]{0,30}://)(?P<info>[^/?#\s@'\"<>\\]+)@")
_QUERY = re.compile(
    r"(?P<name>[?&;][^=&#\s'\"\\<>]*(?:token|key|sig|pass|secret|auth|credential)[^=&#\s'\"\\<>]*=)"
    r"(?P<value>[^&#\s'\"\\<>]+)", re.IGNORECASE)


def is_secret(name: str) -> bool:
    """Names that look like credentials: ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*API_KEY*``, ``*_KEY``, ..."""
    return bool(_SECRET_NAME.search(name))


def redacted_names(environ: Mapping[str, str]) -> list[str]:
    """Variables whose values are secrets here: secret-looking names plus those listed in ``EZPZ_REDACT``."""
    extra = {n for n in re.split(r"[,\s]+", environ.get("EZPZ_REDACT", "")) if n}
    return sorted(n for n in environ if is_secret(n) or n in extra)


def _secret_values(environ: Mapping[str, str]) -> list[str]:
    values: set[str] = set()
    for name in redacted_names(environ):
        value = str(environ.get(name, "")).strip()
        if len(value) < _MIN_SECRET_LEN or value.lower() in _NOT_SECRET:
            continue
        values.update({value, json.dumps(value)[1:-1], repr(value)[1:-1], quote(value, safe="")})
    return sorted(values, key=len, reverse=True)  # longest first: a value containing another goes whole


def scrub(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with secret values, URL user-info and secret query values replaced by ``<redacted>``."""
    if not text:
        return text
    for value in _secret_values(os.environ if environ is None else environ):
        if value in text:
            text = text.replace(value, REDACTED)
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    return _QUERY.sub(lambda m: f"{m['name']}{REDACTED}", text)


def scrub_data(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """Every string in a JSON-like structure (mappings, lists, tuples) scrubbed; keys included."""
    env = os.environ if environ is None else environ
    if isinstance(value, str):
        return scrub(value, env)
    if isinstance(value, Mapping):
        return {scrub_data(k, env): scrub_data(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_data(v, env) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_data(v, env) for v in value)
    return value


class ScrubFilter(logging.Filter):
    """A logging filter (the CLI puts it on its handler) that scrubs each record's final message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True
