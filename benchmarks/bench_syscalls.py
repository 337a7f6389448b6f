"""File-system metadata system calls that ``import ezpz; setup()`` adds to ``import torch``, against accelerate.

On a parallel file system every path lookup goes to the metadata server,
and at thousands of ranks these calls are what start-up waits for. Counted
with ``strace -f -c`` (deterministic to a few calls), one process each, after
one untimed run so bytecode caches exist: ``import torch`` alone, then with
``import ezpz; ezpz.hooks.setup()``, then with ``from accelerate import
PartialState; PartialState()`` (accelerate 1.15.0 installed in the same environment). Target:
ezpz adds at most 5% more calls than accelerate (ratio <= 1.05, issue 44), with no import hook. ``python
benchmarks/bench_syscalls.py`` counts two installs made from this checkout's
wheels in venvs of its own (:mod:`_wheel_installs`): the core with one vendor
plugin (``pip install ezpz ezpz-xpu``) and the core with every plugin of this
repository; ``--in-venv`` counts the Python running it, as installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _util import CHILD_ENV, machine

#: Calls that look a path up (each a metadata-server round trip on Lustre/GPFS), and directory listings.
CALLS = ("stat", "lstat", "fstat", "newfstatat", "statx", "openat", "open", "access", "faccessat", "faccessat2",
         "readlink", "readlinkat", "getdents64", "getcwd", "mkdir", "rename", "unlink")
STEPS = {
    "torch": "import torch",
    "ezpz": "import torch; import ezpz; ezpz.hooks.setup()",
    "accelerate": "import torch; from accelerate import PartialState; PartialState()",
}


def count(code: str) -> dict[str, int]:
    """Per-call counts for ``python -c code`` and its children."""
    env = {k: v for k, v in CHILD_ENV.items() if not k.startswith(("SLURM_", "PBS_", "OMPI_", "PMI_", "PALS_"))}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)  # bytecode caches, index
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "strace.txt")
        subprocess.run(["strace", "-f", "-c", "-e", "trace=" + ",".join(CALLS), "-o", str(out), sys.executable, "-c",
                        code], env=env, check=True, capture_output=True)
        rows = re.findall(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", out.read_text(), re.M)
    return {name: int(calls) for calls, name in rows if name != "total"}


def main() -> None:
    if shutil.which("strace") is None:
        print("bench_syscalls: strace not installed (apt-get install -y strace); skipped")
        return
    print(f"machine: {machine()}")
    try:
        import accelerate  # noqa: F401
    except ImportError:
        print("bench_syscalls: accelerate not installed (pip install -c constraints.txt accelerate); skipped")
        return
    counts = {label: count(code) for label, code in STEPS.items()}
    base = counts["torch"]
    added = {label: {c: n - base.get(c, 0) for c, n in counts[label].items()} for label in ("ezpz", "accelerate")}
    print("file-system metadata calls, one process each (strace -f -c), added to `import torch`")
    print(f"{'call':<12} {'torch':>8} {'+ezpz':>8} {'+accelerate':>12}")
    for c in sorted(set().union(*counts.values()), key=lambda c: -base.get(c, 0)):
        print(f"{c:<12} {base.get(c, 0):8d} {added['ezpz'].get(c, 0):8d} {added['accelerate'].get(c, 0):12d}")
    ez, acc = sum(added["ezpz"].values()), sum(added["accelerate"].values())
    print(f"{'total':<12} {sum(base.values()):8d} {ez:8d} {acc:12d}")
    print(f"import ezpz; setup() adds {ez} metadata calls vs accelerate PartialState() {acc}: "
          f"ratio {ez / acc:.3f}   target <= 1.05")


if __name__ == "__main__":
    if "--in-venv" in sys.argv:
        sys.exit(main())
    from _wheel_installs import rerun_in_each

    rerun_in_each("bench_syscalls.py")
