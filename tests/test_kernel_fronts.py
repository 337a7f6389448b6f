"""Kernel and fronts (docs/architecture.md): setup() loads no front, and every list of the two halves agrees."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from conftest import clean_env, run_python

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import module_table
finally:
    sys.path.pop(0)

CONTRACT = "Kernel and fronts: the kernel imports no front"


def _module(entry: str) -> str:
    return "ezpz." + entry.removesuffix(".py")


def _contract() -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return next(c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == CONTRACT)


def test_setup_loads_no_front_module() -> None:
    fronts = [_module(e) for e in module_table.FRONTS]
    code = ("import json, sys; import ezpz; rt = ezpz.hooks.setup(); "
            f"fronts = {fronts!r}; "
            "loaded = sorted(m for m in sys.modules if any(m == f or m.startswith(f + '.') for f in fronts)); "
            "ezpz.hooks.teardown(); print(json.dumps({'device': rt.device.type, 'loaded': loaded}))")
    done = run_python(code, clean_env(), timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["device"] == "cpu"
    assert said["loaded"] == [], f"setup() imported front modules: {said['loaded']}"


def test_every_top_level_module_is_in_one_half() -> None:
    entries = {p.name for p in module_table.PACKAGE.iterdir()
               if (p.suffix == ".py" or (p / "__init__.py").is_file()) and p.name != "__pycache__"}
    listed = [*module_table.KERNEL, *module_table.FRONTS, *module_table.FACADE]
    assert len(listed) == len(set(listed)), "a module is listed twice"
    assert set(listed) == entries, f"unlisted: {sorted(entries - set(listed))}; gone: {sorted(set(listed) - entries)}"


def test_the_contract_names_the_same_halves() -> None:
    contract = _contract()
    assert contract["type"] == "forbidden"
    assert sorted(contract["source_modules"]) == sorted(_module(e) for e in module_table.KERNEL)
    assert sorted(contract["forbidden_modules"]) == sorted(_module(e) for e in module_table.FRONTS)


def test_the_line_counts_check_can_fail() -> None:
    doc = module_table.DOC.read_text(encoding="utf-8")
    assert module_table.layers_hold(doc) == []
    kernel = module_table.layer_lines()["kernel"]
    row = next(r for r in doc.splitlines() if r.startswith("| kernel |"))
    doubled = doc.replace(row, row.rsplit("|", 2)[0] + f"| {2 * kernel:,} |")
    assert any("kernel" in p for p in module_table.layers_hold(doubled))
