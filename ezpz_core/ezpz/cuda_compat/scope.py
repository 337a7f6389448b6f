"""Which calls are the user's: a call site is redirected only when its file belongs to the script's project.

Decided from the calling frame's file, once per call site (code object and instruction offset, cached), so a
wrapper on a hot path pays a dict lookup after the first call. The cache is keyed by the code object's
identity (kept alive here): code objects compare equal across files when their text is equal. Outside the project: the standard library,
every site-packages/dist-packages directory (also one inside the project, such as ``.venv``), torch and ezpz
itself. A library there asking ``torch.cuda.is_available()`` gets the true answer.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from types import FrameType
from typing import Any

__all__ = ["Scope", "Site"]

_PACKAGE_DIRS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


class Site:
    """One call site in the user's project and what the mode did there (filled as calls arrive)."""

    __slots__ = ("file", "line", "function", "entries", "_sites")

    def __init__(self, file: str, line: int, function: str, sites: list[Site]) -> None:
        self.file, self.line, self.function = file, line, function
        self.entries: dict[tuple[str, str], list[Any]] = {}
        self._sites = sites

    def note(self, call: str, became: str, behaves: str) -> None:
        """Record that ``call`` here became ``became``; ``behaves`` is ``same``, ``different`` or ``none``."""
        entry = self.entries.get((call, became))
        if entry is None:
            if not self.entries:
                self._sites.append(self)
            self.entries[(call, became)] = entry = [behaves, 0]
        entry[1] += 1


class Scope:
    """The project's files (under ``root``) minus installed packages, and the call sites seen there."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root).rstrip(os.sep) + os.sep
        self.sites: dict[tuple[int, int], Site | None] = {}  # (id(code), f_lasti) -> site, None: not the project's
        self._codes: list[Any] = []  # the code objects keyed by id above, kept alive so no id is reused
        self.redirected: list[Site] = []  # sites with at least one entry, in first-call order
        self._files: dict[str, bool] = {}
        self._outside = _installed_dirs()

    def site(self, frame: FrameType) -> Site | None:
        """The :class:`Site` of ``frame``'s current call when it is in the project, else None (cached)."""
        code = frame.f_code
        key = (id(code), frame.f_lasti)
        found = self.sites.get(key, False)
        if found is not False:
            return found  # type: ignore[return-value]
        self._codes.append(code)
        file = code.co_filename
        inside = self._files.get(file)
        if inside is None:
            inside = self._files[file] = self.contains(file)
        found = Site(file, frame.f_lineno or 0, code.co_name, self.redirected) if inside else None
        self.sites[key] = found
        return found

    def contains(self, file: str) -> bool:
        """Whether ``file`` is one of the project's own source files."""
        if not file or file.startswith("<"):
            return False
        path = os.path.realpath(file)
        if not path.startswith(self.root) or any(d in path for d in _PACKAGE_DIRS):
            return False
        return not any(path.startswith(d) for d in self._outside)


def _installed_dirs() -> tuple[str, ...]:
    """The standard library, every site directory, torch's and ezpz's: never the user's project."""
    import ezpz

    dirs = {p for k, p in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.update(getattr(site, "getsitepackages", lambda: [])())
    dirs.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else "")
    dirs.add(os.path.dirname(ezpz.__file__))
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if torch_file:
        dirs.add(os.path.dirname(torch_file))
    return tuple(os.path.realpath(d).rstrip(os.sep) + os.sep for d in dirs if d)
