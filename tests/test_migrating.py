"""docs/migrating.md covers every name of the original ezpz, and says truthfully what each one is here.

The original's names are recorded in tests/fixtures/original_ezpz_names.json
(saforem2/ezpz v0.26.1, commit 1229a17; see the file's "source" and "how").
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ezpz
import ezpz.distributed
from conftest import clean_env

ROOT = Path(__file__).resolve().parent.parent
NAMES = json.loads((ROOT / "tests" / "fixtures" / "original_ezpz_names.json").read_text(encoding="utf-8"))
PAGE = (ROOT / "docs" / "migrating.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `([^`]+)` \| (supported|changed|not included|new) \| (.+) \|$", re.MULTILINE)


def _rows(section: str) -> dict[str, str]:
    start = PAGE.index(section)
    end = PAGE.find("\n## ", start + 1)
    return {m[1]: m[2] for m in ROW.finditer(PAGE[start:end if end > 0 else None])}


TOP = _rows("## Top-level names")
DIST_ONLY = _rows("## Names only in `ezpz.distributed`")


def test_fixture_is_the_recorded_original_list():
    assert "1229a17" in NAMES["source"] and len(NAMES["top_level"]) == len(set(NAMES["top_level"])) == 84
    assert "setup_torch" in NAMES["top_level"] and "History" in NAMES["top_level"]
    assert "get_dist_info" in NAMES["distributed"]


def test_page_lists_every_original_top_level_name_once():
    missing = [n for n in NAMES["top_level"] if n not in TOP]
    assert not missing, f"docs/migrating.md lacks rows for: {missing}"
    extra = sorted(set(TOP) - set(NAMES["top_level"]))
    assert not extra, f"rows for names the original did not have at top level: {extra}"


def test_page_covers_every_original_distributed_name():
    missing = [n for n in NAMES["distributed"] if n not in TOP and n not in DIST_ONLY]
    assert not missing, f"docs/migrating.md lacks rows for ezpz.distributed names: {missing}"


def _check(module: object, prefix: str, name: str, status: str) -> None:
    if status == "not included":
        with pytest.raises(AttributeError) as err:
            getattr(module, name)
        text = str(err.value)
        assert f"{prefix}.{name}" in text and "not included" in text and "migrating.md" in text, text
        assert "Instead:" in text
    else:
        assert getattr(module, name) is not None


@pytest.mark.parametrize("name", NAMES["top_level"])
def test_top_level_name_behaves_as_the_page_says(name):
    _check(ezpz, "ezpz", name, TOP[name])


@pytest.mark.parametrize("name", NAMES["distributed"])
def test_distributed_name_behaves_as_the_page_says(name):
    status = DIST_ONLY.get(name) or TOP[name]
    _check(ezpz.distributed, "ezpz.distributed", name, status)


def test_unknown_names_still_raise_the_plain_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        ezpz.no_such_thing  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        ezpz.distributed.no_such_thing  # noqa: B018


# -- the original's module names: ordinary modules, no import hook ------------------------------------------------

ORIGINAL_MODULES = ("distributed", "log", "pbs", "slurm")


def test_import_ezpz_and_setup_add_no_import_hook_and_the_original_modules_are_ordinary():
    """No finder of ezpz's on sys.meta_path or sys.path_hooks, after ``import ezpz`` and after ``setup()``.

    Was: a meta-path finder in front of every import of the process (for module paths never released), and later
    one for ezpz's own modules (``ezpz.primitives.core_finder``, removed in issue 44: a library does not change how
    Python imports, docs/performance.md). Checked in a fresh interpreter, so nothing this test process imported counts.
    """
    code = ("import importlib, json, sys\nbefore = list(sys.meta_path), list(sys.path_hooks)\nimport ezpz\n"
            "after_import = list(sys.meta_path), list(sys.path_hooks)\n"
            "ezpz.hooks.setup()\n"
            f"mods = {{m: importlib.import_module('ezpz.' + m) for m in {ORIGINAL_MODULES!r}}}\n"
            "def names(finders): return [getattr(f, '__module__', None) or type(f).__module__ for f in finders]\n"
            "ours = [n for n in names([*sys.meta_path, *sys.path_hooks]) if n.split('.')[0].startswith('ezpz')]\n"
            "same = all(mods[m] is sys.modules['ezpz.original.' + m] is getattr(ezpz, m) for m in mods)\n"
            "print(json.dumps({'ours': ours, 'same': same, 'import_kept': after_import == before,"
            " 'setup_kept': (list(sys.meta_path), list(sys.path_hooks)) == before, 'plugins': sorted(ezpz.hooks.get_plugin_host().loaded())}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["plugins"], "no plugin was loaded: the check would see nothing of theirs"
    del out["plugins"]
    assert out == {"ours": [], "same": True, "import_kept": True, "setup_kept": True}, out


@pytest.mark.parametrize("old", ["ezpz.plugins", "ezpz.calls", "ezpz.planning", "ezpz.probe", "ezpz.launchers",
                                 "ezpz.store", "ezpz.compat", "ezpz.timing", "ezpz.integrations.deepspeed"])
def test_this_projects_unreleased_module_paths_are_gone(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_python_m_ezpz_launch_is_ezpz_launch():
    """The original's ``python -m ezpz.launch [flags] [--] COMMAND`` (its launcher), here ``ezpz launch``."""
    args = ["--dry-run", "-n", "2", "--", "python", "train.py"]
    env = clean_env()
    launch = subprocess.run([sys.executable, "-m", "ezpz.launch", *args], capture_output=True, text=True, env=env,
                            timeout=120)
    cli = subprocess.run([sys.executable, "-m", "ezpz", "launch", *args], capture_output=True, text=True, env=env,
                         timeout=120)
    assert (launch.returncode, launch.stdout, launch.stderr) == (cli.returncode, cli.stdout, cli.stderr)
    assert "train.py" in launch.stdout or launch.returncode == 2, launch.stderr


def test_the_original_launcher_helpers_say_what_to_use():
    import ezpz.launch

    with pytest.raises(AttributeError) as err:
        ezpz.launch.build_executable  # noqa: B018
    assert "ezpz launch" in str(err.value) and "migrating.md" in str(err.value)
    assert ezpz.launch is ezpz.__getattr__("launch")
