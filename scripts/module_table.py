"""The module table and the kernel/fronts line counts of docs/architecture.md, generated from the code.

    python scripts/module_table.py           # print the tables
    python scripts/module_table.py --write   # replace the tables between the markers in docs/architecture.md
    python scripts/module_table.py --check   # exit 1 when the doc's tables differ from the code

tests/test_architecture_doc.py runs the check, so a module added, moved or
re-described without the doc following fails the tests. The line counts are
written rounded to 100 and checked within 10% (a change of a few lines needs no
rewrite; a layer that grew or shrank by a tenth does).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ezpz_core" / "ezpz"
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- module-table:start (scripts/module_table.py --write) -->", "<!-- module-table:end -->"
LAYERS_START, LAYERS_END = "<!-- layer-lines:start (scripts/module_table.py --write) -->", "<!-- layer-lines:end -->"

#: The kernel: what ``import ezpz; ezpz.hooks.setup()`` needs. The same list is the source side of the
#: "Kernel and fronts" import-linter contract in pyproject.toml (tests/test_kernel_fronts.py checks both).
KERNEL = ("hooks.py", "hookspecs.py", "plugin_host", "facts.py", "policies.py", "decisions.py", "startup", "runtime",
          "probes", "primitives", "inputs", "builtin", "plugin_kit", "checkpoints", "sharding", "steps", "failures",
          "launch_env", "compiling.py", "cuda_answers.py", "errors.py")
#: The fronts: built on the kernel, never imported by it (the forbidden side of the same contract).
FRONTS = ("launch_drivers", "staging", "testing", "original", "cli", "porting", "cuda_compat", "examples", "integrations",
          "distributed.py", "launch.py", "log.py", "pbs.py", "slurm.py", "__main__.py")
#: The root package: the public facade, which imports the kernel's ezpz.hooks (and the original's names lazily).
FACADE = ("__init__.py",)
TOLERANCE = 0.10


def summary(path: Path) -> str:
    """The first line of the module's docstring; a module without one is an error (every module says what it does)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not doc:
        raise SystemExit(f"{path.relative_to(ROOT)} has no module docstring; say in one line what it does")
    return doc.strip().splitlines()[0].replace("|", "\\|")


def rows() -> list[tuple[str, str]]:
    """``(path under ezpz/, summary)``: a package as ``name/`` (its ``__init__``), then its modules, sorted."""
    out: list[tuple[str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py"), key=lambda p: (p.parent.relative_to(PACKAGE).parts, p.name != "__init__.py", p.name)):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py" and rel.parent == Path("."):
            name = "__init__.py"
        elif rel.name == "__init__.py":
            name = f"{rel.parent.as_posix()}/"
        else:
            name = rel.as_posix()
        if rel.name == "__init__.py" and path.stat().st_size == 0:
            continue
        out.append((name, summary(path)))
    return out


def table() -> str:
    lines = ["| module | what it does |", "|---|---|"]
    lines += [f"| `{name}` | {text} |" for name, text in rows()]
    return "\n".join(lines)


def lines_of(entry: str) -> int:
    """Lines of Python in one top-level module or package of ezpz/ (every line, as ``wc -l`` counts)."""
    path = PACKAGE / entry
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    return sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)


def layer_lines() -> dict[str, int]:
    """``{"kernel": n, "fronts": n, "facade": n}``: lines of Python per layer."""
    return {name: sum(lines_of(e) for e in entries)
            for name, entries in (("kernel", KERNEL), ("fronts", FRONTS), ("facade", FACADE))}


def _rounded(n: int) -> str:
    return f"{round(n, -2):,}"


def layer_table() -> str:
    """One row per layer: what it holds and its lines (rounded to 100)."""
    counts = layer_lines()
    lines = ["| layer | modules and packages under `ezpz_core/ezpz/` | lines of Python |", "|---|---|---|"]
    for name, entries in (("kernel", KERNEL), ("fronts", FRONTS), ("facade", FACADE)):
        listed = ", ".join(f"`{e}`" if e.endswith(".py") else f"`{e}/`" for e in entries)
        lines.append(f"| {name} | {listed} | {_rounded(counts[name])} |")
    return "\n".join(lines)


def doc_layer_lines(doc: str) -> dict[str, int]:
    """The line counts the doc states, per layer."""
    body = _between(doc, LAYERS_START, LAYERS_END)
    found: dict[str, int] = {}
    for row in body.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in ("kernel", "fronts", "facade"):
            found[cells[0]] = int(cells[2].replace(",", ""))
    return found


def layers_hold(doc: str) -> list[str]:
    """What is untrue in the doc's layer table: a layer missing, listed differently, or off by more than 10%."""
    problems: list[str] = []
    stated, counts = doc_layer_lines(doc), layer_lines()
    for name, n in counts.items():
        if name not in stated:
            problems.append(f"the {name} row is missing")
        elif abs(stated[name] - n) > max(100, TOLERANCE * n):
            problems.append(f"{name}: the doc says {stated[name]:,} lines, the code has {n:,}")
    expected = [row.rsplit("|", 2)[0] for row in layer_table().splitlines()]
    written = [row.rsplit("|", 2)[0] for row in _between(doc, LAYERS_START, LAYERS_END).strip().splitlines()]
    if expected != written:
        problems.append("the layers list other modules than scripts/module_table.py's KERNEL, FRONTS and FACADE")
    return problems


def _between(doc: str, start: str, end: str) -> str:
    if start not in doc or end not in doc:
        raise SystemExit(f"{DOC.relative_to(ROOT)} lacks the markers {start!r} and {end!r}")
    return doc.split(start, 1)[1].split(end, 1)[0]


def _replace(doc: str, start: str, end: str, body: str) -> str:
    _between(doc, start, end)
    head, rest = doc.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}\n{end}{tail}"


def with_table(doc: str) -> str:
    return _replace(doc, START, END, table())


def with_layers(doc: str) -> str:
    return _replace(doc, LAYERS_START, LAYERS_END, layer_table())


def main(argv: list[str]) -> int:
    if "--write" in argv:
        DOC.write_text(with_layers(with_table(DOC.read_text(encoding="utf-8"))), encoding="utf-8")
        return 0
    if "--check" in argv:
        current = DOC.read_text(encoding="utf-8")
        problems = layers_hold(current)
        if with_table(current) != current:
            problems.insert(0, "the module table differs from the code")
        for problem in problems:
            sys.stderr.write(f"docs/architecture.md: {problem}: run python scripts/module_table.py --write\n")
        return 1 if problems else 0
    sys.stdout.write(table() + "\n\n" + layer_table() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
