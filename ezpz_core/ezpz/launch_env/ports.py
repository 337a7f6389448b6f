"""Rendezvous ports derived the same way in every process, from a launch's identity."""

from __future__ import annotations

import hashlib

__all__ = ["DEFAULT_PORT", "PORT_RANGE", "derive_port"]

DEFAULT_PORT = 29500
"""torch's customary port, used when the launcher exports no job identity."""

PORT_RANGE = (20000, 32767)
"""Derived ports land here: unprivileged, below Linux's default ephemeral range (32768-60999)."""


def derive_port(identity: str) -> int:
    """A port in PORT_RANGE from a stable hash of ``identity`` (the same in every process)."""
    lo, hi = PORT_RANGE
    digest = int.from_bytes(hashlib.sha256(identity.encode()).digest()[:8], "big")
    return lo + digest % (hi - lo + 1)
