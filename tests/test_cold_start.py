"""What ``import ezpz`` and ``setup()`` load: only what a decision needs, when it needs it.

These are import-graph checks, not timings (speed is measured by benchmarks/,
as ratios within one run). Builds are fed as recorded facts, so the outcome
does not depend on the installed torch.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import clean_env, run_python, skip_or_fail_in_ci

VENDOR_MODULES = {
    "cuda": ("ezpz_cuda.facts", "ezpz_cuda.policy", "ezpz_cuda.probe"),
    "rocm": ("ezpz_rocm.facts", "ezpz_rocm.policy", "ezpz_rocm.probe"),
    "xpu": ("ezpz_xpu.facts", "ezpz_xpu.policy", "ezpz_xpu.probe"),
}


def _loaded_after(code: str, **env: str) -> dict:
    proc = run_python(code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))", clean_env(**env))
    assert proc.returncode == 0, proc.stderr
    return {"modules": set(json.loads(proc.stdout.strip().splitlines()[-1])), "stdout": proc.stdout}


def test_import_ezpz_loads_neither_structlog_nor_attrs_nor_records():
    loaded = _loaded_after("import ezpz")["modules"]
    for heavy in ("structlog", "attr", "attrs", "ezpz.facts", "ezpz.decisions", "ezpz.policies", "torch"):
        assert heavy not in loaded, heavy
    # discovery did run: the built-ins and the installed vendor plugins' entry modules are imported
    assert {"ezpz.builtin.cpu", "ezpz.builtin.launch_env"} <= loaded


@pytest.mark.parametrize(("build", "ruled_out"), [
    ("cpu", ("cuda", "rocm", "xpu")),   # a CPU-only torch rules out every GPU vendor
    ("rocm", ("cuda", "xpu")),          # a ROCm torch is never claimed by the CUDA plugin
    ("cuda", ("rocm", "xpu")),
])
def test_a_vendor_plugin_ruled_out_by_the_build_imports_none_of_its_facts_or_policies(build, ruled_out):
    code = ("import ezpz, json\nfrom ezpz.testing.builds import recorded_build\n"
            f"plan, why = ezpz.hooks.plan(build=recorded_build({build!r}))\n"
            "print(json.dumps({'device': plan.device.torch_device, 'trace': str(why)}))")
    result = _loaded_after(code)
    loaded = result["modules"]
    installed = {v for v in VENDOR_MODULES if f"ezpz_{v}.plugin" in loaded}
    if not installed & set(ruled_out):
        pytest.skip(f"none of the vendor plugins {ruled_out} is installed here")
    info = json.loads(result["stdout"].strip().splitlines()[-2])
    for vendor in installed & set(ruled_out):
        for module in VENDOR_MODULES[vendor]:
            assert module not in loaded, f"{module} imported although a {build} torch rules {vendor} out"
        # the rejection was decided from the build facts alone, by the entry module's gate (standard library
        # only, a module of its own since issue 44 so that the policy can share it): nothing more of the vendor
        assert {m for m in loaded if m.startswith(f"ezpz_{vendor}.")} == {f"ezpz_{vendor}.plugin", f"ezpz_{vendor}.gate"}
    if build == "cpu" and "cuda" in installed:  # and the reason is in the trace, as before
        assert info["device"] == "cpu" and "torch built without CUDA" in info["trace"]


def test_setup_imports_neither_the_launch_drivers_nor_the_original_api_nor_the_testing_kit():
    """``setup()`` imports what deciding needs: not ``ezpz launch``'s drivers, the original ezpz's API or test kits."""
    loaded = _loaded_after("import ezpz\nezpz.hooks.setup()\nezpz.hooks.teardown()")["modules"]
    assert "ezpz.runtime" in loaded  # setup() did run
    for package in ("ezpz.launch_drivers", "ezpz.original", "ezpz.testing", "ezpz.cli", "stevedore"):
        assert not {m for m in loaded if m == package or m.startswith(package + ".")}, package


def test_import_ezpz_reads_plugins_through_the_entry_point_index(tmp_path):
    """The second ``import ezpz`` in an unchanged environment reads the index instead of every distribution."""
    code = "import ezpz\nfrom ezpz.plugin_host import ep_cache\nprint(ep_cache.last_status())"
    statuses = []
    for _ in range(3):  # the first may find sys.path changed moments ago (the index is then not written)
        proc = run_python(code, clean_env(XDG_CACHE_HOME=str(tmp_path)))
        assert proc.returncode == 0, proc.stderr
        statuses.append(proc.stdout.strip().splitlines()[-1])
        if statuses[-1] == "hit":
            break
        import time

        time.sleep(2.1)
    assert statuses[-1] == "hit", statuses


#: Third-party plugins of this repository, and what asking each one on a machine without its device may load
#: beyond its entry module: nothing but tpu's probe (it looks torch_xla up); never facts, policies or records.
THIRD_PARTY_ASKED = {"example-emu": ("ezpz_example_emu", ()), "example-hpu": ("ezpz_example_hpu", ()),
                     "tpu": ("ezpz_tpu", ("ezpz_tpu.probe",))}

_SETUP_WITNESS = """
import json, sys, threading, ezpz
rt = ezpz.hooks.setup()
print(json.dumps({"device": str(rt.device), "modules": sorted(sys.modules),
                  "threads": sorted(t.name for t in threading.enumerate())}))
"""


def _setup_witness(**env: str) -> dict:
    proc = run_python(_SETUP_WITNESS, clean_env(**env))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_an_installed_third_party_plugin_costs_the_cpu_setup_only_its_question(tmp_path):
    """With example-emu, example-hpu or tpu installed but not chosen, ``setup()`` on the CPU loads the same modules
    and runs the same threads as with them disabled, plus each plugin's entry module (and tpu's probe): no plugin
    core, attrs record, policy or worker of theirs that the built-in CPU answers could wait on (issue 34).

    Both runs share a cache directory warmed by a first run: on a fresh machine (the H200) the first setup() writes
    the entry-point index and the compiler probe (loading the atomic-file writer), and a later one only reads them.
    """
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    _setup_witness(**cache)  # warm-up: the user's caches exist after the first run
    alone = _setup_witness(EZPZ_DISABLE_PLUGINS=",".join(THIRD_PARTY_ASKED), **cache)
    installed = {name for name, (package, _) in THIRD_PARTY_ASKED.items()
                 if importlib.util.find_spec(package) is not None}
    if not installed:
        skip_or_fail_in_ci("none of example-emu, example-hpu, tpu is installed here (scripts/test.sh installs them)",
                           "scripts/test.sh installs example-emu, example-hpu and tpu in CI, but none is installed")
    both = _setup_witness(**cache)
    assert both["device"] == alone["device"] == "cpu"
    allowed = set()
    for name in installed:
        package, extra = THIRD_PARTY_ASKED[name]
        allowed |= {package, f"{package}.plugin", *extra}
    added = set(both["modules"]) - set(alone["modules"])
    assert added <= allowed, f"asking {sorted(installed)} loaded more than their entry modules: {sorted(added - allowed)}"
    assert set(alone["modules"]) <= set(both["modules"])
    assert both["threads"] == alone["threads"]


def test_a_single_process_setup_loads_no_straggler_exchange():
    """The straggler exchange (and statistics, decimal, fractions under it) loads only when ranks compare times.

    Measured against ``import torch`` in the same environment: on the H200 (torch 2.11.0+cu130, its image's
    site-packages) ``decimal`` was loaded, with the built-in plugins alone too, while the exchange was not.
    """
    loaded = _loaded_after("import ezpz\nezpz.hooks.setup()")["modules"]
    before = _loaded_after("import torch")["modules"]
    assert "ezpz.runtime" in loaded
    for module in ("ezpz.steps.straggler_exchange", "ezpz.steps.straggler_scores", "statistics", "decimal"):
        assert module not in loaded - before, module


def test_setup_loads_attrs_classic_namespace_only():
    """The core uses ``attr`` (the same functions): the ``attrs`` namespace costs six more modules per process.

    The core alone (built-in plugins only): a plugin for the host's device (ezpz-cuda on a GPU host, the suite's
    one-GPU stand-in) may import ``attrs`` for its own records, which says nothing about the core.
    """
    loaded = _loaded_after("import ezpz\nezpz.hooks.setup()", EZPZ_DISABLE_PLUGIN_AUTOLOAD="1")["modules"]
    assert "attr" in loaded and "attrs" not in loaded


def test_a_single_process_cpu_setup_loads_only_the_modules_it_uses():
    """Issue 44: modules a one-process CPU ``setup()`` does not use are imported where they are used.

    The recompile watch (a lazy device that counts its compilations), the rendezvous store (several ranks;
    ``this_host`` lives with the rendezvous) and the plugin kit's logger (a plugin logging about its own device).
    Each module on the path costs every rank about six file-metadata calls (docs/performance.md).
    """
    loaded = _loaded_after("import ezpz\nezpz.hooks.setup()")["modules"]
    assert {"ezpz.runtime", "ezpz.steps.boundary", "ezpz.steps.hang_watch", "ezpz.plugin_kit"} <= loaded
    assert {"ezpz.steps.recompiles", "ezpz.launch_env.store", "ezpz.plugin_kit.logs"} & loaded == set()
