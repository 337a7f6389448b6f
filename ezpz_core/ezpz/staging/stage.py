"""The whole staging step: pack (or reuse) the tarball, start one agent per node through the job's launcher,
fan the tarball out (:mod:`ezpz.staging.coordinator`), decide (:mod:`ezpz.staging.verdict`), say how to run there."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from attrs import field

from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen
from ezpz.staging import node_agent
from ezpz.staging.coordinator import Coordinator, Delivery
from ezpz.staging.pack import Packed, ensure_tarball, what_to_stage
from ezpz.staging.verdict import StagingVerdict, decide

__all__ = ["StageOptions", "StageReport", "cache_env", "default_stage_dir", "stage", "staged_argv", "stage_hosts"]

CACHE_VARS = {"TORCHINDUCTOR_CACHE_DIR": "torchinductor", "TRITON_CACHE_DIR": "triton"}
"""Torch's compile caches, pointed at node-local storage during the job (name -> subdirectory of the stage dir)."""


def default_stage_dir(environ: Mapping[str, str]) -> str:
    """``/tmp/ezpz-stage-<user>``: node-local on every HPC system ezpz knows (``/tmp`` is a local disk or RAM)."""
    user = environ.get("USER") or environ.get("LOGNAME") or str(os.getuid())
    return f"/tmp/ezpz-stage-{user}"


@frozen(kw_only=True)
class StageOptions:
    """The flags of ``ezpz stage`` / ``ezpz launch --stage-env``."""

    src: str | None = None
    stage_dir: str
    pack_to: str | None = None
    cap: int = 8
    retries: int = 2
    copy_timeout_s: float = 600.0
    register_timeout_s: float = 120.0
    min_nodes: int | None = None
    launcher: str | None = None
    work_dir: Path


@frozen(kw_only=True)
class StageReport:
    """What staging did: the tarball, the delivery on every node, the verdict, and where the environment now is."""

    packed: Packed
    delivery: Delivery
    verdict: StagingVerdict
    staged_env: str
    hosts: tuple[str, ...] = field(converter=as_tuple)
    host_source: str


def stage_hosts(launcher: str | None, hostfile: str | None, environ: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    """The allocation's hosts and where they came from (the launcher's own view, as ``ezpz launch`` has it)."""
    from ezpz.launch_drivers import load, select
    from ezpz.launch_drivers.layout import hostfile_allocation

    if hostfile:
        alloc = hostfile_allocation(hostfile)
    else:
        driver = load(launcher) if launcher else select(environ)[1]
        alloc = driver.allocation(environ)
    return tuple(alloc.hosts), alloc.source


def _advertised_address(first_host: str, environ: Mapping[str, str]) -> str:
    """The address agents reach the coordinator at: ``EZPZ_STAGE_ADDR``, else this machine's address on the route
    to the first host (no packet is sent: a UDP socket's connect only picks the route)."""
    if environ.get("EZPZ_STAGE_ADDR"):
        return environ["EZPZ_STAGE_ADDR"]
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((first_host, 9))
            return str(s.getsockname()[0])
    except OSError:
        return socket.gethostname()


def _agents(opts: StageOptions, hosts: Sequence[str], plan_path: Path, environ: Mapping[str, str],
            log: Path) -> subprocess.Popen[bytes]:
    """One agent per node through the job's launcher (``-n NODES --ppn 1``), or here alone with no allocation."""
    agent = [sys.executable, "-I", "-S", node_agent.__file__, "--plan", str(plan_path)]
    out = log.open("ab")
    if hosts == ("127.0.0.1",):
        return subprocess.Popen([*agent, "--index", "0"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    from ezpz.launch_drivers import prepare

    hostfile = opts.work_dir / "hostfile"
    hostfile.write_text("".join(h + "\n" for h in hosts))
    plan = prepare(agent, launcher=opts.launcher, n=len(hosts), ppn=1, hostfile=str(hostfile), environ=environ)
    return subprocess.Popen(list(plan.command.argv), stdout=out, stderr=subprocess.STDOUT, env=dict(environ),
                            start_new_session=True)


def stage(opts: StageOptions, hosts: Sequence[str], host_source: str, environ: Mapping[str, str],
          say: Callable[[str], None]) -> StageReport:
    """Stage the environment on ``hosts`` (none known: this node alone). Never raises for a node's failure: the
    verdict says whether to go on."""
    src, why_src = what_to_stage(opts.src, environ, sys.prefix, sys.base_prefix)
    say(f"staging {src}: {why_src}")
    packed = ensure_tarball(src, Path(opts.pack_to) if opts.pack_to else None, opts.copy_timeout_s)
    say(f"tarball: {packed.reason} ({packed.size / 1e6:.1f} MB, sha256 {packed.sha256[:12]}"
        + (f", packed in {packed.pack_s:.1f} s)" if not packed.reused else ")"))
    hosts = tuple(hosts) or ("127.0.0.1",)
    if host_source == "" or hosts == ("127.0.0.1",):
        host_source = "no allocation: this node alone"
    opts.work_dir.mkdir(parents=True, exist_ok=True)
    coordinator = Coordinator(hosts, cap=opts.cap, retries=opts.retries, copy_timeout_s=opts.copy_timeout_s,
                              register_timeout_s=opts.register_timeout_s, say=say)
    name = packed.top
    plan = {"hosts": list(hosts), "coordinator": [_advertised_address(hosts[0], environ), coordinator.port],
            "data_port": random.Random().randrange(20000, 61000), "tarball": str(packed.tarball),
            "sha256": packed.sha256, "size": packed.size, "name": name, "top": packed.top, "prefix": packed.prefix,
            "stage_dir": opts.stage_dir, "cap": opts.cap, "copy_timeout": opts.copy_timeout_s,
            "deadline_s": opts.register_timeout_s + opts.copy_timeout_s * (opts.retries + 2) * 8}
    plan_path = opts.work_dir / "stage-plan.json"
    plan_path.write_text(json.dumps(plan, indent=1))
    log = opts.work_dir / "agents.log"
    say(f"staging on {len(hosts)} node(s) ({host_source}) into {opts.stage_dir}: fan-out of at most {opts.cap} copies "
        f"per source, {opts.retries} retr{'y' if opts.retries == 1 else 'ies'} per node; agents' log {log}")
    proc = _agents(opts, hosts, plan_path, environ, log)
    try:
        delivery = coordinator.run(proc.poll)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            say("the staging agents did not exit within 30 s of being told to: killing them")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    verdict = decide(hosts, dict(delivery.failed), opts.min_nodes)
    say(f"staged in {delivery.seconds:.1f} s: {len(delivery.copies)} cop{'y' if len(delivery.copies) == 1 else 'ies'} "
        f"in {delivery.rounds} round(s), {len(delivery.held)} node(s) held it already (no copy), "
        f"{len(delivery.failed)} failed")
    return StageReport(packed=packed, delivery=delivery, verdict=verdict, staged_env=str(Path(opts.stage_dir) / name),
                       hosts=hosts, host_source=host_source)


def cache_env(stage_dir: str, environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The compile-cache variables to set (node-local under ``stage_dir``) and why each is or is not (pure)."""
    out, why = {}, []
    for var, sub in CACHE_VARS.items():
        if environ.get(var):
            why.append(f"{var} kept as set ({environ[var]})")
        else:
            out[var] = f"{stage_dir}/{sub}"
            why.append(f"{var}={out[var]} (node-local)")
    return out, why


def staged_argv(command: Sequence[str], prefix: str | None, staged: str, environ: Mapping[str, str],
                extra: Mapping[str, str] | None = None,
                which: Callable[[str], str | None] = shutil.which) -> tuple[list[str], str]:
    """The command to launch so the ranks run the staged environment, and why (pure but for ``which``).

    The program is replaced when it lies in the original environment (``.../bin/python``, ``.../bin/torchrun``);
    ``env`` puts the staged ``bin`` first on PATH, sets ``VIRTUAL_ENV`` (or ``CONDA_PREFIX``) and ``extra``.
    """
    if not command:
        return [], "no command"
    exe = command[0] if "/" in command[0] else (which(command[0]) or command[0])
    path = [p for p in environ.get("PATH", "").split(os.pathsep) if p and (prefix is None or p != f"{prefix}/bin")]
    env = [f"PATH={os.pathsep.join([f'{staged}/bin', *path])}"]
    env.append(f"CONDA_PREFIX={staged}" if Path(staged, "conda-meta").exists() or environ.get("CONDA_PREFIX") == prefix
               else f"VIRTUAL_ENV={staged}")
    if prefix and (exe == prefix or exe.startswith(prefix + "/")):
        new = staged + exe[len(prefix):]
        why = f"{command[0]} is in {prefix}: the ranks run {new}"
    else:
        new, why = command[0], (f"{command[0]} is not in the staged environment ({prefix}): it runs as given, "
                                f"with {staged}/bin first on PATH")
    env += [f"{k}={v}" for k, v in (extra or {}).items()]
    return ["env", *env, new, *command[1:]], why
