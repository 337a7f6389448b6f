"""docs/migrating.md covers every name of the original ezpz, and says truthfully what each one is here.

The original's names are recorded in tests/fixtures/original_ezpz_names.json
(saforem2/ezpz v0.26.1, commit 1229a17; see the file's "source" and "how").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import ezpz
import ezpz.distributed

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
