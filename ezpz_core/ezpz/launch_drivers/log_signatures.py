"""Launcher-side failure texts, matched in a job's log only for ranks killed before they could write a record.

Plugins add their vendors' texts through the ``ezpz_failure_signatures`` hook;
these are the launchers' own: most name a host on the line; a
``launcher_config`` one says the launcher itself could not start the job as
configured, so ``ezpz launch --auto-retry`` stops, naming the fix, instead of
running the same hosts again.
"""

from __future__ import annotations

from ezpz.failures.signatures import FailureSignature

__all__ = ["LAUNCHER_SIGNATURES", "OPENMPI_NO_RSH_AGENT", "PALS_RANK_EXIT", "PYTHON_CODE_ERROR"]

OPENMPI_NO_RSH_AGENT = FailureSignature(
    pattern=r'MCA parameter "plm_rsh_agent" was set to a path', kind="launcher_config",
    plugin="ezpz launch",
    reason="Open MPI found no remote-shell agent (plm_rsh_agent: ssh : rsh) and mpiexec exited 243 before starting "
           "any rank; no host is to blame and running again cannot help. Fix: install an ssh client "
           "(apt-get install openssh-client) on every node, or on a single node export OMPI_MCA_plm_rsh_agent= "
           "(empty) or OMPI_MCA_plm=isolated: Open MPI 4.1.4 then starts a one-node job without one",
    source="Open MPI 4.1 help-plm-rsh.txt [agent-not-found], orte/mca/plm/rsh/plm_rsh_component.c; seen on an "
           "NVIDIA H200 host without ssh (2026-11-27, exit 243)")

PYTHON_CODE_ERROR = FailureSignature(
    pattern=r"(?:^|[\s:>\]])(?:SyntaxError|IndentationError|TabError|ImportError|ModuleNotFoundError|NameError)"
            r"(?::\s|$)",
    kind="code_error", plugin="ezpz launch",
    reason="Python's last traceback line: the script does not compile, cannot import a module, or uses an undefined "
           "name (raised before ezpz.hooks.setup() could record it); the same code fails the same way on any host",
    source="CPython traceback format (Lib/traceback.py: the final 'ExceptionType: message' line)")

PALS_RANK_EXIT = FailureSignature(
    pattern=r"\brank \d+ exited with code [1-9]\d*\b", kind="signal", plugin="ezpz launch",
    reason="Cray PALS: a rank exited nonzero and PALS ended the others with SIGTERM, so the job's status is 143 "
           "like a walltime kill; it is a failure, not the walltime (code 0 lines are every rank's clean exit)",
    source="original ezpz v0.22.2 (commit 155814c, Sunspot job 12471663: '<host>: rank N exited with code K')")

LAUNCHER_SIGNATURES: tuple[FailureSignature, ...] = (
    FailureSignature(
        pattern=r"shepherd\s+died\s+from\s+signal\s+9\b", kind="signal", blames_host=True, plugin="ezpz launch",
        reason="Cray PALS: the node's shepherd was killed (the node went bad mid-run); the line starts with the host",
        source="original ezpz failover/patterns/aurora.py (Aurora jobs 8459818, 8460301, 8463659)"),
    FailureSignature(
        pattern=r"Connection closed by peer\s+\[[^\]]+\]:\d+", kind="lost_peer", blames_host=True,
        plugin="ezpz launch",
        reason="gloo: the peer at the address in brackets closed its connection (its process or host went away)",
        source="gloo/transport/tcp/pair.cc; original ezpz failover/patterns/aurora.py (jobs 8470102, 8479581)"),
    FailureSignature(
        pattern=r"mpiexec noticed that process rank \d+ with PID \d+ on node \S+ exited on signal 9\b",
        kind="signal", blames_host=True, plugin="ezpz launch",
        reason="Open MPI: the first rank to end was SIGKILLed from outside (node failure, OOM killer, operator); "
               "the line names its node",
        source="Open MPI 4.1 orte/mca/errmgr (the 'mpiexec noticed that process rank' help text)"),
    FailureSignature(
        pattern=r"Remote daemon:\s+\[\[[\d,]+\],\d+\] on node \S+", kind="lost_peer", blames_host=True,
        plugin="ezpz launch",
        reason="Open MPI: mpiexec lost contact with the daemon on the named node (its network or the node went away)",
        source="Open MPI 4.1 orte/mca/errmgr help-errmgr-base.txt (lost-connection: 'ORTE has lost communication')"),
    FailureSignature(
        pattern=r"srun: error: \S+: tasks? [\d,-]+: Killed\b", kind="signal", blames_host=True, plugin="ezpz launch",
        reason="Slurm: tasks on the named node were SIGKILLed (node failure, OOM killer)",
        source="Slurm srun (step task exit reporting)"),
    PALS_RANK_EXIT,
    OPENMPI_NO_RSH_AGENT,
    PYTHON_CODE_ERROR,
)
