"""Straggler detection at thousands of ranks, simulated through the code every rank runs (the exchange's seams).

For each job size (1,024, 4,096 and 16,384 ranks by default) two real
``StragglerWatch`` objects take ``REPORTS`` reports: rank 0 with a report
directory (``ezpz launch --job-dir`` gives it one) and rank 1 without. Their
``gather=`` / ``broadcast=`` seams stand in for ``torch.distributed``: rank 0's
gather returns the table of every rank's row (synthetic peers: a 52 ms step
with 2 % noise, one rank 5x slow), rank 1's returns None as on a real
non-zero rank, and rank 1's broadcast returns the verdict rank 0 sent. Making
the synthetic table is done before each report and is not timed; everything
the ranks do is. Rank 0 takes all its reports first, then rank 1 (with the
verdicts rank 0 sent): in one process rank 0's writer thread would otherwise
take the GIL from rank 1, which a real rank 1, a process of its own, never sees.

Printed per size: the per-report time on rank 0 and rank 1 (median and p99,
first and last 100 reports, and their ratio: flat means ~1), the memory held
by each watch (every object reachable from it, tensors' storage included,
counted once; and the process's RSS growth), the size of the two report files,
and the writer thread's time per written report. With ``--baseline`` (default
on), the implementation before the rewrite (``git show <rev>:...``) runs the
same 1,024-rank job for 100 reports in the same process, so the ratio is paired.

Run from the repository root:
``python benchmarks/bench_straggler_scale.py [--ranks 1024,4096,16384] [--reports 2000] [--no-baseline]``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import logging
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _util import machine  # noqa: E402

import torch  # noqa: E402

from ezpz.steps.straggler_exchange import HISTORY_NAME, REPORT_NAME, StragglerWatch  # noqa: E402
from ezpz.steps.straggler_rows import RankTimes, host_row  # noqa: E402

EVERY, SLOW, PER_HOST = 25, 1000, 8
PAIRED = 100  # the last reports, each taken by the old rank 0 and a fresh one, alternating which goes first
BASELINE_REV = "a82135d"  # the layout commit: the exchange before this rewrite


def _held_bytes(root: object) -> int:
    """Bytes of every object reachable from ``root`` (tensor storage once each), skipping code and the seams."""
    seen: set[int] = set()
    storages: set[int] = set()
    total, stack = 0, [root]
    skip = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
            types.CodeType, types.FrameType, logging.Logger)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj, 0)
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            if storage.data_ptr() not in storages:
                storages.add(storage.data_ptr())
                total += storage.nbytes()
            continue
        stack.extend(gc.get_referents(obj))
    return total


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


class Peers:
    """The synthetic job: every rank's row at a report, one rank 5x slow; made outside the timed region."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.hosts = torch.tensor([host_row(f"node{r // PER_HOST:05d}") for r in range(n)], dtype=torch.uint8)
        row = RankTimes(rank=0, host="-", step=0, step_s=0.26, steps=EVERY,
                        sections={"compute": 0.05, "data": 0.002}).row()
        self.base = torch.tensor(row, dtype=torch.float64).repeat(n, 1)
        self.gen = torch.Generator().manual_seed(0)
        self.table = self.base

    def next(self, step: int) -> None:
        t = self.base.clone()
        t[:, 0] = step
        t[:, 7] *= 1 + 0.02 * torch.rand(self.n, generator=self.gen, dtype=torch.float64)  # compute, 2 % noise
        t[SLOW % self.n, 7] *= 5
        t[:, 3] = t[:, 7] + t[:, 9]
        self.table = t

    def gather(self, mine: torch.Tensor) -> torch.Tensor:
        return self.hosts if mine.dtype == torch.uint8 else self.table


def _stats(xs: list[float]) -> str:
    s = sorted(xs)
    return f"{statistics.median(s) * 1e3:7.2f} / {s[min(len(s) - 1, int(len(s) * 0.99))] * 1e3:7.2f}"


def run(n: int, reports: int) -> dict:
    peers = Peers(n)
    folder = Path(tempfile.mkdtemp(prefix=f"ezpz-straggler-{n}-"))
    gc.collect()
    rss0 = _rss()
    verdict: list[list[float]] = []

    def broadcast0(row: torch.Tensor) -> torch.Tensor:
        verdict[:] = [row.tolist()]  # kept as numbers: 2,000 small tensors would weigh on the RSS measured
        return row

    w0 = StragglerWatch(rank=0, world_size=n, every=EVERY, factor=1.5, report_dir=str(folder), host="node00000",
                        gather=peers.gather, broadcast=broadcast0)
    w1 = StragglerWatch(rank=1, world_size=n, every=EVERY, factor=1.5, report_dir=None, host="node00000",
                        gather=lambda mine: None,
                        broadcast=lambda row: torch.tensor(verdict[0], dtype=torch.float64))  # as a receive fills it
    recent = tuple([0.26] * EVERY)
    t0s, t1s, verdicts = [], [], []
    first_report_s = 0.0
    young, pairs = None, []
    for i in range(1, reports + 1):  # rank 0 first, on its own: its writer thread shares this process's GIL
        peers.next(i * EVERY)
        if i == reports - PAIRED:  # a fresh rank 0 beside the old one for the last reports: paired flatness
            young = StragglerWatch(rank=0, world_size=n, every=EVERY, factor=1.5, host="node00000",
                                   report_dir=tempfile.mkdtemp(prefix=f"ezpz-straggler-{n}-young-"),
                                   gather=peers.gather, broadcast=lambda row: row)
        order = [w0] if young is None else ([w0, young] if i % 2 else [young, w0])
        took = {}
        for w in order:
            w.section("compute", 0.05)
            w.section("data", 0.002)
            a = time.perf_counter()
            w.report(i * EVERY, recent)
            took[id(w)] = time.perf_counter() - a
        if i == 1:
            first_report_s = took[id(w0)]  # host names travel once: reported apart
        else:
            t0s.append(took[id(w0)])
        if young is not None and i > reports - PAIRED:  # the young one's first report (host names) is not paired
            pairs.append(took[id(w0)] / took[id(young)])
        verdicts.append(verdict[0])
    if young is not None:
        young.close()
    writer = w0.writer
    flush_t = time.perf_counter()
    writer.flush()
    flush_s = time.perf_counter() - flush_t
    gc.collect()
    rss_rank0 = _rss() - rss0
    for i in range(1, reports + 1):  # then rank 1, given the verdicts rank 0 broadcast, as its own process would be
        verdict[:] = [verdicts[i - 1]]
        w1.section("compute", 0.05)
        w1.section("data", 0.002)
        a = time.perf_counter()
        v1 = w1.report(i * EVERY, recent)
        t1s.append(time.perf_counter() - a)
    del verdicts
    assert v1.ranks == (SLOW % n,) and w0.last_scored.report.stragglers[0].rank == SLOW % n
    peers.table = peers.base  # the synthetic tables are the harness's, not the watch's
    gc.collect()
    rss = _rss() - rss0
    out = {"n": n, "reports": reports, "t0": t0s, "pairs": pairs, "t1": t1s, "first_report_s": first_report_s,
           "held0": _held_bytes(w0), "held1": _held_bytes(w1), "rss": rss, "rss_rank0": rss_rank0,
           "files": {p.name: p.stat().st_size for p in (folder / REPORT_NAME, folder / HISTORY_NAME)},
           "written": writer.written, "replaced": writer.replaced, "heavy": writer.heavy_written,
           "write_s": writer.write_s / max(writer.written, 1),
           "flush_s": flush_s}
    writer.close()
    return out


def _old_watch(rev: str):
    """The StragglerWatch of revision ``rev`` (before this rewrite), loaded from git under other module names."""
    root = Path(__file__).resolve().parent.parent
    mods = {}
    for name, path in (("old_scores", "ezpz_core/ezpz/steps/straggler_scores.py"),
                       ("old_exchange", "ezpz_core/ezpz/steps/straggler_exchange.py")):
        text = subprocess.run(["git", "-C", str(root), "show", f"{rev}:{path}"], capture_output=True, text=True,
                              check=True, timeout=30).stdout
        text = text.replace("from ezpz.steps.straggler_scores import", "from old_scores import")
        spec = importlib.util.spec_from_loader(name, loader=None)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        exec(compile(text, f"{rev}:{path}", "exec"), module.__dict__)
        mods[name] = module
    return mods["old_exchange"].StragglerWatch, mods["old_scores"].RankTimes


def baseline(n: int, reports: int, rev: str) -> dict | None:
    """The same job through the old exchange (pickled dicts, whole history on every rank, JSON on the thread)."""
    try:
        old_watch, old_times = _old_watch(rev)
    except (OSError, subprocess.SubprocessError) as error:
        print(f"  baseline skipped: cannot load revision {rev} ({error})")
        return None
    folder = Path(tempfile.mkdtemp(prefix="ezpz-straggler-old-"))
    peers = [old_times(rank=r, host=f"node{r // PER_HOST:05d}", step=0, step_s=0.26, steps=EVERY,
                       sections={"compute": 0.05 * (5 if r == SLOW % n else 1), "data": 0.002}).to_dict()
             for r in range(n)]
    w0 = old_watch(rank=0, world_size=n, every=EVERY, factor=1.5, report_dir=str(folder), host="node00000",
                   gather=lambda mine: [mine, *peers[1:]])
    w1 = old_watch(rank=1, world_size=n, every=EVERY, factor=1.5, report_dir=None, host="node00000",
                   gather=lambda mine: [peers[0], mine, *peers[2:]])
    t0s, t1s = [], []
    for i in range(1, reports + 1):
        for p in peers:
            p["step"] = i * EVERY
        for w in (w0, w1):
            w.section("compute", 0.05)
        a = time.perf_counter()
        w0.report(i * EVERY, tuple([0.26] * EVERY))
        b = time.perf_counter()
        w1.report(i * EVERY, tuple([0.26] * EVERY))
        t0s.append(b - a)
        t1s.append(time.perf_counter() - b)
    return {"t0": t0s, "t1": t1s, "held0": _held_bytes(w0), "held1": _held_bytes(w1),
            "file": (folder / "stragglers.json").stat().st_size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", default="1024,4096,16384")
    parser.add_argument("--reports", type=int, default=2000)
    parser.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--baseline-reports", type=int, default=100)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the per-report log lines are not what is measured
    torch.set_num_threads(1)
    print(f"straggler detection at scale; {machine()}; torch {torch.__version__}, 1 intra-op thread")
    print(f"{args.reports} reports, one every {EVERY} steps; times in ms (median / p99); "
          "flat = median of the last 100 reports / the first 100")
    results = []
    for n in (int(x) for x in args.ranks.split(",")):
        t = time.perf_counter()
        r = run(n, args.reports)
        results.append(r)
        k = min(100, len(r["t0"]) // 2) or 1
        flat0 = statistics.median(r["t0"][-k:]) / statistics.median(r["t0"][:k])
        flat1 = statistics.median(r["t1"][-k:]) / statistics.median(r["t1"][:k])
        files = r["files"]
        print(f"\n{n} ranks ({time.perf_counter() - t:.0f} s)")
        print(f"  rank 0 (report dir), per report     {_stats(r['t0'])}   first 100 {_stats(r['t0'][:k])}   "
              f"last 100 {_stats(r['t0'][-k:])}   flat {flat0:.2f}   goal < 100 ms")
        if r["pairs"]:
            print(f"  rank 0 with {r['reports'] - PAIRED} reports behind it / a fresh rank 0, the last {len(r['pairs'])} "
                  f"reports, alternating: median paired ratio {statistics.median(r['pairs']):.3f}   flat = 1")
        print(f"  rank 1, per report                  {_stats(r['t1'])}   first 100 {_stats(r['t1'][:k])}   "
              f"last 100 {_stats(r['t1'][-k:])}   flat {flat1:.2f}   goal < 5 ms")
        print(f"  first report (host names, once)     {r['first_report_s'] * 1e3:7.1f} ms on rank 0")
        print(f"  held by the watch, rank 0 / rank 1  {r['held0'] / 2**20:7.2f} MiB / {r['held1'] / 2**10:6.1f} KiB   "
              f"goal < 64 MiB / < 1 MiB")
        print(f"  process RSS growth                  {r['rss_rank0'] / 2**20:7.1f} MiB after rank 0's reports, "
              f"{r['rss'] / 2**20:.1f} MiB after rank 1's (the synthetic job's tables included)")
        print(f"  report files                        {files[REPORT_NAME] / 2**10:7.1f} KiB {REPORT_NAME} + "
              f"{files[HISTORY_NAME] / 2**20:.2f} MiB {HISTORY_NAME}   goal < 8 MiB")
        print(f"  writer thread                       {r['write_s'] * 1e3:7.1f} ms per written report; "
              f"{r['written']} written ({r['heavy']} with the history), {r['replaced']} replaced by a newer one; "
              f"final flush {r['flush_s'] * 1e3:.0f} ms")
    if args.baseline:
        n, k = 1024, args.baseline_reports
        old = baseline(n, k, BASELINE_REV)
        if old is not None:
            new = next((r for r in results if r["n"] == n), None) or run(n, k)
            m_old0, m_old1 = statistics.median(old["t0"]), statistics.median(old["t1"])
            m_new0, m_new1 = statistics.median(new["t0"][:k]), statistics.median(new["t1"][:k])
            print(f"\nbaseline: revision {BASELINE_REV} (all_gather_object, whole history, JSON on the thread), "
                  f"{n} ranks, first {k} reports, same process")
            print(f"  rank 0 per report  before {m_old0 * 1e3:8.2f} ms   now {m_new0 * 1e3:7.2f} ms   "
                  f"ratio now/before {m_new0 / m_old0:.4f}")
            print(f"  rank 1 per report  before {m_old1 * 1e3:8.2f} ms   now {m_new1 * 1e3:7.2f} ms   "
                  f"ratio now/before {m_new1 / m_old1:.4f}")
            print(f"  held, rank 0 / 1   before {old['held0'] / 2**20:.2f} / {old['held1'] / 2**20:.2f} MiB after {k} "
                  f"reports   now {new['held0'] / 2**20:.2f} MiB / {new['held1'] / 2**10:.1f} KiB after {new['reports']}")
            print(f"  report file        before {old['file'] / 2**20:.2f} MiB after {k} reports")


if __name__ == "__main__":
    main()
