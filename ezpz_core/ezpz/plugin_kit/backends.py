"""Collective-backend options in the order every device plugin uses: the vendor's first, gloo as the fallback.

Hand the list to :func:`ezpz.policies.choose_backend`, which takes the first available option and honours
``EZPZ_BACKEND``/``TORCH_BACKEND`` alike for every vendor.
"""

from __future__ import annotations

from collections.abc import Iterable

from ezpz.decisions import BackendOption
from ezpz.facts import TorchBuild

__all__ = ["NO_DISTRIBUTED", "backend_in_build", "gloo_fallback", "vendor_then_gloo"]

NO_DISTRIBUTED = "torch built without torch.distributed"


def backend_in_build(build: TorchBuild, name: str, *, reason: str, missing: str) -> BackendOption:
    """Backend ``name``, available when this torch was built with it: ``reason`` says what it is, ``missing``
    why it is not there (say how to get it)."""
    have = build.distributed and name in build.distributed_backends
    return BackendOption(name=name, available=have, reason=reason if have else missing)


def gloo_fallback(build: TorchBuild, reason: str) -> BackendOption:
    """gloo, available when this torch has it; ``reason`` says what falling back to it costs on your device."""
    return backend_in_build(build, "gloo", reason=reason, missing=f"torch {build.version} was built without gloo")


def vendor_then_gloo(
    build: TorchBuild, vendor: BackendOption | Iterable[BackendOption], *, gloo_reason: str
) -> list[BackendOption]:
    """Your vendor's collective option(s) in your order of preference, then gloo as the fallback.

    A torch built without ``torch.distributed`` makes every option unavailable, and says so.
    """
    options = [vendor] if isinstance(vendor, BackendOption) else list(vendor)
    options.append(gloo_fallback(build, gloo_reason))
    if not build.distributed:
        return [BackendOption(name=o.name, available=False, reason=NO_DISTRIBUTED) for o in options]
    return options
