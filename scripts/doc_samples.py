"""Produce the sample outputs in docs/index.md, getting-started.md and portable-script.md from real runs here.

    python scripts/doc_samples.py            # run every sample, rewrite the marked blocks in the docs
    python scripts/doc_samples.py --check    # run them and exit 1 if a block's shape no longer matches

A sample block in a page sits between ``<!-- sample: NAME -->`` and ``<!-- /sample -->``; the line between
``<!-- samples-machine -->`` and ``<!-- /samples-machine -->`` says which machine produced them.
``tests/test_doc_samples.py`` runs the same commands and compares each block's *shape* (numbers, paths,
column widths and what the CPU and the torch build show through masked, see :func:`shape`) with what the code
prints now.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PY = sys.executable
TRAIN = ["-m", "ezpz.examples.train", "--steps", "5", "--log-every", "5"]


def clean_env(threads: bool = True, **extra: str) -> dict[str, str]:
    """This environment without anything that changes what ezpz decides (launcher, EZPZ_*, torch variables).

    ``threads``: set OMP_NUM_THREADS=1 (torchrun does anyway; one thread keeps a shared CPU responsive).
    """
    from ezpz.cli._util import relevant_env

    drop = set(relevant_env(os.environ)) | {"OMP_NUM_THREADS"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if threads:
        env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def _run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env or clean_env(), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _ezpz_lines(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if ln.startswith("[ezpz]"))


def _seen(proc: subprocess.CompletedProcess, stdout: str | None = None) -> str:
    """What a terminal shows: stderr (printed first by these commands), then stdout (or the part of it given)."""
    out = proc.stdout if stdout is None else stdout
    return "\n".join(part.strip("\n") for part in (proc.stderr, out) if part.strip())


def _section(text: str, start: str, stop: Callable[[str], bool]) -> list[str]:
    """Lines from the first one starting with ``start`` up to (not including) the first ``stop`` line."""
    lines = text.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith(start))
    out = [lines[i]]
    for ln in lines[i + 1:]:
        if stop(ln):
            break
        out.append(ln)
    return out


def _topic(trace: str, topic: str, indent: str = "") -> list[str]:
    """One decision of an explain trace: its line and the deeper-indented lines under it."""
    return _section(trace, f"{indent}{topic}:", lambda ln: not ln.startswith(indent + " ") or not ln.strip())


# -- the samples: NAME -> () -> (command shown, output) ------------------------------------------------------------

def train_one() -> tuple[str, str]:
    proc = _run([PY, *TRAIN])
    return "python " + " ".join(TRAIN), _seen(proc, _ezpz_lines(proc.stdout))


def train_torchrun() -> tuple[str, str]:
    args = ["--standalone", "--nproc-per-node", "2", *TRAIN]
    proc = _run([PY, "-m", "torch.distributed.run", *args])
    return "torchrun " + " ".join(args), _seen(proc, _ezpz_lines(proc.stdout))


def _mpiexec_flags() -> list[str]:
    return ["--allow-run-as-root", "--oversubscribe"] if os.geteuid() == 0 else ["--oversubscribe"]


_MPI_CACHE: dict[str, subprocess.CompletedProcess] = {}


def _mpiexec_run() -> subprocess.CompletedProcess:
    if "proc" not in _MPI_CACHE:
        argv = [shutil.which("mpiexec") or "mpiexec", *_mpiexec_flags(), "-n", "2", PY, *TRAIN, "--explain"]
        _MPI_CACHE["proc"] = _run(argv)
    return _MPI_CACHE["proc"]


def train_mpiexec() -> tuple[str, str]:
    cmd = "mpiexec " + " ".join(_mpiexec_flags()) + " -n 2 python " + " ".join(TRAIN) + " --explain"
    proc = _mpiexec_run()
    return cmd, _seen(proc, _ezpz_lines(proc.stdout))


def explain_mpiexec() -> tuple[str, str]:
    lines = [ln for ln in _mpiexec_run().stdout.splitlines() if not ln.startswith("[ezpz]") and ln.strip()]
    return "", "\n".join(lines)


def launch_dry_run() -> tuple[str, str]:
    args = ["launch", "--dry-run", "-n", "2", "--", "python", "-m", "ezpz.examples.train", "--steps", "5"]
    proc = _run([PY, "-m", "ezpz", *args])
    return "ezpz " + " ".join(args), _seen(proc)


_DOCTOR_CACHE: dict[str, str] = {}


def _doctor() -> str:
    if "out" not in _DOCTOR_CACHE:
        _DOCTOR_CACHE["out"] = _run([PY, "-m", "ezpz", "doctor"], env=clean_env(threads=False)).stdout
    return _DOCTOR_CACHE["out"]


def doctor() -> tuple[str, str]:
    text = _doctor()
    blank = lambda ln: not ln.strip()  # noqa: E731
    plugins = _section(text, "plugins", blank)
    builtins = [ln for ln in plugins[1:] if " ezpz " in ln]  # the core's own; vendor plugins vary by install
    versions = _section(text, "versions", blank)
    tail = text[text.index("ezpz launch here would use"):].splitlines()
    out = [*text.splitlines()[:3], "", plugins[0], *builtins, "  ...", "", *versions[:3], "  ...", "",
           "setup() here would decide", *_topic(text, "torch", "  ")[:1], "  ...", "", *tail]
    return "ezpz doctor", "\n".join(out)


def doctor_device_precision() -> tuple[str, str]:
    text = _doctor()
    return "", "\n".join([*_topic(text, "device", "  "), *_topic(text, "precision", "  ")[:2]])


def bad_override() -> tuple[str, str]:
    proc = _run([PY, "-c", "import ezpz; ezpz.hooks.setup()"], env=clean_env(EZPZ_PRECISION="fp8"))
    return "", proc.stderr.strip().splitlines()[-1]


def smoke_test() -> tuple[str, str]:
    proc = _run([PY, "-m", "ezpz", "test", "--steps", "5"])
    return "ezpz test --steps 5", _seen(proc)


def cpu_without_bf16() -> tuple[str, str]:
    """Not a run: what the same policy decides from a recorded AVX2-only EPYC's /proc/cpuinfo."""
    sys.path.insert(0, str(ROOT / "tests"))
    import tempfile

    from cpu_recorded import BY_NAME

    from ezpz.builtin.cpu import cpu_precision_options, probe_cpu
    from ezpz.policies import choose_precision

    record = BY_NAME["epyc-7763-avx2"]
    with tempfile.TemporaryDirectory() as tmp:
        facts = probe_cpu(str(record.write(Path(tmp))), machine=record.machine)
    amp = choose_precision(cpu_precision_options(facts), requested="auto", device=f"cpu ({facts.model})")
    autocast = "on" if amp.autocast else "off"
    return "", f"precision {amp.dtype} (autocast {autocast}): {amp.reason}"


def portable_torchrun() -> tuple[str, str]:
    """The last lines of docs/portable-script.md's script under torchrun, the script taken from that page."""
    import tempfile

    text = (DOCS / "portable-script.md").read_text()
    code = re.search(r"```python[^\n]*\n(.*?)\n```", text[text.index("## The whole script"):], re.S)[1]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "portable_train.py").write_text(code + "\n")
        proc = subprocess.run([PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                               "portable_train.py", "--steps", "20"], cwd=tmp, env=clean_env(),
                              capture_output=True, text=True, timeout=300)
    return "", "\n".join(proc.stdout.strip().splitlines()[-2:])


SAMPLES: dict[str, tuple[str, Callable[[], tuple[str, str]]]] = {
    # name: (page, producer)
    "index-doctor": ("index.md", doctor_device_precision),
    "index-bad-override": ("index.md", bad_override),
    "train-one": ("getting-started.md", train_one),
    "cpu-without-bf16": ("getting-started.md", cpu_without_bf16),
    "train-torchrun": ("getting-started.md", train_torchrun),
    "train-mpiexec": ("getting-started.md", train_mpiexec),
    "launch-dry-run": ("getting-started.md", launch_dry_run),
    "explain-mpiexec": ("getting-started.md", explain_mpiexec),
    "doctor": ("getting-started.md", doctor),
    "smoke-test": ("getting-started.md", smoke_test),
    "portable-torchrun": ("portable-script.md", portable_torchrun),
}


def render(name: str) -> str:
    """A sample's block body: ``$ command`` then the output (output only where no command is shown)."""
    cmd, out = SAMPLES[name][1]()
    return (f"$ {cmd}\n{out}" if cmd else out).rstrip("\n")


# -- shape: what must stay the same whatever machine runs it --------------------------------------------------------

_PRECISION_LINE = re.compile(r"\bprecision\b[: ]")
#: A device plugin's rejection in a trace, ``not cuda [cuda]: nvidia: <why>``: why depends on the torch build
#: ("torch built without CUDA" on a CPU build, "0 CUDA devices visible" on a CUDA build without a GPU).
_REJECTION = re.compile(r"^(\s*not \S+ \[[\w.-]+\]: [\w-]+:) .*")
#: What the torch build was built with, as ``torch ...  cuda=None hip=None xpu=False backends=gloo`` shows it.
_BUILD_FIELD = re.compile(r"\b(cuda|hip|xpu|xpu_built|mps|backends)=\S+")


def shape(text: str) -> list[str]:
    """The text with numbers, paths, spacing and what the machine shows through masked.

    Masked as machine-dependent: the CPU's name and bf16 flags, the CPU-dependent precision choice, where the
    Python environment lives (doctor's line from the mount table), the torch
    build's local version label (``+cpu``, ``+cu132``) and what it was built with (``cuda=``, ``backends=``, ...),
    and each device plugin's reason for not offering its device (which names the build). Kept: every line, its
    order and its words otherwise, so a renamed section, a new or missing line or a reworded decision still fails.
    """
    out: list[str] = []
    skip_indent: int | None = None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if line.strip() and indent > skip_indent:
                continue  # the lines under a precision decision depend on the CPU
            skip_indent = None
        if _PRECISION_LINE.search(line):
            line = line[:_PRECISION_LINE.search(line).start()] + "precision <depends on the CPU>"
            if line.strip().startswith("precision"):
                skip_indent = indent
        line = re.sub(r"^(\s*(names|bf16_flags): ).*", r"\1<the CPU's>", line)
        line = re.sub(r"^(\s*)(staged|shared|node-local|unknown): .*", r"\1<where the environment lives: this "
                      r"machine's mounts>", line)  # ezpz doctor's python environment line
        line = _REJECTION.sub(r"\1 <why not, from this torch build and machine>", line)
        line = _BUILD_FIELD.sub(r"\1=<the build's>", line)
        line = re.sub(r"(?<=\d)\+[\w.]+", "", line)  # a local version label: torch 2.13.0+cpu, 2.15.0+cu132
        line = re.sub(r"(?<![\w.])/[^\s)]+", "<path>", line)
        line = re.sub(r"\b(bf16|fp16|fp32)\b", "<dtype>", line)  # e.g. "on cpu (gloo, bf16)": the CPU decides
        line = re.sub(r"\d+(\.\d+)?", "<n>", line)
        line = re.sub(r"[ \t]+", " ", line).rstrip()
        out.append(line)
    return out


# -- the docs -------------------------------------------------------------------------------------------------------

_BLOCK = re.compile(r"(<!-- sample: (?P<name>[\w-]+) -->\n```(?P<lang>\w*)\n)(?P<body>.*?)(\n```\n<!-- /sample -->)", re.S)
_MACHINE = re.compile(r"(<!-- samples-machine -->\n)(.*?)(\n<!-- /samples-machine -->)", re.S)


def blocks(page: str) -> dict[str, str]:
    return {m["name"]: m["body"] for m in _BLOCK.finditer((DOCS / page).read_text())}


def machine_label() -> str:
    import torch

    from ezpz.builtin.cpu import BF16_FLAGS, probe_cpu
    from ezpz.probes.cpu import physical_cores

    facts = probe_cpu()
    bf16 = ", ".join(f for f in BF16_FLAGS if f in facts.flags) or "no native bf16"
    return (f"Sample outputs on this page were produced by `python scripts/doc_samples.py` on {facts.model} "
            f"({physical_cores()} cores, {facts.machine}, {bf16}), CPU only, torch {torch.__version__}, "
            f"Python {platform.python_version()}, as {'root' if os.geteuid() == 0 else 'a user'}.")


def write() -> None:
    rendered = {name: render(name) for name in SAMPLES}
    label = machine_label()
    for page in sorted({p for p, _ in SAMPLES.values()}):
        path = DOCS / page
        text = path.read_text()
        missing = {n for n, (p, _) in SAMPLES.items() if p == page} - set(blocks(page))
        if missing:
            raise SystemExit(f"{path}: no <!-- sample: NAME --> block for {sorted(missing)}")
        text = _BLOCK.sub(lambda m: m[1] + rendered[m["name"]] + m[5], text)
        text = _MACHINE.sub(lambda m: m[1] + label + m[3], text)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")


def check() -> int:
    bad = 0
    for name, (page, _) in SAMPLES.items():
        doc = blocks(page).get(name)
        now = render(name)
        if doc is None or shape(doc) != shape(now):
            bad += 1
            print(f"{page} sample {name!r} no longer matches what the code prints:\n--- docs\n{doc}\n--- now\n{now}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(check() if "--check" in sys.argv[1:] else write())
