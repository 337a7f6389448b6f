"""The CUDA-compat mode, run twice in one process: each run leaves the process as it found it.

``sys.argv``, ``sys.path``, ``os.environ``, ``sys.modules['__main__']``, the plugin host's registrations and the
torch flags a device plugin turns on (emu's swap-module-params mode) are the same before the first run, between
the runs and after the second; and the second run redirects as the first did (its plugin does not collide).
"""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import clean_env, run_python

SCRIPT = textwrap.dedent("""
    import os, sys
    import torch

    os.environ["SET_BY_THE_SCRIPT"] = sys.argv[1]
    sys.path.append("/added/by/the/script")
    x = torch.zeros(2).to("cuda")
    print("ran", sys.argv[1:], x.device.type)
""")

DRIVER = textwrap.dedent("""
    import json, os, sys
    import torch
    import ezpz
    from ezpz.cuda_compat.session import run_script

    def state():
        host = ezpz.hooks.get_plugin_host()
        return {"argv": list(sys.argv), "path": list(sys.path), "environ": dict(os.environ),
                "main": id(sys.modules["__main__"]), "plugins": sorted(host.records),
                "failures": [r.name for r in host.failures],
                "swap": torch.__future__.get_swap_module_params_on_conversion()}

    before, runs = state(), []
    for n in ("first", "second"):
        data = run_script(SCRIPT, [n])
        runs.append({"after": state(), "redirected": len(data["sites"]) if data else None,
                     "device": data["device"] if data else None})
    print(json.dumps({"before": before, "runs": runs}))
""")


@pytest.mark.parametrize("device", ["cpu", "emu"])
def test_two_runs_in_one_process_leave_it_as_it_was(device: str, tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = clean_env(EZPZ_DEVICE=device, EZPZ_PRECISION="fp32", EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report"))
    done = run_python(DRIVER.replace("SCRIPT, [n]", f"{str(script)!r}, [n]"), env, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    before = said["before"]
    assert "ran ['first'] " in done.stdout and "ran ['second'] " in done.stdout
    for run in said["runs"]:
        after = run["after"]
        for key in ("argv", "path", "main", "plugins", "swap"):
            assert after[key] == before[key], (key, after[key], before[key])
        assert after["environ"] == before["environ"], sorted(set(after["environ"].items()) ^ set(before["environ"].items()))
        assert after["failures"] == [], after["failures"]  # the second run's mode plugin did not collide
        assert run["redirected"] and run["device"].startswith(device)
    assert before["swap"] is False  # emu turns the mode on for its run only
