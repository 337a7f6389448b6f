"""docs/architecture.md's module table is the code's: every module, with its docstring's first line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_module_table_matches_the_code():
    done = subprocess.run([sys.executable, "scripts/module_table.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_check_fails_when_a_module_is_missing(tmp_path):
    """The check can fail: the doc with one row removed differs."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import module_table
    finally:
        sys.path.pop(0)
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| `startup/planning.py`"))
    damaged = doc.replace(row + "\n", "")
    assert module_table.with_table(damaged) != damaged
    assert module_table.with_table(doc) == doc
