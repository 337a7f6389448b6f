"""The documentation stays true to the code.

* docs/hooks.md documents every hook spec in ezpz/hookspecs.py, with its exact
  signature, kind and version, and no hook that does not exist;
* docs/environment.md names every EZPZ_* variable (and every other
  environment variable name) the core and the plugins use;
* the site builds with ``mkdocs build --strict`` (broken links, anchors and nav
  entries fail), and every page is in the nav;
* docs/api.md (mkdocstrings) renders an entry for every class and function of the public modules, with no
  reStructuredText shown verbatim (tests/test_api_doc.py: its tables list every name of each ``__all__``);
* the complete script in docs/portable-script.md runs, alone and under torchrun; its sharded variant runs alone,
  then resumes from the latest checkpoint under torchrun and under mpiexec.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import DOCS_TOOLS, clean_env, need_docs_toolchain, need_tool

import ezpz.hookspecs

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
HOOKS_MD = DOCS / "hooks.md"
ENV_MD = DOCS / "environment.md"
SCANNED = [ROOT / "ezpz_core", *sorted(ROOT.glob("plugins/*/ezpz_*"))]


# -- the hook reference --------------------------------------------------------------------------------------


class _Raw:
    """An annotation printed as written (``from __future__ import annotations`` makes them strings)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _plain(annotation: Any) -> Any:
    return _Raw(annotation) if isinstance(annotation, str) else annotation


def signature_line(name: str, fn: Any) -> str:
    """``ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport | None``."""
    sig = inspect.signature(fn)
    sig = sig.replace(
        parameters=[p.replace(annotation=_plain(p.annotation)) for p in sig.parameters.values()],
        return_annotation=_plain(sig.return_annotation),
    )
    return f"{name}{sig}"


def hook_specs() -> dict[str, Any]:
    """Every function in ezpz.hookspecs marked as a hook spec, by name."""
    return {
        name: fn
        for name, fn in inspect.getmembers(ezpz.hookspecs, inspect.isfunction)
        if hasattr(fn, "ezpz_spec")
    }


def doc_sections() -> dict[str, str]:
    """``### ezpz_*`` heading -> the text up to the next heading of level 1-3."""
    text = HOOKS_MD.read_text(encoding="utf-8")
    sections: dict[str, str] = {}
    matches = list(re.finditer(r"^#{1,3} .*$", text, flags=re.MULTILINE))
    for i, m in enumerate(matches):
        heading = re.fullmatch(r"### (ezpz_\w+)", m.group(0).strip())
        if heading:
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            sections[heading.group(1)] = text[m.end():end]
    return sections


def test_hookspecs_are_found():
    specs = hook_specs()
    assert "ezpz_probe_devices" in specs and "ezpz_select_backend" in specs, specs


def test_hook_reference_documents_exactly_the_hooks_that_exist():
    specs, documented = set(hook_specs()), set(doc_sections())
    missing, extra = sorted(specs - documented), sorted(documented - specs)
    assert not missing, f"docs/hooks.md has no '### <name>' section for hook spec(s) {missing}"
    assert not extra, f"docs/hooks.md documents hook(s) {extra} that ezpz/hookspecs.py does not define"


@pytest.mark.parametrize("name", sorted(hook_specs()))
def test_hook_reference_has_the_exact_signature(name):
    expected = signature_line(name, hook_specs()[name])
    section = doc_sections().get(name, "")
    lines = [line.strip() for line in section.splitlines()]
    assert expected in lines, (
        f"docs/hooks.md, section '### {name}', must contain the signature line\n    {expected}\n"
        "(in a ```python block) exactly as ezpz/hookspecs.py defines it"
    )


@pytest.mark.parametrize("name", sorted(hook_specs()))
def test_hook_reference_states_kind_version_and_parameters(name):
    fn = hook_specs()[name]
    section = doc_sections().get(name, "")
    kind = "first result" if fn.ezpz_spec.get("firstresult") else "collecting"
    assert re.search(rf"^- \*\*Kind:\*\* {kind}\s*$", section, flags=re.MULTILINE), (
        f"docs/hooks.md, '### {name}': expected the line '- **Kind:** {kind}'"
    )
    found = re.search(r"\.\. versionadded:: (\S+)", inspect.getdoc(fn) or "")
    assert found, f"ezpz/hookspecs.py: {name}'s docstring has no '.. versionadded::'"
    assert re.search(rf"^- \*\*Added in:\*\* {re.escape(found.group(1))}\s*$", section, flags=re.MULTILINE), (
        f"docs/hooks.md, '### {name}': expected the line '- **Added in:** {found.group(1)}'"
    )
    for param in inspect.signature(fn).parameters:
        assert re.search(rf"^- `{param}` \(", section, flags=re.MULTILINE), (
            f"docs/hooks.md, '### {name}': parameter {param!r} is not documented as '- `{param}` (type): ...'"
        )


def test_signature_line_format():
    def ezpz_example(build: TorchBuild, requested: str | None) -> BackendChoice | None:  # noqa: F821 (strings here)
        """Stand-in."""

    assert signature_line("ezpz_example", ezpz_example) == (
        "ezpz_example(build: TorchBuild, requested: str | None) -> BackendChoice | None"
    )


# -- environment variables -----------------------------------------------------------------------------------


def _python_files() -> list[Path]:
    return [p for base in SCANNED for p in sorted(base.rglob("*.py")) if "__pycache__" not in p.parts]


def test_every_ezpz_variable_is_documented():
    names: dict[str, set[str]] = {}
    for path in _python_files():
        for name in re.findall(r"\bEZPZ_[A-Z0-9]+(?:_[A-Z0-9]+)*\b", path.read_text(encoding="utf-8")):
            names.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert "EZPZ_DEVICE" in names and "EZPZ_STRICT_PLUGINS" in names, "the scan found nothing: wrong paths?"
    doc = ENV_MD.read_text(encoding="utf-8")
    missing = {n: sorted(where) for n, where in sorted(names.items()) if f"`{n}`" not in doc}
    assert not missing, f"docs/environment.md does not document these variables (used in): {missing}"


_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
#: Upper-case string literals in the code that are not environment variable names.
NOT_VARIABLES: frozenset[str] = frozenset({
    "DEADLINE_EXCEEDED",  # an XLA/PJRT status in a failure signature (ezpz-tpu)
    # get_dist_info()'s keys, as the original ezpz named them, and a lazily built module attribute
    "DEVICE_ID", "DISTRIBUTED_BACKEND", "GPUS_PER_NODE", "NGPUS_AVAILABLE", "NODE_ID", "WORLD_SIZE_IN_USE",
    "WORLD_SIZE_TOTAL", "TORCH_DTYPES_MAP",
    # Level Zero result codes: failure-signature patterns in ezpz-xpu, not variables
    "UR_RESULT_ERROR_DEVICE_LOST", "UR_RESULT_ERROR_OUT_OF_RESOURCES",
    # jsrun's values for --cpu_per_rs/--gpu_per_rs, and ezpz.pbs.get_pbs_launch_info()'s keys (the original's)
    "ALL_CPUS", "ALL_GPUS", "LAUNCH_CMD", "NGPU_PER_HOST",
    # an os module constant looked up with getattr (absent on Windows)
    "O_NOFOLLOW",
    # a torch.distributed.ReduceOp name (MeshSupport.unsupported_reduce_ops), not a variable
    "PREMUL_SUM",
})


def test_every_environment_variable_name_in_the_code_is_documented():
    """Upper-case string literals such as "SLURM_PROCID" are variable names; constants' own names are not."""
    literals: dict[str, set[str]] = {}
    python_names: set[str] = set()
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                python_names.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _ENV_NAME.match(node.value):
                literals.setdefault(node.value, set()).add(str(path.relative_to(ROOT)))
    doc = ENV_MD.read_text(encoding="utf-8")
    missing = {
        n: sorted(where) for n, where in sorted(literals.items())
        if n not in python_names and n not in NOT_VARIABLES and n not in doc  # __all__ entries are Python names
    }
    assert not missing, (
        f"docs/environment.md does not mention these environment variable names (used in): {missing}. "
        "Document each variable there; if a string is not an environment variable, add it to NOT_VARIABLES "
        "in tests/test_docs.py"
    )


# -- the site ------------------------------------------------------------------------------------------------


def test_site_builds_strict(tmp_path):
    need_docs_toolchain()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    assert (tmp_path / "site" / "hooks" / "index.html").exists()
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    # Every class and function a public module defines has its full entry (constants and names re-exported from
    # elsewhere are in the page's tables, tests/test_api_doc.py).
    missing = [f"{module}.{name}" for module in API_MODULES for name in public_names(module)
               if _defined_in(module, name) and f'id="{module}.{name}"' not in api]
    assert not missing, f"docs/api.md renders no entry for {missing}: add its module's ::: line, or its docstring"
    roles = sorted(set(re.findall(r":(?:func|class|mod|meth|attr|data|exc|param|returns?):", api)))
    assert not roles, f"reStructuredText {roles} shown verbatim in the API reference (scripts/griffe_rst_roles.py)"


#: The public modules docs/api.md documents (scripts/api_page.py), each also rendered from its docstrings (mkdocstrings).
sys.path.insert(0, str(ROOT / "scripts"))
from api_page import PUBLIC  # noqa: E402

API_MODULES = tuple(name for name, _for in PUBLIC)


def _defined_in(module: str, name: str) -> bool:
    obj = getattr(importlib.import_module(module), name)
    return (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == module


def public_names(module: str) -> list[str]:
    """The module's ``__all__``, else the public classes and functions it defines."""
    mod = importlib.import_module(module)
    if hasattr(mod, "__all__"):
        return list(mod.__all__)
    return [n for n, v in vars(mod).items() if not n.startswith("_") and (inspect.isclass(v) or inspect.isfunction(v))
            and v.__module__ == module]


def test_the_docs_toolchain_is_pinned_alike_everywhere_it_is_described():
    """scripts/test.sh installs it, README.md and mkdocs.yml tell a reader how: one set of pins."""
    for where in ("scripts/test.sh", "README.md", "mkdocs.yml"):
        text = (ROOT / where).read_text(encoding="utf-8")
        unpinned = [dist for dist in DOCS_TOOLS.values() if dist not in text]
        assert not unpinned, f"{where} does not pin {unpinned} (tests/conftest.py DOCS_TOOLS): keep them equal"


def test_api_page_names_every_module_of_the_contract():
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    assert re.findall(r"^::: (\S+)$", text, flags=re.M) == list(API_MODULES)


def test_every_page_is_in_the_nav():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config[config.index("\nnav:"):]
    listed = set(re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w./-]+\.md)\s*$", nav, flags=re.MULTILINE))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    orphans = sorted(pages - listed)
    assert not orphans, (
        f"pages missing from the nav in mkdocs.yml: {orphans}; add a line such as "
        f"'  - Title: {orphans[0]}' under nav"
    )


# -- the portable script -------------------------------------------------------------------------------------


def portable_script() -> str:
    text = (DOCS / "portable-script.md").read_text(encoding="utf-8")
    section = text[text.index("## The whole script"):]
    found = re.search(r"```python[^\n]*\n(.*?)\n```", section, flags=re.DOTALL)
    assert found, "docs/portable-script.md: no ```python block under '## The whole script'"
    return found.group(1) + "\n"


def _run_script(tmp_path: Path, *launcher: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "portable_train.py"
    script.write_text(portable_script(), encoding="utf-8")
    env = clean_env(OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, *launcher, str(script), "--steps", "3"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_portable_script_runs_as_one_process(tmp_path):
    proc = _run_script(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 of 1 on " in proc.stdout and "device: " in proc.stdout, proc.stdout


def sharded_script() -> str:
    text = (DOCS / "portable-script.md").read_text(encoding="utf-8")
    found = re.search(r"```python[^\n]*\n(.*?)\n```", text[text.index("## The sharded variant"):], flags=re.DOTALL)
    assert found, "docs/portable-script.md: no ```python block under '## The sharded variant'"
    return found.group(1) + "\n"


def _run_sharded(tmp_path: Path, steps: int, *launcher: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "portable_sharded.py"
    script.write_text(sharded_script(), encoding="utf-8")
    return subprocess.run([*launcher, str(script), "--steps", str(steps), "--checkpoint-every", "2"], cwd=tmp_path,
                          env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120"), capture_output=True, text=True,
                          timeout=300)


def _checkpoints(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "checkpoints").iterdir())


def test_sharded_script_runs_alone_and_resumes_from_its_latest_checkpoint(tmp_path):
    proc = _run_sharded(tmp_path, 3, sys.executable)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 of 1 on " in proc.stdout and "step 3, loss " in proc.stdout and "resumed" not in proc.stdout
    assert _checkpoints(tmp_path) == ["step-000002", "step-000003"]
    proc = _run_sharded(tmp_path, 4, sys.executable)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "resumed from checkpoints/step-000003 at step 3" in proc.stdout, proc.stdout
    assert _checkpoints(tmp_path) == ["step-000002", "step-000003", "step-000004"]


@pytest.mark.launcher
def test_sharded_script_resumes_on_other_world_sizes_under_torchrun_and_mpiexec(tmp_path):
    """One process saves; 2 ranks under torchrun resume it sharded; 2 ranks under Open MPI's mpiexec go on."""
    torchrun, mpiexec = need_tool("torchrun"), need_tool("mpiexec")
    assert _run_sharded(tmp_path, 2, sys.executable).returncode == 0
    proc = _run_sharded(tmp_path, 4, torchrun, "--standalone", "--nproc-per-node", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "resumed from" in proc.stdout and "at step 2" in proc.stdout, proc.stdout
    assert "rank 0 of 2 on " in proc.stdout and "step 4, loss " in proc.stdout, proc.stdout
    assert "rt.shard(): FSDP2" in proc.stdout, proc.stdout
    proc = _run_sharded(tmp_path, 6, mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", "2",
                        "-x", "OMP_NUM_THREADS=1", sys.executable)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "at step 4" in proc.stdout and "rank 0 of 2 on " in proc.stdout and "step 6, loss " in proc.stdout
    assert _checkpoints(tmp_path) == [f"step-00000{n}" for n in (2, 4, 6)]


@pytest.mark.launcher
def test_portable_script_runs_under_torchrun(tmp_path):
    proc = _run_script(tmp_path, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 of 2 on " in proc.stdout, proc.stdout
    assert "launch: torchrun: rank 0/2" in proc.stdout, proc.stdout
