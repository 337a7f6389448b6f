"""Only the script's own project is redirected; a library outside it gets torch's true answers.

The project is a directory made here: its script and its own module ask ``torch.cuda.is_available()`` and get
True (CUDA requests go to the chosen device); a package in a site directory (``.venv/lib/.../site-packages``
inside the project, put on the path with ``site.addsitedir``) and one in a plain directory outside the project
ask the same and get the truth: False on this CPU-only torch. What cannot be redirected raises at its line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import clean_env, last_json

LIB = "import torch\n\ndef answer():\n    return torch.cuda.is_available()\n"


def make_project(tmp: Path) -> Path:
    project = tmp / "proj"
    site_dir = project / ".venv" / "lib" / "python3" / "site-packages"
    (site_dir / "sitelib").mkdir(parents=True)
    (site_dir / "sitelib" / "__init__.py").write_text(LIB)
    (tmp / "elsewhere" / "outlib").mkdir(parents=True)
    (tmp / "elsewhere" / "outlib" / "__init__.py").write_text(LIB)
    (project / "projlib.py").write_text(LIB)
    (project / "train.py").write_text(textwrap.dedent(f"""\
        import json, site, sys
        site.addsitedir({str(site_dir)!r})
        sys.path.append({str(tmp / 'elsewhere')!r})
        import torch, projlib, sitelib, outlib
        print(json.dumps({{"script": torch.cuda.is_available(), "projlib": projlib.answer(),
                          "sitelib": sitelib.answer(), "outlib": outlib.answer()}}))
        """))
    return project


def test_a_library_outside_the_project_gets_the_true_answer(tmp_path):
    import torch

    project = make_project(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "ezpz.cuda_compat", str(project / "train.py")], cwd=project,
                          env=clean_env(EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report")), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    truth = torch.cuda.is_available()
    assert not truth, "this test needs a torch without CUDA (the true answer must differ from the redirected one)"
    assert last_json(proc.stdout) == {"script": True, "projlib": True, "sitelib": truth, "outlib": truth}
    rows = json.loads((tmp_path / "report" / "rank-0.json").read_text())["sites"]
    assert sorted({Path(r["file"]).name for r in rows}) == ["projlib.py", "train.py"]


def test_what_cannot_be_redirected_raises_at_its_line_naming_the_alternative(tmp_path):
    script = tmp_path / "graphs.py"
    script.write_text(textwrap.dedent("""\
        import torch, torch.utils.cpp_extension as ext
        for attempt in (lambda: torch.cuda.CUDAGraph(),
                        lambda: ext.load(name="k", sources=["kernel.cu"])):
            try:
                attempt()
            except RuntimeError as err:
                print(type(err).__name__, err)
        """))
    proc = subprocess.run([sys.executable, "-m", "ezpz.cuda_compat", str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=clean_env(EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    graph, extension = proc.stdout.strip().splitlines()
    assert graph.startswith(f"NotRedirectable {script}:2: torch.cuda.CUDAGraph has no equivalent on cpu")
    assert "Portable alternative: run the captured code eagerly" in graph
    assert extension.startswith(f"NotRedirectable {script}:3: torch.utils.cpp_extension.load(CUDA sources)")
    data = json.loads((tmp_path / "report" / "rank-0.json").read_text())
    assert [(u["line"], u["api"]) for u in data["unsupported"]] == [
        (2, "torch.cuda.CUDAGraph"), (3, "torch.utils.cpp_extension.load(CUDA sources)")]


def test_autocast_keeps_a_dtype_the_device_can_do_and_replaces_one_it_cannot(tmp_path):
    import ezpz.hooks

    plan, _ = ezpz.hooks.plan()
    script = tmp_path / "amp.py"
    script.write_text(textwrap.dedent("""\
        import json, torch
        seen = {}
        for name in ("float16", "bfloat16", "float32"):
            with torch.autocast("cuda", dtype=getattr(torch, name)):
                seen[name] = [torch.is_autocast_enabled("cpu"), str(torch.get_autocast_dtype("cpu"))]
        print(json.dumps(seen))
        """))
    proc = subprocess.run([sys.executable, "-m", "ezpz.cuda_compat", str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=clean_env(EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = last_json(proc.stdout)
    assert seen["float32"][0] is False  # fp32 stays fp32: autocast off
    for name, short in (("float16", "fp16"), ("bfloat16", "bf16")):
        if plan.amp.why_unsupported(short, "cpu") is None:
            assert seen[name] == [True, f"torch.{name}"], (name, seen)
        elif plan.amp.autocast:
            assert seen[name] == [True, str(plan.amp.torch_dtype)], (name, seen)
        else:
            assert seen[name][0] is False, (name, seen)
    rows = json.loads((tmp_path / "report" / "rank-0.json").read_text())["sites"]
    fp16 = [r for r in rows if "float16" in r["call"] and "bfloat16" not in r["call"]]
    if plan.amp.why_unsupported("fp16", "cpu") is not None:
        assert fp16 and fp16[0]["behaves"] == "different" and "fp16 replaced by the policy's" in fp16[0]["became"]
