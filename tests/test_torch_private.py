"""Every private torch name ezpz uses is listed, guarded, and works (or falls back as listed) on this torch.

Runs standalone (``python -m pytest tests/test_torch_private.py``, nothing from conftest) so the
compatibility jobs run it under the oldest and the newest torch as well as CI's pin: on a release of
:data:`~ezpz.primitives.torch_private.CHECKED_ON` each name must be present exactly where the list says; on any
torch each guard must give the real answer where the name exists and its listed fallback where not.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import torch

from ezpz.primitives import torch_private
from ezpz.primitives.torch_private import PRIVATE_NAMES

ROOT = Path(__file__).resolve().parent.parent

#: Private names the code touches that are not torch's, with whose they are.
NOT_TORCH = {
    "_t": "ezpz's own event timestamp (ezpz.cuda_compat.facade's Event on a device without events)",
    "_path": "importlib.metadata.PathDistribution's directory (ezpz.plugin_host.ep_cache)",
    "_replace": "a named tuple's public method",
    "_asdict": "a named tuple's public method",
    "_fields": "a named tuple's public attribute (ezpz.testing.torch_db_samples tells a named tuple from a tuple)",
    "_send": "ezpz's own PMI client (ezpz.launch_env.pmi)",
    "_expect": "ezpz's own PMI client (ezpz.launch_env.pmi)",
    "_exit": "os._exit, the standard library's",
    "_getframe": "sys._getframe, the standard library's",
    "_current_frames": "sys._current_frames, the standard library's",
    "_SubParsersAction": "argparse's (the type of add_subparsers())",
    "_ActionsContainer": "argparse's (the common base of a parser and an argument group)",
    "_XLAC": "torch_xla's C extension (ezpz-tpu's lazy_steps.py: the step's graph text, read inside a guard)",
    "_get_xla_tensors_hlo": "torch_xla's graph-debugging call (ezpz-tpu's lazy_steps.py, guarded by the step marker)",
    "_maybe_convert_to_cpu": "torch_xla's xm.save helper (ezpz-tpu's lazy_steps.py; without it, sync then .cpu())",
}
_PRIVATE = re.compile(r"^_[A-Za-z][A-Za-z0-9_]*$")
_TORCH_PATH = re.compile(r"^torch(\.\w+)*\._[A-Za-z]")


#: Plugins left out, with why: they are not ezpz's code paths but emulate a device through torch's internals.
EMULATORS = {
    "ezpz-example-emu": "emulates a PrivateUse1 device in Python, which only torch's private registration and "
                        "dispatcher APIs can do; it requires torch>=2.13 and is tested on the pinned torch (its README)",
}


def _code_files() -> Iterator[Path]:
    yield from sorted((ROOT / "ezpz_core" / "ezpz").rglob("*.py"))
    for plugin in sorted((ROOT / "plugins").glob("*/")):
        if plugin.name in EMULATORS:
            continue
        for path in sorted(plugin.rglob("*.py")):
            if "tests" not in path.relative_to(plugin).parts and path.name != "setup.py":
                yield path


def _called(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _uses(tree: ast.AST) -> Iterator[str]:
    """Private names read off another object: ``x._name``, ``getattr(x, "_name")``, ``from torch.y import _z``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _PRIVATE.match(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                yield node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _PRIVATE.match(node.args[1].value)):
            yield node.args[1].value
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            yield from (a.name for a in node.names if _PRIVATE.match(a.name))
            yield from (part for part in (node.module or "").split(".") if _PRIVATE.match(part))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    yield from (part for part in alias.name.split(".") if _PRIVATE.match(part))
        elif (isinstance(node, ast.Call) and _called(node) in ("import_module", "__import__", "find_spec")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and _TORCH_PATH.match(node.args[0].value)):
            yield from (part for part in node.args[0].value.split(".") if _PRIVATE.match(part))


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body[0] = ast.Pass()
    return tree


def _used() -> dict[str, set[str]]:
    """Private name -> the files (from the repository root) that use it."""
    out: dict[str, set[str]] = {}
    for path in _code_files():
        tree = _strip_docstrings(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for name in _uses(tree):
            out.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    return out


def _parts(entry: torch_private.PrivateName) -> set[str]:
    """Every private part of a listed name (``torch._C._stash_obj_in_tls``: ``_C`` and ``_stash_obj_in_tls``)."""
    return {part for part in entry.name.split(".") if _PRIVATE.match(part)}


def test_every_private_name_the_code_uses_is_listed_where_it_is_used():
    listed = {(part, where) for p in PRIVATE_NAMES for part in _parts(p) for where in p.where}
    unlisted = sorted(f"{name} in {where}" for name, files in _used().items() if name not in NOT_TORCH
                      for where in files if (name, where) not in listed)
    assert not unlisted, (f"private names used but not in ezpz.primitives.torch_private.PRIVATE_NAMES: {unlisted}; "
                          "add each with its fallback (or, if it is not torch's, to NOT_TORCH here)")


def test_every_listed_name_is_used_where_the_list_says():
    used = _used()
    stale = [f"{p.name} in {w}" for p in PRIVATE_NAMES for w in p.where for part in _parts(p)
             if w not in used.get(part, ())]
    assert not stale, f"listed in ezpz.primitives.torch_private.PRIVATE_NAMES but not used there: {stale}"
    assert set().union(*map(_parts, PRIVATE_NAMES)).isdisjoint(NOT_TORCH)


def test_every_entry_says_why_and_what_happens_without_it():
    assert len({p.name for p in PRIVATE_NAMES}) == len(PRIVATE_NAMES)
    for p in PRIVATE_NAMES:
        assert p.name.startswith("torch.") and _parts(p), p
        assert p.why.strip() and p.fallback.strip() and p.where, p
        assert set(p.absent_in) <= set(torch_private.CHECKED_ON), p


def test_docs_compat_lists_every_private_name():
    text = (ROOT / "docs" / "compat.md").read_text(encoding="utf-8")
    section = text[text.index("## Private torch names"):]
    section = section[:section.find("\n## ", 1) if "\n## " in section[1:] else None]
    rows = re.findall(r"^\| `(torch\.[^`]+)` \|", section, re.MULTILINE)
    assert sorted(rows) == sorted(p.name for p in PRIVATE_NAMES)
    for release in torch_private.CHECKED_ON:
        assert release in section


# -- on this torch ----------------------------------------------------------------------------------------------

RELEASE = torch.__version__.split("+")[0]
CUDA_BUILD = torch.version.cuda is not None


def _dist() -> object:
    if not torch.distributed.is_available():
        pytest.skip("this torch was built without torch.distributed")
    return torch.distributed


@pytest.fixture(scope="module")
def gloo_group() -> Iterator[object]:
    """A one-rank gloo group in this process (a HashStore: no port, no peer)."""
    dist = _dist()
    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=timedelta(seconds=30))
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def _mesh_cls() -> type:
    _dist()
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh


def _gloo_options_threads(group: object) -> bool:
    backend = group._get_backend(torch.device("cpu"))
    return hasattr(backend.options, "_threads")


def _importable(name: str) -> bool:
    import importlib

    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


#: Whether this torch has each listed name (the group is a one-rank gloo group).
PRESENT: dict[str, Callable[[object], bool]] = {
    "torch.autograd.profiler._is_profiler_enabled": lambda g: hasattr(torch.autograd.profiler, "_is_profiler_enabled"),
    "torch._C._stash_obj_in_tls": lambda g: hasattr(torch._C, "_stash_obj_in_tls"),
    "torch._C._remove_obj_from_tls": lambda g: hasattr(torch._C, "_remove_obj_from_tls"),
    "torch.distributed.ProcessGroup._get_backend": lambda g: hasattr(_dist().ProcessGroup, "_get_backend"),
    "torch.distributed.ProcessGroupGloo.options._threads": _gloo_options_threads,
    "torch.distributed.device_mesh.DeviceMesh._flatten": lambda g: hasattr(_mesh_cls(), "_flatten"),
    "torch.distributed._composable.fsdp": lambda g: _importable("torch.distributed._composable.fsdp"),
    "torch.xpu._is_compiled": lambda g: hasattr(getattr(torch, "xpu", None), "_is_compiled"),
    "torch.nn.Module._parameters": lambda g: hasattr(torch.nn.Linear(1, 1), "_parameters"),
    "torch.utils._device._device_constructors": lambda g: hasattr(importlib.import_module("torch.utils._device"),
                                                                  "_device_constructors"),
    "torch.testing._internal": lambda g: _importable("torch.testing._internal"),
    "torch._C._cuda_getArchFlags": lambda g: hasattr(torch._C, "_cuda_getArchFlags"),
}


def test_each_listed_name_has_a_presence_check_here():
    assert sorted(PRESENT) == sorted(p.name for p in PRIVATE_NAMES)


@pytest.mark.parametrize("entry", PRIVATE_NAMES, ids=lambda p: p.name)
def test_presence_on_this_torch_is_as_listed(entry, gloo_group):
    if RELEASE not in torch_private.CHECKED_ON:
        pytest.skip(f"torch {RELEASE} is not one of the releases checked ({', '.join(torch_private.CHECKED_ON)})")
    expected = RELEASE not in entry.absent_in and (entry.builds != "CUDA builds" or CUDA_BUILD)
    assert PRESENT[entry.name](gloo_group) == expected, (
        f"torch {torch.__version__} {'has' if not expected else 'lacks'} {entry.name}, "
        f"which ezpz.primitives.torch_private.PRIVATE_NAMES records otherwise (fallback: {entry.fallback})")


def test_profiler_enabled_answers_on_this_torch_and_falls_back_to_on(monkeypatch):
    if hasattr(torch.autograd.profiler, "_is_profiler_enabled"):
        assert torch_private.profiler_enabled() is False
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            assert torch_private.profiler_enabled() is True
        assert torch_private.profiler_enabled() is False
        monkeypatch.delattr(torch.autograd.profiler, "_is_profiler_enabled")
    assert torch_private.profiler_enabled() is True  # cannot tell: ranges open a record_function


def test_tls_stash_round_trip_or_none(monkeypatch):
    stashing = torch_private.tls_stash()
    if stashing is None:
        assert not (hasattr(torch._C, "_stash_obj_in_tls") and hasattr(torch._C, "_remove_obj_from_tls"))
    else:
        put, take = stashing
        put("ezpz-test", object())
        take("ezpz-test")
        monkeypatch.delattr(torch._C, "_remove_obj_from_tls")
    assert torch_private.tls_stash() is None


def test_backend_and_gloo_threads_on_this_torch_and_without_the_names(gloo_group):
    backend = torch_private.backend_for_device(gloo_group, torch.device("cpu"))
    if hasattr(gloo_group, "_get_backend"):
        assert type(backend).__name__ == "ProcessGroupGloo"
        assert torch_private.gloo_threads(backend) >= 1
    else:
        assert backend is None
    assert torch_private.backend_for_device(object(), torch.device("cpu")) is None

    class Options:
        _threads = 5

    class Backend:
        options = Options()

    assert torch_private.gloo_threads(Backend()) == 5
    assert torch_private.gloo_threads(object()) == torch_private.GLOO_DEFAULT_THREADS


def test_quiesce_runs_or_says_why_not_and_recognises_gloo_by_its_public_name(gloo_group, monkeypatch):
    """Whether every worker is seen is test_gloo_quiesce's (two ranks); here: it runs, or is skipped saying why."""
    from ezpz.primitives import gloo_quiesce

    report = gloo_quiesce.quiesce(torch, gloo_group, deadline_s=2.0)
    if torch_private.tls_stash() is None:
        assert not report.attempted and report.reason.startswith("skipped: this torch has no thread-local"), report
    else:
        assert report.attempted and report.workers == torch_private.gloo_threads(
            torch_private.backend_for_device(gloo_group, torch.device("cpu"))), report
    monkeypatch.setattr(gloo_quiesce, "backend_for_device", lambda group, device: None)  # a torch without it
    assert gloo_quiesce._gloo_workers(torch, gloo_group) == torch_private.GLOO_DEFAULT_THREADS
    monkeypatch.setattr(torch.distributed, "get_backend", lambda group=None: "nccl")
    assert gloo_quiesce._gloo_workers(torch, gloo_group) is None
    monkeypatch.undo()
    monkeypatch.delattr(torch._C, "_remove_obj_from_tls", raising=False)
    report = gloo_quiesce.quiesce(torch, gloo_group, deadline_s=2.0)
    assert not report.attempted and report.reason.startswith("skipped: this torch has no thread-local"), report


def test_flatten_device_mesh_safe_flattens_or_names_this_torch(gloo_group):
    from ezpz.errors import UnavailableError
    from ezpz.original.meshes import flatten_device_mesh_safe, init_device_mesh_safe

    mesh = init_device_mesh_safe("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
    if torch_private.flatten_mesh(mesh) is not None:
        assert flatten_device_mesh_safe(mesh, "dp_tp").size() == 1
    else:
        with pytest.raises(UnavailableError, match=re.escape(f"torch {torch.__version__}")):
            flatten_device_mesh_safe(mesh, "dp_tp")
    assert torch_private.flatten_mesh(object()) is None


def test_fsdp2_is_found_on_this_torch_or_named(monkeypatch):
    import importlib

    module = torch_private.fsdp2()
    assert module is not None and callable(module.fully_shard)  # every torch from 2.4.1 has FSDP2, somewhere
    public = importlib.import_module("torch.distributed.fsdp")
    assert module.__name__ == ("torch.distributed.fsdp" if hasattr(public, "fully_shard")
                               else "torch.distributed._composable.fsdp")
    real = importlib.import_module

    def without_fsdp(name: str):
        if "fsdp" in name:
            raise ImportError(name)
        return real(name)

    monkeypatch.setattr(importlib, "import_module", without_fsdp)
    assert torch_private.fsdp2() is None
