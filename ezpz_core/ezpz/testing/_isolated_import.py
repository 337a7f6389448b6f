"""Child-process half of the "imports without its vendor SDK" check.

Run as ``python -c <this source> <json args>`` by :mod:`ezpz.testing.conformance`
(never imported by ezpz itself). Uses only the standard library until it
imports ``ezpz`` for the baseline. Arguments (JSON): ``module`` to import,
``blocked`` top-level module names to make unimportable, ``out`` a file path
for the JSON result.

A meta-path finder sees every import of a module not yet loaded. It records
who asked (the ``__name__`` of the first calling frame outside importlib), so
the parent can tell the plugin's own imports from those of libraries it
pulls in. Blocked modules raise ``ModuleNotFoundError`` (so ``try: import
pynvml / except ImportError`` guards behave as on a machine without the SDK).
"""

import importlib
import importlib.abc
import json
import sys
import traceback
import types


def _importer() -> str:
    """``__name__`` of the module whose code is importing (skipping importlib's own frames)."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        filename = frame.f_code.co_filename
        if not (filename.startswith("<frozen importlib") or name.startswith("importlib") or name == __name__):
            return str(name)
        frame = frame.f_back
    return ""


def _main() -> None:
    args = json.loads(sys.argv[1])
    blocked = tuple(args["blocked"])
    seen: list[dict[str, object]] = []
    phase = ["baseline"]

    class _Watch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
            is_blocked = any(name == top or name.startswith(top + ".") for top in blocked)
            seen.append({"module": name, "phase": phase[0], "by": _importer(), "blocked": is_blocked})
            if is_blocked:
                raise ModuleNotFoundError(
                    f"No module named {name!r} (blocked by ezpz.testing: vendor SDK treated as absent)", name=name
                )
            return None

    for name in list(sys.modules):
        if name.split(".", 1)[0] in blocked:
            del sys.modules[name]
    sys.meta_path.insert(0, _Watch())

    result: dict[str, object] = {"ok": False, "error": None, "baseline_error": None, "new_modules": [], "imports": seen}
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
    result["imports"] = [i for i in seen if i["phase"] == "plugin"]
    with open(args["out"], "w", encoding="utf-8") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    _main()
