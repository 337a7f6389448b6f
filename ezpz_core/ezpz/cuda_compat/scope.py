"""Which calls are the user's: a call site is redirected only when its file belongs to the script's project.

The project is one or more root directories (:mod:`.roots`: the script's directory, ``PYTHONPATH``, the current
directory, the project's editable installs, or ``--project-root``).

Decided from the calling frame's file, once per call site (code object and instruction offset, cached), so a
wrapper on a hot path pays a dict lookup after the first call. The cache is keyed by the code object's
identity (kept alive here): code objects compare equal across files when their text is equal. Outside the project: the standard library,
every site-packages/dist-packages directory (also one inside the project, such as ``.venv``), torch and ezpz
itself. A library there asking ``torch.cuda.is_available()`` gets the true answer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
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
    """The project's files (under its roots) minus installed packages, and the call sites seen there.

    ``roots``: one directory, or several (:func:`.roots.project_roots`). ``root`` is the first (where the
    script lives).
    """

    def __init__(self, roots: str | Sequence[str]) -> None:
        from ezpz.cuda_compat.roots import installed_dirs

        paths = [roots] if isinstance(roots, str) else list(roots)
        self.roots = tuple(os.path.realpath(r).rstrip(os.sep) + os.sep for r in paths)
        self.root = self.roots[0] if self.roots else os.sep
        self.sites: dict[tuple[int, int], Site | None] = {}  # (id(code), f_lasti) -> site, None: not the project's
        self._codes: list[Any] = []  # the code objects keyed by id above, kept alive so no id is reused
        self.redirected: list[Site] = []  # sites with at least one entry, in first-call order
        self._files: dict[str, bool] = {}
        self._outside = installed_dirs()
        self._torch_files: dict[str, bool] = {}  # file -> whether a walk to the user's frame passes it
        self._pass: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        import torch

        self._torch_dir = os.path.realpath(os.path.dirname(torch.__file__)) + os.sep

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
        if not any(path.startswith(r) for r in self.roots) or any(d in path for d in _PACKAGE_DIRS):
            return False
        return not any(path.startswith(d) for d in self._outside)

    def user_site(self, frame: FrameType | None) -> Site | None:
        """The project site that reached torch through ``frame``: the first caller outside torch, if the project's.

        For a CUDA device that torch's own code allocates on for the user (``nn.Linear(..., device='cuda')``
        calls ``torch.empty`` inside torch; ``torch.device('cuda')`` as a context enters torch's
        ``DeviceContext``): walks up past torch's frames (and the mode's own) and asks :meth:`site` of the first
        other frame. Only called for requests that name CUDA, so never on a hot path.
        """
        if self._pass is None:
            self._pass = self._passing()
        torch_or_mode, stdlib = self._pass
        while frame is not None:
            file = frame.f_code.co_filename
            inner = self._torch_files.get(file)
            if inner is None:
                real = os.path.realpath(file) if file and not file.startswith("<") else file
                inner = self._torch_files[file] = bool(real) and (real.startswith(torch_or_mode) or (
                    real.startswith(stdlib) and not any(d in real for d in _PACKAGE_DIRS)))
            if not inner:
                return self.site(frame)
            frame = frame.f_back
        return None

    def _passing(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The directories a walk to the user's frame passes through: torch, the standard library, this mode."""
        import sysconfig

        import ezpz.cuda_compat as here

        def norm(paths: Sequence[str]) -> tuple[str, ...]:
            return tuple(os.path.realpath(d).rstrip(os.sep) + os.sep for d in paths)

        return (norm([self._torch_dir, os.path.dirname(here.__file__)]),
                norm([sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")]))
