"""The gate: which torch builds cannot offer ``xpu`` at all, from torch-build facts alone, and the release facts
it cites.

Standard library only, so the entry module (:mod:`ezpz_xpu.plugin`) rejects a torch without XPU without loading
the facts, probes or policies; :mod:`ezpz_xpu.policy` re-exports it and cites the same releases. Both import it
from here, so neither imports the other.
"""

from __future__ import annotations

from typing import Any

__all__ = ["IPEX_EOL", "NATIVE_XPU", "XPU_WHEELS", "build_rejection"]

#: torch.xpu upstream as a prototype (PyTorch 2.4 release notes, "Intel GPU support (prototype)").
NATIVE_XPU = (2, 4)
#: IPEX: development stopped after 2.8, end of life announced for March 2026 (intel-extension-for-pytorch#867).
IPEX_EOL = "March 2026"
XPU_WHEELS = "pip install torch --index-url https://download.pytorch.org/whl/xpu"


def build_rejection(build: Any) -> str | None:
    """Why this torch cannot offer ``xpu`` at all, or None."""
    if not build.xpu_built:
        return (f"torch built without XPU (build.xpu_built is False; torch {build.version}); "
                f"install an XPU build: {XPU_WHEELS}")
    if build.release < NATIVE_XPU:
        return (f"torch {build.version} predates native XPU (torch 2.4); that stack needed IPEX, which reaches end of "
                f"life in {IPEX_EOL}: upgrade with {XPU_WHEELS}")
    return None
