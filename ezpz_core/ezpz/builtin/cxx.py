"""torch.compile on CPU: Inductor's C++ backend needs a working C++ compiler.

Recorded facts (public sources, torch 2.13 source):
- Inductor's CPU code generation compiles C++; the compiler it uses is
  ``$CXX``, else ``g++`` (``clang++`` on macOS), and on Windows ``$CXX`` else
  ``cl`` (``torch/_inductor/config.py`` ``cpp.cxx``;
  ``torch/_inductor/cpp_builder.py`` ``get_cpp_compiler``). It accepts the
  first candidate for which ``<cxx> --version`` runs, and raises
  ``InvalidCxxCompiler`` otherwise (``cpp_compiler_search``).
- TorchInductor on Windows arrived in torch 2.5 (PyTorch 2.5 release blog,
  https://pytorch.org/blog/pytorch2-5/, "TorchInductor on Windows").
- ``aot_eager`` (AOTAutograd with eager kernels) needs no compiler
  (https://docs.pytorch.org/docs/stable/torch.compiler.html).

The probe runs ``<cxx> --version`` with a timeout, exactly the test torch
applies; the policy is a pure function of its result. A compiler that passed
is remembered once per process and on disk (:mod:`ezpz.primitives.user_cache`, kind
``probes``), keyed by the compiler's path and the ``stat`` of the file it
resolves to (modification time, size, inode, device), so later processes, and
every rank of a job, skip the fork and exec while that binary is unchanged.
A failure is never remembered on disk: it is probed again next time.
``EZPZ_CACHE=0`` turns the on-disk record off.
"""

from __future__ import annotations

import functools
import os
import zlib
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ezpz.primitives.frozen_records import frozen

if TYPE_CHECKING:
    from pathlib import Path

    from ezpz.compiling import CompileOption
    from ezpz.facts import TorchBuild

__all__ = ["CxxFacts", "cpu_compile_options", "default_cxx", "probe_cxx"]

PROBE_TIMEOUT_S = 10.0
WINDOWS_INDUCTOR_FROM = (2, 5)
COMPILE_FROM = (2, 0)


@frozen(kw_only=True)
class CxxFacts:
    """What the C++ compiler probe saw. ``path`` is None when nothing runnable was found; ``error`` says why."""

    compiler: str
    platform: str
    path: str | None = None
    version: str | None = None
    error: str | None = None

    @property
    def works(self) -> bool:
        return self.path is not None and self.error is None


def default_cxx(environ: Mapping[str, str], platform: str) -> str:
    """The compiler Inductor would use: ``$CXX``, else ``cl`` (Windows), ``clang++`` (macOS), ``g++``."""
    cxx = environ.get("CXX", "").strip()
    if cxx:
        return cxx
    return "cl" if platform == "win32" else "clang++" if platform == "darwin" else "g++"


def _stamp(path: str) -> list[object] | None:
    try:
        st = os.stat(path)  # follows symlinks: g++ -> g++-12 -> the binary that runs
    except OSError:
        return None
    return [path, st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev]


def _remembered(compiler: str, platform: str, path: str, use_disk: bool
                ) -> tuple[CxxFacts | None, tuple[Path, dict[str, Any]] | None]:
    """The facts of an earlier passing probe of this very binary, and the key to store a new one under."""
    from ezpz.primitives import user_cache

    where = user_cache.cache_dir("probes") if use_disk else None
    key = {"compiler": compiler, "platform": platform, "stamp": _stamp(path)}
    if where is None or key["stamp"] is None:
        return None, None
    file = where / f"cxx-{zlib.crc32(repr((compiler, platform, path)).encode()):08x}.json"
    data, _why = user_cache.read_json(file)
    if isinstance(data, dict) and data.get("key") == key and isinstance(data.get("version"), (str, type(None))):
        return CxxFacts(compiler=compiler, platform=platform, path=path, version=data["version"]), None
    return None, (file, key)


@functools.lru_cache(maxsize=8)
def _run_version(compiler: str, platform: str, use_disk: bool = True, writer: bool = True) -> CxxFacts:
    path = shutil.which(compiler)
    if path is None:
        return CxxFacts(compiler=compiler, platform=platform, error=f"{compiler!r} was not found on PATH")
    known, store = _remembered(compiler, platform, path, use_disk)
    if known is not None:
        return known
    facts = _run(compiler, platform, path)
    if store is not None and facts.works and writer:
        from ezpz.primitives import user_cache

        file, key = store
        user_cache.write_json(file, {"key": key, "version": facts.version})
    return facts


def _run(compiler: str, platform: str, path: str) -> CxxFacts:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                             stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return CxxFacts(compiler=compiler, platform=platform, path=path,
                        error=f"running {path} --version failed: {type(err).__name__}: {err}")
    if out.returncode != 0 and platform != "win32":  # MSVC's cl prints its banner and exits non-zero
        return CxxFacts(compiler=compiler, platform=platform, path=path,
                        error=f"{path} --version exited with status {out.returncode}")
    first = (out.stdout or out.stderr).strip().splitlines()
    return CxxFacts(compiler=compiler, platform=platform, path=path, version=first[0] if first else None)


def probe_cxx(environ: Mapping[str, str] | None = None, platform: str | None = None) -> CxxFacts:
    """Find the compiler Inductor would use and check it runs (once per process per compiler)."""
    from ezpz.inputs.settings import is_first_rank, parse_bool

    env = os.environ if environ is None else environ
    plat = platform or sys.platform
    return _run_version(default_cxx(env, plat), plat, parse_bool(env, "EZPZ_CACHE", default=True), is_first_rank(env))


def cpu_compile_options(build: TorchBuild, cxx: CxxFacts) -> list[CompileOption]:
    """Inductor when torch has torch.compile here and the C++ compiler works; else aot_eager."""
    from ezpz.compiling import CompileOption

    if not build.at_least(*COMPILE_FROM):
        why = f"torch.compile arrived in torch 2.0 (have {build.version})"
        return [CompileOption(backend="inductor", available=False, reason=why),
                CompileOption(backend="aot_eager", available=False, reason=why),
                CompileOption(backend="none", available=True, reason=f"not compiling: {why}")]
    if cxx.platform == "win32" and not build.at_least(*WINDOWS_INDUCTOR_FROM):
        inductor = CompileOption(backend="inductor", available=False,
                                 reason=f"TorchInductor on Windows needs torch 2.5+ (have {build.version})")
    elif cxx.works:
        inductor = CompileOption(backend="inductor", available=True,
                                 reason=f"Inductor's C++ backend with {cxx.path} ({cxx.version or 'version unknown'})")
    else:
        inductor = CompileOption(
            backend="inductor", available=False,
            reason=f"Inductor's CPU backend needs a working C++ compiler: {cxx.error} "
                   "(install g++ or clang++, or point CXX at one)",
        )
    return [inductor, CompileOption(backend="aot_eager", available=True,
                                    reason="AOTAutograd with eager kernels needs no C++ compiler")]
