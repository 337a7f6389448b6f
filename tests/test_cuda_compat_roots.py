"""The user's project wherever it lives: a package beside the script, found through PYTHONPATH or an editable install.

The project made here is ``repo/projects/x/run.py`` plus ``repo/mylib/trainer.py``; the trainer picks its device
with ``'cuda' if torch.cuda.is_available() else 'cpu'``. Without ``--project-root`` the mode must count the package
as the user's code: on ``emu`` its parameters live on ``emu`` and its losses equal the plain CPU run's. The
editable install is simulated as pip writes one: a ``.pth`` in a site directory plus ``direct_url.json`` with
``dir_info.editable``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import clean_env, last_json

TRAINER = textwrap.dedent("""\
    import torch

    def train(steps=4):
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(32, 8), torch.randn(32, 1)
        losses = []
        for _ in range(steps):
            loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
            opt.zero_grad(); loss.backward(); opt.step()
            losses.append(round(loss.item(), 6))
        return {"losses": losses, "params_on": next(model.parameters()).device.type}
    """)


def make_repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "mylib").mkdir()
    (repo / "mylib" / "__init__.py").write_text("")
    (repo / "mylib" / "trainer.py").write_text(TRAINER)
    (repo / "projects" / "x").mkdir(parents=True)
    (repo / "projects" / "x" / "run.py").write_text(
        "import json\nfrom mylib.trainer import train\nprint(json.dumps(train()))\n")
    return repo


def editable_site(tmp: Path, repo: Path) -> Path:
    """A site directory holding what ``pip install -e repo`` leaves: a ``.pth`` and the dist-info's direct_url."""
    site = tmp / "venv" / "lib" / "python3" / "site-packages"
    info = site / "mylib-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mylib\nVersion: 0.1\n")
    (info / "direct_url.json").write_text(json.dumps({"url": repo.as_uri(), "dir_info": {"editable": True}}))
    (site / "__editable__.mylib-0.1.pth").write_text(f"{repo}\n")
    return site


def run(cmd: list[str], cwd: Path, **env: str) -> dict:
    proc = subprocess.run(cmd, cwd=cwd, env=clean_env(**env), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return last_json(proc.stdout)


def test_the_package_beside_the_script_is_the_users_code_without_project_root(tmp_path):
    repo = make_repo(tmp_path)
    script, cwd = repo / "projects" / "x" / "run.py", repo / "projects" / "x"
    report = tmp_path / "report"
    cpu = run([sys.executable, str(script)], cwd, PYTHONPATH=str(repo))
    assert cpu["params_on"] == "cpu"
    through_path = run([sys.executable, "-m", "ezpz.cuda_compat", str(script)], cwd, PYTHONPATH=str(repo),
                       EZPZ_DEVICE="emu", EZPZ_PRECISION="fp32", EZPZ_CUDA_COMPAT_DIR=str(report / "path"))
    assert through_path == {**cpu, "params_on": "emu"}
    roots = json.loads((report / "path" / "rank-0.json").read_text())["project_roots"]
    assert {"path": str(repo.resolve()) + "/", "included": True, "why": "on PYTHONPATH"} in roots

    site = editable_site(tmp_path, repo)
    boot = ("import site, sys; site.addsitedir(sys.argv.pop(1)); from ezpz.cuda_compat.__main__ import main; "
            "sys.exit(main(sys.argv[1:]))")
    editable = run([sys.executable, "-c", boot, str(site), str(script)], cwd, EZPZ_DEVICE="emu",
                   EZPZ_PRECISION="fp32", EZPZ_CUDA_COMPAT_DIR=str(report / "editable"))
    assert editable == {**cpu, "params_on": "emu"}
    roots = json.loads((report / "editable" / "rank-0.json").read_text())["project_roots"]
    mine = [r for r in roots if r["path"] == str(repo.resolve()) + "/"]
    assert mine and mine[0]["included"] and mine[0]["why"].startswith("editable install of mylib"), roots


def test_each_candidate_root_says_why_it_is_in_or_out(tmp_path, monkeypatch):
    import ezpz.cuda_compat.roots as roots

    repo = make_repo(tmp_path)
    installed = tmp_path / "venv" / "lib" / "site-packages"
    installed.mkdir(parents=True)
    elsewhere = tmp_path / "src" / "otherlib"
    elsewhere.mkdir(parents=True)
    monkeypatch.setattr(roots, "_editable_installs", lambda: [
        ("mylib", str(repo), False), ("otherlib", str(elsewhere), False), ("ezpz-example-emu", str(installed), True)])
    script = repo / "projects" / "x" / "run.py"
    env = {"PYTHONPATH": os.pathsep.join([str(installed), str(tmp_path / "missing"), str(repo / "mylib")])}
    found = {Path(r.path).name: (r.included, r.why) for r in
             roots.project_roots(script, None, env, str(Path.home()), outside=[str(installed) + os.sep])}
    assert found["x"] == (True, "the script's directory")
    assert found["site-packages"][0] is False and "an installed location" in found["site-packages"][1]
    assert found["missing"] == (False, "on PYTHONPATH: not a directory")
    assert found["mylib"] == (True, "on PYTHONPATH")
    assert found[Path.home().name] == (False, "the current directory: the home directory is too broad to be one "
                                              "project (pass --project-root)")
    assert found["repo"][0] is True and found["repo"][1].startswith("editable install of mylib")
    assert found["otherlib"][0] is False and "an installed library" in found["otherlib"][1]
    assert [(r.included, r.why) for r in roots.project_roots(script, str(tmp_path), env, "/")] == [
        (True, "--project-root (replaces the search)")]
