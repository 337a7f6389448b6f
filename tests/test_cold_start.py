"""What ``import ezpz`` and ``setup()`` load: only what a decision needs, when it needs it.

These are import-graph checks, not timings (speed is measured by benchmarks/,
as ratios within one run). Builds are fed as recorded facts, so the outcome
does not depend on the installed torch.
"""

from __future__ import annotations

import json

import pytest

from conftest import clean_env, run_python

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
        assert f"ezpz_{vendor}.gate" in loaded  # the rejection was decided, from the build facts alone
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
