"""A worker process of the torch-database check: ``python -m ezpz.testing.torch_db_worker TARGET``.

It sets the plugin's device up with a real :func:`ezpz.hooks.setup` (a plugin
host of the built-ins plus the plugin at import path ``TARGET``), then reads
one JSON task a line from stdin (``{"kind": "op", "index": 12, "start": 0}``,
or ``{"list": true}``) and answers on its original stdout, one JSON event a
line: ``ready``, ``begin`` before each sample, ``verdict`` after it, ``done``
after the entry. Anything the samples print goes to stderr. The parent
(:mod:`ezpz.testing.torch_db`) notices a worker that dies or stalls and
records the sample it was on.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
from typing import IO, Any

__all__ = ["main"]


def _send(out: IO[str], **event: Any) -> None:
    out.write(json.dumps(event) + "\n")
    out.flush()


def _device(target: str) -> str:
    """Set the plugin's device up; its ``torch.device`` string."""
    from ezpz import hooks
    from ezpz.probes.torch_build import probe_torch_build
    from ezpz.testing.hookimpls import resolve
    from ezpz.testing.hosts import make_host
    from ezpz.testing.live import offered_device

    t = resolve(target)
    device = offered_device(t, probe_torch_build(), dict(os.environ))
    if isinstance(device, str):
        raise RuntimeError(device)
    host = make_host(builtins=True)
    if not host.pm.is_registered(t.plugin):
        host.register(t.name, t.plugin, target=t.target)
        host.validate()
    with hooks.using_plugin_host(host):
        rt = hooks.setup(device=device.device_type)
    return str(rt.device)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what samples print must not reach the protocol
    faulthandler.enable(sys.stderr)
    try:
        import torch

        torch.set_num_threads(1)  # a few workers share the host's cores
        device = torch.device(_device(args[0]))
        from ezpz.testing import torch_db_samples as samples
    except Exception as err:  # noqa: BLE001  reported to the parent, which says why nothing ran
        _send(out, event="error", detail=f"{type(err).__name__}: {' '.join(str(err).split())[:500]}")
        return 1
    _send(out, event="ready", device=str(device))
    for line in sys.stdin:
        task = json.loads(line)
        if task.get("list"):
            _send(out, event="entries", entries=samples.entries())
            continue
        for i, verdict in samples.run_entry(task["kind"], task["index"], device, task["start"],
                                            lambda i: _send(out, event="begin", sample=i)):
            _send(out, event="verdict", sample=i, **verdict)
        _send(out, event="done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
