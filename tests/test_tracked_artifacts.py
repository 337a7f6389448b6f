"""No build artifact is tracked by git (issue 50: a pyflakes wheel was once committed at the repository root).

Wheels, sdists, egg-info, build and dist directories, byte-code caches and virtual environments are made
by a build or a test run, never written by hand: tracked, they go stale and bloat every clone.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: File-name endings of build outputs.
SUFFIXES = (".whl", ".tar.gz", ".egg", ".pyc", ".pyo")
#: Directory names that only builds, test runs and environments make.
DIRECTORIES = ("dist", "build", "__pycache__", ".pytest_cache", ".mypy_cache", ".venv", "venv", "site-packages",
               ".test-cache")


def artifact(path: str) -> str | None:
    """Why ``path`` (as git lists it, relative to the root) is a build artifact, or None."""
    parts = PurePosixPath(path).parts
    if path.endswith(SUFFIXES):
        return f"a build output ({next(s for s in SUFFIXES if path.endswith(s))})"
    for part in parts[:-1]:
        if part in DIRECTORIES or part.startswith(".venv") or part.endswith(".egg-info"):
            return f"inside {part}/, a directory builds, test runs or environments make"
    if parts[-1] == "pyvenv.cfg":
        return "a virtual environment's marker"
    return None


def tracked_files() -> list[str]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: cannot list the tracked files")
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout (git ls-files: {done.stderr.decode(errors='replace').strip()})")
    return [p for p in done.stdout.decode().split("\0") if p]


def test_no_build_artifact_is_tracked():
    found = {path: why for path in tracked_files() if (why := artifact(path)) is not None}
    assert not found, "build artifacts are tracked by git; `git rm --cached` them (and keep them in .gitignore):\n" + \
        "\n".join(f"  {path}: {why}" for path, why in sorted(found.items()))


@pytest.mark.parametrize("path", ["pyflakes-4.1.0-py2.py3-none-any.whl", "dist/ezpz-1.0.0.tar.gz",
                                  "ezpz_core/ezpz.egg-info/PKG-INFO", "plugins/ezpz-cuda/build/lib/x.py",
                                  "ezpz_core/ezpz/__pycache__/hooks.cpython-311.pyc", ".venv-test/bin/python",
                                  "venv/lib/python3.11/site-packages/x.py", "env/pyvenv.cfg"])
def test_each_kind_of_artifact_is_recognised(path):
    assert artifact(path) is not None


@pytest.mark.parametrize("path", ["ezpz_core/ezpz/hooks.py", "docs/ci.md", "tests/fixtures/build_log.txt",
                                  "plugins/ezpz-cuda/ezpz_cuda/build_info.py", "scripts/build-dists.sh"])
def test_sources_are_not_artifacts(path):
    assert artifact(path) is None
