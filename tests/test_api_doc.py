"""docs/api.md is the public surface as the code gives it: every public module, what it is for, every name in its __all__.

The page is generated (``python scripts/api_page.py --write``); this fails when the code moved on without it.
"""

from __future__ import annotations

import importlib
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import api_page  # noqa: E402


def test_the_page_is_what_the_code_gives():
    assert (ROOT / "docs" / "api.md").read_text() == api_page.page(), "run python scripts/api_page.py --write"


def test_every_public_name_is_listed_under_its_module():
    text = (ROOT / "docs" / "api.md").read_text()
    for name, _audience in api_page.PUBLIC:
        module = importlib.import_module(name)
        section = text.split(f"## `{name}`\n", 1)[1].split("\n## ", 1)[0]
        for item in module.__all__:
            assert f"| `{item}` |" in section, f"{name}.{item} is exported but not on docs/api.md"


def test_the_plugin_kit_and_the_modules_the_tutorial_uses_are_public():
    public = {name for name, _ in api_page.PUBLIC}
    assert {"ezpz.compiling", "ezpz.failures.signatures", "ezpz.plugin_kit", "ezpz.testing", "ezpz.errors"} <= public
    text = (ROOT / "docs" / "api.md").read_text()
    assert "| `with_nccl_hang_budget` | function |" in text
    # every ezpz module a plugin in this repository imports is on the page (the kit's promise: only public modules)
    import re

    used = set()
    for path in (ROOT / "plugins").glob("*/ezpz_*/*.py"):
        used |= set(re.findall(r"^\s*from (ezpz(?:\.\w+)*) import", path.read_text(), re.M))
    assert used - public == set(), f"plugins import modules docs/api.md does not list as public: {used - public}"
