"""The mode's report: every redirected call site, per rank, as JSON under the job directory, and one line.

Where: ``EZPZ_CUDA_COMPAT_DIR`` if set; else next to the attempt's failure records when ``ezpz launch`` runs
the job (``EZPZ_FAILURE_DIR``'s parent); else ``./ezpz-jobs/cuda-compat/<run id>`` (the launcher's run or job
id, else this host and the launching process). One file per rank: ``rank-<N>.json``. Where that directory cannot
be written (a read-only working directory), the report goes to its per-user fallback and one warning says where
(:mod:`ezpz.primitives.bookkeeping_dir`); where nothing can be written, the warning says so and the run's exit
status is the script's all the same.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ezpz.cuda_compat.scope import Site

__all__ = ["BEHAVES", "child_reports", "report_dir", "site_rows", "summary_line", "write_report"]

#: What a redirected call does compared with CUDA: ``same`` job, ``different`` (answered or emulated
#: otherwise: the row says how), ``none`` (nothing to do on this device: a no-op).
BEHAVES = ("same", "different", "none")

_RUN_IDS = ("EZPZ_LAUNCH_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")


def report_dir(environ: Mapping[str, str], world_size: int) -> Path:
    """Where every rank of this run writes its report (the same directory on every rank)."""
    if environ.get("EZPZ_CUDA_COMPAT_DIR"):
        return Path(environ["EZPZ_CUDA_COMPAT_DIR"])
    if environ.get("EZPZ_FAILURE_DIR"):
        return Path(environ["EZPZ_FAILURE_DIR"]).parent / "cuda-compat"
    run = next((environ[k] for k in _RUN_IDS if environ.get(k)), None)
    if run is None:
        launcher = os.getppid() if world_size > 1 else os.getpid()
        run = f"{socket.gethostname().split('.')[0]}-{launcher}"
    return Path.cwd() / "ezpz-jobs" / "cuda-compat" / run


def site_rows(sites: list[Site]) -> list[dict[str, Any]]:
    """One row per (call site, call, what it became), in first-call order."""
    import linecache

    rows: dict[tuple[str, int, str, str], dict[str, Any]] = {}
    for site in sites:
        source = linecache.getline(site.file, site.line).strip()
        for (call, became), (behaves, count) in site.entries.items():
            row = rows.get((site.file, site.line, call, became))
            if row is None:  # two calls on one line (x.to('cuda'), y.to('cuda')): one row, counts added
                rows[(site.file, site.line, call, became)] = row = {
                    "file": site.file, "line": site.line, "function": site.function, "source": source,
                    "call": call, "became": became, "behaves": behaves, "count": 0}
            row["count"] += count
    return list(rows.values())


_FIX = "set EZPZ_CUDA_COMPAT_DIR to a directory every rank can write"


def write_report(path: Path, header: Mapping[str, Any], sites: list[Site]) -> tuple[dict[str, Any], Path | None]:
    """Write ``header`` plus the site rows to ``path`` (atomically, secrets scrubbed), or to its directory's
    fallback; return what was written and where (None: nowhere, said in a warning). Never raises OSError."""
    from ezpz.primitives import bookkeeping_dir
    from ezpz.primitives.atomic_file import write_text_atomically
    from ezpz.primitives.redact import scrub_data

    data = scrub_data({**header, "sites": site_rows(sites)})
    folder = bookkeeping_dir.usable_dir(path.parent, what="CUDA-compat report", fix=_FIX)
    if folder is None:
        return data, None
    written = folder / path.name
    try:
        write_text_atomically(written, json.dumps(data, indent=1, default=str))
    except OSError as error:  # a full disk after the directory was found writable
        bookkeeping_dir.write_failed(written, what="CUDA-compat report", error=error)
        return data, None
    return data, written


def child_reports(directory: Path) -> list[dict[str, Any]]:
    """The reports the run's child processes wrote beside the ranks' (``rank-<N>-pid-<pid>.json``)."""
    found = []
    for path in sorted(directory.glob("rank-*-pid-*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return found


def summary_line(data: Mapping[str, Any], path: Path | None, children: list[dict[str, Any]] | None = None) -> str:
    """The one line rank 0 prints at exit (``path`` None: the report could not be written, a warning says why;
    ``children``: the child processes' reports, counted at the end)."""
    rows = data.get("sites", [])
    where = path if path is not None else "not written (see the warning above)"
    if not data.get("redirecting"):
        return f"ezpz.cuda_compat: nothing redirected ({data.get('reason')}); report {where}"
    count = {b: sum(1 for r in rows if r["behaves"] == b) for b in BEHAVES}
    places = len({(r["file"], r["line"]) for r in rows})
    tail = ""
    if children:
        calls = sum(len(child.get("sites", [])) for child in children)
        tail = f"; {len(children)} child process(es) reported {calls} more"  # rows, as above
    return (f"ezpz.cuda_compat: {len(rows)} CUDA calls at {places} call sites redirected to {data.get('device')} "
            f"({count['same']} same, {count['different']} different, {count['none']} not at all){tail}; "
            f"report {where}")
