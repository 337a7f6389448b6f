"""Every way a CUDA device reaches torch from the script lands on the chosen device (here ``emu``), never the CPU.

``nn.Linear(..., device='cuda')`` (torch's own code calls the factory), ``with torch.device('cuda')``,
``torch.set_default_device('cuda')``, ``torch.get_device_module('cuda')``, ``torch.cuda.device(0)`` blocks, and
``torch.Generator(device='cuda')``, which ``emu`` cannot make (no generator of its own): it raises at its line,
naming it. A library in a site directory doing ``with torch.device('cuda')`` still gets torch's own refusal,
not CPU tensors (torch's cached factory list is built before the mode replaces the factories).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import clean_env, last_json

SCRIPT = textwrap.dedent("""\
    import json, site, sys
    import torch, torch.nn as nn
    site.addsitedir(sys.argv[1])
    import sitelib
    out = {"linear": nn.Linear(4, 4, device="cuda").weight.device.type}
    m = nn.Sequential(nn.LayerNorm(4, device="cuda"), nn.BatchNorm1d(4, device="cuda"),
                      nn.Embedding(5, 4, device="cuda"), nn.Conv1d(2, 2, 3, device="cuda"),
                      nn.LSTM(4, 4, device="cuda"), nn.MultiheadAttention(4, 2, device="cuda"))
    out["modules"] = sorted({t.device.type for t in [*m.parameters(), *m.buffers()]})
    with torch.device("cuda"):
        out["context"] = [torch.zeros(2).device.type, nn.Linear(2, 2).weight.device.type, torch.randn(2).device.type]
    out["after_context"] = torch.zeros(1).device.type
    torch.set_default_device("cuda")
    out["default"] = [torch.ones(2).device.type, nn.Linear(2, 2).bias.device.type]
    torch.set_default_device(None)
    out["after_default"] = torch.zeros(1).device.type
    out["module"] = torch.get_device_module("cuda").is_available()
    with torch.cuda.device(0):
        out["block"] = torch.zeros(1, device="cuda").device.type
    try:
        out["library"] = sitelib.make()
    except (RuntimeError, AssertionError) as err:
        out["library"] = type(err).__name__
    try:
        torch.Generator(device="cuda")
        out["generator"] = "made"
    except RuntimeError as err:
        out["generator"] = str(err)
    print(json.dumps(out))
    """)


def test_cuda_devices_reach_emu_however_they_flow(tmp_path):
    site_dir = tmp_path / "lib" / "site-packages"
    site_dir.mkdir(parents=True)
    (site_dir / "sitelib.py").write_text(
        "import torch\n\ndef make():\n    with torch.device('cuda'):\n        return torch.zeros(1).device.type\n")
    script = tmp_path / "flows.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "ezpz.cuda_compat", str(script), str(site_dir)], cwd=tmp_path,
                          env=clean_env(EZPZ_DEVICE="emu", EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report")),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = last_json(proc.stdout)
    generator = out.pop("generator")
    library = out.pop("library")
    assert out == {"linear": "emu", "modules": ["emu"], "context": ["emu"] * 3, "after_context": "cpu",
                   "default": ["emu", "emu"], "after_default": "cpu", "module": True, "block": "emu"}
    # The library gets torch's own refusal, never an emu (or CPU) tensor: a CPU build of torch asserts "Torch not
    # compiled with CUDA enabled", a CUDA build without a GPU raises RuntimeError (no driver).
    assert library in ("AssertionError", "RuntimeError"), library
    assert generator == "made" or generator.startswith(f"{script}:") and "torch.Generator(device='cuda')" in generator
    rows = json.loads((tmp_path / "report" / "rank-0.json").read_text())["sites"]
    calls = {(r["line"], r["call"]) for r in rows}
    assert (5, "torch.empty(device='cuda')") in calls  # nn.Linear's factory, at the script's line
    assert any(line == 10 and call.startswith("default device") for line, call in calls)
    assert any(line == 13 and call.startswith("default device") for line, call in calls)
