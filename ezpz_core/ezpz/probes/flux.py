"""The nodes of the Flux instance this process runs in, from ``flux resource list`` (bounded by a timeout)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping

__all__ = ["resource_nodelist"]

_TIMEOUT_S = 10.0


def resource_nodelist(environ: Mapping[str, str], timeout_s: float = _TIMEOUT_S) -> tuple[str, str] | None:
    """``(host list, source)`` of the instance's nodes, e.g. ``("tuo[1001-1002]", "flux resource list: ...")``.

    None when ``flux`` is not on PATH, fails, times out or prints nothing: the
    caller then treats the launch as one node unless told otherwise.
    """
    path = shutil.which("flux", path=environ.get("PATH"))
    if path is None:
        return None
    argv = [path, "resource", "list", "--states=up", "--no-header", "--format={nodelist}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              env=dict(environ))
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stdout.strip()
    if done.returncode != 0 or not text or len(text) > 100_000:
        return None
    text = ",".join(line.strip() for line in text.splitlines() if line.strip())
    return text, f"flux resource list: {text}"
