"""The isolated-import check: the plugin's module imports in a fresh interpreter with the vendor SDKs blocked."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from ezpz.plugin_host.host import ENTRY_POINT_GROUP
from ezpz.testing.report import CheckResult

__all__ = ["VENDOR_SDK_MODULES", "findable", "isolated_import_check"]

VENDOR_SDK_MODULES: tuple[str, ...] = (
    "pynvml",
    "nvtx",
    "amdsmi",
    "pyrsmi",
    "rocm_smi",
    "intel_extension_for_pytorch",
    "oneccl_bindings_for_pytorch",
    "torch_ccl",
    "habana_frameworks",
)
"""Top-level modules of vendor SDKs that a plugin must not need at import time."""


def findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


_ISOLATED_SOURCE = Path(__file__).with_name("_isolated_import.py")


def isolated_import_check(
    module: str | None, sdk_modules: Sequence[str], allow_imports: Iterable[str], timeout: float = 120.0
) -> CheckResult:
    name = "imports without vendor SDKs"
    if module is None or module == "__main__" or not findable(module):
        return CheckResult(name, True, f"skipped: {module!r} is not an importable module", skipped=True)
    env = dict(os.environ)
    env.pop("EZPZ_PLUGINS", None)
    env.pop("EZPZ_STRICT_PLUGINS", None)
    env["EZPZ_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # baseline: only the core and built-ins are imported
    # ...and not this module, even when it is a built-in, so its own imports show.
    own_names = [ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
                 if ep.value.split(":", 1)[0] == module]
    if own_names:
        env["EZPZ_DISABLE_PLUGINS"] = ",".join(filter(None, [env.get("EZPZ_DISABLE_PLUGINS", ""), *own_names]))
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    with tempfile.TemporaryDirectory(prefix="ezpz-testing-") as tmp:
        out = Path(tmp, "result.json")
        args = json.dumps({"module": module, "blocked": list(sdk_modules), "out": str(out)})
        proc = subprocess.run(
            [sys.executable, "-c", _ISOLATED_SOURCE.read_text(encoding="utf-8"), args],
            env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )
        if not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return CheckResult(name, False, f"child interpreter exited {proc.returncode}: {' | '.join(tail)}")
        result = json.loads(out.read_text(encoding="utf-8"))
    problems: list[str] = []
    top = module.split(".", 1)[0]

    def own(importer: str) -> bool:  # the plugin's own code, not a library it pulled in
        return importer == top or importer.startswith(top + ".") or importer == module

    direct = [i for i in result["imports"] if own(i["by"])]
    tried = sorted({i["module"] for i in direct if i["blocked"]})
    if tried:
        problems.append(f"tried to import {', '.join(tried)} at module import (import vendor SDKs inside hook bodies)")
    if not result["ok"]:
        last = (result["error"] or "").strip().splitlines()[-1:] or ["unknown error"]
        problems.append(f"import failed without the SDKs: {last[0]}")
    allowed = set(sys.stdlib_module_names) | {top, "ezpz"} | set(allow_imports)
    heavy = sorted({i["module"].split(".", 1)[0] for i in direct if not i["blocked"]} - allowed)
    if heavy:
        pulled = len({m.split(".", 1)[0] for m in result["new_modules"]} - allowed - set(heavy))
        problems.append(
            f"imports {', '.join(heavy)} at module import"
            + (f" (pulling in {pulled} more top-level package(s))" if pulled else "")
            + "; a plugin module may import only the standard library and ezpz "
            "(import the rest inside hook bodies, or pass allow_imports=)"
        )
    if result.get("baseline_error"):
        problems.append(f"importing ezpz itself failed: {result['baseline_error'].strip().splitlines()[-1]}")
    if problems:
        return CheckResult(name, False, "; ".join(problems))
    blocked = ", ".join(sdk_modules) or "none"
    return CheckResult(name, True, f"imported {module} with {blocked} blocked; new modules: "
                                   f"{', '.join(sorted({m.split('.', 1)[0] for m in result['new_modules']})) or 'none'}")
