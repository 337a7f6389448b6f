"""Child-process half of the "imports without its vendor SDK" check.

Run as ``python -c <this source> <json args>`` by :mod:`ezpz.testing.conformance`
(never imported by ezpz itself). Uses only the standard library until it
imports ``ezpz`` for the baseline. Arguments (JSON): ``module`` to import,
``blocked`` top-level module names to make unimportable, ``out`` a file path
for the JSON result.

Every attempt to import a blocked module raises ``ModuleNotFoundError`` (so
``try: import pynvml / except ImportError`` guards behave as on a machine
without the SDK) and is recorded with the phase it happened in: ``baseline``
(while importing ezpz) or ``plugin`` (while importing the module under test).
"""

import importlib
import importlib.abc
import json
import sys
import traceback


def _main() -> None:
    args = json.loads(sys.argv[1])
    blocked = tuple(args["blocked"])
    attempts: list = []
    phase = ["baseline"]

    class _BlockSdks(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
            for top in blocked:
                if name == top or name.startswith(top + "."):
                    attempts.append({"module": name, "phase": phase[0]})
                    raise ModuleNotFoundError(
                        f"No module named {name!r} (blocked by ezpz.testing: vendor SDK treated as absent)", name=name
                    )
            return None

    for name in list(sys.modules):
        if name.split(".", 1)[0] in blocked:
            del sys.modules[name]
    sys.meta_path.insert(0, _BlockSdks())

    result: dict = {"ok": False, "error": None, "baseline_error": None, "new_modules": [], "attempts": attempts}
    try:
        import ezpz  # noqa: F401  (baseline: the core and its dependencies)
    except BaseException:  # noqa: BLE001
        result["baseline_error"] = traceback.format_exc(limit=6)
    before = set(sys.modules)
    phase[0] = "plugin"
    try:
        importlib.import_module(args["module"])
        result["ok"] = True
    except BaseException:  # noqa: BLE001
        result["error"] = traceback.format_exc(limit=8)
    result["new_modules"] = sorted(set(sys.modules) - before)
    with open(args["out"], "w", encoding="utf-8") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    _main()
