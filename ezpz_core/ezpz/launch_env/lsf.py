"""Detector for IBM LSF with the Job Step Manager's ``jsrun`` (OLCF Summit-class machines).

Sources:

* IBM Spectrum LSF ``jsrun`` (ibm.com/support/knowledgecenter/SSWRJV_10.1.0/jsm/jsrun.html):
  tasks start as PMIx clients of jsrun's PMIx server, so each also gets ``PMIX_RANK``
  and ``PMIX_NAMESPACE`` (new for every jsrun: the launch's identity).
* Lightning's ``LSFEnvironment`` (lightning/fabric/plugins/environments/lsf.py):
  ``JSM_NAMESPACE_RANK`` (global rank), ``JSM_NAMESPACE_SIZE`` (world size),
  ``JSM_NAMESPACE_LOCAL_RANK`` (rank on the node), ``LSB_JOBID``, and
  ``LSB_DJOB_RANKFILE``, one host per slot whose first line is the job's launch
  node (not a compute node): the compute hosts are the rest, in order.
* ``JSM_NAMESPACE_LOCAL_SIZE`` (ranks on this node), read alongside the others by
  codes run under jsrun; when absent, ranks per node are derived from the
  rank file's compute hosts, or a LaunchEnvError asks for it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.errors import LaunchEnvError
from ezpz.facts import LaunchEnv
from ezpz.launch_env._parse import build, get, need_int, place, read_int

__all__ = ["detect_jsrun"]


def _hosts(environ: Mapping[str, str]) -> list[str] | None:
    path = get(environ, "LSB_DJOB_RANKFILE")
    if path is None:
        return None
    from ezpz.inputs.hostlist import rankfile_hosts  # only under LSF with a rank file

    try:
        return rankfile_hosts(path)
    except (OSError, ValueError) as err:
        raise LaunchEnvError(name="LSB_DJOB_RANKFILE", value=path, expected=f"LSF's readable rank file ({err})",
                             fix="LSF sets it for the job; unset it if you exported it by hand") from err


def detect_jsrun(environ: Mapping[str, str]) -> LaunchEnv | str:
    """A task started by ``jsrun`` inside an LSF job."""
    marker = "JSM_NAMESPACE_RANK"
    if get(environ, marker) is None:
        return f"{marker} not set"
    for name in ("JSM_NAMESPACE_SIZE", "JSM_NAMESPACE_LOCAL_RANK"):
        if get(environ, name) is None:
            return f"{marker} is set but {name} not"
    lay: dict[str, int] = {}
    src: dict[str, str] = {"launcher": marker}
    lay["rank"], src["rank"] = need_int(environ, marker)
    lay["world_size"], src["world_size"] = need_int(environ, "JSM_NAMESPACE_SIZE", minimum=1)
    lay["local_rank"], src["local_rank"] = need_int(environ, "JSM_NAMESPACE_LOCAL_RANK")
    local = read_int(environ, "JSM_NAMESPACE_LOCAL_SIZE", minimum=1)
    hosts = _hosts(environ)
    nodes = (len(hosts), "derived: compute hosts in LSB_DJOB_RANKFILE (its first line, the launch node, "
             "dropped)") if hosts else None
    if local is not None:
        lay["local_world_size"], src["local_world_size"] = local
    elif nodes is not None and lay["world_size"] % nodes[0] == 0:
        lay["local_world_size"] = lay["world_size"] // nodes[0]
        src["local_world_size"] = "derived: JSM_NAMESPACE_SIZE // compute hosts in LSB_DJOB_RANKFILE"
    else:
        raise LaunchEnvError(
            name="JSM_NAMESPACE_LOCAL_SIZE", value=None,
            expected="set (ranks on this node), or LSB_DJOB_RANKFILE naming hosts that divide JSM_NAMESPACE_SIZE",
            fix="export JSM_NAMESPACE_LOCAL_SIZE=<ranks per node> (or LOCAL_WORLD_SIZE) for every rank",
        )
    place(lay, src, None, None)  # jsrun may use fewer hosts than the job has: count from the sizes
    return build("jsrun", lay, src, "LSF jsrun task (JSM_NAMESPACE_RANK, JSM_NAMESPACE_SIZE)")
