"""Find ezpz's own modules with one ``stat`` each: no directory listing, no probe for extension modules.

Python's path finder, asked for ``ezpz.steps.clock``, stats the package
directory (has it changed?), lists every new package directory once
(``openat``, ``fstat``, ``getdents64``), stats each candidate file and, for a
package, probes ``__init__`` under every extension-module suffix before
``__init__.py``; the source loader then stats the ``.py`` again. On a
parallel file system each of those is a round trip to the metadata server,
once per module per rank. ezpz knows its own layout, so this finder, placed
just before the path finder and answering only for ``ezpz.*`` submodules in
ezpz's own directory, stats the one file the name must be
(``steps/clock.py``, or ``steps/__init__.py`` for a package in
:data:`PACKAGES`) and hands that ``stat`` result to a standard
:class:`~importlib.machinery.SourceFileLoader`, which reads the bytecode cache
as usual. About 4 metadata calls per module instead of 6, and per package
instead of 12 (docs/performance.md).

It never changes which file a name means: a name it cannot place (a package
missing from :data:`PACKAGES`, a namespace directory, a missing file) falls
through to the path finder, and ``tests/test_core_finder.py`` keeps
:data:`PACKAGES` equal to the package directories on disk (where a listed
package and a same-named module would disagree, Python picks the package,
and so does this). It is installed only for an ezpz loaded from a plain
directory by the source loader (not a zip, not frozen).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = ["PACKAGES", "CoreFinder", "install"]

PACKAGES = frozenset({
    "builtin", "cli", "examples", "failures", "inputs", "integrations", "launch_drivers", "launch_env", "original",
    "plugin_host", "plugin_kit", "primitives", "probes", "runtime", "startup", "steps", "testing",
})
"""ezpz's package directories (relative dotted names): a name listed here is a package, any other a module."""


class _StatedSourceLoader(importlib.machinery.SourceFileLoader):
    """The standard source loader, given the ``stat`` of its source the finder already made (used once)."""

    def __init__(self, fullname: str, path: str, stat: os.stat_result) -> None:
        super().__init__(fullname, path)
        self._stat: os.stat_result | None = stat

    def path_stats(self, path: str) -> Mapping[str, Any]:
        stat, self._stat = self._stat, None
        if stat is None or path != self.path:  # a reload, or another file: stat it afresh
            return super().path_stats(path)
        return {"mtime": stat.st_mtime, "size": stat.st_size}


class CoreFinder:
    """A meta-path finder for ``ezpz.<sub>`` modules under one root directory (ezpz's ``__path__``)."""

    def __init__(self, root: str, packages: frozenset[str] = PACKAGES) -> None:
        self.root = root
        self.packages = packages

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not fullname.startswith("ezpz.") or target is not None:
            return None
        relative = fullname[len("ezpz."):]
        parts = relative.split(".")
        parent_dir = os.path.join(self.root, *parts[:-1])
        if path is not None and list(path) != [parent_dir]:  # the parent package is not ours as we laid it out
            return None
        package = relative in self.packages
        if package:
            file = os.path.join(parent_dir, parts[-1], "__init__.py")
        else:
            file = os.path.join(parent_dir, parts[-1] + ".py")
        try:
            stat = os.stat(file)
        except OSError:
            return None  # not where ezpz's layout puts it: Python's own finders decide
        loader = _StatedSourceLoader(fullname, file, stat)
        locations = [os.path.dirname(file)] if package else None
        return importlib.util.spec_from_file_location(fullname, file, loader=loader,
                                                      submodule_search_locations=locations)

    def invalidate_caches(self) -> None:
        """Nothing cached: every lookup stats the file afresh."""


def _is_plain_source_package(spec: ModuleSpec | None) -> str | None:
    """ezpz's directory when it was loaded from a plain ``__init__.py`` by the source loader, else None."""
    if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
        return None
    locations = list(spec.submodule_search_locations or ())
    if len(locations) != 1 or not os.path.isdir(locations[0]):
        return None
    return locations[0]


def install(spec: ModuleSpec | None) -> CoreFinder | None:
    """Put a :class:`CoreFinder` just before the path finder, for ezpz as ``spec`` describes it; None if not."""
    root = _is_plain_source_package(spec)
    if root is None:
        return None
    for finder in sys.meta_path:
        if isinstance(finder, CoreFinder):
            return finder if finder.root == root else None  # two ezpz trees: leave the second to Python
    finder = CoreFinder(root)
    position = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
                    len(sys.meta_path))
    sys.meta_path.insert(position, finder)
    return finder
