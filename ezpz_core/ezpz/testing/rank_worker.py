"""One rank of the kit's multi-rank live mode: ``python -m ezpz.testing.rank_worker PLUGIN DEVICE RESULTS_DIR``.

Started by :mod:`ezpz.testing.live_ranks` with a launcher's variables
(``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` ...): loads the
plugin by name (an entry-point name or an import path), runs the real
``setup(device=DEVICE)`` with a plugin host of the built-ins plus that plugin,
then every check of :mod:`ezpz.testing.rank_checks`, and ``teardown()``. After
each step it rewrites ``RESULTS_DIR/rank<N>.json``: the results so far, each
``{name, passed, detail, skipped}``, and the check it is in (``running``), so
the parent knows how far a rank got even when it has to kill it. The exit
status is 0 when every check passed or was skipped.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ezpz.testing.hookimpls import one_line

__all__ = ["SETUP", "TEARDOWN", "main"]

SETUP = "live ranks setup"
TEARDOWN = "live ranks teardown"


class _Record:
    """This rank's results file, rewritten whole after every step (a reader never sees half of it)."""

    def __init__(self, directory: str, rank: int) -> None:
        self.path = Path(directory) / f"rank{rank}.json"
        self.results: list[dict[str, Any]] = []
        self.running: str | None = None

    def start(self, name: str) -> None:
        self.running = name
        self._write()

    def done(self, name: str, passed: bool, detail: str, skipped: bool = False) -> None:
        self.results.append({"name": name, "passed": passed, "detail": detail, "skipped": skipped})
        self.running = None
        self._write()

    def _write(self) -> None:
        part = self.path.with_suffix(".part")
        part.write_text(json.dumps({"results": self.results, "running": self.running}), encoding="utf-8")
        os.replace(part, self.path)


def _run(record: _Record, name: str, check: Any, *args: Any) -> bool:
    from ezpz.testing.rank_checks import NotApplicable

    record.start(name)
    try:
        detail = check(*args)
    except NotApplicable as why:
        record.done(name, True, f"skipped: {why}", skipped=True)
    except AssertionError as err:
        record.done(name, False, one_line(err))
        return False
    except Exception as err:  # noqa: BLE001  what the device or the backend raised is the finding
        record.done(name, False, f"raised {type(err).__name__}: {one_line(err)}")
        return False
    else:
        record.done(name, True, detail)
    return True


def main(argv: list[str] | None = None) -> int:
    plugin, device, results = argv if argv is not None else sys.argv[1:]
    rank = int(os.environ["RANK"])
    record = _Record(results, rank)
    record.start(SETUP)
    from ezpz import hooks
    from ezpz.testing.hookimpls import resolve
    from ezpz.testing.hosts import make_host
    from ezpz.testing.rank_checks import RANK_CHECKS

    try:
        t = resolve(plugin)
        host = make_host(builtins=True)
        if not host.pm.is_registered(t.plugin):
            host.register(t.name, t.plugin, target=t.target)
            host.validate()
    except Exception as err:  # noqa: BLE001
        record.done(SETUP, False, f"rank {rank}: could not load plugin {plugin!r}: {type(err).__name__}: "
                                  f"{one_line(err)}")
        return 1
    with hooks.using_plugin_host(host):  # entered and left with no live runtime, as it asks
        try:
            rt = hooks.setup(device=device)
        except Exception as err:  # noqa: BLE001
            record.done(SETUP, False, f"rank {rank}: setup(device={device!r}) raised {type(err).__name__}: "
                                      f"{one_line(err)}")
            return 1
        ok = True
        try:
            record.done(SETUP, True, f"{rt.world_size} ranks: device {rt.device}, backend {rt.backend}")
            for name, check in RANK_CHECKS:
                ok = _run(record, name, check, rt, results) and ok
        finally:
            ok = _run(record, TEARDOWN, _teardown, hooks) and ok
    return 0 if ok else 1


def _teardown(hooks: Any) -> str:
    hooks.teardown()
    assert hooks.get_runtime() is None, "teardown() left a runtime behind"
    return "teardown() forgot the runtime"


if __name__ == "__main__":
    sys.exit(main())
