"""``ezpz submit``: the batch script writer (pure), the scheduler choice and every refusal (exit 2, one line)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ezpz.cli import main
from ezpz.cli.submit import SubmitError, choose_scheduler
from ezpz.launch_drivers.batch_scripts import BatchJob, batch_script, walltime_seconds

RECORDED_QSUB = Path(__file__).parent / "fixtures" / "pbs_pro" / "aurora_qsub.txt"


def _job(**kw: object) -> BatchJob:
    base = dict(scheduler="slurm", nodes=2, command=["python", "train.py", "--lr", "1e-3 x"], workdir="/scratch/me",
                python="/venv/bin/python", output="/scratch/me/ezpz-jobs/submit-1.out")
    return BatchJob(**{**base, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("text, seconds", [
    ("30", 1800), ("05:30", 330), ("01:00:00", 3600), ("1-00", 86400), ("1-02:03", 93780), ("2-00:00:10", 172810),
    (" 90 ", 5400),
])
def test_slurm_time_forms(text, seconds):
    assert walltime_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "00:00:00", "1h", "1:2:3:4", "-5", "1-", "a-01:00", "1.5"])
def test_bad_times_are_none(text):
    assert walltime_seconds(text) is None


def test_slurm_script_directives_environment_and_launch_line():
    text = batch_script(_job(walltime_s=5400, account="proj", queue="debug", ntasks=4, ppn=2,
                             activate="/venv/bin/activate", launch_args=("-n", "4", "--ppn", "2")))
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    directives = [ln for ln in lines if ln.startswith("#SBATCH")]
    assert directives == ["#SBATCH --job-name=ezpz", "#SBATCH --nodes=2", "#SBATCH --output=/scratch/me/ezpz-jobs/submit-1.out",
                          "#SBATCH --ntasks=4", "#SBATCH --ntasks-per-node=2", "#SBATCH --time=01:30:00",
                          "#SBATCH --account=proj", "#SBATCH --partition=debug"]
    assert "cd /scratch/me || exit 1" in lines and "source /venv/bin/activate || exit 1" in lines
    launch = shlex.split(lines[-1])
    assert launch == ["exec", "/venv/bin/python", "-m", "ezpz", "launch", "-n", "4", "--ppn", "2", "--",
                      "python", "train.py", "--lr", "1e-3 x"]
    assert lines.index("cd /scratch/me || exit 1") < lines.index("source /venv/bin/activate || exit 1") < len(lines) - 1


def _qsub_flags(argv: list[str]) -> dict[str, list[str]]:
    """``-l``/``-A``/``-q`` values of a qsub command line (``-l`` keyed by resource name)."""
    flags: dict[str, list[str]] = {}
    for flag, value in zip(argv, argv[1:]):
        if flag == "-l":
            key, _, val = value.partition("=")
            flags.setdefault(key, []).append(val)
        elif flag in ("-A", "-q"):
            flags.setdefault(flag, []).append(value)
    return flags


def test_pbs_directives_match_recorded_pbs_pro_usage():
    recorded_line = next(ln for ln in RECORDED_QSUB.read_text().splitlines() if ln.startswith("/opt/pbs/bin/qsub"))
    recorded = _qsub_flags(shlex.split(recorded_line.split(" -- ")[0]))
    text = batch_script(_job(scheduler="pbs", nodes=2, walltime_s=3600, account="datascience", queue="workq",
                             filesystems="flare:home"))
    ours = _qsub_flags([w for ln in text.splitlines() if ln.startswith("#PBS ") for w in shlex.split(ln[5:])])
    assert set(ours) == set(recorded) == {"select", "walltime", "filesystems", "-A", "-q"}
    for key in ("select", "filesystems", "-A", "-q"):
        assert ours[key] == recorded[key], key
    assert walltime_seconds(ours["walltime"][0]) == walltime_seconds(recorded["walltime"][0]) == 3600
    assert "#PBS -o /scratch/me/ezpz-jobs/submit-1.out" in text and "#PBS -j oe" in text
    assert not re.search(r"^#SBATCH", text, re.M)


def test_pbs_leaves_site_specific_filesystems_out_unless_given():
    text = batch_script(_job(scheduler="pbs"))
    assert "filesystems" not in text and "#PBS -l select=2" in text and "walltime" not in text


def test_scheduler_choice():
    assert choose_scheduler(None, {"sbatch": "/usr/bin/sbatch"}.get) == ("slurm", "sbatch is on PATH")
    assert choose_scheduler(None, {"qsub": "/opt/pbs/bin/qsub"}.get)[0] == "pbs"
    assert choose_scheduler("pbs", lambda name: None) == ("pbs", "--scheduler")
    with pytest.raises(SubmitError, match="neither sbatch nor qsub"):
        choose_scheduler(None, lambda name: None)
    with pytest.raises(SubmitError, match="both sbatch and qsub.*--scheduler"):
        choose_scheduler(None, lambda name: "/bin/" + name)


@pytest.mark.parametrize("argv, value, fix", [
    (["-t", "1:99x"], "'1:99x'", "-t 01:00:00"),
    (["-t", "0"], "'0'", "-t 01:00:00"),
    (["-N", "0"], "'0'", "-N/--nodes 2"),
    (["-N", "-3"], "'-3'", "-N/--nodes 2"),
    (["-n", "two"], "'two'", "-n/--np 2"),
    (["--scheduler", "lsf"], "'lsf'", "--scheduler slurm"),
])
def test_refusals_name_the_value_and_the_fix(capsys, argv, value, fix):
    sched = [] if "--scheduler" in argv else ["--scheduler", "slurm"]
    assert main(["submit", *sched, "--dry-run", *argv, "--", "python", "x.py"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and value in lines[0] and "Fix: pass" in lines[0] and fix in lines[0], lines


def test_a_missing_command_is_refused(capsys):
    assert main(["submit", "--scheduler", "slurm", "--dry-run", "--"]) == 2
    assert "no command given" in capsys.readouterr().err


def test_no_scheduler_on_the_machine_is_refused(capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["submit", "--", "python", "x.py"]) == 2
    assert "neither sbatch nor qsub is on PATH" in capsys.readouterr().err
    assert main(["submit", "--scheduler", "pbs", "--", "python", "x.py"]) == 2
    assert "qsub is not on PATH" in capsys.readouterr().err


def test_dry_run_prints_the_script_and_writes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["submit", "--scheduler", "pbs", "-N", "3", "-t", "10", "--dry-run", "--", "python", "x.py"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#!/bin/bash\n") and "#PBS -l select=3" in out and "#PBS -l walltime=00:10:00" in out
    assert f"cd {tmp_path} || exit 1" in out and out.rstrip().endswith("-m ezpz launch -- python x.py")
    assert not (tmp_path / "ezpz-jobs").exists()
