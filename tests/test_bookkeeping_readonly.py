"""ezpz's own files on a read-only node never fail the user's run (issue 53).

Each run below happens inside a private mount namespace (``unshare -m``) where the working directory and
``HOME`` (and, for the "nothing writable" case, every temporary directory too) are read-only bind mounts, as on
a compute node whose home and project directories are mounted read-only. Asserted each time: the exit status
and output are the script's own, and exactly one warning names the directory ezpz could not write, saying
where its files went instead (the per-user fallback, :mod:`ezpz.primitives.bookkeeping_dir`) or that they were
dropped. Needs root for the mounts (CI runs as root); elsewhere skipped with the probe's reason.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, need_tool, skip_or_fail_in_ci

PY = sys.executable
WARNING = re.compile(r"\b(ezpz_files_redirected|ezpz_files_dropped|ezpz_file_not_written)\b.*?\bpath=(\S+)"
                     r"(?:.*?\binstead=('[^']*'|\"[^\"]*\"|\S+))?")
pytestmark = [pytest.mark.launcher]


@functools.cache
def _cannot_mount_read_only() -> str | None:
    """Why a read-only bind mount cannot be made here, or None (made one and saw a write to it refused)."""
    import tempfile

    if os.name != "posix" or not hasattr(os, "getuid"):
        return "not a POSIX system"
    with tempfile.TemporaryDirectory(prefix="ezpz-ro-probe-") as probe:
        try:
            proc = subprocess.run(["unshare", "-m", "sh", "-c", _mounts([Path(probe)]) + f"touch {probe}/x",
                                   ], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"cannot run unshare: {err}"
        if proc.returncode == 0:
            return "a write into the read-only bind mount succeeded"
        if "Read-only file system" not in proc.stderr:
            return f"unshare -m / mount --bind failed (uid {os.getuid()}; root needed): {proc.stderr.strip()[:300]}"
    return None


def _mounts(read_only: list[Path]) -> str:
    return "".join(f"mount --bind {shlex.quote(str(d))} {shlex.quote(str(d))} && "
                   f"mount -o remount,ro,bind {shlex.quote(str(d))} && " for d in read_only)


def _run(argv: list[str], *, cwd: Path, read_only: list[Path], timeout: float = 120,
         **env: str) -> subprocess.CompletedProcess[str]:
    """``argv`` in ``cwd`` with ``read_only`` mounted read-only, in a mount namespace of its own."""
    why = _cannot_mount_read_only()
    if why is not None:
        skip_or_fail_in_ci(f"no read-only mount here: {why}", f"CI runs as root and must run this test, but {why}")
    shell = "set -e; " + _mounts(read_only) + f'cd {shlex.quote(str(cwd))} && exec "$@"'
    full = clean_env(OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", **env)
    full.pop("XDG_CACHE_HOME", None)  # the cache goes under the read-only HOME
    if "TMPDIR" in env:  # tempfile reads TEMP and TMP too: one temporary directory, the one given
        full["TEMP"] = full["TMP"] = env["TMPDIR"]
    return subprocess.run(["unshare", "-m", "sh", "-c", shell, "sh", *argv], env=full, capture_output=True,
                          text=True, timeout=timeout)


def _warnings(stderr: str) -> list[tuple[str, str, str]]:
    """(event, path, instead) of every bookkeeping warning; no directory may be named twice."""
    found = [(m.group(1), m.group(2).strip("'"), (m.group(3) or "").strip("'\"")) for m in WARNING.finditer(stderr)]
    paths = [p for _, p, _ in found]
    assert len(paths) == len(set(paths)), f"a directory was warned about twice:\n{stderr}"
    return found


def _one_about(stderr: str, path: Path) -> tuple[str, str]:
    """The single warning naming ``path``: (event, instead)."""
    about = [(e, i) for e, p, i in _warnings(stderr) if p == str(path)]
    assert len(about) == 1, f"expected one warning naming {path}, got {about}:\n{stderr}"
    return about[0]


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    """work/ (the job's directory, with the scripts), home/, tmp/ (a writable TMPDIR) under ``tmp_path``."""
    dirs = {name: tmp_path / name for name in ("work", "home", "tmp")}
    for d in dirs.values():
        d.mkdir()
    (dirs["work"] / "train.py").write_text(
        "import sys, torch\n"
        "x = torch.ones(3, device='cuda') * 2\n"
        "print('SCRIPT OK', x.sum().item(), flush=True)\n"
        "sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)\n")
    (dirs["work"] / "fail.py").write_text(
        "import ezpz\n"
        "rt = ezpz.hooks.setup()\n"
        "print('RANK', rt.rank, 'RAN', flush=True)\n"
        "raise ValueError('bad hyperparameter')\n")
    return dirs


def _uid_root(tmp: Path) -> Path:
    return tmp / f"ezpz-{os.getuid()}"


def test_the_compat_report_moves_to_the_fallback_with_one_warning_and_exit_0(node):
    work, tmp = node["work"], node["tmp"]
    proc = _run([PY, "-m", "ezpz.cuda_compat", "train.py"], cwd=work, read_only=[work, node["home"]],
                HOME=str(node["home"]), TMPDIR=str(tmp), EZPZ_DEVICE="cpu", EZPZ_LAUNCH_ID="ro-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "SCRIPT OK 6.0\n", proc.stdout
    wanted = work / "ezpz-jobs" / "cuda-compat" / "ro-run"
    event, instead = _one_about(proc.stderr, wanted)
    assert event == "ezpz_files_redirected" and "Read-only file system" in proc.stderr
    assert Path(instead) == _uid_root(tmp) / str(wanted).lstrip("/"), instead
    report = json.loads((Path(instead) / "rank-0.json").read_text())
    assert report["script"] == str(work / "train.py") and report["sites"], report
    assert f"report {instead}/rank-0.json" in proc.stderr  # the summary line names where it went
    assert "Traceback" not in proc.stderr and not (work / "ezpz-jobs").exists()
    assert oct(_uid_root(tmp).stat().st_mode & 0o777) == "0o700"


def test_with_nothing_writable_the_report_is_dropped_with_one_warning_and_the_scripts_status_kept(node):
    work, tmp = node["work"], node["tmp"]
    temps = [Path(d) for d in ("/tmp", "/var/tmp", "/usr/tmp") if os.path.isdir(d) and not os.path.islink(d)]
    proc = _run([PY, "-m", "ezpz.cuda_compat", "train.py", "3"], cwd=work,
                read_only=[work, node["home"], tmp, *temps], HOME=str(node["home"]), TMPDIR=str(tmp),
                EZPZ_DEVICE="cpu", EZPZ_LAUNCH_ID="ro-run")
    assert proc.returncode == 3, proc.stderr[-3000:]  # the script's own sys.exit(3)
    assert proc.stdout == "SCRIPT OK 6.0\n", proc.stdout
    event, instead = _one_about(proc.stderr, work / "ezpz-jobs" / "cuda-compat" / "ro-run")
    assert event == "ezpz_files_dropped" and instead.startswith("nowhere"), proc.stderr
    assert "No usable temporary directory" in proc.stderr and "report not written" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_failing_rank_under_ezpz_launch_keeps_its_status_and_its_record_goes_to_the_fallback(node):
    need_tool("torchrun")
    work, tmp = node["work"], node["tmp"]
    proc = _run([PY, "-m", "ezpz", "launch", "-n", "1", "--timeout", "60", "--", PY, "fail.py"], cwd=work,
                read_only=[work, node["home"]], HOME=str(node["home"]), TMPDIR=str(tmp))
    assert proc.returncode == 1, proc.stderr[-3000:]  # torchrun's status for a rank that raised
    assert "RANK 0 RAN" in proc.stdout and "ValueError: bad hyperparameter" in proc.stdout + proc.stderr
    [job] = [p for e, p, _ in _warnings(proc.stderr) if "/ezpz-jobs/" in p]
    event, instead = _one_about(proc.stderr, Path(job))
    assert event == "ezpz_files_redirected" and Path(job).parent == work / "ezpz-jobs", proc.stderr
    record = json.loads((Path(instead) / "attempt-0" / "failures" / "rank-0.json").read_text())
    assert record["kind"] == "code_error" and "bad hyperparameter" in record["first_line"], record
    verdict = json.loads((Path(instead) / "attempt-0" / "verdict.json").read_text())
    assert verdict["status"] == 1, verdict
    assert "OSError" not in proc.stderr, proc.stderr[-3000:]  # ezpz raised nothing of its own


def test_the_straggler_report_moves_to_the_fallback_with_one_warning(node):
    """Rank 0's side of a 4-rank job through the real watch and writer (the other ranks simulated, as in
    tests/test_straggler_report.py): 3 reports, one warning, all in the fallback."""
    work, tmp = node["work"], node["tmp"]
    failures = work / "failures"  # EZPZ_FAILURE_DIR, where the watch writes
    code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[2]); "
            "from test_straggler_report import simulate; simulate(Path(sys.argv[1]), 4, 3, {2: 5.0}); "
            "print('WATCHED', flush=True)")
    proc = _run([PY, "-c", code, str(failures), str(Path(__file__).parent)], cwd=work,
                read_only=[work, node["home"]], HOME=str(node["home"]), TMPDIR=str(tmp))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "WATCHED\n", proc.stdout
    event, instead = _one_about(proc.stderr, failures)
    assert event == "ezpz_files_redirected", proc.stderr
    report = json.loads((Path(instead) / "stragglers.json").read_text())
    assert report["report"]["step"] == 75 and [s["rank"] for s in report["report"]["stragglers"]] == [2], report
    assert (Path(instead) / "stragglers-history.json").is_file() and not failures.exists()


def test_ezpz_launch_with_no_usable_job_directory_runs_the_job_without_one_and_keeps_its_status(tmp_path):
    """No mount needed: ``--job-dir`` under a regular file cannot be made, and the fallback root is a symlink
    (refused as hostile), so nothing is writable for ezpz; the job runs and ends as it would have."""
    need_tool("torchrun")
    blocker, tmp, elsewhere = tmp_path / "file", tmp_path / "tmp", tmp_path / "elsewhere"
    blocker.write_text("")
    tmp.mkdir()
    elsewhere.mkdir()
    (tmp / f"ezpz-{os.getuid()}").symlink_to(elsewhere)
    proc = subprocess.run([PY, "-m", "ezpz", "launch", "-n", "1", "--timeout", "60", "--job-dir", str(blocker / "job"),
                           "--", PY, "-c", "print('JOB RAN', flush=True); raise SystemExit(3)"],
                          env=clean_env(OMP_NUM_THREADS="1", TMPDIR=str(tmp), TEMP=str(tmp), TMP=str(tmp)),
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]  # torchrun's status for a rank that exited non-zero
    assert "JOB RAN" in proc.stdout, proc.stdout
    event, instead = _one_about(proc.stderr, blocker / "job")
    assert event == "ezpz_files_dropped" and "symbolic link" in instead, proc.stderr
    assert "no job directory" in proc.stderr and "OSError" not in proc.stderr
    assert list(elsewhere.iterdir()) == []
