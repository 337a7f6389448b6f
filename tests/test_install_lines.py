"""Every copyable install command in README.md, docs/ and the plugins' READMEs is safe in a fresh venv.

"Safe" means pip cannot pull an unpinned torch (several GB of CUDA wheels, and a different build than the one the
user chose): the command pins it (``-c constraints.txt``), installs nothing that depends on torch, or comes after a
pinned install of the torch build in the same block. Checked: fenced ``bash``/``sh``/``console`` blocks (``$``
lines in console blocks), each command of a line (``&&``, ``;``), comments dropped.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from conftest import ROOT

#: Distributions that depend on no torch, so installing them alone never pulls one.
TORCH_FREE = {"pytest", "hypothesis", "pytest-timeout", "mkdocs", "import-linter", "build", "setuptools", "wheel",
              "pip", "strace", "mpi4py", "nvidia-ml-py", "amdsmi"}
_FENCE = re.compile(r"^```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^```$", re.S | re.M)
_SHELL = {"bash", "sh", "shell", "console", ""}
#: pip options that take a value (the value is not a requirement).
_VALUED = {"-c", "--constraint", "-r", "--requirement", "-f", "--find-links", "-i", "--index-url", "--extra-index-url",
           "-t", "--target", "--prefix", "--root", "--python", "-C", "--config-settings"}


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted(ROOT.glob("plugins/*/README.md"))]


def block_commands(body: str, lang: str) -> list[str]:
    """The shell commands of one block, in order."""
    out = []
    for line in body.splitlines():
        if lang == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        out += [c.strip() for c in re.split(r"&&|;|\|\|", line) if c.strip()]
    return out


def pip_install(command: str) -> tuple[list[str], list[str]] | None:
    """(options, requirements) of a ``pip install`` / ``python -m pip install`` command, else None."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for i in range(len(words) - 1):
        if words[i].endswith("pip") and words[i + 1] == "install":
            rest = words[i + 2:]
            break
    else:
        return None
    options, reqs, skip = [], [], False
    for w in rest:
        if skip:
            options[-1] += f"={w}"
            skip = False
        elif w.startswith("-"):
            options.append(w)
            skip = w in _VALUED
        else:
            reqs.append(w)
    return options, reqs


def _name(req: str) -> str:
    return re.split(r"[\[<>=!~;@ ]", req.strip("'\""), maxsplit=1)[0].lower()


def unsafe(commands: list[str]) -> list[str]:
    """The commands of one block that could pull an unpinned torch."""
    bad, torch_present = [], False
    for command in commands:
        parsed = pip_install(command)
        if parsed is None:
            continue
        options, reqs = parsed
        pinned = any(o.split("=")[0] in ("-c", "--constraint") or o.startswith("--constraint") for o in options)
        names = {_name(r) for r in reqs}
        if "torch" in names:
            torch_present = True
            if not (pinned or any(re.match(r"""['"]?torch==""", r) for r in reqs)):
                bad.append(command)
            continue
        if pinned or torch_present or "--no-deps" in options or names <= TORCH_FREE:
            continue
        bad.append(command)
    return bad


def test_the_checker_catches_the_unsafe_forms():
    assert unsafe(["pip install --find-links dist ezpz"]) == ["pip install --find-links dist ezpz"]
    assert unsafe(["pip install ."]) == ["pip install ."]
    assert unsafe(['python -m pip install -e ".[test]"']) == ['python -m pip install -e ".[test]"']
    assert unsafe(["pip install torch --index-url https://download.pytorch.org/whl/xpu"])
    assert unsafe(["pip install -c constraints.txt --find-links dist ezpz", "pip install pytest mkdocs",
                   "pip install --no-deps ezpz-cuda"]) == []
    assert unsafe(["pip install -c constraints.txt torch --index-url https://x/whl/rocm6.4",
                   "pip install --find-links dist ezpz ezpz-rocm"]) == []  # the torch build first
    assert block_commands("$ pip install .\n4 passed\n$ ezpz plugins", "console") == ["pip install .", "ezpz plugins"]
    assert block_commands("pip install -e . && python -m x   # pip install y", "bash") == ["pip install -e .",
                                                                                          "python -m x"]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_install_block_pins_torch(page):
    bad = []
    for fence in _FENCE.finditer(page.read_text()):
        if fence["lang"] in _SHELL:
            bad += unsafe(block_commands(fence["body"], fence["lang"]))
    assert not bad, (f"{page.relative_to(ROOT)}: install commands that can pull an unpinned torch (add "
                     "-c constraints.txt, or install the torch build first, pinned):\n" + "\n".join(bad))
