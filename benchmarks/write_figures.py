"""Run benchmarks and write their output into docs/performance.md's generated figures section.

    python benchmarks/write_figures.py [bench_x.py ...]   (default: every benchmark in ORDER)

Each benchmark's block is replaced on its own (between ``<!-- bench_x.py -->``
markers), labelled with the machine (CPU model and cores from /proc/cpuinfo),
the load average before and after, and the date, so a partial run keeps the
other blocks and says when each was measured.
"""

from __future__ import annotations

import datetime
import platform
import re
import subprocess
import sys
from pathlib import Path

from _util import CHILD_ENV, machine

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "performance.md"
ORDER = ("bench_cold_start.py", "bench_discovery.py", "bench_syscalls.py", "bench_torchrun_setup.py",
         "bench_import.py", "bench_setup.py", "bench_hook_deadline.py", "bench_train_step.py", "bench_shard_step.py",
         "bench_threads.py",
         "bench_scale.py", "bench_compile.py")
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
HEADER = """## Figures (generated)

Written by `bash benchmarks/run_all.sh` (or `python benchmarks/write_figures.py bench_x.py ...` for some):
each block is one benchmark's output, verbatim, with the machine it ran on. The development machine is
shared by several engineers' test runs, so absolute times swing between minutes; every figure is a
ratio against a baseline measured in the same run (paired, alternating runs), and the load average is
printed before and after.
"""


def block(name: str, out: str, before: str, after: str) -> str:
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return (f"<!-- {name} -->\n### `{name}`\n\n{when}; {before} (after: {after.split('load average ')[-1]}); "
            f"Python {platform.python_version()}\n\n```text\n{out.rstrip()}\n```\n<!-- /{name} -->\n")


def main(names: list[str]) -> None:
    text = DOC.read_text()
    if BEGIN not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{HEADER}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    section, tail = rest.split(END, 1)
    for name in names or list(ORDER):
        before = machine()
        proc = subprocess.run([sys.executable, name], cwd=HERE, env=CHILD_ENV, capture_output=True, text=True)
        out = proc.stdout + (f"\n[exit {proc.returncode}]\n{proc.stderr[-2000:]}" if proc.returncode else "")
        print(f"== {name}\n{out}", flush=True)
        new = block(name, out, before, machine())
        pattern = re.compile(rf"<!-- {re.escape(name)} -->.*?<!-- /{re.escape(name)} -->\n", re.S)
        section = pattern.sub(lambda _: new, section) if pattern.search(section) else section.rstrip() + "\n\n" + new
        DOC.write_text(head + BEGIN + section + END + tail)  # after each benchmark: a cut-off run keeps what it had


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
