"""docs/writing-a-plugin.md is a complete walk-through: its code blocks, copied in order, make a working plugin.

The test does what a reader of the docs site would, from the page as ``mkdocs build`` renders it: every code
block whose title bar names a file (mkdocs-material's ``<span class="filename">PATH</span>``, from
``title="PATH"``; "PATH (continued)" appends) is written to PATH in a fresh directory, then the ``$`` commands of the section "Install it and see it" run there, in a fresh
venv that sees this environment's packages (ezpz, torch): the torch pin, ``pip install -c torch-pin.txt -e
".[test]"`` (a real install, with build isolation), ``python -m mypy --strict ezpz_example_hpu``, ``python -m pytest
tests -q``, ``ezpz plugins``. Every file the page shows must also equal ``plugins/ezpz-example-hpu``'s, and every
file of that package (but ``py.typed``, empty, which the page names) must be on the page, so the tutorial and the
example package cannot drift apart. The installed result passes the conformance kit.
"""

from __future__ import annotations

import html
import os
import re
import shlex
import subprocess
import sys
import sysconfig
from functools import cache
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, need_docs_toolchain

pytestmark = [
    pytest.mark.one_torch,  # the tutorial's text and packaging: runs on the pinned torch only (docs/ci.md)
    pytest.mark.xdist_group("writing_a_plugin"),  # one worker builds the installed tutorial (a module fixture) once
]

DOC = ROOT / "docs" / "writing-a-plugin.md"
EXAMPLE = ROOT / "plugins" / "ezpz-example-hpu"
#: A highlighted code block as mkdocs-material renders it, with its title bar (``title="..."``) if it has one.
_BLOCK = re.compile(r'<div class="language-(?P<lang>[\w-]+) highlight">'
                    r'(?:<span class="filename">(?P<title>.*?)</span>)?'
                    r'<pre><span></span><code>(?P<body>.*?)</code></pre>', re.S)
_HEAD = re.compile(r"^(?P<path>[\w./-]+)(?P<continued> \(continued\))?$")


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


@cache
def rendered() -> str:
    """The tutorial page as the docs site shows it (``mkdocs build`` into a temporary directory)."""
    import tempfile

    need_docs_toolchain()

    site = Path(tempfile.mkdtemp(prefix="ezpz-site-"))
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return (site / "writing-a-plugin" / "index.html").read_text()


def tutorial_files() -> dict[str, str]:
    """PATH -> the text of every block whose title names it, in the order they appear on the rendered page."""
    files: dict[str, list[str]] = {}
    blocks = list(_BLOCK.finditer(rendered()))
    assert blocks, f"no highlighted code block in the rendered {DOC.name}: has the theme's HTML changed?"
    for block in blocks:
        head = _HEAD.match(_text(block["title"] or "").strip())
        if head is None:
            if block["lang"] in ("python", "toml"):
                raise AssertionError(f"a {block['lang']} block without a file title in {DOC.name}:\n{_text(block['body'])}")
            continue
        path, continued = head["path"], bool(head["continued"])
        assert continued == (path in files), f"{path}: '(continued)' must mark exactly the blocks after its first"
        files.setdefault(path, []).append(_text(block["body"]).strip("\n"))
    return {path: "\n\n\n".join(parts) + "\n" for path, parts in files.items()}


def install_commands() -> list[str]:
    """The ``$`` commands of the console block in "Install it and see it", as rendered."""
    page = rendered()
    section = page[page.index('id="9-install-it-and-see-it"'):]
    console = next(b for b in _BLOCK.finditer(section) if b["lang"] == "console")
    return [ln[2:] for ln in _text(console["body"]).splitlines() if ln.startswith("$ ")]


def _normalised(text: str) -> str:
    return re.sub(r"\n{2,}", "\n\n", text.strip()) + "\n"


def _venv_seeing_this_environment(venv: Path) -> Path:
    """A fresh venv whose Python also sees this one's packages (ezpz, torch, pytest): the reader's environment."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    # After the venv's own site-packages, and with their .pth files run (editable installs of ezpz and the plugins).
    Path(purelib, "zz-ezpz-test-parent.pth").write_text("import site; " + "; ".join(f"site.addsitedir({p!r})" for p in ours) + "\n")
    return py


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str], dict[str, str]]:
    """(work dir, the venv's python, environment, each command's output) with the tutorial's package installed by its own commands."""
    work = tmp_path_factory.mktemp("tutorial")
    pkg = work / "ezpz-example-hpu"
    for path, text in tutorial_files().items():
        (pkg / path).parent.mkdir(parents=True, exist_ok=True)
        (pkg / path).write_text(text)
    py = _venv_seeing_this_environment(work / "venv")
    env = clean_env(PATH=f"{py.parent}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(py.parent.parent))
    env.pop("PYTHONPATH", None)
    outputs: dict[str, str] = {}
    for command in install_commands():
        argv = shlex.split(command)
        # `ezpz ...`: the venv's console script would be this one's; run the same CLI through the venv's python.
        shell = command if argv[0] != "ezpz" else shlex.join([str(py), "-m", "ezpz", *argv[1:]])
        proc = subprocess.run(shell, shell=True, cwd=pkg, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"$ {command}\n{proc.stdout}{proc.stderr}"
        outputs[command] = proc.stdout
    return work, py, env, outputs


def _run(work: Path, py: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    # cwd is the work dir, which holds no importable package: only the installed copy can be imported.
    return subprocess.run([str(py), *argv], cwd=work, env=env, capture_output=True, text=True, timeout=300)


#: Every file the tutorial shows, in the order it shows them.
SHOWN = ["pyproject.toml", "README.md", "ezpz_example_hpu/__init__.py", "ezpz_example_hpu/plugin.py",
         "ezpz_example_hpu/core.py", "tests/test_tutorial.py"]


def _example_files() -> set[str]:
    """Every source file of plugins/ezpz-example-hpu, relative to it (no caches, build outputs or py.typed)."""
    skip = ("__pycache__", ".egg-info", "build/", ".pytest_cache", ".mypy_cache")
    return {p.relative_to(EXAMPLE).as_posix() for p in EXAMPLE.rglob("*")
            if p.is_file() and p.name != "py.typed" and not any(s in p.as_posix() for s in skip)}


def test_every_file_of_the_package_is_in_the_tutorial():
    files = tutorial_files()
    assert list(files) == SHOWN
    elided = [ln for text in files.values() for ln in text.splitlines() if ln.strip() in ("...", "# ...")]
    assert not elided, "an elided snippet in the tutorial"
    # The example package is the tutorial's, plus its own further tests (tests/test_example_hpu_*.py, test_typed.py).
    extra = sorted(_example_files() - set(SHOWN))
    assert all(p.startswith("tests/test_") for p in extra), f"files of the example the tutorial does not show: {extra}"
    assert (EXAMPLE / "ezpz_example_hpu" / "py.typed").is_file() and "ezpz_example_hpu/py.typed" in DOC.read_text()


@pytest.mark.parametrize("path", SHOWN)
def test_tutorial_files_equal_the_example_package(path):
    doc, repo = _normalised(tutorial_files()[path]), _normalised((EXAMPLE / path).read_text())
    assert doc == repo, f"docs/writing-a-plugin.md's {path} differs from plugins/ezpz-example-hpu/{path}: update the doc"


def test_the_install_step_installs_the_test_extra_before_the_tests_run():
    commands = install_commands()
    pin = next(i for i, c in enumerate(commands) if "torch-pin.txt" in c and c.startswith("python"))
    install = next(i for i, c in enumerate(commands) if c.startswith("pip install"))
    tests = next(i for i, c in enumerate(commands) if "pytest" in c)
    assert pin < install < tests, commands
    assert "-c torch-pin.txt" in commands[install] and ".[test]" in commands[install]
    assert commands[tests].startswith("python -m pytest"), "a bare `pytest` may be another environment's"


def test_the_tutorials_commands_print_what_it_shows(installed):
    outputs = installed[3]
    assert "Success: no issues found" in outputs["python -m mypy --strict ezpz_example_hpu"]
    assert "4 passed" in outputs["python -m pytest tests -q"]
    assert re.search(r"example-hpu\s+loaded\s+ezpz-example-hpu\s+1.0.0", outputs["ezpz plugins"])


def test_the_installed_tutorial_package_is_the_one_imported(installed):
    work, py, env, _ = installed
    proc = _run(work, py, env, "-c", "import ezpz, ezpz_example_hpu; r = ezpz.hooks.get_plugin_host().records"
                                 "['example-hpu']; print(ezpz_example_hpu.__file__, r.status, r.distribution)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(str(work / "ezpz-example-hpu")) and "loaded ('ezpz-example-hpu', '1.0.0')" in proc.stdout


def test_the_tutorials_tests_pass_on_the_installed_package(installed):
    """The tutorial's test file: the conformance kit (which calls ezpz_before_init) and a planned decision."""
    work, py, env, _ = installed
    proc = _run(work, py, env, "-m", "pytest", "ezpz-example-hpu/tests", "-q", "-p", "no:cacheprovider")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed" in proc.stdout


def test_the_conformance_report_matches_the_tutorial(installed):
    sys.path.insert(0, str(ROOT / "scripts"))
    from doc_samples import shape

    work, py, env, _ = installed
    proc = _run(work, py, env, "-c", "from ezpz.testing import check_plugin; print(check_plugin('example-hpu', environ={}))")
    assert proc.returncode == 0, proc.stderr
    doc = next(_text(b["body"]) for b in _BLOCK.finditer(rendered()) if _text(b["body"]).startswith("plugin 'example-hpu'"))
    assert shape(doc) == shape(proc.stdout), f"update the conformance report in {DOC.name}:\n{proc.stdout}"
    assert proc.stdout.startswith("plugin 'example-hpu' (ezpz_example_hpu.plugin): conformant"), proc.stdout


def test_the_installed_tutorial_package_is_conformant_in_live_mode_too(installed):
    """Live mode on the installed package: its device is simulated (planning only), so the live checks skip, saying why."""
    work, py, env, _ = installed
    code = ("from ezpz.testing import check_plugin; r = check_plugin('example-hpu', live=True); "
            "print(r.passed, [x.name for x in r.results if x.name.startswith('live')], r['live'].detail)")
    proc = _run(work, py, env, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("True ['live'] skipped: example-hpu offers no device here"), proc.stdout


def test_ezpz_doctor_on_the_installed_package(installed):
    work, py, env, _ = installed
    proc = _run(work, py, env, "-m", "ezpz", "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ezpz-example-hpu 1.0.0  requires ezpz<2,>=1.0: ok" in proc.stdout
    assert "not hpu [example-hpu]: habana: habana_frameworks not installed" in proc.stdout
    # the tutorial's plugin against the cpu only: neither the CPU pin (conftest) nor this host's accelerator plugins
    alone = {**{k: v for k, v in env.items() if k != "EZPZ_DEVICE"}, "EZPZ_PLUGINS": "example-hpu"}
    simulated = _run(work, py, {**alone, "EZPZ_EXAMPLE_HPU_SIMULATE": "2"}, "-m", "ezpz", "doctor")
    assert simulated.returncode == 0, simulated.stdout
    assert "device: hpu:0" in simulated.stdout and "backend: gloo" in simulated.stdout
