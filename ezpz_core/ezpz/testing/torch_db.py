"""The kit measures a device against torch's own test databases (``check_plugin(..., ops=True)``).

:func:`run_torch_db` runs the float32 samples of ``op_db`` and ``module_db``
(the first :data:`~ezpz.testing.torch_db_samples.SAMPLES_PER_ENTRY` of each
entry) on the plugin's device against the CPU, in a pool of worker processes
(:mod:`ezpz.testing.torch_db_worker`), and records each sample as ``equal``,
``different``, ``raised``, ``crashed`` or ``skipped``
(:mod:`ezpz.testing.torch_db_samples` says when). A worker that dies, or gives
no verdict within the per-sample deadline, is the sample's result
(``crashed``, with its exit signal and the last lines it wrote); a new worker
goes on with the next sample. Past the overall deadline what is left is
``not run``. The result is a :class:`TorchDbReport`, with a summary line and a
JSON file of every verdict.

torch's databases need torch's test dependencies (``expecttest``; the
``ezpz[kit]`` extra): without them the report says what is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from attrs import field

from ezpz.primitives import bookkeeping_dir
from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen
from ezpz.testing.torch_db_samples import SAMPLES_PER_ENTRY

__all__ = ["STATUSES", "TorchDbReport", "default_json_path", "missing_test_dependencies", "run_torch_db"]

STATUSES = ("equal", "different", "raised", "crashed", "skipped", "not run")
#: Modules torch.testing._internal imports that torch itself does not install (torch 2.4 - 2.13).
TEST_DEPENDENCIES = ("expecttest",)
_READY_S = 300.0  # a worker imports torch, ezpz, the plugin and torch's databases, then sets the device up


def missing_test_dependencies() -> list[str]:
    """Which of :data:`TEST_DEPENDENCIES` cannot be imported here (the ``kit`` extra adds them:
    ``pip install -c constraints.txt --find-links dist 'ezpz[kit]'``)."""
    return [m for m in TEST_DEPENDENCIES if importlib.util.find_spec(m) is None]


def default_json_path(plugin: str) -> Path | None:
    """``./ezpz-jobs/check-plugin/<plugin>-torch-db.json`` (beside ``ezpz launch``'s job directories), or its
    per-user fallback where the current directory is not writable (:mod:`ezpz.primitives.bookkeeping_dir`);
    None where neither is."""
    folder = bookkeeping_dir.usable_dir(Path.cwd() / "ezpz-jobs" / "check-plugin", what="torch-database verdicts",
                                        fix="pass ops_json=PATH (ezpz check-plugin --json PATH)")
    return None if folder is None else folder / f"{plugin}-torch-db.json"


def _write_json(path: Path | None, payload: dict[str, Any]) -> str:
    """Where the verdicts went, or why they were not written."""
    if path is None:
        return "not written: no writable directory (pass ops_json=PATH)"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=1))
    except OSError as err:
        return f"not written to {path}: {err.strerror or err}"
    return str(path)


@frozen(kw_only=True)
class TorchDbReport:
    """Every sample's verdict on one device; :attr:`summary` is the one-line account."""

    plugin: str
    device: str
    seconds: float
    results: tuple[dict[str, Any], ...] = field(converter=as_tuple)
    json_path: str = ""
    error: str = ""

    def counts(self, kind: str) -> Counter[str]:
        return Counter(r["status"] for r in self.results if r["kind"] == kind)

    def equal_fraction(self, kind: str) -> float:
        """Equal samples over those compared (every status but ``skipped``); 1.0 where none was."""
        c = self.counts(kind)
        compared = sum(n for status, n in c.items() if status != "skipped")
        return c["equal"] / compared if compared else 1.0

    def entries_equal(self, kind: str) -> tuple[int, int]:
        """Entries (ops or modules) all of whose compared samples are equal, and entries compared."""
        by_entry: dict[str, set[str]] = {}
        for r in self.results:
            if r["kind"] == kind and r["status"] != "skipped":
                by_entry.setdefault(r["name"], set()).add(r["status"])
        return sum(1 for s in by_entry.values() if s == {"equal"}), len(by_entry)

    def not_equal(self, kind: str) -> list[str]:
        return sorted({r["name"] for r in self.results
                       if r["kind"] == kind and r["status"] not in ("equal", "skipped")})

    def part(self, kind: str) -> str:
        c = self.counts(kind)
        compared = sum(n for status, n in c.items() if status != "skipped")
        ok, entries = self.entries_equal(kind)
        rest = ", ".join(f"{c[s]} {s}" for s in STATUSES[1:])
        return (f"{kind}s: {c['equal']}/{compared} samples equal ({100 * self.equal_fraction(kind):.1f}%), {rest}; "
                f"{ok}/{entries} {kind}s equal")

    @property
    def summary(self) -> str:
        if self.error:
            return f"torch databases on {self.device or self.plugin}: not run: {self.error}"
        where = f"; JSON {self.json_path}" if self.json_path else ""
        return (f"torch databases on {self.device} (float32, CPU as reference): {self.part('op')}; "
                f"{self.part('module')}; {self.seconds:.0f} s{where}")


class _Worker:
    """One worker process and the thread that reads its events into the pool's queue."""

    def __init__(self, key: int, target: str, env: Mapping[str, str], events: queue.Queue[Any],
                 log_dir: str) -> None:
        self.key = key
        self.log_path = os.path.join(log_dir, f"worker-{key}.log")
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115  closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ezpz.testing.torch_db_worker", target], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, env=dict(env), text=True, bufsize=1)
        self.task: dict[str, Any] | None = None
        self.sample = 0
        self.answered: set[int] = set()  # the current entry's samples with a verdict
        self.since = time.monotonic()
        self.ready = False
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events: queue.Queue[Any]) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                events.put((self, json.loads(line)))
            except ValueError:
                continue
        events.put((self, None))

    def send(self, task: dict[str, Any]) -> None:
        self.task, self.sample, self.since, self.answered = task, task["start"], time.monotonic(), set()
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(task) + "\n")
        self.proc.stdin.flush()

    def death(self) -> str:
        """How the worker ended, and what it said last (faulthandler's first lines for a crash)."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exited with status {code}")
        try:
            lines = Path(self.log_path).read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        fatal = [i for i, line in enumerate(lines) if line.startswith("Fatal Python error")]
        if fatal:  # the error, and where the crashing thread was
            said = lines[fatal[-1]:fatal[-1] + 1]
            current = [i for i, line in enumerate(lines) if line.startswith("Current thread")]
            said += lines[current[-1] + 1:current[-1] + 3] if current else []
        else:
            said = lines[-3:]
        said = [line.strip() for line in said if line.strip()]
        return how + (f"; it said: {' | '.join(said)[:400]}" if said else "")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()


def run_torch_db(
    plugin: str, target: str, *, environ: Mapping[str, str] | None = None, workers: int = 2,
    sample_timeout_s: float = 60.0, deadline_s: float = 600.0, only: Sequence[str] = (),
    json_path: str | os.PathLike[str] | None = None,
) -> TorchDbReport:
    """Run the databases' float32 samples on the device the plugin (import path ``target``) offers here.

    :param only: Entry names to run (``"fft.hfft"``, ``"nn.LSTM"``); every entry when empty.
    :param workers: Worker processes (each imports torch and the databases: about 1 GB).
    :param sample_timeout_s: A sample without a verdict by then kills its worker and is ``crashed``.
    :param deadline_s: Past it, no new sample starts; what is left is ``not run``.
    :param json_path: Where the verdicts go (default :func:`default_json_path`); the report's ``json_path``
        says where they went, or why not.
    """
    start = time.monotonic()
    missing = missing_test_dependencies()
    if missing:
        return TorchDbReport(plugin=plugin, device="", seconds=0.0, results=(), error=(
            f"torch's test databases need {', '.join(missing)}, not importable here: pip install -c constraints.txt "
            "--find-links dist 'ezpz[kit]' (or pip install expecttest)"))
    env = {**os.environ, **(environ or {})}
    events: queue.Queue[Any] = queue.Queue()
    results: list[dict[str, Any]] = []
    pool: list[_Worker] = []
    with tempfile.TemporaryDirectory(prefix="ezpz-torch-db-") as logs:
        keys = iter(range(1 << 30))
        try:
            first = _Worker(next(keys), target, env, events, logs)
            pool.append(first)
            device, error = _ready(first, events)
            if error:
                return TorchDbReport(plugin=plugin, device="", seconds=time.monotonic() - start, results=(),
                                     error=error)
            assert first.proc.stdin is not None
            first.proc.stdin.write(json.dumps({"list": True}) + "\n")
            first.proc.stdin.flush()
            listing = _wait(first, events, "entries", _READY_S)
            if listing is None:
                return TorchDbReport(plugin=plugin, device=device, seconds=time.monotonic() - start, results=(),
                                     error=f"the worker listed no entries: {first.death()}")
            wanted = set(only)
            todo = [{"kind": e["kind"], "index": e["index"], "name": e["name"], "start": 0}
                    for e in listing["entries"] if not wanted or e["name"] in wanted]
            if wanted - {e["name"] for e in listing["entries"]}:
                unknown = sorted(wanted - {e["name"] for e in listing["entries"]})
                return TorchDbReport(plugin=plugin, device=device, seconds=time.monotonic() - start, results=(),
                                     error=f"no float32 entry named {', '.join(unknown)} in op_db or module_db")
            first.ready = True
            for _ in range(max(1, min(workers, len(todo))) - 1):
                pool.append(_Worker(next(keys), target, env, events, logs))
            _drive(pool, todo, results, events, target, env, logs, keys, start + deadline_s, sample_timeout_s)
        finally:
            for w in pool:
                w.stop()
    report = TorchDbReport(plugin=plugin, device=device, seconds=time.monotonic() - start, results=results)
    where = _write_json(Path(json_path) if json_path else default_json_path(plugin),
                        {"plugin": plugin, "device": device, "seconds": round(report.seconds, 1),
                         "summary": report.summary, "results": results})
    return TorchDbReport(plugin=plugin, device=device, seconds=report.seconds, results=results, json_path=where)


def _ready(w: _Worker, events: queue.Queue[Any]) -> tuple[str, str]:
    event = _wait(w, events, "ready", _READY_S)
    if event is None:
        return "", f"the worker did not start: {w.death()}"
    if event.get("event") == "error":
        return "", f"the worker could not set the device up: {event['detail']}"
    return str(event["device"]), ""


def _wait(w: _Worker, events: queue.Queue[Any], kind: str, timeout: float) -> dict[str, Any] | None:
    """The next event of the one worker there is (``error`` too); None when it died or said nothing in time."""
    try:
        _, event = events.get(timeout=timeout)
    except queue.Empty:
        w.proc.kill()
        return None
    return event if event is not None and event.get("event") in (kind, "error") else None


def _drive(pool: list[_Worker], todo: list[dict[str, Any]], results: list[dict[str, Any]],
           events: queue.Queue[Any], target: str, env: Mapping[str, str], logs: str, keys: Any,
           deadline: float, sample_timeout_s: float) -> None:
    """Hand entries to idle workers until none is left or the deadline passes; a dead worker is replaced."""
    def record(task: dict[str, Any], sample: int, status: str, detail: str, seconds: float) -> None:
        results.append({"kind": task["kind"], "name": task["name"], "sample": sample, "status": status,
                        "detail": detail, "seconds": round(seconds, 3)})

    def feed(w: _Worker) -> None:
        if todo and time.monotonic() < deadline:
            task = todo.pop(0)
            try:
                w.send(task)
            except OSError:  # it died while idle: the entry waits for the next worker
                w.task = None
                todo.insert(0, task)

    for w in pool:
        if w.ready:
            feed(w)
    while any(w.task is not None or not w.ready for w in pool):
        now = time.monotonic()
        for w in list(pool):  # a stalled sample: its worker is killed; the reader then reports the death
            limit = sample_timeout_s if w.ready else _READY_S
            if w.proc.poll() is None and now - w.since > limit:
                w.proc.kill()
        try:
            w, event = events.get(timeout=1.0)
        except queue.Empty:
            continue
        if w not in pool:
            continue
        if event is None:  # the worker died: its sample crashed; a new one goes on after it
            pool.remove(w)
            died = w.death()
            w.stop()
            if w.task is not None:
                if w.sample not in w.answered:  # it died on this sample (not after its verdict)
                    timed_out = time.monotonic() - w.since > sample_timeout_s
                    record(w.task, w.sample, "crashed", (f"no verdict within {sample_timeout_s:.0f} s, killed; "
                                                         if timed_out else "") + died, time.monotonic() - w.since)
                if w.sample + 1 < SAMPLES_PER_ENTRY:
                    todo.insert(0, {**w.task, "start": w.sample + 1})
            elif not w.ready:
                continue  # a replacement that could not start: the others go on
            if todo and time.monotonic() < deadline:
                pool.append(_Worker(next(keys), target, env, events, logs))
            continue
        kind = event.get("event")
        if kind == "ready":
            w.ready, w.since = True, time.monotonic()
            feed(w)
        elif kind == "error":
            pool.remove(w)
            w.stop()
        elif kind == "begin":
            w.sample, w.since = int(event["sample"]), time.monotonic()
        elif kind == "verdict" and w.task is not None:
            w.answered.add(int(event["sample"]))
            record(w.task, int(event["sample"]), event["status"], event.get("detail", ""), time.monotonic() - w.since)
        elif kind == "done":
            w.task = None
            feed(w)
    for task in todo:
        results.append({"kind": task["kind"], "name": task["name"], "sample": task["start"], "status": "not run",
                        "detail": "past the overall deadline", "seconds": 0.0})

